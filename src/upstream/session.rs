//! One MCP session with a server, over any [`Link`]: requests in flight by the id the proxy
//! gave them, progress tokens, deadlines, and the routing of everything the server sends.
//!
//! Messages stay raw. A request keeps its text; only its `id` (and its progress token when
//! another request in flight already uses it) is replaced on the way up, and put back on
//! the way down. Whatever the server sends is handled in the order it arrives, by the task
//! that read it: a request's notifications reach its [`Reply`] before its response does.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::envelope::Envelope;
use super::era::Era;
use crate::mcp::message::{self, Kind, Message};
pub use roles::{Cause, Modernity, Reply, Unsolicited};

/// A way to send messages to a server (a child's stdin, HTTP POSTs…). Never waits.
pub trait Link: Send + Sync + 'static {
    /// Queue `text` (one JSON-RPC message) for the server. `request` is the id of the
    /// request it is, if it is one (an HTTP link reads the answer from that POST).
    fn send(&self, text: String, request: Option<u64>) -> Result<(), Unanswered>;
    /// Hang up. Idempotent.
    fn close(&self);
    /// The protocol version the handshake settled on (HTTP sends it as a header).
    fn negotiated(&self, _version: &str) {}
    /// How long the server last asked clients to wait before resuming one of its event
    /// streams (SSE `retry`, milliseconds), if it ever did.
    fn retry_hint(&self) -> Option<u64> {
        None
    }
}

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unanswered {
    /// The server did not answer within the request's timeout.
    #[error("did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The session ended first (the server stopped, crashed or hung up).
    #[error("stopped before answering")]
    Stopped,
    /// The server refused the request over HTTP for want of authorization.
    #[error("refused the request: HTTP {status}")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// The `WWW-Authenticate` challenge, if any.
        challenge: Option<String>,
        /// A 403 asking for more scope.
        insufficient_scope: bool,
    },
    /// The request could not be delivered (the message says why, without the server's URL).
    #[error("{0}")]
    Undelivered(String),
}

/// One request's options.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// How long the server may take.
    pub timeout: Duration,
    /// Whether each progress notification restarts the clock.
    pub reset_on_progress: bool,
    /// An opaque tag the owner knows the request by (e.g. the harness it serves).
    pub tag: Option<u64>,
}

struct Pending {
    reply: Box<dyn Reply>,
    /// The caller's `id` as written.
    caller_id: Option<Box<str>>,
    /// The progress token as the caller wrote it, and as the server knows it.
    token: Option<(Box<str>, Box<str>)>,
    deadline: Instant,
    timeout: Duration,
    reset_on_progress: bool,
    tag: Option<u64>,
    /// A standing request (a listen stream): not a call in flight, its traffic the owner's.
    standing: bool,
}

#[derive(Default)]
struct State {
    next_id: u64,
    pending: HashMap<u64, Pending>,
    /// Progress token (as the server knows it) → request id.
    tokens: HashMap<Box<str>, u64>,
    /// (deadline, id) of every request in flight, earliest first.
    deadlines: BTreeSet<(Instant, u64)>,
    /// When the deadline keeper wakes next (`None`: only when told).
    alarm: Option<Instant>,
    closed: bool,
}

struct Inner {
    link: Box<dyn Link>,
    state: Mutex<State>,
    unsolicited: Mutex<Option<Weak<dyn Unsolicited>>>,
    /// The proxy's own requests to the owner ([`Session::ask_owner`]) by raw id.
    local: Mutex<HashMap<String, oneshot::Sender<Message>>>,
    /// Calls between rounds of input, by tag ([`Session::between_rounds`]).
    between: Mutex<HashMap<u64, CancellationToken>>,
    /// Set once the server turned out to be modern.
    modern: OnceLock<Arc<dyn Modernity>>,
    earlier_deadline: Arc<Notify>,
    ended: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.ended.cancel();
        self.link.close();
    }
}

/// A session with one server; cheap to clone.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

/// A session held by its own link's tasks, which must not keep it alive.
#[derive(Clone)]
pub struct WeakSession(Weak<Inner>);

impl WeakSession {
    /// The session, while someone else holds it.
    pub fn upgrade(&self) -> Option<Session> {
        self.0.upgrade().map(|inner| Session { inner })
    }
}

impl Session {
    /// A session over `link`. Its deadline keeper runs until the session ends.
    pub fn new(link: Box<dyn Link>) -> Self {
        let session = Self {
            inner: Arc::new(Inner {
                link,
                state: Mutex::new(State {
                    next_id: 1,
                    ..State::default()
                }),
                unsolicited: Mutex::new(None),
                local: Mutex::default(),
                between: Mutex::default(),
                modern: OnceLock::new(),
                earlier_deadline: Arc::new(Notify::new()),
                ended: CancellationToken::new(),
            }),
        };
        tokio::spawn(deadlines::keep(
            Arc::downgrade(&session.inner),
            session.inner.earlier_deadline.clone(),
            session.inner.ended.clone(),
        ));
        session
    }

    /// A handle that does not keep the session alive.
    pub fn downgrade(&self) -> WeakSession {
        WeakSession(Arc::downgrade(&self.inner))
    }

    /// Where unsolicited traffic goes from now on (held weakly).
    pub fn set_unsolicited(&self, unsolicited: Weak<dyn Unsolicited>) {
        *self
            .inner
            .unsolicited
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(unsolicited);
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unsolicited(&self) -> Option<Arc<dyn Unsolicited>> {
        self.inner
            .unsolicited
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(Weak::upgrade)
    }

    /// Speak 2026-07-28 to this server from now on (once), as `modern` says.
    pub fn go_modern(&self, modern: Arc<dyn Modernity>) {
        let _ = self.inner.modern.set(modern);
    }

    /// The era this session speaks.
    pub fn era(&self) -> Era {
        match self.inner.modern.get() {
            Some(_) => Era::Modern,
            None => Era::Legacy,
        }
    }

    /// What a modern server answered to `server/discover` (its `result`), when it is one.
    pub fn discovered(&self) -> Option<&str> {
        self.inner.modern.get().map(|m| m.discovered())
    }

    /// [`Session::request_as`] for whoever the session stands for by default.
    pub fn request(
        &self,
        request: Message,
        reply: Box<dyn Reply>,
        options: Options,
    ) -> Result<u64, (Box<dyn Reply>, Unanswered)> {
        self.request_as(request, reply, options, None)
    }

    /// Send `request` (a caller's request message) with a fresh id, for the harness
    /// `envelope` describes (a modern server gets it in `_meta`); its outcome goes to
    /// `reply`. Returns the id the server knows it by (for [`Session::cancel`]; 0 when
    /// it was answered without the server).
    pub fn request_as(
        &self,
        request: Message,
        reply: Box<dyn Reply>,
        options: Options,
        envelope: Option<&Envelope>,
    ) -> Result<u64, (Box<dyn Reply>, Unanswered)> {
        let (request, reply) = match self.inner.modern.get() {
            Some(modern) => match modern.outgoing(self, request, reply, options, envelope) {
                Some(going) => going,
                None => return Ok(0),
            },
            None => (request, reply),
        };
        self.send_prepared(request, reply, options)
    }

    /// Send `request` as it is (a modern server's envelope already in it) with a fresh id.
    pub(crate) fn send_prepared(
        &self,
        request: Message,
        reply: Box<dyn Reply>,
        options: Options,
    ) -> Result<u64, (Box<dyn Reply>, Unanswered)> {
        let caller_token = request
            .find(&["_meta", "progressToken"])
            .map(|span| (span.clone(), request.slice(span).to_string()));
        let wake;
        let (id, text) = {
            let mut state = self.state();
            if state.closed {
                return Err((reply, Unanswered::Stopped));
            }
            let id = state.next_id;
            state.next_id += 1;
            let mut edits = Vec::new();
            let token = caller_token.map(|(span, caller)| {
                // The caller's own token unless another request in flight uses it.
                let upstream = if state.tokens.contains_key(caller.as_str()) {
                    let own = message::quote(&format!("ahp-proxy-progress-{id}"));
                    edits.push((span, own.clone()));
                    own
                } else {
                    caller.clone()
                };
                state.tokens.insert(upstream.clone().into(), id);
                (caller.into_boxed_str(), upstream.into_boxed_str())
            });
            let caller_id = request.id().map(Into::into);
            let text = request.rewrite(Some(&id.to_string()), edits).into_text();
            let deadline = Instant::now() + options.timeout;
            // The keeper is woken only when it would sleep past this deadline (waking it
            // for every request would cost each call a hand-off to its task).
            wake = state.alarm.is_none_or(|alarm| deadline < alarm);
            if wake {
                state.alarm = Some(deadline);
            }
            state.deadlines.insert((deadline, id));
            state.pending.insert(
                id,
                Pending {
                    reply,
                    caller_id,
                    token,
                    deadline,
                    timeout: options.timeout,
                    reset_on_progress: options.reset_on_progress,
                    tag: options.tag,
                    standing: false,
                },
            );
            (id, text)
        };
        if wake {
            self.inner.earlier_deadline.notify_one();
        }
        if let Err(failure) = self.inner.link.send(text, Some(id)) {
            if let Some(pending) = self.take(id) {
                return Err((pending.reply, failure));
            }
        }
        Ok(id)
    }

    /// Send a request of the proxy's own and wait for the whole response message.
    pub async fn call(
        &self,
        method: &str,
        params: Option<&str>,
        timeout: Duration,
    ) -> Result<Message, Unanswered> {
        let text = match params {
            Some(params) => format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":{},"params":{params}}}"#,
                message::quote(method)
            ),
            None => format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":{}}}"#,
                message::quote(method)
            ),
        };
        let request = Message::parse(text).map_err(|invalid| {
            Unanswered::Undelivered(format!("bad request: {}", invalid.message))
        })?;
        self.ask(request, timeout, &CancellationToken::new()).await
    }

    /// Send `request` (its id is replaced) and wait for the whole response message; when
    /// `cancel` fires first, the server is told and the answer no longer awaited.
    pub async fn ask(
        &self,
        request: Message,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Message, Unanswered> {
        let (tx, rx) = oneshot::channel();
        let options = Options {
            timeout,
            reset_on_progress: false,
            tag: None,
        };
        let id = match self.request(request, Box::new(Answer(tx)), options) {
            Ok(id) => id,
            Err((_, failure)) => return Err(failure),
        };
        tokio::select! {
            answer = rx => answer.unwrap_or(Err(Unanswered::Stopped)),
            _ = cancel.cancelled() => {
                self.cancel(id, "the requester went away");
                Err(Unanswered::Stopped)
            }
        }
    }

    /// Send a notification (e.g. `notifications/initialized`).
    pub fn notify(&self, text: String) -> Result<(), Unanswered> {
        let Err(text) = self.answered_here(text) else {
            return Ok(());
        };
        if self.inner.modern.get().is_some_and(|m| !m.forwards(&text)) {
            return Ok(());
        }
        self.inner.link.send(text, None)
    }

    /// Answer the server's request whose id is `id` (raw) with `body`: the raw text of a
    /// `"result": …` or `"error": …` member.
    pub fn answer(&self, id: &str, body: &str) -> Result<(), Unanswered> {
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},{body}}}"#);
        match self.answered_here(text) {
            Ok(()) => Ok(()),
            Err(text) => self.inner.link.send(text, None),
        }
    }

    /// Stop waiting for request `id` and tell the server (`notifications/cancelled`). The
    /// reply is dropped unanswered, as MCP asks of a cancelled request.
    pub fn cancel(&self, id: u64, reason: &str) {
        if self.take(id).is_some() {
            let _ = self.notify(cancelled(id, reason));
        }
    }

    /// [`Session::cancel`] every request in flight whose tag is one of `tags`, and stop the
    /// calls of those tags that wait between rounds of input.
    pub fn cancel_tagged(&self, tags: &[u64], reason: &str) {
        self.stop_between(tags);
        let ids: Vec<u64> = self
            .state()
            .pending
            .iter()
            .filter(|(_, p)| p.tag.is_some_and(|tag| tags.contains(&tag)))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.cancel(id, reason);
        }
    }

    /// How long the server last asked clients to wait before resuming one of its event
    /// streams, in milliseconds, if it did.
    pub fn retry_hint(&self) -> Option<u64> {
        self.inner.link.retry_hint()
    }

    /// Take request `id` out of the table.
    fn take(&self, id: u64) -> Option<Pending> {
        let mut state = self.state();
        let pending = state.pending.remove(&id)?;
        state.deadlines.remove(&(pending.deadline, id));
        if let Some((_, upstream)) = &pending.token {
            state.tokens.remove(upstream);
        }
        Some(pending)
    }

    /// Whether request `id` still waits for its answer.
    pub fn is_pending(&self, id: u64) -> bool {
        self.state().pending.contains_key(&id)
    }

    /// Tell the link which protocol version the handshake settled on.
    pub fn negotiated(&self, version: &str) {
        self.inner.link.negotiated(version);
    }

    /// How many requests wait for an answer (standing ones are none of them).
    pub fn in_flight(&self) -> usize {
        self.state()
            .pending
            .values()
            .filter(|p| !p.standing)
            .count()
    }

    /// Make request `id` a standing one (a listen stream): what the server sends on it goes
    /// to the owner, and it is no call in flight.
    pub(crate) fn stand(&self, id: u64) {
        if let Some(pending) = self.state().pending.get_mut(&id) {
            pending.standing = true;
        }
    }

    /// One message from the server, in the order it came. `stream` is the request whose
    /// HTTP response carried it, if any.
    pub fn receive(&self, message: Message, stream: Option<u64>) {
        match message.kind() {
            Kind::Result | Kind::Error => self.response(message),
            Kind::Notification => self.notification(message, stream),
            Kind::Request => {
                if message.method() == Some("ping") {
                    if let Some(id) = message.id() {
                        let _ = self.answer(id, r#""result":{}"#);
                    }
                    return;
                }
                let cause = self.cause(stream);
                match self.unsolicited() {
                    Some(unsolicited) => unsolicited.request(self, message, cause),
                    None => {
                        if let Some(id) = message.id() {
                            let _ = self.answer(id, NO_CLIENT);
                        }
                    }
                }
            }
        }
    }

    fn response(&self, message: Message) {
        let Some(id) = message.numeric_id() else {
            tracing::debug!("a response with an id the proxy never sent; dropped");
            return;
        };
        let Some(pending) = self.take(id) else {
            // Cancelled or timed out meanwhile: the caller no longer waits.
            return;
        };
        let message = message.rewrite(pending.caller_id.as_deref(), Vec::new());
        pending.reply.respond(message);
    }

    fn notification(&self, message: Message, stream: Option<u64>) {
        if message.method() == Some("notifications/subscriptions/acknowledged") {
            // A listen stream of the proxy's own opened: its keeper hears, no harness does.
            let id = message.find(&["_meta", SUBSCRIPTION_ID]);
            let id = id.and_then(|span| message.slice(span).parse::<u64>().ok());
            let mut state = self.state();
            if let Some(pending) = id.and_then(|id| state.pending.get_mut(&id)) {
                pending.reply.related(message);
            }
            return;
        }
        if message.method() == Some("notifications/progress") {
            let Some(span) = message.find(&["progressToken"]) else {
                return;
            };
            let mut state = self.state();
            let Some(id) = state.tokens.get(message.slice(span.clone())).copied() else {
                return;
            };
            let state = &mut *state;
            let Some(pending) = state.pending.get_mut(&id) else {
                return;
            };
            if pending.reset_on_progress {
                state.deadlines.remove(&(pending.deadline, id));
                pending.deadline = Instant::now() + pending.timeout;
                state.deadlines.insert((pending.deadline, id));
            }
            let caller = pending.token.as_ref().map(|(caller, _)| caller.to_string());
            let message = match caller {
                Some(caller) if *caller != *message.slice(span.clone()) => {
                    message.rewrite(None, vec![(span, caller)])
                }
                _ => message,
            };
            // Under the lock: the response, handled by this same task, cannot overtake it.
            pending.reply.related(message);
            return;
        }
        let origin = self.origin(stream);
        if let Some(id) = stream {
            let related = !message
                .method()
                .is_some_and(|m| m.ends_with("/list_changed"));
            if related {
                let mut state = self.state();
                if let Some(pending) = state.pending.get_mut(&id).filter(|p| !p.standing) {
                    pending.reply.related(message);
                    return;
                }
            }
        }
        if let Some(unsolicited) = self.unsolicited() {
            unsolicited.notify(message, origin);
        }
    }

    /// What ties a server request to a request in flight: the stream that carried it, else
    /// only what is in flight.
    fn cause(&self, stream: Option<u64>) -> Cause {
        let state = self.state();
        match stream
            .and_then(|id| state.pending.get(&id))
            .and_then(|p| p.tag)
        {
            Some(tag) => Cause::Request(tag),
            None => Cause::InFlight(state.pending.values().filter_map(|p| p.tag).collect()),
        }
    }

    /// The tag of the request a server message is about: the one whose stream carried it,
    /// none when a standing request's stream (a listen stream) carried it, else the only
    /// tagged request in flight.
    fn origin(&self, stream: Option<u64>) -> Option<u64> {
        let state = self.state();
        if let Some(pending) = stream.and_then(|id| state.pending.get(&id)) {
            if pending.standing {
                return None;
            }
            if let Some(tag) = pending.tag {
                return Some(tag);
            }
        }
        let mut tags = state.pending.values().filter_map(|p| p.tag);
        match (tags.next(), tags.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    /// A request failed on its way (an HTTP POST refused or unreachable).
    pub fn failed(&self, id: u64, failure: Unanswered) {
        if let Some(pending) = self.take(id) {
            pending.reply.fail(failure);
        }
    }

    /// The link is gone: every request fails, nothing more is sent.
    pub fn end(&self) {
        let pending: Vec<Pending> = {
            let mut state = self.state();
            state.closed = true;
            state.tokens.clear();
            state.deadlines.clear();
            state.pending.drain().map(|(_, p)| p).collect()
        };
        self.inner.ended.cancel();
        self.inner.link.close();
        for pending in pending {
            pending.reply.fail(Unanswered::Stopped);
        }
    }

    /// Resolves once the session has ended.
    pub async fn ended(&self) {
        self.inner.ended.cancelled().await
    }

    /// Whether the session has ended.
    pub fn is_ended(&self) -> bool {
        self.inner.ended.is_cancelled()
    }
}

/// The `_meta` member naming the listen stream a notification belongs to.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The answer to a server request no MCP client can take.
const NO_CLIENT: &str =
    r#""error":{"code":-32601,"message":"no MCP client is connected to answer this request"}"#;

/// `notifications/cancelled` for request `id`.
pub fn cancelled(id: u64, reason: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":{}}}}}"#,
        message::quote(reason)
    )
}

/// A reply that hands the whole response (or failure) to a waiting task.
struct Answer(oneshot::Sender<Result<Message, Unanswered>>);

impl Reply for Answer {
    fn related(&mut self, _: Message) {}
    fn respond(self: Box<Self>, message: Message) {
        let _ = self.0.send(Ok(message));
    }
    fn fail(self: Box<Self>, failure: Unanswered) {
        let _ = self.0.send(Err(failure));
    }
}

mod deadlines;
mod owner_asks;
#[cfg(test)]
pub(crate) mod recorder;
mod roles;
#[cfg(test)]
mod tests;
