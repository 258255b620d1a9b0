//! `ahp-proxy check`: renders the customization tree a client would see, with load states,
//! server states and every problem (a server that cannot start included), as text or JSON;
//! an invalid config as JSON too. Pure: catalog in, text out; `start` (`check --start`) is the
//! one part that runs servers.

pub mod approval;
pub mod start;
mod tools;

use ahp_types::state::{
    ChildCustomization, Customization, CustomizationLoadState, McpServerState, TextRange,
};
use serde_json::json;

use std::path::Path;

use crate::catalog::Catalog;
use crate::config::{Config, ConfigError};
use crate::spec::{Launch, Problem};
use crate::supervisor::process::program::look_up;
use crate::untrusted::Escaped;

/// Whether anything is in `error`: a plugin root that cannot be listed, a container that
/// could not load, or a server whose declaration cannot be launched.
pub fn has_errors(catalog: &Catalog) -> bool {
    catalog.has_unreadable_roots()
        || catalog.customizations().iter().any(|c| match c {
            Customization::Plugin(p) => {
                matches!(p.load, Some(CustomizationLoadState::Error(_)))
                    || p.children.iter().flatten().any(child_in_error)
            }
            Customization::Directory(d) => matches!(d.load, Some(CustomizationLoadState::Error(_))),
            Customization::McpServer(m) => matches!(m.state, McpServerState::Error(_)),
            Customization::Unknown(_) => false,
        })
}

fn child_in_error(child: &ChildCustomization) -> bool {
    matches!(child, ChildCustomization::McpServer(m) if matches!(m.state, McpServerState::Error(_)))
}

/// Every problem `check` reports: the files' own, then servers that cannot start (their
/// launch spec, then `missing`: their program).
fn problems(catalog: &Catalog, missing: &[Problem]) -> Vec<Problem> {
    catalog
        .problems()
        .cloned()
        .chain(catalog.server_problems())
        .chain(missing.iter().cloned())
        .collect()
}

/// Every enabled stdio server whose program is not where its spawn would look (on `PATH`,
/// or relative to its working directory), as a problem at its declaration. Only the file
/// system is read: nothing is started.
pub fn missing_programs(catalog: &Catalog) -> Vec<Problem> {
    catalog
        .servers()
        .filter(|server| server.enabled)
        .filter_map(|server| {
            let Ok(Launch::Stdio {
                command, env, cwd, ..
            }) = &server.launch
            else {
                return None;
            };
            let error = look_up(command, env, cwd.as_deref()).err()?.to_string();
            let reason = error
                .strip_prefix("cannot start the server: ")
                .unwrap_or(&error);
            Some(Problem {
                location: server.declared_at.clone(),
                message: format!("server {:?} cannot start: {reason}", server.name),
            })
        })
        .collect()
}

fn problems_json(problems: &[Problem]) -> Vec<serde_json::Value> {
    problems
        .iter()
        .map(|p| json!({ "location": p.location, "message": p.message }))
        .collect()
}

/// The tree as JSON: `{customizations, problems, serversStarted, toolFilters, approval}`
/// (customizations exactly as AHP sends them; `toolFilters` by server id), and with `--start` each server's outcome under `servers`.
pub fn render_json(
    catalog: &Catalog,
    missing: &[Problem],
    started: Option<&[start::Outcome]>,
    policy: &crate::approval::Policy,
) -> String {
    let mut value = json!({
        "customizations": catalog.customizations(),
        "problems": problems_json(&problems(catalog, missing)),
        "serversStarted": started.is_some(),
        "toolFilters": tools::json(catalog),
        "approval": approval::json(policy),
    });
    if let Some(outcomes) = started {
        value["servers"] = start::render_json(outcomes);
    }
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

/// An invalid configuration as the same JSON shape: no customizations, its problems, and
/// `"configValid": false`.
pub fn render_config_error_json(error: &ConfigError) -> String {
    let value = json!({
        "customizations": [],
        "problems": problems_json(&error.problems),
        "configValid": false,
    });
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

/// Which config was read, where the proxy would serve and what it would read, one line each.
pub fn render_header(config: &Config, file: Option<&Path>) -> String {
    let mut out = match file {
        Some(file) => format!("config         {}\n", Escaped(&file.display().to_string())),
        None => "config         none found (proxy.toml here or in a folder above); every key has its default\n".to_string(),
    };
    out.push_str(&format!("AHP endpoint   ws://{}\n", config.ahp.listen));
    match config.mcp.listen {
        Some(addr) => out.push_str(&format!(
            "MCP endpoint   http://{addr}/mcp (and /mcp/<server>){}\n",
            mcp_access(config, addr)
        )),
        None => out.push_str("MCP endpoint   stdio only (serve --stdio)\n"),
    }
    out.push_str(&format!(
        "agent          {} ({})\n",
        config.agent.display_name, config.agent.provider
    ));
    out.push_str(&format!("session        {}\n", config.session.title));
    for root in &config.plugin_roots {
        out.push_str(&format!("plugin root    {}\n", root.display()));
    }
    for manifest in &config.manifests {
        out.push_str(&format!("manifest       {}\n", manifest.display()));
    }
    for dir in &config.directories {
        out.push_str(&format!("directory      {}\n", dir.path.display()));
    }
    out.push_str(&approval::lines(&config.approval));
    out
}

/// What the MCP endpoint asks of a harness, never the token itself: it is set (in the
/// environment or the config), or the endpoint would not start.
fn mcp_access(config: &Config, addr: std::net::SocketAddr) -> String {
    let env = crate::config::MCP_TOKEN_ENV;
    let from_env = std::env::var_os(env).is_some_and(|v| !v.is_empty());
    if from_env || config.mcp.token.is_some() {
        "; token required".into()
    } else if crate::bearer::needs_token(addr.ip()) {
        format!("; will not start: not loopback and no token (set {env} or mcp.token)")
    } else {
        String::new()
    }
}

/// The tree as indented text, one customization per line, problems at the end; names and
/// messages with their control characters escaped (a manifest may come from anywhere).
pub fn render_text(catalog: &Catalog, missing: &[Problem]) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&Escaped(&text).to_string());
        out.push('\n');
    };
    let list = catalog.customizations();
    line(format!("customizations ({})", list.len()));
    for c in &list {
        match c {
            Customization::Plugin(p) => {
                let version = p
                    .version
                    .as_deref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default();
                line(format!(
                    "  plugin {}{version}  [{}]  {}{}",
                    p.name,
                    load_label(p.load.as_ref()),
                    p.uri,
                    range_label(p.range.as_ref())
                ));
                for child in p.children.iter().flatten() {
                    line(format!("    {}", child_line(child)));
                    if let ChildCustomization::McpServer(m) = child {
                        tools::lines(catalog, &m.id, "        ")
                            .into_iter()
                            .for_each(&mut line);
                    }
                }
            }
            Customization::Directory(d) => {
                let writable = if d.writable { ", writable" } else { "" };
                line(format!(
                    "  directory {}  [{}{writable}]  {}",
                    d.name,
                    load_label(d.load.as_ref()),
                    d.uri
                ));
                for child in d.children.iter().flatten() {
                    line(format!("    {}", child_line(child)));
                }
            }
            Customization::McpServer(m) => {
                line(format!(
                    "  mcpServer {}  [{}]  {}{}",
                    m.name,
                    state_label(&m.state),
                    m.uri,
                    range_label(m.range.as_ref())
                ));
                tools::lines(catalog, &m.id, "      ")
                    .into_iter()
                    .for_each(&mut line);
            }
            Customization::Unknown(_) => {}
        }
    }
    let problems = problems(catalog, missing);
    line(format!("problems ({})", problems.len()));
    for problem in &problems {
        for text in problem.to_string().lines() {
            line(format!("  {text}"));
        }
    }
    out
}

/// What plain `check` says last: the servers were only read, not run.
pub fn render_not_started(catalog: &Catalog) -> String {
    let servers = catalog.servers().count();
    format!(
        "{servers} server{} declared; none was started (`check --start` starts each one and lists its tools)\n",
        if servers == 1 { "" } else { "s" }
    )
}

fn child_line(child: &ChildCustomization) -> String {
    let value = serde_json::to_value(child).unwrap_or_default();
    let kind = value["type"].as_str().unwrap_or("?");
    let name = value["name"].as_str().unwrap_or("?");
    match child {
        ChildCustomization::McpServer(m) => format!(
            "mcpServer {name}  [{}]{}",
            state_label(&m.state),
            range_label(m.range.as_ref())
        ),
        _ => format!(
            "{kind} {name}{}",
            range_label(
                value
                    .get("range")
                    .and_then(|r| serde_json::from_value(r.clone()).ok())
                    .as_ref()
            )
        ),
    }
}

fn load_label(load: Option<&CustomizationLoadState>) -> &'static str {
    match load {
        None => "unknown",
        Some(CustomizationLoadState::Loading(_)) => "loading",
        Some(CustomizationLoadState::Loaded(_)) => "loaded",
        Some(CustomizationLoadState::Degraded(_)) => "degraded",
        Some(CustomizationLoadState::Error(_)) => "error",
    }
}

fn state_label(state: &McpServerState) -> String {
    match state {
        McpServerState::Starting(_) => "starting".into(),
        McpServerState::Ready(_) => "ready".into(),
        McpServerState::AuthRequired(_) => "authRequired".into(),
        McpServerState::Error(e) => format!("error: {}", e.error.message),
        McpServerState::Stopped(_) => "stopped".into(),
        McpServerState::Unknown(_) => "unknown".into(),
    }
}

/// ` @ 9:5-14:6` (1-based, for people) or nothing.
fn range_label(range: Option<&TextRange>) -> String {
    match range {
        None => String::new(),
        Some(r) => format!(
            " @ {}:{}-{}:{}",
            r.start.line + 1,
            r.start.character + 1,
            r.end.line + 1,
            r.end.character + 1
        ),
    }
}
