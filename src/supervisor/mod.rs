//! The supervisor: one lifecycle task per declared MCP server, reconciled against what
//! discovery declares and what clients ask (toggle, start, stop). Knows nothing of AHP.
//!
//! It reports every transition as a [`ServerEvent`]; the host turns those into
//! `session/mcpServerStateChanged` actions.

mod alerts;
pub mod auth;
pub mod connections;
mod failure;
pub mod https;
pub mod policy;
#[allow(unsafe_code)] // pre_exec (parent-death signal) and killpg: the only unsafe in the crate
pub mod process;
mod running;
pub mod server;
mod start;
pub mod stderr;
pub mod stdout;
pub mod upstream;

pub use failure::Failure;

use std::collections::{HashMap, HashSet};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::SupervisorConfig;
use crate::discovery::DeclaredServer;
use crate::spec::Launch;

/// Where a server is in its life, as the supervisor sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Being spawned / connected / initialized.
    Starting,
    /// Initialized and listed its tools.
    Ready {
        /// How many tools it offered.
        tools: usize,
        /// What it serves, from the capabilities it declared.
        served: Served,
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
    pub launch: Result<Launch, String>,
    /// Whether it should be running.
    pub run: bool,
    /// Bumped by every start/stop request: the task answers each with its state.
    pub epoch: u64,
    /// The bearer token an AHP client gave for it (HTTP servers).
    pub bearer: Option<Bearer>,
}

/// Requests to the supervisor.
#[derive(Debug)]
pub enum Command {
    /// The complete set of declared servers and, per server id, its container's id.
    Sync {
        /// Every declared server, in catalog order (the first of a duplicated id wins).
        servers: Vec<DeclaredServer>,
        /// Server id → id of the plugin/directory that declares it.
        containers: HashMap<String, String>,
    },
    /// A client's enablement decision for a server or a container (`None`: cleared).
    Toggle {
        /// The customization id.
        id: String,
        /// The effective value, or `None` when the decision was cleared.
        enabled: Option<bool>,
    },
    /// `session/mcpServerStartRequested`.
    Start(String),
    /// `session/mcpServerStopRequested`.
    Stop(String),
    /// `authenticate`: use this token for server `id` (`None` revokes) and reconnect.
    Authenticate {
        /// The server's customization id.
        id: String,
        /// The token, or `None` to drop it.
        bearer: Option<Bearer>,
    },
}

/// The handle: send [`Command`]s, then [`Supervisor::shutdown`].
pub struct Supervisor {
    commands: mpsc::Sender<Command>,
    shutdown: CancellationToken,
    owner: JoinHandle<()>,
}

impl Supervisor {
    /// Start the supervisor. Transitions arrive on the returned receiver.
    /// Ready servers' connections are published in `connections`.
    pub fn spawn(
        config: SupervisorConfig,
        connections: std::sync::Arc<connections::Connections>,
    ) -> (Self, mpsc::Receiver<ServerEvent>) {
        let (commands, inbox) = mpsc::channel(1024);
        let (events, outbox) = mpsc::channel(1024);
        let shutdown = CancellationToken::new();
        let owner = Owner {
            config,
            connections,
            events,
            shutdown: shutdown.clone(),
            servers: HashMap::new(),
            toggles: HashMap::new(),
        };
        let owner = tokio::spawn(owner.run(inbox));
        (
            Self {
                commands,
                shutdown,
                owner,
            },
            outbox,
        )
    }

    /// A sender for commands (the host and the watcher each keep one).
    pub fn commands(&self) -> mpsc::Sender<Command> {
        self.commands.clone()
    }

    /// Stop every server (reporting `stopped` for each) and wait for them.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        drop(self.commands);
        let _ = self.owner.await;
    }
}

struct Entry {
    server: DeclaredServer,
    container: Option<String>,
    /// The latest explicit start (true) or stop (false) request; cleared by toggles.
    request: Option<bool>,
    epoch: u64,
    bearer: Option<Bearer>,
    desired: watch::Sender<Desired>,
    task: JoinHandle<()>,
}

struct Owner {
    config: SupervisorConfig,
    connections: std::sync::Arc<connections::Connections>,
    events: mpsc::Sender<ServerEvent>,
    shutdown: CancellationToken,
    servers: HashMap<String, Entry>,
    /// Client enablement decisions by customization id (servers and containers).
    toggles: HashMap<String, bool>,
}

impl Owner {
    async fn run(mut self, mut inbox: mpsc::Receiver<Command>) {
        loop {
            let command = tokio::select! {
                command = inbox.recv() => command,
                _ = self.shutdown.cancelled() => None,
            };
            let Some(command) = command else { break };
            self.apply(command);
        }
        // Shutdown: every task stops its server and reports `stopped`.
        self.shutdown.cancel();
        for (_, entry) in self.servers.drain() {
            let _ = entry.task.await;
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Sync {
                servers,
                containers,
            } => self.sync(servers, containers),
            Command::Toggle { id, enabled } => {
                match enabled {
                    Some(value) => self.toggles.insert(id.clone(), value),
                    None => self.toggles.remove(&id),
                };
                for entry in self.servers.values_mut() {
                    if entry.server.id == id || entry.container.as_deref() == Some(&id) {
                        entry.request = None;
                    }
                }
                self.reconcile();
            }
            Command::Start(id) | Command::Stop(id) if !self.servers.contains_key(&id) => {
                tracing::debug!(server = %id, "start/stop request for an unknown server ignored");
            }
            Command::Start(id) => self.request(&id, true),
            Command::Stop(id) => self.request(&id, false),
            Command::Authenticate { id, bearer } => {
                if let Some(entry) = self.servers.get_mut(&id) {
                    entry.bearer = bearer;
                    // A fresh attempt with the new credentials, whatever happened before.
                    entry.epoch += 1;
                }
                self.reconcile();
            }
        }
    }

    fn request(&mut self, id: &str, run: bool) {
        if let Some(entry) = self.servers.get_mut(id) {
            entry.request = Some(run);
            entry.epoch += 1;
        }
        self.reconcile();
    }

    fn sync(&mut self, servers: Vec<DeclaredServer>, containers: HashMap<String, String>) {
        let mut seen = HashSet::new();
        let mut declared = Vec::new();
        for server in servers {
            if seen.insert(server.id.clone()) {
                declared.push(server);
            }
        }
        let connections = self.connections.clone();
        self.servers.retain(|id, entry| {
            let keep = seen.contains(id);
            if !keep {
                tracing::info!(server = %entry.server.name, "server removed; stopping it");
                connections.set_pending(id, false);
            }
            keep // dropping the entry drops its sender: the task stops and reports removal
        });
        self.connections.set_declared(
            declared
                .iter()
                .map(|s| (s.id.clone(), s.name.clone()))
                .collect(),
        );
        for server in declared {
            let container = containers.get(&server.id).cloned();
            match self.servers.get_mut(&server.id) {
                Some(entry) => {
                    entry.server = server;
                    entry.container = container;
                }
                None => {
                    let id = server.id.clone();
                    let entry = self.start_task(server, container);
                    self.servers.insert(id, entry);
                }
            }
        }
        self.reconcile();
        self.connections.mark_synced();
    }

    fn start_task(&self, server: DeclaredServer, container: Option<String>) -> Entry {
        let desired = Desired {
            launch: server.launch.clone(),
            run: false,
            epoch: 0,
            bearer: None,
        };
        let (tx, rx) = watch::channel(desired);
        let task = server::Task {
            id: server.id.clone(),
            name: server.name.clone(),
            config: self.config.clone(),
            events: self.events.clone(),
            shutdown: self.shutdown.clone(),
            connections: self.connections.clone(),
            last_challenge: std::sync::Mutex::new(None),
            alerts: Default::default(),
            secrets: Default::default(),
        };
        let span = tracing::info_span!("server", name = %server.name);
        let handle = tokio::spawn(tracing::Instrument::instrument(task.run(rx), span));
        Entry {
            server,
            container,
            request: None,
            epoch: 0,
            bearer: None,
            desired: tx,
            task: handle,
        }
    }

    /// Push each server's desired state to its task (only real changes wake a task).
    fn reconcile(&mut self) {
        for entry in self.servers.values() {
            let run = entry.request.unwrap_or_else(|| {
                let own = self
                    .toggles
                    .get(&entry.server.id)
                    .copied()
                    .unwrap_or(entry.server.enabled);
                let container = entry
                    .container
                    .as_ref()
                    .and_then(|c| self.toggles.get(c).copied())
                    .unwrap_or(true);
                own && container
            });
            let want = Desired {
                launch: entry.server.launch.clone(),
                run,
                epoch: entry.epoch,
                bearer: entry.bearer.clone(),
            };
            let connections = &self.connections;
            entry.desired.send_if_modified(|current| {
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
    }
}
