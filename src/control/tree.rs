//! What `ahp-proxy status` prints: a session's containers and servers with their states,
//! errors and tool counts, as text or JSON, and whether anything is in error; and finding a
//! server or plugin by the name a person types. Pure.

use std::collections::HashMap;

use ahp_types::state::{
    ChildCustomization, Customization, CustomizationLoadState, McpServerCustomization,
    McpServerState,
};
use serde_json::{json, Value};

use crate::untrusted::Escaped;

/// Tool counts by server id (servers whose tools could be listed).
pub type Tools = HashMap<String, usize>;

/// One server, with the container that shows it.
pub struct ServerRow<'a> {
    /// The container's id, or `None` for a top-level server (proxy.toml's `[servers]`).
    pub container: Option<&'a str>,
    /// The server.
    pub server: &'a McpServerCustomization,
}

/// Every server in `customizations`, in order.
pub fn servers(customizations: &[Customization]) -> Vec<ServerRow<'_>> {
    let mut out = Vec::new();
    for c in customizations {
        match c {
            Customization::McpServer(m) => out.push(ServerRow {
                container: None,
                server: m,
            }),
            Customization::Plugin(p) => out.extend(server_children(&p.id, p.children.as_deref())),
            Customization::Directory(d) => {
                out.extend(server_children(&d.id, d.children.as_deref()))
            }
            Customization::Unknown(_) => {}
        }
    }
    out
}

fn server_children<'a>(
    container: &'a str,
    children: Option<&'a [ChildCustomization]>,
) -> impl Iterator<Item = ServerRow<'a>> {
    children
        .unwrap_or(&[])
        .iter()
        .filter_map(move |child| match child {
            ChildCustomization::McpServer(m) => Some(ServerRow {
                container: Some(container),
                server: m,
            }),
            _ => None,
        })
}

/// Whether a server or a container is in `error` (what makes `status` exit 1). A plugin an AHP
/// client published and this host cannot read (a `virtual://` one) is the client's business,
/// not the proxy's: it is shown, and does not count; its servers, if any ran, do.
pub fn in_error(customizations: &[Customization]) -> bool {
    let container = customizations.iter().any(|c| {
        let published = matches!(c, Customization::Plugin(p) if p.client_id.is_some());
        !published && matches!(load_of(c), Some(CustomizationLoadState::Error(_)))
    });
    container
        || servers(customizations)
            .iter()
            .any(|row| matches!(row.server.state, McpServerState::Error(_)))
}

fn load_of(c: &Customization) -> Option<&CustomizationLoadState> {
    match c {
        Customization::Plugin(p) => p.load.as_ref(),
        Customization::Directory(d) => d.load.as_ref(),
        _ => None,
    }
}

/// Whether server `m`'s start goes on past the start timeout (the host's `ahp-proxy/start`).
pub fn is_slow(m: &McpServerCustomization) -> bool {
    matches!(m.state, McpServerState::Starting(_))
        && m.meta
            .as_ref()
            .and_then(|meta| meta.get(crate::host::live::START_META))
            .and_then(|start| start.get("slow"))
            .and_then(serde_json::Value::as_bool)
            == Some(true)
}

/// A server state in one word, and its detail (the error, what authorization is needed).
pub fn state_words(state: &McpServerState) -> (&'static str, Option<String>) {
    match state {
        McpServerState::Starting(_) => ("starting", None),
        McpServerState::Ready(_) => ("ready", None),
        McpServerState::AuthRequired(a) => (
            "authRequired",
            Some(format!("{:?} for {}", a.reason, a.resource.resource)),
        ),
        McpServerState::Error(e) => (
            "error",
            Some(format!("{}: {}", e.error.error_type, e.error.message)),
        ),
        McpServerState::Stopped(_) => ("stopped", None),
        McpServerState::Unknown(_) => ("unknown", None),
    }
}

fn load_words(load: Option<&CustomizationLoadState>) -> (&'static str, Option<&str>) {
    match load {
        Some(CustomizationLoadState::Loaded(_)) | None => ("loaded", None),
        Some(CustomizationLoadState::Loading(_)) => ("loading", None),
        Some(CustomizationLoadState::Degraded(d)) => ("degraded", Some(&d.message)),
        Some(CustomizationLoadState::Error(e)) => ("error", Some(&e.message)),
    }
}

/// The tree as text: a summary line, then each container and its servers; every name and
/// message with its control characters escaped (they come from the proxy).
pub fn render_text(url: &str, customizations: &[Customization], tools: &Tools) -> String {
    let rows = servers(customizations);
    let counts: Vec<String> = [
        "ready",
        "starting",
        "authRequired",
        "error",
        "stopped",
        "unknown",
    ]
    .iter()
    .filter_map(|word| {
        let n = rows
            .iter()
            .filter(|row| state_words(&row.server.state).0 == *word)
            .count();
        (n > 0).then(|| format!("{n} {word}"))
    })
    .collect();
    let mut out = format!(
        "ahp-proxy at {url}: {} server{}{}{}\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        if counts.is_empty() { "" } else { ": " },
        counts.join(", ")
    );
    let server_line = |out: &mut String, indent: &str, m: &McpServerCustomization| {
        let (word, detail) = state_words(&m.state);
        let tools = match (tools.get(&m.id), word) {
            (Some(n), "ready") => format!("  {n} tool{}", if *n == 1 { "" } else { "s" }),
            _ if is_slow(m) => " (slow)".into(),
            _ => String::new(),
        };
        let name = Escaped(&m.name).to_string();
        out.push_str(&format!("{indent}{name:<20} {word}{tools}\n"));
        if let Some(detail) = detail {
            for line in detail.lines() {
                out.push_str(&format!("{indent}    {}\n", Escaped(line)));
            }
        }
    };
    for c in customizations {
        let (kind, name, children) = match c {
            Customization::Plugin(p) => ("plugin", &p.name, p.children.as_deref()),
            Customization::Directory(d) => ("directory", &d.name, d.children.as_deref()),
            Customization::McpServer(m) => {
                server_line(&mut out, "", m);
                continue;
            }
            Customization::Unknown(_) => continue,
        };
        let (load, message) = load_words(load_of(c));
        out.push_str(&format!("{kind} {}  [{load}]\n", Escaped(name)));
        for line in message.into_iter().flat_map(str::lines) {
            out.push_str(&format!("    {}\n", Escaped(line)));
        }
        for child in children.unwrap_or(&[]) {
            if let ChildCustomization::McpServer(m) = child {
                server_line(&mut out, "  ", m);
            }
        }
    }
    out
}

/// The tree as JSON: `{url, status, containers: [...], servers: [...]}`.
pub fn render_json(url: &str, customizations: &[Customization], tools: &Tools) -> Value {
    let containers: Vec<Value> = customizations
        .iter()
        .filter_map(|c| {
            let (kind, id, name) = match c {
                Customization::Plugin(p) => ("plugin", &p.id, &p.name),
                Customization::Directory(d) => ("directory", &d.id, &d.name),
                _ => return None,
            };
            let (load, message) = load_words(load_of(c));
            Some(json!({"type": kind, "id": id, "name": name, "load": load, "message": message}))
        })
        .collect();
    let servers: Vec<Value> = servers(customizations)
        .iter()
        .map(|row| {
            let (state, detail) = state_words(&row.server.state);
            json!({
                "id": row.server.id,
                "name": row.server.name,
                "container": row.container,
                "state": state,
                "slow": is_slow(row.server),
                "detail": detail,
                "tools": tools.get(&row.server.id),
            })
        })
        .collect();
    json!({
        "url": url,
        "status": if in_error(customizations) { "error" } else { "ok" },
        "containers": containers,
        "servers": servers,
    })
}

/// What a name typed on the command line can mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A server: its id and name.
    Server { id: String, name: String },
    /// A plugin or directory: its id, its name, and its servers' ids.
    Container {
        id: String,
        name: String,
        servers: Vec<String>,
    },
}

/// Every name [`find`] knows: containers' and servers' names, and `container/server`.
pub fn names(customizations: &[Customization]) -> Vec<String> {
    let mut out = Vec::new();
    for c in customizations {
        match c {
            Customization::Plugin(p) => out.push(p.name.clone()),
            Customization::Directory(d) => out.push(d.name.clone()),
            _ => {}
        }
    }
    for row in servers(customizations) {
        out.push(row.server.name.clone());
        if let Some(container) = row
            .container
            .and_then(|id| container_name(customizations, id))
        {
            out.push(format!("{container}/{}", row.server.name));
        }
    }
    out
}

/// The name of the container whose id is `id`.
fn container_name<'a>(customizations: &'a [Customization], id: &str) -> Option<&'a str> {
    customizations.iter().find_map(|c| match c {
        Customization::Plugin(p) if p.id == id => Some(p.name.as_str()),
        Customization::Directory(d) if d.id == id => Some(d.name.as_str()),
        _ => None,
    })
}

/// Every server or container whose id or name is `wanted` (or `container/server`).
pub fn find(customizations: &[Customization], wanted: &str) -> Vec<Target> {
    let mut out = Vec::new();
    for c in customizations {
        let (id, name) = match c {
            Customization::Plugin(p) => (&p.id, &p.name),
            Customization::Directory(d) => (&d.id, &d.name),
            _ => continue,
        };
        if id == wanted || name == wanted {
            let servers = servers(std::slice::from_ref(c))
                .iter()
                .map(|row| row.server.id.clone())
                .collect();
            out.push(Target::Container {
                id: id.clone(),
                name: name.clone(),
                servers,
            });
        }
    }
    for row in servers(customizations) {
        let qualified = row
            .container
            .and_then(|id| container_name(customizations, id))
            .map(|c| format!("{c}/{}", row.server.name));
        if row.server.id == wanted
            || row.server.name == wanted
            || qualified.as_deref() == Some(wanted)
        {
            out.push(Target::Server {
                id: row.server.id.clone(),
                name: row.server.name.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Vec<Customization> {
        serde_json::from_value(json!([
            {"type": "plugin", "id": "file:///p", "uri": "file:///p", "name": "team", "load": {"kind": "degraded", "message": "x.json:1:1: bad"},
             "children": [
                {"type": "mcpServer", "id": "file:///p/.mcp.json#mcp=a", "uri": "file:///p/.mcp.json", "name": "a", "state": {"kind": "ready"}},
                {"type": "mcpServer", "id": "file:///p/.mcp.json#mcp=b", "uri": "file:///p/.mcp.json", "name": "b",
                 "state": {"kind": "error", "error": {"errorType": "spawn", "message": "cannot start the server: command not found: b"}}}
             ]},
            {"type": "mcpServer", "id": "file:///proxy.toml#mcp=a", "uri": "file:///proxy.toml", "name": "a", "state": {"kind": "stopped"}}
        ]))
        .expect("customizations")
    }

    #[test]
    fn the_tree_reads_at_a_glance_and_errors_count() {
        let tree = tree();
        let tools = Tools::from([("file:///p/.mcp.json#mcp=a".to_string(), 3)]);
        let text = render_text("ws://127.0.0.1:1", &tree, &tools);
        assert!(
            text.starts_with(
                "ahp-proxy at ws://127.0.0.1:1: 3 servers: 1 ready, 1 error, 1 stopped\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("plugin team  [degraded]\n    x.json:1:1: bad\n"),
            "{text}"
        );
        assert!(
            text.contains("  a                    ready  3 tools\n"),
            "{text}"
        );
        assert!(
            text.contains("      spawn: cannot start the server: command not found: b\n"),
            "{text}"
        );
        assert!(in_error(&tree));
        let json = render_json("u", &tree, &tools);
        assert_eq!(json["status"], "error");
        assert_eq!(json["servers"][0]["tools"], 3);
    }

    #[test]
    fn a_slow_start_reads_as_starting_slow() {
        let tree: Vec<Customization> = serde_json::from_value(json!([
            {"type": "mcpServer", "id": "s", "uri": "file:///p/.mcp.json", "name": "late",
             "state": {"kind": "starting"}, "_meta": {"ahp-proxy/start": {"slow": true}}},
            {"type": "mcpServer", "id": "t", "uri": "file:///p/.mcp.json", "name": "quick",
             "state": {"kind": "starting"}}
        ]))
        .expect("customizations");
        let text = render_text("u", &tree, &Tools::new());
        assert!(text.contains("2 starting"), "{text}");
        assert!(
            text.contains("late                 starting (slow)\n"),
            "{text}"
        );
        assert!(text.contains("quick                starting\n"), "{text}");
        let json = render_json("u", &tree, &Tools::new());
        assert_eq!(json["servers"][0]["slow"], true, "{json}");
        assert_eq!(json["servers"][1]["slow"], false, "{json}");
    }

    #[test]
    fn a_published_plugin_the_host_cannot_read_does_not_count_as_an_error() {
        let published: Vec<Customization> = serde_json::from_value(json!([
            {"type": "plugin", "id": "vscode-1", "uri": "virtual://vscode/p", "name": "ide", "clientId": "vscode",
             "load": {"kind": "error", "message": "virtual://vscode/p lives in the client"}, "children": []},
            {"type": "plugin", "id": "file:///h", "uri": "file:///h", "name": "host", "load": {"kind": "loaded"}, "children": []}
        ]))
        .expect("customizations");
        assert!(!in_error(&published));
        let mut own = published.clone();
        if let Customization::Plugin(p) = &mut own[0] {
            p.client_id = None;
        }
        assert!(in_error(&own), "the host's own unreadable plugin counts");
    }

    #[test]
    fn names_find_servers_and_plugins_and_ambiguity_is_visible() {
        let tree = tree();
        assert_eq!(find(&tree, "a").len(), 2, "two servers named a");
        assert_eq!(
            find(&tree, "team/a"),
            [Target::Server {
                id: "file:///p/.mcp.json#mcp=a".into(),
                name: "a".into()
            }]
        );
        assert!(
            matches!(&find(&tree, "team")[..], [Target::Container { servers, .. }] if servers.len() == 2)
        );
        assert!(find(&tree, "nope").is_empty());
        let names = names(&tree);
        assert!(names.contains(&"team".to_string()), "{names:?}");
        assert!(names.contains(&"team/a".to_string()), "{names:?}");
    }

    #[test]
    fn remote_text_is_escaped_in_the_tree() {
        let tree: Vec<Customization> = serde_json::from_value(json!([
            {"type": "plugin", "id": "file:///p", "uri": "file:///p", "name": "p\u{1b}[2J",
             "load": {"kind": "degraded", "message": "bad\rline\nsecond \u{202e}txt"}, "children": []}
        ]))
        .expect("customizations");
        let text = render_text("u", &tree, &Tools::new());
        assert!(text.contains("plugin p\\u{1b}[2J  [degraded]\n"), "{text}");
        assert!(
            text.contains("    bad\\rline\n    second \\u{202e}txt\n"),
            "{text}"
        );
    }
}
