//! A tool call the approval policy holds: it waits, before it reaches its server, for the
//! first decision (an AHP client's `chat/toolCallConfirmed`, or the proxy's when nobody
//! answered in time); approved, it goes on (with the client's edited arguments); denied, the
//! harness gets an `isError` result naming who denied it and why. A harness that gave a
//! progress token hears progress meanwhile; one that cancels or goes away ends the wait.

use std::sync::Arc;
use std::time::Duration;

use crate::approval::{OnTimeout, Policy};
use crate::front::answers::{result_answer, INTERNAL_ERROR, INVALID_PARAMS};
use crate::front::exchange::{Context, Course, Flow, Step};
use crate::front::harness_state::HarnessState;
use crate::mcp::message::{self, Message};
use crate::mirror::{Decision, Ticket, OPTION_SERVER, OPTION_TOOL};

/// How often a waiting harness that gave a progress token hears that the call still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Holds a tools/call until it is decided.
pub struct Hold(Option<Held>);

impl Hold {
    /// Hold `call`.
    pub fn new(call: Held) -> Self {
        Self(Some(call))
    }
}

/// A held call, as the wait needs it.
pub struct Held {
    /// The harness that made it (what it was allowed for its session is kept there).
    pub harness: Arc<HarnessState>,
    /// The server's customization id, and its declared name.
    pub server: (String, String),
    /// The tool's name at its server.
    pub tool: String,
    /// How long it waits, and what it becomes then.
    pub timeout: Duration,
    /// What an unanswered call becomes.
    pub on_timeout: OnTimeout,
}

impl Held {
    /// A call of `tool` on `server` by `harness` under `policy`.
    pub fn new(
        harness: Arc<HarnessState>,
        server: (String, String),
        tool: String,
        policy: &Policy,
    ) -> Self {
        Self {
            harness,
            server,
            tool,
            timeout: policy.timeout,
            on_timeout: policy.on_timeout,
        }
    }
}

impl Step for Hold {
    fn request(&mut self, x: &mut Context, message: Message) -> Flow {
        let Some(call) = self.0.take() else {
            return Flow::Next(message);
        };
        let Some(ticket) = x.ticket.take() else {
            // Not shown (the mirror is full, or gone): nobody could approve it.
            return Flow::Divert(Course::Refuse {
                code: INTERNAL_ERROR,
                message: format!(
                    "tool {:?} needs approval, and the call could not be shown to AHP clients; try again",
                    call.tool
                ),
            });
        };
        let Some(heard) = ticket.hold_for_approval() else {
            return Flow::Divert(Course::Refuse {
                code: INTERNAL_ERROR,
                message: "the proxy is stopping".into(),
            });
        };
        let progress = progress(x, progress_token(&message), "waiting for approval");
        let id = x.id.to_string();
        let hub = x.hub().clone();
        let waiting = async move {
            let mut pending = Pending::new(ticket, &call, false);
            let decision = decide(&call, &mut pending, heard, progress).await;
            pending.decided = true;
            // Judged again under the policy of now: the server's declaration may have hidden
            // the tool while the call waited.
            let (server, tool) = (&call.server.0, &call.tool);
            let hidden = (hub.connections.tool_filters(server)).is_some_and(|f| f.hides(tool));
            let course = match hidden {
                true => Course::Refuse {
                    code: INVALID_PARAMS,
                    message: format!("unknown tool {tool:?} (its server's declaration hid it while the call waited for approval)"),
                },
                false => follow(&call, decision, message, &id),
            };
            (course, pending.ticket.take())
        };
        Flow::Divert(Course::Wait(Box::pin(waiting)))
    }
}

/// The raw progress token of request `message`, if it gave one.
pub(super) fn progress_token(message: &Message) -> Option<String> {
    (message.find(&["_meta", "progressToken"])).map(|span| message.slice(span).to_string())
}

/// What tells the harness, on its request's stream, that the request still waits (`said`):
/// progress `n` for its `token`; nothing when it gave none.
pub(super) fn progress(
    x: &Context,
    token: Option<String>,
    said: &'static str,
) -> impl Fn(u64) + Send + 'static {
    let stream = x.stream.clone();
    let said = message::quote(said);
    move |n: u64| {
        if let Some(token) = &token {
            stream.send(format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":{n},"message":{said}}}}}"#
            ));
        }
    }
}

/// The ticket of a call while it (or its result) waits: dropped undecided (the harness
/// cancelled, went away), the call is denied in AHP so no client answers it any more.
pub(super) struct Pending {
    pub(super) ticket: Option<Ticket>,
    pub(super) decided: bool,
    /// The tool and its server's name (for the log).
    what: (String, String),
    /// Whether it is the call's result that waits (for review).
    result: bool,
}

impl Pending {
    /// `ticket` of `call` waiting (its result, when `result`).
    pub(super) fn new(ticket: Ticket, call: &Held, result: bool) -> Self {
        Self {
            ticket: Some(ticket),
            decided: false,
            what: (call.tool.clone(), call.server.1.clone()),
            result,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let (false, Some(ticket)) = (self.decided, &self.ticket) {
            if ticket.decide(false, "the harness cancelled the call") {
                let (tool, server) = &self.what;
                tracing::info!(
                    tool = %crate::untrusted::Untrusted(tool),
                    server = %server,
                    client = "-",
                    outcome = "cancelled by the harness",
                    "tool call approval"
                );
            }
        }
        // A result under review ended in the chat with the decision: only the turn learns it.
        if let (true, Some(ticket)) = (self.result, self.ticket.take()) {
            ticket.ended_elsewhere();
        }
    }
}

/// Wait for the call's (or its result's) decision: a client's, else the proxy's once the
/// wait is over.
pub(super) async fn decide(
    call: &Held,
    pending: &mut Pending,
    mut heard: tokio::sync::broadcast::Receiver<Decision>,
    progress: impl Fn(u64),
) -> Decision {
    let Some(ticket) = pending.ticket.as_ref() else {
        return unanswered(call, false);
    };
    let deadline = tokio::time::Instant::now() + call.timeout;
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    let mut sent = 0;
    let mut timed_out = false;
    loop {
        tokio::select! {
            // Progress first: the harness hears at once that its call waits (the first tick
            // is immediate), then every `PROGRESS_EVERY`.
            biased;
            _ = tick.tick() => {
                sent += 1;
                progress(sent);
            }
            got = heard.recv() => match got {
                Ok(decision) if ticket.is_about(&decision) && decision.result == pending.result => {
                    return decision
                }
                Ok(_) => {}
                // Fell behind: the decision may be among those missed.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    if let Some(decision) = ticket.decision().filter(|d| d.result == pending.result) {
                        return decision;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    return unanswered(call, false);
                }
            },
            _ = tokio::time::sleep_until(deadline), if !timed_out => {
                timed_out = true;
                let approved = call.on_timeout == OnTimeout::Allow;
                let decision = unanswered(call, approved);
                if ticket.decide(approved, decision.reason.as_deref().unwrap_or_default()) {
                    return decision;
                }
                // A client decided first.
                if let Some(decision) = ticket.decision().filter(|d| d.result == pending.result) {
                    return decision;
                }
            }
        }
    }
}

/// The proxy's decision on a call nobody answered (`approved` when the policy says so).
pub(super) fn unanswered(call: &Held, approved: bool) -> Decision {
    let verb = if approved { "allowed" } else { "denied" };
    Decision {
        call: Default::default(),
        approved,
        client: None,
        reason: Some(format!(
            "nobody answered within {} ms, so the call is {verb}",
            call.timeout.as_millis()
        )),
        edited_input: None,
        option: None,
        result: false,
    }
}

/// What the decision makes of the call: sent on (as edited), or answered as denied.
fn follow(call: &Held, decision: Decision, message: Message, id: &str) -> Course {
    let (server, name) = &call.server;
    let outcome = if decision.approved {
        "approved"
    } else {
        "denied"
    };
    tracing::info!(
        tool = %crate::untrusted::Untrusted(&call.tool),
        server = %name,
        client = %crate::untrusted::Untrusted(decision.client.as_deref().unwrap_or("-")),
        outcome,
        option = decision.option.as_deref().unwrap_or("-"),
        "tool call approval"
    );
    if !decision.approved {
        return denied(call, "call", &decision, id);
    }
    match decision.option.as_deref() {
        Some(OPTION_TOOL) => call.harness.allow(server, Some(&call.tool)),
        Some(OPTION_SERVER) => call.harness.allow(server, None),
        _ => {}
    }
    let message = match decision.edited_input {
        Some(edited) => with_arguments(message, &edited),
        None => message,
    };
    Course::Send {
        server: server.clone(),
        message,
    }
}

/// The harness's answer when `what` ("call", "result") of `call` was denied: an `isError`
/// result naming who denied it and why.
pub(super) fn denied(call: &Held, what: &str, decision: &Decision, id: &str) -> Course {
    let who = match &decision.client {
        Some(client) => format!("AHP client {client:?}"),
        None => "the proxy".to_string(),
    };
    let mut text = format!(
        "The {what} of tool {:?} on MCP server {:?} was denied by {who}",
        call.tool, call.server.1
    );
    if let Some(reason) = decision.reason.as_deref().filter(|r| !r.trim().is_empty()) {
        text.push_str(&format!(": {reason}"));
    }
    let result = format!(
        r#"{{"content":[{{"type":"text","text":{}}}],"isError":true}}"#,
        message::quote(&text)
    );
    Course::Answer(result_answer(id, &result))
}

/// `message` (a tools/call) with its `arguments` replaced by `edited` (a JSON object).
fn with_arguments(message: Message, edited: &str) -> Message {
    if let Some(span) = message.find(&["arguments"]) {
        return message.rewrite(None, vec![(span, edited.to_string())]);
    }
    match message.find(&["name"]) {
        Some(span) => {
            let end = span.end;
            message.rewrite(None, vec![(end..end, format!(r#","arguments":{edited}"#))])
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edited_arguments_replace_the_old_ones_or_join_the_call() {
        let call = |text: &str| Message::parse(text.to_string()).unwrap();
        let edited = with_arguments(
            call(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}"#,
            ),
            r#"{"text":"b"}"#,
        );
        assert_eq!(
            edited.text(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}"#
        );
        let added = with_arguments(
            call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#),
            r#"{"text":"b"}"#,
        );
        assert_eq!(
            added.text(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}"#
        );
    }
}
