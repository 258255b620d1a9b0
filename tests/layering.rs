//! The shape of the code, checked: the crate's top-level modules import each other without
//! a cycle (each layer only downwards), so do the files inside each of them, every source
//! file says what it owns in a `//!` comment, and none grows past what one can hold in one's head.

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

/// The top-level module a file of `src/` belongs to (`src/front/hub.rs` → `front`).
fn top_module(root: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(root).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// Top-level module → the other top-level modules it names as `crate::<module>`.
fn imports(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(root, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_module(root, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(from) = top_module(root, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests may reach anywhere.
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        for (at, _) in code.match_indices("crate::") {
            let name: String = code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(&name) && name != from {
                graph.entry(from.clone()).or_default().insert(name);
            }
        }
    }
    graph
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

/// Names of the siblings `code` imports: `super::name`, `super::{a, b::C}`, `crate::<component>::name`.
fn sibling_names(code: &str, component: &str) -> BTreeSet<String> {
    let ident = |text: &str| -> String {
        text.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("super::") {
        let rest = &code[at + "super::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                names.extend(group.split(',').map(ident));
            }
            None => {
                names.insert(ident(rest));
            }
        }
    }
    let full = format!("crate::{component}::");
    for (at, _) in code.match_indices(&full) {
        names.insert(ident(&code[at + full.len()..]));
    }
    names
}

/// For each folder module of `src/` (`front`, `host` …): its files → the sibling files they import.
fn sibling_imports(root: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut components = BTreeMap::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let component = dir.file_name().unwrap().to_str().unwrap().to_string();
        let mut files = Vec::new();
        sources(&dir, &mut files);
        let sibling = |file: &Path| -> Option<String> {
            let relative = file.strip_prefix(&dir).ok()?;
            let first = relative.components().next()?.as_os_str().to_str()?;
            let name = first.trim_end_matches(".rs");
            (name != "mod").then(|| name.to_string())
        };
        let modules: BTreeSet<String> = files.iter().filter_map(|f| sibling(f)).collect();
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in &files {
            let Some(from) = sibling(file) else { continue };
            let text = std::fs::read_to_string(file).unwrap();
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            // `super::` names a sibling only from a file directly in the folder.
            let direct = file.parent() == Some(dir.as_path());
            let code_for_super = if direct { code } else { "" };
            let mut names = sibling_names(code_for_super, &component);
            if !direct {
                names.extend(sibling_names(&code.replace("super::", ""), &component));
            }
            for name in names {
                if modules.contains(&name) && name != from {
                    graph.entry(from.clone()).or_default().insert(name);
                }
            }
        }
        components.insert(component, graph);
    }
    components
}

#[test]
fn the_files_of_each_module_import_each_other_without_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let components = sibling_imports(&root);
    assert!(
        components.get("supervisor").is_some_and(|g| g.len() > 5),
        "the graphs were read: {components:?}"
    );
    for (component, graph) in &components {
        let found = cycle(graph);
        if let Some(found) = found {
            panic!(
                "import cycle in {component}/: {}\n{graph:#?}",
                found.join(" → ")
            );
        }
    }
}

#[test]
fn top_level_modules_import_each_other_without_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&root);
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
