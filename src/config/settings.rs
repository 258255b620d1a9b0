//! The validated settings other modules read: `Config` and one struct per `proxy.toml`
//! section, with the section defaults (taken from the key table).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ahp_types::state::TextRange;

use super::keys;
use crate::spec::{DirectorySpec, Launch, NamePrefix};

/// Validated configuration. Paths are absolute (resolved against the config file's folder).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The AHP WebSocket endpoint.
    pub ahp: AhpConfig,
    /// How the wrapped harness is described to AHP clients (`RootState.agents[0]`).
    pub agent: AgentConfig,
    /// The default session that exists from start-up.
    pub session: SessionConfig,
    /// Bounds on queues, logs, frames and connections.
    pub limits: Limits,
    /// How MCP servers are started, restarted and stopped.
    pub supervisor: SupervisorConfig,
    /// The MCP front the harness connects to.
    pub mcp: McpConfig,
    /// What AHP clients may contribute besides tools (`[clients]`).
    pub clients: ClientsConfig,
    /// Which harness tool calls wait for an AHP client's approval (`[approval]`).
    pub approval: crate::approval::Policy,
    /// Which server definitions wait for the user's trust (`[trust]`).
    pub trust: crate::trust::TrustPolicy,
    /// Folders whose sub-folders are plugins, or single plugin folders.
    pub plugin_roots: Vec<PathBuf>,
    /// `plugins.json`, `.mcp.json`, VS Code `mcp.json` or Claude Desktop config files.
    pub manifests: Vec<PathBuf>,
    /// MCP servers declared directly in `proxy.toml`, in name order.
    pub servers: Vec<ServerConfig>,
    /// Watched folders of one kind of customization (`[[directories]]`).
    pub directories: Vec<DirectorySpec>,
    /// Where per-plugin data (`${PLUGIN_DATA}`) lives.
    pub data_dir: PathBuf,
    /// The config file itself, absolute (the `uri` of proxy.toml servers).
    pub path: PathBuf,
    /// Answers to `${input:<id>}` in VS Code manifests, by id (`[inputs]`). Secrets:
    /// `Debug` shows only the ids.
    pub inputs: Inputs,
}

/// `[inputs]`: id → value. `Debug` never prints a value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Inputs(pub std::collections::BTreeMap<String, String>);

impl fmt::Debug for Inputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// `[ahp]`: where AHP clients connect, and who may.
#[derive(Debug, Clone, PartialEq)]
pub struct AhpConfig {
    /// Socket address the WebSocket server binds.
    pub listen: SocketAddr,
    /// The View origin's port, on `listen`'s IP; 0 takes any free port.
    pub views_port: u16,
    /// The token clients must present at the WebSocket upgrade (`AHP_PROXY_TOKEN` in the
    /// environment overrides it). Required to listen on anything but loopback.
    pub token: Option<AccessToken>,
    /// `Origin`s accepted besides loopback ones (`http://localhost:3000`, …); `"*"` accepts
    /// any. Clients that send no `Origin` (not browsers) are not affected.
    pub allowed_origins: Vec<String>,
    /// `Host` header values accepted besides loopback names and the listen address, when
    /// listening on loopback (DNS rebinding protection).
    pub allowed_hosts: Vec<String>,
}

/// A secret shared with AHP clients or MCP harnesses. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(pub String);

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

/// The environment variable that holds the AHP access token (it wins over `ahp.token`).
pub const TOKEN_ENV: &str = "AHP_PROXY_TOKEN";

/// The environment variable that holds the MCP front's access token (it wins over
/// `mcp.token`).
pub const MCP_TOKEN_ENV: &str = "AHP_PROXY_MCP_TOKEN";

/// `[agent]`: the `AgentInfo` describing the wrapped harness.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// `AgentInfo.provider`, also every session's `provider`.
    pub provider: String,
    /// `AgentInfo.displayName`.
    pub display_name: String,
    /// `AgentInfo.description`.
    pub description: String,
}

/// `[session]`: the default session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// Title of the default session.
    pub title: String,
    /// Its `workingDirectories` as configured (`None`: derived from the plugin roots and the
    /// manifests' folders, see [`Config::working_directories`]).
    pub working_directories: Option<Vec<PathBuf>>,
}

/// `[mcp]`: the MCP front (streamable HTTP; stdio is `serve --stdio`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpConfig {
    /// Where `/mcp` and `/mcp/<server>` are served; `None` when `http = false`.
    pub listen: Option<SocketAddr>,
    /// The token every request to `/mcp` and `/mcp/<server>` must present as
    /// `Authorization: Bearer` (`AHP_PROXY_MCP_TOKEN` in the environment overrides it).
    /// Required to listen on anything but loopback.
    pub token: Option<AccessToken>,
    /// When tool and prompt names get their server's prefix in `/mcp`.
    pub prefix: NamePrefix,
    /// Between the server's name and the tool's, e.g. `notes__add_note`.
    pub separator: String,
    /// How long a server may take to answer a forwarded request (its progress resets it).
    pub request_timeout: Duration,
    /// How long a harness's first listing waits for servers that are still starting.
    pub first_list_wait: Duration,
    /// On SIGTERM, how long the harnesses' requests in flight may take to finish.
    pub drain: Duration,
    /// Events queued for the AHP mirror of tool calls (two per call in flight).
    pub mirror_queue: usize,
    /// HTTP sessions (harnesses) at once; more `initialize`s are refused with 503.
    pub max_sessions: usize,
    /// What one client may hold, and all of them together (sessions, listen streams,
    /// subscriptions).
    pub fairness: Fairness,
    /// `Host` header values accepted besides loopback names and the listen address (DNS
    /// rebinding protection).
    pub allowed_hosts: Vec<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            listen: keys::MCP_LISTEN.default.parse().ok(),
            token: None,
            // `keys::MCP_PREFIX.default`; the defaults test holds the two equal.
            prefix: NamePrefix::OnCollision,
            separator: keys::MCP_SEPARATOR.default.into(),
            request_timeout: keys::MCP_REQUEST_TIMEOUT_MS.millis(),
            first_list_wait: keys::MCP_FIRST_LIST_WAIT_MS.millis(),
            drain: keys::MCP_DRAIN_MS.millis(),
            mirror_queue: keys::MCP_MIRROR_QUEUE.count(),
            max_sessions: keys::MCP_MAX_SESSIONS.count(),
            fairness: Fairness::default(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// What one client of the MCP front may hold, and all of them together (`[mcp]`). A client
/// is a peer address together with the `clientInfo.name` it declares (`front::fairness`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fairness {
    /// HTTP sessions one client holds at once; past it, its longest idle one is forgotten.
    pub max_sessions_per_client: usize,
    /// `subscriptions/listen` streams open at once (every client, stdio included).
    pub max_listen_streams: usize,
    /// Listen streams one client holds at once.
    pub max_listen_streams_per_client: usize,
    /// A listen stream that delivered nothing this long is ended (its graceful completion).
    pub listen_idle: Duration,
    /// Resources one listen request, or one legacy session, subscribes to at most.
    pub max_subscriptions: usize,
}

impl Default for Fairness {
    fn default() -> Self {
        Self {
            max_sessions_per_client: keys::MCP_MAX_SESSIONS_PER_CLIENT.count(),
            max_listen_streams: keys::MCP_MAX_LISTEN_STREAMS.count(),
            max_listen_streams_per_client: keys::MCP_MAX_LISTEN_STREAMS_PER_CLIENT.count(),
            listen_idle: keys::MCP_LISTEN_IDLE_MS.millis(),
            max_subscriptions: keys::MCP_MAX_SUBSCRIPTIONS.count(),
        }
    }
}

impl Fairness {
    /// These limits for a listener of `max_connections`: listen streams hold at most half of
    /// its connections, so other requests always find one.
    pub fn within(self, max_connections: usize) -> Self {
        Self {
            max_listen_streams: self.max_listen_streams.min((max_connections / 2).max(1)),
            ..self
        }
    }
}

/// `[clients]`: what the plugins AHP clients publish (`activeClients[].customizations`) may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientsConfig {
    /// Whether client plugins are read and shown in their session at all.
    pub plugins: bool,
    /// Whether the MCP servers inside client plugins are launched; `None`: as the key table
    /// says, only when the AHP listener is loopback-only ([`ClientsConfig::launches_servers`]).
    pub launch_servers: Option<bool>,
}

impl Default for ClientsConfig {
    fn default() -> Self {
        Self {
            plugins: keys::CLIENTS_PLUGINS.default,
            launch_servers: None,
        }
    }
}

impl Config {
    /// The default session's working directories: `[session] working_directories` when
    /// set, else the plugin roots, then the folders of the manifests (each once, in that
    /// order). VS Code lists a host's session in a window whose folders hold one of them.
    pub fn working_directories(&self) -> Vec<PathBuf> {
        if let Some(chosen) = &self.session.working_directories {
            return chosen.clone();
        }
        let folders = (self.plugin_roots.iter().cloned()).chain(
            self.manifests
                .iter()
                .filter_map(|m| m.parent().map(PathBuf::from)),
        );
        let mut out: Vec<PathBuf> = Vec::new();
        for folder in folders {
            if !out.contains(&folder) {
                out.push(folder);
            }
        }
        out
    }
}

impl ClientsConfig {
    /// Whether client plugins' servers are launched when AHP is served on `listen`: as set,
    /// else only on a loopback listener. Launching a client's server runs a command the
    /// client chose; a client on any other listener is only as trusted as the token it holds.
    pub fn launches_servers(&self, listen: SocketAddr) -> bool {
        self.plugins && self.launch_servers.unwrap_or(listen.ip().is_loopback())
    }
}

/// `[supervisor]`: timings of starting, restarting and stopping MCP servers.
#[derive(Debug, Clone, PartialEq)]
pub struct SupervisorConfig {
    /// How long `initialize` + `tools/list` may take before the start is slow (a stdio one
    /// whose process still runs) or counts as failed (an HTTP one).
    pub start_timeout: Duration,
    /// How long a slow stdio start may take in all before it counts as failed.
    pub slow_start_limit: Duration,
    /// Between SIGTERM and SIGKILL when a stdio server is stopped.
    pub stop_grace: Duration,
    /// First restart delay after a failure; doubles per consecutive failure (with jitter).
    pub restart_delay: Duration,
    /// The restart delay never grows past this.
    pub restart_delay_max: Duration,
    /// Consecutive failures after which a server stays in `error` until asked to start.
    pub crash_loop_limit: u32,
    /// Uptime after which a server counts as healthy again (its failure count resets).
    pub healthy_after: Duration,
    /// Put each server in a cgroup (v2) of its own where the machine allows it; `false`
    /// leaves ownership to the marker, the subreaper and the watchdog.
    pub cgroups: bool,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            start_timeout: keys::SUPERVISOR_START_TIMEOUT_MS.millis(),
            slow_start_limit: keys::SUPERVISOR_SLOW_START_LIMIT_MS.millis(),
            stop_grace: keys::SUPERVISOR_STOP_GRACE_MS.millis(),
            restart_delay: keys::SUPERVISOR_RESTART_DELAY_MS.millis(),
            restart_delay_max: keys::SUPERVISOR_RESTART_DELAY_MAX_MS.millis(),
            crash_loop_limit: keys::SUPERVISOR_CRASH_LOOP_LIMIT.count() as u32,
            healthy_after: keys::SUPERVISOR_HEALTHY_AFTER_MS.millis(),
            cgroups: keys::SUPERVISOR_CGROUPS.default,
        }
    }
}

/// `[limits]`: every bound the host enforces.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Largest inbound WebSocket message, in bytes; bigger ones close the connection (1009).
    pub max_frame_bytes: usize,
    /// Outbound frames queued per client; a client that falls this far behind is disconnected.
    pub client_queue: usize,
    /// Bytes of outbound frames queued per client; a client this far behind is disconnected
    /// (one frame of any size always fits in an empty queue).
    pub client_queue_bytes: usize,
    /// Actions kept for `reconnect` replay; older gaps get fresh snapshots instead.
    pub replay_log: usize,
    /// Bytes the replay log may hold (each action kept as its JSON text); the oldest go first.
    pub replay_log_bytes: usize,
    /// Concurrent AHP connections; further ones are refused at the WebSocket upgrade.
    pub max_connections: usize,
    /// Sessions the host keeps at once (the default one included); `createSession` beyond
    /// it is refused.
    pub max_sessions: usize,
    /// How long a disconnected client stays in a session's `activeClients` before removal.
    pub active_client_grace: Duration,
    /// Quiet time after the last file-system event before a rescan.
    pub watch_debounce: Duration,
    /// A connection from which nothing (not even a pong to the host's pings) arrives for
    /// this long is closed (1001).
    pub idle_timeout: Duration,
    /// The WebSocket upgrade, and then `initialize` (or `reconnect`), must each come within
    /// this long of the connection opening.
    pub handshake_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: keys::LIMITS_MAX_FRAME_BYTES.count(),
            client_queue: keys::LIMITS_CLIENT_QUEUE.count(),
            client_queue_bytes: keys::LIMITS_CLIENT_QUEUE_BYTES.count(),
            replay_log: keys::LIMITS_REPLAY_LOG.count(),
            replay_log_bytes: keys::LIMITS_REPLAY_LOG_BYTES.count(),
            max_connections: keys::LIMITS_MAX_CONNECTIONS.count(),
            max_sessions: keys::LIMITS_MAX_SESSIONS.count(),
            active_client_grace: keys::LIMITS_ACTIVE_CLIENT_GRACE_SECS.secs(),
            watch_debounce: keys::LIMITS_WATCH_DEBOUNCE_MS.millis(),
            idle_timeout: keys::LIMITS_IDLE_TIMEOUT_MS.millis(),
            handshake_timeout: keys::LIMITS_HANDSHAKE_TIMEOUT_MS.millis(),
        }
    }
}

/// One MCP server from `[servers.<name>]`. `Debug` never prints the launch spec: it holds secrets.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    /// The table key; unique among top-level servers.
    pub name: String,
    /// Whether the server is started at all.
    pub enabled: bool,
    /// How to reach it.
    pub transport: Launch,
    /// The tools it hides from the harness and pre-approves.
    pub tools: crate::spec::ToolFilters,
    /// Where it was declared, `file:line:col`.
    pub declared_at: String,
    /// Zero-based UTF-16 range of its declaration, from the table name to its last value.
    pub range: TextRange,
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("enabled", &self.enabled)
            .field("transport", &self.transport.kind())
            .field("declared_at", &self.declared_at)
            .finish()
    }
}
