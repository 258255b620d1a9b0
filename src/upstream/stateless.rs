//! The link to a modern (2026-07-28) streamable HTTP server: no session, no GET stream, no
//! resumption. Each request is its own POST carrying the standard headers
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, a tool's `Mcp-Param-*` as its
//! `tools/list` annotated them); its answer comes back as JSON or as an event stream read in
//! order. Cancelling a request closes its POST.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use http::Method;
use tokio_util::sync::CancellationToken;

use super::era::{self, Verdict, MODERN};
use super::exchange::{Answer, Client};
use super::http::{authority, is_event_stream, read_body, refusal, Refusal, Target};
use super::param_headers::{self, Param};
use super::session::{Link, Session, Unanswered, WeakSession};
use super::stdio::MAX_MESSAGE_BYTES;
use crate::mcp::message::{Kind, Message};
use crate::mcp::sse;

const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

struct Shared {
    client: Client,
    /// `host:port`, safe to show.
    at: String,
    /// Configured headers plus what every POST carries.
    headers: HeaderMap,
    session: OnceLock<WeakSession>,
    on_refusal: Arc<dyn Fn(Refusal) + Send + Sync>,
    closed: CancellationToken,
    /// Requests in flight by id: cancelling one closes its POST.
    posts: Mutex<HashMap<u64, CancellationToken>>,
    /// The `x-mcp-header` arguments of each tool, as its `tools/list` said.
    params: Mutex<HashMap<String, Vec<Param>>>,
}

struct Stateless(Arc<Shared>);

/// The headers every modern POST carries besides the per-request ones.
fn base_headers(mut headers: HeaderMap) -> HeaderMap {
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(VERSION_HEADER, HeaderValue::from_static(MODERN));
    headers
}

/// A session with the modern HTTP server at `target`.
pub fn connect(client: reqwest::Client, target: Target) -> Session {
    let shared = Arc::new(Shared {
        at: authority(&target.url),
        client: Client::new(client, target.url),
        headers: base_headers(target.headers),
        session: OnceLock::new(),
        on_refusal: target.on_refusal,
        closed: CancellationToken::new(),
        posts: Mutex::default(),
        params: Mutex::default(),
    });
    let session = Session::new(Box::new(Stateless(shared.clone())));
    let _ = shared.session.set(session.downgrade());
    session
}

impl Link for Stateless {
    fn send(&self, text: String, request: Option<u64>) -> Result<(), Unanswered> {
        let shared = &self.0;
        if shared.closed.is_cancelled() {
            return Err(Unanswered::Stopped);
        }
        let Some(id) = request else {
            // Over HTTP a modern client sends no notifications; a cancellation closes the
            // request's POST.
            if let Some(id) = cancelled_request(&text) {
                let posts = shared.posts.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(cancel) = posts.get(&id) {
                    cancel.cancel();
                }
            }
            return Ok(());
        };
        let cancel = shared.closed.child_token();
        shared
            .posts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, cancel.clone());
        let shared = shared.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = post(&shared, text, id) => {}
                _ = cancel.cancelled() => {}
            }
            shared
                .posts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        });
        Ok(())
    }

    fn close(&self) {
        self.0.closed.cancel();
    }
}

/// The request id a `notifications/cancelled` names.
fn cancelled_request(text: &str) -> Option<u64> {
    let message = Message::parse(text.to_string()).ok()?;
    if message.method() != Some("notifications/cancelled") {
        return None;
    }
    message.slice(message.find(&["requestId"])?).parse().ok()
}

/// The standard headers of one request: `Mcp-Method`, `Mcp-Name` for the methods that name
/// something, and a tool call's `Mcp-Param-*`.
fn request_headers(shared: &Shared, request: &Message) -> HeaderMap {
    let mut headers = name_headers(&shared.headers, request);
    if request.method() != Some("tools/call") {
        return headers;
    }
    let tool = request.string(&["name"]).unwrap_or_default();
    let params = shared.params.lock().unwrap_or_else(|p| p.into_inner());
    let Some(params) = params.get(tool.as_ref()) else {
        return headers;
    };
    let arguments = request
        .find(&["arguments"])
        .and_then(|span| serde_json::from_str(request.slice(span)).ok())
        .unwrap_or_default();
    for (name, value) in param_headers::values(params, &arguments) {
        let name = HeaderName::from_bytes(name.as_bytes());
        let value = HeaderValue::from_str(&header_value(&value));
        if let (Ok(name), Ok(value)) = (name, value) {
            headers.insert(name, value);
        }
    }
    headers
}

/// A `tools/list` answer: its tools' annotated arguments learned, the tools whose
/// annotations are invalid left out (and logged).
fn listed(shared: &Shared, answer: Message) -> Message {
    let Some(span) = answer.body().filter(|_| answer.kind() == Kind::Result) else {
        return answer;
    };
    let listed = param_headers::read_list(answer.slice(span.clone()));
    for (tool, why) in &listed.dropped {
        tracing::warn!(server = %shared.at, %tool, "a tool is left out of the list: {why}");
    }
    (shared.params.lock().unwrap_or_else(|p| p.into_inner())).extend(listed.params);
    match listed.kept {
        Some(kept) => answer.rewrite(None, vec![(span, kept)]),
        None => answer,
    }
}

/// `Mcp-Method`, and `Mcp-Name` for the methods that name something.
fn name_headers(base: &HeaderMap, request: &Message) -> HeaderMap {
    let mut headers = base.clone();
    let method = request.method().unwrap_or_default();
    if let Ok(value) = HeaderValue::from_str(method) {
        headers.insert(METHOD_HEADER, value);
    }
    let name = match method {
        "tools/call" | "prompts/get" => request.string(&["name"]),
        "resources/read" => request.string(&["uri"]),
        // The Tasks extension (`io.modelcontextprotocol/tasks`): the task it names.
        "tasks/get" | "tasks/update" | "tasks/cancel" => request.string(&["taskId"]),
        _ => None,
    };
    if let Some(value) = name.and_then(|n| HeaderValue::from_str(&header_value(&n)).ok()) {
        headers.insert(NAME_HEADER, value);
    }
    headers
}

/// A header value as 2026-07-28 writes one: as is when it is plain visible ASCII, else
/// `=?base64?…?=`.
pub fn header_value(value: &str) -> String {
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let visible = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let plain = !value.is_empty() && visible && !padded && !sentinel;
    if plain {
        value.to_string()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
        format!("=?base64?{encoded}?=")
    }
}

/// POST request `id` and hand what comes back to the session.
async fn post(shared: &Shared, text: String, id: u64) {
    let fail = |failure: Unanswered| {
        if let Some(session) = shared.session.get().and_then(WeakSession::upgrade) {
            session.failed(id, failure);
        }
    };
    let request = Message::parse(text.clone()).ok();
    let lists_tools = request.as_ref().and_then(Message::method) == Some("tools/list");
    let headers = match &request {
        Some(request) => request_headers(shared, request),
        None => shared.headers.clone(),
    };
    let answer = match shared
        .client
        .send(Method::POST, headers, Some(Bytes::from(text)))
        .await
    {
        Ok(answer) => answer,
        Err(error) => return fail(Unanswered::Undelivered(error.describe(&shared.at))),
    };
    if let Some(refused) = refusal(answer.status(), answer.headers()) {
        (shared.on_refusal)(refused.clone());
        return fail(refused.into());
    }
    let status = answer.status();
    let Some(session) = shared.session.get().and_then(WeakSession::upgrade) else {
        return;
    };
    let read = read_reply(answer, |message| {
        let message = match message.kind() {
            Kind::Result if lists_tools => listed(shared, message),
            _ => message,
        };
        session.receive(message, Some(id))
    })
    .await;
    if !session.is_pending(id) {
        return;
    }
    fail(match read {
        Err(failure) if status.is_success() => failure,
        Ok(()) if status.is_success() => Unanswered::Undelivered(format!(
            "{} closed the response stream before answering",
            shared.at
        )),
        _ => Unanswered::Undelivered(format!("{} answered HTTP {status}", shared.at)),
    })
}

/// Read one reply, JSON or an event stream, handing each message on in order.
async fn read_reply(mut answer: Answer, mut each: impl FnMut(Message)) -> Result<(), Unanswered> {
    if !is_event_stream(answer.headers()) {
        let body = read_body(answer).await?;
        let lines = body.trim().lines().count();
        if lines == 0 {
            return Ok(());
        }
        match Message::parse(body) {
            Ok(message) => each(message),
            // Said, not taken for a stream that ended early (issue 46).
            Err(invalid) => {
                let what = match lines {
                    1 => "the answer under application/json is not a JSON-RPC message".into(),
                    n => format!("the answer is {n} lines of JSON under application/json (newline-delimited JSON is no MCP answer: one JSON-RPC message, or text/event-stream)"),
                };
                let why = format!("{what}: {}", invalid.message);
                return Err(Unanswered::Undelivered(why));
            }
        }
        return Ok(());
    }
    let mut reader = sse::Reader::new(MAX_MESSAGE_BYTES);
    let mut events = Vec::new();
    while let Some(chunk) = answer.chunk().await {
        let chunk =
            chunk.map_err(|_| Unanswered::Undelivered("the response was cut short".into()))?;
        reader.feed(&chunk, &mut events).map_err(|_| {
            Unanswered::Undelivered("an event of the response is larger than 16 MiB".into())
        })?;
        for event in events.drain(..) {
            if (event.event.is_empty() || event.event == "message") && !event.data.is_empty() {
                if let Ok(message) = Message::parse(event.data) {
                    each(message);
                }
            }
        }
    }
    Ok(())
}

/// Why an HTTP probe found no era.
#[derive(Debug)]
pub enum ProbeFailure {
    /// 401/403: a question of credentials, not of era.
    Refused(Refusal),
    /// A 5xx, a timeout, an unreachable server: an outage, not an era.
    Outage(String),
}

/// POST `server/discover` with the modern headers and read what the answer says: a
/// result or a modern error body ⇒ modern; a 4xx without one ⇒ legacy.
pub async fn probe(
    client: reqwest::Client,
    target: &Target,
    params: &str,
    timeout: Duration,
) -> Result<Verdict, ProbeFailure> {
    let at = authority(&target.url);
    let client = Client::new(client, target.url.clone());
    let mut headers = base_headers(target.headers.clone());
    headers.insert(METHOD_HEADER, HeaderValue::from_static("server/discover"));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"ahp-proxy-probe","method":"server/discover","params":{params}}}"#
    );
    let exchange = async {
        let answer = client
            .send(Method::POST, headers, Some(Bytes::from(body)))
            .await
            .map_err(|e| ProbeFailure::Outage(e.describe(&at)))?;
        let status = answer.status();
        if let Some(refused) = refusal(status, answer.headers()) {
            return Err(ProbeFailure::Refused(refused));
        }
        if status.is_server_error() {
            return Err(ProbeFailure::Outage(format!(
                "{at} answered server/discover with HTTP {status}"
            )));
        }
        let mut found = None;
        let _ = read_reply(answer, |message| {
            // A refusal of the request as a whole may come with a null id.
            if matches!(message.id(), Some("\"ahp-proxy-probe\"" | "null")) {
                found = Some(era::classify(&message));
            }
        })
        .await;
        Ok(found.unwrap_or(Verdict::Legacy))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| {
            Err(ProbeFailure::Outage(format!(
                "{at} did not answer server/discover within {} ms",
                timeout.as_millis()
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(header_value("echo"), "echo");
        assert_eq!(header_value("file:///a b"), "file:///a b");
        assert_eq!(header_value(" lead"), "=?base64?IGxlYWQ=?=");
        assert_eq!(header_value("café"), "=?base64?Y2Fmw6k=?=");
    }

    #[test]
    fn the_name_header_says_what_a_request_names() {
        let name = |text: &str| {
            let request = Message::parse(text.to_string()).unwrap();
            let headers = name_headers(&HeaderMap::new(), &request);
            headers
                .get(NAME_HEADER)
                .map(|v| v.to_str().unwrap().to_string())
        };
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
        assert_eq!(name(call).as_deref(), Some("echo"));
        let task = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-1"}}"#;
        assert_eq!(name(task).as_deref(), Some("t-1"));
        let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
        assert_eq!(name(list), None);
    }

    /// One HTTP answer with `body` under `application/json`, read as a request's reply.
    async fn reply_of(body: &'static str) -> (Vec<String>, Result<(), Unanswered>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(format!("{head}{body}").as_bytes()).await;
        });
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::new(reqwest::Client::new(), url.parse().unwrap());
        let body = Some(Bytes::from_static(b"{}"));
        let answer = client.send(Method::POST, HeaderMap::new(), body).await;
        let mut seen = Vec::new();
        let read = read_reply(answer.ok().unwrap(), |m| seen.push(m.into_text())).await;
        (seen, read)
    }

    #[tokio::test]
    async fn newline_delimited_json_under_application_json_is_said_so() {
        let ndjson = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
        let (seen, read) = reply_of(ndjson).await;
        let Err(Unanswered::Undelivered(why)) = read else {
            panic!("{read:?}")
        };
        assert!(
            why.contains("2 lines of JSON under application/json"),
            "{why}"
        );
        assert!(seen.is_empty());
        let (seen, read) = reply_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}").await;
        assert!(read.is_ok() && seen.len() == 1, "{read:?}");
    }

    #[test]
    fn a_cancellation_names_its_request() {
        let text = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12,"reason":"x"}}"#;
        assert_eq!(cancelled_request(text), Some(12));
        assert_eq!(
            cancelled_request(r#"{"jsonrpc":"2.0","method":"notifications/x"}"#),
            None
        );
    }
}
