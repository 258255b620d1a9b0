//! MCP server declarations inside a JSON file (`.mcp.json`, `mcp.json`, a plugin manifest's
//! inline `mcpServers`, `plugins.json`): normalises each entry, expands its launch spec, and
//! turns it into an `mcpServer` child with the exact `range` of its declaration.

use std::collections::BTreeMap;
use std::path::Path;

use ahp_types::state::{
    ChildCustomization, ErrorInfo, McpServerCustomization, McpServerErrorState,
    McpServerStartingState, McpServerState, McpServerStoppedState,
};

use super::expand::{expand, Unresolved, Vars};
use super::json::{self, Member, Node, Value};
use super::source::SourceFile;
use super::{DeclaredServer, Problems};
use crate::spec::Launch;

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
    let raw = match RawServer::read(entry) {
        Ok(raw) => raw,
        Err((offset, message)) => {
            problems.warn(file, offset, format!("server {name:?}: {message}; skipped"));
            return None;
        }
    };
    let enabled = !raw.disabled;
    let launch = raw.launch(scope).map_err(|(field, unresolved)| {
        format!(
            "{} {} (used in the server's {field})",
            unresolved.token, unresolved.reason
        )
    });
    let fragment = super::uri::fragment_component(&name);
    let id = match scope.plugin {
        Some(plugin) => format!("{plugin}/mcp={fragment}"),
        None => format!("{}#mcp={fragment}", file.uri),
    };
    let state = initial_state(&launch, enabled);
    let child = ChildCustomization::McpServer(Box::new(McpServerCustomization {
        id: id.clone(),
        uri: file.uri.clone(),
        name: name.clone(),
        icons: None,
        range: Some(file.range(member.span.clone())),
        meta: None,
        enablement: None,
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
        container: None,
    };
    Some((child, server))
}

/// The fields of one server entry, type-checked but not expanded.
struct RawServer {
    kind: Kind,
    disabled: bool,
}

enum Kind {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        sse: bool,
    },
}

type FieldError = (usize, String);

impl RawServer {
    fn read(entry: &Node) -> Result<Self, FieldError> {
        let string = |key: &str| -> Result<Option<String>, FieldError> {
            match entry.get(key) {
                None => Ok(None),
                Some(m) => match &m.node.value {
                    Value::String(s) => Ok(Some(s.clone())),
                    _ => Err((
                        m.node.span.start,
                        format!("`{key}` must be a string, found {}", m.node.type_name()),
                    )),
                },
            }
        };
        let map = |key: &str| -> Result<BTreeMap<String, String>, FieldError> {
            let Some(m) = entry.get(key) else {
                return Ok(BTreeMap::new());
            };
            let Some(members) = m.node.members() else {
                return Err((
                    m.node.span.start,
                    format!("`{key}` must be an object, found {}", m.node.type_name()),
                ));
            };
            members
                .iter()
                .map(|item| match &item.node.value {
                    Value::String(s) => Ok((item.key.clone(), s.clone())),
                    Value::Number(n) => Ok((item.key.clone(), n.clone())),
                    Value::Bool(b) => Ok((item.key.clone(), b.to_string())),
                    _ => Err((
                        item.node.span.start,
                        format!(
                            "`{key}` values must be strings, found {}",
                            item.node.type_name()
                        ),
                    )),
                })
                .collect()
        };
        let disabled = match entry.get("disabled").map(|m| &m.node.value) {
            Some(Value::Bool(b)) => *b,
            _ => matches!(
                entry.get("enabled").map(|m| &m.node.value),
                Some(Value::Bool(false))
            ),
        };
        let command = string("command")?;
        let url = string("url")?;
        let transport = match string("type")?.as_deref() {
            None if command.is_some() => "stdio",
            None if url.is_some() => "http",
            None => {
                return Err((
                    entry.span.start,
                    "needs `command` (stdio) or `url` (http)".into(),
                ))
            }
            Some("stdio" | "local") => "stdio",
            Some("http" | "streamable-http" | "streamableHttp") => "http",
            Some("sse") => "sse",
            Some(other) => {
                let at = entry
                    .get("type")
                    .map_or(entry.span.start, |m| m.node.span.start);
                return Err((
                    at,
                    format!("unknown server type {other:?} (expected stdio, http, streamable-http or sse)"),
                ));
            }
        };
        let kind = if transport == "stdio" {
            let Some(command) = command else {
                return Err((entry.span.start, "a stdio server needs `command`".into()));
            };
            let args = match entry.get("args") {
                None => Vec::new(),
                Some(m) => match &m.node.value {
                    Value::Array(items) => items
                        .iter()
                        .map(|item| match &item.value {
                            Value::String(s) => Ok(s.clone()),
                            Value::Number(n) => Ok(n.clone()),
                            _ => Err((
                                item.span.start,
                                format!("`args` items must be strings, found {}", item.type_name()),
                            )),
                        })
                        .collect::<Result<_, _>>()?,
                    _ => {
                        return Err((
                            m.node.span.start,
                            format!("`args` must be an array, found {}", m.node.type_name()),
                        ))
                    }
                },
            };
            Kind::Stdio {
                command,
                args,
                env: map("env")?,
                cwd: string("cwd")?,
            }
        } else {
            let Some(url) = url else {
                return Err((
                    entry.span.start,
                    format!("a {transport} server needs `url`"),
                ));
            };
            Kind::Http {
                url,
                headers: map("headers")?,
                sse: transport == "sse",
            }
        };
        Ok(Self { kind, disabled })
    }

    /// Expand every `${…}`; the error names the field the bad token was in.
    fn launch(&self, scope: &ServerScope<'_>) -> Result<Launch, (&'static str, Unresolved)> {
        let x = |field: &'static str, text: &str| expand(text, &scope.vars).map_err(|e| (field, e));
        match &self.kind {
            Kind::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let command = x("command", command)?;
                let command = if command.starts_with("./") || command.starts_with("../") {
                    scope.root.join(&command).to_string_lossy().into_owned()
                } else {
                    command
                };
                let args = args
                    .iter()
                    .map(|a| x("args", a))
                    .collect::<Result<_, _>>()?;
                let env = env
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), x("env", v)?)))
                    .collect::<Result<_, _>>()?;
                let cwd = match cwd {
                    None => scope.root.to_path_buf(),
                    Some(cwd) => scope.root.join(x("cwd", cwd)?),
                };
                Ok(Launch::Stdio {
                    command,
                    args,
                    env,
                    cwd: Some(cwd),
                })
            }
            Kind::Http { url, headers, sse } => Ok(Launch::Http {
                url: x("url", url)?,
                headers: headers
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), x("headers", v)?)))
                    .collect::<Result<_, _>>()?,
                sse: *sse,
            }),
        }
    }
}

/// What a declared server shows before the supervisor reports on it: `stopped` when
/// disabled, a `configuration` error when its launch spec cannot be expanded, else
/// `starting`.
pub fn initial_state(launch: &Result<Launch, String>, enabled: bool) -> McpServerState {
    match (launch, enabled) {
        (_, false) => McpServerState::Stopped(McpServerStoppedState {}),
        (Err(message), true) => McpServerState::Error(McpServerErrorState {
            error: ErrorInfo {
                error_type: "configuration".into(),
                message: message.clone(),
                stack: None,
                meta: None,
            },
        }),
        (Ok(_), true) => McpServerState::Starting(McpServerStartingState { blocking: None }),
    }
}
