//! The MCP handshake with a server: who the proxy says it is (its own identity, or the one
//! harness it stands for, plus the MCP Apps extension), `initialize`, and what the server
//! answered, kept as raw text for a per-server endpoint to hand on unchanged.

use std::time::Duration;

use serde_json::{Map, Value};

use super::envelope::{self, Envelope};
use super::era::{Discovered, Era};
use super::session::{Session, Unanswered};
use crate::mcp::message::{self, Kind};
use crate::mcp::version;

/// The MCP Apps extension id, declared upstream so App servers keep their UI metadata.
pub const MCP_APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MCP Apps HTML profile.
pub const MCP_APP_MIME: &str = "text/html;profile=mcp-app";

/// What the proxy sends in `initialize`.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// The version asked for.
    pub protocol_version: String,
    /// `capabilities`, as a JSON object.
    pub capabilities: Value,
    /// `clientInfo`, as a JSON object.
    pub client_info: Value,
}

impl Identity {
    /// The proxy on its own, for many harnesses at once: every client capability a
    /// harness may bring (requests for them go only to harnesses that declared them).
    pub fn proxy() -> Self {
        let capabilities = serde_json::json!({
            "roots": {"listChanged": true},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
        });
        Self {
            protocol_version: version::LATEST.to_string(),
            capabilities: with_apps(capabilities),
            client_info: serde_json::json!({
                "name": "ahp-proxy",
                "version": env!("CARGO_PKG_VERSION"),
            }),
        }
    }

    /// On behalf of one harness, from its `initialize` params: its own capabilities and
    /// version, the MCP Apps extension added, and a `clientInfo` that names it.
    pub fn of_harness(params: &Value) -> Self {
        let capabilities = params
            .get("capabilities")
            .filter(|c| c.is_object())
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()));
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .filter(|v| version::is_known(v))
            .unwrap_or(version::LATEST);
        let client_info = envelope::named_via(
            params
                .get("clientInfo")
                .filter(|c| c.is_object())
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"name": "harness", "version": "0"})),
        );
        Self {
            protocol_version: asked.to_string(),
            capabilities: with_apps(capabilities),
            client_info,
        }
    }
}

impl Identity {
    /// The envelope of this identity for a modern server (a legacy harness, or the proxy).
    pub fn envelope(&self) -> Envelope {
        Envelope {
            era: Era::Legacy,
            capabilities: self.capabilities.clone(),
            client_info: self.client_info.clone(),
            log_level: None,
        }
    }
}

/// `capabilities` with the MCP Apps extension declared (kept if the harness has it).
fn with_apps(mut capabilities: Value) -> Value {
    if let Some(object) = capabilities.as_object_mut() {
        let extensions = object
            .entry("extensions")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(extensions) = extensions.as_object_mut() {
            extensions
                .entry(MCP_APPS_EXTENSION)
                .or_insert_with(|| serde_json::json!({"mimeTypes": [MCP_APP_MIME]}));
        }
    }
    capabilities
}

/// What a server answered to `initialize`.
#[derive(Debug, Clone, PartialEq)]
pub struct Initialized {
    /// The whole `result` object, as the server wrote it.
    pub result: String,
    /// The version it settled on.
    pub protocol_version: String,
    /// Its `capabilities`.
    pub capabilities: Value,
    /// Its `instructions`, if any.
    pub instructions: Option<String>,
    /// Its `serverInfo`, if any.
    pub server_info: Option<Value>,
    /// The same as JSON text, written once: a modern answer from this server names it.
    pub server_info_json: Option<String>,
}

impl Initialized {
    /// The legacy `initialize` result the front hands legacy harnesses for this server:
    /// its capabilities, identity and instructions at the newest legacy version.
    pub fn discovered(discovered: &Discovered, name: &str) -> Self {
        let server_info = discovered
            .server_info
            .clone()
            .unwrap_or_else(|| serde_json::json!({"name": name, "version": "0"}));
        let mut result = serde_json::json!({
            "protocolVersion": version::LATEST,
            "capabilities": discovered.capabilities,
            "serverInfo": server_info,
        });
        if let (Some(text), Some(object)) = (&discovered.instructions, result.as_object_mut()) {
            object.insert("instructions".into(), Value::String(text.clone()));
        }
        Self {
            result: result.to_string(),
            protocol_version: version::LATEST.to_string(),
            capabilities: discovered.capabilities.clone(),
            instructions: discovered.instructions.clone(),
            server_info_json: Some(server_info.to_string()),
            server_info: Some(server_info),
        }
    }
}

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HandshakeError {
    /// The request got no answer.
    #[error("{0}")]
    Failed(Unanswered),
    /// The server answered `initialize` with an error.
    #[error("the server refused initialize: {0}")]
    Refused(String),
    /// The server answered something that is not an initialize result.
    #[error("the server's initialize result is not usable: {0}")]
    Malformed(String),
}

/// `initialize` as `identity`, then `notifications/initialized`.
pub async fn initialize(
    session: &Session,
    identity: &Identity,
    timeout: Duration,
) -> Result<Initialized, HandshakeError> {
    let params = serde_json::json!({
        "protocolVersion": identity.protocol_version,
        "capabilities": identity.capabilities,
        "clientInfo": identity.client_info,
    });
    let answer = session
        .call("initialize", Some(&params.to_string()), timeout)
        .await
        .map_err(HandshakeError::Failed)?;
    let body = answer
        .body()
        .map(|span| answer.slice(span).to_string())
        .unwrap_or_default();
    if answer.kind() == Kind::Error {
        let message = answer
            .string(&["message"])
            .map(|m| m.into_owned())
            .unwrap_or_else(|| body.clone());
        return Err(HandshakeError::Refused(message));
    }
    let value: Value =
        serde_json::from_str(&body).map_err(|e| HandshakeError::Malformed(e.to_string()))?;
    let Some(object) = value.as_object() else {
        return Err(HandshakeError::Malformed("not an object".into()));
    };
    let protocol_version = object
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| HandshakeError::Malformed("no protocolVersion".into()))?
        .to_string();
    let initialized = Initialized {
        capabilities: object
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new())),
        instructions: object
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
        server_info: object.get("serverInfo").cloned(),
        server_info_json: object.get("serverInfo").map(Value::to_string),
        protocol_version,
        result: body,
    };
    session.negotiated(&initialized.protocol_version);
    session
        .notify(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string())
        .map_err(HandshakeError::Failed)?;
    Ok(initialized)
}

/// The `result` of an `initialize` answered on behalf of a server: its own result with
/// only `protocolVersion` replaced by `version` (when it differs).
pub fn result_for(initialized: &Initialized, version: &str) -> String {
    if version == initialized.protocol_version {
        return initialized.result.clone();
    }
    let Some(span) = message::find(
        &initialized.result,
        0..initialized.result.len(),
        &["protocolVersion"],
    ) else {
        return initialized.result.clone();
    };
    let quoted = message::quote(version);
    message::splice(&initialized.result, &mut [(span, quoted.as_str())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harness_identity_keeps_its_capabilities_adds_apps_and_names_itself() {
        let params = serde_json::json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"elicitation": {"url": {}}, "x-new": {"a": 1}},
            "clientInfo": {"name": "claude-code", "version": "2.0"}
        });
        let identity = Identity::of_harness(&params);
        assert_eq!(identity.protocol_version, "2025-06-18");
        assert_eq!(identity.client_info["name"], "claude-code via ahp-proxy");
        assert_eq!(
            identity.capabilities["elicitation"],
            serde_json::json!({"url": {}})
        );
        assert_eq!(identity.capabilities["x-new"], serde_json::json!({"a": 1}));
        assert!(identity.capabilities.get("sampling").is_none());
        assert_eq!(
            identity.capabilities["extensions"][MCP_APPS_EXTENSION]["mimeTypes"][0],
            MCP_APP_MIME
        );
        let odd = Identity::of_harness(&serde_json::json!({"protocolVersion": "3000-01-01"}));
        assert_eq!(odd.protocol_version, version::LATEST);
    }

    #[test]
    fn a_modern_server_gets_a_legacy_initialize_result_from_its_discover_answer() {
        let d = Discovered::read(
            r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"instructions":"hi","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"2"}}}"#,
        )
        .unwrap();
        let init = Initialized::discovered(&d, "fallback");
        let result: Value = serde_json::from_str(&init.result).unwrap();
        assert_eq!(result["protocolVersion"], version::LATEST);
        assert_eq!(result["serverInfo"]["name"], "m");
        assert_eq!(result["instructions"], "hi");
        assert_eq!(result["capabilities"], serde_json::json!({"tools": {}}));
        let bare = Discovered::read(r#"{"supportedVersions":[],"capabilities":{}}"#).unwrap();
        let init = Initialized::discovered(&bare, "fallback");
        assert_eq!(init.server_info.unwrap()["name"], "fallback");
    }

    #[test]
    fn an_answer_on_behalf_of_a_server_changes_only_the_version() {
        let initialized = Initialized {
            result: r#"{"serverInfo":{"name":"s","version":"1"},"protocolVersion":"2025-11-25","capabilities":{"z":{},"a":{}}}"#.into(),
            protocol_version: "2025-11-25".into(),
            capabilities: Value::Null,
            instructions: None,
            server_info: None,
            server_info_json: None,
        };
        assert_eq!(result_for(&initialized, "2025-11-25"), initialized.result);
        assert_eq!(
            result_for(&initialized, "2025-03-26"),
            r#"{"serverInfo":{"name":"s","version":"1"},"protocolVersion":"2025-03-26","capabilities":{"z":{},"a":{}}}"#
        );
    }
}
