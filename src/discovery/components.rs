//! Component files: finds skills, commands, agents, rules, prompts and hook files in a folder
//! and turns each into its AHP child customization (fields from YAML frontmatter).

use std::path::{Path, PathBuf};

use ahp_types::state::{
    AgentCustomization, ChildCustomization, HookCustomization, PromptCustomization,
    RuleCustomization, SkillCustomization,
};

use super::frontmatter::{self, Frontmatter};
use super::json;
use super::source::SourceFile;
use super::{display_path, Problems};
use crate::spec::{ContentKind, Problem};

/// Where a scan may look: paths resolving outside `root` (after symlinks) are refused.
pub struct Bounds<'a> {
    /// The container folder, canonical.
    pub root: &'a Path,
    /// Messages name files relative to this folder.
    pub display_base: &'a Path,
}

impl Bounds<'_> {
    /// `Ok(canonical path)` when `path` resolves inside the root; otherwise why not.
    pub fn check(&self, path: &Path) -> Result<PathBuf, Problem> {
        let shown = display_path(path, self.display_base);
        match std::fs::canonicalize(path) {
            Ok(real) if real.starts_with(self.root) => Ok(real),
            Ok(_) => Err(Problem::at(
                shown,
                "resolves outside the plugin folder; ignored",
            )),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                Err(Problem::at(shown, "symbolic link loop; ignored"))
            }
            Err(e) => Err(Problem::at(shown, format!("cannot resolve: {e}"))),
        }
    }
}

/// Whether `path` is a symbolic link loop (`ELOOP`): it does not "exist", but a scan must
/// report it rather than pass over it in silence.
pub fn loops(path: &Path) -> bool {
    matches!(std::fs::metadata(path), Err(e) if e.raw_os_error() == Some(libc::ELOOP))
}

/// Whether a scan should look at `path`: it exists, or it is a symbolic link loop (which
/// [`Bounds::check`] then reports).
pub fn present(path: &Path) -> bool {
    path.exists() || loops(path)
}

/// Every component of `kind` in `dir`, sorted by path. Unreadable or escaping entries are
/// reported and skipped. A missing `dir` is not a problem.
pub fn scan_dir(
    kind: ContentKind,
    dir: &Path,
    bounds: &Bounds<'_>,
    problems: &mut Problems,
) -> Vec<ChildCustomization> {
    if !present(dir) {
        return Vec::new();
    }
    if let Err(message) = bounds.check(dir) {
        problems.push(message);
        return Vec::new();
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(Problem::at(
                display_path(dir, bounds.display_base),
                format!("cannot list: {e}"),
            ));
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.'))
        })
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let file = match kind {
            ContentKind::Skill => {
                let skill = path.join("SKILL.md");
                if !path.is_dir() || !present(&skill) {
                    continue;
                }
                skill
            }
            _ if !matches_kind(kind, &path) || path.is_dir() => continue,
            _ => path,
        };
        if let Err(message) = bounds.check(&file) {
            problems.push(message);
            continue;
        }
        if let Some(child) = parse_file(kind, &file, bounds.display_base, problems) {
            out.push(child);
        }
    }
    out
}

fn matches_kind(kind: ContentKind, path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match kind {
        ContentKind::Skill => false,
        ContentKind::Command | ContentKind::Agent | ContentKind::Prompt => name.ends_with(".md"),
        ContentKind::Rule => name.ends_with(".md") || name.ends_with(".mdc"),
        ContentKind::Hook => name.ends_with(".json"),
    }
}

/// Name of a component file without its kind's suffixes (`a.agent.md` → `a`).
fn stem(kind: ContentKind, path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let suffixes: &[&str] = match kind {
        ContentKind::Agent => &[".agent.md", ".md"],
        ContentKind::Rule => &[".instructions.md", ".mdc", ".md"],
        ContentKind::Prompt => &[".prompt.md", ".md"],
        _ => &[".md"],
    };
    suffixes
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
        .to_string()
}

/// Parse one component file. `None` (with a problem) when it cannot be used.
pub fn parse_file(
    kind: ContentKind,
    path: &Path,
    display_base: &Path,
    problems: &mut Problems,
) -> Option<ChildCustomization> {
    let file = match SourceFile::read(path, display_path(path, display_base)) {
        Ok(file) => file,
        Err(message) => {
            problems.push(message);
            return None;
        }
    };
    if kind == ContentKind::Hook {
        return hook_file(&file, problems);
    }
    let fm = match frontmatter::parse(&file.text) {
        Ok(fm) => fm,
        Err(e) => {
            problems.warn_at(
                &file.location_at(e.line, e.column),
                format!("invalid YAML frontmatter: {}; file skipped", e.message),
            );
            return None;
        }
    };
    Some(child_from_frontmatter(kind, &file, path, &fm))
}

fn child_from_frontmatter(
    kind: ContentKind,
    file: &SourceFile,
    path: &Path,
    fm: &Frontmatter,
) -> ChildCustomization {
    let id = file.uri.clone();
    let uri = file.uri.clone();
    let description = fm.text("description");
    let user_invocable_off = (fm.boolean("user-invocable") == Some(false)).then_some(true);
    let name_or = |fallback: String| fm.text("name").unwrap_or(fallback);
    match kind {
        ContentKind::Skill => {
            let dir = path
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            ChildCustomization::Skill(SkillCustomization {
                id,
                uri,
                name: name_or(dir),
                icons: None,
                range: None,
                meta: None,
                enabled: None,
                description,
                disable_model_invocation: fm.boolean("disable-model-invocation").filter(|&b| b),
                disable_user_invocation: user_invocable_off,
            })
        }
        ContentKind::Command => ChildCustomization::Skill(SkillCustomization {
            id,
            uri,
            name: stem(kind, path),
            icons: None,
            range: None,
            meta: None,
            enabled: None,
            description,
            disable_model_invocation: fm.boolean("disable-model-invocation").filter(|&b| b),
            disable_user_invocation: user_invocable_off,
        }),
        ContentKind::Agent => {
            let model = fm
                .text("model")
                .or_else(|| fm.list("model", ',').and_then(|m| m.into_iter().next()));
            let disable_model = match fm.boolean("infer") {
                Some(infer) => Some(!infer),
                None => fm.boolean("disable-model-invocation"),
            };
            ChildCustomization::Agent(AgentCustomization {
                id,
                uri,
                name: name_or(stem(kind, path)),
                icons: None,
                range: None,
                meta: None,
                enabled: None,
                description,
                model,
                tools: fm.list("tools", ','),
                disable_model_invocation: disable_model.filter(|&b| b),
                disable_user_invocation: user_invocable_off,
            })
        }
        ContentKind::Rule => {
            let globs = fm
                .list("globs", ',')
                .or_else(|| fm.list("applyTo", ','))
                .or_else(|| fm.list("paths", ','));
            ChildCustomization::Rule(RuleCustomization {
                id,
                uri,
                name: name_or(stem(kind, path)),
                icons: None,
                range: None,
                meta: None,
                enabled: None,
                description,
                always_apply: fm.boolean("alwaysApply"),
                globs,
            })
        }
        ContentKind::Prompt => ChildCustomization::Prompt(PromptCustomization {
            id,
            uri,
            name: name_or(stem(kind, path)),
            icons: None,
            range: None,
            meta: None,
            enabled: None,
            description,
        }),
        ContentKind::Hook => hook_child(id, uri, path),
    }
}

fn hook_child(id: String, uri: String, path: &Path) -> ChildCustomization {
    ChildCustomization::Hook(HookCustomization {
        id,
        uri,
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        icons: None,
        range: None,
        meta: None,
        enabled: None,
    })
}

/// A hooks file: a JSON object whose `hooks` member is an object of event lists.
fn hook_file(file: &SourceFile, problems: &mut Problems) -> Option<ChildCustomization> {
    let root = match json::parse(&file.text) {
        Ok(root) => root,
        Err(e) => {
            problems.warn(
                file,
                e.offset,
                format!("invalid JSON: {}; hooks not loaded", e.message),
            );
            return None;
        }
    };
    check_hooks_object(&root, file, problems)?;
    Some(hook_child(file.uri.clone(), file.uri.clone(), &file.path))
}

/// Validate `{"hooks": {<event>: [...]}}`; `None` with a problem when the shape is wrong.
pub fn check_hooks_object(
    node: &json::Node,
    file: &SourceFile,
    problems: &mut Problems,
) -> Option<()> {
    let hooks = match node.get("hooks") {
        Some(member) => &member.node,
        None => {
            problems.warn(
                file,
                node.span.start,
                "expected an object with a `hooks` member; hooks not loaded".into(),
            );
            return None;
        }
    };
    let Some(events) = hooks.members() else {
        problems.warn(
            file,
            hooks.span.start,
            format!(
                "`hooks` must be an object of events, found {}; hooks not loaded",
                hooks.type_name()
            ),
        );
        return None;
    };
    for event in events {
        if !matches!(event.node.value, json::Value::Array(_)) {
            problems.warn(
                file,
                event.node.span.start,
                format!(
                    "hook event {:?} must be an array, found {}; hooks not loaded",
                    event.key,
                    event.node.type_name()
                ),
            );
            return None;
        }
    }
    Some(())
}
