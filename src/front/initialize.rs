//! A harness's `initialize`: `/mcp/<server>` answers with that server's own result (only the
//! protocol version negotiated as the server would); `/mcp` and stdio answer as the proxy,
//! with the union of the ready servers' capabilities and their instructions labelled by
//! server. The aggregate answers at once (servers still starting come with `list_changed`;
//! only the first listing waits for them); `/mcp/<server>` waits for its server. The stdio
//! harness's own identity is what servers are initialized with.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::answers::{error_answer, result_answer, INTERNAL_ERROR, INVALID_REQUEST};
use super::harness::Harness;
use super::hub::Hub;
use super::outbox::Stream;
use super::registry::Scope;
use crate::mcp::message::Message;
use crate::mcp::version;
use crate::upstream::handshake::{self, Identity};

/// Answer `initialize`.
pub fn answer(harness: Arc<Harness>, message: Message, stream: Stream) {
    let id = message.id().unwrap_or("null").to_string();
    if harness.is_initialized() {
        stream.finish(error_answer(
            &id,
            INVALID_REQUEST,
            "the session is already initialized",
        ));
        return;
    }
    let params: Value = message
        .body()
        .and_then(|span| serde_json::from_str(message.slice(span)).ok())
        .unwrap_or_else(|| Value::Object(Map::new()));
    harness.initialized(params.clone());
    harness.hub.join(harness.state());
    if harness.stands_for {
        harness
            .hub
            .connections
            .set_identity(Some(Identity::of_harness(&params)));
    }
    let requested = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or(version::LATEST)
        .to_string();
    tokio::spawn(async move {
        let hub = &harness.hub;
        // A server's own endpoint answers with that server's result: it waits for it. The
        // aggregate answers at once with what it can promise (the lists it announces as
        // servers arrive): a harness waits once, for its first listing, not twice.
        if matches!(harness.scope, Scope::Server(_)) {
            hub.settle().await;
        }
        let answer = match &harness.scope {
            Scope::Server(server) => server_result(hub, server, &requested)
                .map(|result| result_answer(&id, &result))
                .unwrap_or_else(|| {
                    let name = hub.connections.name_of(server);
                    error_answer(
                        &id,
                        INTERNAL_ERROR,
                        &format!("MCP server {name} is not running"),
                    )
                }),
            Scope::All => result_answer(&id, &union_result(hub, &requested)),
        };
        stream.finish(answer);
        harness.go_live();
    });
}

/// Server `server`'s own `initialize` result for a harness that asked for `requested`:
/// while it runs, or as it last answered.
fn server_result(hub: &Hub, server: &str, requested: &str) -> Option<String> {
    let initialized = match hub.connections.get(server) {
        Some(connected) => connected.initialized,
        None => hub.connections.last_initialized(server)?,
    };
    let version = version::answer(requested, &initialized.protocol_version);
    Some(handshake::result_for(&initialized, version))
}

/// [`proxy_info`] as JSON text, written once.
pub fn proxy_info_json() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| proxy_info().to_string())
}

/// The proxy's own `serverInfo` (the aggregated endpoint's identity).
pub fn proxy_info() -> Value {
    serde_json::json!({
        "name": "ahp-proxy",
        "title": "ahp-proxy",
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// The extensions (`capabilities.extensions`) the aggregated endpoint can route, so offers
/// when a server does: Tasks (task ids routed to the server that made them) and MCP Apps
/// (`ui://` resources routed by URI). Another extension's methods would reach no server.
pub const ROUTED_EXTENSIONS: [&str; 2] = [
    "io.modelcontextprotocol/tasks",
    "io.modelcontextprotocol/ui",
];

/// What the aggregated endpoint offers: the union of every ready server's capabilities
/// (with the list changes the proxy itself announces, and only the extensions it routes),
/// and their instructions, each under its server's name (`None` when none has any).
pub fn union(hub: &Hub) -> (Value, Option<String>) {
    let mut capabilities = Value::Object(Map::new());
    let mut instructions = Vec::new();
    for (id, server) in hub.connections.snapshot() {
        merge(&mut capabilities, &server.initialized.capabilities);
        if let Some(text) = server
            .initialized
            .instructions
            .as_deref()
            .filter(|t| !t.trim().is_empty())
        {
            instructions.push(format!("## {}\n{}", hub.qualifier(&id), text.trim()));
        }
    }
    routed_only(&mut capabilities);
    // Servers come and go: the proxy announces every list's changes itself. While a declared
    // server is not ready yet, every list is promised (its prompts or resources may come).
    let coming = hub.connections.declared().len() > hub.connections.snapshot().len();
    if let Some(object) = capabilities.as_object_mut() {
        for list in ["tools", "prompts", "resources"] {
            let always = list == "tools" || coming;
            if always || object.contains_key(list) {
                let entry = object
                    .entry(list)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(entry) = entry.as_object_mut() {
                    entry.insert("listChanged".into(), Value::Bool(true));
                }
            }
        }
    }
    let instructions = (!instructions.is_empty()).then(|| instructions.join("\n\n"));
    (capabilities, instructions)
}

/// `capabilities` with only the [`ROUTED_EXTENSIONS`] among its `extensions` (none left: no
/// `extensions`).
fn routed_only(capabilities: &mut Value) {
    let Some(object) = capabilities.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(extensions)) = object.get_mut("extensions") {
        extensions.retain(|name, _| ROUTED_EXTENSIONS.contains(&name.as_str()));
        if !extensions.is_empty() {
            return;
        }
    }
    object.remove("extensions");
}

/// The aggregated endpoint's result: the proxy's `serverInfo` and [`union`].
fn union_result(hub: &Hub, requested: &str) -> String {
    let (capabilities, instructions) = union(hub);
    let mut result = Map::new();
    result.insert(
        "protocolVersion".into(),
        Value::String(version::answer(requested, version::LATEST).to_string()),
    );
    result.insert("capabilities".into(), capabilities);
    result.insert("serverInfo".into(), proxy_info());
    if let Some(instructions) = instructions {
        result.insert("instructions".into(), Value::String(instructions));
    }
    Value::Object(result).to_string()
}

/// `from` merged into `into`: objects member by member, flags true if either is.
pub fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                match into.get_mut(key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        into.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Bool(into), Value::Bool(from)) => *into |= *from,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_routed_extensions_are_offered() {
        let mut caps = json!({"tools": {}, "extensions": {"x-vendor/ext": {},
            "io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/ui": {"m": 1}}});
        routed_only(&mut caps);
        assert_eq!(
            caps,
            json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {},
                "io.modelcontextprotocol/ui": {"m": 1}}})
        );
        let mut caps = json!({"tools": {}, "extensions": {"x-vendor/ext": {}}});
        routed_only(&mut caps);
        assert_eq!(caps, json!({"tools": {}}));
    }

    #[test]
    fn capabilities_merge_member_by_member() {
        let mut caps = json!({"tools": {"listChanged": false}, "logging": {}});
        merge(
            &mut caps,
            &json!({"tools": {"listChanged": true}, "tasks": {"list": {}},
            "resources": {"subscribe": true}}),
        );
        merge(
            &mut caps,
            &json!({"resources": {"listChanged": false}, "logging": null}),
        );
        assert_eq!(
            caps,
            json!({"tools": {"listChanged": true}, "logging": {}, "tasks": {"list": {}},
                "resources": {"subscribe": true, "listChanged": false}})
        );
    }
}
