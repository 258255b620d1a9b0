//! What servers send on their own, to harnesses: a request (sampling, roots, elicitation, or
//! a method the proxy does not know) goes to the harness whose call caused it when that one
//! declared what it needs, else to another able harness that sees the server, else fails at
//! once; its answer goes back under the server's own id. Notifications go to the harnesses
//! they concern: logs by level, resource updates to subscribers, task status to the task's
//! creator, anything else to every harness that sees the server.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::answers::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT};
use super::harness_state::{Asker, HarnessState};
use super::hub::Hub;
use super::registry::{Level, Need, Scope};
use crate::mcp::message::{self, Message};
use crate::supervisor::connections::Downstream;
use crate::upstream::session::Session;

impl Downstream for Hub {
    fn notify(&self, server: &str, message: Message, origin: Option<u64>) {
        let method = message.method().unwrap_or_default().to_string();
        match method.as_str() {
            "notifications/message" => self.relay_log(server, message, origin),
            "notifications/resources/updated" => self.relay_update(server, message, origin),
            "notifications/cancelled" => {
                // The server gave up on a request it sent a harness: tell that harness.
                let Some(span) = message.find(&["requestId"]) else {
                    return;
                };
                let theirs = message.slice(span).to_string();
                for id in self.registry().harnesses_of(server) {
                    let Some(harness) = self.harness(id) else {
                        continue;
                    };
                    if let Some(ours) = harness.owed_to(server, &theirs) {
                        harness.take_owed(ours);
                        if let Some(span) = message.find(&["requestId"]) {
                            let text = message
                                .clone()
                                .rewrite(None, vec![(span, ours.to_string())])
                                .into_text();
                            harness.notify(text);
                        }
                    }
                }
            }
            "notifications/tasks/status" => {
                let task = message.string(&["taskId"]).unwrap_or_default().into_owned();
                if let Some(status) = message.string(&["status"]) {
                    self.task_status(server, &task, &status);
                }
                let owner = self.registry().task_owner(server, &task);
                let audience = match owner {
                    Some(owner) => vec![owner],
                    None => self.registry().harnesses_of(server),
                };
                self.deliver(&audience, message.text(), origin);
            }
            list if list.ends_with("/list_changed") => {
                // A per-server endpoint hears its server's own; the aggregated one hears the
                // proxy's, once the lists are re-read.
                let audience: Vec<u64> = self
                    .registry()
                    .harnesses_of(server)
                    .into_iter()
                    .filter(|id| {
                        self.harness(*id)
                            .is_some_and(|h| matches!(h.scope, Scope::Server(_)))
                    })
                    .collect();
                self.deliver(&audience, message.text(), None);
            }
            _ => {
                let audience = self.registry().harnesses_of(server);
                self.deliver(&audience, message.text(), origin);
            }
        }
    }

    fn request(&self, server: &str, session: &Session, message: Message, origin: Option<u64>) {
        let Some(theirs) = message.id().map(str::to_string) else {
            return;
        };
        let method = message.method().unwrap_or_default().to_string();
        let mode = message.string(&["mode"]).map(|m| m.into_owned());
        let need = Need::of(&method, mode.as_deref());
        let route = self.registry().route(server, origin, need);
        let refuse = |text: String| {
            let body = format!(
                r#""error":{{"code":{METHOD_NOT_FOUND},"message":{}}}"#,
                message::quote(&text)
            );
            let _ = session.answer(&theirs, &body);
        };
        let Some((harness_id, cause)) = route else {
            return refuse(format!(
                "no connected MCP client (harness) supports {method} ({} not declared or not reachable)",
                need.capability()
            ));
        };
        let Some(harness) = self.harness(harness_id) else {
            return refuse("the MCP client (harness) went away".to_string());
        };
        tracing::debug!(
            server,
            harness = harness_id,
            method,
            "server request routed to the harness"
        );
        let asker = Asker::Server {
            server: server.to_string(),
            session: session.downgrade(),
            id: theirs.clone(),
        };
        let Some(ours) = harness.ask(message, cause, asker) else {
            return refuse(
                "the MCP client (harness) has no open stream to receive requests".into(),
            );
        };
        // A harness that never answers: the server hears so when its own patience would.
        let timeout = self.settings.request_timeout;
        let weak = Arc::downgrade(&harness);
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let Some(harness) = weak.upgrade() else {
                return;
            };
            if let Some(owed) = harness.take_owed(ours) {
                harness.notify(crate::upstream::session::cancelled(ours, "timed out"));
                owed.refuse(
                    REQUEST_TIMEOUT,
                    &format!(
                        "the MCP client did not answer {method} within {} ms",
                        timeout.as_millis()
                    ),
                );
            }
        });
    }
}

/// `text` to `harness` (once its `initialize` is answered): with its request `origin`
/// when that is one of its requests still in flight, else on its general stream.
fn send_to(harness: &HarnessState, text: String, origin: Option<u64>) {
    if !harness.is_live() {
        return;
    }
    match origin.and_then(|tag| harness.stream_of(tag)) {
        Some(stream) => {
            stream.send(text);
        }
        None => harness.notify(text),
    }
}

impl Hub {
    /// `text` to each harness of `audience`: on the stream of its request `origin` when the
    /// server works on that one (the notification is about it, and travels before its
    /// answer), else on its general stream.
    fn deliver(&self, audience: &[u64], text: &str, origin: Option<u64>) {
        for id in audience {
            if let Some(harness) = self.harness(*id) {
                send_to(&harness, text.to_string(), origin);
            }
        }
    }

    /// A log message: to every harness that sees the server and asked for its level or
    /// lower, as the server wrote it.
    fn relay_log(&self, server: &str, message: Message, origin: Option<u64>) {
        let level = message.string(&["level"]).and_then(|l| Level::parse(&l));
        let audience = self.registry().log_audience(server, level);
        self.deliver(&audience, message.text(), origin);
    }

    /// A resource update: to the harnesses subscribed to it, under the URI each sees.
    fn relay_update(&self, server: &str, message: Message, origin: Option<u64>) {
        let uri = message.string(&["uri"]).unwrap_or_default().into_owned();
        let subscribers = self.registry().subscribers(server, &uri);
        if subscribers.is_empty() {
            return;
        }
        let exposed = self.namespace().expose_uri(server, &uri);
        for id in subscribers {
            let Some(harness) = self.harness(id) else {
                continue;
            };
            let text = match (&harness.scope, message.find(&["uri"])) {
                (Scope::All, Some(span)) if exposed != uri => message::splice(
                    message.text(),
                    &mut [(span, message::quote(&exposed).as_str())],
                ),
                _ => message.text().to_string(),
            };
            send_to(&harness, text, origin);
        }
    }

    /// `sampling/createMessage` from an MCP App of server `server` (over its `mcp://`
    /// channel), with `params` (raw): answered by a harness that declared sampling, like
    /// the server's own. The answer message, or a JSON-RPC error code and message.
    pub async fn sample_for_app(
        &self,
        server: &str,
        params: &str,
        cancelled: CancellationToken,
    ) -> Result<Message, (i64, String)> {
        let route = self.registry().route(server, None, Need::Sampling);
        let gone = || {
            (
                METHOD_NOT_FOUND,
                "no connected MCP client (harness) declared sampling".to_string(),
            )
        };
        tracing::debug!(server, ?route, "sampling for an MCP App");
        let (harness_id, _) = route.ok_or_else(gone)?;
        let harness = self.harness(harness_id).ok_or_else(gone)?;
        tracing::debug!(
            server,
            general = harness.has_general(),
            "sampling for an MCP App: harness found"
        );
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{params}}}"#
        );
        let request = Message::parse(text).map_err(|e| (INVALID_PARAMS, e.message))?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let ours = harness
            .ask(request, None, Asker::Local(tx))
            .ok_or_else(gone)?;
        let timeout = self.settings.request_timeout;
        tokio::select! {
            answer = tokio::time::timeout(timeout, rx) => match answer {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(_)) => Err(gone()),
                Err(_) => {
                    harness.take_owed(ours);
                    harness.notify(crate::upstream::session::cancelled(ours, "timed out"));
                    Err((REQUEST_TIMEOUT, format!(
                        "the MCP client did not answer sampling/createMessage within {} ms",
                        timeout.as_millis()
                    )))
                }
            },
            _ = cancelled.cancelled() => {
                harness.take_owed(ours);
                harness.notify(crate::upstream::session::cancelled(ours, "cancelled by the MCP App"));
                Err((INTERNAL_ERROR, "cancelled".to_string()))
            }
        }
    }
}
