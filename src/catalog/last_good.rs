//! Edits must not lose running servers: when a rescan finds a file that no longer parses (a
//! half-typed save) or a server entry it refuses, the servers that file or entry declared
//! last time are carried into the new scan unchanged, so the supervisor keeps them running;
//! their container says so (`degraded`) until the file parses again. Pure.

use std::collections::HashSet;

use ahp_types::state::{
    ChildCustomization, Customization, CustomizationDegradedState, CustomizationLoadState,
};

use crate::discovery::Scan;
use crate::spec::Problem;

/// Carry into `fresh` the servers of `old` that `fresh` could not read again. Returns the
/// names of the servers kept.
pub fn carry(old: &Scan, fresh: &mut Scan) -> Vec<String> {
    if fresh.unparsable.is_empty() {
        return Vec::new();
    }
    let unparsable: HashSet<String> = fresh.unparsable.iter().cloned().collect();
    let declared: HashSet<String> = fresh.servers.iter().map(|s| s.id.clone()).collect();
    let mut kept = Vec::new();
    let mut containers = HashSet::new();
    for (container, child) in server_children(old) {
        let ChildCustomization::McpServer(server) = child else {
            continue;
        };
        let gone_unread = [server.id.as_str(), server.uri.as_str(), container.as_str()]
            .iter()
            .any(|key| unparsable.contains(*key));
        if !gone_unread || declared.contains(&server.id) {
            continue;
        }
        let Some(launch) = old.servers.iter().find(|s| s.id == server.id) else {
            continue;
        };
        if !put_back(fresh, old, &container, child) {
            continue;
        }
        containers.insert(container);
        fresh.servers.push(launch.clone());
        kept.push(server.name.clone());
    }
    if !kept.is_empty() {
        let note = format!(
            "kept as last declared until it parses again: server{} {}",
            if kept.len() == 1 { "" } else { "s" },
            kept.join(", ")
        );
        let location = fresh
            .problems
            .first()
            .map(|p| p.location.split(':').next().unwrap_or_default().to_string())
            .unwrap_or_default();
        for customization in &mut fresh.customizations {
            if crate::catalog::id_of(customization).is_some_and(|id| containers.contains(id)) {
                degrade(customization, &note);
            }
        }
        fresh.problems.push(Problem {
            location,
            message: note,
        });
    }
    kept
}

/// Every server child of `scan`'s containers, with its container's id.
fn server_children(scan: &Scan) -> Vec<(String, &ChildCustomization)> {
    let mut out = Vec::new();
    for customization in &scan.customizations {
        let (id, children) = match customization {
            Customization::Plugin(p) => (&p.id, p.children.as_deref()),
            Customization::Directory(d) => (&d.id, d.children.as_deref()),
            _ => continue,
        };
        for child in children.unwrap_or(&[]) {
            if matches!(child, ChildCustomization::McpServer(_)) {
                out.push((id.clone(), child));
            }
        }
    }
    out
}

/// Put `child` back into container `id` of `fresh`; when `fresh` no longer has that
/// container (an inline plugin of a file that did not parse), `old`'s is brought back with
/// only its carried servers. Whether it was put back.
fn put_back(fresh: &mut Scan, old: &Scan, id: &str, child: &ChildCustomization) -> bool {
    let in_fresh = fresh
        .customizations
        .iter_mut()
        .find(|c| crate::catalog::id_of(c) == Some(id));
    let container = match in_fresh {
        Some(container) => container,
        None => {
            let Some(previous) = old
                .customizations
                .iter()
                .find(|c| crate::catalog::id_of(c) == Some(id))
            else {
                return false;
            };
            let mut previous = previous.clone();
            if let Customization::Plugin(p) = &mut previous {
                p.children = Some(Vec::new());
            }
            fresh.customizations.push(previous);
            let Some(last) = fresh.customizations.last_mut() else {
                return false;
            };
            last
        }
    };
    let children = match container {
        Customization::Plugin(p) => &mut p.children,
        Customization::Directory(d) => &mut d.children,
        _ => return false,
    };
    children.get_or_insert_with(Vec::new).push(child.clone());
    true
}

/// Show in `customization`'s load state that servers were kept: `error` and `loaded` become
/// `degraded`, and the note is added to the message.
pub(super) fn degrade(customization: &mut Customization, note: &str) {
    let load = match customization {
        Customization::Plugin(p) => &mut p.load,
        Customization::Directory(d) => &mut d.load,
        _ => return,
    };
    let message = match load.take() {
        Some(CustomizationLoadState::Error(e)) => e.message,
        Some(CustomizationLoadState::Degraded(d)) => d.message,
        _ => String::new(),
    };
    let message = if message.is_empty() {
        note.to_string()
    } else {
        format!("{message}\n{note}")
    };
    *load = Some(CustomizationLoadState::Degraded(
        CustomizationDegradedState { message },
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::{plugin, Context};

    fn names(scan: &Scan) -> Vec<&str> {
        scan.servers.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn servers_of_a_file_that_stopped_parsing_are_carried_and_shown_degraded() {
        let dir = std::env::temp_dir().join(format!("ahp-proxy-last-good-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(".mcp.json");
        let ctx = Context {
            data_dir: dir.join("data"),
            env: Box::new(|_| None),
        };
        std::fs::write(
            &file,
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}"#,
        )
        .unwrap();
        let old = plugin::scan_plugin(&dir, &ctx);
        assert_eq!(names(&old), ["a", "b"]);

        std::fs::write(&file, r#"{"mcpServers": {"a": {"comm"#).unwrap();
        let mut fresh = plugin::scan_plugin(&dir, &ctx);
        assert!(names(&fresh).is_empty());
        assert_eq!(carry(&old, &mut fresh), ["a", "b"]);
        assert_eq!(names(&fresh), ["a", "b"]);
        assert_eq!(fresh.servers, old.servers, "the same launch specs");
        let Customization::Plugin(p) = &fresh.customizations[0] else {
            panic!("a plugin");
        };
        assert_eq!(p.children.as_ref().map(Vec::len), Some(2));
        let Some(CustomizationLoadState::Degraded(d)) = &p.load else {
            panic!("degraded: {:?}", p.load);
        };
        assert!(d.message.contains("invalid JSON"), "{}", d.message);
        assert!(d.message.ends_with("servers a, b"), "{}", d.message);

        // One entry refused: only that server is carried; the other is read afresh.
        std::fs::write(
            &file,
            r#"{"mcpServers": {"a": {"command": 3}, "b": {"command": "z"}}}"#,
        )
        .unwrap();
        let mut fresh = plugin::scan_plugin(&dir, &ctx);
        assert_eq!(carry(&old, &mut fresh), ["a"]);
        assert_eq!(names(&fresh), ["b", "a"]);

        // A file that parses carries nothing.
        std::fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
        let mut fresh = plugin::scan_plugin(&dir, &ctx);
        assert!(carry(&old, &mut fresh).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
