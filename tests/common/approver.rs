//! An AHP client deciding harness tool calls held for approval: it presents the approval key
//! (or not: `watch`), follows the harness chat with the official reducers, finds calls (or
//! results) pending, and answers or reviews them.

use ahp::client::{Client, SessionSubscription};
use ahp_types::actions::StateAction;
use ahp_types::state::{
    ChatState, ResponsePart, SnapshotState, ToolCallPendingConfirmationState, ToolCallState,
};
use serde_json::{json, Value};

use super::ide::CHAT;
use super::{deciding_client, initialized_client, next_action, Proxy};

/// An AHP client following the harness chat.
pub struct Approver {
    pub client: Client,
    pub chat: ChatState,
    pub sub: SessionSubscription,
}

impl Approver {
    /// A client that presented the approval key.
    pub async fn join(proxy: &Proxy, client_id: &str) -> Self {
        Self::following(deciding_client(proxy, client_id).await).await
    }

    /// A client that connected without the approval key: it may watch, not decide.
    pub async fn watch(proxy: &Proxy, client_id: &str) -> Self {
        Self::following(initialized_client(proxy, client_id).await).await
    }

    async fn following(client: Client) -> Self {
        let (snapshot, sub) = client.subscribe(CHAT.into()).await.unwrap();
        let chat = match snapshot.snapshot.expect("snapshot").state {
            SnapshotState::Chat(chat) => *chat,
            other => panic!("expected a chat, got {other:?}"),
        };
        Self { client, chat, sub }
    }

    /// The first call `done` holds for (turn id, state), applying actions until one does.
    pub async fn until(
        &mut self,
        done: impl Fn(&ToolCallState) -> bool,
    ) -> (String, ToolCallState) {
        loop {
            let turns = (self.chat.active_turn.iter())
                .map(|t| (t.id.clone(), &t.response_parts))
                .chain(
                    self.chat
                        .turns
                        .iter()
                        .map(|t| (t.id.clone(), &t.response_parts)),
                );
            let found = turns.into_iter().find_map(|(turn, parts)| {
                parts.iter().find_map(|p| match p {
                    ResponsePart::ToolCall(tc) if done(&tc.tool_call) => {
                        Some((turn.clone(), tc.tool_call.clone()))
                    }
                    _ => None,
                })
            });
            if let Some(found) = found {
                return found;
            }
            let envelope = next_action(&mut self.sub).await;
            let _ = ahp::reducers::apply_action_to_chat(&mut self.chat, &envelope.action);
        }
    }

    /// The first call pending confirmation: its turn and state.
    pub async fn pending(&mut self) -> (String, ToolCallPendingConfirmationState) {
        let (turn, state) = self
            .until(|s| matches!(s, ToolCallState::PendingConfirmation(_)))
            .await;
        match state {
            ToolCallState::PendingConfirmation(p) => (turn, p),
            _ => unreachable!(),
        }
    }

    /// Dispatch `chat/toolCallConfirmed` for `call` of `turn` with `fields`.
    pub async fn answer(&self, turn: &str, call: &str, fields: Value) {
        let mut action =
            json!({"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": call});
        action
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        let action: StateAction = serde_json::from_value(action).unwrap();
        self.client.dispatch(CHAT.into(), action).await.unwrap();
    }

    /// Why the host refused this client's review of `call`'s result.
    pub async fn refusal_of_result(&mut self, call: &str) -> String {
        self.refused(call, true).await
    }

    /// Why the host refused this client's answer about `call`.
    pub async fn refusal(&mut self, call: &str) -> String {
        self.refused(call, false).await
    }

    /// Why the host refused this client's decision on `call` (on its result, when `result`).
    async fn refused(&mut self, call: &str, result: bool) -> String {
        loop {
            let envelope = next_action(&mut self.sub).await;
            let about = match &envelope.action {
                StateAction::ChatToolCallConfirmed(a) if !result => Some(&a.tool_call_id),
                StateAction::ChatToolCallResultConfirmed(a) if result => Some(&a.tool_call_id),
                _ => None,
            };
            if let (Some(reason), Some(id)) = (&envelope.rejection_reason, about) {
                if id == call {
                    return reason.clone();
                }
            }
            let _ = ahp::reducers::apply_action_to_chat(&mut self.chat, &envelope.action);
        }
    }

    /// The first call whose result waits for review: its turn and id, once shown.
    pub async fn pending_result(&mut self) -> (String, String, String) {
        let (turn, state) = self
            .until(|s| matches!(s, ToolCallState::PendingResultConfirmation(_)))
            .await;
        let ToolCallState::PendingResultConfirmation(p) = state else {
            unreachable!()
        };
        let content = serde_json::to_string(&p.content).unwrap();
        (turn, p.tool_call_id, content)
    }

    /// Dispatch `chat/toolCallResultConfirmed` for `call` of `turn`.
    pub async fn review(&self, turn: &str, call: &str, approved: bool) {
        let action = json!({"type": "chat/toolCallResultConfirmed", "turnId": turn, "toolCallId": call, "approved": approved});
        let action: StateAction = serde_json::from_value(action).unwrap();
        self.client.dispatch(CHAT.into(), action).await.unwrap();
    }
}
