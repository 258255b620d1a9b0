//! Raw MCP test clients: JSON-RPC text over stdio pipes (one message a line) or streamable
//! HTTP (JSON or SSE answers), recording every message received as its exact text, in order;
//! and the transcript normalisation the transparency tests compare with.
//!
//! Nothing here parses a message into a model and writes it back: what is recorded is what
//! arrived. Requests from the server are answered by a callback with a raw `result`.

use std::ops::Range;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use super::PATIENCE;

/// Answers a server → client request: given its method and whole text, the raw `result`.
pub type Answer<'a> = &'a mut dyn FnMut(&str, &str) -> String;

/// The messages one request brought, in arrival order: notifications, server requests and
/// our answers to them (`Sent`), then its response (last).
#[derive(Debug, Default, Clone)]
pub struct Exchange {
    pub messages: Vec<Seen>,
}

/// One message of an exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Received from the server, exactly as it arrived.
    Received(String),
    /// Our answer to a server request, as sent.
    Sent(String),
}

impl Exchange {
    /// The response (the last message received).
    pub fn response(&self) -> &str {
        match self.messages.last() {
            Some(Seen::Received(text)) => text,
            _ => "",
        }
    }

    /// Every received message's text.
    pub fn received(&self) -> impl Iterator<Item = &str> {
        self.messages.iter().filter_map(|m| match m {
            Seen::Received(text) => Some(text.as_str()),
            Seen::Sent(_) => None,
        })
    }
}

/// A raw MCP client over stdio pipes or streamable HTTP.
pub struct RawClient {
    carrier: Carrier,
    next_id: u64,
    /// Every message received so far, as raw text, in order.
    pub received: Vec<String>,
}

enum Carrier {
    Stdio {
        lines: tokio::io::Lines<BufReader<Box<dyn AsyncRead + Unpin + Send>>>,
        writer: Box<dyn AsyncWrite + Unpin + Send>,
        _child: Option<Box<tokio::process::Child>>,
    },
    Http {
        client: reqwest::Client,
        url: String,
        session: Option<String>,
        version: Option<String>,
        /// MCP 2026-07-28: no session; each POST carries the standard headers its body calls for.
        modern: bool,
    },
}

/// The parts of a message the client routes on.
#[derive(serde::Deserialize)]
struct Envelope {
    id: Option<Box<RawValue>>,
    method: Option<String>,
    result: Option<Box<RawValue>>,
}

fn envelope(text: &str) -> Envelope {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not a JSON-RPC message ({e}): {text}"))
}

impl RawClient {
    /// Over a pair of pipes (e.g. `ahp-proxy serve --stdio`).
    pub fn stdio(
        reader: impl AsyncRead + Unpin + Send + 'static,
        writer: impl AsyncWrite + Unpin + Send + 'static,
    ) -> Self {
        Self::over_stdio(Box::new(reader), Box::new(writer), None)
    }

    /// Over the stdio of `program args…`, killed with the client.
    pub fn spawn(program: &str, args: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take().expect("piped stdin");
        Self::over_stdio(Box::new(stdout), Box::new(stdin), Some(Box::new(child)))
    }

    fn over_stdio(
        reader: Box<dyn AsyncRead + Unpin + Send>,
        writer: Box<dyn AsyncWrite + Unpin + Send>,
        child: Option<Box<tokio::process::Child>>,
    ) -> Self {
        Self {
            carrier: Carrier::Stdio {
                lines: BufReader::new(reader).lines(),
                writer,
                _child: child,
            },
            next_id: 1,
            received: Vec::new(),
        }
    }

    /// Over streamable HTTP at `url` (the session starts with `initialize`).
    pub fn http(url: &str) -> Self {
        // reqwest is built without a TLS provider of its own (`rustls-no-provider`): without
        // one installed its client panics, as it did here before anything else installed it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            carrier: Carrier::Http {
                client: reqwest::Client::new(),
                url: url.to_string(),
                session: None,
                version: None,
                modern: false,
            },
            next_id: 1,
            received: Vec::new(),
        }
    }

    /// Over streamable HTTP at `url` as a 2026-07-28 client: no session, and each POST
    /// carries `MCP-Protocol-Version`, `Mcp-Method` and (for a tool, prompt or resource)
    /// `Mcp-Name` as its body says. The requests carry their own `_meta`.
    pub fn http_modern(url: &str) -> Self {
        let mut client = Self::http(url);
        if let Carrier::Http { modern, .. } = &mut client.carrier {
            *modern = true;
        }
        client
    }

    /// Send `method` with raw `params` (`None`: no params member) and collect everything up
    /// to its response, answering server requests with `answer`. The response must carry
    /// our id, byte for byte.
    pub async fn request(
        &mut self,
        method: &str,
        params: Option<&str>,
        answer: Answer<'_>,
    ) -> Exchange {
        let id = self.next_id.to_string();
        self.next_id += 1;
        let params = params
            .map(|p| format!(r#","params":{p}"#))
            .unwrap_or_default();
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"{params}}}"#);
        let exchange = tokio::time::timeout(PATIENCE, self.exchange(&id, text, answer))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no response to {method} within {PATIENCE:?}; received so far:\n{}",
                    self.received.join("\n")
                )
            });
        let response = envelope(exchange.response());
        let got = response.id.as_ref().map(|id| id.get().to_string());
        assert_eq!(
            got.as_deref(),
            Some(id.as_str()),
            "the response to {method} carries our id"
        );
        if method == "initialize" {
            if let Carrier::Http { version, .. } = &mut self.carrier {
                let result: serde_json::Value = response
                    .result
                    .and_then(|r| serde_json::from_str(r.get()).ok())
                    .unwrap_or_default();
                *version = result["protocolVersion"].as_str().map(str::to_string);
            }
        }
        exchange
    }

    /// The HTTP session's id, once `initialize` opened one.
    pub fn session(&self) -> Option<String> {
        match &self.carrier {
            Carrier::Http { session, .. } => session.clone(),
            Carrier::Stdio { .. } => None,
        }
    }

    /// Send a notification (raw params).
    pub async fn notify(&mut self, method: &str, params: Option<&str>) {
        let params = params
            .map(|p| format!(r#","params":{p}"#))
            .unwrap_or_default();
        let text = format!(r#"{{"jsonrpc":"2.0","method":"{method}"{params}}}"#);
        self.deliver(text, method).await;
    }

    /// Send a message that gets no JSON-RPC answer (a notification or a response).
    async fn deliver(&mut self, text: String, what: &str) {
        match &mut self.carrier {
            Carrier::Stdio { writer, .. } => write_line(writer, &text).await,
            Carrier::Http { .. } => {
                let response = self.post(text).await;
                let status = response.status();
                assert!(status.is_success(), "{what}: HTTP {status}");
            }
        }
    }

    async fn exchange(&mut self, id: &str, text: String, answer: Answer<'_>) -> Exchange {
        let mut exchange = Exchange::default();
        if matches!(self.carrier, Carrier::Stdio { .. }) {
            self.send_line(&text).await;
            loop {
                let line = self.next_line().await;
                if line.trim().is_empty() {
                    continue;
                }
                if self.take(&mut exchange, id, line, &mut *answer).await {
                    return exchange;
                }
            }
        }
        let response = self.post(text).await;
        if let Some(session) = response.headers().get("mcp-session-id") {
            if let Carrier::Http { session: slot, .. } = &mut self.carrier {
                *slot = session.to_str().ok().map(str::to_string);
            }
        }
        let status = response.status();
        let sse = (response.headers().get("content-type"))
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !sse {
            let body = response.text().await.expect("response body");
            // 2026-07-28 answers a refusal (`-32021`, `-32601`…) with a 4xx and its JSON-RPC
            // error: the error is the exchange's answer.
            let modern = matches!(self.carrier, Carrier::Http { modern: true, .. });
            let refusal = modern && status.is_client_error() && envelope(&body).result.is_none();
            assert!(status.is_success() || refusal, "HTTP {status}: {body}");
            self.take(&mut exchange, id, body, &mut *answer).await;
            return exchange;
        }
        let mut events = EventReader::default();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.expect("SSE chunk");
            for data in events.feed(&chunk) {
                if self.take(&mut exchange, id, data, &mut *answer).await {
                    return exchange;
                }
            }
        }
        panic!(
            "the SSE stream ended before the response; this exchange so far: {:?}",
            exchange.messages
        )
    }

    /// Record one received message, answering it if it is a request; true when it is our
    /// response.
    async fn take(
        &mut self,
        exchange: &mut Exchange,
        id: &str,
        text: String,
        answer: Answer<'_>,
    ) -> bool {
        let message = envelope(&text);
        self.received.push(text.clone());
        exchange.messages.push(Seen::Received(text.clone()));
        let their_id = message.id.as_ref().map(|i| i.get().to_string());
        match (message.method, their_id) {
            (Some(method), Some(their_id)) => {
                let result = answer(&method, &text);
                let reply = format!(r#"{{"jsonrpc":"2.0","id":{their_id},"result":{result}}}"#);
                exchange.messages.push(Seen::Sent(reply.clone()));
                self.deliver(reply, &format!("the answer to {method}"))
                    .await;
                false
            }
            (None, Some(their_id)) => their_id == id,
            _ => false,
        }
    }

    /// Write `text` as one line on stdio, as it is (a message no serialiser would write).
    pub async fn send_raw_line(&mut self, text: &str) {
        self.send_line(text).await;
    }

    /// The next line the proxy writes on stdio, within [`PATIENCE`].
    pub async fn read_line(&mut self) -> String {
        self.read_line_within(PATIENCE).await
    }

    /// The next line the proxy writes on stdio, within `patience` (a hang guard).
    pub async fn read_line_within(&mut self, patience: std::time::Duration) -> String {
        tokio::time::timeout(patience, self.next_line())
            .await
            .expect("a line within the patience")
    }

    async fn send_line(&mut self, text: &str) {
        if let Carrier::Stdio { writer, .. } = &mut self.carrier {
            write_line(writer, text).await;
        }
    }

    async fn next_line(&mut self) -> String {
        let Carrier::Stdio { lines, .. } = &mut self.carrier else {
            unreachable!("stdio only")
        };
        match lines.next_line().await {
            Ok(Some(line)) => line,
            other => panic!(
                "stdout ended ({other:?}); received so far:\n{}",
                self.received.join("\n")
            ),
        }
    }

    async fn post(&self, body: String) -> reqwest::Response {
        let Carrier::Http {
            client,
            url,
            session,
            version,
            modern,
        } = &self.carrier
        else {
            unreachable!("HTTP only")
        };
        let standard = if *modern {
            standard_headers(&body)
        } else {
            Vec::new()
        };
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(version) = version {
            request = request.header("mcp-protocol-version", version);
        }
        for (name, value) in standard {
            request = request.header(name, value);
        }
        request.send().await.expect("POST")
    }
}

/// The 2026-07-28 standard headers of a request `body`: version, method, and the name of the
/// tool, prompt, resource or task it names.
fn standard_headers(body: &str) -> Vec<(&'static str, String)> {
    let message: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let mut headers = vec![("mcp-protocol-version", "2026-07-28".to_string())];
    let Some(method) = message["method"].as_str() else {
        return headers; // an answer to a server request
    };
    headers.push(("mcp-method", method.to_string()));
    let name = match method {
        "tools/call" | "prompts/get" => message["params"]["name"].as_str(),
        "resources/read" => message["params"]["uri"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => message["params"]["taskId"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        headers.push(("mcp-name", name.to_string()));
    }
    headers
}

async fn write_line(writer: &mut (dyn AsyncWrite + Unpin + Send), text: &str) {
    writer.write_all(text.as_bytes()).await.expect("write");
    writer.write_all(b"\n").await.expect("write");
    writer.flush().await.expect("flush");
}

/// Server-sent events, incrementally: the `data` of each complete event with data (priming
/// events, which carry none, are skipped).
#[derive(Default)]
pub struct EventReader {
    pending: Vec<u8>,
    data: Option<String>,
}

impl EventReader {
    /// Feed a chunk; returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if let Some(data) = self.data.take().filter(|d| !d.is_empty()) {
                    out.push(data);
                }
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            if field == "data" {
                let value = value.strip_prefix(' ').unwrap_or(value);
                match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                }
            }
        }
        out
    }
}

/// Wait until something accepts TCP connections at the host and port of `url`.
pub async fn wait_listening(url: &str) {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("a URL with a host");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::net::TcpStream::connect(authority).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing listens at {url}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `text` with the value of the top-level `id` replaced by `"<id>"` and, in
/// `notifications/progress`, the value of `params.progressToken` by `"<progress-token>"`.
/// Every other byte stays.
pub fn normalize(text: &str) -> String {
    let mut edits = Vec::new();
    let whole = 0..text.len();
    if let Some(span) = member(text, whole.clone(), "id") {
        edits.push((span, "\"<id>\""));
    }
    let is_progress = member(text, whole.clone(), "method")
        .is_some_and(|span| &text[span] == "\"notifications/progress\"");
    if is_progress {
        if let Some(params) = member(text, whole, "params") {
            if let Some(span) = member(text, params, "progressToken") {
                edits.push((span, "\"<progress-token>\""));
            }
        }
    }
    edits.sort_by_key(|(span, _)| span.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (span, with) in edits {
        out.push_str(&text[at..span.start]);
        out.push_str(with);
        at = span.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The span of the value of member `key` of the object spanning `object` in `text`.
pub fn member(text: &str, object: Range<usize>, key: &str) -> Option<Range<usize>> {
    let within = text.get(object.clone())?;
    let members: std::collections::HashMap<String, &RawValue> =
        serde_json::from_str(within).ok()?;
    let value = members.get(key)?.get();
    let start = object.start + (value.as_ptr() as usize - within.as_ptr() as usize);
    Some(start..start + value.len())
}
