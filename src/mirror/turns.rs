//! Turn bookkeeping for the mirrored chat, pure: call events in, `chat/*` actions out.
//! Bounded: calls per turn, calls waiting for the next turn, turns kept in the history.

use std::collections::HashMap;

use ahp_types::actions::{
    ChatResponsePartAction, ChatToolCallCompleteAction, ChatToolCallReadyAction,
    ChatToolCallStartAction, ChatTruncatedAction, ChatTurnCompleteAction, ChatTurnStartedAction,
    StateAction,
};
use ahp_types::state::{
    MarkdownResponsePart, Message, MessageKind, MessageOrigin, ResponsePart,
    ToolCallClientContributor, ToolCallConfirmationReason, ToolCallContributor,
    ToolCallMcpContributor, ToolInput,
};

use super::{call_id, cut, tool_call_result, CallStamp, CallStart, Meta, Outcome, Runner, Subject};
use super::{MAX_CALLS_PER_TURN, MAX_TEXT, MAX_TURNS, MAX_WAITING};

/// The open turn.
#[derive(Debug)]
struct Open {
    id: String,
    started_ms: u64,
    calls: usize,
    /// The calls in flight, with the `_meta` each started with (completed with its timing)
    /// and what its messages name.
    in_flight: HashMap<u64, (Meta, Subject)>,
}

/// A call waiting for the next turn: its start, its `_meta`, and its outcome and duration
/// (ms) once known.
type Waiting = (CallStart, Meta, Option<(Outcome, u64)>);

/// Turn bookkeeping for one chat, pure: events in, actions out.
#[derive(Debug, Default)]
pub struct Turns {
    open: Option<Open>,
    /// Calls that arrived while the open turn was full, with their outcome once known.
    waiting: Vec<Waiting>,
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

    /// A harness's call began at `now_iso`; `missed` calls were not mirrored since the last
    /// start.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn start(
        &mut self,
        call: CallStart,
        missed: u64,
        now_ms: u64,
        now_iso: &str,
    ) -> Vec<StateAction> {
        let stamp = CallStamp {
            started_at: now_iso.to_string(),
            ..CallStamp::default()
        };
        self.start_stamped(call, &stamp, missed, now_ms, now_iso)
    }

    /// A call began (when, and for whom, `stamp` says); `missed` calls were not mirrored
    /// since the last start.
    pub fn start_stamped(
        &mut self,
        call: CallStart,
        stamp: &CallStamp,
        missed: u64,
        now_ms: u64,
        now_iso: &str,
    ) -> Vec<StateAction> {
        self.missed += missed;
        let mut out = Vec::new();
        let meta = stamp.meta(call.ui.as_ref(), call.era);
        // A call a client runs never waits: the client acts on what the chat shows. Nor
        // does a call held for approval: only what the chat shows can be approved, and a
        // turn kept full by other calls must not hide it until its time-out (each is a
        // request its harness holds open, so they are as many as the harness makes wait).
        let client_runs = matches!(call.runner, Runner::Client { .. });
        let held = call.confirmation.is_some();
        if self.full() && !client_runs && !held {
            if self.waiting.len() >= MAX_WAITING {
                self.missed += 1;
            } else {
                self.waiting.push((call, meta, None));
            }
            return out;
        }
        if self.open.is_none() {
            self.open_turn(now_ms, now_iso, &mut out);
        }
        self.start_in_turn(&call, meta, &mut out);
        out
    }

    /// A call ended, `duration_ms` after it began. When it was the last one running in a
    /// full turn, that turn completes at once and the calls that waited start the next one
    /// (under steady traffic the turn would otherwise never be idle long enough to close).
    pub fn finish(
        &mut self,
        call: u64,
        outcome: &Outcome,
        duration_ms: u64,
        now_ms: u64,
        now_iso: &str,
    ) -> Vec<StateAction> {
        let mut out = self.finish_call(call, outcome, duration_ms);
        if self.full() && self.idle() && !self.waiting.is_empty() {
            out.extend(self.close(now_ms, now_iso));
        }
        out
    }

    /// `call`'s result awaits review: shown pending result confirmation, still in flight.
    pub fn review(&self, call: u64, outcome: &Outcome, duration_ms: u64) -> Vec<StateAction> {
        let open = self.open.as_ref();
        let shown = open.and_then(|o| Some((o, o.in_flight.get(&call)?.clone())));
        (shown.into_iter())
            .map(|(open, (meta, subject))| {
                complete(&open.id, call, outcome, meta, &subject, duration_ms, true)
            })
            .collect()
    }

    /// Call `call` ended in the chat already (its client completed it): it is no longer in
    /// flight, nothing to emit. Like [`Turns::finish`], a full turn closes once idle.
    pub fn ended(&mut self, call: u64, now_ms: u64, now_iso: &str) -> Vec<StateAction> {
        if let Some(open) = self.open.as_mut() {
            open.in_flight.remove(&call);
        }
        if self.full() && self.idle() && !self.waiting.is_empty() {
            return self.close(now_ms, now_iso);
        }
        Vec::new()
    }

    /// Whether the open turn has taken all the calls it may.
    fn full(&self) -> bool {
        self.open
            .as_ref()
            .is_some_and(|t| t.calls >= MAX_CALLS_PER_TURN)
    }

    fn finish_call(&mut self, call: u64, outcome: &Outcome, duration_ms: u64) -> Vec<StateAction> {
        if let Some((_, _, slot)) = self.waiting.iter_mut().find(|(c, _, _)| c.call == call) {
            *slot = Some((outcome.clone(), duration_ms));
            return Vec::new();
        }
        let Some(open) = self.open.as_mut() else {
            return Vec::new();
        };
        let Some((meta, subject)) = open.in_flight.remove(&call) else {
            return Vec::new();
        };
        vec![complete(
            &open.id,
            call,
            outcome,
            meta,
            &subject,
            duration_ms,
            false,
        )]
    }

    /// Call `call` is paused for authorization: the turn it is in and the action, when it
    /// is in flight in the open turn.
    pub fn auth_required(
        &self,
        call: u64,
        auth: ahp_types::state::McpAuthRequirement,
    ) -> Option<(String, StateAction)> {
        let open = self
            .open
            .as_ref()
            .filter(|o| o.in_flight.contains_key(&call))?;
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
            .filter(|o| o.in_flight.contains_key(&call))
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
            for (call, meta, outcome) in batch {
                self.start_in_turn(&call, meta, &mut out);
                if let Some((outcome, duration_ms)) = outcome {
                    out.extend(self.finish_call(call.call, &outcome, duration_ms));
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
        let id = super::turn_id(self.next_turn);
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
            in_flight: HashMap::new(),
        });
    }

    fn start_in_turn(&mut self, call: &CallStart, meta: Meta, out: &mut Vec<StateAction>) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        open.calls += 1;
        let subject = Subject::of(call);
        let invocation_message = subject.invocation();
        open.in_flight.insert(call.call, (meta.clone(), subject));
        out.push(StateAction::ChatToolCallStart(ChatToolCallStartAction {
            turn_id: open.id.clone(),
            tool_call_id: call_id(call.call),
            meta: Some(meta),
            tool_name: call.tool.clone(),
            display_name: call.display_name.clone(),
            intention: None,
            contributor: Some(match &call.runner {
                Runner::Server { id, .. } => ToolCallContributor::Mcp(ToolCallMcpContributor {
                    customization_id: id.clone(),
                }),
                Runner::Client { id, .. } => {
                    ToolCallContributor::Client(ToolCallClientContributor {
                        client_id: id.clone(),
                    })
                }
            }),
        }));
        let ready = ChatToolCallReadyAction {
            turn_id: open.id.clone(),
            tool_call_id: call_id(call.call),
            meta: None,
            invocation_message,
            tool_input: Some(ToolInput::Inline(cut(&call.input, MAX_TEXT))),
            contributor: None,
            intention: None,
            confirmation_title: None,
            risk_assessment: None,
            edits: None,
            editable: None,
            options: None,
            confirmed: Some(ToolCallConfirmationReason::NotNeeded),
        };
        out.push(StateAction::ChatToolCallReady(match &call.confirmation {
            None => ready,
            Some(asked) => super::confirmation::pending(ready, asked),
        }));
    }
}

/// The completion of `call` (of `subject`): its result, and its `_meta` with how long it took
/// (`durationMs`, measured on the call's path), since a completion's `_meta` replaces the
/// call's.
fn complete(
    turn: &str,
    call: u64,
    outcome: &Outcome,
    mut meta: Meta,
    subject: &Subject,
    duration_ms: u64,
    review: bool,
) -> StateAction {
    super::with_duration(&mut meta, duration_ms);
    StateAction::ChatToolCallComplete(ChatToolCallCompleteAction {
        turn_id: turn.to_string(),
        tool_call_id: call_id(call),
        meta: Some(meta),
        result: tool_call_result(outcome, subject),
        requires_result_confirmation: review.then_some(true),
    })
}

#[cfg(test)]
mod tests;
