//! Every path in `proxy.toml`: resolving against the config file's folder without touching
//! the disk, the data folder's default, and the `[[directories]]` entries.

use std::path::{Component, Path, PathBuf};

use toml::Spanned;

use super::checker::Checker;
use super::keys;
use super::raw::RawDirectory;
use crate::spec::{ContentKind, DirectorySpec};

/// `a/./b/../c` → `a/c` without touching the disk (`..` never climbs above the root), so
/// the same folder always has the same path, URI and id.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Turns paths as written into normalized absolute ones.
pub(super) struct Resolver<'a> {
    /// The config file's folder.
    pub base: &'a Path,
}

impl Resolver<'_> {
    /// `p` against the config file's folder (unless absolute), normalized.
    pub fn resolve(&self, p: &str) -> PathBuf {
        let path = Path::new(p);
        if path.is_absolute() {
            normalize(path)
        } else {
            normalize(&self.base.join(path))
        }
    }

    /// `data_dir` as written, or its default.
    pub fn data_dir(&self, written: Option<String>) -> PathBuf {
        match written {
            Some(dir) => self.resolve(&dir),
            None => default_data_dir(self.base),
        }
    }

    /// The config file itself: its name in the base folder.
    pub fn config_path(&self, file: &str) -> PathBuf {
        self.base
            .join(Path::new(file).file_name().unwrap_or("proxy.toml".as_ref()))
    }
}

/// `$XDG_DATA_HOME/ahp-proxy`, else `~/.local/share/ahp-proxy`, else `<config dir>/.ahp-proxy`.
fn default_data_dir(base: &Path) -> PathBuf {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(xdg) = non_empty("XDG_DATA_HOME") {
        return PathBuf::from(xdg).join("ahp-proxy");
    }
    if let Some(home) = non_empty("HOME") {
        return PathBuf::from(home).join(".local/share/ahp-proxy");
    }
    base.join(".ahp-proxy")
}

/// A list of paths (`plugin_roots`, `manifests`), resolved; empty entries are problems.
pub(super) fn list(
    checker: &mut Checker<'_>,
    key: &str,
    list: Vec<Spanned<String>>,
    resolver: &Resolver<'_>,
) -> Vec<PathBuf> {
    list.into_iter()
        .filter_map(|entry| {
            if entry.get_ref().trim().is_empty() {
                checker.problem(entry.span().start, format!("{key}: empty path"));
                return None;
            }
            Some(resolver.resolve(entry.get_ref()))
        })
        .collect()
}

/// `[[directories]]`: the valid entries; each invalid one is a problem and left out.
pub(super) fn directories(
    checker: &mut Checker<'_>,
    entries: Vec<Spanned<RawDirectory>>,
    resolver: &Resolver<'_>,
) -> Vec<DirectorySpec> {
    entries
        .into_iter()
        .filter_map(|entry| directory(checker, entry, resolver))
        .collect()
}

fn directory(
    checker: &mut Checker<'_>,
    entry: Spanned<RawDirectory>,
    resolver: &Resolver<'_>,
) -> Option<DirectorySpec> {
    let at = entry.span().start;
    let raw = entry.into_inner();
    let Some(contents) = content_kind(raw.contents.get_ref()) else {
        checker.problem(
            raw.contents.span().start,
            format!(
                "{} = {:?}: expected skill, command, agent, rule, prompt or hook",
                keys::DIRECTORY_CONTENTS.name,
                raw.contents.get_ref()
            ),
        );
        return None;
    };
    if raw.path.get_ref().trim().is_empty() {
        let key = keys::DIRECTORY_PATH.name;
        checker.problem(at, format!("{key}: empty path"));
        return None;
    }
    let path = resolver.resolve(raw.path.get_ref());
    let name = raw.name.unwrap_or_else(|| {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| raw.path.get_ref().clone())
    });
    Some(DirectorySpec {
        path,
        name,
        contents,
        writable: raw.writable,
    })
}

/// `directories.contents` as written → the kind of content.
fn content_kind(text: &str) -> Option<ContentKind> {
    Some(match text {
        "skill" => ContentKind::Skill,
        "command" => ContentKind::Command,
        "agent" => ContentKind::Agent,
        "rule" => ContentKind::Rule,
        "prompt" => ContentKind::Prompt,
        "hook" => ContentKind::Hook,
        _ => return None,
    })
}
