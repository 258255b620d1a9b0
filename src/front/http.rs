//! The MCP front over streamable HTTP (hyper): `/mcp` is the aggregated endpoint,
//! `/mcp/<server>` one server's own. A POSTed request is answered as plain JSON when its
//! answer is the first thing to send, else as an event stream carrying what the server sent
//! about it first; GET opens the session's stream for everything else; DELETE ends it.
//! `Host` and `Origin` are checked against DNS rebinding; loopback by default; then the
//! access token, when one is in effect (`http_auth`). `GET /healthz` answers the proxy's
//! health summary, open to all.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::{Frame as BodyFrame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::answers::error_answer;
use super::fairness::{Client, Ticket};
use super::harness::Harness;
use super::http_auth::{metadata_for, Auth};
use super::http_reply::{empty, json, json_error, plain, sse_response, Body};
use super::http_sessions::{sweep, Session, Sessions};
use super::hub::Hub;
use super::outbox::{Outgoing, Stream};
use super::registry::Scope;
use crate::mcp::era::{self, Era};
use crate::mcp::message::{Kind, Message};
use crate::mcp::{sse, version};
use crate::tcp::{Conn, Serving};
use crate::upstream::stdio::MAX_MESSAGE_BYTES;

/// The session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// How long a POST's answer may take to be sent as plain JSON; a later one (or one that
/// comes after notifications about it) is sent as a resumable event stream.
const JSON_WITHIN: Duration = Duration::from_millis(100);
/// The body of the `503` a connection beyond `max_connections` gets.
const BUSY: &str = "too many open connections to the MCP front; retry shortly\n";

/// What one client may hold of the MCP HTTP front.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Open TCP connections; one more is answered `503` and closed.
    pub max_connections: usize,
    /// Live sessions; an `initialize` past this is answered `503`.
    pub max_sessions: usize,
    /// How long a request's headers, and then its body, may take to arrive; a peer that
    /// sends them slower is cut off (`408` for a body) instead of holding a connection.
    pub read_timeout: Duration,
}

/// Who may use the front: the `Host` names it answers to and the access token.
#[derive(Debug, Default)]
pub struct Access {
    /// `Host` headers accepted besides loopback names and the listen address.
    pub allowed_hosts: Vec<String>,
    /// The token every request but `/healthz` and the metadata must present, if any.
    pub token: Option<String>,
}

/// `GET /healthz`'s JSON body, worked out when asked (the serve wiring's summary).
pub type Health = Arc<dyn Fn() -> String + Send + Sync>;

/// Sessions and endpoints.
struct Front {
    hub: Arc<Hub>,
    health: Health,
    /// Accepted `Host` headers.
    hosts: Vec<String>,
    auth: Auth,
    sessions: Arc<Sessions>,
    bounds: Bounds,
}

/// Bind the MCP HTTP front.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen for MCP on {addr}: {e}"))
}

/// Serve until `shutdown`, then wait (briefly) for open connections to finish. Requests must
/// name a loopback host, the listen address, or one of `allowed_hosts` in `Host`, and present
/// the token when `access` has one.
pub async fn serve(
    listener: TcpListener,
    hub: Arc<Hub>,
    health: Health,
    access: Access,
    bounds: Bounds,
    shutdown: CancellationToken,
) {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if let Ok(addr) = listener.local_addr() {
        if !addr.ip().is_loopback() && !addr.ip().is_unspecified() {
            hosts.push(addr.ip().to_string());
        }
    }
    hosts.extend(access.allowed_hosts);
    let sessions = Arc::new(Sessions::new(hub.clone(), bounds.max_sessions));
    let front = Arc::new(Front {
        hub,
        health,
        hosts,
        auth: Auth::new(access.token),
        sessions: sessions.clone(),
        bounds,
    });
    let slots = crate::tcp::Slots::new(bounds.max_connections);
    let tasks = TaskTracker::new();
    tasks.spawn(sweep(Arc::downgrade(&sessions), shutdown.clone()));
    loop {
        // One beyond `max_connections` is answered 503 once its first bytes arrive, without the rest:
        // a flood of half-sent requests holds at most the limit's worth of descriptors.
        let accepted = crate::tcp::accept_within(&listener, &slots, &shutdown, "MCP", BUSY).await;
        let Some((stream, peer, slot)) = accepted else {
            break;
        };
        let front = front.clone();
        let shutdown = shutdown.clone();
        // While it serves nothing (reading a request, or idle) it may be shed for a newcomer.
        let conn = slots.track();
        tasks.spawn(async move {
            // The worker watches the connection before it parks: the harness's next request
            // then finds it awake (crate::park_spin).
            let _watched = crate::park_spin::Watched::new(std::os::fd::AsFd::as_fd(&stream));
            let serving = conn.clone();
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let (front, conn) = (front.clone(), serving.clone());
                async move {
                    let response = front.handle(request, peer.ip(), &conn).await;
                    Ok::<_, Infallible>(until_sent(response, conn.serve()))
                }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(bounds.read_timeout);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = conn.shed.cancelled() => {
                    tracing::debug!(%peer, "MCP HTTP connection shed: it had served nothing for the longest when another came");
                }
                _ = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(2), connection).await;
                }
            }
            tracing::debug!(%peer, "MCP HTTP connection closed");
            drop(slot);
        });
    }
    front.sessions.clear();
    tasks.close();
    let _ = tokio::time::timeout(Duration::from_secs(3), tasks.wait()).await;
}

impl Front {
    async fn handle(
        self: &Arc<Self>,
        request: Request<Incoming>,
        peer: IpAddr,
        conn: &Arc<Conn>,
    ) -> Response<Body> {
        // Whole once its headers are in, but for a POST's body (read in `post`).
        let _serving = (request.method() != Method::POST).then(|| conn.serve());
        tracing::debug!(method = %request.method(), path = %request.uri().path(), session = ?request.headers().get(SESSION_HEADER), "MCP HTTP request");
        if let Some(refused) = self.guard(&request) {
            return refused;
        }
        let path = request.uri().path().to_string();
        if let Some(probe) = crate::health::Probe::at(&path) {
            return self.probe(probe, request.method());
        }
        // The guard let exactly one well-formed `Host` through.
        let host = (request.headers().get(http::header::HOST))
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        if let Some(endpoint) = metadata_for(&path) {
            return self.auth.metadata(host, endpoint);
        }
        if let Some(refused) = self.auth.refuse(request.headers(), host, &path) {
            return refused;
        }
        if path == "/metrics" {
            return self.metrics(request.method());
        }
        let Some(scope) = self.scope(&path) else {
            return plain(
                StatusCode::NOT_FOUND,
                format!("no MCP endpoint at {path}: use /mcp (every server) or /mcp/<server> (one declared server)\n"),
            );
        };
        let sessionless = !request.headers().contains_key(SESSION_HEADER);
        match *request.method() {
            Method::POST => self.post(request, scope, peer, conn).await,
            // No session to stream or end: what a modern client meets (2026-07-28).
            Method::GET | Method::DELETE if sessionless => {
                let mut response = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "no session: GET and DELETE need an Mcp-Session-Id (from initialize); modern requests are POSTs\n".into(),
                );
                response
                    .headers_mut()
                    .insert(http::header::ALLOW, HeaderValue::from_static("POST"));
                response
            }
            Method::GET => self.get(&request, &scope),
            Method::DELETE => self.delete(&request, &scope),
            _ => {
                let mut response = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "use POST, GET or DELETE\n".into(),
                );
                response.headers_mut().insert(
                    http::header::ALLOW,
                    HeaderValue::from_static("GET, POST, DELETE"),
                );
                response
            }
        }
    }

    /// `GET /healthz`: the proxy's health summary as JSON (always 200 while it answers).
    /// `/healthz` (the summary), `/readyz` (200 once every enabled server settled, 503 while
    /// one starts or the proxy drains), `/livez` (200 while it answers).
    fn probe(&self, probe: crate::health::Probe, method: &Method) -> Response<Body> {
        if method != Method::GET && method != Method::HEAD {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "use GET\n".into());
        }
        let summary = (self.health)();
        match probe.status(&summary, self.hub.is_stopping()) {
            200 => json(StatusCode::OK, summary),
            _ => json(StatusCode::SERVICE_UNAVAILABLE, summary),
        }
    }

    /// `GET /metrics` (behind the token, when one is in effect): the exposition, with the
    /// servers by state and the harnesses read from the health summary.
    fn metrics(&self, method: &Method) -> Response<Body> {
        if method != Method::GET && method != Method::HEAD {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "use GET\n".into());
        }
        let summary: serde_json::Value = serde_json::from_str(&(self.health)()).unwrap_or_default();
        let servers: Vec<(String, i64)> = (summary["servers"].as_object().into_iter())
            .flatten()
            .map(|(state, n)| (state.clone(), n.as_i64().unwrap_or(0)))
            .collect();
        let harnesses = summary["harnesses"].as_u64().unwrap_or(0) as usize;
        let metrics = &self.hub.settings.metrics;
        let text = metrics.render(&servers, harnesses, self.hub.requests_in_flight());
        let mut response = plain(StatusCode::OK, text);
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        );
        response
    }

    /// DNS-rebinding guard: `Host` must be one we serve, `Origin` (when a browser sends one)
    /// must be on such a host too.
    fn guard(&self, request: &Request<Incoming>) -> Option<Response<Body>> {
        let hosts: Vec<&HeaderValue> = request
            .headers()
            .get_all(http::header::HOST)
            .iter()
            .collect();
        let host = match hosts.as_slice() {
            [one] => one.to_str().ok(),
            _ => None,
        };
        let allowed = |authority: &str| {
            let name = crate::authority::host_name(authority);
            crate::authority::well_formed_host(authority)
                && self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
        };
        if !host.is_some_and(allowed) {
            return Some(plain(StatusCode::FORBIDDEN, "Host not allowed\n".into()));
        }
        if request
            .headers()
            .get_all(http::header::ORIGIN)
            .iter()
            .count()
            > 1
        {
            return Some(plain(
                StatusCode::FORBIDDEN,
                "one Origin header, please\n".into(),
            ));
        }
        if let Some(origin) = request.headers().get(http::header::ORIGIN) {
            let authority = origin
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://").map(|(_, rest)| rest));
            if !authority.is_some_and(allowed) {
                return Some(plain(StatusCode::FORBIDDEN, "Origin not allowed\n".into()));
            }
        }
        None
    }

    fn scope(&self, path: &str) -> Option<Scope> {
        match path.trim_end_matches('/') {
            "/mcp" => Some(Scope::All),
            other => {
                let key = other.strip_prefix("/mcp/")?;
                self.hub
                    .qualifiers()
                    .iter()
                    .find(|(_, q)| *q == key)
                    .map(|(id, _)| Scope::Server(id.clone()))
            }
        }
    }

    async fn post(
        self: &Arc<Self>,
        request: Request<Incoming>,
        scope: Scope,
        peer: IpAddr,
        conn: &Arc<Conn>,
    ) -> Response<Body> {
        let session_header = request.headers().contains_key(SESSION_HEADER);
        let (parts, body) = request.into_parts();
        let read = Limited::new(body, MAX_MESSAGE_BYTES).collect();
        let bytes = match tokio::time::timeout(self.bounds.read_timeout, read).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(_)) => {
                return json_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "null",
                    "the message is larger than 16 MiB",
                )
            }
            Err(_) => {
                let after = self.bounds.read_timeout.as_millis();
                return json_error(
                    StatusCode::REQUEST_TIMEOUT,
                    "null",
                    &format!("the request body did not arrive within {after} ms"),
                );
            }
        };
        let _serving = conn.serve();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let message = match Message::parse_from_harness(text) {
            Ok(message) => message,
            Err(invalid) => {
                let id = invalid.id.as_deref().unwrap_or("null");
                let body = error_answer(id, invalid.code, &invalid.message);
                return json(StatusCode::BAD_REQUEST, body);
            }
        };
        let claimed = parts.headers.get("mcp-protocol-version");
        if era::classify(&message, claimed.and_then(|v| v.to_str().ok())) == Era::Modern {
            return super::http_modern::post(&self.hub, &parts.headers, scope, peer, message).await;
        }
        if self.hub.is_stopping() && message.kind() == Kind::Request {
            let id = message.id().unwrap_or("null");
            return json_error(StatusCode::SERVICE_UNAVAILABLE, id, era::SHUTTING_DOWN);
        }
        // Checked once the body is read: the refusal carries the request's own id.
        if let Some(version) = claimed {
            if !version.to_str().is_ok_and(version::is_known) {
                let id = message.id().unwrap_or("null");
                return json_error(
                    StatusCode::BAD_REQUEST,
                    id,
                    "unsupported MCP-Protocol-Version",
                );
            }
        }
        let request = Request::from_parts(parts, ());
        let initialize = message.method() == Some("initialize") && message.kind() == Kind::Request;
        let ((id, session), created) = if initialize && !session_header {
            let name = (message.string(&["clientInfo", "name"])).map(|n| n.into_owned());
            match self
                .sessions
                .open(scope, Client::new(Some(peer), name.as_deref()))
            {
                Ok(opened) => (opened, true),
                Err(refused) => {
                    let text = refused.describe();
                    tracing::warn!(%peer, "MCP session refused: {text}");
                    let id = message.id().unwrap_or("null");
                    return json_error(StatusCode::SERVICE_UNAVAILABLE, id, &text);
                }
            }
        } else {
            match self.session_of(request.headers(), &scope) {
                Ok(session) => (session, false),
                Err(response) => return *response,
            }
        };
        if message.kind() != Kind::Request {
            session.harness.handle(message, Stream::channel().0);
            return empty(StatusCode::ACCEPTED);
        }
        let (stream, mut frames) = Stream::channel();
        session.harness.handle(message, stream);
        // Plain JSON when the answer is the first thing to send and comes soon; else an
        // event stream the client can resume.
        let mut response = match tokio::time::timeout(JSON_WITHIN, frames.recv()).await {
            Ok(Some(frame)) if frame.last => json(StatusCode::OK, frame.text),
            Ok(Some(frame)) => {
                let retry = self.retry_for(&session.harness.scope);
                event_stream(&session, retry, Some(frame), frames)
            }
            Ok(None) => json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "null",
                "the request was dropped",
            ),
            Err(_) => {
                let retry = self.retry_for(&session.harness.scope);
                event_stream(&session, retry, None, frames)
            }
        };
        if created {
            if response.status() == StatusCode::OK {
                if let Ok(value) = HeaderValue::from_str(&id) {
                    response.headers_mut().insert(SESSION_HEADER, value);
                }
            } else {
                self.sessions.remove(&id);
            }
        }
        response
    }

    /// How long a client should wait before resuming one of this endpoint's event streams
    /// (milliseconds): on `/mcp/<server>` what the server itself asks for, if it did.
    fn retry_for(&self, scope: &Scope) -> u64 {
        match scope {
            Scope::Server(id) => self
                .hub
                .connections
                .get(id)
                .and_then(|c| c.session.retry_hint())
                .unwrap_or(super::replay::RETRY_MS),
            Scope::All => super::replay::RETRY_MS,
        }
    }

    /// The session a request names (its `Mcp-Session-Id`), on this endpoint.
    fn session_of(
        &self,
        headers: &http::HeaderMap,
        scope: &Scope,
    ) -> Result<(String, Arc<Session>), Box<Response<Body>>> {
        let id = headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty());
        let Some(id) = id else {
            return Err(Box::new(json_error(
                StatusCode::BAD_REQUEST,
                "null",
                "missing Mcp-Session-Id header: send initialize first",
            )));
        };
        match self.sessions.get(id) {
            Some(session) if session.harness.scope == *scope => {
                session.harness.seen();
                Ok((id.to_string(), session))
            }
            _ => Err(Box::new(json_error(
                StatusCode::NOT_FOUND,
                "null",
                "unknown or expired session",
            ))),
        }
    }

    fn get(&self, request: &Request<Incoming>, scope: &Scope) -> Response<Body> {
        let session = match self.session_of(request.headers(), scope) {
            Ok((_, session)) => session,
            Err(response) => return *response,
        };
        let resumed = request
            .headers()
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|id| session.streams.find(id));
        if let Some((log, from)) = resumed {
            let body = log
                .read_from(from)
                .map(|event| Ok::<_, Infallible>(BodyFrame::data(event)));
            return sse_response(BodyExt::boxed(StreamBody::new(body)));
        }
        if session.harness.has_general() {
            return plain(
                StatusCode::CONFLICT,
                "this session's stream is already open\n".into(),
            );
        }
        let (stream, frames) = Stream::channel();
        session.harness.set_general(Some(stream));
        self.hub.set_reachable(session.harness.id, true);
        // A long-lived stream like a listen one, counted with them: past a limit the
        // longest idle one ends (the client opens it again), its connection closed.
        let limits = self.hub.settings.fairness;
        let (per_client, total) = (
            limits.max_listen_streams_per_client,
            limits.max_listen_streams,
        );
        let ticket = (self.hub.listens).admit(session.client.clone(), per_client, total);
        let listening = Listening {
            frames,
            harness: Arc::downgrade(&session.harness),
            ticket,
        };
        // A comment first: the response head goes out at once, the client knows it listens.
        let opened = format!("retry: {}\n: stream open\n\n", self.retry_for(scope));
        let opened = futures_util::stream::once(async {
            Ok::<_, Infallible>(BodyFrame::data(Bytes::from(opened)))
        });
        let body = opened.chain(receive_listening(listening).map(move |frame: Outgoing| {
            let text = sse::encode(None, None, &frame.text);
            drop(frame.permit);
            Ok::<_, Infallible>(BodyFrame::data(Bytes::from(text)))
        }));
        let mut response = sse_response(BodyExt::boxed(StreamBody::new(body)));
        let close = HeaderValue::from_static("close");
        response
            .headers_mut()
            .insert(http::header::CONNECTION, close);
        response
    }

    fn delete(&self, request: &Request<Incoming>, scope: &Scope) -> Response<Body> {
        let id = match self.session_of(request.headers(), scope) {
            Ok((id, _)) => id,
            Err(response) => return *response,
        };
        self.sessions.remove(&id);
        empty(StatusCode::OK)
    }
}

/// A session's GET stream, while the client reads it: when it ends, requests of the
/// proxy's own can no longer reach that harness.
struct Listening {
    frames: tokio::sync::mpsc::UnboundedReceiver<Outgoing>,
    harness: std::sync::Weak<Harness>,
    /// Its place among the long-lived streams; ended when another needs it.
    ticket: Ticket,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.frames.close();
        if let Some(harness) = self.harness.upgrade() {
            if !harness.has_general() {
                harness.hub.set_reachable(harness.id, false);
            }
        }
    }
}

fn receive_listening(listening: Listening) -> impl futures_util::Stream<Item = Outgoing> {
    futures_util::stream::unfold(listening, |mut listening| async move {
        let frame = tokio::select! {
            frame = listening.frames.recv() => frame,
            _ = listening.ticket.end.cancelled() => None,
        };
        listening.ticket.delivered();
        frame.map(|frame| (frame, listening))
    })
}

/// `response`, whose connection serves a request (`serving`) until its body is sent.
fn until_sent(response: Response<Body>, serving: Serving) -> Response<Body> {
    response.map(|body| {
        BodyExt::boxed(body.map_frame(move |frame| {
            let _held = &serving;
            frame
        }))
    })
}

/// A POST's answer as a resumable event stream: a priming event (asking for `retry` ms
/// before a resumption), `first` when it came, the rest as they come, ending with the answer.
fn event_stream(
    session: &Session,
    retry: u64,
    first: Option<Outgoing>,
    frames: tokio::sync::mpsc::UnboundedReceiver<Outgoing>,
) -> Response<Body> {
    let log = session.streams.start(retry, first, frames);
    let body = log
        .read_from(0)
        .map(|event| Ok::<_, Infallible>(BodyFrame::data(event)));
    sse_response(BodyExt::boxed(StreamBody::new(body)))
}
