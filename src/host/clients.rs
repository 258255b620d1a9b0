//! The host's side of each client: the handshake (`initialize`, `reconnect`) with the records
//! remembered across connections, subscriptions, and the active-client role ending.

use std::borrow::Cow;
use std::collections::HashSet;

use ahp_types::actions::{SessionActiveClientRemovedAction, StateAction};
use ahp_types::commands::{
    Implementation, InitializeResult, ReconnectReplayResult, ReconnectResult,
    ReconnectSnapshotResult, SubscribeResult,
};
use ahp_types::ROOT_RESOURCE_URI;

use super::audience::Audience;
use super::fanout::ConnId;
use super::sessions::session_not_found;
use super::store::seq_i64;
use super::{ClientRecord, Core, Host};
use crate::jsonrpc::{self, ahp_codes, RpcError};

/// How many client ids (with their negotiated version) are remembered for `reconnect`.
const REMEMBERED_CLIENTS: usize = 4096;

impl Host {
    /// Handle `initialize` after version negotiation: remember the client, subscribe the
    /// connection to the known `initial_subscriptions` (unknown ones are silently omitted), and
    /// queue the result with their snapshots. A client id still active in sessions from an
    /// earlier connection (within its grace period, none other open) starts afresh: sessions
    /// it does not subscribe to at once lose it, as with a `reconnect` omitting them.
    pub fn initialize(
        &self,
        id: ConnId,
        request_id: u64,
        client_id: &str,
        record: ClientRecord,
        initial_subscriptions: &[String],
    ) {
        let mut core = self.core();
        let core = &mut *core;
        core.remember(client_id, record.clone());
        // Another live connection of the same client id still speaks for it.
        let elsewhere = core.fanout.has_client(client_id);
        core.fanout.set_client(id, client_id, Audience::of(&record));
        let mut snapshots = Vec::new();
        for uri in initial_subscriptions {
            if let Some(snapshot) = core.store.snapshot(uri) {
                core.fanout.subscribe(id, uri);
                snapshots.push(snapshot);
            }
        }
        let server_seq = seq_i64(core.store.seq());
        core.reply(id, move |audience| {
            let result = InitializeResult {
                protocol_version: record.protocol_version,
                server_seq,
                server_info: Some(server_info()),
                meta: None,
                snapshots: snapshots
                    .into_iter()
                    .map(|s| audience.snapshot(s))
                    .collect(),
                default_directory: None,
                completion_trigger_characters: None,
                terminal_command_prefix: None,
                telemetry: None,
                automations: None,
            };
            jsonrpc::success(request_id, &result)
        });
        if !elsewhere {
            core.leave_unfollowed(client_id, initial_subscriptions);
        }
    }

    /// Handle `reconnect`: replay what the client missed on its subscriptions, or send fresh
    /// snapshots when the gap is older than the replay log. The client keeps the protocol
    /// version and capabilities it negotiated at `initialize` (remembered here). Sessions it
    /// was active in and does not list any more lose it as an active client at once.
    pub fn reconnect(
        &self,
        id: ConnId,
        request_id: u64,
        client_id: &str,
        last_seen_server_seq: i64,
        subscriptions: &[String],
    ) -> Result<(), RpcError> {
        let last_seen = u64::try_from(last_seen_server_seq).map_err(|_| {
            RpcError::invalid_params("lastSeenServerSeq must be a non-negative integer")
        })?;
        let mut core = self.core();
        let core = &mut *core;
        let Some(record) = core.clients.get(client_id) else {
            return Err(RpcError::new(
                ahp_codes::NOT_FOUND,
                format!("unknown clientId {client_id:?}: send initialize instead"),
            ));
        };
        let audience = Audience::of(record);
        let mcp_apps = audience.mcp_apps;
        core.fanout.set_client(id, client_id, audience);
        // Open `mcp://` channels stay subscribed (they have no state to replay).
        let (live, missing): (Vec<&String>, Vec<&String>) = subscriptions.iter().partition(|uri| {
            core.store.has_channel(uri)
                || (mcp_apps && uri.starts_with("mcp://") && core.channel_server(uri).is_some())
        });
        let channels: HashSet<&str> = live.iter().map(|uri| uri.as_str()).collect();
        // Taken now, shown as the client is shown them once the lock is let go.
        let taken = match core.store.replay(last_seen, &channels) {
            Some(actions) => Ok((actions, missing.into_iter().cloned().collect::<Vec<_>>())),
            None => Err(live
                .iter()
                .filter_map(|uri| core.store.snapshot(uri))
                .collect::<Vec<_>>()),
        };
        for uri in &live {
            core.fanout.subscribe(id, uri);
        }
        core.reply(id, move |audience| {
            let result = match taken {
                Ok((actions, missing)) => ReconnectResult::Replay(ReconnectReplayResult {
                    actions: actions
                        .iter()
                        .filter_map(|e| audience.envelope(e).map(Cow::into_owned))
                        .collect(),
                    missing,
                }),
                Err(snapshots) => ReconnectResult::Snapshot(ReconnectSnapshotResult {
                    snapshots: snapshots
                        .into_iter()
                        .map(|s| audience.snapshot(s))
                        .collect(),
                }),
            };
            jsonrpc::success(request_id, &result)
        });
        // A session the client was active in and no longer follows: it has left, at once.
        core.leave_unfollowed(client_id, subscriptions);
        Ok(())
    }

    /// Handle `subscribe` for a state-bearing channel.
    pub fn subscribe(&self, id: ConnId, request_id: u64, uri: &str) -> Result<(), RpcError> {
        if uri.starts_with("mcp://") {
            // Stateless: no snapshot, just the list-change notifications from now on.
            self.resolve_channel(id, uri)?;
            let mut core = self.core();
            core.fanout.subscribe(id, uri);
            let result = SubscribeResult { snapshot: None };
            core.send(id, jsonrpc::success(request_id, &result));
            return Ok(());
        }
        let mut core = self.core();
        let snapshot = core
            .store
            .snapshot(uri)
            .ok_or_else(|| unknown_channel(uri))?;
        core.fanout.subscribe(id, uri);
        core.reply(id, move |audience| {
            let result = SubscribeResult {
                snapshot: Some(audience.snapshot(snapshot)),
            };
            jsonrpc::success(request_id, &result)
        });
        Ok(())
    }

    /// Handle `unsubscribe`. Leaving a session also ends the client's active-client role there.
    pub fn unsubscribe(&self, id: ConnId, client_id: &str, uri: &str) {
        let mut core = self.core();
        if core.fanout.unsubscribe(id, uri) && uri != ROOT_RESOURCE_URI {
            core.remove_active_client(uri, client_id);
        }
    }

    /// After a disconnected client's grace period: if it has not come back, remove it from
    /// every session's `activeClients`.
    pub fn expire_client(&self, client_id: &str) {
        let mut core = self.core();
        if core.fanout.has_client(client_id) {
            return;
        }
        let uris: Vec<String> = core.store.session_uris().map(str::to_string).collect();
        for uri in uris {
            core.remove_active_client(&uri, client_id);
        }
    }
}

impl Core {
    fn remember(&mut self, client_id: &str, record: ClientRecord) {
        if self.clients.insert(client_id.to_string(), record).is_none() {
            self.client_order.push_back(client_id.to_string());
            if self.client_order.len() > REMEMBERED_CLIENTS {
                if let Some(oldest) = self.client_order.pop_front() {
                    self.clients.remove(&oldest);
                }
            }
        }
    }

    /// Client `client_id` now follows only `subscriptions`: every session it was active in
    /// and does not follow loses it as an active client.
    fn leave_unfollowed(&mut self, client_id: &str, subscriptions: &[String]) {
        let left: Vec<String> = self
            .store
            .session_uris()
            .filter(|uri| !subscriptions.iter().any(|s| s == uri))
            .filter(|uri| {
                self.store
                    .session(uri)
                    .is_some_and(|s| s.active_clients.iter().any(|c| c.client_id == client_id))
            })
            .map(str::to_string)
            .collect();
        for uri in left {
            self.remove_active_client(&uri, client_id);
        }
    }

    fn remove_active_client(&mut self, uri: &str, client_id: &str) {
        let present = self
            .store
            .session(uri)
            .is_some_and(|s| s.active_clients.iter().any(|c| c.client_id == client_id));
        if !present {
            return;
        }
        let action = StateAction::SessionActiveClientRemoved(SessionActiveClientRemovedAction {
            client_id: client_id.to_string(),
        });
        // Its follow-ups: the client's tools and plugins leave with it.
        let _ = self.commit_and_publish(uri, action, None);
    }
}

/// `serverInfo` for `initialize`.
fn server_info() -> Implementation {
    Implementation {
        name: env!("CARGO_PKG_NAME").to_string(),
        version: Some(env!("CARGO_PKG_VERSION").to_string()),
        title: Some("ahp-proxy".to_string()),
    }
}

fn unknown_channel(uri: &str) -> RpcError {
    if uri.starts_with("ahp-session:") {
        session_not_found(uri)
    } else {
        RpcError::new(
            ahp_codes::NOT_FOUND,
            format!("no channel {uri:?} on this host"),
        )
    }
}
