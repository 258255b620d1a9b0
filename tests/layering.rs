//! The shape of the code, checked: the crate's top-level modules import each other without
//! a cycle (each layer only downwards), so do the files and folders of every folder at any
//! depth, every source file says what it owns in a `//!` comment, and none grows past what
//! one can hold in one's head.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines a source file may have (its unit tests included).
const MAX_LINES: usize = 650;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file of `src/` is (`src/front/hub.rs` → `front::hub`, `src/front/mod.rs` →
/// `front`); `None` for the crate roots (`lib.rs`, `main.rs`) and for files of unit tests
/// (`tests.rs`: unit tests may reach anywhere).
fn module_path(root: &Path, file: &Path) -> Option<Vec<String>> {
    let relative = file.strip_prefix(root).ok()?.with_extension("");
    let mut path: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_str().map(str::to_string))
        .collect::<Option<_>>()?;
    match path.last()?.as_str() {
        "mod" => {
            path.pop();
        }
        "tests" => return None,
        _ => {}
    }
    if matches!(path.as_slice(), [only] if only == "lib" || only == "main") {
        return None;
    }
    Some(path)
}

/// The code of a file without its inline unit tests (`#[cfg(test)] mod tests { … }`, at its
/// end).
fn code_of(text: &str) -> &str {
    text.split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or_default()
}

/// Every path `code` names through `crate::`, `super::` or `self::` (in `use` trees too:
/// `super::{a, b::{C, D}}`), made absolute for a file whose module is `module`.
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for keyword in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(keyword) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut paths = Vec::new();
            use_tree(&code[at..], Vec::new(), &mut paths);
            for path in paths {
                let mut absolute: Vec<String> = module.to_vec();
                let mut segments = path.into_iter().peekable();
                while let Some(first) = segments.peek() {
                    match first.as_str() {
                        "crate" => absolute.clear(),
                        "super" => {
                            absolute.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    segments.next();
                }
                absolute.extend(segments.filter(|s| s != "self"));
                found.push(absolute);
            }
        }
    }
    found
}

/// Read one path or use tree at the start of `text` (`a::b`, `a::{b, c::{D, E}}`) below
/// `prefix` into `out`; returns the text after it.
fn use_tree<'a>(mut text: &'a str, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> &'a str {
    loop {
        text = text.trim_start();
        if let Some(mut group) = text.strip_prefix('{') {
            loop {
                group = use_tree(group, prefix.clone(), out).trim_start();
                match group.strip_prefix(',') {
                    Some(next) if !next.trim_start().starts_with('}') => group = next,
                    Some(next) => return next.trim_start().strip_prefix('}').unwrap_or(next),
                    None => return group.strip_prefix('}').unwrap_or(group),
                }
            }
        }
        let end = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(text.len());
        if end == 0 {
            out.push(prefix);
            return text;
        }
        prefix.push(text[..end].to_string());
        text = &text[end..];
        match text.strip_prefix("::") {
            Some(rest) => text = rest,
            None => {
                out.push(prefix);
                return text;
            }
        }
    }
}

/// A module graph per folder of `src/`: the crate root (`""`) and every folder below it at
/// any depth (`"supervisor/process"`). Its nodes are the folder's files and subfolders; an
/// edge `a → b` says a file of `a` (or below it) names `b` (or something in it).
fn folder_graphs(root: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut files = Vec::new();
    sources(root, &mut files);
    let modules: Vec<(Vec<String>, String)> = files
        .iter()
        .filter_map(|file| {
            Some((
                module_path(root, file)?,
                std::fs::read_to_string(file).ok()?,
            ))
        })
        .collect();
    let known: BTreeSet<&[String]> = modules.iter().map(|(m, _)| m.as_slice()).collect();
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, text) in &modules {
        let named = named_paths(code_of(text), module);
        // In the folder `module[..depth]`, the file belongs to the node `module[depth]`.
        for depth in 0..module.len() {
            let (folder, from) = (&module[..depth], &module[depth]);
            for path in &named {
                if path.len() <= depth || path[..depth] != *folder || path[depth] == *from {
                    continue;
                }
                if known.contains(&path[..=depth]) {
                    graphs
                        .entry(folder.join("/"))
                        .or_default()
                        .entry(from.clone())
                        .or_default()
                        .insert(path[depth].clone());
                }
            }
        }
    }
    graphs
}

/// A cycle in `graph`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(found) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(found);
        }
    }
    None
}

#[test]
fn the_modules_of_every_folder_import_each_other_without_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graphs = folder_graphs(&root);
    // Every depth was read: the crate root, a folder, a folder in a folder.
    for folder in ["", "supervisor", "supervisor/process"] {
        assert!(
            graphs.get(folder).is_some_and(|g| !g.is_empty()),
            "the graph of src/{folder} was read: {graphs:#?}"
        );
    }
    for (folder, graph) in &graphs {
        if let Some(found) = cycle(graph) {
            panic!(
                "import cycle in src/{folder}: {}\n{graph:#?}",
                found.join(" → ")
            );
        }
    }
}

#[test]
fn the_path_reader_resolves_use_trees_and_relative_paths() {
    let module: Vec<String> = vec!["supervisor".into(), "process".into(), "watchdog".into()];
    let code = "use super::{cgroup, sweep::{kill_all, Targets},};\nuse crate::spec::Launch;\n\
                let _ = super::super::policy::next(self::inner::X);";
    let named: BTreeSet<String> = named_paths(code, &module)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = [
        "supervisor::process::cgroup",
        "supervisor::process::sweep::kill_all",
        "supervisor::process::sweep::Targets",
        "spec::Launch",
        "supervisor::policy::next",
        "supervisor::process::watchdog::inner::X",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(named, want);
}

#[test]
fn top_level_modules_import_each_other_without_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = folder_graphs(&root).remove("").unwrap_or_default();
    assert!(graph.len() > 5, "the graph was read: {graph:?}");
    if let Some(found) = cycle(&graph) {
        panic!("import cycle: {}\n{graph:#?}", found.join(" → "));
    }
    // The ground floor imports nothing of the crate.
    assert!(
        !graph.contains_key("spec"),
        "spec imports {:?}",
        graph.get("spec")
    );
    // The wire layers stay below the faces.
    for low in ["mcp", "upstream"] {
        for face in ["front", "ahp", "host", "supervisor"] {
            assert!(
                !graph.get(low).is_some_and(|deps| deps.contains(face)),
                "{low} imports {face}"
            );
        }
    }
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&graph), None);
    graph.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle(&graph).map(|c| c.len()), Some(4));
}

#[test]
fn every_source_file_says_what_it_owns_and_stays_small() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "example-servers"] {
        sources(&manifest.join(dir), &mut files);
    }
    assert!(files.len() > 40);
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(manifest).unwrap().display().to_string();
        if !text.starts_with("//!") {
            problems.push(format!("{name}: no //! comment saying what it owns"));
        }
        let lines = text.lines().count();
        if lines > MAX_LINES {
            problems.push(format!("{name}: {lines} lines (at most {MAX_LINES})"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
