//! What the front knows of one harness session (a stdio harness, or one streamable HTTP
//! session): what it declared, its requests in flight (to cancel them), the server requests
//! it owes an answer, and the stream its unsolicited messages go to. The hub keeps these;
//! the session's handlers reach them through the `Harness` handle.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::oneshot;

use super::answers::error_answer;
use super::outbox::{Budget, Stream};
use super::registry::{Abilities, HarnessId, Scope};
use crate::mcp::message::{self, Message};
use crate::upstream::session::WeakSession;

/// A request of the harness's being answered by a server.
#[derive(Debug, Clone)]
pub struct InFlight {
    /// The server's customization id.
    pub server: String,
    /// The id the server knows it by.
    pub upstream: u64,
    /// Its tag (the registry's key).
    pub tag: u64,
    /// Where its answer goes (over HTTP: its POST's stream).
    pub stream: Stream,
    /// Cancelled when the harness cancels it.
    pub cancelled: tokio_util::sync::CancellationToken,
}

/// Who is waiting for the harness's answer to a request the proxy sent it.
pub enum Asker {
    /// A server: answer it on its session, with its own id for the request.
    Server {
        /// The server's customization id.
        server: String,
        /// Its session.
        session: WeakSession,
        /// Its id for the request, as it wrote it.
        id: String,
    },
    /// The proxy itself (sampling for an MCP App): the whole answer message.
    Local(oneshot::Sender<Message>),
}

/// A request the proxy sent this harness, waiting for its answer.
pub struct Owed {
    /// Who asked.
    pub asker: Asker,
    /// Its progress token as the harness knows it, if it gave one.
    pub token: Option<String>,
    /// When it was sent.
    pub sent: Instant,
}

impl Owed {
    /// Tell whoever asked that the harness will not answer (error `code`, saying `why`).
    pub fn refuse(self, code: i64, why: &str) {
        match self.asker {
            Asker::Server { session, id, .. } => {
                if let Some(session) = session.upgrade() {
                    let body = format!(
                        r#""error":{{"code":{code},"message":{}}}"#,
                        message::quote(why)
                    );
                    let _ = session.answer(&id, &body);
                }
            }
            Asker::Local(tx) => {
                if let Ok(message) = Message::parse(error_answer("0", code, why)) {
                    let _ = tx.send(message);
                }
            }
        }
    }
}

#[derive(Default)]
struct State {
    /// The session ended: nothing more is owed or tracked.
    gone: bool,
    /// The `initialize` params it sent.
    initialize: Option<Value>,
    /// What those declared (read once: every tool call looks).
    abilities: Abilities,
    /// Its requests being answered, by its id as written.
    in_flight: HashMap<String, InFlight>,
    /// Requests it owes an answer to, by the id the proxy gave them.
    owed: HashMap<u64, Owed>,
}

/// One harness session's state.
pub struct HarnessState {
    /// Its id.
    pub id: HarnessId,
    /// What it sees.
    pub scope: Scope,
    /// Whether it is the stdio harness the proxy stands for (servers see its identity).
    pub stands_for: bool,
    state: Mutex<State>,
    /// Where its unsolicited messages go (stdout; the GET stream over HTTP).
    general: Mutex<Option<Stream>>,
    /// The budget of those.
    pub(super) budget: Budget,
    next_request: AtomicU64,
    /// Whether it listed anything yet (a first listing waits for servers still starting).
    pub(super) listed: AtomicBool,
    /// Whether its `initialize` was answered (nothing unsolicited goes to it before).
    live: AtomicBool,
    /// When it was last heard from, or had a stream or request open (HTTP expiry).
    pub(super) last_seen: Mutex<Instant>,
}

impl HarnessState {
    /// Session `id`, seeing `scope`.
    pub fn new(id: HarnessId, scope: Scope, stands_for: bool) -> Arc<Self> {
        Arc::new(Self {
            id,
            scope,
            stands_for,
            state: Mutex::default(),
            general: Mutex::new(None),
            budget: Budget::default(),
            next_request: AtomicU64::new(1),
            listed: AtomicBool::new(false),
            live: AtomicBool::new(false),
            last_seen: Mutex::new(Instant::now()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Note that the harness is active now.
    pub fn seen(&self) {
        *self.last_seen.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Its unsolicited messages go to `stream` from now on.
    pub fn set_general(&self, stream: Option<Stream>) {
        *self.general.lock().unwrap_or_else(|p| p.into_inner()) = stream;
    }

    /// Whether an open stream carries its unsolicited messages.
    pub fn has_general(&self) -> bool {
        self.general
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|s| !s.is_closed())
    }

    /// The `initialize` params it sent, once it did.
    pub fn initialize_params(&self) -> Option<Value> {
        self.state().initialize.clone()
    }

    /// Whether it sent `initialize`.
    pub fn is_initialized(&self) -> bool {
        self.state().initialize.is_some()
    }

    /// It sent `initialize` with `params`.
    pub(super) fn initialized(&self, params: Value) -> Abilities {
        let abilities = Abilities::of(params.get("capabilities").unwrap_or(&Value::Null));
        let mut state = self.state();
        state.initialize = Some(params);
        state.abilities = abilities;
        abilities
    }

    /// What it declared (nothing before `initialize`).
    pub fn abilities(&self) -> Abilities {
        self.state().abilities
    }

    /// Its `initialize` was answered: notifications may follow.
    pub(super) fn go_live(&self) {
        self.live.store(true, Ordering::Release);
    }

    /// Whether its `initialize` was answered.
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    /// Send an unsolicited notification, within its budget (dropped before its `initialize`
    /// is answered, when it is too far behind, or when it has no stream open).
    pub fn notify(&self, text: String) {
        if !self.is_live() {
            return;
        }
        let general = self
            .general
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(stream) = general else { return };
        if let Some(permit) = self.budget.admit(text.len()) {
            stream.send_with(text, permit);
        }
    }

    /// Request `id` (its own) went to `server` as `upstream`.
    pub(super) fn track(&self, id: &str, in_flight: InFlight) {
        self.state().in_flight.insert(id.to_string(), in_flight);
    }

    /// Request `id` is known to its server as `upstream`.
    pub(super) fn set_upstream(&self, id: &str, upstream: u64) {
        if let Some(in_flight) = self.state().in_flight.get_mut(id) {
            in_flight.upstream = upstream;
        }
    }

    /// Request `id` is answered (or abandoned).
    pub(super) fn untrack(&self, id: &str) -> Option<InFlight> {
        self.state().in_flight.remove(id)
    }

    /// How many of its requests are being answered.
    pub fn in_flight(&self) -> usize {
        self.state().in_flight.len()
    }

    /// The stream of its request with tag `tag`, if still in flight.
    pub(super) fn stream_of(&self, tag: u64) -> Option<Stream> {
        self.state()
            .in_flight
            .values()
            .find(|f| f.tag == tag)
            .map(|f| f.stream.clone())
    }

    /// Send the harness a request (`message`, with an id the proxy gives it) on the stream
    /// of its request `origin` when that is still open, else on its general stream. Its
    /// answer goes to `asker`. `false` when there is no stream to send it on.
    pub(super) fn ask(&self, message: Message, origin: Option<u64>, asker: Asker) -> Option<u64> {
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let token = message
            .find(&["_meta", "progressToken"])
            .map(|span| message.slice(span).to_string());
        let text = message
            .rewrite(Some(&id.to_string()), Vec::new())
            .into_text();
        let stream = origin
            .and_then(|tag| self.stream_of(tag))
            .filter(|s| !s.is_closed())
            .or_else(|| {
                self.general
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
            })?;
        {
            let mut state = self.state();
            if state.gone {
                return None;
            }
            state.owed.insert(
                id,
                Owed {
                    asker,
                    token,
                    sent: Instant::now(),
                },
            );
        }
        if !stream.send(text) {
            self.state().owed.remove(&id);
            return None;
        }
        Some(id)
    }

    /// Take what the harness owes for request `id` (its answer came, or it timed out).
    pub(super) fn take_owed(&self, id: u64) -> Option<Owed> {
        self.state().owed.remove(&id)
    }

    /// The request it owes whose asker is server `server` with id `server_id` (raw).
    pub(super) fn owed_to(&self, server: &str, server_id: &str) -> Option<u64> {
        self.state()
            .owed
            .iter()
            .find_map(|(id, owed)| match &owed.asker {
                Asker::Server {
                    server: s, id: i, ..
                } if s == server && i == server_id => Some(*id),
                _ => None,
            })
    }

    /// The server whose request carries progress token `token` (raw), with its session.
    pub(super) fn progress_target(&self, token: &str) -> Option<(String, WeakSession)> {
        self.state()
            .owed
            .values()
            .find_map(|owed| match &owed.asker {
                Asker::Server {
                    server, session, ..
                } if owed.token.as_deref() == Some(token) => {
                    Some((server.clone(), session.clone()))
                }
                _ => None,
            })
    }

    /// Everything in flight and owed, taken (the harness is gone: it is asked nothing more).
    pub(super) fn drain(&self) -> (Vec<(String, InFlight)>, Vec<Owed>) {
        let mut state = self.state();
        state.gone = true;
        let in_flight = state.in_flight.drain().collect();
        let owed = state.owed.drain().map(|(_, o)| o).collect();
        (in_flight, owed)
    }
}
