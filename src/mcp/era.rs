//! MCP 2026-07-28 ("modern") on the wire, pure: which era a request speaks, its `_meta`
//! envelope and the spec's checks of it and of the standard HTTP headers, the spec's error
//! codes, and the members a modern result carries (`resultType`, cache hints, `serverInfo`).

use std::ops::Range;

use serde_json::Value;

use super::message::{self, Kind, Message};
use super::version;

/// The modern revision the proxy serves.
pub const MODERN: &str = "2026-07-28";
/// Every modern revision the proxy serves (`-32022`'s `supported`, discover's versions).
pub const SUPPORTED: &[&str] = &[MODERN];

/// `params._meta` keys of the modern envelope and results.
pub mod meta {
    /// The request's protocol version (required).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's capabilities for this request (required).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The client's identity (should).
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The log level the request wants `notifications/message` at (none without it).
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// The server's identity, on results.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The `subscriptions/listen` request a delivery belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
}

/// A standard header does not match the body (or is missing).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability it did not declare.
pub const MISSING_CAPABILITY: i64 = -32021;
/// The request's protocol version is not served.
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// JSON-RPC "invalid params" (a malformed envelope; also a missing resource now).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC "method not found" (also every method removed in 2026-07-28).
pub const METHOD_NOT_FOUND: i64 = -32601;

/// Which era a message speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and before: `initialize`, sessions.
    Legacy,
    /// 2026-07-28: stateless, the envelope in every request.
    Modern,
}

/// Whether `version` names a modern revision (one without `initialize`): a date at or after
/// [`MODERN`] that is not a legacy version.
pub fn is_modern_version(version: &str) -> bool {
    !version::is_known(version) && version >= MODERN && version.len() == MODERN.len()
}

/// The era of a message from a harness: modern when its `params._meta` claims a protocol
/// version or the `MCP-Protocol-Version` header (`header`) names a modern revision; legacy
/// otherwise (`initialize`, answers, anything without a claim).
pub fn classify(message: &Message, header: Option<&str>) -> Era {
    let claims = matches!(message.kind(), Kind::Request | Kind::Notification)
        && message.find(&["_meta", meta::PROTOCOL_VERSION]).is_some();
    if claims || header.is_some_and(is_modern_version) {
        Era::Modern
    } else {
        Era::Legacy
    }
}

/// A modern request refused by the spec's checks: its JSON-RPC error and HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The JSON-RPC error code.
    pub code: i64,
    /// The HTTP status (400 for validation, 404 for an unknown method).
    pub status: u16,
    /// The error message.
    pub message: String,
    /// Its `data` (raw JSON), if any.
    pub data: Option<String>,
}

impl Problem {
    fn new(code: i64, status: u16, message: String) -> Self {
        Self {
            code,
            status,
            message,
            data: None,
        }
    }

    /// The error answer to request `id` (raw).
    pub fn answer(&self, id: &str) -> String {
        error_answer(id, self.code, &self.message, self.data.as_deref())
    }
}

/// A JSON-RPC error answer to `id` (raw) with `code`, `text` and `data` (raw JSON).
pub fn error_answer(id: &str, code: i64, text: &str, data: Option<&str>) -> String {
    let data = data.map(|d| format!(r#","data":{d}"#)).unwrap_or_default();
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{}{data}}}}}"#,
        message::quote(text)
    )
}

/// A modern request's `_meta` envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Its protocol version.
    pub version: String,
    /// The client's capabilities for this request.
    pub capabilities: Value,
    /// The client's identity, if given.
    pub client_info: Option<Value>,
    /// The log level it asked for, if any.
    pub log_level: Option<String>,
}

/// The log levels, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Read and check a modern request's envelope: `-32602` when it is missing or malformed,
/// `-32022` (with `supported` and `requested`) when its version is not served.
pub fn envelope(message: &Message) -> Result<Envelope, Problem> {
    let bad = |what: String| Problem::new(INVALID_PARAMS, 400, format!("Invalid params: {what}"));
    let Some(span) = message.find(&["_meta"]) else {
        return Err(bad("the request has no params._meta envelope".into()));
    };
    let mut meta: Value = serde_json::from_str(message.slice(span))
        .map_err(|_| bad("params._meta is not JSON".into()))?;
    let Some(meta) = meta.as_object_mut() else {
        return Err(bad("params._meta is not an object".into()));
    };
    let version = match meta.get(meta::PROTOCOL_VERSION) {
        Some(Value::String(v)) => v.clone(),
        Some(_) => return Err(bad(format!("{} is not a string", meta::PROTOCOL_VERSION))),
        None => return Err(bad(format!("{} is missing", meta::PROTOCOL_VERSION))),
    };
    if !SUPPORTED.contains(&version.as_str()) {
        let mut problem = Problem::new(
            UNSUPPORTED_VERSION,
            400,
            format!("Unsupported protocol version: {version}"),
        );
        problem.data =
            Some(serde_json::json!({"supported": SUPPORTED, "requested": version}).to_string());
        return Err(problem);
    }
    let capabilities = match meta.remove(meta::CLIENT_CAPABILITIES) {
        Some(c @ Value::Object(_)) => c,
        Some(_) => {
            return Err(bad(format!(
                "{} is not an object",
                meta::CLIENT_CAPABILITIES
            )))
        }
        None => return Err(bad(format!("{} is missing", meta::CLIENT_CAPABILITIES))),
    };
    let client_info = match meta.remove(meta::CLIENT_INFO) {
        None => None,
        Some(info @ Value::Object(_)) => Some(info),
        Some(_) => return Err(bad(format!("{} is not an object", meta::CLIENT_INFO))),
    };
    let log_level = match meta.get(meta::LOG_LEVEL) {
        None => None,
        Some(Value::String(l)) if LOG_LEVELS.contains(&l.as_str()) => Some(l.clone()),
        Some(_) => return Err(bad(format!("{} is not a log level", meta::LOG_LEVEL))),
    };
    Ok(Envelope {
        version,
        capabilities,
        client_info,
        log_level,
    })
}

/// The standard headers of a modern POST, as sent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Headers<'a> {
    /// `MCP-Protocol-Version`.
    pub version: Option<&'a str>,
    /// `Mcp-Method`.
    pub method: Option<&'a str>,
    /// `Mcp-Name`.
    pub name: Option<&'a str>,
}

/// The body member `Mcp-Name` mirrors for `method`, if it has one.
pub fn named_by(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// A header value decoded: the base64 sentinel `=?base64?…?=` undone.
pub fn decode_header(value: &str) -> Option<String> {
    use base64::Engine;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(value.to_string()),
    }
}

/// Check a modern POST's standard headers against its body: `-32020` when
/// `MCP-Protocol-Version`, `Mcp-Method` or (where required) `Mcp-Name` is missing or says
/// something else than the body.
pub fn check_headers(message: &Message, headers: Headers<'_>) -> Result<(), Problem> {
    let mismatch =
        |what: String| Problem::new(HEADER_MISMATCH, 400, format!("Header mismatch: {what}"));
    let body_version = message.string(&["_meta", meta::PROTOCOL_VERSION]);
    match (headers.version, body_version.as_deref()) {
        (None, _) => {
            return Err(mismatch(
                "the MCP-Protocol-Version header is missing".into(),
            ))
        }
        (Some(h), Some(b)) if h != b => {
            return Err(mismatch(format!(
                "MCP-Protocol-Version header value '{h}' does not match body value '{b}'"
            )))
        }
        _ => {}
    }
    let method = message.method().unwrap_or_default();
    if message.kind() == Kind::Request {
        match headers.method {
            None => return Err(mismatch("the Mcp-Method header is missing".into())),
            Some(h) if h != method => {
                return Err(mismatch(format!(
                    "Mcp-Method header value '{h}' does not match body value '{method}'"
                )))
            }
            _ => {}
        }
    }
    if let Some(member) = named_by(method) {
        let body = message.string(&[member]).unwrap_or_default().into_owned();
        match headers.name.map(decode_header) {
            None => return Err(mismatch("the Mcp-Name header is missing".into())),
            Some(None) => return Err(mismatch("the Mcp-Name header is not valid base64".into())),
            Some(Some(h)) if h != body => {
                return Err(mismatch(format!(
                    "Mcp-Name header value '{h}' does not match body value '{body}'"
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Methods 2026-07-28 removed: a modern request naming one is answered `-32601` (404).
pub fn removed(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "tasks/list"
            | "tasks/result"
    )
}

/// What a request gets while the proxy drains its requests in flight before it stops.
pub const SHUTTING_DOWN: &str =
    "ahp-proxy is shutting down: requests in flight finish, new ones are refused";

/// The refusal of a new request while the proxy shuts down (HTTP 503).
pub fn shutting_down() -> Problem {
    Problem::new(-32603, 503, SHUTTING_DOWN.into())
}

/// The refusal of a removed or unknown method.
pub fn not_found(method: &str) -> Problem {
    Problem::new(
        METHOD_NOT_FOUND,
        404,
        format!("Method not found: {method} (not part of MCP {MODERN})"),
    )
}

/// The refusal of a request needing client capabilities it did not declare
/// (`required`: a capabilities object, e.g. `{"elicitation":{}}`).
pub fn missing_capability(required: &Value, why: &str) -> Problem {
    let mut problem = Problem::new(MISSING_CAPABILITY, 400, why.to_string());
    problem.data = Some(serde_json::json!({ "requiredCapabilities": required }).to_string());
    problem
}

/// Methods whose results may be `input_required` (MRTR).
pub fn may_need_input(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

/// Methods whose complete results carry cache hints.
pub fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

/// A result's cache hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHint {
    /// How long it stays fresh.
    pub ttl_ms: u64,
    /// `cacheScope: "private"` (else public).
    pub private: bool,
}

impl CacheHint {
    /// What the proxy says for a legacy server's result, which carries none: stale at once,
    /// private (no cache may share it, nor keep it).
    pub const LEGACY: CacheHint = CacheHint {
        ttl_ms: 0,
        private: true,
    };

    /// Hints that hold for results joined from both: no fresher, no more public than either.
    pub fn merge(self, other: CacheHint) -> CacheHint {
        CacheHint {
            ttl_ms: self.ttl_ms.min(other.ttl_ms),
            private: self.private || other.private,
        }
    }

    /// The hints in result object `text` (`None` when it has none).
    pub fn of(result: &Value) -> Option<CacheHint> {
        let ttl = result.get("ttlMs")?.as_i64()?;
        Some(CacheHint {
            ttl_ms: ttl.max(0) as u64,
            private: result.get("cacheScope").and_then(Value::as_str) != Some("public"),
        })
    }

    fn scope(self) -> &'static str {
        if self.private {
            "private"
        } else {
            "public"
        }
    }
}

/// What a result to a modern harness needs that a legacy server's result lacks.
#[derive(Debug, Clone, Copy)]
pub struct Completion<'a> {
    /// The cache hints to add (for a cacheable method).
    pub hint: Option<CacheHint>,
    /// The `serverInfo` to name in `_meta` (raw JSON).
    pub server_info: Option<&'a str>,
}

/// Answer `message` in modern shape: a result gets `resultType: "complete"`, the cache hints
/// and `_meta` `serverInfo` where absent (what is present stays as written); an error with
/// the 2025 "resource not found" code gets `-32602`. Anything else is kept as it is.
/// The answer was read once already and is not read again.
pub fn complete_message(message: Message, completion: Completion<'_>) -> String {
    let Some(body) = message.body() else {
        return message.into_text();
    };
    let text = message.text();
    if message.kind() == Kind::Error {
        return match message.find(&["code"]) {
            Some(span) if message.slice(span.clone()) == "-32002" => {
                message::splice(text, &mut [(span, "-32602")])
            }
            _ => message.into_text(),
        };
    }
    if message.kind() != Kind::Result || !message.slice(body.clone()).starts_with('{') {
        return message.into_text();
    }
    let has = |key: &str| message.find(&[key]).is_some();
    let mut members: Vec<(&str, String)> = Vec::new();
    if !has("resultType") {
        members.push(("resultType", "\"complete\"".into()));
    }
    if let Some(hint) = completion.hint {
        if !has("ttlMs") {
            members.push(("ttlMs", hint.ttl_ms.to_string()));
        }
        if !has("cacheScope") {
            members.push(("cacheScope", message::quote(hint.scope())));
        }
    }
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    if let Some(info) = completion.server_info {
        match message.find(&["_meta"]) {
            Some(meta) if message.slice(meta.clone()).starts_with('{') => {
                if message.find(&["_meta", meta::SERVER_INFO]).is_none() {
                    let member = [(meta::SERVER_INFO, info.to_string())];
                    edits.push(insertion(text, meta, &member));
                }
            }
            Some(_) => {}
            None => members.push(("_meta", format!(r#"{{"{}":{info}}}"#, meta::SERVER_INFO))),
        }
    }
    if !members.is_empty() {
        edits.push(insertion(text, body, &members));
    }
    let mut edits: Vec<(Range<usize>, &str)> =
        edits.iter().map(|(r, t)| (r.clone(), t.as_str())).collect();
    if edits.is_empty() {
        return message.into_text();
    }
    message::splice(text, &mut edits)
}

/// The edit that puts `members` first in the object at `object` of `text`.
fn insertion(
    text: &str,
    object: Range<usize>,
    members: &[(&str, String)],
) -> (Range<usize>, String) {
    let empty = text[object.start + 1..object.end - 1].trim().is_empty();
    let mut inserted: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{}:{v}", message::quote(k)))
        .collect();
    if !empty {
        inserted.push(String::new());
    }
    let at = object.start + 1;
    (at..at, inserted.join(","))
}

#[cfg(test)]
mod tests;
