//! A tool's result the approval policy holds for review (`review_result`): the server's
//! answer waits, shown pending result confirmation, for the first decision (an AHP client's
//! `chat/toolCallResultConfirmed`, or the proxy's as `on_timeout` says); approved, the
//! harness gets it; denied, it gets an `isError` result naming who denied it instead.

use super::approval::{decide, denied, Held, Pending};
use crate::front::answers::INTERNAL_ERROR;
use crate::front::exchange::{Context, Course, Flow, Step};
use crate::mcp::message::{Kind, Message};
use crate::mirror::Outcome;

/// Holds a tools/call's result until it is reviewed.
pub struct Review(Option<Held>);

impl Review {
    /// Hold the result of `call`.
    pub fn new(call: Held) -> Self {
        Self(Some(call))
    }
}

impl Step for Review {
    fn answer(&mut self, x: &mut Context, message: Message) -> Flow {
        // Only a result is reviewed (an error has no content to hold), and not a task's
        // creation (its result comes later, by other means).
        let reviewed = message.kind() == Kind::Result && message.find(&["task"]).is_none();
        let Some(call) = self.0.take().filter(|_| reviewed) else {
            return Flow::Next(message);
        };
        let refuse = |why: &str| {
            Flow::Divert(Course::Refuse {
                code: INTERNAL_ERROR,
                message: format!("the result of tool {:?} needs review, and {why}", call.tool),
            })
        };
        let Some(ticket) = x.ticket.take() else {
            return refuse("it could not be shown to AHP clients; try again");
        };
        let Some(heard) = ticket.hold_for_approval() else {
            return refuse("the proxy is stopping");
        };
        let id = x.id.to_string();
        let waiting = async move {
            let text = message.into_text();
            // Held from here on: a harness that cancels meanwhile denies it in the chat.
            let mut pending = Pending::new(ticket, &call, true);
            if let Some(ticket) = &pending.ticket {
                ticket.review(Outcome::Raw(text.clone())).await;
            }
            let decision = decide(&call, &mut pending, heard, |_| {}).await;
            pending.decided = true;
            drop(pending);
            tracing::info!(
                tool = %crate::untrusted::Untrusted(&call.tool),
                server = %call.server.1,
                client = %crate::untrusted::Untrusted(decision.client.as_deref().unwrap_or("-")),
                outcome = if decision.approved { "approved" } else { "denied" },
                "tool result review"
            );
            if decision.approved {
                return (Course::Answer(text), None);
            }
            (denied(&call, "result", &decision, &id), None)
        };
        Flow::Divert(Course::Wait(Box::pin(waiting)))
    }
}
