//! The host's side of each client: the handshake (`initialize`, `reconnect`) with the records
//! remembered across connections, subscriptions, and the active-client role ending.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use ahp_types::actions::{SessionActiveClientRemovedAction, StateAction};
use ahp_types::commands::{
    Implementation, InitializeResult, ReconnectReplayResult, ReconnectResult,
    ReconnectSnapshotResult, SubscribeResult,
};
use ahp_types::ROOT_RESOURCE_URI;

use super::audience::{Audience, Named};
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
        initial_subscriptions: &[Named],
    ) {
        let mut core = self.core();
        let core = &mut *core;
        core.remember(client_id, record.clone());
        // Another live connection of the same client id still speaks for it.
        let elsewhere = core.fanout.has_client(client_id);
        core.fanout.set_client(id, client_id, Audience::of(&record));
        let mut snapshots = Vec::new();
        for named in initial_subscriptions {
            if let Some(snapshot) = core.store.snapshot(&named.uri) {
                core.fanout.subscribe_as(id, &named.uri, &named.name);
                snapshots.push((snapshot, named.name.clone()));
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
                    .map(|(s, name)| audience.snapshot(s, &name))
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
        subscriptions: &[Named],
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
        let (live, missing): (Vec<&Named>, Vec<&Named>) = subscriptions.iter().partition(|n| {
            core.store.has_channel(&n.uri)
                || (mcp_apps
                    && n.uri.starts_with("mcp://")
                    && core.channel_server(&n.uri).is_some())
        });
        for named in &live {
            core.fanout.subscribe_as(id, &named.uri, &named.name);
        }
        let channels: HashSet<&str> = live.iter().map(|n| n.uri.as_str()).collect();
        // Taken now (with the name the client knows each channel by), shown as the client is
        // shown them once the lock is let go.
        let taken = match core.store.replay(last_seen, &channels) {
            Some(actions) => {
                let names: HashMap<String, String> = channels
                    .iter()
                    .map(|uri| (uri.to_string(), core.fanout.name_of(id, uri).to_string()))
                    .collect();
                let missing: Vec<String> = missing.into_iter().map(|n| n.name.clone()).collect();
                Ok((actions, names, missing))
            }
            None => Err(live
                .iter()
                .filter_map(|n| Some((core.store.snapshot(&n.uri)?, n.name.clone())))
                .collect::<Vec<_>>()),
        };
        core.reply(id, move |audience| {
            let result = match taken {
                Ok((actions, names, missing)) => ReconnectResult::Replay(ReconnectReplayResult {
                    actions: actions
                        .iter()
                        .filter_map(|e| {
                            let name = names.get(&e.channel).unwrap_or(&e.channel);
                            audience.envelope_as(e, name).map(Cow::into_owned)
                        })
                        .collect(),
                    missing,
                }),
                Err(snapshots) => ReconnectResult::Snapshot(ReconnectSnapshotResult {
                    snapshots: snapshots
                        .into_iter()
                        .map(|(s, name)| audience.snapshot(s, &name))
                        .collect(),
                }),
            };
            jsonrpc::success(request_id, &result)
        });
        // A session the client was active in and no longer follows: it has left, at once.
        core.leave_unfollowed(client_id, subscriptions);
        Ok(())
    }

    /// Handle `subscribe` for a state-bearing channel, asked for by `channel.name`.
    pub fn subscribe(&self, id: ConnId, request_id: u64, channel: &Named) -> Result<(), RpcError> {
        let uri = channel.uri.as_str();
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
            .ok_or_else(|| unknown_channel(&channel.name, core.store.provider()))?;
        core.fanout.subscribe_as(id, uri, &channel.name);
        let name = channel.name.clone();
        core.reply(id, move |audience| {
            let result = SubscribeResult {
                snapshot: Some(audience.snapshot(snapshot, &name)),
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
    fn leave_unfollowed(&mut self, client_id: &str, subscriptions: &[Named]) {
        let left: Vec<String> = self
            .store
            .session_uris()
            .filter(|uri| !subscriptions.iter().any(|s| s.uri == *uri))
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

/// `-32001` (no such session) for a URI named like a session of this host (`<provider>:…`
/// or the old `ahp-session:…`), `-32008` otherwise.
fn unknown_channel(uri: &str, provider: &str) -> RpcError {
    let scheme = uri.split_once(':').map(|(scheme, _)| scheme);
    if scheme.is_some_and(|s| s == provider || s == super::OLD_SESSION_SCHEME) {
        session_not_found(uri)
    } else {
        RpcError::new(
            ahp_codes::NOT_FOUND,
            format!("no channel {uri:?} on this host"),
        )
    }
}
