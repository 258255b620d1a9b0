//! The legacy-harness half of the era bridge: a modern server's `input_required` answer to a
//! legacy harness's call becomes real requests to that harness, retried with the answers.
//!
//! Each input request (`elicitation/create`, `sampling/createMessage`, `roots/list`) goes to
//! the session's owner as if the server had sent it about the call ([`Cause::Request`]),
//! so it takes the path a legacy server's request takes; only those the harness declared
//! are asked, else the call fails with a clear error. With every answer in, the call goes
//! again under a new id with `inputResponses` (keyed as asked) and the byte-exact
//! `requestState`, for at most [`MAX_ROUNDS`] rounds.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

use super::envelope::Envelope;
use super::session::{Cause, Options, Reply, Session, Unanswered, WeakSession};
use crate::mcp::message::{self, Kind, Message};

/// How many `input_required` answers in a row one call may get before the proxy gives up
/// (the bound SDK v2's own client keeps).
pub const MAX_ROUNDS: usize = 10;

/// The methods a request may answer `input_required` to.
pub fn may_ask(method: Option<&str>) -> bool {
    matches!(
        method,
        Some("tools/call" | "prompts/get" | "resources/read")
    )
}

/// Numbers the proxy's input requests (their ids never meet the server's).
static ASKED: AtomicU64 = AtomicU64::new(1);

/// A legacy harness's call to a modern server, waiting for its answer.
pub struct Bridge {
    session: WeakSession,
    /// The request as the caller wrote it (its id the caller's, no envelope yet).
    request: Message,
    envelope: Envelope,
    options: Options,
    round: usize,
    reply: Box<dyn Reply>,
}

impl Bridge {
    /// `reply` to `request`, sent by `session` for `envelope`.
    pub fn new(
        session: &Session,
        request: Message,
        envelope: Envelope,
        options: Options,
        reply: Box<dyn Reply>,
    ) -> Self {
        Self {
            session: session.downgrade(),
            request,
            envelope,
            options,
            round: 0,
            reply,
        }
    }

    /// The call with `asked` fulfilled: each input request to the harness, then the retry.
    async fn fulfil(mut self: Box<Self>, asked: Asked, id: String) {
        let Some(session) = self.session.upgrade() else {
            return self.reply.fail(Unanswered::Stopped);
        };
        self.round += 1;
        if self.round > MAX_ROUNDS {
            let why = format!("the server still asked for input after {MAX_ROUNDS} rounds (the proxy's bound); the call was given up");
            return self.reply.respond(error(&id, &why));
        }
        // Cancelled meanwhile (from before the harness is asked, so a cancel that follows the
        // question is never missed): dropped unanswered, as a cancelled request is.
        let between = self.options.tag.map(|tag| session.between_rounds(tag));
        let cancelled = between
            .as_ref()
            .map(|b| b.token.clone())
            .unwrap_or_default();
        let mut answers = Vec::new();
        for (key, input) in asked.requests {
            let method = input["method"].as_str().unwrap_or_default().to_string();
            let Some(need) = capability(&method) else {
                let why = format!("the server asked for input by {method:?}, which the proxy cannot relay to an MCP client");
                return self.reply.respond(error(&id, &why));
            };
            if !self.envelope.declares(need) {
                let why = format!("the server needs {method} for this call, but the MCP client (harness) did not declare {need}");
                return self.reply.respond(error(&id, &why));
            }
            let ours = format!(
                "\"ahp-proxy-input-{}\"",
                ASKED.fetch_add(1, Ordering::Relaxed)
            );
            let params = input
                .get("params")
                .map(|p| format!(r#","params":{p}"#))
                .unwrap_or_default();
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":{ours},"method":{}{params}}}"#,
                message::quote(&method)
            );
            let Ok(request) = Message::parse(text) else {
                return self
                    .reply
                    .respond(error(&id, "the server's input request is malformed"));
            };
            let cause = Cause::Request(self.options.tag.unwrap_or(u64::MAX));
            answers.push((key, method, session.ask_owner(request, cause)));
        }
        let mut responses = Vec::new();
        for (key, method, answer) in answers {
            // A cancel wins over an answer that came with it (the harness cancelled first).
            let answer = tokio::select! {
                biased;
                _ = cancelled.cancelled() => return,
                answer = answer => answer,
            };
            let Ok(answer) = answer else {
                return self.reply.fail(Unanswered::Stopped);
            };
            match answered(&answer) {
                Ok(result) => responses.push(format!("{}:{result}", message::quote(&key))),
                Err(why) => {
                    let why = format!("the MCP client (harness) did not answer {method}, which the server needs for this call: {why}");
                    return self.reply.respond(error(&id, &why));
                }
            }
        }
        if cancelled.is_cancelled() {
            return;
        }
        let retry = retry(&self.request, &responses, asked.state.as_deref());
        let retry = self.envelope.wrap(retry);
        let options = self.options;
        drop(session);
        let Some(session) = self.session.upgrade() else {
            return self.reply.fail(Unanswered::Stopped);
        };
        match session.send_prepared(retry, self, options) {
            // Cancelled while it was being sent: the request in flight is cancelled too.
            Ok(id) if cancelled.is_cancelled() => session.cancel(id, "cancelled by the harness"),
            Ok(_) => {}
            Err((reply, failure)) => reply.fail(failure),
        }
        drop(between);
    }
}

impl Reply for Bridge {
    fn related(&mut self, message: Message) {
        self.reply.related(message);
    }

    fn respond(self: Box<Self>, message: Message) {
        match input_required(&message) {
            Some(asked) => {
                let id = message.id().unwrap_or("null").to_string();
                tokio::spawn(self.fulfil(asked, id));
            }
            None => self.reply.respond(message),
        }
    }

    fn fail(self: Box<Self>, failure: Unanswered) {
        self.reply.fail(failure);
    }
}

/// What an `input_required` result asks: its input requests by key, and its
/// `requestState` as written.
#[derive(Debug, Default, PartialEq)]
struct Asked {
    requests: Map<String, Value>,
    state: Option<String>,
}

/// What `message` asks, when it is an `input_required` result.
fn input_required(message: &Message) -> Option<Asked> {
    if message.kind() != Kind::Result
        || message.string(&["resultType"]).as_deref() != Some("input_required")
    {
        return None;
    }
    let requests = message
        .find(&["inputRequests"])
        .and_then(|span| serde_json::from_str::<Map<String, Value>>(message.slice(span)).ok())
        .unwrap_or_default();
    let state = message
        .find(&["requestState"])
        .map(|span| message.slice(span).to_string());
    Some(Asked { requests, state })
}

/// The client capability an input request needs.
fn capability(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// The result in a harness's answer, as written, or why there is none.
fn answered(answer: &Message) -> Result<String, String> {
    match (answer.kind(), answer.body()) {
        (Kind::Result, Some(span)) => Ok(answer.slice(span).to_string()),
        _ => Err(answer
            .string(&["message"])
            .map(|m| m.into_owned())
            .unwrap_or_else(|| "it answered with an error".into())),
    }
}

/// `request` again with `responses` (`"key":result` members) as `inputResponses` and
/// `state` (raw, byte for byte) as `requestState`.
fn retry(request: &Message, responses: &[String], state: Option<&str>) -> Message {
    let mut members = vec![format!(r#""inputResponses":{{{}}}"#, responses.join(","))];
    if let Some(state) = state {
        members.push(format!(r#""requestState":{state}"#));
    }
    let members = members.join(",");
    let text = request.text();
    let params = request.body().filter(|s| text[s.clone()].starts_with('{'));
    let edit = match params {
        Some(span) => {
            let empty = text[span.start + 1..span.end - 1].trim().is_empty();
            let comma = if empty { "" } else { "," };
            (span.start + 1..span.start + 1, format!("{members}{comma}"))
        }
        None => (1..1, format!(r#""params":{{{members}}},"#)),
    };
    request.clone().rewrite(None, vec![edit])
}

/// An error response to the caller's request `id`.
fn error(id: &str, why: &str) -> Message {
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":{}}}}}"#,
        message::quote(why)
    );
    Message::parse(text).unwrap_or_else(|_| {
        Message::parse(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"input required"}}"#
                .into(),
        )
        .unwrap_or_else(|_| unreachable!())
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Weak};
    use std::time::Duration;

    use tokio::sync::{mpsc, oneshot};

    use super::*;
    use crate::upstream::era::Era;
    use crate::upstream::session::{Link, Unsolicited};

    /// A link that hands each message sent to the test.
    struct Wire(mpsc::UnboundedSender<String>);

    impl Link for Wire {
        fn send(&self, text: String, _: Option<u64>) -> Result<(), Unanswered> {
            let _ = self.0.send(text);
            Ok(())
        }
        fn close(&self) {}
    }

    /// An owner that hands each request asked of the harness to the test.
    struct Harness(mpsc::UnboundedSender<(String, Cause)>);

    impl Unsolicited for Harness {
        fn notify(&self, _: Message, _: Option<u64>) {}
        fn request(&self, _: &Session, message: Message, cause: Cause) {
            let id = message.id().unwrap_or_default().to_string();
            let _ = self.0.send((id, cause));
        }
    }

    /// A reply that says when it is dropped, and what it got.
    struct Caller(Option<oneshot::Sender<&'static str>>);

    impl Reply for Caller {
        fn related(&mut self, _: Message) {}
        fn respond(mut self: Box<Self>, _: Message) {
            self.0.take().map(|tx| tx.send("answered"));
        }
        fn fail(mut self: Box<Self>, _: Unanswered) {
            self.0.take().map(|tx| tx.send("failed"));
        }
    }

    impl Drop for Caller {
        fn drop(&mut self) {
            self.0.take().map(|tx| tx.send("dropped"));
        }
    }

    /// A harness cancels its call while the bridge waits for its answer to the server's
    /// input request: its late answer sends no retry, and the call is dropped unanswered
    /// (as a cancelled request is).
    #[tokio::test]
    async fn a_call_cancelled_between_rounds_is_not_retried() {
        let (wire, mut sent) = mpsc::unbounded_channel();
        let session = Session::new(Box::new(Wire(wire)));
        let (asks, mut asked) = mpsc::unbounded_channel();
        let owner: Arc<dyn Unsolicited> = Arc::new(Harness(asks));
        session.set_unsolicited(Arc::downgrade(&owner) as Weak<dyn Unsolicited>);
        let envelope = Envelope {
            era: Era::Legacy,
            capabilities: serde_json::json!({"elicitation": {}}),
            client_info: serde_json::json!({"name": "h"}),
            log_level: None,
        };
        let options = Options {
            timeout: Duration::from_secs(600),
            reset_on_progress: true,
            tag: Some(9),
        };
        let (done, outcome) = oneshot::channel();
        let call =
            parse(r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"t"}}"#);
        let bridge = Bridge::new(
            &session,
            call,
            envelope,
            options,
            Box::new(Caller(Some(done))),
        );
        Box::new(bridge).respond(parse(
            r#"{"jsonrpc":"2.0","id":"c","result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"s"}}"#,
        ));
        let (id, cause) = asked.recv().await.expect("the harness is asked");
        assert_eq!(cause, Cause::Request(9));
        session.cancel_tagged(&[9], "cancelled by the harness");
        session
            .answer(&id, r#""result":{"action":"accept","content":{}}"#)
            .unwrap();
        let guard = Duration::from_secs(120);
        tokio::select! {
            outcome = outcome => assert_eq!(outcome.unwrap(), "dropped"),
            retry = sent.recv() => panic!("a cancelled call was retried: {retry:?}"),
            _ = tokio::time::sleep(guard) => panic!("the bridge neither retried nor gave up"),
        }
    }

    fn parse(text: &str) -> Message {
        Message::parse(text.to_string()).unwrap()
    }

    #[test]
    fn an_input_required_result_says_what_it_asks_and_keeps_its_state_as_written() {
        let m = parse(
            r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":"x\u0041y"}}"#,
        );
        let asked = input_required(&m).unwrap();
        assert_eq!(asked.requests["a"]["method"], "roots/list");
        assert_eq!(asked.state.as_deref(), Some(r#""x\u0041y""#));
        let done = parse(r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete"}}"#);
        assert_eq!(input_required(&done), None);
    }

    #[test]
    fn the_retry_carries_the_answers_and_the_state_byte_for_byte() {
        let call =
            parse(r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"t"}}"#);
        let out = retry(
            &call,
            &[r#""a":{"roots":[]}"#.into()],
            Some(r#""x\u0041y""#),
        );
        assert!(
            out.text().contains(r#""requestState":"x\u0041y""#),
            "{}",
            out.text()
        );
        let value: Value = serde_json::from_str(out.text()).unwrap();
        assert_eq!(
            value["params"]["inputResponses"]["a"]["roots"],
            serde_json::json!([])
        );
        assert_eq!(value["params"]["name"], "t");
        assert_eq!(value["id"], "c");
        let bare = parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
        let value: Value = serde_json::from_str(retry(&bare, &[], None).text()).unwrap();
        assert_eq!(value["params"]["inputResponses"], serde_json::json!({}));
        assert!(value["params"].get("requestState").is_none());
    }

    #[test]
    fn an_answer_is_its_result_or_the_reason_it_failed() {
        let ok = parse(r#"{"jsonrpc":"2.0","id":"a","result":{"action":"accept"}}"#);
        assert_eq!(answered(&ok).unwrap(), r#"{"action":"accept"}"#);
        let no = parse(r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"nope"}}"#);
        assert_eq!(answered(&no).unwrap_err(), "nope");
    }
}
