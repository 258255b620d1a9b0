//! The aggregated endpoint's naming policy, pure: a tool or prompt keeps its own name unless
//! two ready servers offer the same one; then each copy is `<server>__<name>`.

use std::collections::HashMap;

/// Separator between server name and tool/prompt name in prefixed names.
pub const SEPARATOR: &str = "__";

/// One item (tool or prompt) as the harness sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Exposed<T> {
    /// The name the harness uses.
    pub name: String,
    /// The server (customization id) that offers it.
    pub server: String,
    /// The name the server uses.
    pub original: String,
    /// The item itself, with `name` already set to the exposed name.
    pub item: T,
}

/// Name every item of every server. `servers` is `(id, server name, items)` in a stable
/// order; `name_of` reads an item's name and `rename` gives it a new one.
pub fn expose<T: Clone>(
    servers: &[(String, String, Vec<T>)],
    name_of: impl Fn(&T) -> String,
    rename: impl Fn(&mut T, String),
) -> Vec<Exposed<T>> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for (_, _, items) in servers {
        for item in items {
            *counts.entry(name_of(item)).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for (id, server, items) in servers {
        for item in items {
            let original = name_of(item);
            let name = if counts.get(&original).copied().unwrap_or(0) > 1 {
                format!("{server}{SEPARATOR}{original}")
            } else {
                original.clone()
            };
            let mut item = item.clone();
            rename(&mut item, name.clone());
            out.push(Exposed {
                name,
                server: id.clone(),
                original,
                item,
            });
        }
    }
    out
}

/// Whether an MCP Apps tool is meant for the app only (`_meta.ui.visibility` lists
/// neither `model` nor is absent): such tools are not offered to the harness.
pub fn app_only(meta: Option<&serde_json::Map<String, serde_json::Value>>) -> bool {
    let Some(visibility) = meta
        .and_then(|m| m.get("ui"))
        .and_then(|ui| ui.get("visibility"))
        .and_then(|v| v.as_array())
    else {
        return false;
    };
    !visibility.iter().any(|v| v == "model")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(servers: &[(&str, &[&str])]) -> Vec<(String, String, String)> {
        let input: Vec<(String, String, Vec<String>)> = servers
            .iter()
            .map(|(s, items)| {
                (
                    format!("id-{s}"),
                    s.to_string(),
                    items.iter().map(|i| i.to_string()).collect(),
                )
            })
            .collect();
        expose(&input, |s| s.clone(), |s, n| *s = n)
            .into_iter()
            .map(|e| (e.name, e.server, e.original))
            .collect()
    }

    #[test]
    fn unique_names_stay_and_collisions_get_the_server_prefix() {
        let out = names(&[("a", &["echo", "only_a"]), ("b", &["echo"])]);
        assert_eq!(
            out,
            [
                ("a__echo".into(), "id-a".into(), "echo".into()),
                ("only_a".into(), "id-a".into(), "only_a".into()),
                ("b__echo".into(), "id-b".into(), "echo".into()),
            ]
        );
    }

    #[test]
    fn app_only_tools_are_recognised() {
        let meta = |v: serde_json::Value| v.as_object().cloned();
        assert!(app_only(meta(serde_json::json!({"ui": {"visibility": ["app"]}})).as_ref()));
        assert!(!app_only(meta(serde_json::json!({"ui": {"visibility": ["model", "app"]}})).as_ref()));
        assert!(!app_only(meta(serde_json::json!({"ui": {"resourceUri": "ui://x"}})).as_ref()));
        assert!(!app_only(None));
    }
}
