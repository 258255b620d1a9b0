//! The aggregated endpoint's naming policy, pure: which server answers each tool, prompt and
//! resource URI the harness sees, and the renaming applied to keep every name unique.
//!
//! Tools and prompts keep their own names unless two ready servers offer the same one (or
//! the policy says always): then each copy is `<server><separator><name>`. A resource URI
//! claimed by two servers (listed, a template, or a tool's `_meta.ui.resourceUri`) gets the
//! server after the scheme: `ui://view` → `ui://<server><separator>view`, so `ui://` stays
//! `ui://` for MCP Apps hosts. Everything else passes untouched.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::mcp::message;
use crate::spec::NamePrefix;
use crate::upstream::offer::{Item, Offer};

/// The naming policy (`[mcp] prefix` and `[mcp] separator`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// When names get a prefix.
    pub prefix: NamePrefix,
    /// Between the server and the name, e.g. `__`.
    pub separator: String,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            prefix: NamePrefix::OnCollision,
            separator: "__".into(),
        }
    }
}

/// One item as the harness sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The customization id of the server that answers it.
    pub server: String,
    /// The name (or URI) the server uses.
    pub original: String,
    /// The item as the server wrote it, with its exposed name (and URIs) spliced in.
    pub item: Item,
}

/// Where a URI from the harness goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// This server, with this URI (the server's own).
    To {
        /// The server's customization id.
        server: String,
        /// The URI to send it.
        uri: String,
    },
    /// Not claimed by any server: ask these, in order (template matches first).
    Ask(Vec<String>),
}

/// The prefix for each declared server: its name with characters outside `A-Za-z0-9_.-`
/// replaced by `_`; servers whose names collide then get `-2`, `-3`… in id order.
pub fn qualifiers(declared: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut taken: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeMap::new();
    for (id, name) in declared {
        let base: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let base = if base.is_empty() {
            "server".into()
        } else {
            base
        };
        let count = taken.entry(base.clone()).or_default();
        *count += 1;
        let qualifier = if *count == 1 {
            base
        } else {
            format!("{base}-{count}")
        };
        out.insert(id.clone(), qualifier);
    }
    out
}

/// The members that hold a URI the naming may rename.
pub const URI_MEMBERS: &[&str] = &["uri", "uriTemplate", "resourceUri", "ui/resourceUri"];

/// The aggregated view of every ready server at one moment.
#[derive(Debug, Default)]
pub struct Namespace {
    /// Tools, in server order then the server's own order.
    pub tools: Vec<Entry>,
    /// Prompts, likewise.
    pub prompts: Vec<Entry>,
    /// Resources, likewise.
    pub resources: Vec<Entry>,
    /// Resource templates, likewise.
    pub templates: Vec<Entry>,
    tool_index: HashMap<String, usize>,
    prompt_index: HashMap<String, usize>,
    /// (server, original URI) → exposed URI, only for renamed URIs.
    uri_out: HashMap<(String, String), String>,
    /// Every claimed URI as exposed → (server, original).
    uri_in: HashMap<String, (String, String)>,
    /// Server id → qualifier, for prefixed URIs the server never listed.
    qualifiers: Vec<(String, String)>,
    /// Server ids in order, with their templates' literal prefixes.
    template_prefixes: Vec<(String, Vec<String>)>,
    separator: String,
}

impl Namespace {
    /// Name every item of `servers` (`(id, qualifier, offer)` in a stable order).
    pub fn build(servers: &[(String, String, &Offer)], policy: &Policy) -> Self {
        let sep = policy.separator.as_str();
        let always = policy.prefix == NamePrefix::Always;
        let mut names = Namespace {
            separator: sep.to_string(),
            qualifiers: servers
                .iter()
                .map(|(id, q, _)| (id.clone(), q.clone()))
                .collect(),
            ..Namespace::default()
        };
        names.claim_uris(servers);
        let tool_counts = counts(
            servers
                .iter()
                .flat_map(|(_, _, o)| o.tools.iter().map(|t| t.key.clone())),
        );
        let prompt_counts = counts(
            servers
                .iter()
                .flat_map(|(_, _, o)| o.prompts.iter().map(|p| p.key.clone())),
        );
        for (id, qualifier, offer) in servers {
            let name_for = |original: &str, counts: &HashMap<String, usize>| {
                if always || counts.get(original).copied().unwrap_or(0) > 1 {
                    format!("{qualifier}{sep}{original}")
                } else {
                    original.to_string()
                }
            };
            let qualified = |original: &str| format!("{qualifier}{sep}{original}");
            for tool in &offer.tools {
                let wanted = name_for(&tool.key, &tool_counts);
                let exposed = unclaimed(&names.tool_index, wanted, || qualified(&tool.key));
                let item = names.exposed_item(id, tool, "name", &exposed);
                let entry = Entry {
                    server: id.clone(),
                    original: tool.key.clone(),
                    item,
                };
                names.tool_index.insert(exposed, names.tools.len());
                names.tools.push(entry);
            }
            for prompt in &offer.prompts {
                let wanted = name_for(&prompt.key, &prompt_counts);
                let exposed = unclaimed(&names.prompt_index, wanted, || qualified(&prompt.key));
                let entry = Entry {
                    server: id.clone(),
                    original: prompt.key.clone(),
                    item: prompt.with_key("name", &exposed),
                };
                names.prompt_index.insert(exposed, names.prompts.len());
                names.prompts.push(entry);
            }
            for resource in &offer.resources {
                let exposed = names.expose_uri(id, &resource.key);
                let item = names.exposed_item(id, resource, "uri", &exposed);
                names.resources.push(Entry {
                    server: id.clone(),
                    original: resource.key.clone(),
                    item,
                });
            }
            let mut prefixes = Vec::new();
            for template in &offer.templates {
                let exposed = names.expose_uri(id, &template.key);
                prefixes.push(literal_prefix(&template.key).to_string());
                names.templates.push(Entry {
                    server: id.clone(),
                    original: template.key.clone(),
                    item: template.with_key("uriTemplate", &exposed),
                });
            }
            names.template_prefixes.push((id.clone(), prefixes));
        }
        names
    }

    /// URI claims: listed resources, templates, and tools' UI resources. A URI claimed by
    /// two servers is qualified for each.
    fn claim_uris(&mut self, servers: &[(String, String, &Offer)]) {
        let sep = self.separator.clone();
        let mut claims: HashMap<String, Vec<usize>> = HashMap::new();
        for (index, (_, _, offer)) in servers.iter().enumerate() {
            let mut own: HashSet<String> = HashSet::new();
            own.extend(offer.resources.iter().map(|r| r.key.clone()));
            own.extend(offer.templates.iter().map(|t| t.key.clone()));
            for tool in &offer.tools {
                own.extend(ui_uris(tool));
            }
            for uri in own {
                claims.entry(uri).or_default().push(index);
            }
        }
        let mut claimed: Vec<(&String, &Vec<usize>)> = claims.iter().collect();
        claimed.sort();
        for (uri, owners) in claimed {
            for &index in owners {
                let (id, qualifier, _) = &servers[index];
                let exposed = if owners.len() > 1 {
                    let renamed = qualify_uri(uri, qualifier, &sep);
                    self.uri_out
                        .insert((id.clone(), uri.clone()), renamed.clone());
                    renamed
                } else {
                    uri.clone()
                };
                self.uri_in
                    .entry(exposed)
                    .or_insert_with(|| (id.clone(), uri.clone()));
            }
        }
    }

    /// `item` known by `exposed` in its `field`, with server `server`'s renamed URIs inside
    /// it rewritten.
    fn exposed_item(&self, server: &str, item: &Item, field: &str, exposed: &str) -> Item {
        let item = if item.key == exposed {
            item.clone()
        } else {
            item.with_key(field, exposed)
        };
        match self.rewrite_uris(server, &item.raw) {
            Some(raw) => Item { raw, ..item },
            None => item,
        }
    }

    /// The tool the harness calls `name`.
    pub fn tool(&self, name: &str) -> Option<&Entry> {
        self.tool_index.get(name).map(|&i| &self.tools[i])
    }

    /// The prompt the harness calls `name`.
    pub fn prompt(&self, name: &str) -> Option<&Entry> {
        self.prompt_index.get(name).map(|&i| &self.prompts[i])
    }

    /// The URI the harness sees for server `server`'s URI `uri`.
    pub fn expose_uri(&self, server: &str, uri: &str) -> String {
        self.uri_out
            .get(&(server.to_string(), uri.to_string()))
            .cloned()
            .unwrap_or_else(|| uri.to_string())
    }

    /// Where a URI (or URI template) from the harness goes.
    pub fn route_uri(&self, uri: &str) -> Route {
        if let Some((server, original)) = self.uri_in.get(uri) {
            return Route::To {
                server: server.clone(),
                uri: original.clone(),
            };
        }
        // A renamed URI the server never listed (e.g. from a renamed template).
        for (server, qualifier) in &self.qualifiers {
            if let Some(original) = unqualify_uri(uri, qualifier, &self.separator) {
                if self.uri_out.keys().any(|(s, _)| s == server) {
                    return Route::To {
                        server: server.clone(),
                        uri: original,
                    };
                }
            }
        }
        let mut first = Vec::new();
        let mut rest = Vec::new();
        for (server, prefixes) in &self.template_prefixes {
            if prefixes.iter().any(|p| !p.is_empty() && uri.starts_with(p)) {
                first.push(server.clone());
            } else {
                rest.push(server.clone());
            }
        }
        first.extend(rest);
        Route::Ask(first)
    }

    /// Whether server `server` has any renamed URI (results from it need rewriting).
    pub fn renames_uris_of(&self, server: &str) -> bool {
        self.uri_out.keys().any(|(s, _)| s == server)
    }

    /// `text` (JSON from server `server`) with every renamed URI of the server in a `uri`,
    /// `uriTemplate`, `resourceUri` or `ui/resourceUri` member rewritten to what the harness
    /// sees; `None` when nothing changes.
    pub fn rewrite_uris(&self, server: &str, text: &str) -> Option<String> {
        if !self.renames_uris_of(server) {
            return None;
        }
        message::rename_members(text, URI_MEMBERS, |uri| {
            self.uri_out
                .get(&(server.to_string(), uri.to_string()))
                .cloned()
        })
    }
}

/// `ui://x` → `ui://<qualifier><sep>x`; `urn:x` → `urn:<qualifier><sep>x`.
pub fn qualify_uri(uri: &str, qualifier: &str, separator: &str) -> String {
    match uri.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{qualifier}{separator}{rest}"),
        None => match uri.split_once(':') {
            Some((scheme, rest)) => format!("{scheme}:{qualifier}{separator}{rest}"),
            None => format!("{qualifier}{separator}{uri}"),
        },
    }
}

/// The inverse of [`qualify_uri`], when `uri` carries that qualifier.
pub fn unqualify_uri(uri: &str, qualifier: &str, separator: &str) -> Option<String> {
    let marker = format!("{qualifier}{separator}");
    match uri.split_once("://") {
        Some((scheme, rest)) => rest
            .strip_prefix(&marker)
            .map(|rest| format!("{scheme}://{rest}")),
        None => match uri.split_once(':') {
            Some((scheme, rest)) => rest
                .strip_prefix(&marker)
                .map(|rest| format!("{scheme}:{rest}")),
            None => uri.strip_prefix(&marker).map(str::to_string),
        },
    }
}

/// The `ui://` resources a tool's `_meta` points at (`ui.resourceUri`, `ui/resourceUri`).
pub fn ui_uris(tool: &Item) -> Vec<String> {
    let nested = tool.string(&["_meta", "ui", "resourceUri"]);
    let flat = tool.string(&["_meta", "ui/resourceUri"]);
    let mut out: Vec<String> = nested.into_iter().chain(flat).collect();
    out.dedup();
    out
}

/// `wanted` when no earlier item has that name; else the item's qualified name
/// (`qualified()`), else that with `-2`, `-3`… : no item is ever left out for its name.
fn unclaimed(
    index: &HashMap<String, usize>,
    wanted: String,
    qualified: impl FnOnce() -> String,
) -> String {
    if !index.contains_key(&wanted) {
        return wanted;
    }
    let qualified = qualified();
    if !index.contains_key(&qualified) {
        return qualified;
    }
    (2..)
        .map(|n| format!("{qualified}-{n}"))
        .find(|name| !index.contains_key(name))
        .unwrap_or(qualified)
}

fn counts(names: impl Iterator<Item = String>) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for name in names {
        *out.entry(name).or_default() += 1;
    }
    out
}

/// A URI template up to its first expression: `features://items/{id}` → `features://items/`.
fn literal_prefix(template: &str) -> &str {
    template.split('{').next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(key_field: &str, key: &str, extra: serde_json::Value) -> Item {
        let mut value = json!({ key_field: key });
        if let (Some(object), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            object.extend(extra.clone());
        }
        Item {
            key: key.to_string(),
            raw: value.to_string(),
        }
    }

    fn offer(tools: &[&str], prompts: &[&str], resources: &[&str], templates: &[&str]) -> Offer {
        Offer {
            tools: tools
                .iter()
                .map(|n| item("name", n, json!({"inputSchema": {"type": "object"}})))
                .collect(),
            prompts: prompts.iter().map(|n| item("name", n, json!({}))).collect(),
            resources: resources
                .iter()
                .map(|u| item("uri", u, json!({"name": u})))
                .collect(),
            templates: templates
                .iter()
                .map(|t| item("uriTemplate", t, json!({"name": t})))
                .collect(),
        }
    }

    fn build(list: &[(&str, Offer)], policy: &Policy) -> Namespace {
        let servers: Vec<(String, String, &Offer)> = list
            .iter()
            .map(|(name, offer)| (format!("id-{name}"), name.to_string(), offer))
            .collect();
        Namespace::build(&servers, policy)
    }

    fn tool_names(names: &Namespace) -> Vec<(&str, &str, &str)> {
        names
            .tools
            .iter()
            .map(|e| (e.item.key.as_str(), e.server.as_str(), e.original.as_str()))
            .collect()
    }

    #[test]
    fn unique_names_stay_and_collisions_get_the_server_prefix() {
        let names = build(
            &[
                ("a", offer(&["echo", "only_a"], &["greet"], &[], &[])),
                ("b", offer(&["echo"], &["greet", "solo"], &[], &[])),
            ],
            &Policy::default(),
        );
        assert_eq!(
            tool_names(&names),
            [
                ("a__echo", "id-a", "echo"),
                ("only_a", "id-a", "only_a"),
                ("b__echo", "id-b", "echo")
            ]
        );
        assert_eq!(names.tool("b__echo").unwrap().original, "echo");
        assert!(names
            .tool("b__echo")
            .unwrap()
            .item
            .raw
            .contains(r#""name":"b__echo""#));
        assert!(names.tool("echo").is_none());
        let prompts: Vec<&str> = names.prompts.iter().map(|e| e.item.key.as_str()).collect();
        assert_eq!(prompts, ["a__greet", "b__greet", "solo"]);
    }

    #[test]
    fn a_name_taken_by_another_rename_is_qualified_never_dropped() {
        // The host's `echo` becomes `echo__echo`; the client `ide` offers `echo` (so
        // `ide__echo`), `echo__echo` and `ide__echo` as well, and a duplicate.
        let names = build(
            &[
                ("echo", offer(&["echo"], &[], &[], &[])),
                (
                    "ide",
                    offer(
                        &["echo", "echo__echo", "ide__echo", "ide__echo"],
                        &[],
                        &[],
                        &[],
                    ),
                ),
            ],
            &Policy::default(),
        );
        let exposed: Vec<&str> = names.tools.iter().map(|e| e.item.key.as_str()).collect();
        assert_eq!(
            exposed,
            [
                "echo__echo",
                "ide__echo",
                "ide__echo__echo",
                "ide__ide__echo",
                "ide__ide__echo-2"
            ]
        );
        assert_eq!(
            names.tool("ide__echo__echo").unwrap().original,
            "echo__echo"
        );
        assert_eq!(
            names.tool("ide__ide__echo-2").unwrap().original,
            "ide__echo"
        );
    }

    #[test]
    fn the_always_policy_prefixes_everything_with_the_chosen_separator() {
        let policy = Policy {
            prefix: NamePrefix::Always,
            separator: ".".into(),
        };
        let names = build(&[("a", offer(&["x"], &[], &[], &[]))], &policy);
        assert_eq!(tool_names(&names), [("a.x", "id-a", "x")]);
    }

    #[test]
    fn colliding_uris_are_qualified_consistently_in_lists_tools_and_results() {
        let mut a = offer(&[], &[], &["ui://view", "file:///a"], &["items://{id}"]);
        a.tools.push(item(
            "name",
            "show",
            json!({"_meta": {"ui": {"resourceUri": "ui://view"}, "ui/resourceUri": "ui://view"}}),
        ));
        let mut b = offer(&[], &[], &[], &["items://{id}"]);
        b.tools.push(item(
            "name",
            "show",
            json!({"_meta": {"ui": {"resourceUri": "ui://view"}}}),
        ));
        let names = build(&[("a", a), ("b", b)], &Policy::default());
        let tool = |name: &str| names.tool(name).unwrap().item.clone();
        assert_eq!(
            tool("a__show")
                .string(&["_meta", "ui", "resourceUri"])
                .unwrap(),
            "ui://a__view"
        );
        assert_eq!(
            tool("a__show")
                .string(&["_meta", "ui/resourceUri"])
                .unwrap(),
            "ui://a__view"
        );
        assert_eq!(
            tool("b__show")
                .string(&["_meta", "ui", "resourceUri"])
                .unwrap(),
            "ui://b__view"
        );
        let uris: Vec<String> = names
            .resources
            .iter()
            .map(|e| e.item.string(&["uri"]).unwrap())
            .collect();
        assert_eq!(uris, ["ui://a__view", "file:///a"]);
        let templates: Vec<&str> = names
            .templates
            .iter()
            .map(|e| e.item.key.as_str())
            .collect();
        assert_eq!(templates, ["items://a__{id}", "items://b__{id}"]);
        assert_eq!(
            names.route_uri("ui://b__view"),
            Route::To {
                server: "id-b".into(),
                uri: "ui://view".into()
            }
        );
        assert_eq!(
            names.route_uri("items://a__42"),
            Route::To {
                server: "id-a".into(),
                uri: "items://42".into()
            }
        );
        assert_eq!(
            names.route_uri("file:///a"),
            Route::To {
                server: "id-a".into(),
                uri: "file:///a".into()
            }
        );
        let result = r#"{"contents":[{"uri":"ui://view","text":"<p>"}]}"#;
        assert_eq!(
            names.rewrite_uris("id-a", result).unwrap(),
            r#"{"contents":[{"uri":"ui://a__view","text":"<p>"}]}"#
        );
    }

    #[test]
    fn unclaimed_uris_ask_servers_with_matching_templates_first() {
        let names = build(
            &[
                ("a", offer(&[], &[], &[], &[])),
                ("b", offer(&[], &[], &[], &["notes:///{title}"])),
            ],
            &Policy::default(),
        );
        assert_eq!(
            names.route_uri("notes:///x"),
            Route::Ask(vec!["id-b".into(), "id-a".into()])
        );
    }

    #[test]
    fn qualifiers_are_sanitised_and_unique() {
        let declared: BTreeMap<String, String> = [
            ("1".to_string(), "my server".to_string()),
            ("2".to_string(), "notes".to_string()),
            ("3".to_string(), "notes".to_string()),
        ]
        .into_iter()
        .collect();
        let q = qualifiers(&declared);
        assert_eq!(q["1"], "my_server");
        assert_eq!(q["2"], "notes");
        assert_eq!(q["3"], "notes-2");
    }

    #[test]
    fn uri_qualification_round_trips() {
        for uri in ["ui://x/y.html", "urn:isbn:1", "plain", "file:///etc/hosts"] {
            let q = qualify_uri(uri, "srv", "__");
            assert_eq!(unqualify_uri(&q, "srv", "__").as_deref(), Some(uri));
        }
        assert_eq!(unqualify_uri("ui://x", "srv", "__"), None);
    }
}
