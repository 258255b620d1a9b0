//! `proxy.toml` as written: serde types mirroring the file, unknown keys refused, spans kept
//! so that problems can name `file:line:col`. Validation turns these into the settings.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::keys;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub plugin_roots: Vec<Spanned<String>>,
    #[serde(default)]
    pub manifests: Vec<Spanned<String>>,
    #[serde(default)]
    pub ahp: RawAhp,
    #[serde(default)]
    pub agent: RawAgent,
    #[serde(default)]
    pub session: RawSession,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub supervisor: RawSupervisor,
    #[serde(default)]
    pub mcp: RawMcp,
    #[serde(default)]
    pub clients: RawClients,
    #[serde(default)]
    pub approval: RawApproval,
    #[serde(default)]
    pub trust: RawTrust,
    #[serde(default)]
    pub servers: BTreeMap<Spanned<String>, Spanned<RawServer>>,
    #[serde(default)]
    pub directories: Vec<Spanned<RawDirectory>>,
    pub data_dir: Option<String>,
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDirectory {
    pub path: Spanned<String>,
    pub contents: Spanned<String>,
    pub name: Option<String>,
    #[serde(default = "writable_by_default")]
    pub writable: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAhp {
    pub listen: Option<Spanned<String>>,
    pub views_port: Option<Spanned<i64>>,
    pub token: Option<Spanned<String>>,
    pub allowed_origins: Option<Vec<Spanned<String>>>,
    pub allowed_hosts: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgent {
    pub provider: Option<Spanned<String>>,
    pub display_name: Option<String>,
    pub description: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSession {
    pub title: Option<String>,
    pub working_directories: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub max_frame_bytes: Option<Spanned<i64>>,
    pub client_queue: Option<Spanned<i64>>,
    pub client_queue_bytes: Option<Spanned<i64>>,
    pub replay_log: Option<Spanned<i64>>,
    pub replay_log_bytes: Option<Spanned<i64>>,
    pub max_connections: Option<Spanned<i64>>,
    pub max_sessions: Option<Spanned<i64>>,
    pub active_client_grace_secs: Option<Spanned<i64>>,
    pub watch_debounce_ms: Option<Spanned<i64>>,
    pub idle_timeout_ms: Option<Spanned<i64>>,
    pub handshake_timeout_ms: Option<Spanned<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    pub http: Option<bool>,
    pub listen: Option<Spanned<String>>,
    pub token: Option<Spanned<String>>,
    pub prefix: Option<Spanned<String>>,
    pub separator: Option<Spanned<String>>,
    pub request_timeout_ms: Option<Spanned<i64>>,
    pub first_list_wait_ms: Option<Spanned<i64>>,
    pub drain_ms: Option<Spanned<i64>>,
    pub mirror_queue: Option<Spanned<i64>>,
    pub max_sessions: Option<Spanned<i64>>,
    pub max_sessions_per_client: Option<Spanned<i64>>,
    pub max_listen_streams: Option<Spanned<i64>>,
    pub max_listen_streams_per_client: Option<Spanned<i64>>,
    pub listen_idle_ms: Option<Spanned<i64>>,
    pub max_subscriptions: Option<Spanned<i64>>,
    pub allowed_hosts: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSupervisor {
    pub start_timeout_ms: Option<Spanned<i64>>,
    pub slow_start_limit_ms: Option<Spanned<i64>>,
    pub stop_grace_ms: Option<Spanned<i64>>,
    pub restart_delay_ms: Option<Spanned<i64>>,
    pub restart_delay_max_ms: Option<Spanned<i64>>,
    pub crash_loop_limit: Option<Spanned<i64>>,
    pub healthy_after_ms: Option<Spanned<i64>>,
    pub cgroups: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClients {
    pub plugins: Option<bool>,
    pub launch_servers: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrust {
    pub manifests: Option<Spanned<String>>,
    pub plugins: Option<Spanned<String>>,
    pub directories: Option<Spanned<String>>,
    pub client_plugins: Option<Spanned<String>>,
    #[serde(default)]
    pub folders: Vec<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApproval {
    pub mode: Option<Spanned<String>>,
    pub timeout_ms: Option<Spanned<i64>>,
    pub on_timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub servers: BTreeMap<String, RawApprovalServer>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApprovalServer {
    pub mode: Option<Spanned<String>>,
    #[serde(default)]
    pub tools: BTreeMap<String, RawApprovalTool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApprovalTool {
    pub mode: Option<Spanned<String>>,
    #[serde(default)]
    pub review_result: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    #[serde(rename = "type")]
    pub kind: Option<Spanned<String>>,
    pub command: Option<Spanned<String>>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<Spanned<String>>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    #[serde(default, rename = "disabledTools")]
    pub disabled_tools: Vec<String>,
    #[serde(rename = "includeTools")]
    pub include_tools: Option<Vec<String>>,
    #[serde(default, rename = "excludeTools")]
    pub exclude_tools: Vec<String>,
    #[serde(default, rename = "alwaysAllow")]
    pub always_allow: Vec<String>,
    #[serde(default, rename = "autoApprove")]
    pub auto_approve: Vec<String>,
}

fn enabled_by_default() -> bool {
    keys::SERVER_ENABLED.default
}

fn writable_by_default() -> bool {
    keys::DIRECTORY_WRITABLE.default
}
