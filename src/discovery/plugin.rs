//! One plugin folder in any dialect (Open Plugins, Claude, Cursor, Agent Plugins, Copilot):
//! detects the dialect, reads the manifest, collects components and MCP servers into one
//! `plugin` customization.

use std::path::{Component, Path, PathBuf};

use ahp_types::state::{ChildCustomization, Customization, HookCustomization, PluginCustomization};

use super::components::{self, Bounds};
use super::expand::Vars;
use super::json::{self, Node, Value};
use super::mcp::{self, ServerScope, Servers};
use super::source::{failure, SourceFile};
use super::{display_path, Context, Problems, Scan};
use crate::spec::{ContentKind, Problem};

/// The plugin formats ahp-proxy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Root `plugin.json` with an agent-plugins.org `$schema`.
    AgentPlugins,
    /// `.plugin/plugin.json`.
    OpenPlugins,
    /// `.claude-plugin/plugin.json`.
    Claude,
    /// `.cursor-plugin/plugin.json`.
    Cursor,
    /// Root `plugin.json` without `$schema` (Copilot legacy).
    Copilot,
    /// No manifest, only component folders; named after the folder.
    Bare,
}

/// Files and folders whose presence makes a folder a plugin. (`prompts/` is read inside a
/// plugin but does not make one: a bare folder of prompt files is a `directory`.)
const MARKERS: &[&str] = &[
    ".plugin",
    ".claude-plugin",
    ".cursor-plugin",
    "plugin.json",
    "skills",
    "commands",
    "agents",
    "rules",
    "hooks",
    "hooks.json",
    ".mcp.json",
    "mcp.json",
    "SKILL.md",
];

/// Whether `name` directly inside a plugin root changes what kind of root it is.
pub fn is_marker(name: &str) -> bool {
    MARKERS.contains(&name)
}

/// Whether `dir` looks like a plugin folder.
pub fn looks_like_plugin(dir: &Path) -> bool {
    MARKERS.iter().any(|m| components::present(&dir.join(m)))
}

/// The plugin folders of a configured root: the root itself when it is a plugin, otherwise
/// its sub-folders that look like plugins (hidden ones skipped), sorted. A symbolic link
/// loop among them is kept too, so that its scan reports it instead of passing over it.
pub fn plugin_folders(root: &Path) -> Result<Vec<PathBuf>, Problem> {
    if looks_like_plugin(root) {
        return Ok(vec![root.to_path_buf()]);
    }
    let entries = std::fs::read_dir(root).map_err(|e| {
        Problem::at(
            root.display().to_string(),
            format!("cannot list plugin folder: {e}"),
        )
    })?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            (p.is_dir() || components::loops(p))
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with('.'))
                && (components::loops(p) || looks_like_plugin(p))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Which dialect `dir` is in, and its manifest file if any.
pub fn detect(dir: &Path) -> (Dialect, Option<PathBuf>) {
    let root_manifest = dir.join("plugin.json");
    if root_manifest.is_file() {
        if let Ok(file) = SourceFile::read(&root_manifest, String::new()) {
            let schema = json::parse(&file.text).ok().and_then(|n| {
                n.get("$schema")
                    .and_then(|m| m.node.as_str().map(str::to_string))
            });
            if schema.is_some_and(|s| s.contains("agent-plugins.org")) {
                return (Dialect::AgentPlugins, Some(root_manifest));
            }
        }
    }
    for (sub, dialect) in [
        (".plugin", Dialect::OpenPlugins),
        (".claude-plugin", Dialect::Claude),
        (".cursor-plugin", Dialect::Cursor),
    ] {
        let manifest = dir.join(sub).join("plugin.json");
        if manifest.is_file() || components::loops(&manifest) {
            return (dialect, Some(manifest));
        }
    }
    if root_manifest.is_file() || components::loops(&root_manifest) {
        return (Dialect::Copilot, Some(root_manifest));
    }
    (Dialect::Bare, None)
}

/// Scan one plugin folder into a `plugin` customization and its servers.
pub fn scan_plugin(dir: &Path, ctx: &Context) -> Scan {
    let display_base = dir.parent().unwrap_or(dir).to_path_buf();
    let folder_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.to_string_lossy().into_owned());
    let mut problems = Problems::default();
    let uri = super::uri::file_uri(dir);
    let container = |name: String, version: Option<String>, load, children| PluginCustomization {
        id: uri.clone(),
        uri: uri.clone(),
        name,
        icons: None,
        range: None,
        meta: None,
        client_id: None,
        load: Some(load),
        children,
        enablement: None,
        version,
    };
    let root = match std::fs::canonicalize(dir) {
        Ok(root) => root,
        Err(e) => {
            problems.push(failure(
                &display_path(dir, &display_base),
                "cannot open plugin folder",
                &e,
            ));
            let plugin = container(folder_name, None, problems.error_state(), Some(Vec::new()));
            return finish(dir, plugin, Servers::default(), problems);
        }
    };
    let (dialect, manifest_path) = detect(dir);
    let bounds = Bounds {
        root: &root,
        display_base: &display_base,
    };
    let manifest = match &manifest_path {
        None => None,
        Some(path) => match bounds
            .check(path)
            .map_err(|message| (message, false))
            .and_then(|_| read_manifest(path, &display_base))
        {
            Ok(manifest) => Some(manifest),
            Err((message, unparsable)) => {
                problems.push(message);
                if unparsable {
                    // Mid-edit, probably: whatever the plugin declared stays as it was.
                    problems.unparsable(&uri);
                }
                let plugin = container(folder_name, None, problems.error_state(), Some(Vec::new()));
                return finish(dir, plugin, Servers::default(), problems);
            }
        },
    };
    let field = |key: &str| manifest.as_ref().and_then(|(_, node)| node.get(key));
    let text_field = |key: &str| {
        field(key)
            .and_then(|m| m.node.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let plain_name = text_field("name");
    let name = text_field("displayName")
        .or(plain_name.clone())
        .unwrap_or(folder_name);
    if dialect == Dialect::AgentPlugins {
        if let (Some((file, _)), Some(n)) = (&manifest, &plain_name) {
            if !valid_agent_plugins_name(n) {
                let at = field("name").map_or(0, |m| m.node.span.start);
                problems.warn(file, at, format!("plugin name {n:?} is not valid for Agent Plugins (1-64 of a-z, 0-9, '.', '-')"));
            }
        }
    }
    let mut children: Vec<ChildCustomization> = Vec::new();
    let seen = std::cell::RefCell::new(std::collections::HashSet::new());
    let component = |kind: ContentKind,
                     key: &str,
                     default: &[&str],
                     children: &mut Vec<ChildCustomization>,
                     problems: &mut Problems| {
        let dirs = match (field(key), &manifest) {
            (Some(member), Some((file, _))) => {
                override_paths(&member.node, file, &root, problems).unwrap_or_default()
            }
            _ => default.iter().map(|d| dir.join(d)).collect(),
        };
        for d in dirs {
            for child in components::scan_dir(kind, &d, &bounds, problems) {
                let id = child_id(&child).map(str::to_string);
                if id.is_none_or(|id| seen.borrow_mut().insert(id)) {
                    children.push(child);
                }
            }
        }
    };
    let ext = "com.github.copilot";
    component(
        ContentKind::Agent,
        "agents",
        &["agents", &format!("{ext}/agents")],
        &mut children,
        &mut problems,
    );
    component(
        ContentKind::Skill,
        "skills",
        &["skills"],
        &mut children,
        &mut problems,
    );
    component(
        ContentKind::Command,
        "commands",
        &["commands", &format!("{ext}/commands")],
        &mut children,
        &mut problems,
    );
    component(
        ContentKind::Prompt,
        "prompts",
        &["prompts"],
        &mut children,
        &mut problems,
    );
    component(
        ContentKind::Rule,
        "rules",
        &["rules", &format!("{ext}/rules")],
        &mut children,
        &mut problems,
    );
    let root_skill = dir.join("SKILL.md");
    if field("skills").is_none() && !dir.join("skills").exists() && root_skill.is_file() {
        match bounds.check(&root_skill) {
            Err(message) => problems.push(message),
            Ok(_) => {
                if let Some(child) = components::parse_file(
                    ContentKind::Skill,
                    &root_skill,
                    &display_base,
                    &mut problems,
                ) {
                    children.push(child);
                }
            }
        }
    }
    hooks(
        dir,
        &root,
        manifest.as_ref(),
        &bounds,
        &mut children,
        &mut problems,
    );

    let data = ctx.plugin_data(plain_name.as_deref().unwrap_or(&name), &root);
    let root_text = root.to_string_lossy().into_owned();
    let data_text = data.to_string_lossy().into_owned();
    let scope = ServerScope {
        root: &root,
        vars: Vars {
            plugin_root: &root_text,
            plugin_data: &data_text,
            workspace: &root_text,
            env: &*ctx.env,
        },
        plugin: None,
    };
    let servers = mcp_servers(dir, manifest.as_ref(), &scope, &bounds, &mut problems);
    children.extend(servers.children.iter().cloned());
    let version = text_field("version");
    let icons = manifest.as_ref().and_then(|(file, _)| {
        let (key, member) = super::icon::KEYS
            .iter()
            .find_map(|key| field(key).map(|member| (key, member)))?;
        let at = member.node.span.start;
        let found = match member.node.as_str() {
            Some(value) => super::icon::from_manifest(value, &root, &bounds),
            None => Err(format!(
                "{key} must be a string (a URL or a file in the plugin)"
            )),
        };
        found
            .map_err(|message| problems.warn(file, at, message))
            .ok()
    });
    let mut plugin = container(name, version, problems.load_state(), Some(children));
    plugin.icons = icons.map(|icon| vec![icon]);
    finish(dir, plugin, servers, problems)
}

fn finish(dir: &Path, plugin: PluginCustomization, servers: Servers, problems: Problems) -> Scan {
    Scan {
        customizations: vec![Customization::Plugin(plugin)],
        servers: servers.declared,
        problems: problems.list,
        watched: vec![dir.to_path_buf()],
        unparsable: problems.unparsable,
    }
}

/// The id of a child customization (`None` for kinds this version does not know).
pub fn child_id(child: &ChildCustomization) -> Option<&str> {
    Some(match child {
        ChildCustomization::Agent(c) => &c.id,
        ChildCustomization::Skill(c) => &c.id,
        ChildCustomization::Prompt(c) => &c.id,
        ChildCustomization::Rule(c) => &c.id,
        ChildCustomization::Hook(c) => &c.id,
        ChildCustomization::McpServer(c) => &c.id,
        ChildCustomization::Unknown(_) => return None,
    })
}

fn valid_agent_plugins_name(name: &str) -> bool {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    (1..=64).contains(&name.len())
        && ok_chars
        && ends_ok(name.chars().next())
        && ends_ok(name.chars().last())
        && !name.contains("--")
        && !name.contains("..")
}

/// Read and parse a manifest; the error is the problem (at `file:line:col`) and whether the
/// file was read but did not parse (rather than missing or unreadable).
fn read_manifest(path: &Path, display_base: &Path) -> Result<(SourceFile, Node), (Problem, bool)> {
    let file = SourceFile::read(path, display_path(path, display_base)).map_err(|m| (m, false))?;
    let node = json::parse(&file.text).map_err(|e| {
        let problem = Problem::at(
            file.location(e.offset),
            format!("invalid JSON: {}; plugin not loaded", e.message),
        );
        (problem, true)
    })?;
    if node.members().is_none() {
        let problem = Problem::at(
            file.location(node.span.start),
            format!(
                "the manifest must be a JSON object, found {}",
                node.type_name()
            ),
        );
        return Err((problem, true));
    }
    Ok((file, node))
}

/// A manifest path override: `"./x"`, `["./x", "./y"]` or `{"paths": [...]}`. Paths must stay
/// inside the plugin folder.
fn override_paths(
    node: &Node,
    file: &SourceFile,
    root: &Path,
    problems: &mut Problems,
) -> Option<Vec<PathBuf>> {
    let items: Vec<&Node> = match &node.value {
        Value::String(_) => vec![node],
        Value::Array(items) => items.iter().collect(),
        Value::Object(_) => match node.get("paths") {
            Some(m) => match &m.node.value {
                Value::Array(items) => items.iter().collect(),
                Value::String(_) => vec![&m.node],
                _ => Vec::new(),
            },
            None => Vec::new(),
        },
        _ => Vec::new(),
    };
    if items.is_empty() {
        problems.warn(
            file,
            node.span.start,
            format!(
                "expected a path, a list of paths or {{\"paths\": [...]}}, found {}",
                node.type_name()
            ),
        );
        return None;
    }
    let mut out = Vec::new();
    for item in items {
        match item.as_str().map(|p| inside(root, p)) {
            Some(Ok(path)) => out.push(path),
            Some(Err(message)) => problems.warn(file, item.span.start, message),
            None => problems.warn(
                file,
                item.span.start,
                format!("expected a path string, found {}", item.type_name()),
            ),
        }
    }
    Some(out)
}

/// `root/relative`, refusing absolute paths and `..` that climbs out of `root`.
pub fn inside(root: &Path, relative: &str) -> Result<PathBuf, String> {
    let rel = Path::new(relative);
    let mut depth = 0usize;
    for part in rel.components() {
        match part {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            _ => {
                return Err(format!(
                    "path {relative:?} escapes the plugin folder; ignored"
                ))
            }
        }
    }
    Ok(root.join(rel))
}

fn hooks(
    dir: &Path,
    root: &Path,
    manifest: Option<&(SourceFile, Node)>,
    bounds: &Bounds<'_>,
    children: &mut Vec<ChildCustomization>,
    problems: &mut Problems,
) {
    let mut files: Vec<PathBuf> = Vec::new();
    match manifest.and_then(|(file, node)| node.get("hooks").map(|m| (file, m))) {
        Some((file, member)) if member.node.members().is_some() => {
            if components::check_hooks_object(&member.node, file, problems).is_some() {
                children.push(ChildCustomization::Hook(HookCustomization {
                    id: format!("{}#hooks", file.uri),
                    uri: file.uri.clone(),
                    name: "hooks".into(),
                    icons: None,
                    range: Some(file.range(member.span.clone())),
                    meta: None,
                    enabled: None,
                }));
            }
            return;
        }
        Some((file, member)) => {
            files.extend(override_paths(&member.node, file, root, problems).unwrap_or_default())
        }
        None => {
            for default in [
                "hooks/hooks.json",
                "hooks.json",
                "com.github.copilot/hooks/hooks.json",
            ] {
                files.push(dir.join(default));
            }
        }
    }
    for path in files
        .into_iter()
        .filter(|p| p.is_file() || components::loops(p))
    {
        if let Err(message) = bounds.check(&path) {
            problems.push(message);
            continue;
        }
        if let Some(child) =
            components::parse_file(ContentKind::Hook, &path, bounds.display_base, problems)
        {
            children.push(child);
        }
    }
}

fn mcp_servers(
    dir: &Path,
    manifest: Option<&(SourceFile, Node)>,
    scope: &ServerScope<'_>,
    bounds: &Bounds<'_>,
    problems: &mut Problems,
) -> Servers {
    let mut files = Vec::new();
    match manifest.and_then(|(file, node)| node.get("mcpServers").map(|m| (file, m))) {
        Some((file, member))
            if member.node.members().is_some() && member.node.get("paths").is_none() =>
        {
            return mcp::parse_servers(mcp::unwrap_inline(&member.node), file, scope, problems);
        }
        Some((file, member)) => files
            .extend(override_paths(&member.node, file, scope.root, problems).unwrap_or_default()),
        None => files.extend([dir.join(".mcp.json"), dir.join("mcp.json")]),
    }
    let mut all = Servers::default();
    for path in files.into_iter().filter(|p| components::present(p)) {
        if let Err(message) = bounds.check(&path) {
            problems.push(message);
            continue;
        }
        let file = match SourceFile::read(&path, display_path(&path, bounds.display_base)) {
            Ok(file) => file,
            Err(message) => {
                problems.push(message);
                continue;
            }
        };
        let node = match json::parse(&file.text) {
            Ok(node) => node,
            Err(e) => {
                problems.warn(
                    &file,
                    e.offset,
                    format!(
                        "invalid JSON: {}; nothing new loaded from it (servers it declared before keep running)",
                        e.message
                    ),
                );
                problems.unparsable(&file.uri);
                continue;
            }
        };
        let Some(map) = mcp::server_map(&node, &file, problems) else {
            problems.unparsable(&file.uri);
            continue;
        };
        let servers = mcp::parse_servers(map, &file, scope, problems);
        all.merge_first_wins(servers, problems);
    }
    all
}
