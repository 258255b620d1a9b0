//! The single writer of AHP state: every change is committed through the store (official
//! reducers, global `serverSeq`, replay log) and fanned out to subscribers under one lock.
//!
//! Replies that establish subscriptions are queued under the same lock as the snapshot is
//! taken, so a client always sees its snapshot before any action that follows it. `Host` is
//! one type whose methods live by concern: `clients` (handshake, subscriptions), `sessions`
//! (list, create, dispose), `dispatch` (client actions), `servers` (supervisor events,
//! rescans, `mcp://` lookups), `auth` (`authenticate`, paused calls), `client_tools` and
//! `client_plugins` (what active clients publish).

pub mod admission;
pub mod apps;
pub mod audience;
mod auth;
pub mod bounds;
pub mod client_plugins;
pub mod client_tools;
mod clients;
mod dispatch;
pub mod fanout;
pub mod input_needed;
pub mod live;
pub mod malformed;
pub mod paused;
pub mod replay;
mod servers;
mod sessions;
pub mod store;
pub mod summary;
pub mod token_trials;
pub mod versions;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use ahp_types::actions::StateAction;
use ahp_types::state::{AgentInfo, Snapshot};
use ahp_types::ROOT_RESOURCE_URI;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::jsonrpc::Frame;
use fanout::{ConnId, Fanout};
use store::{Commit, CommitError, Store};

/// URI of the session that exists from start-up.
pub const DEFAULT_SESSION_URI: &str = "ahp-session:/default";

/// URI of the default session's chat where the harness's tool calls appear.
pub const HARNESS_CHAT_URI: &str = "ahp-chat:/harness";

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
    pub outbox: fanout::Outbox,
    /// Cancelled when the host kicks this connection.
    pub kicked: CancellationToken,
}

/// Everything behind the host's one lock.
struct Core {
    store: Store,
    live: live::Live,
    control: Option<mpsc::Sender<crate::supervisor::Command>>,
    fanout: Fanout,
    clients: HashMap<String, ClientRecord>,
    client_order: VecDeque<String>,
    /// Harness tool calls waiting for authorization: the only ones a client may give up on.
    paused: paused::PausedCalls,
    /// Tools AHP clients offer the harness, and the events of the calls of them.
    client_tools: client_tools::ClientTools,
    /// Plugins AHP clients publish, handed to the catalog.
    client_plugins: client_plugins::ClientPluginFeed,
    /// Servers holding a token from `authenticate`, by the resource it was given for (so
    /// the token can be replaced or revoked while the server is ready).
    authenticated: HashMap<String, HashSet<String>>,
    /// `authenticate` requests waiting for their token to be tried.
    token_trials: token_trials::TokenTrials,
}

/// The AHP host: the one owner of AHP state, shared by every AHP connection, the harness
/// mirror, the watcher (rescans) and the supervisor bridge (server events).
pub struct Host {
    core: Mutex<Core>,
    queue_capacity: usize,
    queue_bytes: usize,
    max_sessions: usize,
    next_conn: AtomicU64,
    /// How long `authenticate` waits for the servers to try a token.
    token_trial_time: std::time::Duration,
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
        let mut store = Store::new(
            agent,
            config.limits.replay_log,
            config.limits.replay_log_bytes,
        );
        // Adding the first session (and its chat) to an empty store always commits.
        let _ = store.add_session(
            DEFAULT_SESSION_URI,
            &config.session.title,
            None,
            None,
            Vec::new(),
        );
        let _ = store.add_chat(DEFAULT_SESSION_URI, HARNESS_CHAT_URI, "MCP harness", true);
        // Until a connection is attached, no client can have seen an action: the start-up
        // ones (the whole first customization list) are not kept for `reconnect`.
        store.keep_replay(false);
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
                client_tools: client_tools::ClientTools::default(),
                client_plugins: client_plugins::ClientPluginFeed::new(config.clients.plugins),
                token_trials: token_trials::TokenTrials::default(),
            }),
            queue_capacity: config.limits.client_queue,
            queue_bytes: config.limits.client_queue_bytes,
            max_sessions: config.limits.max_sessions,
            next_conn: AtomicU64::new(1),
            // Connecting and the handshake are bounded by the start timeout; the metadata
            // fetch of a refusal comes on top.
            token_trial_time: config.supervisor.start_timeout * 2,
        }
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
        let (tx, rx) = fanout::queue(self.queue_capacity, self.queue_bytes);
        let kicked = CancellationToken::new();
        let mut core = self.core();
        core.store.keep_replay(true);
        core.fanout.insert(id, tx, kicked.clone());
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

    /// Whether `uri` is one of the host's chats.
    pub fn is_chat(&self, uri: &str) -> bool {
        self.core().store.chat(uri).is_some()
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
}

impl Core {
    /// After a commit on `channel`: if it is a chat whose summary changed, tell its session.
    fn sync_chat(&mut self, channel: &str) {
        if let Some(commit) = self.store.sync_chat_summary(channel) {
            self.publish(commit);
        }
    }

    /// Broadcast a committed envelope, and the summary change it caused if any, each as
    /// its subscribers' audiences are shown it.
    fn publish(&mut self, commit: Commit) {
        let envelope = &commit.envelope;
        let encoded = commit.json.as_deref();
        self.fanout
            .broadcast_each(&envelope.channel, |audience, name| {
                audience.action(envelope, encoded, name)
            });
        if let Some(changes) = &commit.summary_changes {
            self.fanout
                .broadcast_each(ROOT_RESOURCE_URI, |audience, _| {
                    Some(audience.summary_changed(&envelope.channel, changes))
                });
        }
    }
}
