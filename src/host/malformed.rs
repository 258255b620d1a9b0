//! Why a client's action of a known type did not decode, naming the field, as that type's own
//! deserializer says it. Pure.
//!
//! ahp-types reads any action that does not fit its type as `StateAction::Unknown` (its
//! untagged fallback), so a `session/titleChanged` without a title, or a toggle in an older
//! shape, would otherwise be refused as an "unknown action type".

use ahp_types::actions::{
    ActionType, ChatDraftChangedAction, ChatIsArchivedChangedAction, ChatIsReadChangedAction,
    ChatPendingMessageSetAction, ChatToolCallCompleteAction, ChatToolCallConfirmedAction,
    ChatToolCallContentChangedAction, ChatTurnStartedAction, RootConfigChangedAction,
    SessionActiveClientRemovedAction, SessionActiveClientSetAction, SessionConfigChangedAction,
    SessionCustomizationToggledAction, SessionDefaultChatChangedAction,
    SessionIsArchivedChangedAction, SessionIsReadChangedAction,
    SessionMcpServerBackgroundRequestedAction, SessionMcpServerStartRequestedAction,
    SessionMcpServerStopRequestedAction, SessionTitleChangedAction,
    SessionWorkingDirectoryRemovedAction, SessionWorkingDirectoryReplacedAction,
    SessionWorkingDirectorySetAction,
};
use serde_json::Value;

/// For an action that decoded as `Unknown` (`value`): why, when its `type` is one ahp-types
/// knows; `None` when the type itself is unknown.
pub fn why(value: &Value) -> Option<String> {
    let name = value.get("type")?.as_str()?;
    let known: ActionType = serde_json::from_value(Value::from(name)).ok()?;
    if matches!(known, ActionType::Unknown(_)) {
        return None;
    }
    let error = decode_error(name, value)
        .unwrap_or_else(|| "it does not have the shape ahp-types 1.0.0 gives it".into());
    Some(format!("{name:?} is malformed: {error}"))
}

/// The deserializer's error for `value` as the action struct of type `name`, for the types
/// clients dispatch.
fn decode_error(name: &str, value: &Value) -> Option<String> {
    macro_rules! decode {
        ($($wire:literal => $ty:ty),* $(,)?) => {
            match name {
                $($wire => serde_json::from_value::<$ty>(value.clone()).err(),)*
                _ => None,
            }
        };
    }
    let error = decode! {
        "root/configChanged" => RootConfigChangedAction,
        "session/titleChanged" => SessionTitleChangedAction,
        "session/isReadChanged" => SessionIsReadChangedAction,
        "session/isArchivedChanged" => SessionIsArchivedChangedAction,
        "session/configChanged" => SessionConfigChangedAction,
        "session/activeClientSet" => SessionActiveClientSetAction,
        "session/activeClientRemoved" => SessionActiveClientRemovedAction,
        "session/customizationToggled" => SessionCustomizationToggledAction,
        "session/mcpServerStartRequested" => SessionMcpServerStartRequestedAction,
        "session/mcpServerStopRequested" => SessionMcpServerStopRequestedAction,
        "session/mcpServerBackgroundRequested" => SessionMcpServerBackgroundRequestedAction,
        "session/defaultChatChanged" => SessionDefaultChatChangedAction,
        "session/workingDirectorySet" => SessionWorkingDirectorySetAction,
        "session/workingDirectoryRemoved" => SessionWorkingDirectoryRemovedAction,
        "session/workingDirectoryReplaced" => SessionWorkingDirectoryReplacedAction,
        "chat/isReadChanged" => ChatIsReadChangedAction,
        "chat/isArchivedChanged" => ChatIsArchivedChangedAction,
        "chat/toolCallContentChanged" => ChatToolCallContentChangedAction,
        "chat/toolCallConfirmed" => ChatToolCallConfirmedAction,
        "chat/toolCallComplete" => ChatToolCallCompleteAction,
        "chat/turnStarted" => ChatTurnStartedAction,
        "chat/pendingMessageSet" => ChatPendingMessageSetAction,
        "chat/draftChanged" => ChatDraftChangedAction,
    };
    error.map(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_types::actions::StateAction;
    use serde_json::json;

    fn decoded(value: Value) -> Value {
        match serde_json::from_value::<StateAction>(value.clone()).expect("any JSON object") {
            StateAction::Unknown(raw) => raw,
            other => panic!("{value} decoded as {other:?}"),
        }
    }

    #[test]
    fn a_known_action_that_does_not_fit_names_its_field() {
        let untitled = decoded(json!({"type": "session/titleChanged"}));
        let why_untitled = why(&untitled).expect("a known type");
        assert!(
            why_untitled.starts_with("\"session/titleChanged\" is malformed")
                && why_untitled.contains("`title`"),
            "{why_untitled}"
        );
        let old_toggle =
            decoded(json!({"type": "session/customizationToggled", "id": "x", "enabled": false}));
        let why_toggle = why(&old_toggle).expect("a known type");
        assert!(why_toggle.contains("`enablement`"), "{why_toggle}");
        let wrong_type = decoded(json!({"type": "session/isReadChanged", "isRead": "yes"}));
        assert!(why(&wrong_type).unwrap().contains("invalid type"));
        // A known type clients do not dispatch: still not "unknown".
        let host_only = decoded(json!({"type": "session/serverToolsChanged"}));
        assert!(why(&host_only).unwrap().contains("shape ahp-types"));
        // An unknown type: nothing to say here.
        assert_eq!(why(&json!({"type": "session/fromTheFuture"})), None);
        assert_eq!(why(&json!({"no": "type"})), None);
    }
}
