//! A harness request forwarded to one server, raw: tracked for cancellation, answered on
//! the harness's stream in the order the server sent things, with the few touches the
//! aggregated endpoint needs (renamed URIs, hidden app-only tools, the next server to ask),
//! tool calls mirrored into AHP, and a call refused for want of scope held until an AHP
//! client provides a better token, then sent once more.

use std::sync::{Arc, Weak};

use tokio_util::sync::CancellationToken;

use super::answers::{
    error_answer, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, REQUEST_TIMEOUT,
    RESOURCE_NOT_FOUND,
};
use super::harness::Harness;
use super::harness_state::InFlight;
use super::hub::Hub;
use super::outbox::Stream;
use crate::mcp::message::{self, Kind, Message};
use crate::mirror::{self, Outcome};
use crate::upstream::session::{Failure, Options, Reply};

/// What to do with the answer besides passing it on.
#[derive(Default)]
pub struct Hooks {
    /// The mirrored tool call to finish.
    pub ticket: Option<mirror::Ticket>,
    /// Rewrite the server's renamed URIs in the answer (aggregated endpoint).
    pub rewrite_uris: bool,
    /// Hide app-only tools in a `tools/list` answer (a harness without MCP Apps).
    pub hide_app_only: bool,
    /// When the server does not have the resource: the next `(server, uri)` to ask.
    pub fallback: Vec<(String, String)>,
    /// A 403 for more scope pauses the call until a better token, then sends it again.
    pub retry_on_scope: bool,
    /// The answer may create a task (record who owns it).
    pub creates_task: bool,
    /// The answer is task `id`'s result (its mirrored call ends with it).
    pub task_result: Option<String>,
    /// A `resources/subscribe` the registry already counted: undone if the server refuses.
    pub undo_subscription: Option<(String, String)>,
}

/// Send `message` (the harness's request) to server `server`; the answer goes to `stream`.
pub fn to_server(
    harness: Arc<Harness>,
    server: &str,
    message: Message,
    stream: Stream,
    hooks: Hooks,
) {
    let hub = harness.hub.clone();
    let id = message.id().unwrap_or("null").to_string();
    let method = message.method().unwrap_or_default().to_string();
    let name = hub.connections.name_of(server);
    let Some(connected) = hub.connections.get(server) else {
        let text = format!("MCP server {name} is not running");
        if let Some(ticket) = hooks.ticket {
            ticket.finish(Outcome::Failed(text.clone()));
        }
        stream.finish(error_answer(&id, INTERNAL_ERROR, &text));
        return;
    };
    let tag = hub.next_tag();
    let cancelled = CancellationToken::new();
    hub.registry().forwarded(tag, server, harness.id);
    // Tracked before it is sent: the answer may come back before `request` returns.
    harness.track(
        &id,
        InFlight {
            server: server.to_string(),
            upstream: 0,
            tag,
            stream: stream.clone(),
            cancelled: cancelled.clone(),
        },
    );
    let keep = hooks.retry_on_scope || !hooks.fallback.is_empty();
    let call = Call {
        harness: Arc::downgrade(&harness),
        hub: hub.clone(),
        server: server.to_string(),
        name,
        id: id.clone(),
        method,
        tag,
        stream,
        hooks,
        original: keep.then(|| message.clone()),
        cancelled,
    };
    let options = Options {
        timeout: hub.settings.request_timeout,
        reset_on_progress: true,
        tag: Some(tag),
    };
    match connected.session.request(message, Box::new(call), options) {
        Ok(upstream) => harness.set_upstream(&id, upstream),
        Err((reply, failure)) => reply.fail(failure),
    }
}

/// One forwarded request's answer on its way back.
struct Call {
    harness: Weak<Harness>,
    hub: Arc<Hub>,
    server: String,
    name: String,
    id: String,
    method: String,
    tag: u64,
    stream: Stream,
    hooks: Hooks,
    /// The request as the harness sent it, kept when it may be sent again.
    original: Option<Message>,
    cancelled: CancellationToken,
}

impl Call {
    /// The request is over for the bookkeeping.
    fn done(&self) {
        if let Some(harness) = self.harness.upgrade() {
            harness.untrack(&self.id);
        }
        self.hub.registry().finished(self.tag);
    }

    /// The answer's text as the harness gets it.
    fn shaped(&self, message: Message) -> String {
        let mut text = message.into_text();
        if self.hooks.rewrite_uris {
            if let Some(rewritten) = self.hub.namespace().rewrite_uris(&self.server, &text) {
                text = rewritten;
            }
        }
        if self.hooks.hide_app_only {
            if let Some(filtered) = crate::upstream::offer::without_app_only(&text) {
                text = filtered;
            }
        }
        text
    }

    /// Whether a not-found answer should be asked of the next server instead.
    fn try_next(&mut self, message: &Message) -> bool {
        if self.hooks.fallback.is_empty() || message.kind() != Kind::Error {
            return false;
        }
        let code = message
            .find(&["code"])
            .and_then(|span| message.slice(span).parse::<i64>().ok());
        if !matches!(code, Some(RESOURCE_NOT_FOUND) | Some(INVALID_PARAMS)) {
            return false;
        }
        let (Some(original), Some(harness)) = (self.original.take(), self.harness.upgrade()) else {
            return false;
        };
        let (server, uri) = self.hooks.fallback.remove(0);
        let Some(span) = original.find(&["uri"]) else {
            return false;
        };
        let next = original.rewrite(None, vec![(span, message::quote(&uri))]);
        let hooks = Hooks {
            fallback: std::mem::take(&mut self.hooks.fallback),
            rewrite_uris: self.hooks.rewrite_uris,
            ..Hooks::default()
        };
        to_server(harness, &server, next, self.stream.clone(), hooks);
        true
    }
}

impl Reply for Call {
    fn related(&mut self, message: Message) {
        // A log line below the level this harness asked for is not its to see (the server
        // logs at the most verbose level any harness asked for).
        if message.method() == Some("notifications/message") {
            let level = message
                .string(&["level"])
                .and_then(|l| super::registry::Level::parse(&l));
            let wanted = self.harness.upgrade().and_then(|h| {
                self.hub
                    .registry()
                    .harness(h.id)
                    .and_then(|record| record.log_level)
            });
            if let (Some(level), Some(wanted)) = (level, wanted) {
                if level < wanted {
                    return;
                }
            }
        }
        self.stream.send(message.into_text());
    }

    fn respond(mut self: Box<Self>, message: Message) {
        self.done();
        if self.try_next(&message) {
            return;
        }
        if self.hooks.creates_task && message.kind() == Kind::Result {
            if let Some(task) = message.string(&["task", "taskId"]) {
                if let Some(harness) = self.harness.upgrade() {
                    self.hub
                        .registry()
                        .task_created(&self.server, &task, harness.id);
                }
                // The call goes on as a task: its mirror ends with the task's result.
                if let Some(ticket) = self.hooks.ticket.take() {
                    self.hub.park_task_ticket(&self.server, &task, ticket);
                }
            }
        }
        if message.kind() == Kind::Error {
            if let (Some((server, uri)), Some(harness)) =
                (self.hooks.undo_subscription.take(), self.harness.upgrade())
            {
                self.hub.registry().unsubscribe(harness.id, &server, &uri);
            }
        }
        let text = self.shaped(message);
        if let Some(ticket) = self.hooks.ticket.take() {
            ticket.finish(Outcome::Raw(text.clone()));
        }
        if let Some(task) = self.hooks.task_result.take() {
            self.hub.finish_task_ticket(&self.server, &task, &text);
        }
        if self.method == "tasks/get" {
            let task = message::find(&text, 0..text.len(), &["result", "taskId"])
                .and_then(|span| message::string_at(&text, span));
            let status = message::find(&text, 0..text.len(), &["result", "status"])
                .and_then(|span| message::string_at(&text, span));
            if let (Some(task), Some(status)) = (task, status) {
                self.hub.task_status(&self.server, &task, &status);
            }
        }
        self.stream.finish(text);
    }

    fn fail(mut self: Box<Self>, failure: Failure) {
        if let Failure::Unauthorized {
            insufficient_scope: true,
            ..
        } = failure
        {
            if self.hooks.retry_on_scope {
                if let (Some(original), Some(harness)) =
                    (self.original.take(), self.harness.upgrade())
                {
                    tokio::spawn(retry_with_scope(*self, harness, original));
                    return;
                }
            }
        }
        self.done();
        if let (Some((server, uri)), Some(harness)) =
            (self.hooks.undo_subscription.take(), self.harness.upgrade())
        {
            self.hub.registry().unsubscribe(harness.id, &server, &uri);
        }
        let (code, text) = describe(&failure, &self.name, &self.method);
        if let Some(ticket) = self.hooks.ticket.take() {
            ticket.finish(if self.cancelled.is_cancelled() {
                Outcome::Cancelled
            } else {
                Outcome::Failed(text.clone())
            });
        }
        self.stream.finish(error_answer(&self.id, code, &text));
    }
}

/// A failure as the harness sees it: never transport internals (which may quote a URL).
pub fn describe(failure: &Failure, server: &str, method: &str) -> (i64, String) {
    match failure {
        Failure::Timeout(limit) => (
            REQUEST_TIMEOUT,
            format!(
                "MCP server {server} did not answer {method} within {} ms",
                limit.as_millis()
            ),
        ),
        Failure::Stopped => (
            INTERNAL_ERROR,
            format!("MCP server {server} stopped before answering {method}"),
        ),
        Failure::Unauthorized { status, .. } => (
            INTERNAL_ERROR,
            format!("MCP server {server} refused {method}: HTTP {status} (authorization needed)"),
        ),
        Failure::Undelivered(why) => (
            INTERNAL_ERROR,
            format!("{method} could not be delivered to MCP server {server}: {why}"),
        ),
    }
}

/// A tool call refused for want of scope: wait until the server is back with a better token
/// (an AHP client's `authenticate`), showing the mirrored call as paused meanwhile, then send
/// it once more. Gives up after `request_timeout_ms`, when the harness cancels, or when a
/// client gives up on it.
async fn retry_with_scope(mut call: Call, harness: Arc<Harness>, original: Message) {
    let hub = call.hub.clone();
    let back = wait_for_authorization(
        &hub,
        &call.server,
        call.hooks.ticket.as_ref(),
        &call.cancelled,
    )
    .await;
    call.done();
    let declined = || {
        format!(
            "MCP server {} needs more authorization (insufficient scope); the user declined to provide it",
            call.name
        )
    };
    // A give-up that got in just before the call resumed still wins.
    let released = call.hooks.ticket.as_ref().is_none_or(|t| t.release());
    let outcome = match back {
        _ if !released => Err(declined()),
        Authorization::GivenUp => Err(declined()),
        Authorization::Cancelled => Err(format!("{} was cancelled by the harness", call.method)),
        Authorization::TimedOut => Err(format!(
            "MCP server {} needs more authorization (insufficient scope) and none was provided within {} ms",
            call.name,
            hub.settings.request_timeout.as_millis()
        )),
        Authorization::Granted => Ok(()),
    };
    match outcome {
        Ok(()) => {
            if let Some(ticket) = call.hooks.ticket.as_ref() {
                ticket.auth_resolved();
            }
            tracing::info!(server = %call.name, "authorization granted; retrying the tool call");
            let hooks = Hooks {
                ticket: call.hooks.ticket.take(),
                rewrite_uris: call.hooks.rewrite_uris,
                creates_task: true,
                ..Hooks::default()
            };
            to_server(harness, &call.server, original, call.stream.clone(), hooks);
        }
        Err(text) => {
            if let Some(ticket) = call.hooks.ticket.take() {
                ticket.finish(Outcome::Failed(text.clone()));
            }
            call.stream
                .finish(error_answer(&call.id, INVALID_REQUEST, &text));
        }
    }
}

enum Authorization {
    Granted,
    GivenUp,
    Cancelled,
    TimedOut,
}

async fn wait_for_authorization(
    hub: &Hub,
    server: &str,
    ticket: Option<&mirror::Ticket>,
    cancelled: &CancellationToken,
) -> Authorization {
    use tokio::sync::broadcast::error::RecvError;
    let connections = &hub.connections;
    let mut changes = connections.subscribe();
    let wait = async {
        // First it goes down (its lifecycle task saw the same refusal) ...
        while connections.get(server).is_some() {
            if let Err(RecvError::Closed) = changes.recv().await {
                return false;
            }
        }
        if let (Some(ticket), Some(status)) = (ticket, connections.auth_status(server)) {
            if let Some(auth) = crate::host::live::auth_requirement(&status) {
                ticket.hold();
                ticket.auth_required(auth);
            }
        }
        // ... then it comes back with the new token.
        loop {
            if connections.get(server).is_some() {
                return true;
            }
            match changes.recv().await {
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return false,
            }
        }
    };
    let given_up = async {
        match ticket {
            Some(ticket) => ticket.given_up().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        back = tokio::time::timeout(hub.settings.request_timeout, wait) => match back {
            Ok(true) => Authorization::Granted,
            _ => Authorization::TimedOut,
        },
        _ = cancelled.cancelled() => Authorization::Cancelled,
        _ = given_up => Authorization::GivenUp,
    }
}
