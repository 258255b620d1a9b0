//! What the front knows of one harness session (a stdio harness, or one streamable HTTP
//! session): what it declared, whether its handshake is done, the server requests it owes an
//! answer (and those held until its handshake is done), and the stream its unsolicited
//! messages go to. The hub keeps these; the session's handlers reach them through the
//! `Harness` handle. Its requests in flight are in the hub's table (`in_flight`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;

use super::answers::error_answer;
use super::lock::{lock, Held};
use super::outbox::{Budget, Stream};
use super::registry::{Abilities, HarnessId, Scope};
use crate::mcp::era::Era;
use crate::mcp::message::{self, Message};
use crate::upstream::session::WeakSession;

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
        /// The harness's request in flight it is about (by tag), when that is known.
        about: Option<u64>,
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

struct State {
    /// The session ended: nothing more is owed.
    gone: bool,
    /// The `initialize` params it sent.
    initialize: Option<Value>,
    /// What those declared (read once: every tool call looks).
    abilities: Abilities,
    /// A stand-in's modern request envelope (who its requests are sent for).
    modern: Option<crate::mcp::era::Envelope>,
    /// Requests it owes an answer to, by the id the proxy gave them.
    owed: HashMap<u64, Owed>,
    /// Requests for it held until its handshake is done (`notifications/initialized`).
    held: Vec<(u64, String)>,
    /// Where its unsolicited messages go (stdout; the GET stream over HTTP).
    general: Option<Stream>,
    /// When it was last heard from, or had a stream or request open (HTTP expiry).
    last_seen: Instant,
    /// What a client allowed for the rest of this session: a server's tool, or (no tool)
    /// every tool of a server, by the server's customization id.
    allowed: std::collections::HashSet<(String, Option<String>)>,
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
    /// The budget of its unsolicited messages.
    pub(super) budget: Budget,
    next_request: AtomicU64,
    /// Whether it listed anything yet (a first listing waits for servers still starting).
    pub(super) listed: AtomicBool,
    /// Whether its `initialize` was answered (nothing unsolicited goes to it before).
    live: AtomicBool,
    /// Whether it sent `notifications/initialized` (no request goes to it before).
    handshake_done: AtomicBool,
    /// Whether it sent a modern (2026-07-28) request (the first gives servers its identity).
    pub(super) spoke_modern: AtomicBool,
    /// Whether it stands in for one modern request (or listen): what it is sent is already
    /// served as modern, and goes the legacy way from here.
    pub(super) stand_in: AtomicBool,
}

impl HarnessState {
    /// The MCP era its requests speak: modern when it stands in for a modern request (or
    /// listen), legacy for a harness that sent `initialize`.
    pub fn era(&self) -> Era {
        if self.stand_in.load(Ordering::Relaxed) {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// Session `id`, seeing `scope`.
    pub fn new(id: HarnessId, scope: Scope, stands_for: bool) -> Arc<Self> {
        Arc::new(Self {
            id,
            scope,
            stands_for,
            state: Mutex::new(State {
                gone: false,
                initialize: None,
                abilities: Abilities::default(),
                modern: None,
                owed: HashMap::new(),
                held: Vec::new(),
                general: None,
                last_seen: Instant::now(),
                allowed: std::collections::HashSet::new(),
            }),
            budget: Budget::default(),
            next_request: AtomicU64::new(1),
            listed: AtomicBool::new(false),
            live: AtomicBool::new(false),
            handshake_done: AtomicBool::new(false),
            spoke_modern: AtomicBool::new(false),
            stand_in: AtomicBool::new(false),
        })
    }

    /// Whether a client allowed tool `tool` of server `server` (or the whole server) for the
    /// rest of this session.
    pub fn allowed(&self, server: &str, tool: &str) -> bool {
        let state = self.state();
        let key = |tool: Option<&str>| (server.to_string(), tool.map(str::to_string));
        state.allowed.contains(&key(Some(tool))) || state.allowed.contains(&key(None))
    }

    /// A client allowed tool `tool` of server `server` (`None`: all of its tools) for the
    /// rest of this session.
    pub fn allow(&self, server: &str, tool: Option<&str>) {
        let key = (server.to_string(), tool.map(str::to_string));
        self.state().allowed.insert(key);
    }

    fn state(&self) -> Held<'_, State> {
        lock(&self.state)
    }

    /// Note that the harness is active now.
    pub fn seen(&self) {
        self.state().last_seen = Instant::now();
    }

    /// How long since it was last active.
    pub fn idle_for(&self) -> Duration {
        self.state().last_seen.elapsed()
    }

    /// Its unsolicited messages go to `stream` from now on.
    pub fn set_general(&self, stream: Option<Stream>) {
        self.state().general = stream;
    }

    /// Whether an open stream carries its unsolicited messages.
    pub fn has_general(&self) -> bool {
        self.state()
            .general
            .as_ref()
            .is_some_and(|s| !s.is_closed())
    }

    fn general(&self) -> Option<Stream> {
        self.state().general.clone()
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

    /// It stands in for a modern request whose `_meta` said `envelope`.
    pub(super) fn speaks_modern(&self, envelope: crate::mcp::era::Envelope) {
        self.state().modern = Some(envelope);
    }

    /// The modern envelope it stands in for, if it does.
    pub fn modern_envelope(&self) -> Option<crate::mcp::era::Envelope> {
        self.state().modern.clone()
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

    /// It sent `notifications/initialized`: the requests held for it go out now, on its
    /// general stream (those that cannot are refused to their askers).
    pub(super) fn complete_handshake(&self) {
        if self.handshake_done.swap(true, Ordering::AcqRel) {
            return;
        }
        let (held, general) = {
            let mut state = self.state();
            (std::mem::take(&mut state.held), state.general.clone())
        };
        for (id, text) in held {
            if !general.as_ref().is_some_and(|s| s.send(text)) {
                if let Some(owed) = self.take_owed(id) {
                    owed.refuse(
                        super::answers::INTERNAL_ERROR,
                        "the MCP client (harness) has no open stream to receive requests",
                    );
                }
            }
        }
    }

    /// Send an unsolicited notification, within its budget (dropped before its `initialize`
    /// is answered, when it is too far behind, or when it has no stream open).
    pub fn notify(&self, text: String) {
        if !self.is_live() {
            return;
        }
        let Some(stream) = self.general() else { return };
        if let Some(permit) = self.budget.admit(text.len()) {
            stream.send_with(text, permit);
        }
    }

    /// Send the harness a request (`message`, with an id the proxy gives it) on `stream`
    /// (the stream of its request the server works on) when that is still open, else on its
    /// general stream; held until its handshake is done. Its answer goes to `asker`. `None`
    /// when there is no stream to send it on.
    pub(super) fn ask(
        &self,
        message: Message,
        stream: Option<Stream>,
        asker: Asker,
    ) -> Option<u64> {
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let token = message
            .find(&["_meta", "progressToken"])
            .map(|span| message.slice(span).to_string());
        let text = message
            .rewrite(Some(&id.to_string()), Vec::new())
            .into_text();
        let owed = Owed { asker, token };
        let stream = {
            let mut state = self.state();
            if state.gone {
                return None;
            }
            let stream = stream
                .filter(|s| !s.is_closed())
                .or_else(|| state.general.clone())?;
            state.owed.insert(id, owed);
            if !self.handshake_done.load(Ordering::Acquire) {
                state.held.push((id, text));
                return Some(id);
            }
            stream
        };
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

    /// Whether its request `tag` at server `server` waits on an answer it owes that server.
    pub(super) fn waits_on(&self, server: &str, tag: u64) -> bool {
        let asks = |o: &Owed| matches!(&o.asker, Asker::Server { server: s, about, .. } if s == server && *about == Some(tag));
        self.state().owed.values().any(asks)
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

    /// Everything it owes, taken (the harness is gone: it is asked nothing more).
    pub(super) fn drain(&self) -> Vec<Owed> {
        let mut state = self.state();
        state.gone = true;
        state.held.clear();
        state.owed.drain().map(|(_, o)| o).collect()
    }
}
