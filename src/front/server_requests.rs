//! What servers send on their own, to harnesses. A request (sampling, roots, elicitation, or a
//! method the proxy does not know) goes only to a harness it is known to be about: the one
//! whose request's stream carried it, whose task it names (`related-task`), or the one
//! harness with requests in flight at that server; with no request in flight it is the
//! server's own, for the most recently active harness that can be reached. It must have
//! declared what the request needs; when requests of several harnesses are in flight and
//! nothing says which one it is about, it fails at once with a clear error (a harness's
//! prompt must never reach another). Its answer goes back under the server's own id.
//! Notifications go to the harnesses they concern: logs by level, resource updates to
//! subscribers, task status to the task's creator, anything else to every harness that sees
//! the server.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::answers::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT};
use super::harness_state::{Asker, HarnessState};
use super::hub::Hub;
use super::registry::{Level, Link, Need, Refusal, Scope};
use crate::mcp::message::{self, Message};
use crate::mcp::task::TaskStatus;
use crate::supervisor::connections::Downstream;
use crate::upstream::session::{Cause, Session};

/// The `_meta` member that ties a message to a task (SEP-1686).
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

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
                let theirs = message.slice(span.clone()).to_string();
                for harness in self.harnesses_of(server) {
                    if let Some(ours) = harness.owed_to(server, &theirs) {
                        harness.take_owed(ours);
                        let text = message
                            .clone()
                            .rewrite(None, vec![(span.clone(), ours.to_string())])
                            .into_text();
                        harness.notify(text);
                    }
                }
            }
            "notifications/tasks/status" => {
                let task = message.string(&["taskId"]).unwrap_or_default().into_owned();
                if let Some(status) = message.string(&["status"]) {
                    self.task_status(server, &task, TaskStatus::parse(&status));
                }
                let audience = {
                    let tables = self.tables();
                    match tables.registry.task_owner(server, &task) {
                        Some(owner) => vec![owner],
                        None => tables.registry.harnesses_of(server),
                    }
                };
                self.deliver(&audience, message.text(), origin);
            }
            list if list.ends_with("/list_changed") => {
                // A per-server endpoint hears its server's own (on the stream of the request
                // it came with, when it is that harness's); the aggregated one hears the
                // proxy's, once the lists are re-read.
                let audience: Vec<u64> = self
                    .harnesses_of(server)
                    .iter()
                    .filter(|h| matches!(h.scope, Scope::Server(_)))
                    .map(|h| h.id)
                    .collect();
                self.deliver(&audience, message.text(), origin);
            }
            _ => {
                let audience = self.tables().registry.harnesses_of(server);
                self.deliver(&audience, message.text(), origin);
            }
        }
    }

    fn request(&self, server: &str, session: &Session, message: Message, cause: Cause) {
        let Some(theirs) = message.id().map(str::to_string) else {
            return;
        };
        let method = message.method().unwrap_or_default().to_string();
        let mode = message.string(&["mode"]).map(|m| m.into_owned());
        let need = Need::of(&method, mode.as_deref());
        let task = message
            .string(&["_meta", RELATED_TASK, "taskId"])
            .map(|t| t.into_owned());
        let unanswered = match &cause {
            Cause::InFlight(tags) => self.not_waiting(server, tags),
            Cause::Request(_) => Vec::new(),
        };
        let (route, stream) = {
            let tables = self.tables();
            let registry = &tables.registry;
            let owner = task.and_then(|task| registry.task_owner(server, &task));
            let link = match (&cause, owner) {
                (Cause::Request(tag), _) => Link::Request(*tag),
                (_, Some(owner)) => Link::Task(owner),
                (Cause::InFlight(_), None) => Link::InFlight(&unanswered),
            };
            let route = registry.route(server, link, need);
            let stream = match route {
                Ok((harness, Some(tag))) => registry.in_flight.stream_of(harness, tag),
                _ => None,
            };
            (route, stream)
        };
        let refuse = |code: i64, text: String| {
            let body = format!(
                r#""error":{{"code":{code},"message":{}}}"#,
                message::quote(&text)
            );
            let _ = session.answer(&theirs, &body);
        };
        let about = route.as_ref().ok().and_then(|(_, tag)| *tag);
        let harness_id = match route {
            Ok((harness, _)) => harness,
            Err(Refusal::NotDeclared) => {
                return refuse(
                    METHOD_NOT_FOUND,
                    format!(
                        "no connected MCP client (harness) supports {method} ({} not declared or not reachable)",
                        need.capability()
                    ),
                )
            }
            Err(Refusal::Ambiguous(harnesses)) => {
                tracing::info!(server, method, harnesses, "a server request that could be any of several harnesses' was refused");
                return refuse(
                    INTERNAL_ERROR,
                    format!(
                        "the proxy cannot tell which MCP client (harness) {method} is for: {harnesses} of them have requests in flight at this server and nothing in the request says which (over stdio a server's requests carry no link to the call that caused them)"
                    ),
                );
            }
            Err(Refusal::Over) => {
                return refuse(
                    INTERNAL_ERROR,
                    format!("the request {method} is about is already answered"),
                )
            }
        };
        let Some(harness) = self.harness(harness_id) else {
            return refuse(
                METHOD_NOT_FOUND,
                "the MCP client (harness) went away".to_string(),
            );
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
            about,
        };
        let Some(ours) = harness.ask(message, stream, asker) else {
            return refuse(
                METHOD_NOT_FOUND,
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

impl Hub {
    /// Of requests `tags` in flight at server `server`, those not waiting on an answer their
    /// harness owes that server about them: a request held for its harness's input (a
    /// 2026-07-28 round never retried, a prompt left open) waits on that answer, and the
    /// server's next request is about another one. All of them when every one waits.
    fn not_waiting(&self, server: &str, tags: &[u64]) -> Vec<u64> {
        let owners: Vec<(u64, u64)> = {
            let tables = self.tables();
            let in_flight = &tables.registry.in_flight;
            (tags.iter())
                .filter_map(|tag| in_flight.get(*tag).map(|e| (*tag, e.harness)))
                .collect()
        };
        let waits = |id: u64, tag: u64| self.harness(id).is_some_and(|h| h.waits_on(server, tag));
        let kept: Vec<u64> = (owners.iter())
            .filter(|(tag, harness)| !waits(*harness, *tag))
            .map(|(tag, _)| *tag)
            .collect();
        if kept.is_empty() {
            tags.to_vec()
        } else {
            kept
        }
    }

    /// `text` to `harness` (once its `initialize` is answered): on the stream of its
    /// request `origin` when that is one of its requests still in flight, else on its
    /// general stream.
    fn send_to(&self, harness: &HarnessState, text: String, origin: Option<u64>) {
        if !harness.is_live() {
            return;
        }
        // Queued under the lock the request's answer leaves the in-flight table under
        // (`exchange::Tracked`): before that answer, or not on its stream at all.
        let sent = origin.is_some_and(|tag| {
            let tables = self.tables();
            let stream = tables.registry.in_flight.stream_of(harness.id, tag);
            stream.is_some_and(|stream| stream.send(text.clone()))
        });
        if !sent {
            harness.notify(text);
        }
    }

    /// `text` to each harness of `audience`: on the stream of its request `origin` when the
    /// server works on that one (the notification is about it, and travels before its
    /// answer), else on its general stream.
    fn deliver(&self, audience: &[u64], text: &str, origin: Option<u64>) {
        for id in audience {
            if let Some(harness) = self.harness(*id) {
                self.send_to(&harness, text.to_string(), origin);
            }
        }
    }

    /// A log message: to every harness that sees the server and asked for its level or
    /// lower, as the server wrote it.
    fn relay_log(&self, server: &str, message: Message, origin: Option<u64>) {
        let level = message.string(&["level"]).and_then(|l| Level::parse(&l));
        let audience = self.tables().registry.log_audience(server, level);
        self.deliver(&audience, message.text(), origin);
    }

    /// A resource update: to the harnesses subscribed to it, under the URI each sees.
    fn relay_update(&self, server: &str, message: Message, origin: Option<u64>) {
        let uri = message.string(&["uri"]).unwrap_or_default().into_owned();
        let subscribers = self.tables().registry.subscribers(server, &uri);
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
            self.send_to(&harness, text, origin);
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
        let route = self
            .tables()
            .registry
            .route(server, Link::InFlight(&[]), Need::Sampling);
        let gone = || {
            (
                METHOD_NOT_FOUND,
                "no connected MCP client (harness) declared sampling".to_string(),
            )
        };
        tracing::debug!(server, ?route, "sampling for an MCP App");
        let (harness_id, _) = route.map_err(|_| gone())?;
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
