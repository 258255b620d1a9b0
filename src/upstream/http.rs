//! The link to a streamable HTTP server: each message is a POST; a request's answer (and
//! what the server sends about it first) comes back as JSON or as an event stream read in
//! order; a GET stream carries what the server sends on its own. Errors are told from
//! typed facts (host:port, status, error kind), never from text that may quote the URL.
//! The exchanges go through [`super::exchange`] (a lean pool for plain `http://`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{Method, StatusCode};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::exchange::{Answer, Client, SendError};
use super::session::{Link, Session, Unanswered, WeakSession};
use super::stdio::MAX_MESSAGE_BYTES;
use crate::mcp::message::Message;
use crate::mcp::sse;

/// The session header of streamable HTTP.
const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// The negotiated version header (2025-06-18 on).
const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// Where an event stream resumes.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// How often a broken response stream is resumed before its request is given up.
const RESUMES: u32 = 3;
/// The wait before resuming when the server named none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// How long the closing DELETE may take.
const DELETE_WAIT: Duration = Duration::from_secs(2);

/// An HTTP 401 or 403 a server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401 or 403.
    pub status: u16,
    /// The `WWW-Authenticate` challenge, if any.
    pub challenge: Option<String>,
    /// A 403 with `error="insufficient_scope"`.
    pub insufficient_scope: bool,
}

impl From<Refusal> for Unanswered {
    fn from(refusal: Refusal) -> Self {
        Unanswered::Unauthorized {
            status: refusal.status,
            challenge: refusal.challenge,
            insufficient_scope: refusal.insufficient_scope,
        }
    }
}

/// What the link needs to reach the server.
pub struct Target {
    /// The endpoint.
    pub url: reqwest::Url,
    /// Headers sent with every request (configured ones and `Authorization`).
    pub headers: HeaderMap,
    /// Told of every 401/403, whichever message got it.
    pub on_refusal: Arc<dyn Fn(Refusal) + Send + Sync>,
}

struct Shared {
    client: Client,
    /// `host:port`, safe to show.
    at: String,
    /// The configured headers.
    headers: HeaderMap,
    session_id: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    /// Every header of a POST, built again only when the session id or version is set.
    post_headers: Mutex<HeaderMap>,
    session: OnceLock<WeakSession>,
    on_refusal: Arc<dyn Fn(Refusal) + Send + Sync>,
    closed: CancellationToken,
    /// Notifications and answers are POSTed one after the other, in order; a request
    /// waits until those queued before it are delivered.
    notes_queued: AtomicU64,
    notes_sent: watch::Sender<u64>,
    notes: tokio::sync::mpsc::UnboundedSender<String>,
    stream_opened: std::sync::atomic::AtomicBool,
    /// The SSE `retry` the server last sent on any of its streams (0: none yet).
    retry: AtomicU64,
}

struct HttpLink(Arc<Shared>);

/// `host:port` of `url`.
pub fn authority(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or("?");
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// A session with the streamable HTTP server at `target`.
pub fn connect(client: reqwest::Client, target: Target) -> Session {
    let (notes, queue) = tokio::sync::mpsc::unbounded_channel();
    let at = authority(&target.url);
    let shared = Arc::new(Shared {
        client: Client::new(client, target.url),
        at,
        post_headers: Mutex::new(post_headers(target.headers.clone())),
        headers: target.headers,
        session_id: Mutex::new(None),
        version: Mutex::new(None),
        session: OnceLock::new(),
        on_refusal: target.on_refusal,
        closed: CancellationToken::new(),
        notes_queued: AtomicU64::new(0),
        notes_sent: watch::channel(0).0,
        notes,
        stream_opened: std::sync::atomic::AtomicBool::new(false),
        retry: AtomicU64::new(0),
    });
    let session = Session::new(Box::new(HttpLink(shared.clone())));
    let _ = shared.session.set(session.downgrade());
    tokio::spawn(deliver_notes(shared, queue));
    session
}

impl Link for HttpLink {
    fn send(&self, text: String, request: Option<u64>) -> Result<(), Unanswered> {
        let shared = &self.0;
        if shared.closed.is_cancelled() {
            return Err(Unanswered::Stopped);
        }
        match request {
            Some(id) => {
                let after = shared.notes_queued.load(Ordering::Acquire);
                tokio::spawn(post_request(shared.clone(), text, id, after));
            }
            None => {
                shared.notes_queued.fetch_add(1, Ordering::AcqRel);
                shared.notes.send(text).map_err(|_| Unanswered::Stopped)?;
            }
        }
        Ok(())
    }

    fn close(&self) {
        let shared = &self.0;
        if shared.closed.is_cancelled() {
            return;
        }
        shared.closed.cancel();
        // Tell the server the session is over (best effort, bounded).
        if shared.session_id().is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = shared.clone();
        runtime.spawn(async move {
            let delete = shared
                .client
                .send(Method::DELETE, shared.request_headers(), None);
            let _ = tokio::time::timeout(DELETE_WAIT, delete).await;
        });
    }

    fn retry_hint(&self) -> Option<u64> {
        Some(self.0.retry.load(Ordering::Relaxed)).filter(|ms| *ms > 0)
    }

    fn negotiated(&self, version: &str) {
        if let Ok(value) = HeaderValue::from_str(version) {
            *self.0.version.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
            self.0.refresh_post_headers();
        }
    }
}

/// `headers` with what every POST says it sends and accepts.
fn post_headers(mut headers: HeaderMap) -> HeaderMap {
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers
}

impl Shared {
    fn session(&self) -> Option<Session> {
        self.session.get().and_then(WeakSession::upgrade)
    }

    fn session_id(&self) -> Option<HeaderValue> {
        self.session_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The configured headers, the session id and the negotiated version.
    fn request_headers(&self) -> HeaderMap {
        let mut headers = self.headers.clone();
        if let Some(id) = self.session_id() {
            headers.insert(SESSION_HEADER, id);
        }
        if let Some(version) = self
            .version
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            headers.insert(VERSION_HEADER, version);
        }
        headers
    }

    fn refresh_post_headers(&self) {
        let headers = post_headers(self.request_headers());
        *self.post_headers.lock().unwrap_or_else(|p| p.into_inner()) = headers;
    }

    async fn post(&self, text: String) -> Result<Answer, SendError> {
        let headers = self
            .post_headers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        self.client
            .send(Method::POST, headers, Some(Bytes::from(text)))
            .await
    }

    /// Open an event stream (GET), resumed after `last` when given.
    async fn get_stream(&self, last: Option<&str>) -> Result<Answer, SendError> {
        let mut headers = self.request_headers();
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(value) = last.and_then(|l| HeaderValue::from_str(l).ok()) {
            headers.insert(LAST_EVENT_ID, value);
        }
        self.client.send(Method::GET, headers, None).await
    }

    /// Look at a response's status: a refusal is announced; an error is described.
    fn check(&self, response: &Answer) -> Result<(), Unanswered> {
        let status = response.status();
        if let Some(refusal) = refusal(status, response.headers()) {
            (self.on_refusal)(refusal.clone());
            return Err(refusal.into());
        }
        if status == StatusCode::NOT_FOUND && self.session_id().is_some() {
            // The server forgot our session (it restarted): this session is over.
            if let Some(session) = self.session() {
                session.end();
            }
            return Err(Unanswered::Stopped);
        }
        Ok(())
    }
}

/// The 401 or 403 a response with `status` and `headers` is, if it is one.
pub fn refusal(status: StatusCode, headers: &HeaderMap) -> Option<Refusal> {
    if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
        return None;
    }
    let challenge = headers
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    Some(Refusal {
        status: status.as_u16(),
        insufficient_scope: status == StatusCode::FORBIDDEN
            && challenge
                .as_deref()
                .is_some_and(|c| c.contains("insufficient_scope")),
        challenge,
    })
}

/// POST notifications and answers one after the other, in the order they were sent.
async fn deliver_notes(
    shared: Arc<Shared>,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    loop {
        let text = tokio::select! {
            text = queue.recv() => match text { Some(t) => t, None => return },
            _ = shared.closed.cancelled() => return,
        };
        let initialized = text.contains("\"notifications/initialized\"");
        match shared.post(text).await {
            Ok(response) => {
                let delivered = shared.check(&response).is_ok() && response.status().is_success();
                if initialized && delivered && !shared.stream_opened.swap(true, Ordering::AcqRel) {
                    tokio::spawn(listen(shared.clone()));
                }
                if !delivered {
                    tracing::debug!(status = %response.status(), "a notification was not accepted");
                }
            }
            Err(error) => {
                tracing::debug!(error = %error.describe(&shared.at), "a notification was not delivered")
            }
        }
        shared.notes_sent.send_modify(|n| *n += 1);
    }
}

/// POST request `id` once the notifications sent before it are delivered, then read its
/// answer.
async fn post_request(shared: Arc<Shared>, text: String, id: u64, after: u64) {
    let mut sent = shared.notes_sent.subscribe();
    let waited = tokio::select! {
        waited = sent.wait_for(|n| *n >= after) => waited.is_ok(),
        _ = shared.closed.cancelled() => false,
    };
    let fail = |failure: Unanswered| {
        if let Some(session) = shared.session() {
            session.failed(id, failure);
        }
    };
    if !waited {
        return fail(Unanswered::Stopped);
    }
    let response = tokio::select! {
        response = shared.post(text) => response,
        _ = shared.closed.cancelled() => return fail(Unanswered::Stopped),
    };
    let response = match response {
        Ok(response) => response,
        Err(error) => return fail(Unanswered::Undelivered(error.describe(&shared.at))),
    };
    if let Err(failure) = shared.check(&response) {
        return fail(failure);
    }
    if shared.session_id().is_none() {
        if let Some(value) = response.headers().get(SESSION_HEADER) {
            *shared.session_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(value.clone());
            shared.refresh_post_headers();
        }
    }
    let status = response.status();
    let event_stream = is_event_stream(response.headers());
    if status.is_success() && event_stream {
        return read_stream(shared, response, Some(id)).await;
    }
    // JSON: the answer, or a JSON-RPC error the server sent with an HTTP error status.
    match read_body(response).await {
        Ok(body) if !body.trim().is_empty() => match Message::parse(body) {
            Ok(message) => {
                if let Some(session) = shared.session() {
                    session.receive(message, Some(id));
                }
                if !status.is_success() {
                    fail(Unanswered::Undelivered(format!(
                        "{} answered HTTP {status}",
                        shared.at
                    )));
                }
            }
            Err(_) => fail(Unanswered::Undelivered(format!(
                "{} answered HTTP {status} without a JSON-RPC message",
                shared.at
            ))),
        },
        Ok(_) => fail(Unanswered::Undelivered(format!(
            "{} answered HTTP {status} with no message",
            shared.at
        ))),
        Err(failure) => fail(failure),
    }
}

/// Whether `headers` say the body is an event stream.
fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.get(..17))
        .is_some_and(|v| v.eq_ignore_ascii_case("text/event-stream"))
}

async fn read_body(mut response: Answer) -> Result<String, Unanswered> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await {
        let chunk =
            chunk.map_err(|_| Unanswered::Undelivered("the response was cut short".into()))?;
        if body.len() + chunk.len() > MAX_MESSAGE_BYTES {
            return Err(Unanswered::Undelivered(
                "the response is larger than 16 MiB".into(),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| Unanswered::Undelivered("the response is not UTF-8".into()))
}

/// Read an event stream; each event's message goes to the session. For a request's
/// stream that ends before its answer, resume it (GET with `Last-Event-ID`).
async fn read_stream(shared: Arc<Shared>, response: Answer, request: Option<u64>) {
    let mut reader = sse::Reader::new(MAX_MESSAGE_BYTES);
    let mut response = Some(response);
    let mut resumes = 0;
    loop {
        if let Some(current) = response.take() {
            let ended_clean = pump(&shared, current, &mut reader, request).await;
            if !ended_clean {
                break;
            }
        }
        let Some(id) = request else { return };
        let pending = shared.session().is_some_and(|s| s.is_pending(id));
        if !pending || shared.closed.is_cancelled() {
            return;
        }
        let Some(last) = reader.last_id().map(str::to_string) else {
            break;
        };
        if resumes == RESUMES {
            break;
        }
        resumes += 1;
        let wait = reader
            .retry()
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_RETRY);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shared.closed.cancelled() => return,
        }
        match shared.get_stream(Some(&last)).await {
            Ok(r) if r.status().is_success() => response = Some(r),
            _ => break,
        }
    }
    if let (Some(id), Some(session)) = (request, shared.session()) {
        session.failed(
            id,
            Unanswered::Undelivered(format!(
                "{} closed the response stream before answering",
                shared.at
            )),
        );
    }
}

/// Feed one response's events to the session; `false` when the stream broke its limits.
async fn pump(
    shared: &Shared,
    mut response: Answer,
    reader: &mut sse::Reader,
    request: Option<u64>,
) -> bool {
    let mut events = Vec::new();
    loop {
        let chunk = tokio::select! {
            chunk = response.chunk() => chunk,
            _ = shared.closed.cancelled() => return false,
        };
        let Some(Ok(chunk)) = chunk else { return true };
        if reader.feed(&chunk, &mut events).is_err() {
            tracing::debug!(at = %shared.at, "an event larger than 16 MiB; stream dropped");
            return false;
        }
        // Known before the events it came with are handed on.
        if let Some(retry) = reader.retry() {
            shared.retry.store(retry, Ordering::Relaxed);
        }
        let Some(session) = shared.session() else {
            return false;
        };
        for event in events.drain(..) {
            if !(event.event.is_empty() || event.event == "message") || event.data.trim().is_empty()
            {
                continue;
            }
            match Message::parse(event.data) {
                Ok(message) => session.receive(message, request),
                Err(invalid) => {
                    tracing::debug!(at = %shared.at, error = %invalid.message, "an unreadable event")
                }
            }
        }
    }
}

/// The stream of what the server sends on its own (GET), resumed while the session lives.
async fn listen(shared: Arc<Shared>) {
    let mut reader = sse::Reader::new(MAX_MESSAGE_BYTES);
    let mut failures = 0u32;
    while !shared.closed.is_cancelled() {
        let response = tokio::select! {
            response = shared.get_stream(reader.last_id()) => response,
            _ = shared.closed.cancelled() => return,
        };
        match response {
            Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => return,
            Ok(response) if response.status().is_success() => {
                failures = 0;
                if !pump(&shared, response, &mut reader, None).await {
                    return;
                }
            }
            Ok(response) => {
                if shared.check(&response).is_err() {
                    return;
                }
                failures += 1;
            }
            Err(_) => failures += 1,
        }
        if failures > 5 {
            tracing::debug!(at = %shared.at, "the server's event stream keeps failing; not listening");
            return;
        }
        let wait = reader
            .retry()
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_RETRY);
        tokio::select! {
            _ = tokio::time::sleep(wait * (failures + 1)) => {}
            _ = shared.closed.cancelled() => return,
        }
    }
}

/// Configured headers as an HTTP header map, with `bearer` (an AHP client's token)
/// replacing any configured `Authorization`. Names the header at fault, never its value.
pub fn header_map(
    headers: &std::collections::BTreeMap<String, String>,
    bearer: Option<&str>,
) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if bearer.is_some() && name.eq_ignore_ascii_case("authorization") {
            continue;
        }
        let header_name = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("header {name:?} is not a valid HTTP header name"))?;
        let mut header_value = HeaderValue::try_from(value.as_str()).map_err(|_| {
            format!("the value of header {name:?} is not a valid HTTP header value")
        })?;
        header_value.set_sensitive(true);
        map.insert(header_name, header_value);
    }
    if let Some(token) = bearer {
        let mut value = HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| {
            "the token given by authenticate is not a valid header value".to_string()
        })?;
        value.set_sensitive(true);
        map.insert(http::header::AUTHORIZATION, value);
    }
    Ok(map)
}
