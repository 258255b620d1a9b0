//! Harness tool calls held for approval, or their results held for review: which calls of
//! which chat wait, the first decision on each (a client's `chat/toolCallConfirmed` or
//! `chat/toolCallResultConfirmed`, or the proxy's on a timeout or a cancel) committed and
//! announced to the front, a late one refused naming who decided, and the session's
//! `toolConfirmation` input-needed entry raised and lifted with it.

use std::collections::{HashSet, VecDeque};

use ahp_types::actions::{
    ChatToolCallConfirmedAction, ChatToolCallResultConfirmedAction,
    SessionInputNeededRemovedAction, SessionInputNeededSetAction, StateAction,
};
use ahp_types::common::StringOrMarkdown;
use ahp_types::state::{
    ResponsePart, SessionInputRequest, SessionToolConfirmationRequest, SnapshotState,
    ToolCallCancellationReason, ToolCallConfirmationReason, ToolCallConfirmationState,
    ToolCallState,
};
use tokio::sync::broadcast;

use super::input_needed::input_id;
use super::{Core, Host};

/// Why a connection that did not present the approval key may not decide a held call.
pub const NOT_A_DECIDER: &str = "this connection did not present the approval key: it may watch held calls but not approve, deny or review them (open the console from the URL the proxy prints, paste the VS Code URL with its tkn, or use `ahp-proxy approve`/`deny`)";

/// Decisions kept to name who decided when a late answer comes.
const DECIDED_KEPT: usize = 256;
/// How many decisions a listener may fall behind before it misses some.
const DECISION_BACKLOG: usize = 256;

/// How a held call was decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The chat and the call's id in it.
    pub call: (String, String),
    /// Approved (sent on) or denied.
    pub approved: bool,
    /// The AHP client that decided (`None`: the proxy itself).
    pub client: Option<String>,
    /// Why, as the decider said.
    pub reason: Option<String>,
    /// The input the call goes on with, when a client edited it.
    pub edited_input: Option<String>,
    /// The option the client chose, by its id.
    pub option: Option<String>,
    /// About the call's result (`chat/toolCallResultConfirmed`), not the call itself.
    pub result: bool,
}

/// The held calls, the latest decisions, and the announcement of each decision.
pub struct Approvals {
    held: HashSet<(String, String)>,
    /// Calls shown in the session's input-needed list.
    announced: HashSet<(String, String)>,
    decided: VecDeque<Decision>,
    decisions: broadcast::Sender<Decision>,
}

impl Default for Approvals {
    fn default() -> Self {
        Self {
            held: HashSet::new(),
            announced: HashSet::new(),
            decided: VecDeque::new(),
            decisions: broadcast::channel(DECISION_BACKLOG).0,
        }
    }
}

impl Approvals {
    /// Whether call `call` of `chat` waits for a decision.
    pub fn is_held(&self, chat: &str, call: &str) -> bool {
        self.held.contains(&(chat.to_string(), call.to_string()))
    }

    /// Why a decision on call `call` of `chat`, which is not held, is refused.
    pub fn refusal(&self, chat: &str, call: &str) -> Option<String> {
        let decision = self.decision(chat, call)?;
        let verb = if decision.approved {
            "approved"
        } else {
            "denied"
        };
        Some(match &decision.client {
            Some(client) => format!("tool call {call:?} was already {verb} by client {client:?}"),
            None => format!("tool call {call:?} was already {verb} by the proxy"),
        })
    }

    /// The decision on call `call` of `chat`, while it is among the latest.
    pub fn decision(&self, chat: &str, call: &str) -> Option<&Decision> {
        (self.decided.iter().rev()).find(|d| d.call.0 == chat && d.call.1 == call)
    }

    fn decide(&mut self, decision: &Decision) -> bool {
        if !self.held.remove(&decision.call) {
            return false;
        }
        if self.decided.len() >= DECIDED_KEPT {
            self.decided.pop_front();
        }
        self.decided.push_back(decision.clone());
        let _ = self.decisions.send(decision.clone());
        true
    }
}

/// `text` of a reason as written.
pub fn plain(text: &StringOrMarkdown) -> String {
    match text {
        StringOrMarkdown::Plain(text) => text.clone(),
        StringOrMarkdown::Markdown { markdown } => markdown.clone(),
    }
}

/// Judge a client's `chat/toolCallConfirmed` on a held call: its edited input must be a
/// JSON object.
pub fn admit(action: &ChatToolCallConfirmedAction) -> Result<(), String> {
    match action
        .edited_tool_input
        .as_ref()
        .filter(|_| action.approved)
    {
        Some(edited) => match serde_json::from_str::<serde_json::Value>(edited) {
            Ok(serde_json::Value::Object(_)) => Ok(()),
            _ => Err("editedToolInput must be a JSON object (the tool's arguments)".into()),
        },
        None => Ok(()),
    }
}

impl Host {
    /// Call `call` of `chat` waits for approval from now on; every decision is announced
    /// on the receiver (subscribed before the call is held, so none is missed).
    pub fn hold_approval(&self, chat: &str, call: &str) -> broadcast::Receiver<Decision> {
        let mut core = self.core();
        let heard = core.approvals.decisions.subscribe();
        core.approvals
            .held
            .insert((chat.to_string(), call.to_string()));
        heard
    }

    /// The proxy decides call `call` of `chat` (a timeout, a cancel) unless a client did
    /// first: `false` then.
    pub fn decide_approval(&self, decision: Decision) -> bool {
        let mut core = self.core();
        if !core.approvals.is_held(&decision.call.0, &decision.call.1) {
            return false;
        }
        let (chat, call) = decision.call.clone();
        let Some((turn, result)) = core.turn_of(&chat, &call) else {
            return core.approvals.decide(&decision);
        };
        let decision = Decision { result, ..decision };
        let action = if result {
            StateAction::ChatToolCallResultConfirmed(ChatToolCallResultConfirmedAction {
                turn_id: turn,
                tool_call_id: call.clone(),
                meta: None,
                approved: decision.approved,
            })
        } else {
            StateAction::ChatToolCallConfirmed(ChatToolCallConfirmedAction {
                turn_id: turn,
                tool_call_id: call.clone(),
                meta: None,
                approved: decision.approved,
                confirmed: decision
                    .approved
                    .then_some(ToolCallConfirmationReason::Setting),
                reason: (!decision.approved).then_some(ToolCallCancellationReason::Denied),
                edited_tool_input: None,
                user_suggestion: None,
                reason_message: decision.reason.clone().map(StringOrMarkdown::Plain),
                selected_option_id: None,
            })
        };
        if let Err(error) = core.commit_and_publish(&chat, action, None) {
            tracing::debug!(?error, "approval decision not shown");
        }
        core.decided(&decision);
        true
    }

    /// The decision on call `call` of `chat`, if one was taken lately (for a listener that
    /// fell behind).
    pub fn approval_decision(&self, chat: &str, call: &str) -> Option<Decision> {
        self.core().approvals.decision(chat, call).cloned()
    }

    /// Call `call` of `chat` is shown waiting for approval (or its result for review) in
    /// turn `turn`: the session gets a `toolConfirmation` input-needed entry with the call
    /// as the chat holds it.
    pub fn announce_approval(&self, chat: &str, turn: &str, call: &str) {
        let Some(SnapshotState::Chat(state)) = self.snapshot(chat).map(|s| s.state) else {
            return;
        };
        let pending = (state.active_turn.iter())
            .flat_map(|t| &t.response_parts)
            .find_map(|p| match p {
                ResponsePart::ToolCall(t) => match &t.tool_call {
                    ToolCallState::PendingConfirmation(p) if p.tool_call_id == call => {
                        Some(ToolCallConfirmationState::PendingConfirmation(p.clone()))
                    }
                    ToolCallState::PendingResultConfirmation(p) if p.tool_call_id == call => Some(
                        ToolCallConfirmationState::PendingResultConfirmation(p.clone()),
                    ),
                    _ => None,
                },
                _ => None,
            });
        let Some(tool_call) = pending else {
            return;
        };
        let request = SessionInputRequest::ToolConfirmation(SessionToolConfirmationRequest {
            id: input_id(chat, call),
            chat: chat.to_string(),
            turn_id: turn.to_string(),
            tool_call,
        });
        let set =
            StateAction::SessionInputNeededSet(Box::new(SessionInputNeededSetAction { request }));
        let mut core = self.core();
        // Decided before it could be listed: nothing to list.
        if !core.approvals.is_held(chat, call) {
            return;
        }
        let session = core.default_session.clone();
        match core.commit_and_publish(&session, set, None) {
            Ok(_) => {
                core.approvals
                    .announced
                    .insert((chat.to_string(), call.to_string()));
            }
            Err(error) => tracing::debug!(?error, "input-needed not raised"),
        }
    }
}

impl Core {
    /// A client's `chat/toolCallConfirmed` or `chat/toolCallResultConfirmed` on a call held
    /// (or once held) for approval or review, judged: `None` when it is about no such call.
    /// A held one is decided only by a connection that `may_decide` (it presented the
    /// approval key).
    pub(super) fn judge_approval(
        &self,
        chat: &str,
        action: &StateAction,
        may_decide: bool,
    ) -> Option<Result<(), super::admission::Refusal>> {
        let call = match action {
            StateAction::ChatToolCallConfirmed(a) => &a.tool_call_id,
            StateAction::ChatToolCallResultConfirmed(a) => &a.tool_call_id,
            _ => return None,
        };
        if self.approvals.is_held(chat, call) {
            if !may_decide {
                return Some(Err(super::admission::Refusal::rule(NOT_A_DECIDER)));
            }
            // A decision on the call while its result waits (or the other way round).
            let on_result = matches!(action, StateAction::ChatToolCallResultConfirmed(_));
            if let Some((_, waits)) = self.turn_of(chat, call).filter(|(_, r)| *r != on_result) {
                let what = if waits { "result" } else { "call" };
                return Some(Err(super::admission::Refusal::rule(format!(
                    "tool call {call:?} waits for a decision on its {what}"
                ))));
            }
            return Some(match action {
                StateAction::ChatToolCallConfirmed(a) => {
                    admit(a).map_err(super::admission::Refusal::rule)
                }
                _ => Ok(()),
            });
        }
        let refusal = self.approvals.refusal(chat, call)?;
        Some(Err(super::admission::Refusal::rule(refusal)))
    }

    /// The turn call `call` of `chat` is in while it waits in the active turn, and whether
    /// it is its result that waits (for review).
    fn turn_of(&self, chat: &str, call: &str) -> Option<(String, bool)> {
        let active = self.store.chat(chat)?.active_turn.as_ref()?;
        active.response_parts.iter().find_map(|p| match p {
            ResponsePart::ToolCall(t) => match &t.tool_call {
                ToolCallState::PendingConfirmation(p) if p.tool_call_id == call => {
                    Some((active.id.clone(), false))
                }
                ToolCallState::PendingResultConfirmation(p) if p.tool_call_id == call => {
                    Some((active.id.clone(), true))
                }
                _ => None,
            },
            _ => None,
        })
    }

    /// A decision was committed: the call is no longer held, its input-needed entry goes,
    /// and the front hears it.
    pub(super) fn decided(&mut self, decision: &Decision) {
        self.approvals.decide(decision);
        let key = decision.call.clone();
        if self.approvals.announced.remove(&key) {
            let removed = StateAction::SessionInputNeededRemoved(SessionInputNeededRemovedAction {
                id: input_id(&key.0, &key.1),
            });
            let session = self.default_session.clone();
            let _ = self.commit_and_publish(&session, removed, None);
        }
    }

    /// A client's admitted `chat/toolCallConfirmed` on a held call, committed: decided.
    pub(super) fn client_decided(
        &mut self,
        chat: &str,
        client: &str,
        action: &ChatToolCallConfirmedAction,
    ) {
        let decision = Decision {
            call: (chat.to_string(), action.tool_call_id.clone()),
            approved: action.approved,
            client: Some(client.to_string()),
            reason: action.reason_message.as_ref().map(plain),
            edited_input: action.edited_tool_input.clone().filter(|_| action.approved),
            option: action.selected_option_id.clone(),
            result: false,
        };
        self.decided(&decision);
    }

    /// A client's admitted `chat/toolCallResultConfirmed` on a result held for review,
    /// committed: decided.
    pub(super) fn client_reviewed(
        &mut self,
        chat: &str,
        client: &str,
        action: &ChatToolCallResultConfirmedAction,
    ) {
        let decision = Decision {
            call: (chat.to_string(), action.tool_call_id.clone()),
            approved: action.approved,
            client: Some(client.to_string()),
            reason: None,
            edited_input: None,
            option: None,
            result: true,
        };
        self.decided(&decision);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(approved: bool, client: Option<&str>) -> Decision {
        Decision {
            call: ("chat".into(), "call-1".into()),
            approved,
            client: client.map(str::to_string),
            reason: None,
            edited_input: None,
            option: None,
            result: false,
        }
    }

    #[test]
    fn the_first_decision_counts_and_a_late_one_is_told_who_decided() {
        let mut approvals = Approvals::default();
        let mut heard = approvals.decisions.subscribe();
        approvals.held.insert(("chat".into(), "call-1".into()));
        assert!(approvals.is_held("chat", "call-1"));
        assert_eq!(approvals.refusal("chat", "call-1"), None);
        assert!(approvals.decide(&decision(true, Some("ide-1"))));
        assert!(!approvals.decide(&decision(false, Some("ide-2"))));
        assert!(!approvals.is_held("chat", "call-1"));
        assert_eq!(
            approvals.refusal("chat", "call-1").as_deref(),
            Some("tool call \"call-1\" was already approved by client \"ide-1\"")
        );
        assert_eq!(heard.try_recv().unwrap(), decision(true, Some("ide-1")));
        assert!(heard.try_recv().is_err());
    }

    #[test]
    fn an_edited_input_must_be_an_object() {
        let action = |edited: &str| ChatToolCallConfirmedAction {
            turn_id: "t".into(),
            tool_call_id: "c".into(),
            meta: None,
            approved: true,
            confirmed: None,
            reason: None,
            edited_tool_input: Some(edited.into()),
            user_suggestion: None,
            reason_message: None,
            selected_option_id: None,
        };
        assert!(admit(&action(r#"{"text":"x"}"#)).is_ok());
        assert!(admit(&action("[1]")).is_err());
        assert!(admit(&action("{")).is_err());
    }
}
