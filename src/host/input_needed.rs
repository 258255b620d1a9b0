//! The default session's input-needed entries for harness tool calls paused for
//! authorization: raised with the call as its chat holds it, lifted once when it resumes or ends.

use ahp_types::actions::{
    SessionInputNeededRemovedAction, SessionInputNeededSetAction, StateAction,
};
use ahp_types::state::{
    ResponsePart, SessionInputRequest, SessionToolAuthenticationRequest, SnapshotState,
    ToolCallState,
};

use super::Host;

/// The input-needed entry's id for call `call` of `chat`.
pub fn input_id(chat: &str, call: &str) -> String {
    format!("{chat}#{call}")
}

impl Host {
    /// Call `call` of `chat` (in turn `turn`) is shown as waiting for authorization: the
    /// session gets a `toolAuthentication` input-needed entry with the call as it is now.
    pub fn announce_paused(&self, chat: &str, turn: &str, call: &str) {
        let Some(snapshot) = self.snapshot(chat) else {
            return;
        };
        let SnapshotState::Chat(state) = snapshot.state else {
            return;
        };
        let paused = state
            .active_turn
            .iter()
            .flat_map(|t| &t.response_parts)
            .find_map(|p| match p {
                ResponsePart::ToolCall(t) => match &t.tool_call {
                    ToolCallState::AuthRequired(a) if a.tool_call_id == call => Some((**a).clone()),
                    _ => None,
                },
                _ => None,
            });
        let Some(tool_call) = paused else {
            return;
        };
        let request =
            SessionInputRequest::ToolAuthentication(Box::new(SessionToolAuthenticationRequest {
                id: input_id(chat, call),
                chat: chat.to_string(),
                turn_id: turn.to_string(),
                tool_call,
            }));
        let set =
            StateAction::SessionInputNeededSet(Box::new(SessionInputNeededSetAction { request }));
        match self.emit(&self.default_session(), set) {
            Ok(_) => self.core().paused.announce(chat, call),
            Err(error) => tracing::debug!(?error, "input-needed not raised"),
        }
    }

    /// Call `call` of `chat` no longer waits: its input-needed entry, if raised, is lifted.
    pub fn withdraw_paused(&self, chat: &str, call: &str) {
        if !self.core().paused.withdraw(chat, call) {
            return;
        }
        let removed = StateAction::SessionInputNeededRemoved(SessionInputNeededRemovedAction {
            id: input_id(chat, call),
        });
        let _ = self.emit(&self.default_session(), removed);
    }
}
