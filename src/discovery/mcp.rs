//! MCP server declarations inside a JSON file (`.mcp.json`, `mcp.json`, a plugin manifest's
//! inline `mcpServers`, `plugins.json`): normalises each entry, expands its launch spec, and
//! turns it into an `mcpServer` child with the exact `range` of its declaration.

use std::path::Path;

use ahp_types::state::{
    ChildCustomization, CustomizationEnablement, ErrorInfo, McpServerCustomization,
    McpServerErrorState, McpServerStartingState, McpServerState, McpServerStoppedState,
};

use super::expand::Vars;
use super::json::{self, Member, Node, Value};
use super::server_entry::RawServer;
use super::source::SourceFile;
use super::{DeclaredServer, Problems};
use crate::spec::{Launch, LaunchError};

/// Where the servers of one file live and how their `${…}` resolve.
pub struct ServerScope<'a> {
    /// Folder relative commands and the default `cwd` resolve against.
    pub root: &'a Path,
    /// Variable values.
    pub vars: Vars<'a>,
    /// The inline plugin (its container id) the servers belong to, when several plugins
    /// share one file (`plugins.json`): their ids hang under it, `<plugin id>/mcp=<name>`,
    /// so two plugins may each declare a server of the same name.
    pub plugin: Option<&'a str>,
}

/// What a server map yields: children for the container and specs for the supervisor.
#[derive(Default)]
pub struct Servers {
    /// `mcpServer` children in declaration order.
    pub children: Vec<ChildCustomization>,
    /// Their launch specs, same order.
    pub declared: Vec<DeclaredServer>,
}

impl Servers {
    /// Add `other`'s servers whose names are not taken yet; report the ones that are.
    pub fn merge_first_wins(&mut self, other: Servers, problems: &mut Problems) {
        let mut kept: std::collections::HashMap<String, String> = self
            .declared
            .iter()
            .map(|s| (s.name.clone(), s.declared_at.clone()))
            .collect();
        for (child, server) in other.children.into_iter().zip(other.declared) {
            if let Some(at) = kept.get(&server.name) {
                problems.warn_at(
                    &server.declared_at,
                    format!(
                        "server {:?} is already declared at {at}; this declaration is ignored",
                        server.name
                    ),
                );
                continue;
            }
            kept.insert(server.name.clone(), server.declared_at.clone());
            self.children.push(child);
            self.declared.push(server);
        }
    }
}

/// The server map of a parsed MCP file: `mcpServers` (wrapped), VS Code `servers`, or a flat
/// map of server objects. `None` (with a problem) when the file has none of these shapes.
pub fn server_map<'n>(
    root: &'n Node,
    file: &SourceFile,
    problems: &mut Problems,
) -> Option<&'n Node> {
    if root.members().is_none() {
        problems.warn(
            file,
            root.span.start,
            format!("expected a JSON object, found {}", root.type_name()),
        );
        return None;
    }
    for key in ["mcpServers", "servers"] {
        if let Some(member) = root.get(key) {
            return match member.node.value {
                Value::Object(_) => Some(&member.node),
                _ => {
                    problems.warn(
                        file,
                        member.node.span.start,
                        format!(
                            "`{key}` must be an object of servers, found {}",
                            member.node.type_name()
                        ),
                    );
                    None
                }
            };
        }
    }
    Some(root)
}

/// An inline `mcpServers` value of a plugin manifest: wrapped (`{"mcpServers": {…}}`) or flat.
pub fn unwrap_inline(node: &Node) -> &Node {
    match node.get("mcpServers") {
        Some(inner) if matches!(inner.node.value, Value::Object(_)) => &inner.node,
        _ => node,
    }
}

/// Turn every entry of `map` into a child and a launch spec. Bad entries are skipped with a
/// problem; their siblings stay. Duplicate names: the last declaration wins (as JSON.parse).
pub fn parse_servers(
    map: &Node,
    file: &SourceFile,
    scope: &ServerScope<'_>,
    problems: &mut Problems,
) -> Servers {
    let mut out = Servers::default();
    let Some(members) = map.members() else {
        return out;
    };
    for (earlier, later) in json::duplicates(members) {
        problems.warn(
            file,
            earlier.span.start,
            format!(
                "server {:?} is declared twice; the later declaration at {} wins",
                later.key,
                file.location(later.span.start)
            ),
        );
    }
    let last: std::collections::HashMap<&str, usize> = members
        .iter()
        .enumerate()
        .map(|(i, m)| (m.key.as_str(), i))
        .collect();
    for (i, member) in members.iter().enumerate() {
        if last.get(member.key.as_str()) != Some(&i) {
            continue; // a later declaration of the same name wins
        }
        if member.key.starts_with('$') {
            continue;
        }
        if let Some((child, server)) = parse_entry(member, file, scope, problems) {
            out.children.push(child);
            out.declared.push(server);
        }
    }
    out
}

fn parse_entry(
    member: &Member,
    file: &SourceFile,
    scope: &ServerScope<'_>,
    problems: &mut Problems,
) -> Option<(ChildCustomization, DeclaredServer)> {
    let name = member.key.clone();
    let at = member.span.start;
    if name.trim().is_empty() {
        problems.warn(file, at, "a server needs a non-empty name".to_string());
        return None;
    }
    let entry = &member.node;
    if entry.members().is_none() {
        problems.warn(
            file,
            entry.span.start,
            format!(
                "server {name:?} must be an object, found {}",
                entry.type_name()
            ),
        );
        return None;
    }
    let fragment = super::uri::fragment_component(&name);
    let id = match scope.plugin {
        Some(plugin) => format!("{plugin}/mcp={fragment}"),
        None => format!("{}#mcp={fragment}", file.uri),
    };
    let raw = match RawServer::read(entry) {
        Ok(raw) => raw,
        Err((offset, message)) => {
            problems.warn(
                file,
                offset,
                format!("server {name:?}: {message}; its last good declaration stays in effect"),
            );
            problems.unparsable(&id);
            return None;
        }
    };
    for (offset, note) in &raw.notes {
        problems.warn(file, *offset, format!("server {name:?}: {note}"));
    }
    let enabled = !raw.disabled;
    let launch = raw.launch(scope.root, &scope.vars);
    let state = initial_state(&launch, enabled);
    let child = ChildCustomization::McpServer(Box::new(McpServerCustomization {
        id: id.clone(),
        uri: file.uri.clone(),
        name: name.clone(),
        icons: None,
        range: Some(file.range(member.span.clone())),
        meta: None,
        enablement: declared_enablement(enabled),
        state,
        channel: None,
        mcp_app: None,
    }));
    let server = DeclaredServer {
        id,
        name,
        declared_at: file.location(at),
        enabled,
        launch,
        tools: raw.tools.clone(),
        container: None,
    };
    Some((child, server))
}

/// The decision a declaration makes, as the `enablement` a server is published with: a
/// server declared `disabled` (or `enabled = false`) carries a `global` entry saying so
/// (`enablement` absent means enabled, so saying nothing would show it on); one declared
/// enabled makes no explicit decision.
pub fn declared_enablement(enabled: bool) -> Option<Vec<CustomizationEnablement>> {
    (!enabled).then(|| vec![CustomizationEnablement::Global { enabled: false }])
}

/// What a declared server shows before the supervisor reports on it: `stopped` when
/// disabled, a `configuration` error when its launch spec cannot be expanded, else
/// `starting`.
pub fn initial_state(launch: &Result<Launch, LaunchError>, enabled: bool) -> McpServerState {
    match (launch, enabled) {
        (_, false) => McpServerState::Stopped(McpServerStoppedState {}),
        (Err(error), true) => McpServerState::Error(McpServerErrorState {
            error: ErrorInfo {
                error_type: "configuration".into(),
                message: error.to_string(),
                stack: None,
                meta: None,
            },
        }),
        (Ok(_), true) => McpServerState::Starting(McpServerStartingState { blocking: None }),
    }
}
