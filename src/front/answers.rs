//! The JSON-RPC answers the front writes itself (raw text) and the error codes they carry:
//! JSON-RPC's own, and the two the MCP SDKs use for a timeout and a missing resource.

use crate::mcp::message;

/// JSON-RPC "invalid request" (also what servers built on the MCP SDKs answer a request
/// sent before `initialize` with).
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC "method not found".
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "invalid params".
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC "internal error".
pub const INTERNAL_ERROR: i64 = -32603;
/// JSON-RPC code for "the server did not answer in time" (as the MCP SDKs use it).
pub const REQUEST_TIMEOUT: i64 = -32001;
/// MCP's "resource not found".
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A JSON-RPC error answer to request `id` (raw) with `code` and `text`.
pub fn error_answer(id: &str, code: i64, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{}}}}}"#,
        message::quote(text)
    )
}

/// A JSON-RPC result answer to request `id` (raw) with `result` (raw JSON).
pub fn result_answer(id: &str, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_and_result_answers_are_json_rpc() {
        let e: serde_json::Value =
            serde_json::from_str(&error_answer("\"a\"", METHOD_NOT_FOUND, "no \"x\"")).unwrap();
        assert_eq!(e["id"], "a");
        assert_eq!(e["error"]["code"], -32601);
        assert_eq!(e["error"]["message"], "no \"x\"");
        assert_eq!(
            result_answer("7", "{}"),
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#
        );
    }
}
