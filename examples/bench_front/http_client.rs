//! The light streamable HTTP client: one keep-alive HTTP/1.1 connection per MCP session
//! (legacy), or per client sending stateless 2026-07-28 POSTs with the standard headers
//! (modern); requests written in one piece, answers read as `application/json` or SSE.
//! No framework and no extra task per connection, so its own cost per call stays small.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::mcp::{self, Era};

/// One MCP session over streamable HTTP.
pub struct HttpSession {
    /// `host:port`
    authority: String,
    path: String,
    connection: Option<BufReader<TcpStream>>,
    session_id: Option<String>,
    protocol: Option<String>,
    next_id: u64,
    request: Vec<u8>,
    body: Vec<u8>,
    line: Vec<u8>,
    /// Whether the last answer came as an SSE stream (else plain JSON).
    pub answered_sse: bool,
    era: Era,
    /// Modern: the tool a `tools/call` names (its `Mcp-Name` header).
    tool: Option<String>,
    /// Modern: the `Mcp-Method` (and `Mcp-Name`) header lines of `headers_for`'s method.
    mcp_headers: String,
    headers_for: String,
}

/// What the client keeps of an HTTP answer's head.
struct Head {
    status: u16,
    sse: bool,
    session_id: Option<String>,
    close: bool,
}

impl HttpSession {
    /// On `url` (`http://host:port/path`): a legacy session (`initialize` +
    /// `notifications/initialized`), or a modern client (no handshake: every request a
    /// stateless POST with `MCP-Protocol-Version`, `Mcp-Method` and, for a call, `Mcp-Name`).
    pub async fn open_as(url: &str, era: Era) -> Result<HttpSession, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("not an http:// URL: {url}"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        let mut session = HttpSession {
            authority: authority.to_string(),
            path: path.to_string(),
            connection: None,
            session_id: None,
            protocol: None,
            next_id: 0,
            request: Vec::new(),
            body: Vec::new(),
            line: Vec::new(),
            answered_sse: false,
            era,
            tool: None,
            mcp_headers: String::new(),
            headers_for: String::new(),
        };
        if era == Era::Modern {
            session.protocol = Some(mcp::MODERN.to_string());
            return Ok(session);
        }
        let answer = session
            .request("initialize", mcp::INITIALIZE_PARAMS)
            .await?;
        let answer: serde_json::Value =
            serde_json::from_str(&answer).map_err(|e| format!("initialize answer: {e}"))?;
        session.protocol = answer["result"]["protocolVersion"]
            .as_str()
            .map(str::to_string);
        let body = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let head = session.round_trip("POST", body).await?;
        if head.status != 202 && head.status != 200 {
            return Err(format!(
                "notifications/initialized answered HTTP {}",
                head.status
            ));
        }
        Ok(session)
    }

    /// Modern: the tool its `tools/call`s name (their `Mcp-Name`).
    pub fn calls_tool(&mut self, tool: &str) {
        self.tool = Some(tool.to_string());
        self.headers_for.clear();
    }

    /// One request (`params` as a legacy client sends them: a modern one adds its `_meta`);
    /// the JSON-RPC response that answered it.
    pub async fn request(&mut self, method: &str, params: &str) -> Result<String, String> {
        let params = mcp::params_for(self.era, params);
        let range = self.exchange(method, &params).await?;
        Ok(String::from_utf8_lossy(&self.body[range]).into_owned())
    }

    /// One request (`params` as this era sends them), its answer left in `self.body[range]`;
    /// an error answer is an `Err`.
    pub async fn exchange(
        &mut self,
        method: &str,
        params: &str,
    ) -> Result<std::ops::Range<usize>, String> {
        self.next_id += 1;
        if self.era == Era::Modern && self.headers_for != method {
            self.mcp_headers = format!("Mcp-Method: {method}\r\n");
            if let Some(tool) = self.tool.as_ref().filter(|_| method == "tools/call") {
                self.mcp_headers.push_str(&format!("Mcp-Name: {tool}\r\n"));
            }
            self.headers_for = method.to_string();
        }
        let mut body = std::mem::take(&mut self.request);
        body.clear();
        mcp::write_request(&mut body, self.next_id, method, params);
        let result = self.round_trip("POST", &body).await;
        self.request = body;
        let head = result?;
        if head.session_id.is_some() {
            self.session_id = head.session_id;
        }
        if head.status != 200 {
            return Err(format!(
                "{method} answered HTTP {}: {}",
                head.status,
                String::from_utf8_lossy(&self.body)
            ));
        }
        self.answered_sse = head.sse;
        let wanted = self.next_id.to_string();
        let found = if head.sse {
            sse_data(&self.body).find(|range| {
                serde_json::from_slice::<mcp::Reply>(&self.body[range.clone()])
                    .is_ok_and(|reply| reply.answers(&wanted))
            })
        } else {
            Some(0..self.body.len())
        };
        let range = found.ok_or_else(|| format!("no answer to {method} in the SSE stream"))?;
        let reply: mcp::Reply = serde_json::from_slice(&self.body[range.clone()])
            .map_err(|e| format!("{method}: bad answer: {e}"))?;
        if let Some(error) = reply.error {
            return Err(format!("{method} failed: {}", error.get()));
        }
        Ok(range)
    }

    /// The bytes of the last answer's body in `range` (from [`HttpSession::exchange`]).
    pub fn body(&self, range: std::ops::Range<usize>) -> &[u8] {
        &self.body[range]
    }

    /// End the session (`DELETE`), best effort.
    pub async fn close(mut self) {
        if self.session_id.is_some() {
            let _ = self.round_trip("DELETE", b"").await;
        }
    }

    /// Send one request with `body`; the answer's head, its body in `self.body`. Reconnects
    /// once when a kept-alive connection turns out closed.
    async fn round_trip(&mut self, method: &str, body: &[u8]) -> Result<Head, String> {
        let reused = self.connection.is_some();
        match self.try_round_trip(method, body).await {
            Err(error) if reused && error.starts_with(STALE) => {
                self.connection = None;
                self.try_round_trip(method, body).await
            }
            outcome => outcome,
        }
    }

    async fn try_round_trip(&mut self, method: &str, body: &[u8]) -> Result<Head, String> {
        let mut head = Vec::with_capacity(256 + body.len());
        head.extend_from_slice(method.as_bytes());
        head.push(b' ');
        head.extend_from_slice(self.path.as_bytes());
        head.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        head.extend_from_slice(self.authority.as_bytes());
        head.extend_from_slice(
            b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
        );
        for (name, value) in [
            ("Mcp-Session-Id", &self.session_id),
            ("MCP-Protocol-Version", &self.protocol),
        ] {
            if let Some(value) = value {
                head.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
            }
        }
        if method == "POST" {
            head.extend_from_slice(self.mcp_headers.as_bytes());
        }
        head.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        head.extend_from_slice(body);

        if self.connection.is_none() {
            let stream = TcpStream::connect(&self.authority)
                .await
                .map_err(|e| format!("connect {}: {e}", self.authority))?;
            let _ = stream.set_nodelay(true);
            self.connection = Some(BufReader::new(stream));
        }
        let connection = self.connection.as_mut().expect("connected above");
        connection
            .get_mut()
            .write_all(&head)
            .await
            .map_err(|e| format!("{STALE}: write: {e}"))?;
        let (head, framing) = read_head(connection, &mut self.line).await?;
        self.body.clear();
        read_body(connection, framing, &mut self.line, &mut self.body).await?;
        if head.close {
            self.connection = None;
        }
        Ok(head)
    }
}

/// The error prefix of a connection that was closed before an answer began.
const STALE: &str = "connection closed";

/// How an answer's body ends.
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// The answer's head and how its body ends.
async fn read_head(
    connection: &mut BufReader<TcpStream>,
    line: &mut Vec<u8>,
) -> Result<(Head, Framing), String> {
    let mut head = Head {
        status: 0,
        sse: false,
        session_id: None,
        close: false,
    };
    let mut length = None;
    let mut chunked = false;
    let mut first = true;
    loop {
        line.clear();
        let n = connection
            .read_until(b'\n', line)
            .await
            .map_err(|e| format!("{STALE}: read: {e}"))?;
        if n == 0 {
            return Err(format!("{STALE} before the answer ended its head"));
        }
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end();
        if first {
            first = false;
            head.status = text
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("bad status line {text:?}"))?;
            continue;
        }
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse::<usize>().ok(),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "content-type" => head.sse = value.starts_with("text/event-stream"),
            "mcp-session-id" => head.session_id = Some(value.to_string()),
            "connection" => head.close = value.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(length)) => Framing::Length(length),
        (false, None) => {
            head.close = true;
            Framing::UntilClose
        }
    };
    Ok((head, framing))
}

/// Read a body framed by `framing` into `body`.
async fn read_body(
    connection: &mut BufReader<TcpStream>,
    framing: Framing,
    line: &mut Vec<u8>,
    body: &mut Vec<u8>,
) -> Result<(), String> {
    let read_err = |e: std::io::Error| format!("read body: {e}");
    match framing {
        Framing::Length(length) => {
            body.resize(length, 0);
            connection.read_exact(body).await.map_err(read_err)?;
        }
        Framing::UntilClose => {
            connection.read_to_end(body).await.map_err(read_err)?;
        }
        Framing::Chunked => loop {
            line.clear();
            connection.read_until(b'\n', line).await.map_err(read_err)?;
            let size = std::str::from_utf8(line)
                .ok()
                .and_then(|l| l.split(';').next())
                .and_then(|hex| usize::from_str_radix(hex.trim(), 16).ok())
                .ok_or_else(|| format!("bad chunk size {:?}", String::from_utf8_lossy(line)))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    line.clear();
                    let n = connection.read_until(b'\n', line).await.map_err(read_err)?;
                    if n == 0 || line.as_slice() == b"\r\n" || line.as_slice() == b"\n" {
                        return Ok(());
                    }
                }
            }
            let start = body.len();
            body.resize(start + size, 0);
            connection
                .read_exact(&mut body[start..])
                .await
                .map_err(read_err)?;
            line.clear();
            connection.read_until(b'\n', line).await.map_err(read_err)?;
        },
    }
    Ok(())
}

/// The `data` of each SSE event line of `stream` that has some, as byte ranges of `stream`
/// (MCP servers send each message as one `data:` line).
fn sse_data(stream: &[u8]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut offset = 0;
    stream.split(|b| *b == b'\n').filter_map(move |line| {
        let start = offset;
        offset += line.len() + 1;
        let data = line.strip_prefix(b"data:")?;
        let skip = 5 + usize::from(data.starts_with(b" "));
        let data = &line[skip..];
        let data = data.strip_suffix(b"\r").unwrap_or(data);
        (!data.is_empty()).then_some(start + skip..start + skip + data.len())
    })
}
