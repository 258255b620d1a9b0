//! `server/discover` on the modern face: on `/mcp/<server>` that server's own answer (built
//! from its legacy `initialize` result: capabilities, instructions, `serverInfo` in `_meta`);
//! on `/mcp` and stdio the proxy's, with the union of the servers' capabilities and their
//! instructions. Answered once servers still starting are up, as `initialize` is.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::super::answers::{error_answer, result_answer, INTERNAL_ERROR};
use super::super::hub::Hub;
use super::super::initialize;
use super::super::outbox::Stream;
use super::super::registry::Scope;
use crate::mcp::era::{self, meta, CacheHint};
use crate::mcp::message::Message;

/// Answer `server/discover` on `out`.
pub fn answer(hub: Arc<Hub>, scope: Scope, message: Message, out: Stream) {
    let id = message.id().unwrap_or("null").to_string();
    tokio::spawn(async move {
        hub.settle().await;
        let text = match &scope {
            Scope::Server(server) => match of_server(&hub, server) {
                Some(result) => result_answer(&id, &result.to_string()),
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
                result_answer(&id, &result(capabilities, instructions, info).to_string())
            }
        };
        out.finish(text);
    });
}

/// Server `server`'s discover result, from its `initialize` result (while it runs, or as it
/// last answered).
fn of_server(hub: &Hub, server: &str) -> Option<Value> {
    let initialized = match hub.connections.get(server) {
        Some(connected) => connected.initialized,
        None => hub.connections.last_initialized(server)?,
    };
    let info = (initialized.server_info.clone())
        .unwrap_or_else(|| json!({"name": hub.connections.name_of(server), "version": "0"}));
    Some(result(
        initialized.capabilities.clone(),
        initialized.instructions.clone(),
        info,
    ))
}

/// A discover result: the versions the front serves, `capabilities`, `instructions`, the
/// identity in `_meta`, and the cache hints the proxy gives a legacy server's answers.
fn result(capabilities: Value, instructions: Option<String>, info: Value) -> Value {
    let hint = CacheHint::LEGACY;
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
