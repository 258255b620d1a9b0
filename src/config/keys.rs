//! The one table of `proxy.toml` keys: each key's dotted name, its default and, for numbers,
//! its bounds. The parser and the section defaults read these; tests hold
//! docs/configuration.md and proxy.toml to them.

use std::time::Duration;

/// A whole-number key: its default and the inclusive range it must fall in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Number {
    /// Dotted name as errors print it, e.g. `limits.client_queue`.
    pub name: &'static str,
    /// The value when the key is absent.
    pub default: i64,
    /// Smallest accepted value.
    pub min: i64,
    /// Largest accepted value.
    pub max: i64,
}

impl Number {
    /// The default as a count.
    pub const fn count(&self) -> usize {
        self.default as usize
    }

    /// The default of a `_ms` key.
    pub const fn millis(&self) -> Duration {
        Duration::from_millis(self.default as u64)
    }

    /// The default of a `_secs` key.
    pub const fn secs(&self) -> Duration {
        Duration::from_secs(self.default as u64)
    }
}

/// A string key and its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Text {
    /// Dotted name as errors print it, e.g. `ahp.listen`.
    pub name: &'static str,
    /// The value when the key is absent.
    pub default: &'static str,
}

/// A boolean key and its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    /// Dotted name, e.g. `mcp.http`.
    pub name: &'static str,
    /// The value when the key is absent.
    pub default: bool,
}

/// A key whose default is not one literal (an empty list, a computed path, required): the
/// default is how docs/configuration.md words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Other {
    /// Dotted name, e.g. `ahp.allowed_hosts`.
    pub name: &'static str,
    /// docs/configuration.md's wording of the default.
    pub default: &'static str,
}

const fn number(name: &'static str, default: i64, min: i64, max: i64) -> Number {
    Number {
        name,
        default,
        min,
        max,
    }
}

const fn text(name: &'static str, default: &'static str) -> Text {
    Text { name, default }
}

// ─── top level ──────────────────────────────────────────────────────────────

pub const PLUGIN_ROOTS: Other = Other {
    name: "plugin_roots",
    default: "`[]`",
};
pub const MANIFESTS: Other = Other {
    name: "manifests",
    default: "`[]`",
};

// ─── [[directories]] ────────────────────────────────────────────────────────

pub const DIRECTORY_PATH: Other = Other {
    name: "directories.path",
    default: "required",
};
pub const DIRECTORY_CONTENTS: Other = Other {
    name: "directories.contents",
    default: "required",
};
pub const DIRECTORY_WRITABLE: Flag = Flag {
    name: "directories.writable",
    default: false,
};

// ─── [ahp] ──────────────────────────────────────────────────────────────────

pub const AHP_LISTEN: Text = text("ahp.listen", "127.0.0.1:8765");
pub const AHP_VIEWS_PORT: Number = number("ahp.views_port", 0, 0, 65535);
pub const AHP_TOKEN: Other = Other {
    name: "ahp.token",
    default: "none",
};
pub const AHP_ALLOWED_ORIGINS: Other = Other {
    name: "ahp.allowed_origins",
    default: "`[]`",
};

// ─── [mcp] ──────────────────────────────────────────────────────────────────

pub const MCP_HTTP: Flag = Flag {
    name: "mcp.http",
    default: true,
};
pub const MCP_LISTEN: Text = text("mcp.listen", "127.0.0.1:8766");
pub const MCP_TOKEN: Other = Other {
    name: "mcp.token",
    default: "none",
};
pub const MCP_PREFIX: Text = text("mcp.prefix", "on-collision");
pub const MCP_SEPARATOR: Text = text("mcp.separator", "__");
pub const MCP_REQUEST_TIMEOUT_MS: Number =
    number("mcp.request_timeout_ms", 300_000, 100, 86_400_000);
/// Below the ~5.6 s Claude Code gives a server's first `tools/list` (issue 46).
pub const MCP_FIRST_LIST_WAIT_MS: Number = number("mcp.first_list_wait_ms", 4_000, 0, 600_000);
/// Within Kubernetes' default 30 s grace, with time left to stop the servers.
pub const MCP_DRAIN_MS: Number = number("mcp.drain_ms", 20_000, 0, 600_000);
pub const MCP_MIRROR_QUEUE: Number = number("mcp.mirror_queue", 1024, 2, 1_000_000);
pub const MCP_MAX_SESSIONS: Number = number("mcp.max_sessions", 1000, 1, 1_000_000);
pub const MCP_MAX_SESSIONS_PER_CLIENT: Number =
    number("mcp.max_sessions_per_client", 250, 1, 1_000_000);
pub const MCP_MAX_LISTEN_STREAMS: Number = number("mcp.max_listen_streams", 128, 1, 100_000);
pub const MCP_MAX_LISTEN_STREAMS_PER_CLIENT: Number =
    number("mcp.max_listen_streams_per_client", 32, 1, 100_000);
pub const MCP_LISTEN_IDLE_MS: Number = number("mcp.listen_idle_ms", 1_800_000, 100, 86_400_000);
pub const MCP_MAX_SUBSCRIPTIONS: Number = number("mcp.max_subscriptions", 256, 1, 100_000);

// ─── [agent], [session] ─────────────────────────────────────────────────────

pub const AGENT_PROVIDER: Text = text("agent.provider", "ahp-proxy");
pub const AGENT_DISPLAY_NAME: Text = text("agent.display_name", "MCP tools (ahp-proxy)");
pub const AGENT_DESCRIPTION: Text = text(
    "agent.description",
    "An MCP-only agent harness; ahp-proxy shows its plugins and MCP servers",
);
pub const SESSION_TITLE: Text = text("session.title", "MCP harness (ahp-proxy)");
pub const SESSION_WORKING_DIRECTORIES: Other = Other {
    name: "session.working_directories",
    default: "the plugin roots, then the manifests' folders",
};

// ─── [limits] ───────────────────────────────────────────────────────────────

pub const LIMITS_MAX_FRAME_BYTES: Number = number(
    "limits.max_frame_bytes",
    8 * 1024 * 1024,
    1024,
    256 * 1024 * 1024,
);
pub const LIMITS_CLIENT_QUEUE: Number = number("limits.client_queue", 4096, 1, 1_000_000);
pub const LIMITS_CLIENT_QUEUE_BYTES: Number = number(
    "limits.client_queue_bytes",
    64 * 1024 * 1024,
    64 * 1024,
    4 * 1024 * 1024 * 1024,
);
pub const LIMITS_REPLAY_LOG: Number = number("limits.replay_log", 4096, 0, 10_000_000);
pub const LIMITS_REPLAY_LOG_BYTES: Number = number(
    "limits.replay_log_bytes",
    16 * 1024 * 1024,
    0,
    4 * 1024 * 1024 * 1024,
);
pub const LIMITS_MAX_CONNECTIONS: Number = number("limits.max_connections", 256, 1, 100_000);
pub const LIMITS_MAX_SESSIONS: Number = number("limits.max_sessions", 100, 1, 100_000);
pub const LIMITS_ACTIVE_CLIENT_GRACE_SECS: Number =
    number("limits.active_client_grace_secs", 30, 0, 86_400);
pub const LIMITS_WATCH_DEBOUNCE_MS: Number = number("limits.watch_debounce_ms", 50, 0, 10_000);
pub const LIMITS_IDLE_TIMEOUT_MS: Number =
    number("limits.idle_timeout_ms", 120_000, 100, 86_400_000);
pub const LIMITS_HANDSHAKE_TIMEOUT_MS: Number =
    number("limits.handshake_timeout_ms", 10_000, 100, 600_000);

// ─── [supervisor] ───────────────────────────────────────────────────────────

pub const SUPERVISOR_START_TIMEOUT_MS: Number =
    number("supervisor.start_timeout_ms", 30_000, 100, 3_600_000);
pub const SUPERVISOR_SLOW_START_LIMIT_MS: Number =
    number("supervisor.slow_start_limit_ms", 600_000, 100, 86_400_000);
pub const SUPERVISOR_STOP_GRACE_MS: Number = number("supervisor.stop_grace_ms", 2000, 0, 600_000);
pub const SUPERVISOR_RESTART_DELAY_MS: Number =
    number("supervisor.restart_delay_ms", 500, 1, 3_600_000);
pub const SUPERVISOR_RESTART_DELAY_MAX_MS: Number =
    number("supervisor.restart_delay_max_ms", 30_000, 1, 86_400_000);
pub const SUPERVISOR_CRASH_LOOP_LIMIT: Number = number("supervisor.crash_loop_limit", 5, 1, 1000);
pub const SUPERVISOR_HEALTHY_AFTER_MS: Number =
    number("supervisor.healthy_after_ms", 30_000, 0, 86_400_000);
pub const SUPERVISOR_CGROUPS: Flag = Flag {
    name: "supervisor.cgroups",
    default: true,
};

// ─── [clients] ──────────────────────────────────────────────────────────────

pub const CLIENTS_PLUGINS: Flag = Flag {
    name: "clients.plugins",
    default: true,
};

// ─── [approval] ─────────────────────────────────────────────────────────────

pub const APPROVAL_MODE: Text = text("approval.mode", "never");
pub const APPROVAL_TIMEOUT_MS: Number = number("approval.timeout_ms", 300_000, 1_000, 86_400_000);
pub const APPROVAL_ON_TIMEOUT: Text = text("approval.on_timeout", "deny");

// ─── [trust] ───────────────────────────────────────────────────────────────
pub const TRUST_MANIFESTS: Text = text("trust.manifests", "ask");
pub const TRUST_PLUGINS: Text = text("trust.plugins", "ask");
pub const TRUST_DIRECTORIES: Text = text("trust.directories", "ask");
pub const TRUST_CLIENT_PLUGINS: Text = text("trust.client_plugins", "ask");

// ─── [servers.<name>] ───────────────────────────────────────────────────────

pub const SERVER_ENABLED: Flag = Flag {
    name: "servers.<name>.enabled",
    default: true,
};

/// One row of the table, whatever its kind.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub enum Key {
    Number(Number),
    Text(Text),
    Flag(Flag),
    Other(Other),
}

/// Every key, in docs/configuration.md's order: the constants above (the ones the parser
/// reads a default, bound or name from) and, inline, the keys whose default is structural (an
/// empty list or table, a path worked out at start-up, required), which only the
/// documentation needs.
#[cfg(test)]
pub const ALL: &[Key] = &[
    Key::Other(PLUGIN_ROOTS),
    Key::Other(MANIFESTS),
    Key::Other(Other {
        name: "data_dir",
        default: "`$XDG_DATA_HOME/ahp-proxy`, else `~/.local/share/ahp-proxy`",
    }),
    Key::Other(Other {
        name: "inputs",
        default: "`{}`",
    }),
    Key::Other(DIRECTORY_PATH),
    Key::Other(DIRECTORY_CONTENTS),
    Key::Other(Other {
        name: "directories.name",
        default: "the folder's name",
    }),
    Key::Flag(DIRECTORY_WRITABLE),
    Key::Text(AHP_LISTEN),
    Key::Number(AHP_VIEWS_PORT),
    Key::Other(AHP_TOKEN),
    Key::Other(AHP_ALLOWED_ORIGINS),
    Key::Other(Other {
        name: "ahp.allowed_hosts",
        default: "`[]`",
    }),
    Key::Flag(MCP_HTTP),
    Key::Text(MCP_LISTEN),
    Key::Other(MCP_TOKEN),
    Key::Other(Other {
        name: "mcp.allowed_hosts",
        default: "`[]`",
    }),
    Key::Text(MCP_PREFIX),
    Key::Text(MCP_SEPARATOR),
    Key::Number(MCP_REQUEST_TIMEOUT_MS),
    Key::Number(MCP_FIRST_LIST_WAIT_MS),
    Key::Number(MCP_DRAIN_MS),
    Key::Number(MCP_MIRROR_QUEUE),
    Key::Number(MCP_MAX_SESSIONS),
    Key::Number(MCP_MAX_SESSIONS_PER_CLIENT),
    Key::Number(MCP_MAX_LISTEN_STREAMS),
    Key::Number(MCP_MAX_LISTEN_STREAMS_PER_CLIENT),
    Key::Number(MCP_LISTEN_IDLE_MS),
    Key::Number(MCP_MAX_SUBSCRIPTIONS),
    Key::Text(AGENT_PROVIDER),
    Key::Text(AGENT_DISPLAY_NAME),
    Key::Text(AGENT_DESCRIPTION),
    Key::Text(SESSION_TITLE),
    Key::Other(SESSION_WORKING_DIRECTORIES),
    Key::Number(LIMITS_MAX_FRAME_BYTES),
    Key::Number(LIMITS_CLIENT_QUEUE),
    Key::Number(LIMITS_CLIENT_QUEUE_BYTES),
    Key::Number(LIMITS_REPLAY_LOG),
    Key::Number(LIMITS_REPLAY_LOG_BYTES),
    Key::Number(LIMITS_MAX_CONNECTIONS),
    Key::Number(LIMITS_MAX_SESSIONS),
    Key::Number(LIMITS_ACTIVE_CLIENT_GRACE_SECS),
    Key::Number(LIMITS_WATCH_DEBOUNCE_MS),
    Key::Number(LIMITS_IDLE_TIMEOUT_MS),
    Key::Number(LIMITS_HANDSHAKE_TIMEOUT_MS),
    Key::Number(SUPERVISOR_START_TIMEOUT_MS),
    Key::Number(SUPERVISOR_SLOW_START_LIMIT_MS),
    Key::Number(SUPERVISOR_STOP_GRACE_MS),
    Key::Number(SUPERVISOR_RESTART_DELAY_MS),
    Key::Number(SUPERVISOR_RESTART_DELAY_MAX_MS),
    Key::Number(SUPERVISOR_CRASH_LOOP_LIMIT),
    Key::Number(SUPERVISOR_HEALTHY_AFTER_MS),
    Key::Flag(SUPERVISOR_CGROUPS),
    Key::Flag(CLIENTS_PLUGINS),
    Key::Other(Other {
        name: "clients.launch_servers",
        default: "`true` when `[ahp] listen` is a loopback address, else `false`",
    }),
    Key::Text(APPROVAL_MODE),
    Key::Number(APPROVAL_TIMEOUT_MS),
    Key::Text(APPROVAL_ON_TIMEOUT),
    Key::Other(Other {
        name: "approval.servers.<name>.mode",
        default: "`approval.mode`",
    }),
    Key::Other(Other {
        name: "approval.servers.<name>.tools.<tool>.mode",
        default: "the server's mode",
    }),
    Key::Other(Other {
        name: "approval.servers.<name>.tools.<tool>.review_result",
        default: "`false`",
    }),
    Key::Text(TRUST_MANIFESTS),
    Key::Text(TRUST_PLUGINS),
    Key::Text(TRUST_DIRECTORIES),
    Key::Text(TRUST_CLIENT_PLUGINS),
    Key::Other(Other {
        name: "trust.folders",
        default: "`[]`",
    }),
    Key::Other(Other {
        name: "servers.<name>.type",
        default: "none",
    }),
    Key::Other(Other {
        name: "servers.<name>.command",
        default: "none",
    }),
    Key::Other(Other {
        name: "servers.<name>.args",
        default: "`[]`",
    }),
    Key::Other(Other {
        name: "servers.<name>.env",
        default: "`{}`",
    }),
    Key::Other(Other {
        name: "servers.<name>.cwd",
        default: "the config file's folder",
    }),
    Key::Other(Other {
        name: "servers.<name>.url",
        default: "none",
    }),
    Key::Other(Other {
        name: "servers.<name>.headers",
        default: "`{}`",
    }),
    Key::Flag(SERVER_ENABLED),
    Key::Other(Other {
        name: "servers.<name>.disabledTools",
        default: "`[]`",
    }),
    Key::Other(Other {
        name: "servers.<name>.includeTools",
        default: "none (every tool)",
    }),
    Key::Other(Other {
        name: "servers.<name>.excludeTools",
        default: "`[]`",
    }),
    Key::Other(Other {
        name: "servers.<name>.alwaysAllow",
        default: "`[]`",
    }),
    Key::Other(Other {
        name: "servers.<name>.autoApprove",
        default: "`[]`",
    }),
];

#[cfg(test)]
impl Key {
    /// The dotted name.
    pub fn name(&self) -> &'static str {
        match self {
            Key::Number(k) => k.name,
            Key::Text(k) => k.name,
            Key::Flag(k) => k.name,
            Key::Other(k) => k.name,
        }
    }

    /// The default as docs/configuration.md's table cell shows it.
    pub fn documented_default(&self) -> String {
        match self {
            Key::Number(k) => format!("`{}`", k.default),
            Key::Text(k) => format!("`{:?}`", k.default),
            Key::Flag(k) => format!("`{}`", k.default),
            Key::Other(k) => k.default.to_string(),
        }
    }

    /// The range as docs/configuration.md's table cell shows it (`—` for keys that are not numbers).
    pub fn documented_range(&self) -> String {
        match self {
            Key::Number(k) => format!("{}..={}", k.min, k.max),
            _ => "—".to_string(),
        }
    }
}
