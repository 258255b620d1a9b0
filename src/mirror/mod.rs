//! The harness's tool calls, mirrored into AHP as tool calls in the default session's chat.
//! This module owns the call path's end: a bounded, lossy hand-off that never waits.
//!
//! Calls join one open turn (started when the first call arrives, completed once no call
//! has been in flight for a moment); each is `chat/toolCallStart` + `chat/toolCallReady`,
//! then `chat/toolCallComplete`, each with `_meta["ahp-proxy/call"]` (when it began, how long
//! it took, and which AHP client made it when one did on an `mcp://` channel). The call path
//! only ever `try_send`s: when the queue is full the call is not mirrored, and the next turn
//! says how many were skipped. It sits between the MCP front and the `mcp://` channels
//! (which report calls) and the host (which it emits into).

mod confirmation;
mod result;
mod task;
mod turns;
mod wording;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::host::Host;
use crate::mcp::era::Era;

pub use confirmation::code_span;
pub use result::{cut, tool_call_result};
pub use turns::Turns;
pub use wording::Subject;

/// A held call's decision, as the host announces it.
pub use crate::host::approvals::Decision;

/// Longest text (bytes) of one mirrored content block or tool input; longer is cut.
pub const MAX_TEXT: usize = 16 * 1024;
/// Largest binary (base64 bytes) mirrored inline; larger is described instead.
pub const MAX_BINARY: usize = 256 * 1024;
/// Tool calls per turn before new calls wait for the next turn.
pub const MAX_CALLS_PER_TURN: usize = 64;
/// Calls that may wait for the next turn; beyond, they are counted as not shown (a turn
/// held open by one slow call must not hold every later call in memory).
pub const MAX_WAITING: usize = 4 * MAX_CALLS_PER_TURN;
/// Turns kept in the chat; the history is cleared (`chat/truncated`) beyond this.
pub const MAX_TURNS: usize = 50;
/// How long a turn stays open after its last call finished.
pub const LINGER: Duration = Duration::from_millis(500);
/// The `_meta` key of every mirrored call: `startedAt` (ISO 8601), `durationMs` once it
/// ended (measured on the call's path, from its start to its answer), `era` for a harness's
/// call (`"legacy"`: MCP 2025-11-25 and before, `"modern"`: 2026-07-28, as the harness spoke
/// it), and `clientId` when an AHP client made it on an `mcp://` channel.
pub const CALL_META: &str = "ahp-proxy/call";

/// When a mirrored call began and who made it, as its `_meta[CALL_META]` says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallStamp {
    /// ISO 8601, in milliseconds.
    pub started_at: String,
    /// The AHP client that made it on an `mcp://` channel (`None`: a harness).
    pub client_id: Option<String>,
    /// The `mcp://` channel of the server that runs a harness's call, put in an App's
    /// `_meta.ui` (VS Code renders an agent host's App only with it: the View is read over
    /// that channel); `None` for a call made on the channel itself.
    pub channel: Option<String>,
}

/// A tool call's `_meta`.
pub(crate) type Meta = serde_json::Map<String, Value>;

impl CallStamp {
    /// A call's `_meta` as it starts: the tool's `ui` (MCP Apps; with the server's channel when
    /// it names a View), and [`CALL_META`] with when it began and, for a call an AHP client
    /// made on an `mcp://` channel, that client's id.
    pub(crate) fn meta(&self, ui: Option<&Value>, era: Option<Era>) -> Meta {
        let mut meta = Meta::new();
        if let Some(ui) = ui {
            let mut ui = ui.clone();
            if let (Some(channel), Some(fields)) = (&self.channel, ui.as_object_mut()) {
                if fields.contains_key("resourceUri") {
                    fields.insert("channel".into(), channel.clone().into());
                }
            }
            meta.insert("ui".into(), ui);
        }
        let mut own = Meta::new();
        own.insert("startedAt".into(), self.started_at.clone().into());
        if let Some(era) = era {
            let name = match era {
                Era::Legacy => "legacy",
                Era::Modern => "modern",
            };
            own.insert("era".into(), name.into());
        }
        if let Some(client) = &self.client_id {
            own.insert("clientId".into(), client.clone().into());
        }
        meta.insert(CALL_META.into(), own.into());
        meta
    }
}

/// `meta` of a call that ended, with how long it took (`durationMs`, measured on its path).
pub(crate) fn with_duration(meta: &mut Meta, duration_ms: u64) {
    if let Some(Value::Object(own)) = meta.get_mut(CALL_META) {
        own.insert("durationMs".into(), duration_ms.into());
    }
}

/// A harness tool call as it begins.
#[derive(Debug, Clone, PartialEq)]
pub struct CallStart {
    /// The mirror's id for the call.
    pub call: u64,
    /// Who runs it.
    pub runner: Runner,
    /// The tool's name as the harness called it.
    pub tool: String,
    /// A human-readable name (the tool's title, else its name).
    pub display_name: String,
    /// The arguments, as JSON text.
    pub input: String,
    /// The tool's `_meta.ui` (MCP Apps), as the server declared it.
    pub ui: Option<Value>,
    /// What a call held for approval asks (`None`: it needs none).
    pub confirmation: Option<Confirmation>,
    /// The MCP era the harness spoke making it (`None`: an AHP client's call on an `mcp://`
    /// channel, no MCP harness's).
    pub era: Option<Era>,
}

/// How a call held for approval is shown: pending confirmation, editable, with the options.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    /// `confirmationTitle` (Markdown: names in [`code_span`]s, which VS Code shows as
    /// written).
    pub title: String,
    /// `invocationMessage` (Markdown): the tool, its server, its arguments and annotations.
    pub message: String,
    /// What is asked: a tool call (allow once or for the session, deny; its input
    /// editable), or trust in a server's definition (trust, or not; nothing to edit).
    pub asks: Asks,
}

/// What a confirmation asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asks {
    /// Whether a held tool call may run.
    ToolCall,
    /// Whether a server's definition is trusted to run.
    Trust,
}

/// The options of a call held for approval, by id: allow once, allow the tool or the server
/// for the harness's session, deny.
pub const OPTION_ONCE: &str = "allow-once";
/// Allow this tool for the rest of the harness's session.
pub const OPTION_TOOL: &str = "allow-tool-session";
/// Allow every tool of this server for the rest of the harness's session.
pub const OPTION_SERVER: &str = "allow-server-session";
/// Deny.
pub const OPTION_DENY: &str = "deny";

#[cfg(test)]
impl CallStart {
    /// Call `n` of tool `echo` on server `s`, for tests.
    pub fn example(n: u64) -> Self {
        CallStart {
            call: n,
            runner: Runner::Server {
                id: "file:///m.json#mcp=s".into(),
                name: "s".into(),
            },
            tool: "echo".into(),
            display_name: "Echo".into(),
            input: r#"{"text":"hi"}"#.into(),
            ui: Some(serde_json::json!({"resourceUri": "ui://v"})),
            confirmation: None,
            era: Some(Era::Legacy),
        }
    }
}

/// Who runs a mirrored call.
#[derive(Debug, Clone, PartialEq)]
pub enum Runner {
    /// An MCP server: the proxy forwards the call and completes it in the chat.
    Server {
        /// The `mcpServer` customization id.
        id: String,
        /// The server's declared name.
        name: String,
    },
    /// An AHP client (one of its `activeClients[].tools`): the client runs the call and
    /// completes it in the chat itself.
    Client {
        /// Its `clientId`.
        id: String,
        /// Its display name.
        name: String,
    },
}

/// How a harness tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The server answered with a result (possibly `isError`).
    Result(Value),
    /// The server's whole answer message as text (a result or an error), read by the
    /// mirror's task, off the call's path.
    Raw(String),
    /// It failed without a result (an MCP error, a timeout, the server died).
    Failed(String),
    /// The harness cancelled it or went away.
    Cancelled,
}

/// What the call path tells the mirror task.
pub(crate) enum Event {
    /// A call began at this time, made by this AHP client (`None`: a harness).
    Start(Box<CallStart>, SystemTime, Option<String>),
    /// A call ended, this long after it began.
    Finish(u64, Outcome, Duration),
    /// A call's result waits for review (the call ends later, in the chat, when decided).
    Review(u64, Outcome, Duration),
    /// The call is paused until its server gets a token with more scope.
    AuthRequired(u64, Box<ahp_types::state::McpAuthRequirement>),
    /// The server has its token again: the call resumes.
    AuthResolved(u64),
    /// The call ended in the chat already (its client completed it).
    Ended(u64),
}

/// The call path's end: cheap to clone, never waits.
#[derive(Clone)]
pub struct Mirror {
    tx: mpsc::Sender<Event>,
    next: Arc<AtomicU64>,
    skipped: Arc<AtomicU64>,
    given_up: Arc<GivenUp>,
}

/// Where to hear that a client gave up on a paused call of the mirror's chat.
struct GivenUp {
    host: std::sync::Weak<Host>,
    chat: String,
}

/// One mirrored call in flight: finish it with its outcome (dropping it reports
/// `Cancelled`).
pub struct Ticket {
    call: u64,
    started: Instant,
    permit: Option<mpsc::OwnedPermit<Event>>,
    tx: mpsc::Sender<Event>,
    given_up: Arc<GivenUp>,
    /// Whether [`Ticket::hold`] made the call one clients may give up on.
    held: std::sync::atomic::AtomicBool,
}

impl Ticket {
    /// Resolves when an AHP client gives up on this call (a failed `chat/toolCallComplete`
    /// while it waits for authorization); never, if there is no host any more.
    pub async fn given_up(&self) {
        let Some(mut heard) = self.given_up.host.upgrade().map(|h| h.given_up()) else {
            return std::future::pending().await;
        };
        let id = call_id(self.call);
        loop {
            match heard.recv().await {
                Ok((chat, call)) if chat == self.given_up.chat && call == id => return,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    return std::future::pending().await
                }
            }
        }
    }

    /// The call starts waiting for authorization: AHP clients may give up on it until
    /// [`Ticket::release`].
    pub fn hold(&self) {
        if let Some(host) = self.given_up.host.upgrade() {
            host.hold_paused(&self.given_up.chat, &call_id(self.call));
            self.held.store(true, Ordering::Relaxed);
        }
    }

    /// The call stops waiting. `false` when a client gave up on it first (then it must
    /// end as given up, whatever else happened meanwhile).
    pub fn release(&self) -> bool {
        if !self.held.swap(false, Ordering::Relaxed) {
            return true;
        }
        match self.given_up.host.upgrade() {
            Some(host) => host.release_paused(&self.given_up.chat, &call_id(self.call)),
            None => true,
        }
    }

    /// The call is held for approval: every decision from now on (`None` when there is no
    /// host any more).
    pub fn hold_for_approval(
        &self,
    ) -> Option<tokio::sync::broadcast::Receiver<crate::host::approvals::Decision>> {
        let host = self.given_up.host.upgrade()?;
        Some(host.hold_approval(&self.given_up.chat, &call_id(self.call)))
    }

    /// The proxy decides the call held for approval (`approved`, saying `reason`), unless a
    /// client did first (`false` then).
    pub fn decide(&self, approved: bool, reason: &str) -> bool {
        let Some(host) = self.given_up.host.upgrade() else {
            return false;
        };
        host.decide_approval(crate::host::approvals::Decision {
            call: (self.given_up.chat.clone(), call_id(self.call)),
            approved,
            client: None,
            reason: Some(reason.to_string()),
            edited_input: None,
            option: None,
            result: false,
        })
    }

    /// The decision taken on the call, if one was (for a listener that fell behind).
    pub fn decision(&self) -> Option<crate::host::approvals::Decision> {
        let host = self.given_up.host.upgrade()?;
        host.approval_decision(&self.given_up.chat, &call_id(self.call))
    }

    /// Whether `decision` is about this call.
    pub fn is_about(&self, decision: &crate::host::approvals::Decision) -> bool {
        decision.call.0 == self.given_up.chat && decision.call.1 == call_id(self.call)
    }

    /// The call waits for authorization (`auth` says what is needed). Lossy: when the
    /// queue is full the pause is simply not shown.
    pub fn auth_required(&self, auth: ahp_types::state::McpAuthRequirement) {
        let _ = self
            .tx
            .try_send(Event::AuthRequired(self.call, Box::new(auth)));
    }

    /// The call resumes after authorization (lossy, like [`Ticket::auth_required`]).
    pub fn auth_resolved(&self) {
        let _ = self.tx.try_send(Event::AuthResolved(self.call));
    }

    /// The call's result, `outcome`, waits for an AHP client's review: the chat shows it
    /// pending result confirmation. `false` when the mirror has stopped.
    pub async fn review(&self, outcome: Outcome) -> bool {
        let took = self.started.elapsed();
        (self.tx.send(Event::Review(self.call, outcome, took)).await).is_ok()
    }

    /// The call's client completed it in the chat itself: only the turn learns it ended.
    pub fn ended_elsewhere(mut self) {
        if let Some(permit) = self.permit.take() {
            permit.send(Event::Ended(self.call));
        }
    }

    /// The id the call has in the chat (`harness-call-<run>-<n>`).
    pub fn call_id(&self) -> String {
        call_id(self.call)
    }

    /// Report how the call ended.
    pub fn finish(mut self, outcome: Outcome) {
        if let Some(permit) = self.permit.take() {
            permit.send(Event::Finish(self.call, outcome, self.started.elapsed()));
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.release();
        if let Some(permit) = self.permit.take() {
            permit.send(Event::Finish(
                self.call,
                Outcome::Cancelled,
                self.started.elapsed(),
            ));
        }
    }
}

impl Mirror {
    /// Start the mirror task, emitting into `host`'s chat `chat`, with room for `queue`
    /// events (each call in flight holds two).
    pub fn spawn(
        host: Arc<Host>,
        chat: String,
        queue: usize,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(queue.max(2));
        let skipped = Arc::new(AtomicU64::new(0));
        let given_up = GivenUp {
            host: Arc::downgrade(&host),
            chat: chat.clone(),
        };
        let task = tokio::spawn(task::run(host, chat, rx, skipped.clone()));
        (
            Self {
                tx,
                next: Arc::new(AtomicU64::new(1)),
                skipped,
                given_up: Arc::new(given_up),
            },
            task,
        )
    }

    /// Begin a call an AHP client runs: it must be shown (the client acts on what the chat
    /// shows), so this waits for room in the queue rather than skipping it. `None` when the
    /// mirror has stopped.
    pub async fn begin_client(&self, start: impl FnOnce(u64) -> CallStart) -> Option<Ticket> {
        let first = self.tx.clone().reserve_owned().await.ok()?;
        let second = self.tx.clone().reserve_owned().await.ok()?;
        Some(self.issue(first, second, None, start))
    }

    /// Begin mirroring a harness's call; `None` (and one more skipped call) when the queue
    /// is full.
    pub fn begin(&self, start: impl FnOnce(u64) -> CallStart) -> Option<Ticket> {
        self.begin_as(None, start)
    }

    /// Begin mirroring a call AHP client `client_id` made on an `mcp://` channel, marked as
    /// its; lossy like [`Mirror::begin`].
    pub fn begin_for(
        &self,
        client_id: &str,
        start: impl FnOnce(u64) -> CallStart,
    ) -> Option<Ticket> {
        self.begin_as(Some(client_id.to_string()), start)
    }

    fn begin_as(
        &self,
        client_id: Option<String>,
        start: impl FnOnce(u64) -> CallStart,
    ) -> Option<Ticket> {
        let (Ok(first), Ok(second)) = (
            self.tx.clone().try_reserve_owned(),
            self.tx.clone().try_reserve_owned(),
        ) else {
            if !self.tx.is_closed() {
                self.skipped.fetch_add(1, Ordering::Relaxed);
            }
            return None;
        };
        Some(self.issue(first, second, client_id, start))
    }

    /// Number the call, send its start on `first` and keep `second` for its end.
    fn issue(
        &self,
        first: mpsc::OwnedPermit<Event>,
        second: mpsc::OwnedPermit<Event>,
        client_id: Option<String>,
        start: impl FnOnce(u64) -> CallStart,
    ) -> Ticket {
        let call = self.next.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        first.send(Event::Start(
            Box::new(start(call)),
            SystemTime::now(),
            client_id,
        ));
        Ticket {
            call,
            started,
            permit: Some(second),
            tx: self.tx.clone(),
            given_up: self.given_up.clone(),
            held: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// The id a mirrored call has in the chat: `harness-call-<run>-<n>`.
pub(crate) fn call_id(call: u64) -> String {
    format!("harness-call-{}-{call}", run_id())
}

/// The id of the mirror's turn number `n`: `harness-<run>-<n>`.
pub(crate) fn turn_id(n: u64) -> String {
    format!("harness-{}-{n}", run_id())
}

/// This run of the proxy, in every turn and call id: when it started, in milliseconds since
/// 1970 in base 36 (8 characters until 2059). A client that kept the chat of an earlier run
/// (VS Code keeps the turns it showed across a restart) sees the new run's turns and calls
/// as new ones, not as updates of the old ones they would otherwise share ids with.
pub fn run_id() -> &'static str {
    static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let millis = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        base36(millis)
    })
}

/// `n` in base 36, lowercase.
fn base36(mut n: u128) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

impl Outcome {
    /// A raw answer read: its `result` (a call's result), or its error's message.
    pub fn read(self) -> Outcome {
        let Outcome::Raw(text) = self else {
            return self;
        };
        let Ok(mut answer) = serde_json::from_str::<Value>(&text) else {
            return Outcome::Failed("the MCP server's answer could not be read".into());
        };
        if let Some(result) = answer.get_mut("result") {
            // Taken, not copied: the rest of the answer is dropped.
            return Outcome::Result(result.take());
        }
        match answer.get("error") {
            Some(error) => Outcome::Failed(
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the MCP server answered with an error")
                    .to_string(),
            ),
            None => Outcome::Failed("the MCP server's answer has no result".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_run_which_is_its_start_in_base_36() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36 * 36), "100");
        // 2026-01-01T00:00:00Z, in milliseconds.
        assert_eq!(base36(1_767_225_600_000), "mjuohs00");
        let run = run_id();
        assert!(
            run.len() == 8 && run.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{run}"
        );
        assert_eq!(call_id(3), format!("harness-call-{run}-3"));
        assert_eq!(turn_id(1), format!("harness-{run}-1"));
    }
}
