//! A tool's result the approval policy holds for review (`review_result`): the server's
//! answer waits, shown pending result confirmation, for the first decision (an AHP client's
//! `chat/toolCallResultConfirmed`, or the proxy's as `on_timeout` says); approved, the
//! harness gets it; denied, it gets an `isError` result naming who denied it instead. The
//! harness hears progress meanwhile; a result nobody can be shown goes as `on_timeout` says;
//! a task the server answers with instead is withheld (its result would skip the review).

use super::approval::{decide, denied, progress, progress_token, Held, Pending};
use super::tasks::{created_modern_task, created_task};
use crate::approval::OnTimeout;
use crate::front::exchange::{Context, Course, Flow, Step};
use crate::mcp::message::{Kind, Message};
use crate::mirror::{Decision, Outcome};

/// Holds a tools/call's result until it is reviewed.
pub struct Review {
    call: Option<Held>,
    /// The harness's progress token, kept from its request.
    token: Option<String>,
    /// The last progress the server reported for it (the wait's progress goes on above).
    reported: f64,
}

impl Review {
    /// Hold the result of `call`.
    pub fn new(call: Held) -> Self {
        Self {
            call: Some(call),
            token: None,
            reported: 0.0,
        }
    }
}

impl Step for Review {
    fn request(&mut self, _x: &mut Context, message: Message) -> Flow {
        self.token = progress_token(&message);
        Flow::Next(message)
    }

    fn related(&mut self, _x: &Context, message: Message) -> Option<Message> {
        if message.method() == Some("notifications/progress") {
            let value = (message.find(&["progress"]))
                .and_then(|span| message.slice(span).parse::<f64>().ok());
            self.reported = self.reported.max(value.unwrap_or(0.0));
        }
        Some(message)
    }

    fn answer(&mut self, x: &mut Context, message: Message) -> Flow {
        let reviewed = under_review(&message);
        let Some(call) = self.call.take().filter(|_| reviewed) else {
            return Flow::Next(message);
        };
        let id = x.id.to_string();
        if created_task(&message)
            .or_else(|| created_modern_task(&message))
            .is_some()
        {
            // A task's result would reach the harness later, by `tasks/result` or `tasks/get`,
            // past any review: the task is not handed out (nor recorded as the harness's).
            return Flow::Divert(withheld(&call, &id));
        }
        // Not shown (the mirror's queue was full, or the proxy is stopping): nobody can
        // review it, so it goes as `on_timeout` says (the call itself already ran).
        let Some(ticket) = x.ticket.take() else {
            return Flow::Divert(unshown(&call, message.into_text(), &id));
        };
        let Some(heard) = ticket.hold_for_approval() else {
            // The mirrored call ends with the answer.
            x.ticket = Some(ticket);
            return Flow::Divert(unshown(&call, message.into_text(), &id));
        };
        // Progress only grows: the wait's counts on above what the server reported.
        let above = above(self.reported);
        let progress = progress(x, self.token.take(), "waiting for review");
        let progress = move |n: u64| progress(above.saturating_add(n));
        let waiting = async move {
            let text = message.into_text();
            // Held from here on: a harness that cancels meanwhile denies it in the chat.
            let mut pending = Pending::new(ticket, &call, true);
            if let Some(ticket) = &pending.ticket {
                ticket.review(Outcome::Raw(text.clone())).await;
            }
            let decision = decide(&call, &mut pending, heard, progress).await;
            pending.decided = true;
            drop(pending);
            log(&call, &decision);
            if decision.approved {
                return (Course::Answer(text), None);
            }
            (denied(&call, "result", &decision, &id), None)
        };
        Flow::Divert(Course::Wait(Box::pin(waiting)))
    }
}

/// What becomes of result `text` of `call` (request `id`) that could not be shown for
/// review: delivered when `on_timeout` allows, else an `isError` result saying why.
fn unshown(call: &Held, text: String, id: &str) -> Course {
    let approved = call.on_timeout == OnTimeout::Allow;
    let decision = Decision {
        call: Default::default(),
        approved,
        client: None,
        reason: Some(format!(
            "it could not be shown to AHP clients for review, so it is {}",
            if approved { "allowed" } else { "denied" }
        )),
        edited_input: None,
        option: None,
        result: true,
    };
    log(call, &decision);
    if approved {
        return Course::Answer(text);
    }
    denied(call, "result", &decision, id)
}

/// Whether answer `message` is held for review: a result (an error has no content to hold),
/// and not a 2026-07-28 server's request for input (no result yet: the retry is a call of its
/// own, reviewed in turn).
fn under_review(message: &Message) -> bool {
    message.kind() == Kind::Result
        && message.string(&["resultType"]).as_deref() != Some("input_required")
}

/// The answer to a reviewed call its server answered with a task: an `isError` result
/// saying the task was withheld.
fn withheld(call: &Held, id: &str) -> Course {
    let decision = Decision {
        call: Default::default(),
        approved: false,
        client: None,
        reason: Some(
            "its results are held for review, and the server answered with a task, whose result would not be; the task is withheld"
                .into(),
        ),
        edited_input: None,
        option: None,
        result: true,
    };
    log(call, &decision);
    denied(call, "result", &decision, id)
}

/// The whole number the wait's progress counts on from, after the server's `reported`.
fn above(reported: f64) -> u64 {
    if reported.is_finite() && reported > 0.0 {
        // Saturating: an absurd value from the server caps the count, never wraps it.
        reported.floor() as u64
    } else {
        0
    }
}

/// The audit line of a review's outcome.
fn log(call: &Held, decision: &Decision) {
    tracing::info!(
        tool = %crate::untrusted::Untrusted(&call.tool),
        server = %call.server.1,
        client = %crate::untrusted::Untrusted(decision.client.as_deref().unwrap_or("-")),
        outcome = if decision.approved { "approved" } else { "denied" },
        "tool result review"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Policy;
    use crate::front::harness_state::HarnessState;
    use crate::front::registry::Scope;

    fn call(on_timeout: OnTimeout) -> Held {
        let policy = Policy {
            on_timeout,
            ..Policy::default()
        };
        let harness = HarnessState::new(1, Scope::All, false);
        Held::new(
            harness,
            ("s1".into(), "notes".into()),
            "read".into(),
            &policy,
        )
    }

    #[test]
    fn results_are_reviewed_and_errors_and_requests_for_input_are_not() {
        let answer = |text: &str| Message::parse(text.to_string()).unwrap();
        let result = answer(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#);
        let modern =
            answer(r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}"#);
        let input = answer(
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}"#,
        );
        let error = answer(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}"#);
        assert!(under_review(&result) && under_review(&modern));
        assert!(!under_review(&input) && !under_review(&error));
    }

    #[test]
    fn the_wait_counts_progress_on_above_the_servers() {
        assert_eq!(above(0.0), 0);
        assert_eq!(above(100.0), 100);
        assert_eq!(above(0.5), 0);
        assert_eq!(above(f64::NAN), 0);
        assert_eq!(above(-3.0), 0);
        assert_eq!(above(1e300), u64::MAX);
    }

    /// A result nobody can be shown goes as `on_timeout` says, never lost as an error
    /// asking the harness to try again (the call already ran).
    #[test]
    fn a_result_that_cannot_be_shown_goes_as_on_timeout_says() {
        let result = r#"{"jsonrpc":"2.0","id":4,"result":{"content":[]}}"#;
        match unshown(&call(OnTimeout::Allow), result.into(), "4") {
            Course::Answer(text) => assert_eq!(text, result),
            _ => panic!("the result is delivered"),
        }
        match unshown(&call(OnTimeout::Deny), result.into(), "4") {
            Course::Answer(text) => {
                let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(answer["id"], 4, "{text}");
                assert_eq!(answer["result"]["isError"], true, "{text}");
                let said = answer["result"]["content"][0]["text"].as_str().unwrap();
                assert_eq!(
                    said,
                    "The result of tool \"read\" on MCP server \"notes\" was denied by the proxy: \
                     it could not be shown to AHP clients for review, so it is denied"
                );
            }
            _ => panic!("a denial is an answer"),
        }
    }
}
