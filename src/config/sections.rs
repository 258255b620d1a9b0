//! Validation of the fixed sections — `[ahp]`, `[mcp]`, `[agent]`, `[session]`, `[limits]`,
//! `[supervisor]`, `[clients]` — from their raw form into settings, every default and bound from the key table.

use toml::Spanned;

use super::checker::Checker;
use super::keys;
use super::origin::normalize_origin;
use super::raw::{RawAgent, RawAhp, RawClients, RawLimits, RawMcp, RawSession, RawSupervisor};
use super::settings::{
    AccessToken, AgentConfig, AhpConfig, ClientsConfig, Fairness, Limits, McpConfig, SessionConfig,
    SupervisorConfig,
};
use crate::spec::NamePrefix;

/// `[ahp]`; `None` when `listen` is not an address (that is a problem already).
pub(super) fn ahp(checker: &mut Checker<'_>, raw: RawAhp) -> Option<AhpConfig> {
    let listen = checker.address(&keys::AHP_LISTEN, raw.listen);
    let token = raw
        .token
        .and_then(|token| access_token(checker, token, keys::AHP_TOKEN.name, super::TOKEN_ENV));
    let mut allowed_origins = Vec::new();
    for origin in raw.allowed_origins.unwrap_or_default() {
        match normalize_origin(origin.get_ref()) {
            Some(normal) => allowed_origins.push(normal),
            None => checker.problem(
                origin.span().start,
                format!(
                    "{}: {:?} is not an origin: expected scheme://host[:port] (no path), or \"*\"",
                    keys::AHP_ALLOWED_ORIGINS.name,
                    origin.get_ref()
                ),
            ),
        }
    }
    let views_port = checker.count(&keys::AHP_VIEWS_PORT, raw.views_port);
    Some(AhpConfig {
        listen: listen?,
        views_port: u16::try_from(views_port).unwrap_or_default(),
        token,
        allowed_origins,
        allowed_hosts: raw.allowed_hosts.unwrap_or_default(),
    })
}

/// A token key's value (`key`, which the environment variable `env` overrides), checked.
fn access_token(
    checker: &mut Checker<'_>,
    token: Spanned<String>,
    key: &str,
    env: &str,
) -> Option<AccessToken> {
    if !crate::bearer::well_formed(token.get_ref()) {
        checker.problem(
            token.span().start,
            format!(
                "{key} must be at least 16 characters, without spaces or control characters (prefer the {env} environment variable to a token in this file)"
            ),
        );
        return None;
    }
    Some(AccessToken(token.into_inner()))
}

/// `[mcp]`.
pub(super) fn mcp(checker: &mut Checker<'_>, raw: RawMcp) -> McpConfig {
    let defaults = McpConfig::default();
    let listen = checker.address(&keys::MCP_LISTEN, raw.listen);
    let prefix = match raw.prefix {
        None => defaults.prefix,
        Some(value) => name_prefix(value.get_ref()).unwrap_or_else(|| {
            checker.problem(
                value.span().start,
                format!(
                    "{} = {:?}: expected \"on-collision\" or \"always\"",
                    keys::MCP_PREFIX.name,
                    value.get_ref()
                ),
            );
            defaults.prefix
        }),
    };
    let separator = match raw.separator {
        None => defaults.separator,
        Some(value) => separator(checker, value).unwrap_or(defaults.separator),
    };
    let token = raw
        .token
        .and_then(|token| access_token(checker, token, keys::MCP_TOKEN.name, super::MCP_TOKEN_ENV));
    McpConfig {
        listen: listen.filter(|_| raw.http.unwrap_or(keys::MCP_HTTP.default)),
        token,
        prefix,
        separator,
        request_timeout: checker.millis(&keys::MCP_REQUEST_TIMEOUT_MS, raw.request_timeout_ms),
        first_list_wait: checker.millis(&keys::MCP_FIRST_LIST_WAIT_MS, raw.first_list_wait_ms),
        drain: checker.millis(&keys::MCP_DRAIN_MS, raw.drain_ms),
        mirror_queue: checker.count(&keys::MCP_MIRROR_QUEUE, raw.mirror_queue),
        max_sessions: checker.count(&keys::MCP_MAX_SESSIONS, raw.max_sessions),
        fairness: Fairness {
            max_sessions_per_client: checker.count(
                &keys::MCP_MAX_SESSIONS_PER_CLIENT,
                raw.max_sessions_per_client,
            ),
            max_listen_streams: checker
                .count(&keys::MCP_MAX_LISTEN_STREAMS, raw.max_listen_streams),
            max_listen_streams_per_client: checker.count(
                &keys::MCP_MAX_LISTEN_STREAMS_PER_CLIENT,
                raw.max_listen_streams_per_client,
            ),
            listen_idle: checker.millis(&keys::MCP_LISTEN_IDLE_MS, raw.listen_idle_ms),
            max_subscriptions: checker.count(&keys::MCP_MAX_SUBSCRIPTIONS, raw.max_subscriptions),
        },
        allowed_hosts: raw.allowed_hosts.unwrap_or_default(),
    }
}

/// `mcp.prefix` as written → the rule.
fn name_prefix(text: &str) -> Option<NamePrefix> {
    match text {
        "on-collision" => Some(NamePrefix::OnCollision),
        "always" => Some(NamePrefix::Always),
        _ => None,
    }
}

/// `mcp.separator`: 1 to 8 characters that tool names allow.
fn separator(checker: &mut Checker<'_>, value: Spanned<String>) -> Option<String> {
    let text = value.get_ref();
    let ok = (1..=8).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        checker.problem(
            value.span().start,
            format!(
                "{} = {text:?}: expected 1 to 8 of A-Z a-z 0-9 _ - . (tool names allow nothing else)",
                keys::MCP_SEPARATOR.name
            ),
        );
        return None;
    }
    Some(value.into_inner())
}

/// `[agent]`.
pub(super) fn agent(checker: &mut Checker<'_>, raw: RawAgent) -> AgentConfig {
    let provider = match raw.provider {
        None => keys::AGENT_PROVIDER.default.to_string(),
        Some(provider) => {
            let value = provider.get_ref();
            if let Err(why) = provider_problem(value) {
                checker.problem(
                    provider.span().start,
                    format!("{} = {value:?}: {why}", keys::AGENT_PROVIDER.name),
                );
            }
            provider.into_inner()
        }
    };
    AgentConfig {
        provider,
        display_name: raw
            .display_name
            .unwrap_or_else(|| keys::AGENT_DISPLAY_NAME.default.to_string()),
        description: raw
            .description
            .unwrap_or_else(|| keys::AGENT_DESCRIPTION.default.to_string()),
    }
}

/// Why `provider` cannot be the agent's provider id, if it cannot. It is also the scheme of
/// the host's session URIs (`<provider>:/default`), so it must be a URI scheme (RFC 3986: a
/// letter, then letters, digits, `+`, `-`, `.`), and not one the host gives other channels.
fn provider_problem(provider: &str) -> Result<(), String> {
    let scheme = provider.starts_with(|c: char| c.is_ascii_alphabetic())
        && provider
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme {
        return Err(
            "expected a URI scheme: a letter, then letters, digits, + - . (it names the sessions, <provider>:/default)"
                .into(),
        );
    }
    const TAKEN: [&str; 3] = ["ahp-root", "ahp-chat", "mcp"];
    if TAKEN.iter().any(|t| provider.eq_ignore_ascii_case(t)) {
        return Err(format!(
            "{provider} is the scheme of the host's other channels ({})",
            TAKEN.join(", ")
        ));
    }
    Ok(())
}

/// `[session]`; its paths resolved by `resolver`.
pub(super) fn session(
    checker: &mut Checker<'_>,
    raw: RawSession,
    resolver: &super::paths::Resolver<'_>,
) -> SessionConfig {
    SessionConfig {
        title: raw
            .title
            .unwrap_or_else(|| keys::SESSION_TITLE.default.to_string()),
        working_directories: raw.working_directories.map(|list| {
            super::paths::list(
                checker,
                keys::SESSION_WORKING_DIRECTORIES.name,
                list,
                resolver,
            )
        }),
    }
}

/// `[clients]`.
pub(super) fn clients(raw: RawClients) -> ClientsConfig {
    ClientsConfig {
        plugins: raw.plugins.unwrap_or(keys::CLIENTS_PLUGINS.default),
        launch_servers: raw.launch_servers,
    }
}

/// `[limits]`.
pub(super) fn limits(checker: &mut Checker<'_>, raw: RawLimits) -> Limits {
    Limits {
        max_frame_bytes: checker.count(&keys::LIMITS_MAX_FRAME_BYTES, raw.max_frame_bytes),
        client_queue: checker.count(&keys::LIMITS_CLIENT_QUEUE, raw.client_queue),
        client_queue_bytes: checker.count(&keys::LIMITS_CLIENT_QUEUE_BYTES, raw.client_queue_bytes),
        replay_log: checker.count(&keys::LIMITS_REPLAY_LOG, raw.replay_log),
        replay_log_bytes: checker.count(&keys::LIMITS_REPLAY_LOG_BYTES, raw.replay_log_bytes),
        max_connections: checker.count(&keys::LIMITS_MAX_CONNECTIONS, raw.max_connections),
        max_sessions: checker.count(&keys::LIMITS_MAX_SESSIONS, raw.max_sessions),
        active_client_grace: checker.secs(
            &keys::LIMITS_ACTIVE_CLIENT_GRACE_SECS,
            raw.active_client_grace_secs,
        ),
        watch_debounce: checker.millis(&keys::LIMITS_WATCH_DEBOUNCE_MS, raw.watch_debounce_ms),
        idle_timeout: checker.millis(&keys::LIMITS_IDLE_TIMEOUT_MS, raw.idle_timeout_ms),
        handshake_timeout: checker
            .millis(&keys::LIMITS_HANDSHAKE_TIMEOUT_MS, raw.handshake_timeout_ms),
    }
}

/// `[supervisor]`.
pub(super) fn supervisor(checker: &mut Checker<'_>, raw: RawSupervisor) -> SupervisorConfig {
    SupervisorConfig {
        start_timeout: checker.millis(&keys::SUPERVISOR_START_TIMEOUT_MS, raw.start_timeout_ms),
        slow_start_limit: checker.millis(
            &keys::SUPERVISOR_SLOW_START_LIMIT_MS,
            raw.slow_start_limit_ms,
        ),
        stop_grace: checker.millis(&keys::SUPERVISOR_STOP_GRACE_MS, raw.stop_grace_ms),
        restart_delay: checker.millis(&keys::SUPERVISOR_RESTART_DELAY_MS, raw.restart_delay_ms),
        restart_delay_max: checker.millis(
            &keys::SUPERVISOR_RESTART_DELAY_MAX_MS,
            raw.restart_delay_max_ms,
        ),
        crash_loop_limit: checker.count(&keys::SUPERVISOR_CRASH_LOOP_LIMIT, raw.crash_loop_limit)
            as u32,
        healthy_after: checker.millis(&keys::SUPERVISOR_HEALTHY_AFTER_MS, raw.healthy_after_ms),
        cgroups: raw.cgroups.unwrap_or(keys::SUPERVISOR_CGROUPS.default),
    }
}
