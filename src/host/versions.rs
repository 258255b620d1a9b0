//! What a client that negotiated an older protocol version may be sent: action types by the
//! version that introduced them, and the fields added since 0.9.0 taken out. Pure.
//!
//! ahp-types 1.0.0 carries no version map, so the action map is the spec's
//! (`ACTION_INTRODUCED_IN` in `types/version/registry.ts`), one arm per `StateAction` variant
//! (a new variant does not compile until it has one), except where a released copy of an
//! older version shows the map wrong (`chat/isReadChanged`). The fields are those ahp-types 1.0.0
//! has and ahp-types 0.9.0 had not, wherever this host can send them: summaries and chat
//! summaries, chat state, and a starting server's `blocking`. Taking out an optional field
//! a client knows loses nothing it needs; sending one it does not know breaks the promise,
//! so the field list errs on the side of taking out.

use std::borrow::Cow;

use ahp_types::actions::{ActionEnvelope, PartialChatSummary, StateAction};
use ahp_types::notifications::PartialSessionSummary;
use ahp_types::state::{
    ChatState, ChatSummary, ChildCustomization, Customization, McpServerState, SessionState,
    SessionSummary, Snapshot, SnapshotState,
};

/// A protocol version, `MAJOR.MINOR.PATCH`, ordered as SemVer orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u64, pub u64, pub u64);

/// The version whose shape the host's own state has (ahp-types 1.0.0).
pub const CURRENT: Version = Version(1, 0, 0);

/// Where the fields this module takes out were introduced.
const FIELDS_INTRODUCED_IN: Version = Version(1, 0, 0);

impl Default for Version {
    fn default() -> Self {
        CURRENT
    }
}

impl Version {
    /// `MAJOR.MINOR.PATCH` (as negotiation accepted it); `None` otherwise.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.').map(|p| p.parse::<u64>().ok());
        let version = Version(parts.next()??, parts.next()??, parts.next()??);
        parts.next().is_none().then_some(version)
    }

    fn knows_fields_of_1_0(self) -> bool {
        self >= FIELDS_INTRODUCED_IN
    }
}

/// The protocol version that introduced `action`'s type (the spec's map); an unknown type
/// is newer than any.
pub fn introduced_in(action: &StateAction) -> Version {
    use StateAction as A;
    match action {
        A::RootAgentsChanged(_)
        | A::RootActiveSessionsChanged(_)
        | A::RootTerminalsChanged(_)
        | A::RootConfigChanged(_)
        | A::SessionReady(_)
        | A::SessionCreationFailed(_)
        | A::SessionTitleChanged(_)
        | A::SessionServerToolsChanged(_)
        | A::SessionCustomizationsChanged(_)
        | A::SessionCustomizationToggled(_)
        | A::SessionCustomizationUpdated(_)
        | A::SessionIsReadChanged(_)
        | A::SessionIsArchivedChanged(_)
        | A::SessionActivityChanged(_)
        | A::SessionConfigChanged(_)
        | A::SessionMetaChanged(_)
        | A::TerminalData(_)
        | A::TerminalInput(_)
        | A::TerminalResized(_)
        | A::TerminalClaimed(_)
        | A::TerminalTitleChanged(_)
        | A::TerminalCwdChanged(_)
        | A::TerminalExited(_)
        | A::TerminalCleared(_)
        | A::TerminalCommandDetectionAvailable(_)
        | A::TerminalCommandExecuted(_)
        | A::TerminalCommandFinished(_) => Version(0, 1, 0),
        A::SessionCustomizationRemoved(_)
        | A::SessionChangesetsChanged(_)
        | A::ChangesetStatusChanged(_)
        | A::ChangesetFileSet(_)
        | A::ChangesetFileRemoved(_)
        | A::ChangesetOperationsChanged(_)
        | A::ChangesetCleared(_)
        | A::ResourceWatchChanged(_) => Version(0, 2, 0),
        A::SessionMcpServerStateChanged(_) | A::ChangesetOperationStatusChanged(_) => {
            Version(0, 3, 0)
        }
        A::SessionChatAdded(_)
        | A::SessionChatRemoved(_)
        | A::SessionChatUpdated(_)
        | A::SessionDefaultChatChanged(_)
        | A::ChatTurnStarted(_)
        | A::ChatDelta(_)
        | A::ChatResponsePart(_)
        | A::ChatToolCallStart(_)
        | A::ChatToolCallDelta(_)
        | A::ChatToolCallReady(_)
        | A::ChatToolCallConfirmed(_)
        | A::ChatToolCallComplete(_)
        | A::ChatToolCallResultConfirmed(_)
        | A::ChatToolCallContentChanged(_)
        | A::ChatTurnComplete(_)
        | A::ChatTurnCancelled(_)
        | A::ChatError(_)
        | A::ChatUsage(_)
        | A::ChatReasoning(_)
        | A::ChatPendingMessageSet(_)
        | A::ChatPendingMessageRemoved(_)
        | A::ChatQueuedMessagesReordered(_)
        | A::ChatInputRequested(_)
        | A::ChatInputAnswerChanged(_)
        | A::ChatInputCompleted(_)
        | A::ChatTruncated(_)
        | A::ChangesetContentChanged(_)
        | A::AnnotationsSet(_)
        | A::AnnotationsUpdated(_)
        | A::AnnotationsRemoved(_)
        | A::AnnotationsEntrySet(_)
        | A::AnnotationsEntryRemoved(_) => Version(0, 4, 0),
        A::SessionActiveClientSet(_)
        | A::SessionActiveClientRemoved(_)
        | A::ChatActivityChanged(_)
        | A::ChatDraftChanged(_) => Version(0, 5, 0),
        A::SessionInputNeededSet(_) | A::SessionInputNeededRemoved(_) | A::ChatTurnsLoaded(_) => {
            Version(0, 5, 1)
        }
        A::SessionMcpServerStartRequested(_) | A::SessionMcpServerStopRequested(_) => {
            Version(0, 5, 2)
        }
        A::ChatToolCallAuthRequired(_)
        | A::ChatToolCallAuthResolved(_)
        | A::ChangesetFilesReviewChanged(_) => Version(0, 6, 0),
        A::SessionWorkingDirectorySet(_)
        | A::SessionWorkingDirectoryRemoved(_)
        | A::ChatWorkingDirectorySet(_)
        | A::ChatWorkingDirectoryRemoved(_) => Version(0, 7, 0),
        A::SessionWorkingDirectoryReplaced(_)
        | A::AutomationCreateRequested(_)
        | A::AutomationUpdateRequested(_)
        | A::AutomationSet(_)
        | A::AutomationRemoved(_)
        | A::AutomationRunLifecycleChanged(_)
        | A::AutomationRunSessionSet(_)
        | A::AutomationRunSessionRemoved(_)
        | A::AutomationRunPrimarySessionChanged(_)
        | A::AutomationRunCancelRequested(_) => Version(0, 8, 0),
        A::SessionChatsReordered(_)
        | A::SessionMcpServerBackgroundRequested(_)
        | A::ChatTurnResume(_)
        | A::ChatBackgroundWorkSet(_)
        | A::ChatBackgroundWorkRemoved(_)
        | A::ChatMovableChanged(_)
        | A::ChatChangesetsChanged(_)
        | A::ChatIsArchivedChanged(_) => Version(0, 9, 0),
        // The spec's map says 0.9.0, but a 0.9.0 copy of the protocol does not have it (VS
        // Code's `src/vs/platform/agentHost/common/state/protocol/version/registry.ts` at
        // `PROTOCOL_VERSION = '0.9.0'` lists every action but this one): 1.0.0 has it.
        A::ChatIsReadChanged(_) => Version(1, 0, 0),
        A::ChatCanvasesChanged(_) | A::CanvasStateChanged(_) => Version(0, 10, 0),
        A::Unknown(_) => Version(u64::MAX, u64::MAX, u64::MAX),
    }
}

/// `envelope` as a client at `version` gets it: `None` when its action type is newer than
/// the client; borrowed when nothing in it is.
pub fn envelope(envelope: &ActionEnvelope, version: Version) -> Option<Cow<'_, ActionEnvelope>> {
    if introduced_in(&envelope.action) > version {
        return None;
    }
    if version.knows_fields_of_1_0() {
        return Some(Cow::Borrowed(envelope));
    }
    let mut action = envelope.action.clone();
    if !strip_action(&mut action) {
        return Some(Cow::Borrowed(envelope));
    }
    Some(Cow::Owned(ActionEnvelope {
        action,
        ..envelope.clone()
    }))
}

/// A snapshot as a client at `version` gets it.
pub fn snapshot(mut snapshot: Snapshot, version: Version) -> Snapshot {
    if !version.knows_fields_of_1_0() {
        match &mut snapshot.state {
            SnapshotState::Session(session) => {
                strip_session(session);
            }
            SnapshotState::Chat(chat) => {
                strip_chat(chat);
            }
            _ => {}
        }
    }
    snapshot
}

/// A session's catalogue entry as a client at `version` gets it.
pub fn summary(mut summary: SessionSummary, version: Version) -> SessionSummary {
    if !version.knows_fields_of_1_0() {
        summary.chats = None;
        summary.default_chat = None;
    }
    summary
}

/// Changed summary fields as a client at `version` gets them (`root/sessionSummaryChanged`).
pub fn summary_changes(
    changes: &PartialSessionSummary,
    version: Version,
) -> Cow<'_, PartialSessionSummary> {
    if version.knows_fields_of_1_0() || (changes.chats.is_none() && changes.default_chat.is_none())
    {
        return Cow::Borrowed(changes);
    }
    let mut changes = changes.clone();
    changes.chats = None;
    changes.default_chat = None;
    Cow::Owned(changes)
}

/// Take the fields newer than 0.9.0 out of `action`; whether there were any.
fn strip_action(action: &mut StateAction) -> bool {
    match action {
        StateAction::SessionChatAdded(a) => strip_chat_summary(&mut a.summary),
        StateAction::SessionChatUpdated(a) => strip_partial_chat_summary(&mut a.changes),
        StateAction::SessionCustomizationsChanged(a) => a
            .customizations
            .iter_mut()
            .fold(false, |any, c| strip_customization(c) | any),
        StateAction::SessionCustomizationUpdated(a) => strip_customization(&mut a.customization),
        StateAction::SessionMcpServerStateChanged(a) => strip_server_state(&mut a.state),
        _ => false,
    }
}

fn strip_session(session: &mut SessionState) -> bool {
    let chats = session
        .chats
        .iter_mut()
        .fold(false, |any, c| strip_chat_summary(c) | any);
    let customizations = session
        .customizations
        .iter_mut()
        .flatten()
        .fold(false, |any, c| strip_customization(c) | any);
    chats | customizations
}

fn strip_chat(chat: &mut ChatState) -> bool {
    let stripped = chat.changes.is_some()
        || chat.movable.is_some()
        || chat.changesets.is_some()
        || chat.background_work.is_some()
        || chat.canvases.is_some();
    chat.changes = None;
    chat.movable = None;
    chat.changesets = None;
    chat.background_work = None;
    chat.canvases = None;
    stripped
}

fn strip_chat_summary(summary: &mut ChatSummary) -> bool {
    let stripped = summary.changes.is_some() || summary.movable.is_some();
    summary.changes = None;
    summary.movable = None;
    stripped
}

fn strip_partial_chat_summary(changes: &mut PartialChatSummary) -> bool {
    let stripped = changes.changes.is_some() || changes.movable.is_some();
    changes.changes = None;
    changes.movable = None;
    stripped
}

fn strip_customization(customization: &mut Customization) -> bool {
    let children = match customization {
        Customization::McpServer(m) => return strip_server_state(&mut m.state),
        Customization::Plugin(p) => p.children.as_mut(),
        Customization::Directory(d) => d.children.as_mut(),
        Customization::Unknown(_) => None,
    };
    children.into_iter().flatten().fold(false, |any, child| {
        let stripped = match child {
            ChildCustomization::McpServer(m) => strip_server_state(&mut m.state),
            _ => false,
        };
        stripped | any
    })
}

fn strip_server_state(state: &mut McpServerState) -> bool {
    match state {
        McpServerState::Starting(s) => s.blocking.take().is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn action(value: serde_json::Value) -> StateAction {
        serde_json::from_value(value).expect("a valid action")
    }

    fn envelope_of(action: StateAction) -> ActionEnvelope {
        ActionEnvelope {
            channel: "ahp-chat:/c".into(),
            action,
            server_seq: 7,
            origin: None,
            rejection_reason: None,
        }
    }

    const V0_9: Version = Version(0, 9, 0);

    #[test]
    fn versions_parse_and_order_as_semver() {
        assert_eq!(Version::parse("0.9.0"), Some(V0_9));
        assert_eq!(Version::parse("1.2.10"), Some(Version(1, 2, 10)));
        assert!(Version::parse("1.0").is_none() && Version::parse("1.0.0.0").is_none());
        assert!(Version(0, 10, 0) > V0_9 && CURRENT > Version(0, 10, 0));
        assert!(V0_9 < CURRENT && Version(1, 3, 0) >= CURRENT);
    }

    #[test]
    fn action_types_newer_than_the_client_are_not_sent() {
        let canvases = envelope_of(action(json!({"type": "chat/canvasesChanged"})));
        assert!(envelope(&canvases, V0_9).is_none());
        assert!(envelope(&canvases, CURRENT).is_some());
        // 0.9.0 introduced these: a 0.9.0 client gets them, a 0.8.0 one does not.
        let archived = envelope_of(action(
            json!({"type": "chat/isArchivedChanged", "isArchived": true}),
        ));
        assert!(matches!(envelope(&archived, V0_9), Some(Cow::Borrowed(_))));
        assert!(envelope(&archived, Version(0, 8, 0)).is_none());
        // Not `chat/isReadChanged`, whatever the spec's map says: a 0.9.0 copy lacks it.
        let read = envelope_of(action(
            json!({"type": "chat/isReadChanged", "isRead": true}),
        ));
        assert!(envelope(&read, V0_9).is_none());
        assert!(envelope(&read, Version(0, 10, 0)).is_none());
        assert!(envelope(&read, CURRENT).is_some());
        let unknown = envelope_of(action(json!({"type": "chat/fromTheFuture"})));
        assert!(envelope(&unknown, CURRENT).is_none());
    }

    #[test]
    fn fields_of_1_0_0_are_taken_out_for_0_9_0_only() {
        let added = envelope_of(action(json!({"type": "session/chatAdded", "summary": {
            "resource": "ahp-chat:/c", "title": "c", "status": 1,
            "modifiedAt": "2026-01-01T00:00:00.000Z", "movable": true,
            "changes": {"files": 2}}})));
        let sent = serde_json::to_value(envelope(&added, V0_9).unwrap()).unwrap();
        let summary = &sent["action"]["summary"];
        assert!(summary.get("movable").is_none() && summary.get("changes").is_none());
        assert_eq!(summary["title"], "c");
        assert_eq!(sent["serverSeq"], 7);
        assert!(matches!(envelope(&added, CURRENT), Some(Cow::Borrowed(_))));
        // VS Code's 0.10.0 is below 1.0.0: taken out for it too.
        assert!(matches!(
            envelope(&added, Version(0, 10, 0)),
            Some(Cow::Owned(_))
        ));
        let starting = envelope_of(action(json!({"type": "session/mcpServerStateChanged",
            "id": "m", "state": {"kind": "starting", "blocking": true}})));
        let sent = serde_json::to_value(envelope(&starting, V0_9).unwrap()).unwrap();
        assert_eq!(sent["action"]["state"], json!({"kind": "starting"}));
        // Nothing of 1.0.0 in it: the shared envelope goes out.
        let title = envelope_of(action(
            json!({"type": "session/titleChanged", "title": "t"}),
        ));
        assert!(matches!(envelope(&title, V0_9), Some(Cow::Borrowed(_))));
    }

    #[test]
    fn summaries_lose_the_chat_catalogue_and_default_chat() {
        let full: SessionSummary = serde_json::from_value(json!({
            "provider": "p", "title": "t", "status": 1, "resource": "p:/s",
            "createdAt": "2026-01-01T00:00:00.000Z", "modifiedAt": "2026-01-01T00:00:00.000Z",
            "defaultChat": "ahp-chat:/c", "chats": [{"resource": "ahp-chat:/c", "title": "c"}]
        }))
        .unwrap();
        let old = serde_json::to_value(summary(full.clone(), V0_9)).unwrap();
        assert!(old.get("defaultChat").is_none() && old.get("chats").is_none());
        assert_eq!(summary(full.clone(), CURRENT), full);
        let changes = PartialSessionSummary {
            default_chat: Some("ahp-chat:/c".into()),
            title: Some("t".into()),
            ..Default::default()
        };
        let old = summary_changes(&changes, V0_9);
        assert!(old.default_chat.is_none());
        assert_eq!(old.title.as_deref(), Some("t"));
        assert!(matches!(
            summary_changes(&changes, CURRENT),
            Cow::Borrowed(_)
        ));
    }
}
