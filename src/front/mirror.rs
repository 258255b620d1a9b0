//! The harness's tool calls, mirrored into AHP as tool calls in the default session's chat:
//! a bounded, lossy hand-off from the call path, and the pure turn bookkeeping behind it.
//!
//! Calls join one open turn (started when the first call arrives, completed once no call
//! has been in flight for a moment); each is `chat/toolCallStart` + `chat/toolCallReady`,
//! then `chat/toolCallComplete`. The call path only ever `try_send`s: when the queue is
//! full the call is not mirrored, and the next turn says how many were skipped.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_types::actions::{
    ChatResponsePartAction, ChatToolCallCompleteAction, ChatToolCallReadyAction,
    ChatToolCallStartAction, ChatTruncatedAction, ChatTurnCompleteAction, ChatTurnStartedAction,
    StateAction,
};
use ahp_types::common::StringOrMarkdown;
use ahp_types::state::{
    MarkdownResponsePart, Message, MessageKind, MessageOrigin, ResponsePart,
    ToolCallConfirmationReason, ToolCallContributor, ToolCallMcpContributor, ToolCallResult,
    ToolInput, ToolResultContent, ToolResultEmbeddedResourceContent, ToolResultResourceContent,
    ToolResultTextContent,
};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::host::Host;

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

/// A harness tool call as it begins.
#[derive(Debug, Clone, PartialEq)]
pub struct CallStart {
    /// The mirror's id for the call.
    pub call: u64,
    /// The `mcpServer` customization id of the server that answers it.
    pub server: String,
    /// The server's declared name.
    pub server_name: String,
    /// The tool's name as the harness called it.
    pub tool: String,
    /// A human-readable name (the tool's title, else its name).
    pub display_name: String,
    /// The arguments, as JSON text.
    pub input: String,
    /// The tool's `_meta.ui` (MCP Apps), as the server declared it.
    pub ui: Option<Value>,
}

#[cfg(test)]
impl CallStart {
    /// Call `n` of tool `echo` on server `s`, for tests.
    pub fn example(n: u64) -> Self {
        CallStart {
            call: n,
            server: "file:///m.json#mcp=s".into(),
            server_name: "s".into(),
            tool: "echo".into(),
            display_name: "Echo".into(),
            input: r#"{"text":"hi"}"#.into(),
            ui: Some(serde_json::json!({"resourceUri": "ui://v"})),
        }
    }
}

/// How a harness tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The server answered with a result (possibly `isError`).
    Result(Value),
    /// It failed without a result (an MCP error, a timeout, the server died).
    Failed(String),
    /// The harness cancelled it or went away.
    Cancelled,
}

enum Event {
    Start(CallStart),
    Finish(u64, Outcome),
    /// The call is paused until its server gets a token with more scope.
    AuthRequired(u64, Box<ahp_types::state::McpAuthRequirement>),
    /// The server has its token again: the call resumes.
    AuthResolved(u64),
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

    /// Report how the call ended.
    pub fn finish(mut self, outcome: Outcome) {
        if let Some(permit) = self.permit.take() {
            permit.send(Event::Finish(self.call, outcome));
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.release();
        if let Some(permit) = self.permit.take() {
            permit.send(Event::Finish(self.call, Outcome::Cancelled));
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
        let task = tokio::spawn(run(host, chat, rx, skipped.clone()));
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

    /// Begin mirroring a call; `None` (and one more skipped call) when the queue is full.
    pub fn begin(&self, mut start: impl FnMut(u64) -> CallStart) -> Option<Ticket> {
        let (Ok(first), Ok(second)) = (
            self.tx.clone().try_reserve_owned(),
            self.tx.clone().try_reserve_owned(),
        ) else {
            if !self.tx.is_closed() {
                self.skipped.fetch_add(1, Ordering::Relaxed);
            }
            return None;
        };
        let call = self.next.fetch_add(1, Ordering::Relaxed);
        first.send(Event::Start(start(call)));
        Some(Ticket {
            call,
            permit: Some(second),
            tx: self.tx.clone(),
            given_up: self.given_up.clone(),
            held: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

async fn run(
    host: Arc<Host>,
    chat: String,
    mut rx: mpsc::Receiver<Event>,
    skipped: Arc<AtomicU64>,
) {
    let epoch = Instant::now();
    let mut turns = Turns::new();
    let mut linger: Option<tokio::time::Instant> = None;
    // Calls shown as waiting for authorization (each with a session input-needed entry).
    let mut paused: HashSet<u64> = HashSet::new();
    let lift = |host: &Host, call: u64| {
        let removed = StateAction::SessionInputNeededRemoved(
            ahp_types::actions::SessionInputNeededRemovedAction {
                id: input_id(&chat, call),
            },
        );
        let _ = host.emit(crate::host::DEFAULT_SESSION_URI, removed);
    };
    loop {
        let event = tokio::select! {
            event = rx.recv() => match event {
                Some(event) => Some(event),
                None => break,
            },
            _ = async {
                match linger {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => None,
        };
        let now = epoch.elapsed().as_millis() as u64;
        if event.is_none() {
            linger = None;
        }
        let actions = match event {
            Some(Event::Start(start)) => {
                let missed = skipped.swap(0, Ordering::Relaxed);
                turns.start(start, missed, now, &crate::host::store::now_iso8601())
            }
            Some(Event::Finish(call, outcome)) => {
                // A paused call that ends (given up) fails from `auth-required`.
                let actions = turns.finish(call, &outcome, now, &crate::host::store::now_iso8601());
                if paused.remove(&call) {
                    lift(&host, call);
                }
                actions
            }
            Some(Event::AuthRequired(call, auth)) => {
                if let Some((turn, action)) = turns.auth_required(call, *auth) {
                    if host.emit(&chat, action).is_ok() {
                        raise_input_needed(&host, &chat, &turn, call);
                        paused.insert(call);
                    }
                }
                Vec::new()
            }
            Some(Event::AuthResolved(call)) => {
                if paused.remove(&call) {
                    lift(&host, call);
                }
                turns.auth_resolved(call)
            }
            None => turns.close(now, &crate::host::store::now_iso8601()),
        };
        for action in actions {
            if let Err(error) = host.emit(&chat, action) {
                tracing::debug!(?error, "tool call not mirrored");
            }
        }
        // The countdown starts when the turn becomes idle; events that leave it idle (a call
        // waiting for the next turn, an authorization) do not restart it.
        linger = if turns.idle() {
            linger.or_else(|| Some(tokio::time::Instant::now() + LINGER))
        } else {
            None
        };
    }
    // The front is gone: close the open turn so no call stays running in clients' eyes.
    let now = epoch.elapsed().as_millis() as u64;
    for action in turns.shutdown(now) {
        let _ = host.emit(&chat, action);
    }
}

/// The session-level entry for call `call` of `chat` waiting for authorization.
fn input_id(chat: &str, call: u64) -> String {
    format!("{chat}#{}", call_id(call))
}

/// Surface a paused call at the session level (`session/inputNeededSet`, kind
/// `toolAuthentication`), with the tool call as the chat now holds it.
fn raise_input_needed(host: &Host, chat: &str, turn: &str, call: u64) {
    use ahp_types::state::{SnapshotState, ToolCallState};
    let Some(snapshot) = host.snapshot(chat) else {
        return;
    };
    let SnapshotState::Chat(state) = snapshot.state else {
        return;
    };
    let id = call_id(call);
    let paused = state
        .active_turn
        .iter()
        .flat_map(|t| &t.response_parts)
        .find_map(|p| match p {
            ResponsePart::ToolCall(t) => match &t.tool_call {
                ToolCallState::AuthRequired(a) if a.tool_call_id == id => Some((**a).clone()),
                _ => None,
            },
            _ => None,
        });
    let Some(tool_call) = paused else {
        return;
    };
    let request = ahp_types::state::SessionInputRequest::ToolAuthentication(Box::new(
        ahp_types::state::SessionToolAuthenticationRequest {
            id: input_id(chat, call),
            chat: chat.to_string(),
            turn_id: turn.to_string(),
            tool_call,
        },
    ));
    let set = StateAction::SessionInputNeededSet(Box::new(
        ahp_types::actions::SessionInputNeededSetAction { request },
    ));
    if let Err(error) = host.emit(crate::host::DEFAULT_SESSION_URI, set) {
        tracing::debug!(?error, "input-needed not raised");
    }
}

/// The open turn.
#[derive(Debug)]
struct Open {
    id: String,
    started_ms: u64,
    calls: usize,
    in_flight: HashSet<u64>,
}

/// Turn bookkeeping for one chat, pure: events in, actions out.
#[derive(Debug, Default)]
pub struct Turns {
    open: Option<Open>,
    /// Calls that arrived while the open turn was full, with their outcome once known.
    waiting: Vec<(CallStart, Option<Outcome>)>,
    next_turn: u64,
    kept: usize,
    missed: u64,
}

impl Turns {
    /// No turn yet.
    pub fn new() -> Self {
        Self {
            open: None,
            waiting: Vec::new(),
            next_turn: 1,
            kept: 0,
            missed: 0,
        }
    }

    /// Whether a turn is open with nothing in flight (it may be closed).
    pub fn idle(&self) -> bool {
        self.open.as_ref().is_some_and(|t| t.in_flight.is_empty())
    }

    /// A call began; `missed` calls were not mirrored since the last start.
    pub fn start(
        &mut self,
        call: CallStart,
        missed: u64,
        now_ms: u64,
        now_iso: &str,
    ) -> Vec<StateAction> {
        self.missed += missed;
        let mut out = Vec::new();
        if self.full() {
            if self.waiting.len() >= MAX_WAITING {
                self.missed += 1;
            } else {
                self.waiting.push((call, None));
            }
            return out;
        }
        if self.open.is_none() {
            self.open_turn(now_ms, now_iso, &mut out);
        }
        self.start_in_turn(&call, &mut out);
        out
    }

    /// A call ended. When it was the last one running in a full turn, that turn completes at
    /// once and the calls that waited start the next one (under steady traffic the turn
    /// would otherwise never be idle long enough to close).
    pub fn finish(
        &mut self,
        call: u64,
        outcome: &Outcome,
        now_ms: u64,
        now_iso: &str,
    ) -> Vec<StateAction> {
        let mut out = self.finish_call(call, outcome);
        if self.full() && self.idle() && !self.waiting.is_empty() {
            out.extend(self.close(now_ms, now_iso));
        }
        out
    }

    /// Whether the open turn has taken all the calls it may.
    fn full(&self) -> bool {
        self.open
            .as_ref()
            .is_some_and(|t| t.calls >= MAX_CALLS_PER_TURN)
    }

    fn finish_call(&mut self, call: u64, outcome: &Outcome) -> Vec<StateAction> {
        if let Some((_, slot)) = self.waiting.iter_mut().find(|(c, _)| c.call == call) {
            *slot = Some(outcome.clone());
            return Vec::new();
        }
        let Some(open) = self.open.as_mut() else {
            return Vec::new();
        };
        if !open.in_flight.remove(&call) {
            return Vec::new();
        }
        vec![complete(&open.id, call, outcome)]
    }

    /// Call `call` is paused for authorization: the turn it is in and the action, when it
    /// is in flight in the open turn.
    pub fn auth_required(
        &self,
        call: u64,
        auth: ahp_types::state::McpAuthRequirement,
    ) -> Option<(String, StateAction)> {
        let open = self.open.as_ref().filter(|o| o.in_flight.contains(&call))?;
        Some((
            open.id.clone(),
            StateAction::ChatToolCallAuthRequired(
                ahp_types::actions::ChatToolCallAuthRequiredAction {
                    turn_id: open.id.clone(),
                    tool_call_id: call_id(call),
                    meta: None,
                    auth,
                },
            ),
        ))
    }

    /// Call `call` resumes after authorization.
    pub fn auth_resolved(&self, call: u64) -> Vec<StateAction> {
        self.open
            .as_ref()
            .filter(|o| o.in_flight.contains(&call))
            .map(|open| {
                StateAction::ChatToolCallAuthResolved(
                    ahp_types::actions::ChatToolCallAuthResolvedAction {
                        turn_id: open.id.clone(),
                        tool_call_id: call_id(call),
                        meta: None,
                    },
                )
            })
            .into_iter()
            .collect()
    }

    /// Complete the open turn if it is idle; calls that waited start the next one (up to
    /// [`MAX_CALLS_PER_TURN`] per turn; a turn whose calls had all finished while waiting
    /// completes in turn, as long as others still wait).
    pub fn close(&mut self, now_ms: u64, now_iso: &str) -> Vec<StateAction> {
        let mut out = Vec::new();
        if !self.idle() {
            return out;
        }
        loop {
            if let Some(open) = self.open.take() {
                out.push(StateAction::ChatTurnComplete(ChatTurnCompleteAction {
                    turn_id: open.id,
                    duration: i64::try_from(now_ms.saturating_sub(open.started_ms))
                        .unwrap_or(i64::MAX),
                    meta: None,
                }));
                self.kept += 1;
            }
            if self.waiting.is_empty() {
                break;
            }
            self.open_turn(now_ms, now_iso, &mut out);
            let batch = self.waiting.len().min(MAX_CALLS_PER_TURN);
            let batch: Vec<_> = self.waiting.drain(..batch).collect();
            for (call, outcome) in batch {
                self.start_in_turn(&call, &mut out);
                if let Some(outcome) = outcome {
                    out.extend(self.finish_call(call.call, &outcome));
                }
            }
            if !self.idle() || self.waiting.is_empty() {
                break;
            }
        }
        out
    }

    /// The mirror stops: complete the open turn (its unfinished calls end as skipped).
    pub fn shutdown(&mut self, now_ms: u64) -> Vec<StateAction> {
        self.open
            .take()
            .map(|open| {
                StateAction::ChatTurnComplete(ChatTurnCompleteAction {
                    turn_id: open.id,
                    duration: i64::try_from(now_ms.saturating_sub(open.started_ms))
                        .unwrap_or(i64::MAX),
                    meta: None,
                })
            })
            .into_iter()
            .collect()
    }

    fn open_turn(&mut self, now_ms: u64, now_iso: &str, out: &mut Vec<StateAction>) {
        if self.kept >= MAX_TURNS {
            out.push(StateAction::ChatTruncated(ChatTruncatedAction {
                turn_id: None,
            }));
            self.kept = 0;
        }
        let id = format!("harness-{}", self.next_turn);
        self.next_turn += 1;
        out.push(StateAction::ChatTurnStarted(ChatTurnStartedAction {
            turn_id: id.clone(),
            started_at: now_iso.to_string(),
            message: Message {
                text: "Tool calls from the MCP harness".into(),
                origin: MessageOrigin {
                    kind: MessageKind::Agent,
                },
                attachments: None,
                model: None,
                agent: None,
                meta: None,
            },
            queued_message_id: None,
            meta: None,
        }));
        if self.missed > 0 {
            let missed = std::mem::take(&mut self.missed);
            out.push(StateAction::ChatResponsePart(ChatResponsePartAction {
                turn_id: id.clone(),
                part: ResponsePart::Markdown(MarkdownResponsePart {
                    id: format!("{id}-skipped"),
                    content: format!(
                        "{missed} tool call(s) were not shown here: the mirror was busy."
                    ),
                }),
                meta: None,
            }));
        }
        self.open = Some(Open {
            id,
            started_ms: now_ms,
            calls: 0,
            in_flight: HashSet::new(),
        });
    }

    fn start_in_turn(&mut self, call: &CallStart, out: &mut Vec<StateAction>) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        open.calls += 1;
        open.in_flight.insert(call.call);
        let meta = call.ui.as_ref().map(|ui| {
            let mut meta = serde_json::Map::new();
            meta.insert("ui".into(), ui.clone());
            meta
        });
        out.push(StateAction::ChatToolCallStart(ChatToolCallStartAction {
            turn_id: open.id.clone(),
            tool_call_id: call_id(call.call),
            meta,
            tool_name: call.tool.clone(),
            display_name: call.display_name.clone(),
            intention: None,
            contributor: Some(ToolCallContributor::Mcp(ToolCallMcpContributor {
                customization_id: call.server.clone(),
            })),
        }));
        out.push(StateAction::ChatToolCallReady(ChatToolCallReadyAction {
            turn_id: open.id.clone(),
            tool_call_id: call_id(call.call),
            meta: None,
            invocation_message: StringOrMarkdown::Plain(format!(
                "Calling {} on {}",
                call.display_name, call.server_name
            )),
            tool_input: Some(ToolInput::Inline(cut(&call.input, MAX_TEXT))),
            contributor: None,
            intention: None,
            confirmation_title: None,
            risk_assessment: None,
            edits: None,
            editable: None,
            options: None,
            confirmed: Some(ToolCallConfirmationReason::NotNeeded),
        }));
    }
}

fn call_id(call: u64) -> String {
    format!("harness-call-{call}")
}

fn complete(turn: &str, call: u64, outcome: &Outcome) -> StateAction {
    StateAction::ChatToolCallComplete(ChatToolCallCompleteAction {
        turn_id: turn.to_string(),
        tool_call_id: call_id(call),
        meta: None,
        result: tool_call_result(outcome),
        requires_result_confirmation: None,
    })
}

/// An MCP outcome as an AHP tool call result: content blocks mapped (text stays text,
/// images and audio and blobs become embedded resources, resource links resource refs),
/// large ones cut or described, `structuredContent` kept when it is an object.
pub fn tool_call_result(outcome: &Outcome) -> ToolCallResult {
    match outcome {
        Outcome::Result(result) => {
            let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
            let content: Vec<ToolResultContent> = result
                .get("content")
                .and_then(Value::as_array)
                .map(|blocks| blocks.iter().filter_map(content_block).collect())
                .unwrap_or_default();
            let structured = result
                .get("structuredContent")
                .and_then(Value::as_object)
                .filter(|o| Value::Object((*o).clone()).to_string().len() <= MAX_TEXT * 4)
                .cloned();
            ToolCallResult {
                success: !failed,
                past_tense_message: StringOrMarkdown::Plain(
                    if failed {
                        "The tool reported an error"
                    } else {
                        "Done"
                    }
                    .into(),
                ),
                content: Some(content),
                structured_content: structured,
                error: None,
            }
        }
        Outcome::Failed(message) => ToolCallResult {
            success: false,
            past_tense_message: StringOrMarkdown::Plain(format!("Failed: {}", cut(message, 512))),
            content: None,
            structured_content: None,
            error: Some(Value::String(cut(message, MAX_TEXT))),
        },
        Outcome::Cancelled => ToolCallResult {
            success: false,
            past_tense_message: StringOrMarkdown::Plain("Cancelled by the harness".into()),
            content: None,
            structured_content: None,
            error: Some(Value::String("cancelled".into())),
        },
    }
}

fn content_block(block: &Value) -> Option<ToolResultContent> {
    let text = |t: &str| {
        ToolResultContent::Text(ToolResultTextContent {
            text: cut(t, MAX_TEXT),
        })
    };
    let binary = |data: &str, mime: &str| {
        if data.len() <= MAX_BINARY {
            ToolResultContent::EmbeddedResource(ToolResultEmbeddedResourceContent {
                data: data.to_string(),
                content_type: mime.to_string(),
            })
        } else {
            text(&format!(
                "[{mime}, {} bytes of base64, not mirrored]",
                data.len()
            ))
        }
    };
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    match block.get("type").and_then(Value::as_str)? {
        "text" => Some(text(
            block.get("text").and_then(Value::as_str).unwrap_or(""),
        )),
        "image" | "audio" => Some(binary(
            block.get("data").and_then(Value::as_str).unwrap_or(""),
            block
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream"),
        )),
        "resource" => {
            let resource = block.get("resource")?;
            let mime = str_of(resource, "mimeType");
            match (str_of(resource, "text"), str_of(resource, "blob")) {
                (Some(t), _) => Some(text(&t)),
                (None, Some(blob)) => Some(binary(
                    &blob,
                    mime.as_deref().unwrap_or("application/octet-stream"),
                )),
                (None, None) => None,
            }
        }
        "resource_link" => Some(ToolResultContent::Resource(ToolResultResourceContent {
            uri: str_of(block, "uri")?,
            size_hint: block.get("size").and_then(Value::as_i64),
            content_type: str_of(block, "mimeType"),
            nonce: None,
        })),
        _ => None,
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), saying how much was cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes not shown)",
        &text[..end],
        text.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp::reducers::{apply_action_to_chat, ReduceOutcome};
    use ahp_types::state::{ChatState, ToolCallState};
    use serde_json::json;

    fn chat() -> ChatState {
        serde_json::from_value(json!({
            "resource": "ahp-chat:/t", "title": "t", "status": 1,
            "modifiedAt": "2026-01-01T00:00:00.000Z", "turns": []
        }))
        .unwrap()
    }

    fn call(n: u64) -> CallStart {
        CallStart::example(n)
    }

    /// Apply actions with the official reducers; every one must apply.
    fn apply(state: &mut ChatState, actions: Vec<StateAction>) {
        for action in actions {
            assert!(
                !matches!(action, StateAction::Unknown(_)),
                "unknown action {action:?}"
            );
            let outcome = apply_action_to_chat(state, &action);
            assert_eq!(outcome, ReduceOutcome::Applied, "{action:?}");
        }
    }

    const T0: &str = "2026-01-01T00:00:00.000Z";

    #[test]
    fn a_call_paused_for_authorization_resumes_and_completes() {
        let mut state = chat();
        let mut turns = Turns::new();
        apply(&mut state, turns.start(call(1), 0, 0, T0));
        let auth: ahp_types::state::McpAuthRequirement = serde_json::from_value(json!({
            "reason": "insufficientScope", "resource": {"resource": "http://h/mcp"},
            "requiredScopes": ["admin"]
        }))
        .unwrap();
        let (turn, paused) = turns.auth_required(1, auth).expect("in flight");
        assert_eq!(turn, "harness-1");
        apply(&mut state, vec![paused]);
        let status =
            |state: &ChatState| match &state.active_turn.as_ref().unwrap().response_parts[0] {
                ResponsePart::ToolCall(tc) => {
                    serde_json::to_value(&tc.tool_call).unwrap()["status"].clone()
                }
                other => panic!("{other:?}"),
            };
        assert_eq!(status(&state), "auth-required");
        apply(&mut state, turns.auth_resolved(1));
        assert_eq!(status(&state), "running");
        apply(
            &mut state,
            turns.finish(1, &Outcome::Result(json!({"content": []})), 0, T0),
        );
        assert_eq!(status(&state), "completed");
        assert!(turns
            .auth_required(
                2,
                serde_json::from_value(json!({
            "reason": "required", "resource": {"resource": "http://h/mcp"}}))
                .unwrap()
            )
            .is_none());
    }

    #[test]
    fn concurrent_calls_share_a_turn_that_closes_when_idle() {
        let mut state = chat();
        let mut turns = Turns::new();
        apply(&mut state, turns.start(call(1), 0, 0, T0));
        apply(&mut state, turns.start(call(2), 0, 1, T0));
        assert!(!turns.idle());
        assert!(turns.close(2, T0).is_empty(), "a busy turn stays open");
        let active = state.active_turn.as_ref().expect("turn open");
        assert_eq!(active.response_parts.len(), 2);
        match &active.response_parts[0] {
            ResponsePart::ToolCall(tc) => match &tc.tool_call {
                ToolCallState::Running(r) => {
                    assert_eq!(r.tool_name, "echo");
                    assert_eq!(
                        serde_json::to_value(&r.contributor).unwrap(),
                        json!({"kind": "mcp", "customizationId": "file:///m.json#mcp=s"})
                    );
                    assert_eq!(
                        serde_json::to_value(&r.meta).unwrap(),
                        json!({"ui": {"resourceUri": "ui://v"}})
                    );
                }
                other => panic!("expected running, got {other:?}"),
            },
            other => panic!("expected a tool call, got {other:?}"),
        }
        apply(
            &mut state,
            turns.finish(
                2,
                &Outcome::Result(json!({"content": [{"type": "text", "text": "hi"}]})),
                3,
                T0,
            ),
        );
        apply(
            &mut state,
            turns.finish(1, &Outcome::Failed("boom".into()), 4, T0),
        );
        assert!(turns.idle());
        apply(&mut state, turns.close(40, T0));
        assert!(state.active_turn.is_none());
        assert_eq!(state.turns.len(), 1);
        assert_eq!(state.status & 0b11111, 1, "idle again");
    }

    #[test]
    fn a_full_turn_defers_new_calls_to_the_next_turn() {
        let mut state = chat();
        let mut turns = Turns::new();
        for n in 0..MAX_CALLS_PER_TURN as u64 {
            apply(&mut state, turns.start(call(n), 0, 0, T0));
        }
        assert!(turns.start(call(999), 3, 0, T0).is_empty());
        // The deferred call finishes before its turn exists: it appears complete.
        assert!(turns.finish(999, &Outcome::Cancelled, 1, T0).is_empty());
        for n in 0..MAX_CALLS_PER_TURN as u64 {
            apply(&mut state, turns.finish(n, &Outcome::Cancelled, n, T0));
        }
        // The last call of the full turn ended: that turn completed at once, without waiting
        // for the mirror's linger, and the deferred call opened the next one.
        assert_eq!(state.turns.len(), 1);
        let active = state.active_turn.as_ref().expect("second turn");
        // The skipped-calls note, then the deferred call, already complete.
        assert_eq!(active.response_parts.len(), 2);
        assert!(matches!(
            active.response_parts[0],
            ResponsePart::Markdown(_)
        ));
        match &active.response_parts[1] {
            ResponsePart::ToolCall(tc) => {
                assert!(matches!(tc.tool_call, ToolCallState::Completed(_)))
            }
            other => panic!("{other:?}"),
        }
        assert!(turns.idle());
    }

    #[test]
    fn steady_traffic_keeps_turns_moving_and_holds_no_backlog() {
        // Always one call in flight (a harness calling back to back while the previous
        // answer is on its way): the turn is never idle for the linger, yet turns advance.
        let mut state = chat();
        let mut turns = Turns::new();
        apply(&mut state, turns.start(call(0), 0, 0, T0));
        for n in 1..10_000u64 {
            apply(&mut state, turns.start(call(n), 0, n, T0));
            apply(&mut state, turns.finish(n - 1, &Outcome::Cancelled, n, T0));
            assert!(
                turns.waiting.len() <= 1,
                "call {n}: {} waiting",
                turns.waiting.len()
            );
        }
        assert!(state.turns.len() <= MAX_TURNS);
        assert!(turns.next_turn > 10_000 / MAX_CALLS_PER_TURN as u64);
        assert_eq!(turns.missed, 0, "every call was shown");
    }

    #[test]
    fn one_slow_call_holds_at_most_max_waiting_calls() {
        let mut state = chat();
        let mut turns = Turns::new();
        for n in 0..MAX_CALLS_PER_TURN as u64 {
            apply(&mut state, turns.start(call(n), 0, 0, T0));
        }
        // Every call but the first ends; thousands more come and go meanwhile.
        for n in 1..MAX_CALLS_PER_TURN as u64 {
            apply(&mut state, turns.finish(n, &Outcome::Cancelled, 1, T0));
        }
        let more = 5_000u64;
        for n in 1_000..1_000 + more {
            apply(&mut state, turns.start(call(n), 0, 2, T0));
            apply(&mut state, turns.finish(n, &Outcome::Cancelled, 2, T0));
        }
        assert_eq!(turns.waiting.len(), MAX_WAITING);
        assert_eq!(turns.missed, more - MAX_WAITING as u64);
        // The slow call ends: the waiting calls fill the next turns at once, the last of
        // them stays open (it lingers like any turn), and it says how many were not shown.
        apply(&mut state, turns.finish(0, &Outcome::Cancelled, 3, T0));
        assert_eq!(turns.waiting.len(), 0);
        assert_eq!(
            state.turns.len(),
            MAX_WAITING / MAX_CALLS_PER_TURN,
            "the slow turn and all but the last of the waiting ones completed"
        );
        let active = state.active_turn.as_ref().expect("the last waiting turn");
        assert_eq!(active.response_parts.len(), MAX_CALLS_PER_TURN);
        let notes: Vec<&ResponsePart> = state
            .turns
            .iter()
            .flat_map(|t| &t.response_parts)
            .filter(|p| matches!(p, ResponsePart::Markdown(_)))
            .collect();
        assert_eq!(notes.len(), 1, "one note for the calls not shown");
    }

    #[test]
    fn history_is_bounded() {
        let mut state = chat();
        let mut turns = Turns::new();
        for n in 0..(MAX_TURNS as u64 + 3) {
            apply(&mut state, turns.start(call(n), 0, n, T0));
            apply(&mut state, turns.finish(n, &Outcome::Cancelled, n, T0));
            apply(&mut state, turns.close(n + 1, T0));
        }
        assert!(state.turns.len() <= MAX_TURNS);
    }

    #[test]
    fn results_map_to_ahp_content_with_limits() {
        let result = tool_call_result(&Outcome::Result(json!({
            "content": [
                {"type": "text", "text": "x".repeat(MAX_TEXT + 10)},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "x://b", "blob": "AAEC", "mimeType": "application/x"}},
                {"type": "mystery"}
            ],
            "structuredContent": {"sum": 3},
            "isError": false
        })));
        let value = serde_json::to_value(&result).unwrap();
        assert_eq!(value["success"], true);
        let content = value["content"].as_array().unwrap();
        assert_eq!(content.len(), 4);
        assert!(content[0]["text"]
            .as_str()
            .unwrap()
            .ends_with("(10 more bytes not shown)"));
        assert_eq!(
            content[1],
            json!({"type": "embeddedResource", "data": "AAAA", "contentType": "image/png"})
        );
        assert_eq!(
            content[2],
            json!({"type": "resource", "uri": "file:///a", "contentType": "text/plain"})
        );
        assert_eq!(content[3]["type"], "embeddedResource");
        assert_eq!(value["structuredContent"], json!({"sum": 3}));
        let failed = serde_json::to_value(tool_call_result(&Outcome::Result(
            json!({"content": [], "isError": true}),
        )))
        .unwrap();
        assert_eq!(failed["success"], false);
        assert_eq!(cut("héllo", 2), "h… (5 more bytes not shown)");
    }
}
