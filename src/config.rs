//! The `proxy.toml` schema: defaults, validation, and errors that name file:line:col.
//! Parsing is pure (`Config::parse`); `Config::load` only adds reading the file.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use ahp_types::state::{TextPosition, TextRange};

use crate::line_index::LineIndex;
use crate::spec::{ContentKind, DirectorySpec, Launch, NamePrefix, Problem};

/// Default AHP WebSocket address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8765";

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
}

/// `[ahp]`: where AHP clients connect, and who may.
#[derive(Debug, Clone, PartialEq)]
pub struct AhpConfig {
    /// Socket address the WebSocket server binds.
    pub listen: SocketAddr,
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

/// A secret shared with AHP clients. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(pub String);

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

/// The environment variable that holds the AHP access token (it wins over `ahp.token`).
pub const TOKEN_ENV: &str = "AHP_PROXY_TOKEN";

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
}

/// `[mcp]`: the MCP front (streamable HTTP; stdio is `serve --stdio`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpConfig {
    /// Where `/mcp` and `/mcp/<server>` are served; `None` when `http = false`.
    pub listen: Option<SocketAddr>,
    /// When tool and prompt names get their server's prefix in `/mcp`.
    pub prefix: NamePrefix,
    /// Between the server's name and the tool's, e.g. `notes__add_note`.
    pub separator: String,
    /// How long a server may take to answer a forwarded request (its progress resets it).
    pub request_timeout: Duration,
    /// How long a harness's first listing waits for servers that are still starting.
    pub first_list_wait: Duration,
    /// Events queued for the AHP mirror of tool calls (two per call in flight).
    pub mirror_queue: usize,
    /// `Host` header values accepted besides loopback names and the listen address (DNS
    /// rebinding protection).
    pub allowed_hosts: Vec<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_MCP_LISTEN.parse().ok(),
            prefix: NamePrefix::OnCollision,
            separator: "__".into(),
            request_timeout: Duration::from_secs(300),
            first_list_wait: Duration::from_secs(10),
            mirror_queue: 1024,
            allowed_hosts: Vec::new(),
        }
    }
}

/// Default address of the MCP HTTP front.
pub const DEFAULT_MCP_LISTEN: &str = "127.0.0.1:8766";

/// `[supervisor]`: timings of starting, restarting and stopping MCP servers.
#[derive(Debug, Clone, PartialEq)]
pub struct SupervisorConfig {
    /// How long `initialize` + `tools/list` may take before the start counts as failed.
    pub start_timeout: Duration,
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
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            start_timeout: Duration::from_secs(30),
            stop_grace: Duration::from_millis(2000),
            restart_delay: Duration::from_millis(500),
            restart_delay_max: Duration::from_secs(30),
            crash_loop_limit: 5,
            healthy_after: Duration::from_secs(30),
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
    /// Actions kept for `reconnect` replay; older gaps get fresh snapshots instead.
    pub replay_log: usize,
    /// Concurrent AHP connections; further ones are refused at the WebSocket upgrade.
    pub max_connections: usize,
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
            max_frame_bytes: 8 * 1024 * 1024,
            client_queue: 4096,
            replay_log: 4096,
            max_connections: 256,
            active_client_grace: Duration::from_secs(30),
            watch_debounce: Duration::from_millis(50),
            idle_timeout: Duration::from_secs(120),
            handshake_timeout: Duration::from_secs(10),
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

/// Everything wrong with a config file, each problem with its `file:line:col`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// One entry per problem, in file order.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: {}", problem.location, problem.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

// ─── raw (as written) schema ────────────────────────────────────────────────

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    plugin_roots: Vec<Spanned<String>>,
    #[serde(default)]
    manifests: Vec<Spanned<String>>,
    #[serde(default)]
    ahp: RawAhp,
    #[serde(default)]
    agent: RawAgent,
    #[serde(default)]
    session: RawSession,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    supervisor: RawSupervisor,
    #[serde(default)]
    mcp: RawMcp,
    #[serde(default)]
    servers: BTreeMap<Spanned<String>, Spanned<RawServer>>,
    #[serde(default)]
    directories: Vec<Spanned<RawDirectory>>,
    data_dir: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDirectory {
    path: Spanned<String>,
    contents: Spanned<String>,
    name: Option<String>,
    #[serde(default)]
    writable: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAhp {
    listen: Option<Spanned<String>>,
    token: Option<Spanned<String>>,
    allowed_origins: Option<Vec<Spanned<String>>>,
    allowed_hosts: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    provider: Option<Spanned<String>>,
    display_name: Option<String>,
    description: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSession {
    title: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_frame_bytes: Option<Spanned<i64>>,
    client_queue: Option<Spanned<i64>>,
    replay_log: Option<Spanned<i64>>,
    max_connections: Option<Spanned<i64>>,
    active_client_grace_secs: Option<Spanned<i64>>,
    watch_debounce_ms: Option<Spanned<i64>>,
    idle_timeout_ms: Option<Spanned<i64>>,
    handshake_timeout_ms: Option<Spanned<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMcp {
    http: Option<bool>,
    listen: Option<Spanned<String>>,
    prefix: Option<Spanned<String>>,
    separator: Option<Spanned<String>>,
    request_timeout_ms: Option<Spanned<i64>>,
    first_list_wait_ms: Option<Spanned<i64>>,
    mirror_queue: Option<Spanned<i64>>,
    allowed_hosts: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSupervisor {
    start_timeout_ms: Option<Spanned<i64>>,
    stop_grace_ms: Option<Spanned<i64>>,
    restart_delay_ms: Option<Spanned<i64>>,
    restart_delay_max_ms: Option<Spanned<i64>>,
    crash_loop_limit: Option<Spanned<i64>>,
    healthy_after_ms: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    #[serde(rename = "type")]
    kind: Option<Spanned<String>>,
    command: Option<Spanned<String>>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default = "enabled_by_default")]
    enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

// ─── validation ─────────────────────────────────────────────────────────────

/// Collects problems while turning the raw schema into a [`Config`].
struct Checker<'a> {
    file: &'a str,
    text: &'a str,
    index: LineIndex<'a>,
    problems: Vec<Problem>,
}

impl<'a> Checker<'a> {
    fn location(&self, offset: usize) -> String {
        format!("{}:{}", self.file, self.index.position(offset).human())
    }

    fn problem(&mut self, offset: usize, message: impl Into<String>) {
        let location = self.location(offset);
        self.problems.push(Problem {
            location,
            message: message.into(),
        });
    }

    /// A socket address (`IP:PORT`), or `default` when the key is absent; `None` (and a
    /// problem) when it does not parse.
    fn address(
        &mut self,
        key: &str,
        value: Option<Spanned<String>>,
        default: &str,
    ) -> Option<SocketAddr> {
        let Some(value) = value else {
            return default.parse().ok();
        };
        match value.get_ref().parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                self.problem(
                    value.span().start,
                    format!(
                        "{key} = {:?} is not a socket address: expected IP:PORT, e.g. {default:?}",
                        value.get_ref()
                    ),
                );
                None
            }
        }
    }

    /// An integer limit within `min..=max`, or the default.
    fn bounded(
        &mut self,
        key: &str,
        value: Option<Spanned<i64>>,
        min: i64,
        max: i64,
        default: usize,
    ) -> usize {
        let Some(value) = value else { return default };
        let number = *value.get_ref();
        if number < min || number > max {
            self.problem(
                value.span().start,
                format!("{key} = {number} is out of range: expected {min}..={max}"),
            );
            return default;
        }
        usize::try_from(number).unwrap_or(default)
    }
}

impl Config {
    /// Read and validate `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
            problems: vec![Problem {
                location: path.display().to_string(),
                message: format!("cannot read config file: {error}"),
            }],
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base = std::path::absolute(&base).unwrap_or(base);
        Self::parse(&text, &path.display().to_string(), &base)
    }

    /// Validate `text` (the contents of `file`); relative paths are resolved against `base`.
    pub fn parse(text: &str, file: &str, base: &Path) -> Result<Self, ConfigError> {
        let mut checker = Checker {
            file,
            text,
            index: LineIndex::new(text),
            problems: Vec::new(),
        };
        let raw: RawConfig = match toml::from_str(text) {
            Ok(raw) => raw,
            Err(error) => {
                let offset = error.span().map_or(0, |span| span.start);
                checker.problem(offset, error.message().trim().to_string());
                return Err(ConfigError {
                    problems: checker.problems,
                });
            }
        };

        let mcp_listen = checker.address("mcp.listen", raw.mcp.listen, DEFAULT_MCP_LISTEN);
        let mcp_defaults = McpConfig::default();
        let prefix = match raw.mcp.prefix {
            None => mcp_defaults.prefix,
            Some(value) => match value.get_ref().as_str() {
                "on-collision" => NamePrefix::OnCollision,
                "always" => NamePrefix::Always,
                other => {
                    checker.problem(
                        value.span().start,
                        format!("mcp.prefix = {other:?}: expected \"on-collision\" or \"always\""),
                    );
                    mcp_defaults.prefix
                }
            },
        };
        let separator = match raw.mcp.separator {
            None => mcp_defaults.separator.clone(),
            Some(value) => {
                let text = value.get_ref();
                let ok = (1..=8).contains(&text.len())
                    && text
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
                if !ok {
                    checker.problem(
                        value.span().start,
                        format!(
                            "mcp.separator = {text:?}: expected 1 to 8 of A-Z a-z 0-9 _ - . (tool names allow nothing else)"
                        ),
                    );
                    mcp_defaults.separator.clone()
                } else {
                    text.clone()
                }
            }
        };
        let mcp_timeouts = (
            Duration::from_millis(checker.bounded(
                "mcp.request_timeout_ms",
                raw.mcp.request_timeout_ms,
                100,
                86_400_000,
                mcp_defaults.request_timeout.as_millis() as usize,
            ) as u64),
            Duration::from_millis(checker.bounded(
                "mcp.first_list_wait_ms",
                raw.mcp.first_list_wait_ms,
                0,
                600_000,
                mcp_defaults.first_list_wait.as_millis() as usize,
            ) as u64),
        );
        let mcp = McpConfig {
            listen: mcp_listen.filter(|_| raw.mcp.http.unwrap_or(true)),
            prefix,
            separator,
            request_timeout: mcp_timeouts.0,
            first_list_wait: mcp_timeouts.1,
            mirror_queue: checker.bounded(
                "mcp.mirror_queue",
                raw.mcp.mirror_queue,
                2,
                1_000_000,
                mcp_defaults.mirror_queue,
            ),
            allowed_hosts: raw.mcp.allowed_hosts.unwrap_or_default(),
        };
        let listen = checker.address("ahp.listen", raw.ahp.listen, DEFAULT_LISTEN);
        let token = raw.ahp.token.and_then(|token| {
            let value = token.get_ref();
            if value.len() < 16 || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                checker.problem(
                    token.span().start,
                    "ahp.token must be at least 16 characters, without spaces or control characters (prefer the AHP_PROXY_TOKEN environment variable to a token in this file)",
                );
                return None;
            }
            Some(AccessToken(token.into_inner()))
        });
        let mut allowed_origins = Vec::new();
        for origin in raw.ahp.allowed_origins.unwrap_or_default() {
            match crate::ahp::gate::normalize_origin(origin.get_ref()) {
                Some(normal) => allowed_origins.push(normal),
                None => checker.problem(
                    origin.span().start,
                    format!(
                        "ahp.allowed_origins: {:?} is not an origin: expected scheme://host[:port] (no path), or \"*\"",
                        origin.get_ref()
                    ),
                ),
            }
        }

        let provider = match raw.agent.provider {
            None => "ahp-proxy".to_string(),
            Some(provider) => {
                let value = provider.get_ref();
                if value.is_empty() || value.chars().any(char::is_whitespace) {
                    checker.problem(
                        provider.span().start,
                        format!("agent.provider = {value:?} must be non-empty and contain no whitespace"),
                    );
                }
                provider.into_inner()
            }
        };
        let agent = AgentConfig {
            provider,
            display_name: raw
                .agent
                .display_name
                .unwrap_or_else(|| "MCP tools (ahp-proxy)".to_string()),
            description: raw.agent.description.unwrap_or_else(|| {
                "An MCP-only agent harness; ahp-proxy shows its plugins and MCP servers".to_string()
            }),
        };

        let defaults = Limits::default();
        let limits = Limits {
            max_frame_bytes: checker.bounded(
                "limits.max_frame_bytes",
                raw.limits.max_frame_bytes,
                1024,
                256 * 1024 * 1024,
                defaults.max_frame_bytes,
            ),
            client_queue: checker.bounded(
                "limits.client_queue",
                raw.limits.client_queue,
                1,
                1_000_000,
                defaults.client_queue,
            ),
            replay_log: checker.bounded(
                "limits.replay_log",
                raw.limits.replay_log,
                0,
                10_000_000,
                defaults.replay_log,
            ),
            max_connections: checker.bounded(
                "limits.max_connections",
                raw.limits.max_connections,
                1,
                100_000,
                defaults.max_connections,
            ),
            active_client_grace: Duration::from_secs(checker.bounded(
                "limits.active_client_grace_secs",
                raw.limits.active_client_grace_secs,
                0,
                86_400,
                defaults.active_client_grace.as_secs() as usize,
            ) as u64),
            watch_debounce: Duration::from_millis(checker.bounded(
                "limits.watch_debounce_ms",
                raw.limits.watch_debounce_ms,
                0,
                10_000,
                defaults.watch_debounce.as_millis() as usize,
            ) as u64),
            idle_timeout: Duration::from_millis(checker.bounded(
                "limits.idle_timeout_ms",
                raw.limits.idle_timeout_ms,
                100,
                86_400_000,
                defaults.idle_timeout.as_millis() as usize,
            ) as u64),
            handshake_timeout: Duration::from_millis(checker.bounded(
                "limits.handshake_timeout_ms",
                raw.limits.handshake_timeout_ms,
                100,
                600_000,
                defaults.handshake_timeout.as_millis() as usize,
            ) as u64),
        };

        let sv = SupervisorConfig::default();
        let mut millis =
            |key: &str, value: Option<Spanned<i64>>, min: i64, max: i64, default: Duration| {
                Duration::from_millis(checker.bounded(
                    key,
                    value,
                    min,
                    max,
                    default.as_millis() as usize,
                ) as u64)
            };
        let raw_sv = raw.supervisor;
        let supervisor = SupervisorConfig {
            start_timeout: millis(
                "supervisor.start_timeout_ms",
                raw_sv.start_timeout_ms,
                100,
                3_600_000,
                sv.start_timeout,
            ),
            stop_grace: millis(
                "supervisor.stop_grace_ms",
                raw_sv.stop_grace_ms,
                0,
                600_000,
                sv.stop_grace,
            ),
            restart_delay: millis(
                "supervisor.restart_delay_ms",
                raw_sv.restart_delay_ms,
                1,
                3_600_000,
                sv.restart_delay,
            ),
            restart_delay_max: millis(
                "supervisor.restart_delay_max_ms",
                raw_sv.restart_delay_max_ms,
                1,
                86_400_000,
                sv.restart_delay_max,
            ),
            healthy_after: millis(
                "supervisor.healthy_after_ms",
                raw_sv.healthy_after_ms,
                0,
                86_400_000,
                sv.healthy_after,
            ),
            crash_loop_limit: checker.bounded(
                "supervisor.crash_loop_limit",
                raw_sv.crash_loop_limit,
                1,
                1000,
                sv.crash_loop_limit as usize,
            ) as u32,
        };

        let resolve = |p: &str| -> PathBuf {
            let path = Path::new(p);
            if path.is_absolute() {
                normalize(path)
            } else {
                normalize(&base.join(path))
            }
        };
        let mut paths = |key: &str, list: Vec<Spanned<String>>| -> Vec<PathBuf> {
            list.into_iter()
                .filter_map(|entry| {
                    if entry.get_ref().trim().is_empty() {
                        checker.problem(entry.span().start, format!("{key}: empty path"));
                        return None;
                    }
                    Some(resolve(entry.get_ref()))
                })
                .collect()
        };
        let plugin_roots = paths("plugin_roots", raw.plugin_roots);
        let manifests = paths("manifests", raw.manifests);
        let mut directories = Vec::new();
        for entry in raw.directories {
            let at = entry.span().start;
            let raw_dir = entry.into_inner();
            let contents = match raw_dir.contents.get_ref().as_str() {
                "skill" => ContentKind::Skill,
                "command" => ContentKind::Command,
                "agent" => ContentKind::Agent,
                "rule" => ContentKind::Rule,
                "prompt" => ContentKind::Prompt,
                "hook" => ContentKind::Hook,
                other => {
                    checker.problem(
                        raw_dir.contents.span().start,
                        format!("directories.contents = {other:?}: expected skill, command, agent, rule, prompt or hook"),
                    );
                    continue;
                }
            };
            if raw_dir.path.get_ref().trim().is_empty() {
                checker.problem(at, "directories.path: empty path".to_string());
                continue;
            }
            let path = resolve(raw_dir.path.get_ref());
            let name = raw_dir.name.unwrap_or_else(|| {
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| raw_dir.path.get_ref().clone())
            });
            directories.push(DirectorySpec {
                path,
                name,
                contents,
                writable: raw_dir.writable,
            });
        }
        let data_dir = match raw.data_dir {
            Some(dir) => resolve(&dir),
            None => default_data_dir(base),
        };
        let config_path = base.join(Path::new(file).file_name().unwrap_or("proxy.toml".as_ref()));

        let mut servers = Vec::new();
        for (name, server) in raw.servers {
            let at = name.span().start;
            if let Some(config) =
                check_server(&mut checker, name.into_inner(), at, server, &resolve)
            {
                servers.push(config);
            }
        }

        checker
            .problems
            .sort_by_key(|p| location_order(&p.location));
        match (checker.problems.is_empty(), listen) {
            (true, Some(listen)) => Ok(Config {
                ahp: AhpConfig {
                    listen,
                    token,
                    allowed_origins,
                    allowed_hosts: raw.ahp.allowed_hosts.unwrap_or_default(),
                },
                agent,
                session: SessionConfig {
                    title: raw.session.title.unwrap_or_else(|| "Workspace".to_string()),
                },
                limits,
                supervisor,
                mcp,
                plugin_roots,
                manifests,
                servers,
                directories,
                data_dir,
                path: config_path,
            }),
            _ => Err(ConfigError {
                problems: checker.problems,
            }),
        }
    }
}

/// `a/./b/../c` → `a/c` without touching the disk (`..` never climbs above the root), so
/// the same folder always has the same path, URI and id.
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Where a server's declaration ends. toml spans a `[servers.x]` table as just its header,
/// so for that form the table runs to the last key line before the next header.
fn table_end(text: &str, span: std::ops::Range<usize>) -> usize {
    if !text.get(span.clone()).is_some_and(|t| t.starts_with('[')) {
        return span.end;
    }
    let line_start = text[..span.end].rfind('\n').map_or(0, |i| i + 1);
    let mut end = span.end;
    let mut pos = line_start;
    for (n, line) in text[line_start..].split_inclusive('\n').enumerate() {
        let trimmed = line.trim();
        if n > 0 && trimmed.starts_with('[') {
            break;
        }
        if n > 0 && !trimmed.is_empty() && !trimmed.starts_with('#') {
            end = pos + line.trim_end().len();
        }
        pos += line.len();
    }
    end
}

/// `$XDG_DATA_HOME/ahp-proxy`, else `~/.local/share/ahp-proxy`, else `<config dir>/.ahp-proxy`.
fn default_data_dir(base: &Path) -> PathBuf {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(xdg) = non_empty("XDG_DATA_HOME") {
        return PathBuf::from(xdg).join("ahp-proxy");
    }
    if let Some(home) = non_empty("HOME") {
        return PathBuf::from(home).join(".local/share/ahp-proxy");
    }
    base.join(".ahp-proxy")
}

/// Sort key for `file:line:col` so problems come out in file order.
fn location_order(location: &str) -> (u64, u64) {
    let mut parts = location.rsplit(':');
    let col = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let line = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    (line, col)
}

fn check_server(
    checker: &mut Checker<'_>,
    name: String,
    name_at: usize,
    server: Spanned<RawServer>,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> Option<ServerConfig> {
    let before = checker.problems.len();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        checker.problem(
            name_at,
            format!(
                "servers.{name:?}: a server name may only use letters, digits, '-', '_' and '.'"
            ),
        );
    }
    let declared_at = checker.location(name_at);
    let range = {
        let point = |offset: usize| {
            let p = checker.index.position(offset);
            TextPosition {
                line: i64::from(p.line),
                character: i64::from(p.column_utf16),
            }
        };
        TextRange {
            start: point(name_at),
            end: point(table_end(checker.text, server.span())),
        }
    };
    let at = server.span().start;
    let raw = server.into_inner();
    let kind = match &raw.kind {
        None => None,
        Some(kind) => match kind.get_ref().as_str() {
            "stdio" | "http" | "sse" => Some(kind.get_ref().clone()),
            other => {
                checker.problem(
                    kind.span().start,
                    format!(
                        "servers.{name}.type = {other:?} is not a server type: expected \"stdio\", \"http\" or \"sse\""
                    ),
                );
                None
            }
        },
    };
    let transport = match (raw.command, raw.url) {
        (Some(_), Some(url)) => {
            checker.problem(
                url.span().start,
                format!("servers.{name}: set either `command` (stdio) or `url` (http), not both"),
            );
            None
        }
        (None, None) => {
            checker.problem(
                at,
                format!("servers.{name}: missing `command` (for a stdio server) or `url` (for an http server)"),
            );
            None
        }
        (Some(command), None) => {
            if matches!(kind.as_deref(), Some("http" | "sse")) {
                checker.problem(
                    command.span().start,
                    format!(
                        "servers.{name}: a {} server takes `url`, not `command`",
                        kind.as_deref().unwrap_or("")
                    ),
                );
            }
            if command.get_ref().trim().is_empty() {
                checker.problem(
                    command.span().start,
                    format!("servers.{name}.command is empty"),
                );
            }
            if !raw.headers.is_empty() {
                checker.problem(
                    at,
                    format!("servers.{name}: `headers` only apply to http servers"),
                );
            }
            Some(Launch::Stdio {
                command: command.into_inner(),
                args: raw.args,
                env: raw.env,
                cwd: raw.cwd.as_deref().map(resolve),
            })
        }
        (None, Some(url)) => {
            if kind.as_deref() == Some("stdio") {
                checker.problem(
                    url.span().start,
                    format!("servers.{name}: a stdio server takes `command`, not `url`"),
                );
            }
            let value = url.get_ref();
            if !(value.starts_with("http://") || value.starts_with("https://")) {
                checker.problem(
                    url.span().start,
                    format!("servers.{name}.url = {value:?} must start with http:// or https://"),
                );
            }
            if !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
                checker.problem(
                    at,
                    format!("servers.{name}: `args`, `env` and `cwd` only apply to stdio servers"),
                );
            }
            Some(Launch::Http {
                url: url.into_inner(),
                headers: raw.headers,
                sse: kind.as_deref() == Some("sse"),
            })
        }
    };
    if checker.problems.len() > before {
        return None;
    }
    Some(ServerConfig {
        name,
        enabled: raw.enabled,
        transport: transport?,
        declared_at,
        range,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "proxy.toml", Path::new("/base"))
    }

    fn error(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("expected an error for {text:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn empty_file_gives_defaults() {
        let config = parse("").expect("empty config is valid");
        assert_eq!(config.ahp.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(config.agent.provider, "ahp-proxy");
        assert_eq!(config.session.title, "Workspace");
        assert_eq!(config.limits, Limits::default());
        assert!(config.servers.is_empty());
    }

    #[test]
    fn unknown_top_level_key_names_key_line_and_column() {
        let message = error("\n\nlisten = \"x\"\n");
        assert!(message.starts_with("proxy.toml:3:1: "), "{message}");
        assert!(message.contains("unknown field `listen`"), "{message}");
    }

    #[test]
    fn unknown_nested_key_points_at_the_key() {
        let message = error("[ahp]\nlisten = \"127.0.0.1:1\"\n  lisen = 3\n");
        assert!(message.starts_with("proxy.toml:3:3: "), "{message}");
        assert!(message.contains("unknown field `lisen`"), "{message}");
    }

    #[test]
    fn endpoint_security_keys_are_checked_and_the_token_never_printed() {
        let config = parse(
            "[ahp]\ntoken = \"0123456789abcdef\"\nallowed_origins = [\"HTTPS://App.Example/\", \"*\"]\nallowed_hosts = [\"ahp.lan\"]\n[limits]\nidle_timeout_ms = 5000\nhandshake_timeout_ms = 700\n",
        )
        .unwrap();
        assert_eq!(config.ahp.allowed_origins, ["https://app.example", "*"]);
        assert_eq!(config.ahp.allowed_hosts, ["ahp.lan"]);
        assert_eq!(config.limits.idle_timeout, Duration::from_secs(5));
        assert_eq!(config.limits.handshake_timeout, Duration::from_millis(700));
        assert!(!format!("{config:?}").contains("0123456789abcdef"));
        let message = error("[ahp]\ntoken = \"short\"\nallowed_origins = [\"example.com\"]\n");
        assert!(
            message.contains("proxy.toml:2:9: ahp.token must be at least 16"),
            "{message}"
        );
        assert!(
            message.contains("proxy.toml:3:20: ahp.allowed_origins: \"example.com\""),
            "{message}"
        );
        assert!(error("[limits]\nidle_timeout_ms = 10\n").contains("limits.idle_timeout_ms"));
    }

    #[test]
    fn bad_listen_address_points_at_the_value() {
        let message = error("[ahp]\nlisten = \"localhost\"\n");
        assert!(message.starts_with("proxy.toml:2:10: "), "{message}");
        assert!(message.contains("ahp.listen"), "{message}");
    }

    #[test]
    fn wrong_value_type_is_reported_with_position() {
        let message = error("[limits]\nclient_queue = \"many\"\n");
        assert!(message.starts_with("proxy.toml:2:16: "), "{message}");
    }

    #[test]
    fn out_of_range_limit_names_the_key_and_range() {
        let message = error("[limits]\nclient_queue = 0\n");
        assert!(message.starts_with("proxy.toml:2:16: "), "{message}");
        assert!(
            message.contains("limits.client_queue = 0 is out of range"),
            "{message}"
        );
    }

    #[test]
    fn the_mcp_front_is_configurable_and_checked() {
        let config = parse(
            "[mcp]\nlisten = \"127.0.0.1:9000\"\nprefix = \"always\"\nseparator = \".\"\nrequest_timeout_ms = 1000\nallowed_hosts = [\"mcp.lan\"]\n",
        )
        .expect("valid");
        assert_eq!(config.mcp.listen.map(|a| a.port()), Some(9000));
        assert_eq!(config.mcp.prefix, NamePrefix::Always);
        assert_eq!(config.mcp.separator, ".");
        assert_eq!(config.mcp.request_timeout, Duration::from_secs(1));
        assert_eq!(config.mcp.allowed_hosts, ["mcp.lan"]);
        assert_eq!(parse("[mcp]\nhttp = false\n").unwrap().mcp.listen, None);
        let message = error("[mcp]\nprefix = \"sometimes\"\nseparator = \"::\"\n");
        assert!(
            message.starts_with("proxy.toml:2:10: mcp.prefix"),
            "{message}"
        );
        assert!(
            message.contains("proxy.toml:3:13: mcp.separator"),
            "{message}"
        );
    }

    #[test]
    fn every_problem_is_reported_in_file_order() {
        let message =
            error("[limits]\nclient_queue = 0\nreplay_log = -1\n[ahp]\nlisten = \"nope\"\n");
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines.len(), 3, "{message}");
        assert!(lines[0].starts_with("proxy.toml:2:"));
        assert!(lines[1].starts_with("proxy.toml:3:"));
        assert!(lines[2].starts_with("proxy.toml:5:"));
    }

    #[test]
    fn servers_are_validated_and_paths_resolved() {
        let config = parse(
            "plugin_roots = [\"plugins\"]\n[servers.echo]\ncommand = \"echo-server\"\nargs = [\"--fast\"]\ncwd = \"work\"\n[servers.remote]\nurl = \"https://example.com/mcp\"\nenabled = false\n",
        )
        .expect("valid");
        assert_eq!(config.plugin_roots, vec![PathBuf::from("/base/plugins")]);
        let odd = parse("plugin_roots = [\"./a/../b/.\", \"../up\"]\n").expect("valid");
        assert_eq!(
            odd.plugin_roots,
            [PathBuf::from("/base/b"), PathBuf::from("/up")]
        );
        assert_eq!(config.servers.len(), 2);
        assert_eq!(config.servers[0].name, "echo");
        assert_eq!(config.servers[0].declared_at, "proxy.toml:2:10");
        match &config.servers[0].transport {
            Launch::Stdio { cwd, args, .. } => {
                assert_eq!(cwd.as_deref(), Some(Path::new("/base/work")));
                assert_eq!(args, &["--fast"]);
            }
            other => panic!("expected stdio, got {}", other.kind()),
        }
        assert!(!config.servers[1].enabled);
        assert_eq!(config.servers[1].transport.kind(), "http");
    }

    #[test]
    fn server_ranges_cover_the_whole_table() {
        let text = "[servers.a]\ncommand = \"x\"\nargs = [\"y\"]  # note\n\n# comment\n[servers.b]\nurl = \"http://h\"\n";
        let config = parse(text).expect("valid");
        let a = &config.servers[0].range;
        assert_eq!((a.start.line, a.start.character), (0, 9));
        assert_eq!((a.end.line, a.end.character), (2, 20));
        let b = &config.servers[1].range;
        assert_eq!((b.start.line, b.end.line, b.end.character), (5, 6, 16));
        let inline = parse("[servers]\nc = { command = \"x\" }\n").expect("valid");
        let c = &inline.servers[0].range;
        assert_eq!(
            (c.start.line, c.start.character, c.end.line, c.end.character),
            (1, 0, 1, 21)
        );
    }

    #[test]
    fn server_needs_exactly_one_of_command_and_url() {
        assert!(error("[servers.a]\nargs = []\n").contains("missing `command`"));
        assert!(error("[servers.a]\ncommand = \"x\"\nurl = \"http://x\"\n").contains("not both"));
        assert!(error("[servers.a]\nurl = \"ftp://x\"\n").contains("must start with http"));
        assert!(
            error("[servers.a]\ntype = \"carrier-pigeon\"\ncommand = \"x\"\n")
                .contains("not a server type")
        );
    }

    #[test]
    fn server_debug_output_hides_the_launch_spec() {
        let config =
            parse("[servers.a]\ncommand = \"secret-binary\"\nenv = { TOKEN = \"hunter2\" }\n")
                .expect("valid");
        let debug = format!("{:?}", config.servers[0]);
        assert!(!debug.contains("secret-binary"), "{debug}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("stdio"), "{debug}");
    }

    #[test]
    fn bundled_proxy_toml_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("proxy.toml");
        Config::load(&path).expect("the bundled proxy.toml must stay valid");
    }
}
