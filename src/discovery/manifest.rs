//! Stand-alone manifest files: `plugins.json` (inline plugins, `source` folders, servers),
//! `.mcp.json` (wrapped or flat), VS Code `mcp.json` (`servers`, `inputs`) and Claude
//! Desktop's config. The file itself is a `plugin` container holding its top-level servers.

use std::path::{Path, PathBuf};

use ahp_types::state::{ChildCustomization, Customization, HookCustomization, PluginCustomization};

use super::components;
use super::expand::Vars;
use super::json::{self, Member, Node, Value};
use super::mcp::{self, ServerScope, Servers};
use super::plugin;
use super::source::SourceFile;
use super::{display_path, Context, Problems, Scan};
use crate::spec::Problem;

/// Scan one manifest file.
pub fn scan_manifest(path: &Path, ctx: &Context) -> Scan {
    let folder = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut problems = Problems::default();
    let mut scan = Scan {
        watched: vec![path.to_path_buf()],
        ..Scan::default()
    };
    // A manifest that cannot be read is named by its whole path (which file is missing?);
    // one that was read, by its file name, in the locations of its messages.
    let parsed = SourceFile::read(path, path.display().to_string())
        .map(|mut file| {
            file.display = display_path(path, &folder);
            file
        })
        .map_err(|message| (message, false))
        .and_then(|file| match json::parse(&file.text) {
            Ok(node) if node.members().is_some() => Ok((file, node)),
            Ok(node) => Err((
                Problem::at(
                    file.location(node.span.start),
                    format!(
                        "expected a JSON object, found {}; nothing new loaded",
                        node.type_name()
                    ),
                ),
                true,
            )),
            Err(e) => Err((
                Problem::at(
                    file.location(e.offset),
                    format!("invalid JSON: {}; nothing new loaded", e.message),
                ),
                true,
            )),
        });
    let (file, root) = match parsed {
        Ok(parsed) => parsed,
        Err((message, unparsable)) => {
            problems.push(message);
            if unparsable {
                // Mid-edit, probably: the servers it declared stay as they were.
                problems.unparsable(&super::uri::file_uri(path));
            }
            let container = file_container(path, file_name, problems.error_state(), Vec::new());
            scan.customizations.push(container);
            scan.problems = problems.list;
            scan.unparsable = problems.unparsable;
            return scan;
        }
    };
    let name = root
        .get("name")
        .and_then(|m| m.node.as_str())
        .filter(|s| !s.is_empty())
        .map_or(file_name, str::to_string);
    let folder_text = folder.to_string_lossy().into_owned();
    let data = ctx.plugin_data(&name, path).to_string_lossy().into_owned();
    // VS Code's `.vscode/mcp.json` and Cursor's `.cursor/mcp.json` belong to the project
    // folder above them: it is `${workspaceFolder}`, and their stdio servers start there.
    let workspace_dir = workspace_of(&folder);
    let workspace = workspace_dir.to_string_lossy().into_owned();
    let scope = ServerScope {
        root: &workspace_dir,
        vars: Vars {
            plugin_root: &folder_text,
            plugin_data: &data,
            workspace: &workspace,
            env: &*ctx.env,
        },
        plugin: None,
    };

    let mut plugins_declared = false;
    if let Some(member) = root.get("plugins") {
        plugins_declared = true;
        let entries: Vec<(Option<&str>, &Member, &Node)> = match &member.node.value {
            Value::Array(items) => items.iter().map(|n| (None, member, n)).collect(),
            Value::Object(members) => members
                .iter()
                .map(|m| (Some(m.key.as_str()), m, &m.node))
                .collect(),
            _ => {
                problems.warn(
                    &file,
                    member.node.span.start,
                    format!(
                        "`plugins` must be an array or an object, found {}",
                        member.node.type_name()
                    ),
                );
                Vec::new()
            }
        };
        for (key, key_member, node) in entries {
            let span = match key {
                Some(_) => key_member.span.clone(),
                None => node.span.clone(),
            };
            plugin_entry(
                key,
                span,
                node,
                &file,
                &folder,
                ctx,
                &mut scan,
                &mut problems,
            );
        }
    }
    let has_servers = root.get("mcpServers").is_some() || root.get("servers").is_some();
    let servers = if has_servers || !plugins_declared {
        match mcp::server_map(&root, &file, &mut problems) {
            Some(map) => mcp::parse_servers(map, &file, &scope, &mut problems),
            None => Servers::default(),
        }
    } else {
        Servers::default()
    };
    if has_servers || !plugins_declared || !problems.list.is_empty() {
        let container = file_container(path, name, problems.load_state(), servers.children);
        scan.customizations.insert(0, container);
        scan.servers.splice(0..0, servers.declared);
    }
    scan.problems.splice(0..0, problems.list);
    scan.unparsable.extend(problems.unparsable);
    scan
}

/// The project folder a manifest in `folder` belongs to: the parent of `.vscode/` or
/// `.cursor/`, else the folder itself.
fn workspace_of(folder: &Path) -> PathBuf {
    let editor = folder
        .file_name()
        .is_some_and(|n| n == ".vscode" || n == ".cursor");
    match folder.parent() {
        Some(parent) if editor => parent.to_path_buf(),
        _ => folder.to_path_buf(),
    }
}

/// Whether an earlier entry of this file already produced the container `id` (a second one
/// would be hidden by the catalog, its servers running with nothing to show them).
fn already_declared(scan: &Scan, id: &str) -> bool {
    scan.customizations.iter().any(|c| match c {
        Customization::Plugin(p) => p.id == id,
        Customization::Directory(d) => d.id == id,
        Customization::McpServer(m) => m.id == id,
        Customization::Unknown(_) => false,
    })
}

fn file_container(
    path: &Path,
    name: String,
    load: ahp_types::state::CustomizationLoadState,
    children: Vec<ChildCustomization>,
) -> Customization {
    let uri = super::uri::file_uri(path);
    Customization::Plugin(PluginCustomization {
        id: uri.clone(),
        uri,
        name,
        icons: None,
        range: None,
        meta: None,
        client_id: None,
        load: Some(load),
        children: Some(children),
        enablement: None,
        version: None,
    })
}

/// One entry of `plugins`: `{"source": "./folder"}` (a plugin folder, scanned as such) or an
/// inline plugin declaration with `name`, `version`, `mcpServers` and `hooks`.
#[allow(clippy::too_many_arguments)]
fn plugin_entry(
    key: Option<&str>,
    span: std::ops::Range<usize>,
    node: &Node,
    file: &SourceFile,
    folder: &Path,
    ctx: &Context,
    scan: &mut Scan,
    problems: &mut Problems,
) {
    if node.members().is_none() {
        let found = node.type_name();
        problems.warn(
            file,
            node.span.start,
            format!("a `plugins` entry must be an object, found {found}"),
        );
        return;
    }
    if let Some(source) = node.get("source") {
        let Some(relative) = source.node.as_str() else {
            problems.warn(
                file,
                source.node.span.start,
                "`source` must be a path string".into(),
            );
            return;
        };
        // Normalized, so that `./p`, `p` and `p/` are one folder with one id.
        let dir: PathBuf = crate::config::normalize(&folder.join(relative));
        if !dir.is_dir() {
            problems.warn(
                file,
                source.node.span.start,
                format!("plugin folder {relative:?} does not exist"),
            );
            scan.watched.push(dir);
            return;
        }
        if already_declared(scan, &super::uri::file_uri(&dir)) {
            problems.warn(
                file,
                source.node.span.start,
                format!("plugin folder {relative:?} is already listed; this entry is ignored"),
            );
            return;
        }
        let inner = plugin::scan_plugin(&dir, ctx);
        scan.customizations.extend(inner.customizations);
        scan.servers.extend(inner.servers);
        scan.problems.extend(inner.problems);
        scan.watched.extend(inner.watched);
        return;
    }
    let name = node
        .get("name")
        .and_then(|m| m.node.as_str())
        .or(key)
        .filter(|s| !s.is_empty());
    let Some(name) = name else {
        problems.warn(
            file,
            node.span.start,
            "an inline plugin needs a `name` (or a `source` folder)".into(),
        );
        return;
    };
    let id = format!(
        "{}#plugin={}",
        file.uri,
        super::uri::fragment_component(name)
    );
    if already_declared(scan, &id) {
        problems.warn(
            file,
            span.start,
            format!("plugin {name:?} is declared twice; this entry is ignored"),
        );
        return;
    }
    let mut own = Problems::default();
    let folder_text = folder.to_string_lossy().into_owned();
    let data = ctx
        .plugin_data(name, &file.path.join(name))
        .to_string_lossy()
        .into_owned();
    let scope = ServerScope {
        root: folder,
        vars: Vars {
            plugin_root: &folder_text,
            plugin_data: &data,
            workspace: &folder_text,
            env: &*ctx.env,
        },
        plugin: Some(&id),
    };
    let mut children = Vec::new();
    if let Some(hooks) = node.get("hooks") {
        if components::check_hooks_object(&hooks.node, file, &mut own).is_some() {
            children.push(ChildCustomization::Hook(HookCustomization {
                id: format!("{id}/hooks"),
                uri: file.uri.clone(),
                name: "hooks".into(),
                icons: None,
                range: Some(file.range(hooks.span.clone())),
                meta: None,
                enabled: None,
            }));
        }
    }
    let servers = match node.get("mcpServers") {
        Some(m) if m.node.members().is_some() => {
            mcp::parse_servers(mcp::unwrap_inline(&m.node), file, &scope, &mut own)
        }
        Some(m) => {
            own.warn(
                file,
                m.node.span.start,
                format!(
                    "`mcpServers` must be an object, found {}",
                    m.node.type_name()
                ),
            );
            Servers::default()
        }
        None => Servers::default(),
    };
    children.extend(servers.children);
    let version = node
        .get("version")
        .and_then(|m| m.node.as_str())
        .map(str::to_string);
    scan.customizations
        .push(Customization::Plugin(PluginCustomization {
            id,
            uri: file.uri.clone(),
            name: node
                .get("displayName")
                .and_then(|m| m.node.as_str())
                .unwrap_or(name)
                .to_string(),
            icons: None,
            range: Some(file.range(span)),
            meta: None,
            client_id: None,
            load: Some(own.load_state()),
            children: Some(children),
            enablement: None,
            version,
        }));
    scan.servers.extend(servers.declared);
    scan.problems.extend(own.list);
    scan.unparsable.extend(own.unparsable);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_text(name: &str, text: &str) -> (PathBuf, Scan) {
        let dir =
            std::env::temp_dir().join(format!("ahp-proxy-manifest-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("p/skills/s")).unwrap();
        std::fs::write(
            dir.join("p/.mcp.json"),
            r#"{"mcpServers": {"x": {"command": "x"}}}"#,
        )
        .unwrap();
        std::fs::write(dir.join("p/skills/s/SKILL.md"), "---\nname: s\n---\n").unwrap();
        let path = dir.join("plugins.json");
        std::fs::write(&path, text).unwrap();
        let ctx = Context {
            data_dir: dir.join("data"),
            env: Box::new(|_| None),
        };
        let scan = scan_manifest(&path, &ctx);
        (dir, scan)
    }

    fn ids(scan: &Scan) -> Vec<String> {
        scan.servers.iter().map(|s| s.id.clone()).collect()
    }

    // Found by fuzzing: two inline plugins of one name made two containers with one id (the
    // catalog hid the second while its servers still ran), and servers of the same name in
    // two inline plugins shared an id (one ran, both showed its state).
    #[test]
    fn inline_plugins_and_their_servers_get_ids_of_their_own() {
        let (_, scan) = scan_text(
            "inline",
            r#"{"plugins": [
                {"name": "a", "mcpServers": {"s": {"command": "one"}}},
                {"name": "b", "mcpServers": {"s": {"command": "two"}}},
                {"name": "a", "mcpServers": {"t": {"command": "three"}}}
            ], "mcpServers": {"s": {"command": "top"}}}"#,
        );
        let file = crate::discovery::uri::file_uri(&scan.watched[0]);
        assert_eq!(
            ids(&scan),
            [
                format!("{file}#mcp=s"),
                format!("{file}#plugin=a/mcp=s"),
                format!("{file}#plugin=b/mcp=s"),
            ]
        );
        assert_eq!(scan.customizations.len(), 3, "the second `a` is not shown");
        assert_eq!(scan.problems.len(), 1, "{:?}", scan.problems);
        assert!(scan.problems[0].message.contains("declared twice"));
        assert!(
            scan.problems[0].location.ends_with(":4:17"),
            "{:?}",
            scan.problems[0]
        );
    }

    #[test]
    fn a_plugin_folder_listed_twice_is_scanned_once() {
        let (dir, scan) = scan_text(
            "source",
            r#"{"plugins": [{"source": "./p"}, {"source": "p/"}, {"source": "p/../p"}]}"#,
        );
        let folder = crate::discovery::uri::file_uri(&dir.join("p"));
        assert_eq!(ids(&scan), [format!("{folder}/.mcp.json#mcp=x")]);
        // The folder once, and the file itself, degraded, to show the two problems.
        assert_eq!(scan.customizations.len(), 2);
        assert_eq!(scan.problems.len(), 2, "{:?}", scan.problems);
        assert!(scan.problems[0].message.contains("already listed"));
    }
}
