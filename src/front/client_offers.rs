//! The tools AHP clients publish, as offers of the aggregated endpoint: one pseudo-server
//! per client (`client:<clientId>`), each tool an MCP tool.

use serde_json::json;

use crate::host::client_tools::ClientTool;
use crate::upstream::offer::{Item, Offer};

/// The prefix of the namespace ids that stand for AHP clients (`client:<clientId>`).
pub const CLIENT_PREFIX: &str = "client:";

/// The clients' tools as pseudo-servers of the namespace: `(id, name, offer)` per client.
pub fn offers(tools: &[ClientTool]) -> Vec<(String, String, Offer)> {
    let mut out: Vec<(String, String, Offer)> = Vec::new();
    for tool in tools {
        let id = format!("{CLIENT_PREFIX}{}", tool.client_id);
        if out.last().is_none_or(|(last, _, _)| *last != id) {
            out.push((id.clone(), tool.client_name.clone(), Offer::default()));
        }
        if let Some((_, _, offer)) = out.last_mut() {
            offer.tools.push(item(&tool.tool));
        }
    }
    out
}

/// A client tool as an MCP tool (an input schema is required there: an object by default).
fn item(tool: &ahp_types::state::ToolDefinition) -> Item {
    let mut value = serde_json::to_value(tool).unwrap_or_else(|_| json!({"name": tool.name}));
    if let Some(object) = value.as_object_mut() {
        object
            .entry("inputSchema")
            .or_insert_with(|| json!({"type": "object"}));
    }
    Item {
        key: tool.name.clone(),
        raw: value.to_string(),
    }
}
