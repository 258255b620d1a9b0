//! The streamable HTTP carrier of the raw server (MCP 2025-11-25) on `/mcp`: a session per
//! `initialize`, a JSON answer when a request's reply comes first and an SSE stream when
//! anything comes before it (or always, as an option), resumable streams (`Last-Event-ID`),
//! requests without a session when asked (2026-07-28),
//! and a loopback Host/Origin guard.
//!
//! Events are `id: <stream>-<index>`; with `retry` set, every stream starts with a priming
//! event (`id`, `retry`, empty data) at index 0. A request's messages and its reply ride its
//! own POST stream, in order; the standalone GET stream stays open and carries nothing.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use tokio::sync::mpsc;

use super::{classify, lock, start, Frame, Handler, Incoming, Peer, Reply};

type Body = BoxBody<Bytes, Infallible>;

/// The largest request body accepted.
const MAX_BODY: usize = 4 << 20;
/// Streams kept per session for resuming clients.
const KEPT_STREAMS: usize = 32;

/// How the carrier behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Start every SSE stream with a priming event carrying this `retry` (milliseconds).
    pub retry_ms: Option<u64>,
    /// Answer every request with an SSE stream, even when the reply comes first.
    pub always_sse: bool,
    /// Serve requests without `Mcp-Session-Id` (MCP 2026-07-28: no handshake, no session),
    /// all of them by one handler; `initialize` still opens a session.
    pub stateless: bool,
}

/// Serve a `new_session()` handler per MCP session on `http://<addr>/mcp` until the process
/// ends; 1 when `addr` cannot be bound.
pub async fn serve<H, F>(new_session: F, addr: SocketAddr, options: Options) -> i32
where
    H: Handler,
    F: Fn() -> H + Send + Sync + 'static,
{
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("example-server: cannot listen on {addr}: {error}");
            return 1;
        }
    };
    let server = Arc::new(Server {
        new_session,
        sessions: Mutex::new(HashMap::new()),
        sessionless: std::sync::OnceLock::new(),
        counter: AtomicU64::new(1),
        salt: std::process::id() as u64,
        options,
        bound: addr,
    });
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        // Events are small writes: without this, Nagle holds each one for the client's ACK.
        let _ = socket.set_nodelay(true);
        let server = server.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(server.handle(request).await) }
            });
            let _ =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                    .await;
        });
    }
}

struct Server<H, F> {
    new_session: F,
    sessions: Mutex<HashMap<String, Arc<Session<H>>>>,
    /// The handler of requests without a session (`Options::stateless`).
    sessionless: std::sync::OnceLock<Arc<Session<H>>>,
    counter: AtomicU64,
    salt: u64,
    options: Options,
    bound: SocketAddr,
}

struct Session<H> {
    handler: Arc<H>,
    peer: Arc<Peer>,
    streams: Mutex<Streams>,
}

#[derive(Default)]
struct Streams {
    next: u64,
    logs: VecDeque<Arc<Mutex<Log>>>,
    /// The open GET stream, kept so it stays open.
    standalone: Option<mpsc::UnboundedSender<Bytes>>,
}

/// Every event of one SSE stream, for resuming clients, and where they go live.
struct Log {
    stream: u64,
    events: Vec<Bytes>,
    live: Option<mpsc::UnboundedSender<Bytes>>,
    done: bool,
}

impl Log {
    fn push(&mut self, data: &str) {
        let mut event = format!("id: {}-{}\n", self.stream, self.events.len());
        for line in data.split('\n') {
            event.push_str("data: ");
            event.push_str(line);
            event.push('\n');
        }
        event.push('\n');
        self.push_event(Bytes::from(event));
    }

    fn push_event(&mut self, event: Bytes) {
        if let Some(live) = &self.live {
            if live.send(event.clone()).is_err() {
                self.live = None;
            }
        }
        self.events.push(event);
    }
}

impl<H, F> Server<H, F>
where
    H: Handler,
    F: Fn() -> H + Send + Sync + 'static,
{
    async fn handle(&self, request: Request<hyper::body::Incoming>) -> Response<Body> {
        if request.uri().path() != "/mcp" {
            return plain(StatusCode::NOT_FOUND, "not found: MCP is served on /mcp");
        }
        if !trusted(request.headers(), self.bound.ip()) {
            let error = Reply::Error(-32000, "Forbidden: Host or Origin not allowed".into());
            return json(StatusCode::FORBIDDEN, error.into_text("null"));
        }
        let session_id = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let session = session_id.as_ref().map(|id| self.session(id));
        if let Some(None) = &session {
            let error = Reply::Error(-32001, "Session not found".into());
            return json(StatusCode::NOT_FOUND, error.into_text("null"));
        }
        let session = session.flatten();
        match *request.method() {
            Method::POST => self.post(request, session).await,
            Method::GET => match session {
                Some(session) => self.get(request.headers(), &session),
                None => plain(StatusCode::BAD_REQUEST, "missing Mcp-Session-Id"),
            },
            Method::DELETE => match session_id {
                Some(id) => {
                    if let Some(session) = lock(&self.sessions).remove(&id) {
                        session.peer.close();
                        lock(&session.streams).standalone = None;
                    }
                    plain(StatusCode::OK, "")
                }
                None => plain(StatusCode::BAD_REQUEST, "missing Mcp-Session-Id"),
            },
            _ => plain(StatusCode::METHOD_NOT_ALLOWED, "POST, GET or DELETE"),
        }
    }

    fn new_session(&self) -> Arc<Session<H>> {
        Arc::new(Session {
            handler: Arc::new((self.new_session)()),
            peer: Arc::new(Peer::default()),
            streams: Mutex::new(Streams::default()),
        })
    }

    fn session(&self, id: &str) -> Option<Arc<Session<H>>> {
        lock(&self.sessions).get(id).cloned()
    }

    async fn post(
        &self,
        request: Request<hyper::body::Incoming>,
        session: Option<Arc<Session<H>>>,
    ) -> Response<Body> {
        let body = match http_body_util::Limited::new(request.into_body(), MAX_BODY)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "body too large or broken"),
        };
        let Ok(text) = std::str::from_utf8(&body) else {
            let error = Reply::Error(-32700, "Parse error: not UTF-8".into());
            return json(StatusCode::BAD_REQUEST, error.into_text("null"));
        };
        match (classify(text), session) {
            (Incoming::Invalid(error), _) => json(StatusCode::BAD_REQUEST, error),
            (Incoming::Request { id, method, params }, None) if method == "initialize" => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                let session_id = format!("{:08x}{n:08x}", self.salt);
                let session = self.new_session();
                lock(&self.sessions).insert(session_id.clone(), session.clone());
                let frames = start(&session.handler, &session.peer, id, method, params);
                let mut response = self.respond(&session, frames).await;
                if let Ok(value) = http::HeaderValue::from_str(&session_id) {
                    response.headers_mut().insert("mcp-session-id", value);
                }
                response
            }
            (Incoming::Request { id, method, params }, None) if self.options.stateless => {
                let session = self.sessionless.get_or_init(|| self.new_session());
                let frames = start(&session.handler, &session.peer, id, method, params);
                self.respond(session, frames).await
            }
            (Incoming::Notification { .. }, None) if self.options.stateless => {
                plain(StatusCode::ACCEPTED, "")
            }
            (_, None) => {
                let error = Reply::Error(-32000, "Bad Request: missing Mcp-Session-Id".into());
                json(StatusCode::BAD_REQUEST, error.into_text("null"))
            }
            (Incoming::Request { id, method, params }, Some(session)) => {
                let frames = start(&session.handler, &session.peer, id, method, params);
                self.respond(&session, frames).await
            }
            (Incoming::Notification { method, params }, Some(session)) => {
                session.handler.notification(&method, params.as_deref());
                plain(StatusCode::ACCEPTED, "")
            }
            (Incoming::Response { id, text }, Some(session)) => {
                session.peer.answer(&id, text);
                plain(StatusCode::ACCEPTED, "")
            }
        }
    }

    /// JSON when the reply comes first, else an SSE stream carrying everything in order.
    async fn respond(
        &self,
        session: &Session<H>,
        mut frames: mpsc::UnboundedReceiver<Frame>,
    ) -> Response<Body> {
        let first = match frames.recv().await {
            Some(Frame::Reply(text)) if !self.options.always_sse => {
                return json(StatusCode::OK, text)
            }
            Some(frame) => frame,
            None => return plain(StatusCode::INTERNAL_SERVER_ERROR, "the handler failed"),
        };
        let (live, events) = mpsc::unbounded_channel();
        let log = {
            let mut streams = lock(&session.streams);
            streams.next += 1;
            let log = Arc::new(Mutex::new(Log {
                stream: streams.next,
                events: Vec::new(),
                live: Some(live),
                done: false,
            }));
            streams.logs.push_back(log.clone());
            if streams.logs.len() > KEPT_STREAMS {
                streams.logs.pop_front();
            }
            log
        };
        if let Some(retry) = self.options.retry_ms {
            let mut log = lock(&log);
            let priming = format!("id: {}-0\nretry: {retry}\ndata: \n\n", log.stream);
            log.push_event(Bytes::from(priming));
        }
        tokio::spawn(async move {
            let mut next = Some(first);
            loop {
                let frame = match next.take() {
                    Some(frame) => frame,
                    None => match frames.recv().await {
                        Some(frame) => frame,
                        None => break,
                    },
                };
                let mut log = lock(&log);
                match frame {
                    Frame::Message(text) => log.push(&text),
                    Frame::Close => log.live = None,
                    Frame::Reply(text) => {
                        log.push(&text);
                        log.done = true;
                        log.live = None;
                        break;
                    }
                }
            }
        });
        sse(events)
    }

    fn get(&self, headers: &HeaderMap, session: &Session<H>) -> Response<Body> {
        let (live, events) = mpsc::unbounded_channel();
        let Some(last) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) else {
            lock(&session.streams).standalone = Some(live);
            return sse(events);
        };
        let resumed = last.split_once('-').and_then(|(stream, index)| {
            let stream: u64 = stream.parse().ok()?;
            let index: usize = index.parse().ok()?;
            let streams = lock(&session.streams);
            let log = streams.logs.iter().find(|l| lock(l).stream == stream)?;
            Some((log.clone(), index))
        });
        let Some((log, index)) = resumed else {
            return plain(StatusCode::NOT_FOUND, "unknown Last-Event-ID");
        };
        let mut log = lock(&log);
        for event in log.events.iter().skip(index + 1) {
            let _ = live.send(event.clone());
        }
        if !log.done {
            log.live = Some(live);
        }
        sse(events)
    }
}

/// Loopback only (DNS-rebinding guard): the Host, and the Origin when one is sent, must name
/// localhost, a loopback address or the address the server is bound to.
fn trusted(headers: &HeaderMap, bound: std::net::IpAddr) -> bool {
    let allowed = |authority: &str| {
        let host = match authority.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or_default(),
            None => authority.split(':').next().unwrap_or_default(),
        };
        host.eq_ignore_ascii_case("localhost")
            || host == "127.0.0.1"
            || host == "::1"
            || host == bound.to_string()
    };
    let header = |name: header::HeaderName| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("\u{0}").to_string())
    };
    let host_ok = header(header::HOST).is_none_or(|host| allowed(&host));
    let origin_ok = header(header::ORIGIN).is_none_or(|origin| {
        let rest = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        rest.is_some_and(|rest| allowed(rest.split('/').next().unwrap_or_default()))
    });
    host_ok && origin_ok
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}

fn json(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    let value = http::HeaderValue::from_static("application/json");
    response.headers_mut().insert(header::CONTENT_TYPE, value);
    response
}

fn sse(events: mpsc::UnboundedReceiver<Bytes>) -> Response<Body> {
    let stream = futures_util::stream::unfold(events, |mut events| async move {
        let event = events.recv().await?;
        Some((Ok(hyper::body::Frame::data(event)), events))
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    let headers = response.headers_mut();
    let value = http::HeaderValue::from_static("text/event-stream");
    headers.insert(header::CONTENT_TYPE, value);
    headers.insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_loopback_hosts_and_origins_are_trusted() {
        let bound: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        for good in [
            &[("host", "127.0.0.1:3000")][..],
            &[("host", "localhost"), ("origin", "http://localhost:5173")],
            &[("host", "[::1]:80"), ("origin", "https://127.0.0.1")],
            &[],
        ] {
            assert!(trusted(&headers(good), bound), "{good:?}");
        }
        for bad in [
            &[("host", "evil.example.com")][..],
            &[
                ("host", "localhost:3000"),
                ("origin", "http://evil.example.com"),
            ],
            &[("host", "127.0.0.1.evil.example.com")],
            &[("host", "localhost"), ("origin", "null")],
        ] {
            assert!(!trusted(&headers(bad), bound), "{bad:?}");
        }
    }

    #[test]
    fn a_resumed_stream_replays_what_came_after_the_last_event() {
        let (live, mut events) = mpsc::unbounded_channel();
        let mut log = Log {
            stream: 7,
            events: Vec::new(),
            live: Some(live),
            done: false,
        };
        log.push("{\"a\":1}");
        log.live = None; // the client went away
        log.push("line one\nline two");
        assert_eq!(events.try_recv().unwrap(), "id: 7-0\ndata: {\"a\":1}\n\n");
        assert!(
            events.try_recv().is_err(),
            "nothing live after the stream closed"
        );
        assert_eq!(
            log.events[1], "id: 7-1\ndata: line one\ndata: line two\n\n",
            "kept for a resuming client, one data line per line"
        );
    }
}
