//! Authorization: `authenticate` hands tokens to the servers that ask for a resource (and
//! remembers which hold one), and harness calls paused for it are held, released or given up.

use std::collections::HashSet;
use std::time::Duration;

use ahp_types::commands::AuthenticateParams;
use ahp_types::errors::AuthRequiredErrorData;
use ahp_types::state::{McpAuthRequirement, McpServerState};
use tokio::time::Instant;

use super::token_trials::Verdict;
use super::{live, Core, Host};
use crate::jsonrpc::{self, ahp_codes, RpcError};
use crate::supervisor::{Bearer, Request, Status};

impl Host {
    /// Tool calls (chat, tool call id) clients give up on from now on.
    pub fn given_up(&self) -> tokio::sync::broadcast::Receiver<(String, String)> {
        self.core().paused.subscribe()
    }

    /// Tool call `call` of `chat` waits for authorization: clients may give up on it.
    pub fn hold_paused(&self, chat: &str, call: &str) {
        self.core().paused.hold(chat, call);
    }

    /// Tool call `call` of `chat` stops waiting. `false` when a client gave up on it first.
    pub fn release_paused(&self, chat: &str, call: &str) -> bool {
        self.core().paused.release(chat, call)
    }

    /// Handle `authenticate`: the token goes to every server that asked for this resource
    /// (or holds a token for it), which reconnects with it; an empty token revokes. Tokens
    /// stay in memory, in the supervisor only; they never enter state or logs. `waiting`
    /// are the servers the supervisor has just seen refuse, with the status they went down
    /// with (their state may be a moment away). A token (not a revocation) is answered
    /// once the servers tried it: [`TokenTried::answer`].
    pub fn authenticate(
        &self,
        params: AuthenticateParams,
        waiting: Vec<(String, Status)>,
    ) -> Result<Option<TokenTried>, RpcError> {
        let mut core = self.core();
        let core = &mut *core;
        let (ids, asking) = core.asking_for(&params.resource, waiting);
        if ids.is_empty() {
            return Err(RpcError::invalid_params(format!(
                "unknown resource {:?}: no MCP server asked for it",
                params.resource
            )));
        }
        let expires_at = expiry(params.expires_in)?;
        if let (Some(granted), false) = (&params.scopes, params.token.is_empty()) {
            cover_scopes(granted, &asking)?;
        }
        if core.control.is_none() {
            return Err(RpcError::new(
                jsonrpc::codes::INTERNAL_ERROR,
                "the host is shutting down",
            ));
        }
        let bearer = (!params.token.is_empty()).then_some(Bearer {
            token: params.token,
            expires_at,
        });
        if bearer.is_some() {
            core.authenticated
                .insert(params.resource.clone(), ids.clone());
        } else {
            core.authenticated.remove(&params.resource);
        }
        // Servers that run (or wait to) reconnect with the token; a stopped one tries it
        // when it starts, and one that is gone never does.
        let trying: Vec<String> = ids
            .iter()
            .filter(|id| {
                core.live
                    .state(id)
                    .is_some_and(|state| !matches!(state, McpServerState::Stopped(_)))
            })
            .cloned()
            .collect();
        for id in ids {
            tracing::info!(server = %id, revoked = bearer.is_none(), "token received for an MCP server");
            core.ask(Request::Authenticate {
                id,
                bearer: bearer.clone(),
            });
        }
        Ok(bearer.map(|_| TokenTried {
            verdict: core.token_trials.begin(trying),
            within: self.token_trial_time,
        }))
    }
}

/// An `authenticate` whose token the servers are trying.
pub struct TokenTried {
    verdict: tokio::sync::oneshot::Receiver<Verdict>,
    within: Duration,
}

impl TokenTried {
    /// `authenticate`'s answer: `-32007` when a server refused the token (with the
    /// resource it asks a token for), else success; success too when the servers are still
    /// trying after the start timeout (the token stays with them).
    pub async fn answer(self) -> Result<(), RpcError> {
        let Ok(Ok(Verdict::Refused(status))) =
            tokio::time::timeout(self.within, self.verdict).await
        else {
            return Ok(());
        };
        let McpServerState::AuthRequired(auth) = live::server_state(&status) else {
            return Ok(());
        };
        let data = AuthRequiredErrorData {
            resources: vec![auth.resource.clone()],
        };
        Err(RpcError {
            code: ahp_codes::AUTH_REQUIRED,
            message: "the server refused this token: authenticate again with a valid one".into(),
            data: serde_json::to_value(data).ok(),
        })
    }
}

impl Core {
    /// Who a token for `resource` goes to: the servers holding one for it, servers showing
    /// `authRequired` for it in some session, and servers the supervisor has just seen refuse
    /// (`waiting`); with what the newly asking ones require.
    fn asking_for(
        &self,
        resource: &str,
        waiting: Vec<(String, Status)>,
    ) -> (HashSet<String>, Vec<McpAuthRequirement>) {
        let mut asking = Vec::new();
        let mut ids: HashSet<String> = self
            .authenticated
            .get(resource)
            .cloned()
            .unwrap_or_default();
        for session in self.store.session_uris() {
            let Some(state) = self.store.session(session) else {
                continue;
            };
            for c in state.customizations.iter().flatten() {
                for m in live::servers(c) {
                    if let McpServerState::AuthRequired(auth) = &m.state {
                        if auth.resource.resource == resource && ids.insert(m.id.clone()) {
                            asking.extend(live::auth_requirement_of(auth));
                        }
                    }
                }
            }
        }
        for (id, status) in waiting {
            if let Some(auth) = live::auth_requirement(&status) {
                if auth.resource.resource == resource && ids.insert(id) {
                    asking.push(auth);
                }
            }
        }
        (ids, asking)
    }
}

/// When a token given for `expires_in` seconds expires (`None`: never).
fn expiry(expires_in: Option<i64>) -> Result<Option<Instant>, RpcError> {
    match expires_in {
        None => Ok(None),
        // A lifetime too long to represent is no lifetime at all.
        Some(seconds) if seconds >= 1 => Ok(u64::try_from(seconds)
            .ok()
            .and_then(|seconds| Instant::now().checked_add(Duration::from_secs(seconds)))),
        Some(seconds) => Err(RpcError::invalid_params(format!(
            "expiresIn must be a positive number of seconds, not {seconds}"
        ))),
    }
}

/// Granted scopes must cover what every asking server requires.
fn cover_scopes(granted: &[String], asking: &[McpAuthRequirement]) -> Result<(), RpcError> {
    let short: Vec<_> = asking
        .iter()
        .filter(|a| {
            a.required_scopes
                .iter()
                .flatten()
                .any(|s| !granted.contains(s))
        })
        .map(|a| a.resource.clone())
        .collect();
    if short.is_empty() {
        return Ok(());
    }
    let data = AuthRequiredErrorData { resources: short };
    Err(RpcError {
        code: ahp_codes::AUTH_REQUIRED,
        message: "the granted scopes do not cover the scopes the server requires".into(),
        data: serde_json::to_value(data).ok(),
    })
}

#[cfg(test)]
mod tests {
    use ahp_types::commands::DispatchActionParams;
    use serde_json::json;

    use super::super::fanout::ConnId;
    use super::super::HARNESS_CHAT_URI;
    use super::Host;
    use crate::mirror::{CallStart, Turns};

    fn give_up(host: &Host, conn: ConnId) {
        let action = serde_json::from_value(json!({"type": "chat/toolCallComplete",
            "turnId": crate::mirror::turn_id(1), "toolCallId": crate::mirror::call_id(1),
            "result": {"success": false, "pastTenseMessage": "Declined"}}))
        .unwrap();
        host.dispatch(
            conn,
            "c",
            DispatchActionParams {
                channel: HARNESS_CHAT_URI.into(),
                client_seq: 1,
                action,
            },
            &super::super::audience::Named::own(HARNESS_CHAT_URI),
        );
    }

    #[tokio::test]
    async fn a_token_is_answered_once_tried_and_at_once_when_no_server_can_try_it() {
        use crate::supervisor::{AuthReason, Served, ServerEvent, Status};
        use futures_util::FutureExt;
        let config =
            crate::config::Config::parse("", "proxy.toml", std::path::Path::new(".")).unwrap();
        let host = Host::new(&config);
        let (control, _requests) = tokio::sync::watch::channel(Default::default());
        host.set_control(control);
        let event = |status: Option<Status>| ServerEvent {
            id: "s".into(),
            status,
        };
        let asking = Status::AuthRequired {
            resource: "http://h/mcp".into(),
            challenge: None,
            reason: AuthReason::Required,
            metadata: None,
        };
        // The supervisor has just seen it refuse (no session shows a server "s").
        let waiting = vec![("s".to_string(), asking.clone())];
        let authenticate = |token: &str| {
            let params = serde_json::from_value(json!({"channel": "ahp-root://",
                "resource": "http://h/mcp", "token": token}))
            .unwrap();
            host.authenticate(params, waiting.clone())
                .expect("a server asks for it")
                .expect("a token, not a revocation")
        };
        host.server_event(event(Some(asking)));
        let tried = authenticate("t");
        host.server_event(event(Some(Status::Starting { slow: false })));
        host.server_event(event(Some(Status::Ready {
            tools: 0,
            served: Served::default(),
            icons: None,
        })));
        assert_eq!(tried.answer().now_or_never(), Some(Ok(())));
        // The server is gone; it still counts as holding a token for the resource, but no
        // reconnection will come: answered at once.
        host.server_event(event(None));
        let tried = authenticate("u");
        assert_eq!(tried.answer().now_or_never(), Some(Ok(())));
    }

    #[tokio::test]
    async fn a_give_up_counts_only_while_the_call_is_held_and_whoever_takes_it_first_wins() {
        let config =
            crate::config::Config::parse("", "proxy.toml", std::path::Path::new(".")).unwrap();
        let host = Host::new(&config);
        let conn = host.attach(true).id;
        let mut heard = host.given_up();
        // A mirrored call shown as waiting for authorization.
        let mut turns = Turns::new();
        let start = CallStart::example(1);
        for action in turns.start(start, 0, 0, "2026-01-01T00:00:00.000Z") {
            host.emit(HARNESS_CHAT_URI, action).unwrap();
        }
        let auth = serde_json::from_value(json!({"reason": "insufficientScope",
            "resource": {"resource": "http://h/mcp"}}))
        .unwrap();
        let (_, paused) = turns.auth_required(1, auth).unwrap();
        host.emit(HARNESS_CHAT_URI, paused).unwrap();

        // Shown paused but not held (the call already resumed): refused, nobody told.
        give_up(&host, conn);
        assert!(heard.try_recv().is_err());
        // Held, then released first (resumed): a later give-up is refused.
        host.hold_paused(HARNESS_CHAT_URI, &crate::mirror::call_id(1));
        assert!(host.release_paused(HARNESS_CHAT_URI, &crate::mirror::call_id(1)));
        give_up(&host, conn);
        assert!(heard.try_recv().is_err());
        // Held: the give-up is admitted, heard, and the call can no longer be released.
        host.hold_paused(HARNESS_CHAT_URI, &crate::mirror::call_id(1));
        give_up(&host, conn);
        assert_eq!(
            heard.try_recv().unwrap(),
            (HARNESS_CHAT_URI.to_string(), crate::mirror::call_id(1))
        );
        assert!(!host.release_paused(HARNESS_CHAT_URI, &crate::mirror::call_id(1)));
        // The call is over: giving up again is refused.
        give_up(&host, conn);
        assert!(heard.try_recv().is_err());
    }
}
