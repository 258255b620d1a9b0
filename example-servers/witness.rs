//! The witness: a raw JSON-RPC fixture that reports what reached it, so a test can see a
//! server's side of a call. `record` answers with the exact `params` text it received (and
//! is counted); `calls` answers how many `record` calls reached it; `routed` (its `region`
//! and `count` annotated `x-mcp-header`, 2026-07-28) answers its params too, uncounted.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::raw::{quote, Call, Handler, Reply};

/// What a witness answers to `initialize`.
const INITIALIZE: &str = r#"{"protocolVersion":"2025-11-25","serverInfo":{"name":"ahp-proxy-example-witness","version":"1.0.0"},"capabilities":{"tools":{}}}"#;

/// Its tools.
const TOOLS: &str = r#"{"tools":[{"name":"record","description":"Returns the exact params of this call, as received; counted.","inputSchema":{"type":"object"}},{"name":"calls","description":"How many record calls reached this server.","inputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true}},{"name":"routed","description":"Returns its params; region and count are mirrored as Mcp-Param-Region and Mcp-Param-Count.","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"count":{"type":"integer","x-mcp-header":"Count"}}}}]}"#;

/// One session's witness.
#[derive(Default)]
pub struct Witness {
    recorded: AtomicU64,
}

impl Handler for Witness {
    async fn request(&self, call: Call) -> Reply {
        match call.method.as_str() {
            "initialize" => Reply::Result(INITIALIZE.into()),
            "ping" => Reply::Result("{}".into()),
            "tools/list" => Reply::Result(TOOLS.into()),
            "tools/call" => match call.params()["name"].as_str().unwrap_or_default() {
                "record" => {
                    self.recorded.fetch_add(1, Ordering::SeqCst);
                    text(call.params_raw().unwrap_or("null"))
                }
                "calls" => text(&self.recorded.load(Ordering::SeqCst).to_string()),
                "routed" => text(call.params_raw().unwrap_or("null")),
                name => Reply::Error(-32602, format!("Unknown tool: {name}")),
            },
            method => Reply::Error(-32601, format!("Method not found: {method}")),
        }
    }
}

/// A tool result of one text block.
fn text(said: &str) -> Reply {
    Reply::Result(format!(
        r#"{{"content":[{{"type":"text","text":{}}}]}}"#,
        quote(said)
    ))
}
