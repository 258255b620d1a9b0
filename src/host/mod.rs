//! The single writer of AHP state: every change is committed through the store (official
//! reducers, global `serverSeq`, replay log) under one lock, with its follow-ups.
//!
//! A critical section decides what to send (`delivery::Delivery`: who gets a commit, which
//! snapshot a reply carries); rendering and queuing happen after the lock is let go, in
//! the order the lock was held (`Locked`), so a client always sees its snapshot before any
//! action that follows it, and actions in `serverSeq` order. `Host` is one type whose
//! methods live by concern: `clients` (handshake, subscriptions), `sessions` (list,
//! create, dispose), `dispatch` (client actions), `servers` (supervisor events, rescans,
//! `mcp://` lookups), `control` (what clients ask of the supervisor), `auth`
//! (`authenticate`, paused calls), `approvals` (calls held for approval), `client_tools` and `client_plugins` (what active clients
//! publish).

pub mod admission;
pub mod approvals;
pub mod apps;
pub mod audience;
mod auth;
pub mod bounds;
pub mod client_plugins;
pub mod client_tools;
mod clients;
mod control;
pub mod delivery;
mod dispatch;
pub mod fanout;
pub mod input_needed;
pub mod live;
pub mod malformed;
pub mod paused;
pub mod plugin_ids;
pub mod queue;
pub mod replay;
mod servers;
mod sessions;
pub mod store;
pub mod summary;
pub mod token_trials;
pub mod versions;

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use ahp_types::actions::{ActionOrigin, StateAction};
use ahp_types::state::{AgentInfo, Snapshot};
use ahp_types::ROOT_RESOURCE_URI;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::jsonrpc::Frame;
use audience::Audience;
use delivery::{Delivery, Sockets};
use fanout::{ConnId, Fanout, Targets};
use store::{Commit, CommitError, Store};

/// URI of the session that exists from start-up for agent `provider`: `<provider>:/default`,
/// the provider as its scheme, which is where VS Code reads a listed session's provider from.
pub fn default_session_uri(provider: &str) -> String {
    format!("{provider}:/default")
}

/// The scheme the host named its sessions by before it took the provider's
/// (`ahp-session:/default`); clients may still use it (`ahp::aliases`).
pub const OLD_SESSION_SCHEME: &str = "ahp-session";

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
    pub outbox: queue::Outbox,
    /// Cancelled when the host kicks this connection.
    pub kicked: CancellationToken,
}

/// Everything behind the host's one lock.
struct Core {
    store: Store,
    /// The session that exists from start-up ([`default_session_uri`]).
    default_session: String,
    live: live::Live,
    /// What clients asked of the servers, followed by the supervisor.
    control: Option<tokio::sync::watch::Sender<crate::supervisor::Requests>>,
    fanout: Fanout,
    /// What this critical section decided to send, delivered in order once it ends.
    outgoing: Vec<Delivery>,
    clients: HashMap<String, ClientRecord>,
    client_order: VecDeque<String>,
    /// Harness tool calls waiting for authorization: the only ones a client may give up on.
    paused: paused::PausedCalls,
    /// Harness tool calls held for approval: the only ones a client may approve or deny.
    approvals: approvals::Approvals,
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
    /// Every connection's queue; taken before `core` is let go (see [`Locked`]).
    sockets: Mutex<Sockets>,
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
        // Adding the first session (and its chat) to an empty store always commits, and
        // nobody can be subscribed yet: there is nothing to publish.
        let default_session = default_session_uri(&config.agent.provider);
        let folders: Vec<String> = (config.working_directories().iter())
            .map(|folder| crate::discovery::uri::file_uri(folder))
            .collect();
        let _ = store.add_session(
            &default_session,
            &config.session.title,
            (!folders.is_empty()).then_some(folders),
            None,
            Vec::new(),
        );
        let _ = store.add_chat(&default_session, HARNESS_CHAT_URI, "MCP harness", true);
        // Until a connection is attached, no client can have seen an action: the start-up
        // ones (the whole first customization list) are not kept for `reconnect`.
        store.keep_replay(false);
        Self {
            core: Mutex::new(Core {
                store,
                default_session,
                live: live::Live::default(),
                control: None,
                fanout: Fanout::default(),
                outgoing: Vec::new(),
                clients: HashMap::new(),
                client_order: VecDeque::new(),
                authenticated: HashMap::new(),
                paused: paused::PausedCalls::default(),
                approvals: approvals::Approvals::default(),
                client_tools: client_tools::ClientTools::default(),
                client_plugins: client_plugins::ClientPluginFeed::new(config.clients.plugins),
                token_trials: token_trials::TokenTrials::default(),
            }),
            sockets: Mutex::new(Sockets::default()),
            queue_capacity: config.limits.client_queue,
            queue_bytes: config.limits.client_queue_bytes,
            max_sessions: config.limits.max_sessions,
            next_conn: AtomicU64::new(1),
            // Connecting and the handshake are bounded by the start timeout; the metadata
            // fetch of a refusal comes on top.
            token_trial_time: config.supervisor.start_timeout * 2,
        }
    }

    /// The host's state, locked; what the holder decides to send is delivered when the
    /// guard drops.
    fn core(&self) -> Locked<'_> {
        Locked {
            core: Some(lock(&self.core)),
            sockets: &self.sockets,
        }
    }

    /// Open a connection: a bounded outbound queue and a kick switch; `may_decide` when it
    /// presented the approval key (it may approve, deny or review held calls).
    pub fn attach(&self, may_decide: bool) -> Attachment {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = queue::queue(self.queue_capacity, self.queue_bytes);
        let kicked = CancellationToken::new();
        let mut core = self.core();
        core.store.keep_replay(true);
        core.fanout.insert(id, kicked.clone(), may_decide);
        lock(&self.sockets).insert(id, tx, kicked.clone());
        Attachment {
            id,
            outbox: rx,
            kicked,
        }
    }

    /// Whether connection `id` presented the approval key.
    pub fn may_decide(&self, id: ConnId) -> bool {
        self.core().fanout.may_decide(id)
    }

    /// Close a connection: its subscriptions end. Idempotent.
    pub fn detach(&self, id: ConnId) {
        let mut core = self.core();
        core.fanout.remove(id);
        lock(&self.sockets).remove(id);
    }

    /// Queue one frame for one connection, after everything decided before it.
    pub fn send(&self, id: ConnId, frame: Frame) {
        self.core().send(id, frame);
    }

    /// URI of the session that exists from start-up ([`default_session_uri`]).
    pub fn default_session(&self) -> String {
        self.core().default_session.clone()
    }

    /// A snapshot of any state-bearing channel.
    pub fn snapshot(&self, uri: &str) -> Option<Snapshot> {
        self.core().store.snapshot(uri)
    }

    /// Whether `uri` is one of the host's chats.
    pub fn is_chat(&self, uri: &str) -> bool {
        self.core().store.chat(uri).is_some()
    }

    /// Commit a host-originated action and publish it with its follow-ups (see
    /// [`Core::commit_and_publish`]). Returns its `serverSeq`.
    pub fn emit(&self, channel: &str, action: StateAction) -> Result<u64, CommitError> {
        self.core().commit_and_publish(channel, action, None)
    }
}

/// A mutex's guard, poisoned or not: a panic while holding the host's locks cannot leave
/// the store half-written (reducers work on the state in place but are total), nor a queue.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The host's state while its lock is held. When it drops, what the critical section
/// decided to send is delivered: the sockets' lock is taken before the host's is let go,
/// so batches are queued in the order the host lock was held, while the next holder
/// already works; rendering and queuing are no longer under the host's lock.
struct Locked<'a> {
    core: Option<MutexGuard<'a, Core>>,
    sockets: &'a Mutex<Sockets>,
}

impl Deref for Locked<'_> {
    type Target = Core;

    fn deref(&self) -> &Core {
        self.core
            .as_deref()
            .unwrap_or_else(|| unreachable!("held until drop"))
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Core {
        self.core
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("held until drop"))
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let Some(mut core) = self.core.take() else {
            return;
        };
        if core.outgoing.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut core.outgoing);
        let mut sockets = lock(self.sockets);
        drop(core);
        sockets.deliver(batch);
    }
}

impl Core {
    /// Commit `action` on `channel` and everything that follows from it: published to its
    /// subscribers (and the summary change it caused to the root's), on a chat the
    /// `session/chatUpdated` it implies, and what active clients publish (their tools and
    /// plugins) kept up to date. The one way an action enters host state besides the
    /// store's own session and chat bookkeeping. Returns its `serverSeq`.
    fn commit_and_publish(
        &mut self,
        channel: &str,
        action: StateAction,
        origin: Option<ActionOrigin>,
    ) -> Result<u64, CommitError> {
        let by_client = origin.is_some();
        let commit = self.store.commit(channel, action, origin)?;
        let seq = commit.envelope.server_seq;
        let envelope = commit.envelope.clone();
        self.publish(commit);
        if let Some(summary) = self.store.sync_chat_summary(channel) {
            self.publish(summary);
        }
        self.follow_client_tools(channel, &envelope.action, by_client);
        self.follow_client_plugins(&envelope.action);
        Ok(seq)
    }

    /// Send a committed envelope to its channel's subscribers, and the summary change it
    /// caused (if any) to the root's, each as its audience is shown it and by the name it
    /// subscribed under.
    fn publish(&mut self, commit: Commit) {
        let to = self.fanout.subscribers(&commit.envelope.channel);
        let summary_to = match commit.summary_changes {
            Some(_) => self.fanout.subscribers(ROOT_RESOURCE_URI),
            None => Targets::new(),
        };
        self.outgoing.push(Delivery::Commit {
            commit: Box::new(commit),
            to,
            summary_to,
        });
    }

    /// Send `frame` to connection `id`.
    fn send(&mut self, id: ConnId, frame: Frame) {
        self.outgoing.push(Delivery::Frame(id, frame));
    }

    /// Send connection `id` what `render` makes for its audience (rendered after the lock).
    fn reply(&mut self, id: ConnId, render: impl FnOnce(Audience) -> Frame + Send + 'static) {
        let audience = self.fanout.audience(id);
        self.outgoing
            .push(Delivery::Reply(id, audience, Box::new(render)));
    }

    /// Send every subscriber of `uri` what `render` makes for its audience and the name it
    /// knows `uri` by.
    fn broadcast_each(
        &mut self,
        uri: &str,
        render: impl FnMut(Audience, &str) -> Option<Frame> + Send + 'static,
    ) {
        let to = self.fanout.subscribers(uri);
        if !to.is_empty() {
            self.outgoing.push(Delivery::Each(to, Box::new(render)));
        }
    }
}
