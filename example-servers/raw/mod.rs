//! A hand-written JSON-RPC MCP server core, for fixtures that must control every byte they
//! send: a session (requests in, raw text out), with `stdio` and streamable `http` carriers.
//!
//! Nothing here re-serializes what a handler writes: a reply, a notification or a request to
//! the client leaves as the exact text the handler built. Incoming messages are read with
//! `serde_json`'s `RawValue`, so a handler sees the client's `params` (and its answers to
//! server requests) byte for byte.

pub mod http;
pub mod stdio;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// A fixture: answers requests, one `Handler` per MCP session.
pub trait Handler: Send + Sync + 'static {
    /// Answer one request. Messages related to it go through `call` before the reply.
    fn request(&self, call: Call) -> impl Future<Output = Reply> + Send;

    /// A notification from the client (`notifications/initialized`, `…/cancelled`, …).
    fn notification(&self, _method: &str, _params: Option<&RawValue>) {}
}

/// How a request is answered.
#[derive(Debug)]
pub enum Reply {
    /// `{"jsonrpc":"2.0","id":<id>,"result":<this text>}`.
    Result(String),
    /// `{"jsonrpc":"2.0","id":<id>,"error":{"code":…,"message":…}}`.
    Error(i64, String),
    /// The whole response, as written (the handler places the id itself).
    Message(String),
}

impl Reply {
    /// The response text for the request with this raw id.
    pub fn into_text(self, id: &str) -> String {
        match self {
            Reply::Result(result) => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#),
            Reply::Error(code, message) => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{}}}}}"#,
                quote(&message)
            ),
            Reply::Message(text) => text,
        }
    }
}

/// What flows on one request's stream, in order: related messages, then the reply.
#[derive(Debug)]
pub enum Frame {
    /// A notification or a server request related to the call.
    Message(String),
    /// End the transport stream now (HTTP: the client resumes with `Last-Event-ID`).
    Close,
    /// The response; nothing follows it.
    Reply(String),
}

/// The session's side of server → client requests.
#[derive(Default)]
pub struct Peer {
    next_id: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<String>>>,
}

impl Peer {
    /// Deliver a response from the client; false when no request waits for this id.
    pub fn answer(&self, id: &str, text: String) -> bool {
        match lock(&self.pending).remove(id) {
            Some(waiter) => waiter.send(text).is_ok(),
            None => false,
        }
    }

    /// Forget every waiting request (the session ended): their `ask`s return `None`.
    pub fn close(&self) {
        lock(&self.pending).clear();
    }
}

/// One request being answered.
pub struct Call {
    /// The request's method.
    pub method: String,
    /// The request's id, as the client wrote it.
    pub id: String,
    params: Option<Box<RawValue>>,
    stream: mpsc::UnboundedSender<Frame>,
    peer: Arc<Peer>,
}

impl Call {
    /// The raw `params`, if any.
    pub fn params_raw(&self) -> Option<&str> {
        self.params.as_deref().map(RawValue::get)
    }

    /// The `params`, parsed (for reading arguments; never for writing them back).
    pub fn params(&self) -> Value {
        self.params_raw()
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or(Value::Null)
    }

    /// The raw text of the member at `path` inside `params`, e.g. `["_meta", "progressToken"]`.
    pub fn param_raw(&self, path: &[&str]) -> Option<String> {
        let mut text = self.params_raw()?.to_string();
        for key in path {
            let members: HashMap<String, Box<RawValue>> = serde_json::from_str(&text).ok()?;
            text = members.get(*key)?.get().to_string();
        }
        Some(text)
    }

    /// Send a message related to this call (on its HTTP stream, before the reply).
    pub fn send(&self, message: String) {
        let _ = self.stream.send(Frame::Message(message));
    }

    /// End the call's transport stream (HTTP); the reply is kept for a resuming client.
    pub fn close_stream(&self) {
        let _ = self.stream.send(Frame::Close);
    }

    /// Send a request to the client, built around the id given to `build` (raw text), and
    /// wait for its response: the whole response text, or `None` if the session ended.
    pub async fn ask(&self, build: impl FnOnce(&str) -> String) -> Option<String> {
        let id = self
            .peer
            .next_id
            .fetch_add(1, Ordering::Relaxed)
            .to_string();
        let (tx, rx) = oneshot::channel();
        lock(&self.peer.pending).insert(id.clone(), tx);
        self.send(build(&id));
        rx.await.ok()
    }
}

/// One message from the client, classified.
pub enum Incoming {
    Request {
        id: String,
        method: String,
        params: Option<Box<RawValue>>,
    },
    Notification {
        method: String,
        params: Option<Box<RawValue>>,
    },
    /// A response to a server request: its id (raw) and the whole text.
    Response { id: String, text: String },
    /// Not JSON-RPC: the text of the error response to send.
    Invalid(String),
}

#[derive(serde::Deserialize)]
struct Envelope {
    id: Option<Box<RawValue>>,
    method: Option<String>,
    params: Option<Box<RawValue>>,
    result: Option<Box<RawValue>>,
    error: Option<Box<RawValue>>,
}

/// Read one message (one JSON-RPC object; batches are not MCP 2025-11-25).
pub fn classify(text: &str) -> Incoming {
    let invalid = |code: i64, message: &str| {
        Incoming::Invalid(Reply::Error(code, message.into()).into_text("null"))
    };
    let Ok(envelope) = serde_json::from_str::<Envelope>(text) else {
        return invalid(-32700, "Parse error: not one JSON-RPC object");
    };
    let id = envelope
        .id
        .map(|id| id.get().to_string())
        .filter(|id| id != "null");
    match (id, envelope.method) {
        (Some(id), Some(method)) => Incoming::Request {
            id,
            method,
            params: envelope.params,
        },
        (None, Some(method)) => Incoming::Notification {
            method,
            params: envelope.params,
        },
        (Some(id), None) if envelope.result.is_some() || envelope.error.is_some() => {
            Incoming::Response {
                id,
                text: text.to_string(),
            }
        }
        _ => invalid(-32600, "Invalid Request"),
    }
}

/// Start answering a request: the handler runs on its own task, and everything it sends
/// (then its reply) arrives in order on the returned receiver.
pub fn start<H: Handler>(
    handler: &Arc<H>,
    peer: &Arc<Peer>,
    id: String,
    method: String,
    params: Option<Box<RawValue>>,
) -> mpsc::UnboundedReceiver<Frame> {
    let (stream, frames) = mpsc::unbounded_channel();
    let call = Call {
        method,
        id: id.clone(),
        params,
        stream: stream.clone(),
        peer: peer.clone(),
    };
    let handler = handler.clone();
    tokio::spawn(async move {
        let reply = handler.request(call).await;
        let _ = stream.send(Frame::Reply(reply.into_text(&id)));
    });
    frames
}

/// A JSON string literal for `s` (serde_json's escaping: deterministic).
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Lock, ignoring poison (a panicked handler leaves plain data behind).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified_and_ids_kept_raw() {
        match classify(r#"{"id":"a\u0062","method":"tools/list","jsonrpc":"2.0"}"#) {
            Incoming::Request { id, method, params } => {
                assert_eq!(
                    (id.as_str(), method.as_str()),
                    (r#""a\u0062""#, "tools/list")
                );
                assert!(params.is_none());
            }
            _ => panic!("a request"),
        }
        match classify(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{"z":1e3}}"#,
        ) {
            Incoming::Notification { params, .. } => {
                assert_eq!(params.unwrap().get(), r#"{"z":1e3}"#)
            }
            _ => panic!("a notification"),
        }
        let response = r#"{"jsonrpc":"2.0","id":4,"result":{"b":0.70}}"#;
        match classify(response) {
            Incoming::Response { id, text } => {
                assert_eq!((id.as_str(), text.as_str()), ("4", response))
            }
            _ => panic!("a response"),
        }
        for bad in [
            "[1]",
            "{",
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"id":null,"method":7}"#,
        ] {
            match classify(bad) {
                Incoming::Invalid(error) => assert!(error.contains(r#""id":null"#), "{error}"),
                _ => panic!("{bad} is invalid"),
            }
        }
    }

    #[test]
    fn replies_wrap_the_handler_text_unchanged() {
        let id = r#""x""#;
        assert_eq!(
            Reply::Result(r#"{"z":1e3,"a":-0}"#.into()).into_text(id),
            r#"{"jsonrpc":"2.0","id":"x","result":{"z":1e3,"a":-0}}"#
        );
        assert_eq!(
            Reply::Error(-32601, "caf\u{e9} \"x\"".into()).into_text("3"),
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"café \"x\""}}"#
        );
        assert_eq!(Reply::Message("as is".into()).into_text(id), "as is");
    }
}
