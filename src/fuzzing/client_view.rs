//! What an AHP client holds for the frames target: each subscribed channel's state, rebuilt
//! from the snapshots and actions it received with the official reducers, to compare with the host.
//!
//! Only what the frames prove is mirrored: a `reconnect` replay is applied only onto a mirror
//! the same client left at exactly the `lastSeenServerSeq` it sends. Chats are not mirrored:
//! ahp-types 1.0.0 cannot read back an `auth-required` tool call (its `status` field collides
//! with the enum's `status` tag, so the wire has the key twice and the call decodes as
//! `Unknown`), so no Rust client can follow the harness chat through a paused call.

use std::collections::BTreeMap;

use ahp::reducers::{apply_action_to_root, apply_action_to_session};
use ahp_types::actions::ActionEnvelope;
use ahp_types::commands::ReconnectResult;
use ahp_types::state::{Snapshot, SnapshotState};
use serde_json::Value;

use crate::host::audience::Audience;
use crate::host::versions::Version;
use crate::host::Host;

/// One client's mirror on one connection.
#[derive(Debug, Clone, Default)]
pub struct ClientView {
    /// The client, once `initialize` or `reconnect` succeeded.
    pub client_id: Option<String>,
    /// What it is shown: `mcp://` channels and `mcpApp`s or not, its protocol version.
    pub audience: Audience,
    states: BTreeMap<String, SnapshotState>,
    /// The highest `serverSeq` its states are known to include.
    last_seq: i64,
}

impl ClientView {
    /// The answer to `initialize` (`params` as sent) arrived.
    pub fn initialized(&mut self, params: &Value, result: &Value) {
        self.client_id = params["clientId"].as_str().map(str::to_string);
        self.audience = Audience {
            mcp_apps: serde_json::from_value(params.clone())
                .is_ok_and(|p| crate::ahp::handshake::shown_mcp_apps(&p)),
            version: result["protocolVersion"]
                .as_str()
                .and_then(Version::parse)
                .unwrap_or_default(),
        };
        self.last_seq = result["serverSeq"].as_i64().unwrap_or(0);
        for snapshot in result["snapshots"].as_array().into_iter().flatten() {
            self.take_snapshot(snapshot);
        }
    }

    /// The answer to `subscribe` arrived.
    pub fn subscribed(&mut self, result: &Value) {
        if let Some(snapshot) = result.get("snapshot").filter(|s| !s.is_null()) {
            self.take_snapshot(snapshot);
        }
    }

    /// The answer to `reconnect` (`params` as sent) arrived; `before` is the mirror the same
    /// client left when its last connection ended, and `audience` what it negotiated.
    pub fn reconnected(
        &mut self,
        params: &Value,
        result: &Value,
        before: Option<&ClientView>,
        audience: Audience,
    ) {
        self.client_id = params["clientId"].as_str().map(str::to_string);
        self.audience = audience;
        self.states.clear();
        let result: ReconnectResult = serde_json::from_value(result.clone())
            .unwrap_or_else(|e| panic!("a reconnect result clients cannot read ({e}): {result}"));
        match result {
            ReconnectResult::Snapshot(snapshots) => {
                for snapshot in snapshots.snapshots {
                    self.hold(snapshot);
                }
            }
            ReconnectResult::Replay(replay) => {
                let last_seen = params["lastSeenServerSeq"].as_i64();
                let Some(before) = before.filter(|b| Some(b.last_seq) == last_seen) else {
                    return; // nothing this client is known to hold
                };
                self.last_seq = before.last_seq;
                let subscriptions: Vec<&str> = params["subscriptions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter(|uri| !replay.missing.iter().any(|m| m == uri))
                    .collect();
                for (uri, state) in &before.states {
                    if subscriptions.contains(&uri.as_str()) {
                        self.states.insert(uri.clone(), state.clone());
                    }
                }
                for envelope in &replay.actions {
                    self.apply(envelope);
                }
            }
        }
    }

    /// An `action` notification arrived.
    pub fn on_action(&mut self, params: &Value) {
        let envelope: ActionEnvelope = serde_json::from_value(params.clone())
            .unwrap_or_else(|e| panic!("an action envelope clients cannot read ({e}): {params}"));
        if envelope.rejection_reason.is_none() {
            self.apply(&envelope);
        }
    }

    /// The client unsubscribed from `uri` (or the channel is gone).
    pub fn forget(&mut self, uri: &str) {
        self.states.remove(uri);
    }

    /// Every mirrored state equals the host's, as this client is shown it (a session's own
    /// `status` derived as the host derives it). Channels the host no longer has are dropped.
    pub fn check(&mut self, host: &Host) {
        let mut gone = Vec::new();
        for (uri, state) in &self.states {
            let Some(snapshot) = host.snapshot(uri) else {
                gone.push(uri.clone());
                continue;
            };
            let snapshot = self.audience.snapshot(snapshot, uri);
            // A session's own `status` is the one field the reducers leave alone: the host
            // derives it from what the mirror holds too (`summary_status`).
            let mut derived = state.clone();
            if let SnapshotState::Session(session) = &mut derived {
                session.status = crate::host::summary::summary_status(session);
            }
            let state = &derived;
            if snapshot.state == *state {
                continue;
            }
            // Typed values may differ where the wire does not (e.g. a number's type).
            let host_view = serde_json::to_value(&snapshot.state).unwrap_or_default();
            let mirror = serde_json::to_value(state).unwrap_or_default();
            assert!(
                host_view == mirror,
                "client {:?} holds another state of {uri} than the host shows it\n mirror: {mirror}\n   host: {host_view}",
                self.client_id
            );
        }
        for uri in gone {
            self.states.remove(&uri);
        }
    }

    fn take_snapshot(&mut self, snapshot: &Value) {
        let snapshot: Snapshot = serde_json::from_value(snapshot.clone())
            .unwrap_or_else(|e| panic!("a snapshot clients cannot read ({e}): {snapshot}"));
        self.hold(snapshot);
    }

    fn hold(&mut self, snapshot: Snapshot) {
        self.last_seq = self.last_seq.max(snapshot.from_seq);
        if !matches!(snapshot.state, SnapshotState::Chat(_)) {
            self.states.insert(snapshot.resource, snapshot.state);
        }
    }

    fn apply(&mut self, envelope: &ActionEnvelope) {
        self.last_seq = self
            .last_seq
            .max(i64::try_from(envelope.server_seq).unwrap_or(i64::MAX));
        match self.states.get_mut(&envelope.channel) {
            Some(SnapshotState::Root(root)) => {
                apply_action_to_root(root, &envelope.action);
            }
            Some(SnapshotState::Session(session)) => {
                apply_action_to_session(session, &envelope.action);
            }
            _ => {}
        }
    }
}
