//! The few MCP messages the benchmark clients write and read, as raw JSON text: the
//! `initialize` they send (or, at 2026-07-28, the `_meta` each request carries), a request
//! line, what they look at in an answer, and the echo tool found in a `tools/list` answer.

use serde::Deserialize;
use serde_json::value::RawValue;

/// What both clients send in `initialize`: no capabilities, so no server→client requests.
pub const INITIALIZE_PARAMS: &str = r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench_front","version":"0.1.0"}}"#;

/// The modern protocol version: no `initialize`, no session, each request stateless.
pub const MODERN: &str = "2026-07-28";

/// What a modern request's `params._meta` carries (no capabilities, as `initialize` above).
const MODERN_META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench_front","version":"0.1.0"}}"#;

/// The MCP era a benchmark client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize`, then requests in the session (2025-06-18 here).
    Legacy,
    /// 2026-07-28: each request a stateless POST carrying its own `_meta`.
    Modern,
}

/// `params` (a JSON object's text) as `era` sends them: with the modern `_meta` added.
pub fn params_for(era: Era, params: &str) -> String {
    match era {
        Era::Legacy => params.to_string(),
        Era::Modern => {
            let body = params.trim().trim_start_matches('{').trim_start();
            let rest = if body == "}" {
                "}".to_string()
            } else {
                format!(",{body}")
            };
            format!(r#"{{"_meta":{MODERN_META}{rest}"#)
        }
    }
}

/// A JSON-RPC request (`params` is JSON text) appended to `out`.
pub fn write_request(out: &mut Vec<u8>, id: u64, method: &str, params: &str) {
    use std::io::Write;
    let _ = write!(
        out,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
    );
}

/// What a client looks at in a message it reads: whether it answers the call, and how.
#[derive(Deserialize)]
pub struct Reply<'a> {
    #[serde(borrow)]
    pub id: Option<&'a RawValue>,
    pub method: Option<&'a str>,
    #[serde(borrow)]
    pub error: Option<&'a RawValue>,
}

impl Reply<'_> {
    /// Whether this message answers request `id` (a response, not a request or notification).
    pub fn answers(&self, id: &str) -> bool {
        self.method.is_none() && self.id.map(RawValue::get) == Some(id)
    }
}

/// The `params` of a `tools/call` of the echo tool (named `tool` by this path).
pub fn echo_call(tool: &str) -> String {
    serde_json::json!({"name": tool, "arguments": {"text": "hello"}}).to_string()
}

/// The name under which a `tools/list` answer (a whole JSON-RPC response) offers the echo
/// tool: `echo` itself, or `echo` behind a prefix a proxy added (`echo/echo`, `echo_echo`).
pub fn echo_tool(list_answer: &str) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_str(list_answer).ok()?;
    let names: Vec<&str> = answer["result"]["tools"]
        .as_array()?
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    let prefixed = |name: &&&str| {
        name.strip_suffix("echo")
            .is_some_and(|prefix| prefix.ends_with(['/', '_', '.', ':']))
    };
    names
        .iter()
        .find(|name| **name == "echo")
        .or_else(|| names.iter().find(prefixed))
        .map(|name| name.to_string())
}

/// Whether a `tools/call` answer (a whole JSON-RPC response) carries the echoed text.
pub fn echoed(call_answer: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(call_answer)
        .is_ok_and(|answer| answer["result"]["content"][0]["text"] == "hello")
}
