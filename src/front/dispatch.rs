//! What a harness sends, sorted: each request goes to the handler of its method (or, for a
//! method the proxy does not know, to the server it can be routed to); notifications and
//! answers to the proxy's requests go where they belong. Never waits on the caller's path:
//! whatever must wait runs in a task of its own.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::answers::{
    error_answer, result_answer, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
};
use super::exchange::Exchange;
use super::harness::Harness;
use super::harness_state::Asker;
use super::lock::assert_free;
use super::outbox::Stream;
use super::registry::{Level, Scope};
use super::{initialize, lists, modern, routes, steps, tool_call};
use crate::mcp::era::{self, Era};
use crate::mcp::message::{Kind, Message};

impl Harness {
    /// Handle one message from the harness; answers to its requests go to `stream`.
    pub fn handle(self: &Arc<Self>, message: Message, stream: Stream) {
        self.seen();
        match message.kind() {
            Kind::Request => {
                self.hub.tables().registry.touch(self.id);
                self.request(message, stream)
            }
            Kind::Notification => self.notification(message),
            Kind::Result | Kind::Error => self.answer(message),
        }
    }

    fn request(self: &Arc<Self>, message: Message, stream: Stream) {
        let id = message.id().unwrap_or("null").to_string();
        if self.hub.is_stopping() {
            // Draining: what is in flight finishes; nothing new starts.
            stream.finish(error_answer(&id, INTERNAL_ERROR, era::SHUTTING_DOWN));
            return;
        }
        let stand_in = self.stand_in.load(Ordering::Relaxed);
        if !stand_in && era::classify(&message, None) == Era::Modern {
            return modern::from_stdio(self, message, stream);
        }
        let method = message.method().unwrap_or_default().to_string();
        if method != "initialize" && !self.is_initialized() && method != "ping" {
            // Servers refuse requests before initialize; so does the proxy.
            stream.finish(error_answer(
                &id,
                INVALID_REQUEST,
                "the session is not initialized: send initialize first",
            ));
            return;
        }
        match method.as_str() {
            "initialize" => initialize::answer(self.clone(), message, stream),
            "ping" => {
                stream.finish(result_answer(&id, "{}"));
            }
            "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
                lists::answer(self.clone(), message, stream)
            }
            "tools/call" => tool_call::answer(self.clone(), message, stream),
            "logging/setLevel" => self.set_level(message, stream),
            "resources/subscribe" | "resources/unsubscribe" => {
                routes::subscription(self.clone(), message, stream)
            }
            _ => routes::by_target(self.clone(), message, stream),
        }
    }

    fn notification(self: &Arc<Self>, message: Message) {
        match message.method().unwrap_or_default() {
            "notifications/initialized" => {
                self.hub.join(self.state());
                self.complete_handshake();
            }
            "notifications/cancelled" => {
                let Some(span) = message.find(&["requestId"]) else {
                    return;
                };
                // Its owner (the exchange, or a client call's task) drops it on cancellation,
                // which takes it out of the in-flight table.
                let found = (self.hub.tables().registry.in_flight)
                    .by_request(self.id, message.slice(span.clone()))
                    .map(|(tag, entry)| (tag, entry.server.clone(), entry.cancelled.clone()));
                let Some((tag, server, cancelled)) = found else {
                    // A modern request (or listen) of the stdio harness, if it is one.
                    modern::cancel(self.id, message.slice(span));
                    return;
                };
                cancelled.cancel();
                if let Some(server) = self.hub.connections.get(&server) {
                    let reason = message
                        .string(&["reason"])
                        .map(|r| r.into_owned())
                        .unwrap_or_else(|| "cancelled by the harness".into());
                    assert_free("a server session called under a front lock");
                    server.session.cancel_tagged(&[tag], &reason);
                }
            }
            "notifications/progress" => {
                // Progress on a request a server sent the harness: back to that server.
                let Some(span) = message.find(&["progressToken"]) else {
                    return;
                };
                if let Some((_, session)) = self.progress_target(message.slice(span)) {
                    if let Some(session) = session.upgrade() {
                        let _ = session.notify(message.into_text());
                    }
                }
            }
            "notifications/roots/list_changed" => {
                for (id, server) in self.hub.connections.snapshot() {
                    if self.scope.includes(&id) {
                        let _ = server.session.notify(message.text().to_string());
                    }
                }
            }
            _ => {
                // Unknown notifications reach a per-server endpoint's server as they are.
                if let Scope::Server(id) = &self.scope {
                    if let Some(server) = self.hub.connections.get(id) {
                        let _ = server.session.notify(message.into_text());
                    }
                }
            }
        }
    }

    /// The harness answered a request the proxy sent it.
    fn answer(self: &Arc<Self>, message: Message) {
        let Some(id) = message.numeric_id() else {
            return;
        };
        let Some(owed) = self.take_owed(id) else {
            return;
        };
        match owed.asker {
            Asker::Server {
                session,
                id: theirs,
                ..
            } => {
                if let Some(session) = session.upgrade() {
                    let text = message.rewrite(Some(&theirs), Vec::new()).into_text();
                    let _ = session.notify(text);
                }
            }
            Asker::Local(tx) => {
                let _ = tx.send(message);
            }
        }
    }

    /// `logging/setLevel`: the harness gets messages at its level; each server is set to
    /// the most verbose level any harness that sees it asked for. A per-server endpoint
    /// forwards the request (with that level), so the server answers it as it would.
    fn set_level(self: &Arc<Self>, message: Message, stream: Stream) {
        let id = message.id().unwrap_or("null").to_string();
        let Some(level) = message.string(&["level"]).and_then(|l| Level::parse(&l)) else {
            stream.finish(error_answer(
                &id,
                INVALID_PARAMS,
                "invalid or missing level",
            ));
            return;
        };
        self.hub.tables().registry.set_log_level(self.id, level);
        let own = match &self.scope {
            Scope::Server(server) => Some(server.clone()),
            Scope::All => super::routes::only_server(self),
        };
        match own {
            Some(server) => {
                let effective =
                    (self.hub.tables().registry.log_level_for(&server)).unwrap_or(level);
                let message = match message.find(&["level"]) {
                    Some(span) if effective != level => message.rewrite(
                        None,
                        vec![(span, crate::mcp::message::quote(effective.name()))],
                    ),
                    _ => message,
                };
                self.hub.note_level(&server, effective);
                Exchange::start(self, &server, message, stream, None, steps::base());
            }
            None => {
                // Answered once every server has the level: the next call sees it applied.
                let hub = self.hub.clone();
                tokio::spawn(async move {
                    let servers: Vec<String> = hub.connections.snapshot().into_keys().collect();
                    futures_util::future::join_all(servers.iter().map(|s| hub.apply_log_level(s)))
                        .await;
                    stream.finish(result_answer(&id, "{}"));
                });
            }
        }
    }

    /// Whether the harness listed before (and note that it does now).
    pub(super) fn first_listing(&self) -> bool {
        !self.listed.swap(true, Ordering::AcqRel)
    }
}
