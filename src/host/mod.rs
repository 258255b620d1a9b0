//! The single writer of AHP state: every change is committed through the store (official
//! reducers, global `serverSeq`, replay log) and fanned out to subscribers under one lock.
//!
//! Replies that establish subscriptions are queued under the same lock as the snapshot is
//! taken, so a client always sees its snapshot before any action that follows it.

pub mod admission;
pub mod apps;
pub mod fanout;
pub mod live;
pub mod paused;
pub mod replay;
pub mod store;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use ahp_types::actions::{
    ActionEnvelope, ActionOrigin, SessionActiveClientRemovedAction, StateAction,
};
use ahp_types::commands::{
    CreateSessionParams, DispatchActionParams, Implementation, InitializeResult,
    ListSessionsResult, ReconnectReplayResult, ReconnectResult, ReconnectSnapshotResult,
    SubscribeResult,
};
use ahp_types::notifications::{
    SessionAddedParams, SessionRemovedParams, SessionSummaryChangedParams,
};
use ahp_types::state::{AgentInfo, Snapshot};
use ahp_types::ROOT_RESOURCE_URI;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::jsonrpc::{self, ahp_codes, Frame, RpcError};
use fanout::{ConnId, Fanout};
use store::{seq_i64, Commit, CommitError, Store};

/// URI of the session that exists from start-up.
pub const DEFAULT_SESSION_URI: &str = "ahp-session:/default";

/// URI of the default session's chat where the harness's tool calls appear.
pub const HARNESS_CHAT_URI: &str = "ahp-chat:/harness";

/// How many client ids (with their negotiated version) are remembered for `reconnect`.
const REMEMBERED_CLIENTS: usize = 4096;

/// What the host remembers about a client across connections.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientRecord {
    /// Protocol version negotiated at `initialize`; `reconnect` continues with it.
    pub protocol_version: String,
    /// Whether the client declared `capabilities.mcpApps`.
    pub mcp_apps: bool,
}

/// A connection's end of the host: its id, its outbound queue, and the switch that is
/// flipped when the host disconnects it (queue overflow).
pub struct Attachment {
    /// Host-wide connection id.
    pub id: ConnId,
    /// Frames to write to the socket, in order.
    pub outbox: mpsc::Receiver<Frame>,
    /// Cancelled when the host kicks this connection.
    pub kicked: CancellationToken,
}

struct Core {
    store: Store,
    live: live::Live,
    control: Option<mpsc::Sender<crate::supervisor::Command>>,
    fanout: Fanout,
    clients: HashMap<String, ClientRecord>,
    client_order: VecDeque<String>,
    /// Harness tool calls waiting for authorization: the only ones a client may give up on.
    paused: paused::PausedCalls,
    /// Servers holding a token from `authenticate`, by the resource it was given for (so
    /// the token can be replaced or revoked while the server is ready).
    authenticated: HashMap<String, HashSet<String>>,
}

/// The AHP host: shared by every connection and, later, by discovery and the supervisor.
pub struct Host {
    core: Mutex<Core>,
    queue_capacity: usize,
    next_conn: AtomicU64,
}

impl Host {
    /// A host with the configured agent and its default session, ready at start-up.
    pub fn new(config: &Config) -> Self {
        let agent = AgentInfo {
            provider: config.agent.provider.clone(),
            display_name: config.agent.display_name.clone(),
            description: config.agent.description.clone(),
            models: Vec::new(),
            protected_resources: None,
            customizations: None,
            capabilities: None,
        };
        let mut store = Store::new(agent, config.limits.replay_log);
        // Adding the first session (and its chat) to an empty store always commits.
        let _ = store.add_session(
            DEFAULT_SESSION_URI,
            &config.session.title,
            None,
            None,
            Vec::new(),
        );
        let _ = store.add_chat(DEFAULT_SESSION_URI, HARNESS_CHAT_URI, "MCP harness", true);
        Self {
            core: Mutex::new(Core {
                store,
                live: live::Live::default(),
                control: None,
                fanout: Fanout::default(),
                clients: HashMap::new(),
                client_order: VecDeque::new(),
                authenticated: HashMap::new(),
                paused: paused::PausedCalls::default(),
            }),
            queue_capacity: config.limits.client_queue,
            next_conn: AtomicU64::new(1),
        }
    }

    /// Tool calls (chat, tool call id) clients give up on from now on.
    pub fn given_up(&self) -> tokio::sync::broadcast::Receiver<(String, String)> {
        self.core().paused.subscribe()
    }

    /// Tool call `call` of `chat` waits for authorization: clients may give up on it.
    pub fn hold_paused(&self, chat: &str, call: &str) {
        self.core().paused.hold(chat, call);
    }

    /// Tool call `call` of `chat` stops waiting. `false` when a client gave up on it first.
    pub fn release_paused(&self, chat: &str, call: &str) -> bool {
        self.core().paused.release(chat, call)
    }

    /// The server behind `mcp://` channel `uri` and what its channel serves, for connection
    /// `conn`. Only connections that declared `mcpApps` see channels; a channel exists while
    /// its server is ready.
    pub fn resolve_channel(
        &self,
        conn: ConnId,
        uri: &str,
    ) -> Result<(String, ahp_types::state::AhpMcpUiHostCapabilities), RpcError> {
        let core = self.core();
        let unknown = || {
            RpcError::invalid_params(format!(
                "{uri} is not an open mcp:// channel (the server is not ready, or the channel is unknown)"
            ))
        };
        if !core.fanout.mcp_apps(conn) {
            return Err(RpcError::invalid_params(format!(
                "{uri}: mcp:// channels are only served to clients that declared capabilities.mcpApps at initialize"
            )));
        }
        core.channel_server(uri).ok_or_else(unknown)
    }

    /// Server `id` changed its `list` (`tools` or `resources`): queue `frame_for(channel)` to
    /// the subscribers of each of its channels that advertise `listChanged` for it.
    pub fn announce_list_changed(&self, id: &str, list: &str, frame_for: impl Fn(&str) -> Frame) {
        let mut core = self.core();
        let core = &mut *core;
        let channels: Vec<String> = core
            .store
            .session_uris()
            .filter_map(|session| core.store.session(session))
            .flat_map(|s| s.customizations.iter().flatten())
            .filter_map(|c| live::server_of(c, id))
            .filter(|m| {
                m.mcp_app
                    .as_ref()
                    .is_some_and(|a| apps::announces(&a.capabilities, list))
            })
            .filter_map(|m| m.channel.clone())
            .collect();
        for channel in channels {
            core.fanout.broadcast(&channel, &frame_for(&channel));
        }
    }

    /// Handle `authenticate`: the token goes to every server that asked for this resource
    /// (or holds a token for it), which reconnects with it; an empty token revokes. Tokens
    /// stay in memory, in the supervisor only; they never enter state or logs. `waiting`
    /// are the servers the supervisor has just seen refuse, with the status they went down
    /// with (their state may be a moment away).
    pub fn authenticate(
        &self,
        params: ahp_types::commands::AuthenticateParams,
        waiting: Vec<(String, crate::supervisor::Status)>,
    ) -> Result<(), RpcError> {
        let mut core = self.core();
        let core = &mut *core;
        // Who asks for this resource: servers showing authRequired in some session, and
        // servers the supervisor has just seen refuse (whose state may be a moment away).
        let mut asking: Vec<ahp_types::state::McpAuthRequirement> = Vec::new();
        let mut ids: HashSet<String> = core
            .authenticated
            .get(&params.resource)
            .cloned()
            .unwrap_or_default();
        for session in core.store.session_uris() {
            let Some(state) = core.store.session(session) else {
                continue;
            };
            for c in state.customizations.iter().flatten() {
                for m in live::servers(c) {
                    if let ahp_types::state::McpServerState::AuthRequired(auth) = &m.state {
                        if auth.resource.resource == params.resource && ids.insert(m.id.clone()) {
                            asking.extend(live::auth_requirement_of(auth));
                        }
                    }
                }
            }
        }
        for (id, status) in waiting {
            if let Some(auth) = live::auth_requirement(&status) {
                if auth.resource.resource == params.resource && ids.insert(id) {
                    asking.push(auth);
                }
            }
        }
        if ids.is_empty() {
            return Err(RpcError::invalid_params(format!(
                "unknown resource {:?}: no MCP server asked for it",
                params.resource
            )));
        }
        let expires_at = match params.expires_in {
            None => None,
            // A lifetime too long to represent is no lifetime at all.
            Some(seconds) if seconds >= 1 => u64::try_from(seconds).ok().and_then(|seconds| {
                tokio::time::Instant::now().checked_add(std::time::Duration::from_secs(seconds))
            }),
            Some(seconds) => {
                return Err(RpcError::invalid_params(format!(
                    "expiresIn must be a positive number of seconds, not {seconds}"
                )))
            }
        };
        // Granted scopes, when given, must cover what the server asked for.
        if let (Some(granted), false) = (&params.scopes, params.token.is_empty()) {
            let short: Vec<_> = asking
                .iter()
                .filter(|a| {
                    a.required_scopes
                        .iter()
                        .flatten()
                        .any(|s| !granted.contains(s))
                })
                .map(|a| a.resource.clone())
                .collect();
            if !short.is_empty() {
                let data = ahp_types::errors::AuthRequiredErrorData { resources: short };
                return Err(RpcError {
                    code: ahp_codes::AUTH_REQUIRED,
                    message: "the granted scopes do not cover the scopes the server requires"
                        .into(),
                    data: serde_json::to_value(data).ok(),
                });
            }
        }
        let Some(control) = core.control.clone() else {
            return Err(RpcError::new(
                jsonrpc::codes::INTERNAL_ERROR,
                "the host is shutting down",
            ));
        };
        let bearer = (!params.token.is_empty()).then_some(crate::supervisor::Bearer {
            token: params.token,
            expires_at,
        });
        if bearer.is_some() {
            core.authenticated
                .insert(params.resource.clone(), ids.clone());
        } else {
            core.authenticated.remove(&params.resource);
        }
        for id in ids {
            tracing::info!(server = %id, revoked = bearer.is_none(), "token received for an MCP server");
            let command = crate::supervisor::Command::Authenticate {
                id,
                bearer: bearer.clone(),
            };
            if control.try_send(command).is_err() {
                return Err(RpcError::new(
                    jsonrpc::codes::INTERNAL_ERROR,
                    "the supervisor is busy; try again",
                ));
            }
        }
        Ok(())
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        // A panic while holding the lock cannot leave the store half-written (reducers work on
        // the state in place but are total), so a poisoned lock is still usable.
        self.core
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Open a connection: a bounded outbound queue and a kick switch.
    pub fn attach(&self) -> Attachment {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(self.queue_capacity);
        let kicked = CancellationToken::new();
        self.core().fanout.insert(id, tx, kicked.clone());
        Attachment {
            id,
            outbox: rx,
            kicked,
        }
    }

    /// Close a connection: its subscriptions end. Idempotent.
    pub fn detach(&self, id: ConnId) {
        self.core().fanout.remove(id);
    }

    /// Queue one frame for one connection.
    pub fn send(&self, id: ConnId, frame: Frame) {
        self.core().fanout.send(id, frame);
    }

    /// A snapshot of any state-bearing channel.
    pub fn snapshot(&self, uri: &str) -> Option<Snapshot> {
        self.core().store.snapshot(uri)
    }

    /// Handle `initialize` after version negotiation: remember the client, subscribe the
    /// connection to the known `initial_subscriptions` (unknown ones are silently omitted), and
    /// queue the result with their snapshots.
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
        core.fanout.set_client(id, client_id, record.mcp_apps);
        let mut snapshots = Vec::new();
        for uri in initial_subscriptions {
            if let Some(snapshot) = core.snapshot_for(id, uri) {
                core.fanout.subscribe(id, uri);
                snapshots.push(snapshot);
            }
        }
        let result = InitializeResult {
            protocol_version: record.protocol_version,
            server_seq: seq_i64(core.store.seq()),
            server_info: Some(server_info()),
            meta: None,
            snapshots,
            default_directory: None,
            completion_trigger_characters: None,
            terminal_command_prefix: None,
            telemetry: None,
            automations: None,
        };
        core.fanout.send(id, jsonrpc::success(request_id, &result));
    }

    /// Handle `reconnect`: replay what the client missed on its subscriptions, or send fresh
    /// snapshots when the gap is older than the replay log. The client keeps the protocol
    /// version and capabilities it negotiated at `initialize` (remembered here).
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
        let mcp_apps = record.mcp_apps;
        core.fanout.set_client(id, client_id, mcp_apps);
        // Open `mcp://` channels stay subscribed (they have no state to replay).
        let (live, missing): (Vec<&String>, Vec<&String>) = subscriptions.iter().partition(|uri| {
            core.store.has_channel(uri)
                || (mcp_apps && uri.starts_with("mcp://") && core.channel_server(uri).is_some())
        });
        let channels: HashSet<&str> = live.iter().map(|uri| uri.as_str()).collect();
        let result = match core.store.replay(last_seen, &channels) {
            Some(actions) => ReconnectResult::Replay(ReconnectReplayResult {
                actions: if mcp_apps {
                    actions
                } else {
                    actions
                        .into_iter()
                        .map(|e| apps::plain_envelope(&e).unwrap_or(e))
                        .collect()
                },
                missing: missing.into_iter().cloned().collect(),
            }),
            None => ReconnectResult::Snapshot(ReconnectSnapshotResult {
                snapshots: live
                    .iter()
                    .filter_map(|uri| core.snapshot_for(id, uri))
                    .collect(),
            }),
        };
        for uri in &live {
            core.fanout.subscribe(id, uri);
        }
        core.fanout.send(id, jsonrpc::success(request_id, &result));
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
            core.fanout.send(id, jsonrpc::success(request_id, &result));
            return Ok(());
        }
        let mut core = self.core();
        let snapshot = core
            .snapshot_for(id, uri)
            .ok_or_else(|| unknown_channel(uri))?;
        core.fanout.subscribe(id, uri);
        let result = SubscribeResult {
            snapshot: Some(snapshot),
        };
        core.fanout.send(id, jsonrpc::success(request_id, &result));
        Ok(())
    }

    /// Handle `unsubscribe`. Leaving a session also ends the client's active-client role there.
    pub fn unsubscribe(&self, id: ConnId, client_id: &str, uri: &str) {
        let mut core = self.core();
        if core.fanout.unsubscribe(id, uri) && uri != ROOT_RESOURCE_URI {
            core.remove_active_client(uri, client_id);
        }
    }

    /// Handle `dispatchAction` from `client_id`: unknown channels are ignored; refused actions
    /// are echoed to the sender only, with `rejectionReason`, and not applied; accepted ones
    /// are reduced, sequenced and broadcast with the client's `origin`.
    pub fn dispatch(&self, id: ConnId, client_id: &str, params: DispatchActionParams) {
        let mut core = self.core();
        let core = &mut *core;
        let verdict = if params.channel == ROOT_RESOURCE_URI {
            admission::admit_root(core.store.root(), &params.action)
        } else if let Some(session) = core.store.session(&params.channel) {
            admission::admit_session(session, client_id, &params.action)
        } else if let Some(chat) = core.store.chat(&params.channel) {
            admission::admit_chat(chat, &params.action).and_then(|()| match &params.action {
                StateAction::ChatToolCallComplete(a)
                    if !core.paused.is_held(&params.channel, &a.tool_call_id) =>
                {
                    Err(format!(
                        "tool call {:?} is no longer waiting for authorization",
                        a.tool_call_id
                    ))
                }
                _ => Ok(()),
            })
        } else {
            tracing::debug!(conn = id, channel = %params.channel, "dispatchAction on an unknown channel ignored");
            return;
        };
        let origin = ActionOrigin {
            client_id: client_id.to_string(),
            client_seq: params.client_seq,
        };
        let refusal = match verdict {
            Ok(()) => match core.store.commit(
                &params.channel,
                params.action.clone(),
                Some(origin.clone()),
            ) {
                Ok(commit) => {
                    core.publish(commit);
                    core.sync_chat(&params.channel);
                    core.carry_out(&params.channel, &params.action);
                    return;
                }
                Err(CommitError::Refused(reason)) => reason,
                Err(CommitError::UnknownChannel) => return,
            },
            Err(reason) => reason,
        };
        tracing::debug!(conn = id, channel = %params.channel, reason = %refusal, "client action rejected");
        let echo = ActionEnvelope {
            channel: params.channel,
            action: params.action,
            server_seq: core.store.seq(),
            origin: Some(origin),
            rejection_reason: Some(refusal),
        };
        core.fanout.send(id, jsonrpc::notification("action", &echo));
    }

    /// Commit a host-originated action and broadcast it (on a chat, followed by the
    /// `session/chatUpdated` it implies). Returns its `serverSeq`.
    pub fn emit(&self, channel: &str, action: StateAction) -> Result<u64, CommitError> {
        let mut core = self.core();
        let commit = core.store.commit(channel, action, None)?;
        let seq = commit.envelope.server_seq;
        core.publish(commit);
        core.sync_chat(channel);
        Ok(seq)
    }

    /// Send supervisor commands for accepted client actions (toggle, start, stop) here.
    pub fn set_control(&self, control: mpsc::Sender<crate::supervisor::Command>) {
        self.core().control = Some(control);
    }

    /// Drop the supervisor sender (shutdown): client requests are no longer carried out.
    pub fn set_control_closed(&self) {
        self.core().control = None;
    }

    /// A supervised server changed state: remember it and tell every session that shows it.
    pub fn server_event(&self, event: crate::supervisor::ServerEvent) {
        let mut core = self.core();
        let Some(status) = event.status else {
            core.live.forget_state(&event.id);
            return;
        };
        if let crate::supervisor::Status::Ready { served, .. } = &status {
            core.live.set_served(&event.id, *served);
        }
        core.live.set_state(&event.id, live::server_state(&status));
        core.refresh_server(&event.id);
    }

    /// Whether a harness that answers sampling is connected: channels advertise `sampling`
    /// only then, so every `mcpApp` follows it.
    pub fn set_harness_sampling(&self, sampling: bool) {
        let mut core = self.core();
        if core.live.set_sampling(sampling) {
            core.refresh_apps();
        }
    }

    /// Commit a host-originated session action to every session (customization changes
    /// apply to all of them, with live server states and client toggles laid over them).
    /// Returns how many sessions took it.
    pub fn emit_to_sessions(&self, action: &StateAction) -> usize {
        let mut core = self.core();
        let uris: Vec<String> = core.store.session_uris().map(str::to_string).collect();
        let mut applied = 0;
        for uri in uris {
            let mut action = action.clone();
            core.live.patch_action(&uri, &mut action);
            match core.store.commit(&uri, action, None) {
                Ok(commit) => {
                    core.publish(commit);
                    applied += 1;
                }
                Err(error) => tracing::warn!(session = %uri, ?error, "host action not applied"),
            }
        }
        applied
    }

    /// Handle `listSessions`: most recently modified first, paged by an opaque offset cursor.
    pub fn list_sessions(
        &self,
        limit: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<ListSessionsResult, RpcError> {
        let all = self.core().store.summaries();
        let start = match cursor {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix("offset:")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= all.len())
                .ok_or_else(|| RpcError::invalid_params(format!("unknown cursor {cursor:?}")))?,
        };
        let limit = match limit {
            None => usize::MAX,
            Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
            Some(n) => {
                return Err(RpcError::invalid_params(format!(
                    "limit {n} must be at least 1"
                )))
            }
        };
        let end = start.saturating_add(limit).min(all.len());
        Ok(ListSessionsResult {
            next_cursor: (end < all.len()).then(|| format!("offset:{end}")),
            items: all[start..end].to_vec(),
        })
    }

    /// Handle `createSession` from `client_id`: a new ready session showing the host's
    /// customizations; announces it with `root/activeSessionsChanged` and `root/sessionAdded`.
    pub fn create_session(
        &self,
        id: ConnId,
        request_id: u64,
        client_id: &str,
        params: CreateSessionParams,
    ) -> Result<(), RpcError> {
        let uri = params.channel;
        if !is_session_uri(&uri) {
            return Err(RpcError::invalid_params(format!(
                "{uri:?} is not a usable session URI: expected scheme:path, e.g. ahp-session:/my-session"
            )));
        }
        let mut core = self.core();
        let core = &mut *core;
        if let Some(provider) = &params.provider {
            if provider != core.store.provider() {
                return Err(RpcError::new(
                    ahp_codes::PROVIDER_NOT_FOUND,
                    format!(
                        "unknown provider {provider:?}: this host serves {:?}",
                        core.store.provider()
                    ),
                ));
            }
        }
        if let Some(active) = &params.active_client {
            if active.client_id != client_id {
                return Err(RpcError::invalid_params(format!(
                    "activeClient.clientId {:?} is not the caller's clientId {client_id:?}",
                    active.client_id
                )));
            }
        }
        if core.store.has_channel(&uri) {
            return Err(RpcError::new(
                ahp_codes::SESSION_ALREADY_EXISTS,
                format!("session {uri:?} already exists"),
            ));
        }
        // Every session shows the host's one customization tree; copy it from any session.
        let customizations = core
            .store
            .session_uris()
            .next()
            .and_then(|existing| core.store.session(existing))
            .and_then(|s| s.customizations.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|mut c| {
                // Channels are per session.
                core.live.patch(&uri, &mut c);
                c
            })
            .collect();
        let title = params
            .config
            .as_ref()
            .and_then(|c| c.get("title"))
            .and_then(|t| t.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| "Session".to_string());
        let working_directories = params
            .working_directories
            .and_then(|dirs| dirs.into_iter().next())
            .map(|first| vec![first]);
        let commit = core
            .store
            .add_session(
                &uri,
                &title,
                working_directories,
                params.active_client,
                customizations,
            )
            .map_err(|e| RpcError::new(jsonrpc::codes::INTERNAL_ERROR, format!("{e:?}")))?;
        core.fanout.send(id, jsonrpc::success(request_id, &()));
        core.publish(commit);
        if let Some(summary) = core.store.summary(&uri) {
            let added = SessionAddedParams {
                channel: ROOT_RESOURCE_URI.to_string(),
                summary,
            };
            core.fanout.broadcast(
                ROOT_RESOURCE_URI,
                &jsonrpc::notification("root/sessionAdded", &added),
            );
        }
        Ok(())
    }

    /// Handle `disposeSession`: drop its state and subscriptions, announce the removal.
    pub fn dispose_session(&self, id: ConnId, request_id: u64, uri: &str) -> Result<(), RpcError> {
        let mut core = self.core();
        let core = &mut *core;
        let (commit, chats) = core
            .store
            .remove_session(uri)
            .ok_or_else(|| session_not_found(uri))?;
        core.fanout.forget_channel(uri);
        for chat in &chats {
            core.fanout.forget_channel(chat);
        }
        core.fanout.send(id, jsonrpc::success(request_id, &()));
        core.publish(commit);
        let removed = SessionRemovedParams {
            channel: ROOT_RESOURCE_URI.to_string(),
            session: uri.to_string(),
        };
        core.fanout.broadcast(
            ROOT_RESOURCE_URI,
            &jsonrpc::notification("root/sessionRemoved", &removed),
        );
        Ok(())
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
    /// A snapshot of `uri` as connection `id` sees it (without channels and `mcpApp`s unless
    /// it declared `mcpApps`).
    fn snapshot_for(&self, id: ConnId, uri: &str) -> Option<Snapshot> {
        let snapshot = self.store.snapshot(uri)?;
        Some(if self.fanout.mcp_apps(id) {
            snapshot
        } else {
            apps::plain_snapshot(snapshot)
        })
    }

    /// Bring every session's view of server `id` up to its live facts: anything besides its
    /// state and channel (its `mcpApp`) first, as `session/customizationUpdated` of the
    /// container it lives in; then the state and channel as `session/mcpServerStateChanged`,
    /// so clients always see state transitions as such.
    fn refresh_server(&mut self, id: &str) {
        let uris: Vec<String> = self.store.session_uris().map(str::to_string).collect();
        for uri in uris {
            let Some(current) = self.store.session(&uri).and_then(|s| {
                s.customizations
                    .iter()
                    .flatten()
                    .find(|c| live::server_in(c, id))
                    .cloned()
            }) else {
                continue;
            };
            let mut patched = current.clone();
            self.live.patch_server(&uri, &mut patched, id);
            let (Some(was), Some(now)) = (
                live::server_of(&current, id).cloned(),
                live::server_of(&patched, id).cloned(),
            ) else {
                continue;
            };
            let mut staged = patched;
            if let Some(m) = live::server_mut(&mut staged, id) {
                m.state = was.state.clone();
                m.channel = was.channel.clone();
            }
            let mut actions = Vec::new();
            if staged != current {
                actions.push(StateAction::SessionCustomizationUpdated(Box::new(
                    ahp_types::actions::SessionCustomizationUpdatedAction {
                        customization: staged,
                    },
                )));
            }
            if now.state != was.state || now.channel != was.channel {
                actions.push(StateAction::SessionMcpServerStateChanged(Box::new(
                    ahp_types::actions::SessionMcpServerStateChangedAction {
                        id: id.to_string(),
                        state: now.state,
                        channel: now.channel,
                    },
                )));
            }
            for action in actions {
                match self.store.commit(&uri, action, None) {
                    Ok(commit) => self.publish(commit),
                    Err(error) => {
                        tracing::warn!(session = %uri, ?error, "server state not applied")
                    }
                }
            }
        }
    }

    /// Re-derive every server's `mcpApp` in every session (sampling came or went).
    fn refresh_apps(&mut self) {
        let uris: Vec<String> = self.store.session_uris().map(str::to_string).collect();
        for uri in uris {
            let list = self
                .store
                .session(&uri)
                .and_then(|s| s.customizations.clone())
                .unwrap_or_default();
            for current in list {
                let mut patched = current.clone();
                self.live.patch_apps(&mut patched);
                if patched == current {
                    continue;
                }
                let action = StateAction::SessionCustomizationUpdated(Box::new(
                    ahp_types::actions::SessionCustomizationUpdatedAction {
                        customization: patched,
                    },
                ));
                match self.store.commit(&uri, action, None) {
                    Ok(commit) => self.publish(commit),
                    Err(error) => tracing::warn!(session = %uri, ?error, "mcpApp not applied"),
                }
            }
        }
    }

    /// Broadcast a committed envelope, and the summary change it caused, if any.
    /// Side effects of an accepted client action: toggles are remembered (and mirrored to
    /// the other sessions, since servers are shared), start/stop go to the supervisor.
    fn carry_out(&mut self, channel: &str, action: &StateAction) {
        use crate::supervisor::Command;
        let command = match action {
            StateAction::SessionCustomizationToggled(a) => {
                self.live.record_toggle(&a.id, &a.enablement);
                let others: Vec<String> = self
                    .store
                    .session_uris()
                    .filter(|uri| *uri != channel)
                    .map(str::to_string)
                    .collect();
                for uri in others {
                    if let Ok(commit) = self.store.commit(&uri, action.clone(), None) {
                        self.publish(commit);
                    }
                }
                Command::Toggle {
                    id: a.id.clone(),
                    enabled: live::effective(&a.enablement),
                }
            }
            StateAction::SessionMcpServerStartRequested(a) => Command::Start(a.id.clone()),
            StateAction::SessionMcpServerStopRequested(a) => Command::Stop(a.id.clone()),
            StateAction::ChatToolCallComplete(a) => {
                // A client gave up on a call waiting for authorization: its harness request
                // ends with an error now.
                self.paused.give_up(channel, &a.tool_call_id);
                return;
            }
            _ => return,
        };
        if let Some(control) = &self.control {
            if let Err(error) = control.try_send(command) {
                tracing::warn!(%error, "supervisor busy; client request dropped");
            }
        }
    }

    /// The server behind open `mcp://` channel `uri`, and what the channel serves.
    fn channel_server(
        &self,
        uri: &str,
    ) -> Option<(String, ahp_types::state::AhpMcpUiHostCapabilities)> {
        self.store
            .session_uris()
            .filter_map(|session| self.store.session(session))
            .flat_map(|s| s.customizations.iter().flatten())
            .find_map(|c| live::server_with_channel(c, uri))
            .and_then(|m| Some((m.id.clone(), m.mcp_app.as_ref()?.capabilities.clone())))
    }

    /// After a commit on `channel`: if it is a chat whose summary changed, tell its session.
    fn sync_chat(&mut self, channel: &str) {
        if let Some(commit) = self.store.sync_chat_summary(channel) {
            self.publish(commit);
        }
    }

    fn publish(&mut self, commit: Commit) {
        let channel = commit.envelope.channel.clone();
        let plain = apps::plain_envelope(&commit.envelope)
            .map(|envelope| jsonrpc::notification("action", &envelope));
        self.fanout.broadcast_views(
            &channel,
            &jsonrpc::notification("action", &commit.envelope),
            plain.as_ref(),
        );
        if let Some(changes) = commit.summary_changes {
            let params = SessionSummaryChangedParams {
                channel: ROOT_RESOURCE_URI.to_string(),
                session: channel,
                changes,
            };
            self.fanout.broadcast(
                ROOT_RESOURCE_URI,
                &jsonrpc::notification("root/sessionSummaryChanged", &params),
            );
        }
    }

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
        if let Ok(commit) = self.store.commit(uri, action, None) {
            self.publish(commit);
        }
    }
}

/// `serverInfo` for `initialize`.
pub fn server_info() -> Implementation {
    Implementation {
        name: env!("CARGO_PKG_NAME").to_string(),
        version: Some(env!("CARGO_PKG_VERSION").to_string()),
        title: Some("ahp-proxy".to_string()),
    }
}

fn is_session_uri(uri: &str) -> bool {
    match uri.split_once(':') {
        Some((scheme, rest)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && !rest.is_empty()
                && uri != ROOT_RESOURCE_URI
                && !uri.starts_with("mcp:")
        }
        None => false,
    }
}

fn session_not_found(uri: &str) -> RpcError {
    RpcError::new(ahp_codes::SESSION_NOT_FOUND, format!("no session {uri:?}"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::mirror::{CallStart, Turns};
    use serde_json::json;

    fn give_up(host: &Host, conn: ConnId) {
        let action = serde_json::from_value(json!({"type": "chat/toolCallComplete",
            "turnId": "harness-1", "toolCallId": "harness-call-1",
            "result": {"success": false, "pastTenseMessage": "Declined"}}))
        .unwrap();
        host.dispatch(
            conn,
            "c",
            DispatchActionParams {
                channel: HARNESS_CHAT_URI.into(),
                client_seq: 1,
                action,
            },
        );
    }

    #[tokio::test]
    async fn a_give_up_counts_only_while_the_call_is_held_and_whoever_takes_it_first_wins() {
        let config =
            crate::config::Config::parse("", "proxy.toml", std::path::Path::new(".")).unwrap();
        let host = Host::new(&config);
        let conn = host.attach().id;
        let mut heard = host.given_up();
        // A mirrored call shown as waiting for authorization.
        let mut turns = Turns::new();
        let start = CallStart::example(1);
        for action in turns.start(start, 0, 0, "2026-01-01T00:00:00.000Z") {
            host.emit(HARNESS_CHAT_URI, action).unwrap();
        }
        let auth = serde_json::from_value(json!({"reason": "insufficientScope",
            "resource": {"resource": "http://h/mcp"}}))
        .unwrap();
        let (_, paused) = turns.auth_required(1, auth).unwrap();
        host.emit(HARNESS_CHAT_URI, paused).unwrap();

        // Shown paused but not held (the call already resumed): refused, nobody told.
        give_up(&host, conn);
        assert!(heard.try_recv().is_err());
        // Held, then released first (resumed): a later give-up is refused.
        host.hold_paused(HARNESS_CHAT_URI, "harness-call-1");
        assert!(host.release_paused(HARNESS_CHAT_URI, "harness-call-1"));
        give_up(&host, conn);
        assert!(heard.try_recv().is_err());
        // Held: the give-up is admitted, heard, and the call can no longer be released.
        host.hold_paused(HARNESS_CHAT_URI, "harness-call-1");
        give_up(&host, conn);
        assert_eq!(
            heard.try_recv().unwrap(),
            (HARNESS_CHAT_URI.to_string(), "harness-call-1".to_string())
        );
        assert!(!host.release_paused(HARNESS_CHAT_URI, "harness-call-1"));
        // The call is over: giving up again is refused.
        give_up(&host, conn);
        assert!(heard.try_recv().is_err());
    }
}
