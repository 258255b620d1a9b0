//! The supervisor: one lifecycle task per declared MCP server, reconciled against what
//! discovery declares and what clients ask (toggle, start, stop). Knows nothing of AHP.
//!
//! It reports every transition as a [`ServerEvent`]; the host turns those into
//! `session/mcpServerStateChanged` actions. What clients ask arrives as desired state
//! ([`Requests`] in a `watch`), so a request the host committed is never lost.

mod alerts;
pub mod auth;
mod awaiting;
pub mod connections;
mod era_probes;
mod failure;
pub mod https;
pub mod policy;
#[allow(unsafe_code)]
// pre_exec (parent-death signal, cgroup) and the watchdog's fork; the only other unsafe is heap's mi_collect
pub mod process;
pub mod requests;
mod running;
pub mod server;
mod start;
pub mod stderr;
pub mod stdout;
mod task;
pub mod upstream;

pub use failure::Failure;
pub use requests::{Request, Requests};

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::SupervisorConfig;
use crate::discovery::DeclaredServer;
use crate::spec::{Launch, LaunchError};
use crate::trust::TrustStore;

/// Where a server is in its life, as the supervisor sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Being spawned / connected / initialized. `slow` once a stdio start outlived
    /// `start_timeout` with its process still running: it keeps its chance, up to
    /// `slow_start_limit`, and shows as "starting (slow)".
    Starting {
        /// Past `start_timeout` and still going.
        slow: bool,
    },
    /// Initialized and listed its tools.
    Ready {
        /// How many tools it offered.
        tools: usize,
        /// What it serves, from the capabilities it declared.
        served: Served,
        /// Its `serverInfo.icons`, as it wrote them.
        icons: Option<serde_json::Value>,
    },
    /// An HTTP server answered 401/403.
    AuthRequired {
        /// The server URL without credentials, query or fragment.
        resource: String,
        /// The raw `WWW-Authenticate` challenge, when one came.
        challenge: Option<String>,
        /// Why: no token yet, the token expired or was refused, or more scope is needed.
        reason: AuthReason,
        /// The RFC 9728 protected resource metadata the challenge pointed at, when it could
        /// be fetched (a JSON object with at least `resource`).
        metadata: Option<serde_json::Value>,
    },
    /// Failed: how (its kind is a short machine-readable tag, its text says what happened,
    /// with the exit status and last stderr lines where there are some).
    Error(Failure),
    /// Not running, on purpose.
    Stopped,
}

/// Why a server needs authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthReason {
    /// It has no token.
    Required,
    /// Its token expired (by `expiresIn`) or was refused.
    Expired,
    /// Its token lacks a scope (HTTP 403 `insufficient_scope`).
    InsufficientScope,
}

/// A bearer token for one server, from an AHP client's `authenticate`. Held in memory
/// only; its `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq)]
pub struct Bearer {
    /// The token.
    pub token: String,
    /// When it stops being valid, if the client said.
    pub expires_at: Option<tokio::time::Instant>,
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bearer(redacted, expires_at: {:?})", self.expires_at)
    }
}

/// What a ready server declared it serves, as far as the `mcp://` channel cares: each list
/// with whether it announces changes (`Some(list_changed)`), and logging.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// `tools`, with `listChanged`.
    pub tools: Option<bool>,
    /// `resources`, with `listChanged`.
    pub resources: Option<bool>,
    /// `prompts`, with `listChanged`.
    pub prompts: Option<bool>,
    /// `logging`.
    pub logging: bool,
}

impl Served {
    /// From the capabilities a server declared at `initialize`.
    pub fn of(capabilities: &serde_json::Value) -> Self {
        let list = |name: &str| {
            capabilities
                .get(name)
                .filter(|c| !c.is_null())
                .map(|c| c.get("listChanged").and_then(serde_json::Value::as_bool) == Some(true))
        };
        Self {
            tools: list("tools"),
            resources: list("resources"),
            prompts: list("prompts"),
            logging: capabilities.get("logging").is_some_and(|c| !c.is_null()),
        }
    }
}

/// A transition of server `id`; `status: None` means the server was removed.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerEvent {
    /// The `mcpServer` customization id.
    pub id: String,
    /// Its new status, or `None` once it is gone for good.
    pub status: Option<Status>,
}

/// What one lifecycle task should be doing.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// How to launch it (or why it cannot be launched).
    pub launch: Result<Launch, LaunchError>,
    /// Whether it should be running.
    pub run: bool,
    /// Bumped by every start/stop request: the task answers each with its state.
    pub epoch: u64,
    /// The bearer token an AHP client gave for it (HTTP servers).
    pub bearer: Option<Bearer>,
}

/// What discovery tells the supervisor (what clients ask comes as [`Requests`]).
#[derive(Debug)]
pub enum Command {
    /// The complete set of declared servers (each knows the plugin or directory that
    /// declares it), shared with the catalog.
    Sync {
        /// Every declared server, in catalog order (the first of a duplicated id wins).
        servers: Vec<Arc<DeclaredServer>>,
        /// Those that run only once the user trusted what they would run.
        asks_trust: BTreeSet<String>,
    },
}

pub use awaiting::{Awaiting, AwaitingTrust};

/// The handle: send [`Command`]s, write [`Requests`], then [`Supervisor::shutdown`].
pub struct Supervisor {
    commands: mpsc::Sender<Command>,
    requests: watch::Sender<Requests>,
    awaiting: watch::Receiver<Awaiting>,
    shutdown: CancellationToken,
    owner: JoinHandle<()>,
}

impl Supervisor {
    /// Start the supervisor. Transitions arrive on the returned receiver.
    /// Ready servers' connections are published in `connections`.
    /// A server that asks for trust runs once `trust` holds its fingerprint.
    pub fn spawn(
        config: SupervisorConfig,
        connections: std::sync::Arc<connections::Connections>,
        trust: Arc<TrustStore>,
    ) -> (Self, mpsc::Receiver<ServerEvent>) {
        let (commands, inbox) = mpsc::channel(1024);
        let (awaiting_tx, awaiting) = watch::channel(Awaiting::new());
        let (requests, asked) = watch::channel(Requests::default());
        let (events, outbox) = mpsc::channel(1024);
        let (ended, endings) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let owner = Owner {
            config,
            connections,
            events,
            shutdown: shutdown.clone(),
            servers: HashMap::new(),
            toggles: HashMap::new(),
            ended,
            generation: 0,
            trust,
            asks_trust: BTreeSet::new(),
            awaiting: awaiting_tx,
        };
        let owner = tokio::spawn(owner.run(inbox, endings, asked));
        (
            Self {
                commands,
                requests,
                awaiting,
                shutdown,
                owner,
            },
            outbox,
        )
    }

    /// The servers awaiting the user's trust, kept current.
    pub fn awaiting(&self) -> watch::Receiver<Awaiting> {
        self.awaiting.clone()
    }

    /// A sender for commands (the watcher keeps one).
    pub fn commands(&self) -> mpsc::Sender<Command> {
        self.commands.clone()
    }

    /// Where what clients ask is written (the host keeps it): the supervisor follows the
    /// latest value, however many requests it holds.
    pub fn requests(&self) -> watch::Sender<Requests> {
        self.requests.clone()
    }

    /// Stop every server (reporting `stopped` for each) and wait for them.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        drop(self.commands);
        let _ = self.owner.await;
    }
}

/// One declared server as the owner keeps it: a pointer to its declaration and a few
/// numbers (boxed: what only some servers have), and a task only while it runs (or is being
/// stopped).
struct Entry {
    server: Arc<DeclaredServer>,
    /// The latest explicit start (true) or stop (false) request; cleared by toggles.
    request: Option<bool>,
    epoch: u64,
    bearer: Option<Box<Bearer>>,
    /// Its lifecycle task, while it runs or is being stopped.
    task: Option<Box<Lifecycle>>,
    /// Whether clients were told it is `stopped` since its last task ended (a server
    /// declared disabled is shown `stopped` by discovery already).
    shown_stopped: bool,
}

/// The owner's key for a server: its shared declaration, hashed and compared by id (no copy
/// of the id per server).
struct ById(Arc<DeclaredServer>);

impl std::borrow::Borrow<str> for ById {
    fn borrow(&self) -> &str {
        &self.0.id
    }
}

impl std::hash::Hash for ById {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.as_str().hash(state);
    }
}

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ById {}

/// A running lifecycle task: its desired state, and which one it is (a task that ended
/// says so with its generation, so a newer task is never mistaken for it).
struct Lifecycle {
    desired: watch::Sender<Desired>,
    handle: JoinHandle<()>,
    generation: u64,
}

struct Owner {
    config: SupervisorConfig,
    connections: std::sync::Arc<connections::Connections>,
    events: mpsc::Sender<ServerEvent>,
    shutdown: CancellationToken,
    servers: HashMap<ById, Entry>,
    /// Client enablement decisions by customization id (servers and containers).
    toggles: HashMap<String, bool>,
    /// Where a task that ended on its own (stopped on purpose) says so: `(id, generation)`.
    ended: mpsc::UnboundedSender<(String, u64)>,
    generation: u64,
    /// What the user trusted.
    trust: Arc<TrustStore>,
    /// The servers that run only once trusted.
    asks_trust: BTreeSet<String>,
    /// Those of them that wait now.
    awaiting: watch::Sender<Awaiting>,
}

impl Owner {
    async fn run(
        mut self,
        mut inbox: mpsc::Receiver<Command>,
        mut endings: mpsc::UnboundedReceiver<(String, u64)>,
        mut asked: watch::Receiver<Requests>,
    ) {
        // The number of the last request taken.
        let mut seen = 0;
        let mut trusted = self.trust.changes();
        loop {
            tokio::select! {
                Ok(()) = trusted.changed() => {
                    trusted.mark_unchanged();
                    self.reconcile().await;
                }
                command = inbox.recv() => match command {
                    Some(Command::Sync { servers, asks_trust }) => {
                        self.asks_trust = asks_trust;
                        self.sync(servers).await
                    }
                    None => break,
                },
                Ok(()) = asked.changed() => {
                    let requests = {
                        let now = asked.borrow_and_update();
                        let later = now.since(seen);
                        seen = now.asked();
                        later
                    };
                    for request in requests {
                        self.take(request);
                    }
                    self.reconcile().await;
                }
                Some((id, generation)) = endings.recv() => self.task_ended(&id, generation).await,
                _ = self.shutdown.cancelled() => break,
            }
        }
        // Shutdown: every running task stops its server and reports `stopped`.
        self.shutdown.cancel();
        for (_, entry) in self.servers.drain() {
            if let Some(task) = entry.task {
                let _ = task.handle.await;
            }
        }
    }

    /// Take one client request into the servers' desired states (the caller reconciles).
    fn take(&mut self, request: Request) {
        match request {
            Request::Toggle { id, enabled } => {
                match enabled {
                    Some(value) => self.toggles.insert(id.clone(), value),
                    None => self.toggles.remove(&id),
                };
                for entry in self.servers.values_mut() {
                    if entry.server.id == id || entry.server.container.as_deref() == Some(&*id) {
                        entry.request = None;
                    }
                }
            }
            Request::Run { id, run } => match self.servers.get_mut(id.as_str()) {
                Some(entry) => {
                    entry.request = Some(run);
                    entry.epoch += 1;
                }
                None => {
                    tracing::debug!(server = %id, "start/stop request for an unknown server ignored");
                }
            },
            Request::Authenticate { id, bearer } => {
                if let Some(entry) = self.servers.get_mut(id.as_str()) {
                    entry.bearer = bearer.map(Box::new);
                    // A fresh attempt with the new credentials, whatever happened before.
                    entry.epoch += 1;
                }
            }
        }
    }

    /// A task ended after stopping its server on purpose: forget it, and start a new one if
    /// the server should run again by now.
    async fn task_ended(&mut self, id: &str, generation: u64) {
        if let Some(entry) = self.servers.get_mut(id) {
            if entry.task.as_ref().map(|t| t.generation) == Some(generation) {
                entry.task = None;
                entry.shown_stopped = true;
                self.reconcile().await;
            }
        }
    }

    /// Take the complete set of declared servers: forget the ones that are gone, take the
    /// new declarations (an unchanged one is the same shared pointer: nothing to do).
    async fn sync(&mut self, servers: Vec<Arc<DeclaredServer>>) {
        let mut seen: HashSet<&str> = HashSet::with_capacity(servers.len());
        let declared: Vec<&Arc<DeclaredServer>> = servers
            .iter()
            .filter(|server| seen.insert(server.id.as_str()))
            .collect();
        let connections = self.connections.clone();
        let mut forgotten = Vec::new();
        self.servers.retain(|ById(server), entry| {
            let id = &server.id;
            let keep = seen.contains(id.as_str());
            if !keep {
                tracing::info!(server = %entry.server.name, "server removed; stopping it");
                connections.set_pending(id, false);
                if entry.task.is_none() {
                    forgotten.push(id.clone());
                }
            }
            keep // dropping a running entry drops its sender: the task stops and reports removal
        });
        let mut declarations_changed = !forgotten.is_empty();
        for id in forgotten {
            let _ = self.events.send(ServerEvent { id, status: None }).await;
        }
        for server in declared {
            match self.servers.get_mut(server.id.as_str()) {
                Some(entry) if Arc::ptr_eq(&entry.server, server) => {}
                Some(entry) => {
                    // Any other change of a declaration (its tool filters, its pre-approved
                    // tools) is news for the front too: it judges calls by the latest.
                    declarations_changed = true;
                    entry.server = server.clone();
                    // The key too: it holds the declaration it was made from.
                    if let Some(entry) = self.servers.remove(server.id.as_str()) {
                        self.servers.insert(ById(server.clone()), entry);
                    }
                }
                None => {
                    declarations_changed = true;
                    let entry = Entry {
                        server: server.clone(),
                        request: None,
                        epoch: 0,
                        bearer: None,
                        task: None,
                        shown_stopped: false,
                    };
                    self.servers.insert(ById(server.clone()), entry);
                }
            }
        }
        // Only a change of who is declared (or of a declaration) is news for the front.
        if declarations_changed {
            self.connections
                .set_declared(self.servers.values().map(|e| e.server.clone()).collect());
        }
        self.reconcile().await;
        self.connections.mark_synced();
    }

    fn start_task(&mut self, entry_id: &str, want: Desired) -> Option<Lifecycle> {
        let entry = self.servers.get(entry_id)?;
        self.generation += 1;
        let generation = self.generation;
        let (tx, rx) = watch::channel(want);
        let task = task::Task {
            id: entry.server.id.clone(),
            name: entry.server.name.clone(),
            config: self.config.clone(),
            events: self.events.clone(),
            shutdown: self.shutdown.clone(),
            connections: self.connections.clone(),
            last_challenge: std::sync::Mutex::new(None),
            alerts: Default::default(),
            secrets: Default::default(),
        };
        let span = tracing::info_span!("server", name = %entry.server.name);
        let ended = self.ended.clone();
        let id = entry.server.id.clone();
        let handle = tokio::spawn(tracing::Instrument::instrument(
            async move {
                task.run(rx).await;
                let _ = ended.send((id, generation));
            },
            span,
        ));
        Some(Lifecycle {
            desired: tx,
            handle,
            generation,
        })
    }

    /// Whether `entry` should run: the latest request, else its own toggle (or declaration)
    /// and its container's toggle.
    /// Whether server `entry` should run: trusted, and asked to or enabled.
    fn wants_to_run(&self, entry: &Entry) -> bool {
        self.wanted(entry) && self.trusted(entry)
    }

    /// Whether server `entry` would run if trusted: asked to, or enabled (itself and its
    /// container).
    fn wanted(&self, entry: &Entry) -> bool {
        entry.request.unwrap_or_else(|| {
            let own = self
                .toggles
                .get(&entry.server.id)
                .copied()
                .unwrap_or(entry.server.enabled);
            let container = entry
                .server
                .container
                .as_ref()
                .and_then(|c| self.toggles.get(&**c).copied())
                .unwrap_or(true);
            own && container
        })
    }

    /// Push each server's desired state to its task (only real changes wake a task), start
    /// a task for a server that should run and has none, and tell clients a server without
    /// a task is `stopped` when discovery showed it otherwise.
    async fn reconcile(&mut self) {
        self.publish_awaiting();
        let mut to_start = Vec::new();
        let mut stopped = Vec::new();
        for (ById(declared), entry) in &self.servers {
            let id = &declared.id;
            let run = self.wants_to_run(entry);
            let Some(task) = &entry.task else {
                if run {
                    to_start.push(id.clone());
                } else if !entry.shown_stopped && entry.server.enabled {
                    stopped.push(id.clone());
                }
                continue;
            };
            let want = Desired {
                launch: entry.server.launch.clone(),
                run,
                epoch: entry.epoch,
                bearer: entry.bearer.as_deref().cloned(),
            };
            let connections = &self.connections;
            task.desired.send_if_modified(|current| {
                if *current == want {
                    false
                } else {
                    // Until the task reports how this start went, the front's first
                    // listing waits for it.
                    if want.run {
                        connections.set_pending(&entry.server.id, true);
                    }
                    *current = want;
                    true
                }
            });
        }
        for id in to_start {
            let Some(entry) = self.servers.get(id.as_str()) else {
                continue;
            };
            let want = Desired {
                launch: entry.server.launch.clone(),
                run: true,
                epoch: entry.epoch,
                bearer: entry.bearer.as_deref().cloned(),
            };
            self.connections.set_pending(&id, true);
            let task = self.start_task(&id, want);
            if let Some(entry) = self.servers.get_mut(id.as_str()) {
                entry.task = task.map(Box::new);
                entry.shown_stopped = false;
            }
        }
        for id in stopped {
            if let Some(entry) = self.servers.get_mut(id.as_str()) {
                entry.shown_stopped = true;
            }
            let _ = self
                .events
                .send(ServerEvent {
                    id,
                    status: Some(Status::Stopped),
                })
                .await;
        }
    }
}
