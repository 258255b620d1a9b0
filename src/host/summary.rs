//! Catalogue summaries derived from state: a chat's `ChatSummary`, a session's summary status
//! (activity aggregated from its chats), and which summary fields a session change touched.

use ahp_types::notifications::PartialSessionSummary;
use ahp_types::state::{ChatState, ChatSummary, SessionInputRequest, SessionState, SessionStatus};

/// The catalogue entry (`ChatSummary`) for a chat's state.
pub fn chat_summary(state: &ChatState) -> ChatSummary {
    ChatSummary {
        resource: state.resource.clone(),
        title: state.title.clone(),
        status: state.status,
        activity: state.activity.clone(),
        modified_at: state.modified_at.clone(),
        changes: state.changes.clone(),
        origin: state.origin.clone(),
        movable: state.movable,
        interactivity: state.interactivity,
        working_directories: state.working_directories.clone(),
    }
}

/// The activity bits of a status (bits 0-4; bits 5-6 are the read/archived flags).
const ACTIVITY_MASK: u32 = 0b1_1111;

/// A session's status as its summary shows it: its own flags, with the activity taken from
/// its chats (the default chat, else the most recently modified one; `InputNeeded` and
/// `Error` of any chat win) unless the session itself waits for the user (an `inputNeeded`
/// entry other than a client's tool run, which the reducers do not count either).
///
/// The host writes it into the session's own `status` after every change: ahp-types says the
/// host keeps the session and its summary in sync, and the reducers derive neither from the
/// other (they leave `InProgress` behind once the session's input is answered).
pub fn summary_status(state: &SessionState) -> u32 {
    let own = state.status & ACTIVITY_MASK;
    let input_needed = SessionStatus::InputNeeded.bits();
    let error = SessionStatus::Error.bits();
    let waits_for_user = state
        .input_needed
        .iter()
        .flatten()
        .any(|r| !matches!(r, SessionInputRequest::ToolClientExecution(_)));
    let activity = if waits_for_user {
        input_needed
    } else if state.chats.is_empty() {
        own
    } else if state
        .chats
        .iter()
        .any(|c| c.status & ACTIVITY_MASK == input_needed)
    {
        input_needed
    } else if state
        .chats
        .iter()
        .any(|c| c.status & ACTIVITY_MASK == error)
    {
        error
    } else {
        let lead = state
            .default_chat
            .as_ref()
            .and_then(|d| state.chats.iter().find(|c| &c.resource == d))
            .or_else(|| {
                state
                    .chats
                    .iter()
                    .max_by(|a, b| a.modified_at.cmp(&b.modified_at))
            });
        lead.map_or(own, |c| c.status & ACTIVITY_MASK)
    };
    (state.status & !ACTIVITY_MASK) | activity
}

/// The session fields mirrored in its `SessionSummary`, to detect summary changes.
pub struct SummaryFields {
    title: String,
    status: u32,
    activity: Option<String>,
    working_directories: Option<Vec<String>>,
    default_chat: Option<String>,
}

impl SummaryFields {
    pub fn of(state: &SessionState) -> Self {
        Self {
            title: state.title.clone(),
            status: summary_status(state),
            activity: state.activity.clone(),
            working_directories: state.working_directories.clone(),
            default_chat: state.default_chat.clone(),
        }
    }

    /// Only the fields that differ from `after`, plus `modifiedAt` from `now`; `None` if
    /// nothing did.
    pub fn changes_to(
        &self,
        after: &SessionState,
        now: impl FnOnce() -> String,
    ) -> Option<PartialSessionSummary> {
        let mut changes = PartialSessionSummary::default();
        let mut changed = false;
        if self.title != after.title {
            changes.title = Some(after.title.clone());
            changed = true;
        }
        // The status as the summary shows it (activity from the chats), the one
        // `listSessions` reports, not the session's own bits.
        let status = summary_status(after);
        if self.status != status {
            changes.status = Some(status);
            changed = true;
        }
        if self.activity != after.activity {
            changes.activity = after.activity.clone();
            changed = true;
        }
        if self.working_directories != after.working_directories {
            changes.working_directories = after.working_directories.clone();
            changed = true;
        }
        if self.default_chat != after.default_chat {
            changes.default_chat = after.default_chat.clone();
            changed = true;
        }
        changed.then(|| {
            changes.modified_at = Some(now());
            changes
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A session with `status` and chats of these (status, modifiedAt), the first the default.
    fn session(status: u32, chats: &[(u32, &str)]) -> SessionState {
        let chats: Vec<_> = chats
            .iter()
            .enumerate()
            .map(|(i, (status, modified_at))| {
                json!({"resource": format!("ahp-chat:/{i}"), "title": "c", "status": status,
                       "modifiedAt": modified_at})
            })
            .collect();
        serde_json::from_value(json!({"provider": "p", "title": "t", "status": status,
            "lifecycle": "ready", "activeClients": [], "chats": chats,
            "defaultChat": (!chats.is_empty()).then_some("ahp-chat:/0")}))
        .expect("a valid session state")
    }

    const IDLE: u32 = SessionStatus::Idle.bits();
    const ERROR: u32 = SessionStatus::Error.bits();
    const IN_PROGRESS: u32 = SessionStatus::InProgress.bits();
    const INPUT_NEEDED: u32 = SessionStatus::InputNeeded.bits();
    const IS_READ: u32 = SessionStatus::IsRead.bits();

    #[test]
    fn without_chats_a_session_shows_its_own_status() {
        assert_eq!(
            summary_status(&session(IDLE | IS_READ, &[])),
            IDLE | IS_READ
        );
    }

    #[test]
    fn the_default_chat_leads_and_the_session_keeps_its_flags() {
        let state = session(
            IDLE | IS_READ,
            &[(IN_PROGRESS, "2026-01-01"), (IDLE, "2026-02-01")],
        );
        assert_eq!(summary_status(&state), IN_PROGRESS | IS_READ);
    }

    #[test]
    fn input_needed_or_an_error_in_any_chat_wins() {
        let waiting = session(IDLE, &[(IDLE, "2026-01-01"), (INPUT_NEEDED, "2025-01-01")]);
        assert_eq!(summary_status(&waiting), INPUT_NEEDED);
        let failed = session(IDLE, &[(IDLE, "2026-01-01"), (ERROR, "2025-01-01")]);
        assert_eq!(summary_status(&failed), ERROR);
    }

    #[test]
    fn the_sessions_own_input_wins_while_it_waits_for_the_user_and_not_after() {
        let mut state = session(INPUT_NEEDED, &[(ERROR, "2026-01-01")]);
        state.input_needed = Some(vec![serde_json::from_value(json!({
            "kind": "toolAuthentication", "chat": "ahp-chat:/0", "turnId": "t",
            "toolCall": {"status": "auth-required", "toolCallId": "c", "toolName": "add",
                         "displayName": "add", "invocationMessage": "add",
                         "auth": {"reason": "required"}}
        }))
        .expect("an input request")]);
        assert_eq!(summary_status(&state), INPUT_NEEDED);
        // Answered: the reducers leave the session in progress; its chats say what it is.
        state.input_needed = None;
        state.status = IN_PROGRESS;
        state.chats[0].status = IDLE;
        assert_eq!(summary_status(&state), IDLE);
        // Written back, it stays what the chats say (the own bits no longer stick).
        state.status = summary_status(&state);
        assert_eq!(summary_status(&state), IDLE);
    }

    #[test]
    fn only_changed_summary_fields_are_reported() {
        let before = session(IDLE, &[]);
        let now = || "2026-03-01T00:00:00.000Z".to_string();
        assert!(SummaryFields::of(&before)
            .changes_to(&before, now)
            .is_none());
        let mut after = before.clone();
        after.title = "renamed".into();
        let changes = SummaryFields::of(&before)
            .changes_to(&after, now)
            .expect("the title changed");
        assert_eq!(changes.title.as_deref(), Some("renamed"));
        assert!(changes.status.is_none());
        assert_eq!(
            changes.modified_at.as_deref(),
            Some("2026-03-01T00:00:00.000Z")
        );
    }

    #[test]
    fn a_status_change_is_the_summary_status_not_the_sessions_own() {
        let now = || "2026-03-01T00:00:00.000Z".to_string();
        // A chat starts a turn: the session's own status stays idle, its summary does not.
        let before = session(IDLE, &[(IDLE, "2026-01-01")]);
        let mut running = before.clone();
        running.chats[0].status = IN_PROGRESS;
        let changes = SummaryFields::of(&before)
            .changes_to(&running, now)
            .expect("the summary status changed");
        assert_eq!(changes.status, Some(IN_PROGRESS));
        // The reducers leave the session's own status in progress once input is no longer
        // needed; the turn ending still reads as idle.
        let mut after_input = running.clone();
        after_input.status = IN_PROGRESS;
        let mut done = after_input.clone();
        done.chats[0].status = IDLE;
        let changes = SummaryFields::of(&after_input)
            .changes_to(&done, now)
            .expect("the summary status changed");
        assert_eq!(changes.status, Some(IDLE));
    }

    #[test]
    fn a_chat_summary_carries_the_chat_catalogue_fields() {
        let chat: ChatState = serde_json::from_value(json!({"resource": "ahp-chat:/c",
            "title": "Chat", "status": IN_PROGRESS, "modifiedAt": "2026-01-01",
            "turns": []}))
        .expect("a valid chat state");
        let summary = chat_summary(&chat);
        assert_eq!(summary.resource, "ahp-chat:/c");
        assert_eq!(summary.title, "Chat");
        assert_eq!(summary.status, IN_PROGRESS);
        assert_eq!(summary.modified_at, "2026-01-01");
    }
}
