//! Targets for everything that reads user-written files: JSON(C) with positions, YAML
//! frontmatter, `proxy.toml`, stand-alone MCP manifests and plugin folders of every dialect.

use std::collections::HashSet;
use std::path::Path;

use ahp_types::state::{ChildCustomization, Customization};
use serde_json::Value as JsonValue;

use super::scratch::{self, Scratch};
use super::{split_parts, variant};
use crate::discovery::components;
use crate::discovery::json::{self as positioned, Node, Value};
use crate::discovery::source::SourceFile;
use crate::discovery::{self, manifest as manifests, plugin as plugins, Context, Problems, Scan};
use crate::spec::ContentKind;

/// `discovery::json::parse` on UTF-8 text. Spans stay inside the text on character
/// boundaries and nest; any text `serde_json` accepts is accepted with the same value.
pub fn json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = SourceFile::from_text(Path::new("/fuzz/x.json"), "x.json".into(), text.into());
    let parsed = positioned::parse(text);
    match &parsed {
        Ok(node) => {
            check_spans(text, &file, node, 0..text.len());
            if let Some(members) = node.members() {
                for (earlier, later) in positioned::duplicates(members) {
                    assert_eq!(earlier.key, later.key);
                    assert!(earlier.span.end <= later.span.start);
                }
            }
        }
        Err(error) => {
            assert!(error.offset <= text.len(), "error offset past the end");
            let _ = file.location(error.offset);
        }
    }
    if let Ok(expected) = serde_json::from_str::<JsonValue>(text) {
        let node = parsed.expect("valid JSON was refused");
        assert_eq!(plain(&node), expected, "a value differs from serde_json's");
    }
}

fn check_spans(text: &str, file: &SourceFile, node: &Node, within: std::ops::Range<usize>) {
    let span = &node.span;
    assert!(
        within.start <= span.start && span.start <= span.end && span.end <= within.end,
        "span {span:?} is not inside {within:?}"
    );
    assert!(text.is_char_boundary(span.start) && text.is_char_boundary(span.end));
    let range = file.range(span.clone());
    assert!((range.start.line, range.start.character) <= (range.end.line, range.end.character));
    match &node.value {
        Value::Array(items) => {
            for item in items {
                check_spans(text, file, item, span.clone());
            }
        }
        Value::Object(members) => {
            for member in members {
                let m = &member.span;
                assert!(span.start <= m.start && m.end <= span.end);
                assert!(text.is_char_boundary(m.start) && text.is_char_boundary(m.end));
                assert_eq!(
                    m.end, member.node.span.end,
                    "a member ends where its value ends"
                );
                check_spans(text, file, &member.node, m.clone());
            }
        }
        _ => {}
    }
}

/// The tree as a `serde_json` value (JSON.parse semantics: the last duplicate key wins).
fn plain(node: &Node) -> JsonValue {
    match &node.value {
        Value::Null => JsonValue::Null,
        Value::Bool(b) => JsonValue::Bool(*b),
        Value::Number(n) => serde_json::from_str(n).unwrap_or(JsonValue::Null),
        Value::String(s) => JsonValue::String(s.clone()),
        Value::Array(items) => JsonValue::Array(items.iter().map(plain).collect()),
        Value::Object(members) => {
            let mut map = serde_json::Map::new();
            for member in members {
                map.insert(member.key.clone(), plain(&member.node));
            }
            JsonValue::Object(map)
        }
    }
}

/// `discovery::frontmatter::parse` and every accessor, then the same text as a component
/// file of each kind (skill, command, agent, rule, prompt) and as a hooks file.
pub fn frontmatter(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        match discovery::frontmatter::parse(text) {
            Ok(fm) => {
                for key in [
                    "name",
                    "description",
                    "tools",
                    "model",
                    "globs",
                    "alwaysApply",
                ] {
                    let _ = (fm.text(key), fm.boolean(key), fm.list(key, ','));
                }
            }
            Err(error) => assert!(error.line >= 1 && error.column >= 1),
        }
    }
    scratch::with(|scratch| {
        let dir = scratch.fresh_dir("frontmatter");
        let file = dir.join("skills/s/SKILL.md");
        Scratch::write(&file, data);
        let mut problems = Problems::default();
        for kind in [
            ContentKind::Skill,
            ContentKind::Command,
            ContentKind::Agent,
            ContentKind::Rule,
            ContentKind::Prompt,
            ContentKind::Hook,
        ] {
            if let Some(child) = components::parse_file(kind, &file, &dir, &mut problems) {
                serde_json::to_string(&child).expect("a child that does not serialize");
            }
        }
    });
}

/// `Config::parse` on `proxy.toml` text; a valid config's `[servers]` are then projected
/// as discovery does (expansion included).
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match crate::config::Config::parse(text, "proxy.toml", Path::new("/fuzz")) {
        Ok(config) => {
            let configured = discovery::configured::Configured {
                file: config.path.clone(),
                servers: config.servers.clone(),
            };
            let scan = discovery::configured::scan_configured(&configured, &context());
            check_scan(&scan, data);
        }
        Err(error) => {
            assert!(!error.problems.is_empty(), "an error without problems");
            let _ = error.to_string();
        }
    }
}

/// A stand-alone manifest: `"<digit>\n"` picks `.mcp.json` (0), `.vscode/mcp.json` (1),
/// `plugins.json` (2) or `claude_desktop_config.json` (3); the rest is the file's bytes.
/// A `plugins.json` may point at the plugin folder `./p` next to it.
pub fn manifest(data: &[u8]) {
    let (which, text) = variant(data, 4);
    scratch::with(|scratch| {
        let dir = scratch.fresh_dir("manifest");
        Scratch::write(
            &dir.join("p/.claude-plugin/plugin.json"),
            br#"{"name": "p", "mcpServers": {"s": {"command": "x"}}}"#,
        );
        Scratch::write(
            &dir.join("p/skills/s/SKILL.md"),
            b"---\nname: s\ndescription: d\n---\n",
        );
        let path = match which {
            0 => dir.join(".mcp.json"),
            1 => dir.join(".vscode/mcp.json"),
            2 => dir.join("plugins.json"),
            _ => dir.join("claude_desktop_config.json"),
        };
        Scratch::write(&path, text);
        check_scan(&manifests::scan_manifest(&path, &context()), data);
    });
}

/// A plugin folder: `"<digit>\n"` picks where the manifest goes: `.claude-plugin/` (0),
/// `.plugin/` (1), `.cursor-plugin/` (2), the root (3: Copilot, or Agent Plugins with its
/// `$schema`) or nowhere (4: a bare folder). The rest is split at NUL bytes into the
/// manifest, `.mcp.json`, `hooks/hooks.json` and `skills/s/SKILL.md` (absent parts: no file).
pub fn plugin(data: &[u8]) {
    let (which, rest) = variant(data, 5);
    let parts = split_parts(rest, 0, 4);
    scratch::with(|scratch| {
        let dir = scratch.fresh_dir("plugin").join("p");
        let manifest = match which {
            0 => Some(".claude-plugin/plugin.json"),
            1 => Some(".plugin/plugin.json"),
            2 => Some(".cursor-plugin/plugin.json"),
            3 => Some("plugin.json"),
            _ => None,
        };
        let paths = [
            manifest,
            Some(".mcp.json"),
            Some("hooks/hooks.json"),
            Some("skills/s/SKILL.md"),
        ];
        std::fs::create_dir_all(&dir).expect("cannot create a scratch folder");
        for (part, path) in parts.iter().zip(paths) {
            if let Some(path) = path {
                Scratch::write(&dir.join(path), part);
            }
        }
        check_scan(&plugins::scan_plugin(&dir, &context()), data);
    });
}

/// What `${TOKEN}` expands to: a secret that must never be shown.
const SECRET_VALUE: &str = "\u{1}fz-secret-7";
/// The part of it that survives any escaping.
const SECRET_MARK: &str = "fz-secret-7";

/// A fixed scanning context: nothing from the real environment leaks into the results.
fn context() -> Context {
    Context {
        data_dir: "/fuzz-data".into(),
        env: Box::new(|name| match name {
            "HOME" => Some("/home/fuzz".into()),
            "TOKEN" => Some(SECRET_VALUE.into()),
            _ => None,
        }),
    }
}

/// What holds for any scan of `input`: everything serializes; ids are unique (top-level ids
/// in the scan, child ids in their container), since clients address customizations by id;
/// every server declared to the supervisor has its own id and a customization showing it;
/// an expanded secret (`${TOKEN}`) appears in no customization and no problem.
fn check_scan(scan: &Scan, input: &[u8]) {
    let planted = input
        .windows(SECRET_MARK.len())
        .any(|w| w == SECRET_MARK.as_bytes());
    let mut top = HashSet::new();
    let mut shown = HashSet::new();
    for customization in &scan.customizations {
        let json =
            serde_json::to_string(customization).expect("a customization that does not serialize");
        assert!(
            planted || !json.contains(SECRET_MARK),
            "an expanded secret is shown: {json}"
        );
        let Some(id) = crate::catalog::id_of(customization) else {
            continue;
        };
        assert!(top.insert(id), "two customizations with id {id:?}");
        let children = match customization {
            Customization::Plugin(p) => p.children.as_deref(),
            Customization::Directory(d) => d.children.as_deref(),
            Customization::McpServer(_) => {
                shown.insert(id);
                None
            }
            Customization::Unknown(_) => None,
        };
        let mut inner = HashSet::new();
        for child in children.unwrap_or(&[]) {
            let Some(child_id) = plugins::child_id(child) else {
                continue;
            };
            assert!(inner.insert(child_id), "two children with id {child_id:?}");
            if let ChildCustomization::McpServer(m) = child {
                shown.insert(m.id.as_str());
            }
        }
    }
    let mut declared = HashSet::new();
    for server in &scan.servers {
        let _ = format!("{server:?}");
        let id = server.id.as_str();
        assert!(declared.insert(id), "two servers declared with id {id:?}");
        assert!(
            shown.contains(id),
            "server {id:?} is declared but nothing shows it"
        );
    }
    for problem in &scan.problems {
        let text = problem.to_string();
        assert!(
            planted || !text.contains(SECRET_MARK),
            "an expanded secret is in a problem: {text}"
        );
    }
}
