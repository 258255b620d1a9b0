//! Which MCP era a server speaks, read off its answer to the `server/discover` probe
//! (stdio: the response message; HTTP: the status and body), and the modern constants.
//!
//! Pure: the probes themselves are in [`super::probe`]. A server whose discover answer also
//! lists a legacy version the proxy knows is spoken to in legacy (`initialize`): legacy is
//! the byte-transparent path for today's harnesses; one that lists only 2026-07-28 (SDK v2,
//! dual-era or modern-only) is spoken to in modern.

use serde_json::{Map, Value};

use crate::mcp::message::{Kind, Message};
use crate::mcp::version;

/// The modern protocol version.
pub const MODERN: &str = "2026-07-28";
/// `_meta` key: the request's protocol version.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities for this request.
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: who the client is.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: the log level the client asks for with this request.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key: who the server is (in results).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Unsupported protocol version.
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// Missing required client capability.
pub const MISSING_CAPABILITY: i64 = -32021;
/// Header mismatch.
pub const HEADER_MISMATCH: i64 = -32020;

/// A server's (or a harness's) MCP era.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2025-11-25 and before: `initialize`, sessions, server→client requests.
    Legacy,
    /// 2026-07-28: `server/discover`, per-request `_meta`, no sessions, MRTR.
    Modern,
}

/// What a server answered to `server/discover`, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    /// The whole `result`, as written.
    pub result: String,
    /// `supportedVersions`.
    pub versions: Vec<String>,
    /// `capabilities`.
    pub capabilities: Value,
    /// `instructions`.
    pub instructions: Option<String>,
    /// `_meta["io.modelcontextprotocol/serverInfo"]`.
    pub server_info: Option<Value>,
}

impl Discovered {
    /// Read a discover `result` body; `None` when it is not one.
    pub fn read(result: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(result).ok()?;
        let object = value.as_object()?;
        let versions: Vec<String> = object
            .get("supportedVersions")?
            .as_array()?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        Some(Self {
            result: result.to_string(),
            versions,
            capabilities: object
                .get("capabilities")
                .filter(|c| c.is_object())
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
            instructions: object
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_string),
            server_info: object
                .get("_meta")
                .and_then(|m| m.get(META_SERVER_INFO))
                .filter(|i| i.is_object())
                .cloned(),
        })
    }

    /// The era the proxy speaks to it in: legacy when it also lists a legacy version the
    /// proxy knows, else modern.
    pub fn spoken(&self) -> Era {
        if self.versions.iter().any(|v| version::is_known(v)) {
            Era::Legacy
        } else {
            Era::Modern
        }
    }
}

/// The verdict of a probe.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A discover result.
    Discovered(Discovered),
    /// A modern server that refused the probe itself (a modern error): said as a message.
    ModernRefusal(String),
    /// Not modern: fall back to `initialize`.
    Legacy,
}

/// What an answer to the probe says (stdio, or an HTTP body).
pub fn classify(answer: &Message) -> Verdict {
    let body = answer
        .body()
        .map(|span| answer.slice(span).to_string())
        .unwrap_or_default();
    match answer.kind() {
        Kind::Result => match Discovered::read(&body) {
            Some(discovered) => Verdict::Discovered(discovered),
            None => Verdict::Legacy,
        },
        Kind::Error if is_modern_error(&body) => Verdict::ModernRefusal(body),
        _ => Verdict::Legacy,
    }
}

/// Whether a JSON-RPC `error` object is one only a modern server sends: `-32022` naming
/// 2026-07-28 among the supported versions, `-32020` or `-32021`.
pub fn is_modern_error(error: &str) -> bool {
    serde_json::from_str::<Value>(error).is_ok_and(|error| is_modern_error_value(&error))
}

fn is_modern_error_value(error: &Value) -> bool {
    match error.get("code").and_then(Value::as_i64) {
        Some(UNSUPPORTED_VERSION) => error
            .get("data")
            .and_then(|d| d.get("supported"))
            .and_then(Value::as_array)
            .is_some_and(|s| s.iter().any(|v| v.as_str() == Some(MODERN))),
        Some(HEADER_MISMATCH | MISSING_CAPABILITY) => true,
        _ => false,
    }
}

/// Whether a modern refusal contradicts the probe it answers: `-32022` (version not
/// served) naming 2026-07-28, the version asked, among those supported. A server still
/// starting has been seen to say so; it is asked again.
pub fn contradicts(error: &str) -> bool {
    let Ok(error) = serde_json::from_str::<Value>(error) else {
        return false;
    };
    error.get("code").and_then(Value::as_i64) == Some(UNSUPPORTED_VERSION)
        && is_modern_error_value(&error)
}

/// The `server/discover` probe's params: the envelope only.
pub fn discover_params(capabilities: &Value, client_info: &Value) -> String {
    serde_json::json!({"_meta": {
        META_VERSION: MODERN,
        META_CAPABILITIES: capabilities,
        META_CLIENT_INFO: client_info,
    }})
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> Message {
        Message::parse(text.to_string()).unwrap()
    }

    #[test]
    fn a_discover_result_is_modern_unless_it_also_lists_a_legacy_version() {
        let only = message(
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"instructions":"hi","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"2"}},"ttlMs":0,"cacheScope":"private"}}"#,
        );
        let Verdict::Discovered(d) = classify(&only) else {
            panic!("not discovered")
        };
        assert_eq!(d.spoken(), Era::Modern);
        assert_eq!(d.server_info.unwrap()["name"], "m");
        assert_eq!(d.instructions.as_deref(), Some("hi"));
        let both = message(
            r#"{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2025-11-25","2026-07-28"],"capabilities":{}}}"#,
        );
        let Verdict::Discovered(d) = classify(&both) else {
            panic!("not discovered")
        };
        assert_eq!(d.spoken(), Era::Legacy);
    }

    #[test]
    fn errors_are_legacy_unless_only_a_modern_server_sends_them() {
        let not_found =
            message(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}"#);
        assert_eq!(classify(&not_found), Verdict::Legacy);
        let modern = message(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"v","data":{"supported":["2026-07-28"]}}}"#,
        );
        assert!(matches!(classify(&modern), Verdict::ModernRefusal(_)));
        let other = message(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"v","data":{"supported":["2025-11-25"]}}}"#,
        );
        assert_eq!(classify(&other), Verdict::Legacy);
        let odd = message(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#);
        assert_eq!(classify(&odd), Verdict::Legacy);
        assert!(is_modern_error(r#"{"code":-32020,"message":"h"}"#));
        assert!(!is_modern_error("not json"));
    }
}
