//! The host's AHP state: root, sessions, their chats, the global `serverSeq` and the replay
//! log. Pure: every change goes through the official `ahp::reducers`, nothing here does I/O.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use ahp::reducers::{
    apply_action_to_chat, apply_action_to_root, apply_action_to_session, ReduceOutcome,
};
use ahp_types::actions::{
    ActionEnvelope, ActionOrigin, PartialChatSummary, RootActiveSessionsChangedAction,
    SessionChatAddedAction, SessionChatUpdatedAction, SessionDefaultChatChangedAction, StateAction,
};
use ahp_types::notifications::PartialSessionSummary;
use ahp_types::state::{
    AgentInfo, ChatState, RootState, SessionActiveClient, SessionLifecycle, SessionState,
    SessionStatus, SessionSummary, Snapshot, SnapshotState,
};
use ahp_types::ROOT_RESOURCE_URI;

use super::replay::ReplayLog;
use super::summary::{chat_summary, summary_status, SummaryFields};

/// A session's state plus the catalogue fields that live only on its summary.
#[derive(Debug, Clone)]
struct SessionRecord {
    state: SessionState,
    created_at: String,
    modified_at: String,
}

impl SessionRecord {
    fn summary(&self, uri: &str) -> SessionSummary {
        let s = &self.state;
        SessionSummary {
            provider: s.provider.clone(),
            title: s.title.clone(),
            status: summary_status(s),
            activity: s.activity.clone(),
            origin: s.origin.clone(),
            project: s.project.clone(),
            working_directories: s.working_directories.clone(),
            annotations: s.annotations.clone(),
            resource: uri.to_string(),
            created_at: self.created_at.clone(),
            modified_at: self.modified_at.clone(),
            changes: None,
            meta: None,
            chats: None,
            default_chat: s.default_chat.clone(),
        }
    }
}

/// What a committed action produced: in state and the replay log already, it must be
/// published (`Core::publish`), or subscribers' mirrors part from the host's state.
#[derive(Debug, Clone)]
#[must_use = "a commit is in state already: publish it"]
pub struct Commit {
    /// The envelope to broadcast on its channel (already in the replay log).
    pub envelope: Arc<ActionEnvelope>,
    /// Its JSON text when the replay log encoded it: what a subscriber that sees the envelope
    /// unchanged is sent, so it is encoded once for the log and every such subscriber.
    pub json: Option<Arc<str>>,
    /// Summary fields that changed, for `root/sessionSummaryChanged` (session actions only).
    pub summary_changes: Option<PartialSessionSummary>,
}

/// Why an action could not be committed.
#[derive(Debug, Clone, PartialEq)]
pub enum CommitError {
    /// No state lives on that channel.
    UnknownChannel,
    /// The reducers refused it (out of scope for the channel, or invalid data).
    Refused(String),
}

/// All AHP state the host owns.
#[derive(Debug)]
pub struct Store {
    root: RootState,
    sessions: BTreeMap<String, SessionRecord>,
    /// Chats by URI, with the session that owns each.
    chats: BTreeMap<String, (ChatState, String)>,
    seq: u64,
    log: ReplayLog,
    /// Whether committed actions enter the replay log.
    replaying: bool,
}

/// Now, as the ISO-8601 UTC string with milliseconds the reducers expect.
pub fn now_iso8601() -> String {
    format!("{:.3}", jiff::Timestamp::now())
}

impl Store {
    /// A store with one agent and no sessions, at `serverSeq` 0, whose replay log keeps at
    /// most `replay_capacity` actions and `replay_bytes` bytes of them.
    pub fn new(agent: AgentInfo, replay_capacity: usize, replay_bytes: usize) -> Self {
        Self {
            root: RootState {
                agents: vec![agent],
                active_sessions: Some(0),
                terminals: None,
                config: None,
                meta: None,
            },
            sessions: BTreeMap::new(),
            chats: BTreeMap::new(),
            seq: 0,
            log: ReplayLog::new(replay_capacity, replay_bytes),
            replaying: true,
        }
    }

    /// Whether committed actions enter the replay log from now on (on from the start).
    /// Turning it off empties the log: those committed while it is off are never replayed,
    /// and a `reconnect` from before them gets snapshots.
    pub fn keep_replay(&mut self, on: bool) {
        if !on {
            self.log.clear();
        }
        self.replaying = on;
    }

    /// The latest `serverSeq` handed out.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Root state.
    pub fn root(&self) -> &RootState {
        &self.root
    }

    /// The agent provider id every session carries.
    pub fn provider(&self) -> &str {
        self.root
            .agents
            .first()
            .map(|a| a.provider.as_str())
            .unwrap_or("")
    }

    /// A session's state.
    pub fn session(&self, uri: &str) -> Option<&SessionState> {
        self.sessions.get(uri).map(|r| &r.state)
    }

    /// How many sessions there are.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Bytes the replay log holds (its envelopes' JSON text and their bookkeeping).
    #[cfg(test)]
    pub fn replay_bytes(&self) -> usize {
        self.log.bytes()
    }

    /// URIs of every session.
    pub fn session_uris(&self) -> impl Iterator<Item = &str> {
        self.sessions.keys().map(String::as_str)
    }

    /// A chat's state.
    pub fn chat(&self, uri: &str) -> Option<&ChatState> {
        self.chats.get(uri).map(|(chat, _)| chat)
    }

    /// The session that owns chat `uri`.
    pub fn chat_session(&self, uri: &str) -> Option<&str> {
        self.chats.get(uri).map(|(_, session)| session.as_str())
    }

    /// Whether `uri` is a state-bearing channel of this host.
    pub fn has_channel(&self, uri: &str) -> bool {
        uri == ROOT_RESOURCE_URI || self.sessions.contains_key(uri) || self.chats.contains_key(uri)
    }

    /// A complete snapshot of `uri` at the current `serverSeq`.
    pub fn snapshot(&self, uri: &str) -> Option<Snapshot> {
        let state = if uri == ROOT_RESOURCE_URI {
            SnapshotState::Root(Box::new(self.root.clone()))
        } else if let Some((chat, _)) = self.chats.get(uri) {
            SnapshotState::Chat(Box::new(chat.clone()))
        } else {
            SnapshotState::Session(Box::new(self.sessions.get(uri)?.state.clone()))
        };
        Some(Snapshot {
            resource: uri.to_string(),
            state,
            from_seq: seq_i64(self.seq),
        })
    }

    /// Every session's summary, most recently modified first (ties by URI).
    pub fn summaries(&self) -> Vec<SessionSummary> {
        let mut list: Vec<SessionSummary> = self
            .sessions
            .iter()
            .map(|(uri, record)| record.summary(uri))
            .collect();
        list.sort_by(|a, b| {
            b.modified_at
                .cmp(&a.modified_at)
                .then_with(|| a.resource.cmp(&b.resource))
        });
        list
    }

    /// One session's summary.
    pub fn summary(&self, uri: &str) -> Option<SessionSummary> {
        self.sessions.get(uri).map(|r| r.summary(uri))
    }

    /// Apply `action` to the state on `channel` with the official reducers; on success it gets
    /// the next `serverSeq` and enters the replay log. Refused actions change nothing.
    pub fn commit(
        &mut self,
        channel: &str,
        action: StateAction,
        origin: Option<ActionOrigin>,
    ) -> Result<Commit, CommitError> {
        let summary_changes = if channel == ROOT_RESOURCE_URI {
            let outcome = apply_action_to_root(&mut self.root, &action);
            accept(outcome)?;
            None
        } else if let Some((chat, _)) = self.chats.get_mut(channel) {
            accept(apply_action_to_chat(chat, &action))?;
            None
        } else {
            let record = self
                .sessions
                .get_mut(channel)
                .ok_or(CommitError::UnknownChannel)?;
            let before = SummaryFields::of(&record.state);
            accept(apply_action_to_session(&mut record.state, &action))?;
            // The session's own status follows its summary (see `summary_status`).
            record.state.status = summary_status(&record.state);
            let changes = before.changes_to(&record.state, now_iso8601);
            if let Some(changes) = &changes {
                if let Some(modified_at) = &changes.modified_at {
                    record.modified_at = modified_at.clone();
                }
            }
            changes
        };
        self.seq += 1;
        let envelope = Arc::new(ActionEnvelope {
            channel: channel.to_string(),
            action,
            server_seq: self.seq,
            origin,
            rejection_reason: None,
        });
        let json = if self.replaying {
            self.log.push(&envelope)
        } else {
            None
        };
        Ok(Commit {
            envelope,
            json,
            summary_changes,
        })
    }

    /// Add a ready session at `uri` and commit the new `root/activeSessionsChanged`.
    /// The caller checks that `uri` is free.
    pub fn add_session(
        &mut self,
        uri: &str,
        title: &str,
        working_directories: Option<Vec<String>>,
        active_client: Option<SessionActiveClient>,
        customizations: Vec<ahp_types::state::Customization>,
    ) -> Result<Commit, CommitError> {
        let now = now_iso8601();
        let state = SessionState {
            provider: self.provider().to_string(),
            title: title.to_string(),
            status: SessionStatus::Idle.bits(),
            activity: None,
            origin: None,
            project: None,
            working_directories,
            annotations: None,
            lifecycle: SessionLifecycle::Ready,
            creation_error: None,
            server_tools: None,
            active_clients: active_client.into_iter().collect(),
            chats: Vec::new(),
            default_chat: None,
            config: None,
            customizations: Some(customizations),
            changesets: None,
            input_needed: None,
            meta: None,
        };
        self.sessions.insert(
            uri.to_string(),
            SessionRecord {
                state,
                created_at: now.clone(),
                modified_at: now,
            },
        );
        self.commit_session_count()
    }

    /// Remove the session at `uri` (and its chats) and commit the new
    /// `root/activeSessionsChanged`. Returns the commit and the removed chats' URIs.
    #[must_use = "the count's commit must be published"]
    pub fn remove_session(&mut self, uri: &str) -> Option<(Commit, Vec<String>)> {
        self.sessions.remove(uri)?;
        let chats: Vec<String> = self
            .chats
            .iter()
            .filter(|(_, (_, owner))| owner == uri)
            .map(|(chat, _)| chat.clone())
            .collect();
        for chat in &chats {
            self.chats.remove(chat);
        }
        Some((self.commit_session_count().ok()?, chats))
    }

    /// Add an empty chat `chat` to session `session`, read-only for users (its turns are
    /// the host's), and commit `session/chatAdded` (plus `session/defaultChatChanged` when
    /// it becomes the default chat).
    pub fn add_chat(
        &mut self,
        session: &str,
        chat: &str,
        title: &str,
        default: bool,
    ) -> Result<Vec<Commit>, CommitError> {
        if !self.sessions.contains_key(session) {
            return Err(CommitError::UnknownChannel);
        }
        if self.has_channel(chat) {
            return Err(CommitError::Refused(format!("{chat:?} already exists")));
        }
        let now = now_iso8601();
        let state: ChatState = serde_json::from_value(serde_json::json!({
            "resource": chat,
            "title": title,
            "status": SessionStatus::Idle.bits(),
            "modifiedAt": now,
            "interactivity": "read-only",
            "turns": [],
        }))
        .map_err(|e| CommitError::Refused(e.to_string()))?;
        let summary = chat_summary(&state);
        self.chats
            .insert(chat.to_string(), (state, session.to_string()));
        let mut commits = vec![self.commit(
            session,
            StateAction::SessionChatAdded(SessionChatAddedAction { summary }),
            None,
        )?];
        if default {
            commits.push(self.commit(
                session,
                StateAction::SessionDefaultChatChanged(SessionDefaultChatChangedAction {
                    default_chat: Some(chat.to_string()),
                }),
                None,
            )?);
        }
        Ok(commits)
    }

    /// After a change on chat `chat`: commit `session/chatUpdated` on its session with the
    /// summary fields that now differ from the session's catalogue entry, if any.
    #[must_use = "the commit must be published"]
    pub fn sync_chat_summary(&mut self, chat: &str) -> Option<Commit> {
        let (state, session) = self.chats.get(chat)?;
        let current = chat_summary(state);
        let listed = self
            .sessions
            .get(session)?
            .state
            .chats
            .iter()
            .find(|c| c.resource == chat)?;
        let mut changes = PartialChatSummary::default();
        let mut changed = false;
        if listed.title != current.title {
            changes.title = Some(current.title.clone());
            changed = true;
        }
        if listed.status != current.status {
            changes.status = Some(current.status);
            changed = true;
        }
        if listed.activity != current.activity {
            changes.activity = current.activity.clone();
            changed = true;
        }
        if listed.modified_at != current.modified_at {
            changes.modified_at = Some(current.modified_at.clone());
            changed = true;
        }
        if !changed {
            return None;
        }
        let session = session.clone();
        self.commit(
            &session,
            StateAction::SessionChatUpdated(SessionChatUpdatedAction {
                chat: chat.to_string(),
                changes,
            }),
            None,
        )
        .ok()
    }

    fn commit_session_count(&mut self) -> Result<Commit, CommitError> {
        let count = i64::try_from(self.sessions.len()).unwrap_or(i64::MAX);
        self.commit(
            ROOT_RESOURCE_URI,
            StateAction::RootActiveSessionsChanged(RootActiveSessionsChangedAction {
                active_sessions: count,
            }),
            None,
        )
    }

    /// Envelopes after `after` on `channels`, or `None` when the log no longer reaches back.
    pub fn replay(&self, after: u64, channels: &HashSet<&str>) -> Option<Vec<ActionEnvelope>> {
        self.log.since(after, self.seq, channels)
    }
}

/// `serverSeq` as the `i64` some wire fields use.
pub fn seq_i64(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

fn accept(outcome: ReduceOutcome) -> Result<(), CommitError> {
    match outcome {
        ReduceOutcome::Applied | ReduceOutcome::NoOp => Ok(()),
        ReduceOutcome::OutOfScope => Err(CommitError::Refused(
            "the action does not apply to this channel".into(),
        )),
        ReduceOutcome::Invalid(error) => Err(CommitError::Refused(error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_types::actions::{SessionIsReadChangedAction, SessionTitleChangedAction};

    fn agent() -> AgentInfo {
        AgentInfo {
            provider: "p".into(),
            display_name: "P".into(),
            description: "d".into(),
            models: vec![],
            protected_resources: None,
            customizations: None,
            capabilities: None,
        }
    }

    fn store_with_session() -> Store {
        let mut store = Store::new(agent(), 16, usize::MAX);
        let _ = store
            .add_session("ahp-proxy:/s", "T", None, None, vec![])
            .expect("adding a session commits");
        store
    }

    #[test]
    fn adding_a_session_commits_the_session_count() {
        let store = store_with_session();
        assert_eq!(store.seq(), 1);
        assert_eq!(store.root().active_sessions, Some(1));
        let session = store.session("ahp-proxy:/s").expect("exists");
        assert_eq!(session.lifecycle, SessionLifecycle::Ready);
        assert_eq!(session.customizations.as_deref(), Some(&[][..]));
    }

    #[test]
    fn commits_advance_the_sequence_and_reach_the_log() {
        let mut store = store_with_session();
        let commit = store
            .commit(
                "ahp-proxy:/s",
                StateAction::SessionTitleChanged(SessionTitleChangedAction {
                    title: "New".into(),
                }),
                None,
            )
            .expect("title change applies");
        assert_eq!(commit.envelope.server_seq, 2);
        let changes = commit.summary_changes.expect("title is a summary field");
        assert_eq!(changes.title.as_deref(), Some("New"));
        assert!(changes.status.is_none());
        assert!(changes.modified_at.is_some());
        let channels: HashSet<&str> = ["ahp-proxy:/s"].into_iter().collect();
        assert_eq!(store.replay(1, &channels).map(|r| r.len()), Some(1));
    }

    #[test]
    fn actions_committed_while_replay_is_off_are_never_replayed() {
        let mut store = store_with_session();
        store.keep_replay(false);
        let title = |title: &str| {
            StateAction::SessionTitleChanged(SessionTitleChangedAction {
                title: title.into(),
            })
        };
        let _ = store.commit("ahp-proxy:/s", title("unseen"), None).unwrap();
        assert_eq!(store.replay_bytes(), 0);
        store.keep_replay(true);
        let _ = store.commit("ahp-proxy:/s", title("seen"), None).unwrap();
        let channels: HashSet<&str> = ["ahp-proxy:/s"].into_iter().collect();
        // From before the unseen one: snapshots; from after it: the later one.
        assert!(store.replay(1, &channels).is_none());
        let replayed = store.replay(2, &channels).expect("within the log");
        assert_eq!(replayed.len(), 1);
        assert_eq!(replayed[0].action, title("seen"));
    }

    #[test]
    fn status_flags_reported_as_summary_changes() {
        let mut store = store_with_session();
        let commit = store
            .commit(
                "ahp-proxy:/s",
                StateAction::SessionIsReadChanged(SessionIsReadChangedAction { is_read: true }),
                None,
            )
            .expect("applies");
        let changes = commit.summary_changes.expect("status changed");
        assert_eq!(changes.status, Some(1 | 32));
    }

    #[test]
    fn out_of_scope_actions_are_refused_without_a_sequence_number() {
        let mut store = store_with_session();
        let refused = store.commit(
            ROOT_RESOURCE_URI,
            StateAction::SessionTitleChanged(SessionTitleChangedAction { title: "x".into() }),
            None,
        );
        assert!(matches!(refused, Err(CommitError::Refused(_))));
        assert_eq!(store.seq(), 1);
        assert_eq!(
            store
                .commit(
                    "ahp-proxy:/none",
                    StateAction::SessionTitleChanged(SessionTitleChangedAction {
                        title: "x".into()
                    }),
                    None
                )
                .err(),
            Some(CommitError::UnknownChannel)
        );
    }

    #[test]
    fn snapshots_serialize_every_required_session_field() {
        let store = store_with_session();
        let snapshot = store.snapshot("ahp-proxy:/s").expect("exists");
        let json = serde_json::to_value(&snapshot).expect("serializes");
        for field in [
            "provider",
            "title",
            "status",
            "lifecycle",
            "activeClients",
            "chats",
        ] {
            assert!(
                json["state"].get(field).is_some(),
                "missing {field}: {json}"
            );
        }
        let decoded: Snapshot = serde_json::from_value(json).expect("round-trips");
        assert!(matches!(decoded.state, SnapshotState::Session(_)));
    }

    #[test]
    fn removing_a_session_updates_the_count() {
        let mut store = store_with_session();
        store
            .add_chat("ahp-proxy:/s", "ahp-chat:/c", "C", true)
            .expect("chat added");
        let (_, chats) = store.remove_session("ahp-proxy:/s").expect("was there");
        assert_eq!(chats, ["ahp-chat:/c"]);
        assert!(!store.has_channel("ahp-chat:/c"));
        assert_eq!(store.root().active_sessions, Some(0));
        assert!(store.remove_session("ahp-proxy:/s").is_none());
    }
}
