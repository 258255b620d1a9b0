//! One server entry of an MCP JSON file, as every dialect writes it: its fields type-checked
//! (unknown and misspelt keys reported, the server kept), its `envFile` read, and its launch
//! spec expanded.

use std::collections::BTreeMap;
use std::path::Path;

use super::expand::{expand_field, expand_remote, Vars};
use super::json::{Node, Value};
use crate::spec::{Launch, LaunchError, ToolFilters};

/// A byte offset in the file and what is wrong there.
pub type FieldError = (usize, String);

/// The keys this proxy reads.
const USED: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "envFile",
    "cwd",
    "url",
    "headers",
    "disabled",
    "enabled",
    "disabledTools",
    "includeTools",
    "excludeTools",
    "alwaysAllow",
    "autoApprove",
];

/// Keys other hosts define that do not change how the server is launched; accepted quietly.
const KNOWN_ELSEWHERE: &[&str] = &[
    "description",
    "dev",
    "gallery",
    "version",
    "timeout",
    "trust",
    "oauth",
    "icon",
    "title",
];

/// The fields of one server entry, type-checked but not expanded.
pub struct RawServer {
    kind: Kind,
    /// Declared `"disabled": true` (or `"enabled": false`).
    pub disabled: bool,
    /// `disabledTools`, `includeTools`, `excludeTools`, `alwaysAllow`, `autoApprove`.
    pub tools: ToolFilters,
    /// Things wrong that do not stop the server (unknown keys, a `disabled` that is not a
    /// boolean): reported as problems.
    pub notes: Vec<FieldError>,
}

enum Kind {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        env_file: Option<String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        sse: bool,
    },
}

impl RawServer {
    /// Read `entry` (an object). An error means the server cannot be declared at all.
    pub fn read(entry: &Node) -> Result<Self, FieldError> {
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
        let mut notes = unknown_keys(entry);
        let disabled = switch(entry, &mut notes);
        let tools = tool_filters(entry, &mut notes);
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
            Kind::Stdio {
                command,
                args: args(entry)?,
                env: map(entry, "env")?,
                env_file: string("envFile")?,
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
                headers: map(entry, "headers")?,
                sse: transport == "sse",
            }
        };
        Ok(Self {
            kind,
            disabled,
            tools,
            notes,
        })
    }

    /// Expand every `${…}` and read the `envFile`. `root` is the folder relative commands,
    /// `envFile` and the default `cwd` resolve against. The error says what is wrong and in
    /// which field.
    pub fn launch(&self, root: &Path, vars: &Vars<'_>) -> Result<Launch, LaunchError> {
        let x = |field: &'static str, text: &str| expand_field(field, text, vars);
        match &self.kind {
            Kind::Stdio {
                command,
                args,
                env,
                env_file,
                cwd,
            } => {
                let command = x("command", command)?;
                let command = if command.starts_with("./") || command.starts_with("../") {
                    root.join(&command).to_string_lossy().into_owned()
                } else {
                    command
                };
                let args = args
                    .iter()
                    .map(|a| x("args", a))
                    .collect::<Result<_, _>>()?;
                // `env` wins over the file, as in VS Code.
                let mut all = match env_file {
                    Some(file) => read_env_file(root, &x("envFile", file)?, file)?,
                    None => BTreeMap::new(),
                };
                for (k, v) in env {
                    all.insert(k.clone(), x("env", v)?);
                }
                let cwd = match cwd {
                    None => root.to_path_buf(),
                    Some(cwd) => root.join(x("cwd", cwd)?),
                };
                Ok(Launch::Stdio {
                    command,
                    args,
                    env: all,
                    cwd: Some(cwd),
                })
            }
            Kind::Http { url, headers, sse } => expand_remote(url, headers, *sse, vars),
        }
    }
}

/// The variables of an `envFile` (`path` expanded, `written` as in the manifest).
fn read_env_file(
    root: &Path,
    path: &str,
    written: &str,
) -> Result<BTreeMap<String, String>, LaunchError> {
    let path = root.join(path);
    // Read like every source file: a FIFO or a device is refused, never waited on.
    crate::file_read::read_text(&path, crate::file_read::MAX_SOURCE_BYTES)
        .map(|text| super::dotenv::parse(&text))
        .map_err(|error| LaunchError::unreadable("envFile", written, error.to_string()))
}

/// `"disabled": true` or `"enabled": false`; anything but a boolean is noted and ignored.
fn switch(entry: &Node, notes: &mut Vec<FieldError>) -> bool {
    let mut flag = |key: &str| match entry.get(key).map(|m| &m.node) {
        None => None,
        Some(Node {
            value: Value::Bool(b),
            ..
        }) => Some(*b),
        Some(node) => {
            notes.push((
                node.span.start,
                format!(
                    "`{key}` must be true or false, found {}; ignored",
                    node.type_name()
                ),
            ));
            None
        }
    };
    let disabled = flag("disabled");
    let enabled = flag("enabled");
    disabled.unwrap_or(enabled == Some(false))
}

/// The tool lists of an entry: `disabledTools` (Roo Code, Cline), `includeTools` and
/// `excludeTools` (Gemini CLI), `alwaysAllow` (Roo Code, Cline) and `autoApprove` (Cline,
/// Kiro, Amazon Q). A list that is not an array of strings is noted and ignored (an
/// `includeTools` so ignored hides nothing).
fn tool_filters(entry: &Node, notes: &mut Vec<FieldError>) -> ToolFilters {
    let mut list = |key: &str| -> Option<Vec<String>> {
        let node = &entry.get(key)?.node;
        let items = match &node.value {
            Value::Array(items) => items,
            _ => {
                notes.push((
                    node.span.start,
                    format!(
                        "`{key}` must be an array of tool names, found {}; ignored",
                        node.type_name()
                    ),
                ));
                return None;
            }
        };
        let mut names = Vec::new();
        for item in items {
            match &item.value {
                Value::String(name) => names.push(name.clone()),
                _ => {
                    notes.push((
                        item.span.start,
                        format!(
                            "`{key}` items must be tool names, found {}; `{key}` ignored",
                            item.type_name()
                        ),
                    ));
                    return None;
                }
            }
        }
        Some(names)
    };
    let disabled = list("disabledTools").unwrap_or_default();
    let include = list("includeTools");
    let exclude = list("excludeTools").unwrap_or_default();
    let mut pre_approved = list("alwaysAllow").unwrap_or_default();
    pre_approved.extend(list("autoApprove").unwrap_or_default());
    ToolFilters {
        disabled,
        include,
        exclude,
        pre_approved,
    }
}

fn args(entry: &Node) -> Result<Vec<String>, FieldError> {
    let Some(m) = entry.get("args") else {
        return Ok(Vec::new());
    };
    match &m.node.value {
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
            .collect(),
        _ => Err((
            m.node.span.start,
            format!("`args` must be an array, found {}", m.node.type_name()),
        )),
    }
}

fn map(entry: &Node, key: &str) -> Result<BTreeMap<String, String>, FieldError> {
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
}

/// A note for every key neither used here nor known from another host, with the nearest
/// used key when it looks like a typo.
fn unknown_keys(entry: &Node) -> Vec<FieldError> {
    let Some(members) = entry.members() else {
        return Vec::new();
    };
    members
        .iter()
        .filter(|m| !m.key.starts_with('$') && !m.key.starts_with("//"))
        .filter(|m| !USED.contains(&m.key.as_str()) && !KNOWN_ELSEWHERE.contains(&m.key.as_str()))
        .map(|m| {
            let hint = nearest(&m.key)
                .map(|k| format!(" (did you mean `{k}`?)"))
                .unwrap_or_default();
            (
                m.span.start,
                format!("unknown key `{}`{hint}; ignored", m.key),
            )
        })
        .collect()
}

/// The used key `key` is most likely a typo of (`crate::guess`).
fn nearest(key: &str) -> Option<&'static str> {
    crate::guess::nearest(key, USED.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(text: &str) -> Vec<String> {
        let node = super::super::json::parse(text).expect("json");
        RawServer::read(&node)
            .expect("declared")
            .notes
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    }

    #[test]
    fn misspelt_and_unknown_keys_are_noted_and_the_server_kept() {
        assert_eq!(
            notes(
                r#"{"command": "x", "arg": ["a"], "enviroment": {}, "frobnicate": 1, "description": "ok", "$comment": "ok"}"#
            ),
            [
                "unknown key `arg` (did you mean `args`?); ignored",
                "unknown key `enviroment` (did you mean `env`?); ignored",
                "unknown key `frobnicate`; ignored",
            ]
        );
        assert_eq!(
            notes(r#"{"command": "x", "éé": 1}"#),
            ["unknown key `éé`; ignored"]
        );
        assert_eq!(
            notes(r#"{"command": "x", "disabled": "true"}"#),
            ["`disabled` must be true or false, found a string; ignored"]
        );
    }

    fn tools(text: &str) -> ToolFilters {
        let node = super::super::json::parse(text).expect("json");
        RawServer::read(&node).expect("declared").tools
    }

    #[test]
    fn tool_lists_of_every_dialect_are_read() {
        let t = tools(
            r#"{"command": "x", "disabledTools": ["a"], "includeTools": ["a", "b", "c"],
                "excludeTools": ["c"], "alwaysAllow": ["b"], "autoApprove": ["d"]}"#,
        );
        assert_eq!(t.disabled, ["a"]);
        assert_eq!(
            t.include.as_deref(),
            Some(&["a".into(), "b".into(), "c".into()][..])
        );
        assert_eq!(t.exclude, ["c"]);
        assert_eq!(t.pre_approved, ["b", "d"]);
        // disabled and excluded win over included; what is not included is hidden.
        assert!(t.hides("a") && t.hides("c") && t.hides("z"));
        assert!(!t.hides("b"));
        assert!(tools(r#"{"command": "x"}"#).is_empty());
        assert!(!tools(r#"{"command": "x", "includeTools": "a"}"#).hides("z"));
    }

    #[test]
    fn a_tool_list_of_the_wrong_shape_is_noted_and_ignored() {
        assert_eq!(
            notes(r#"{"command": "x", "disabledTools": "a", "includeTools": ["a", 1]}"#),
            [
                "`disabledTools` must be an array of tool names, found a string; ignored",
                "`includeTools` items must be tool names, found a number; `includeTools` ignored",
            ]
        );
        assert_eq!(
            notes(r#"{"command": "x", "includeTool": []}"#),
            ["unknown key `includeTool` (did you mean `includeTools`?); ignored"]
        );
    }
}
