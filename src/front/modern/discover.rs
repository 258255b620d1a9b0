//! `server/discover` on the modern face: on `/mcp/<server>` that server's own answer (a
//! modern server's as it gave it; a legacy one's built from its `initialize` result); on
//! `/mcp` and stdio the proxy's, with the union of the servers' capabilities and their
//! instructions and the strictest of their cache hints, answered at once as `initialize` is
//! (every list promised with `listChanged`, and stale at once, while a server is coming);
//! a server's own endpoint waits for that server, as its `initialize` does.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::super::answers::{error_answer, result_answer, INTERNAL_ERROR};
use super::super::hub::Hub;
use super::super::initialize;
use super::super::outbox::Stream;
use super::super::registry::Scope;
use super::scope_hint;
use crate::mcp::era::{self, meta, CacheHint};
use crate::mcp::message::Message;

/// Answer `server/discover` on `out`.
pub fn answer(hub: Arc<Hub>, scope: Scope, message: Message, out: Stream) {
    let id = message.id().unwrap_or("null").to_string();
    tokio::spawn(async move {
        if matches!(scope, Scope::Server(_)) {
            hub.settle().await;
        }
        let text = match &scope {
            Scope::Server(server) => match of_server(&hub, server) {
                Some(result) => result_answer(&id, &result),
                None => {
                    let name = hub.connections.name_of(server);
                    error_answer(
                        &id,
                        INTERNAL_ERROR,
                        &format!("MCP server {name} is not running"),
                    )
                }
            },
            Scope::All => {
                let (capabilities, instructions) = initialize::union(&hub);
                let info = initialize::proxy_info();
                let coming = hub.connections.declared().len() > hub.connections.snapshot().len();
                let hint = match coming {
                    true => CacheHint::LEGACY,
                    false => scope_hint(&hub, &scope),
                };
                let result = result(capabilities, instructions, info, hint);
                result_answer(&id, &result.to_string())
            }
        };
        out.finish(text);
    });
}

/// Server `server`'s discover result: a modern server's own answer, byte for byte as it
/// gave it; a legacy server's built from its `initialize` result (while it runs, or as it
/// last answered).
fn of_server(hub: &Hub, server: &str) -> Option<String> {
    let connected = hub.connections.get(server);
    let discovered = (connected.as_ref()).and_then(|c| c.session.discovered());
    if let Some(own) = discovered.filter(|text| is_object(text)) {
        return Some(own.to_string());
    }
    let initialized = match connected {
        Some(connected) => connected.initialized,
        None => hub.connections.last_initialized(server)?,
    };
    let info = (initialized.server_info.clone())
        .unwrap_or_else(|| json!({"name": hub.connections.name_of(server), "version": "0"}));
    let built = result(
        initialized.capabilities.clone(),
        initialized.instructions.clone(),
        info,
        CacheHint::LEGACY,
    );
    Some(built.to_string())
}

/// Whether `text` is one JSON object (what a discover result must be).
fn is_object(text: &str) -> bool {
    serde_json::from_str::<Map<String, Value>>(text).is_ok()
}

/// A discover result: the versions the front serves, `capabilities`, `instructions`, the
/// identity in `_meta`, and cache hints `hint`.
fn result(
    capabilities: Value,
    instructions: Option<String>,
    info: Value,
    hint: CacheHint,
) -> Value {
    let mut result = Map::new();
    result.insert("resultType".into(), json!("complete"));
    result.insert("supportedVersions".into(), json!(era::SUPPORTED));
    result.insert("capabilities".into(), capabilities);
    if let Some(instructions) = instructions.filter(|i| !i.trim().is_empty()) {
        result.insert("instructions".into(), Value::String(instructions));
    }
    result.insert("_meta".into(), json!({ meta::SERVER_INFO: info }));
    result.insert("ttlMs".into(), json!(hint.ttl_ms));
    result.insert(
        "cacheScope".into(),
        json!(if hint.private { "private" } else { "public" }),
    );
    Value::Object(result)
}
