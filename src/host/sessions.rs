//! The session list: `listSessions` paging, `createSession` (a new session showing the host's
//! customizations) and `disposeSession`, each announced on the root channel; which sessions
//! and default chats there are, for the edge resolving VS Code's names of them.

use ahp_types::commands::{CreateSessionParams, ListSessionsResult};
use ahp_types::notifications::{SessionAddedParams, SessionRemovedParams};
use ahp_types::state::Customization;
use ahp_types::ROOT_RESOURCE_URI;

use super::fanout::ConnId;
use super::{bounds, Core, Host};
use crate::jsonrpc::{self, ahp_codes, RpcError};

impl Host {
    /// Handle `listSessions` from connection `id`: most recently modified first, paged by
    /// an opaque offset cursor, each entry as the connection is shown it.
    pub fn list_sessions(
        &self,
        id: ConnId,
        limit: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<ListSessionsResult, RpcError> {
        let (all, audience) = {
            let core = self.core();
            (core.store.summaries(), core.fanout.audience(id))
        };
        let start = match cursor {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix("offset:")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= all.len())
                .ok_or_else(|| RpcError::invalid_params(format!("unknown cursor {cursor:?}")))?,
        };
        let limit = match limit {
            None => usize::MAX,
            Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
            Some(n) => {
                return Err(RpcError::invalid_params(format!(
                    "limit {n} must be at least 1"
                )))
            }
        };
        let end = start.saturating_add(limit).min(all.len());
        Ok(ListSessionsResult {
            next_cursor: (end < all.len()).then(|| format!("offset:{end}")),
            items: all[start..end]
                .iter()
                .map(|summary| audience.summary(summary.clone()))
                .collect(),
        })
    }

    /// Handle `createSession` from `client_id`: a new ready session showing the host's
    /// customizations; announces it with `root/activeSessionsChanged` and `root/sessionAdded`.
    pub fn create_session(
        &self,
        id: ConnId,
        request_id: u64,
        client_id: &str,
        params: CreateSessionParams,
    ) -> Result<(), RpcError> {
        bounds::new_session(&params).map_err(RpcError::invalid_params)?;
        let uri = params.channel.clone();
        if !is_session_uri(&uri) {
            return Err(RpcError::invalid_params(format!(
                "{uri:?} is not a usable session URI: expected scheme:path, e.g. {}:/my-session",
                self.provider()
            )));
        }
        let mut core = self.core();
        let core = &mut *core;
        core.check_new_session(&uri, client_id, &params)?;
        if core.store.session_count() >= self.max_sessions {
            return Err(RpcError::new(
                jsonrpc::codes::INTERNAL_ERROR,
                format!(
                    "this host keeps at most {} sessions (limits.max_sessions); dispose one first",
                    self.max_sessions
                ),
            ));
        }
        let customizations = core.customizations_for(&uri);
        if let Some(active) = &params.active_client {
            super::admission::client_tools(&active.tools).map_err(RpcError::invalid_params)?;
            let session = super::plugin_ids::Session {
                uri: &uri,
                chats: &[],
                shown: &customizations,
            };
            super::plugin_ids::client_plugins(
                &session,
                std::iter::empty(),
                client_id,
                active.customizations.as_deref().unwrap_or(&[]),
            )
            .map_err(|refusal| RpcError::invalid_params(refusal.to_string()))?;
        }
        let publishes = params
            .active_client
            .as_ref()
            .is_some_and(|a| a.customizations.as_ref().is_some_and(|c| !c.is_empty()));
        let title = session_title(&params);
        let working_directories = params
            .working_directories
            .and_then(|dirs| dirs.into_iter().next())
            .map(|first| vec![first]);
        let commit = core
            .store
            .add_session(
                &uri,
                &title,
                working_directories,
                params.active_client,
                customizations,
            )
            .map_err(|e| RpcError::new(jsonrpc::codes::INTERNAL_ERROR, format!("{e:?}")))?;
        core.send(id, jsonrpc::success(request_id, &()));
        core.publish(commit);
        if publishes {
            core.refresh_client_plugins();
        }
        if let Some(summary) = core.store.summary(&uri) {
            core.broadcast_each(ROOT_RESOURCE_URI, move |audience, _| {
                let added = SessionAddedParams {
                    channel: ROOT_RESOURCE_URI.to_string(),
                    summary: audience.summary(summary.clone()),
                };
                Some(jsonrpc::notification("root/sessionAdded", &added))
            });
        }
        Ok(())
    }

    /// Handle `disposeSession`: drop its state and subscriptions, announce the removal.
    /// The default session is refused (`-32602`): it holds the harness's chat, and new
    /// clients expect to find it.
    pub fn dispose_session(&self, id: ConnId, request_id: u64, uri: &str) -> Result<(), RpcError> {
        let mut core = self.core();
        let core = &mut *core;
        if uri == core.default_session {
            return Err(RpcError::invalid_params(format!(
                "{uri} is the host's default session (it shows the harness's tool calls) and cannot be disposed"
            )));
        }
        let (commit, chats) = core
            .store
            .remove_session(uri)
            .ok_or_else(|| session_not_found(uri))?;
        core.fanout.forget_channel(uri);
        for chat in &chats {
            core.fanout.forget_channel(chat);
        }
        core.send(id, jsonrpc::success(request_id, &()));
        core.publish(commit);
        core.refresh_client_plugins();
        let removed = SessionRemovedParams {
            channel: ROOT_RESOURCE_URI.to_string(),
            session: uri.to_string(),
        };
        let frame = jsonrpc::notification("root/sessionRemoved", &removed);
        core.broadcast_each(ROOT_RESOURCE_URI, move |_, _| Some(frame.clone()));
        Ok(())
    }
}

/// What the connection's edge asks to resolve the names VS Code gives sessions and chats.
impl Host {
    /// The agent provider id every session carries.
    pub fn provider(&self) -> String {
        self.core().store.provider().to_string()
    }

    /// Whether `uri` is one of the host's sessions.
    pub fn is_session(&self, uri: &str) -> bool {
        self.core().store.session(uri).is_some()
    }

    /// The default chat of session `session`, if it has one.
    pub fn default_chat(&self, session: &str) -> Option<String> {
        self.core().store.session(session)?.default_chat.clone()
    }

    /// The session that owns chat `chat`.
    pub fn session_of_chat(&self, chat: &str) -> Option<String> {
        self.core().store.chat_session(chat).map(str::to_string)
    }
}

impl Core {
    /// Why session `uri` cannot be created by `client_id` with `params`, if it cannot.
    fn check_new_session(
        &self,
        uri: &str,
        client_id: &str,
        params: &CreateSessionParams,
    ) -> Result<(), RpcError> {
        if let Some(provider) = &params.provider {
            if provider != self.store.provider() {
                return Err(RpcError::new(
                    ahp_codes::PROVIDER_NOT_FOUND,
                    format!(
                        "unknown provider {provider:?}: this host serves {:?}",
                        self.store.provider()
                    ),
                ));
            }
        }
        if let Some(active) = &params.active_client {
            if active.client_id != client_id {
                return Err(RpcError::invalid_params(format!(
                    "activeClient.clientId {:?} is not the caller's clientId {client_id:?}",
                    active.client_id
                )));
            }
        }
        if self.store.has_channel(uri) {
            return Err(RpcError::new(
                ahp_codes::SESSION_ALREADY_EXISTS,
                format!("session {uri:?} already exists"),
            ));
        }
        Ok(())
    }

    /// What new session `uri` shows: the host's one customization tree, copied from any
    /// session (without the plugins that session's clients published), with the live facts
    /// laid over it for `uri` (channels are per session).
    fn customizations_for(&self, uri: &str) -> Vec<Customization> {
        self.store
            .session_uris()
            .next()
            .and_then(|existing| self.store.session(existing))
            .and_then(|s| s.customizations.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|c| !matches!(c, Customization::Plugin(p) if p.client_id.is_some()))
            .map(|mut c| {
                self.live.patch(uri, &mut c);
                c
            })
            .collect()
    }
}

/// A new session's title: `config.title` when given, else "Session".
fn session_title(params: &CreateSessionParams) -> String {
    params
        .config
        .as_ref()
        .and_then(|c| c.get("title"))
        .and_then(|t| t.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| "Session".to_string())
}

/// Whether `uri` can name a new session: `scheme:rest`, not the root and not an `mcp:` channel.
fn is_session_uri(uri: &str) -> bool {
    match uri.split_once(':') {
        Some((scheme, rest)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && !rest.is_empty()
                && uri != ROOT_RESOURCE_URI
                && !uri.starts_with("mcp:")
        }
        None => false,
    }
}

pub(super) fn session_not_found(uri: &str) -> RpcError {
    RpcError::new(ahp_codes::SESSION_NOT_FOUND, format!("no session {uri:?}"))
}
