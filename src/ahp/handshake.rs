//! The handshake's rules beyond the types: which version an offer gets (VS Code's `0.10.0`
//! included), which clients are shown MCP Apps, and a `reconnect` that names no channel. Pure.

use ahp_types::commands::InitializeParams;
use ahp_types::{negotiate_protocol_version, ROOT_RESOURCE_URI};
use serde_json::Value;

/// What `-32005` offers back: the `ahp-types` 1.0.0 baselines as caret ranges, and VS Code's
/// `0.10.0`.
pub const SUPPORTED_VERSIONS: &[&str] = &["^1.0.0", LEGACY_VSCODE_VERSION, "^0.9.0"];

/// The version a VS Code release spoke that shares the wire contract of 1.0.0 and 0.9.0
/// (its `common/agentHostProtocolCompatibility.ts`: `compatibleProtocolVersions` is
/// `['1.0.0', '0.10.0', '0.9.0']`, and its own host answers an offer of `0.10.0` with it).
pub const LEGACY_VSCODE_VERSION: &str = "0.10.0";

/// The version an `initialize` offering `offered` gets: the highest within a caret range of a
/// baseline, else `0.10.0` when offered (above any 0.9.x, as VS Code's own host prefers it);
/// `Ok(None)` when none fits, `Err` naming a malformed entry.
pub fn negotiate(offered: &[String]) -> Result<Option<String>, String> {
    let negotiated = negotiate_protocol_version(offered)?.map(str::to_string);
    let legacy = offered.iter().any(|v| v == LEGACY_VSCODE_VERSION);
    Ok(match negotiated {
        Some(version) if !(legacy && version.starts_with("0.")) => Some(version),
        _ if legacy => Some(LEGACY_VSCODE_VERSION.to_string()),
        none => none,
    })
}

/// The `clientInfo.name`s of VS Code's windows (its `common/agentHostClientInfo.ts`).
const VSCODE_WINDOWS: &[&str] = &["vscode-editor-window", "vscode-agents-window"];

/// Whether the client is shown `mcpApp`s and `mcp://` channels: it declared
/// `capabilities.mcpApps` (the spec's rule), or it is a VS Code window. VS Code declares no
/// capabilities at `initialize` (its `browser/agentHostProtocolClient.ts`) yet renders Apps:
/// its own host puts `mcpApp` on every MCP server and the channel on every ready one, for
/// every client (`McpCustomizationController`, its `node/shared/mcpCustomizationController.ts`).
pub fn shown_mcp_apps(params: &InitializeParams) -> bool {
    let declared = params
        .capabilities
        .as_ref()
        .is_some_and(|c| c.mcp_apps.is_some());
    let vscode = params
        .client_info
        .as_ref()
        .is_some_and(|info| VSCODE_WINDOWS.contains(&info.name.as_str()));
    declared || vscode
}

/// `reconnect` params with `channel` set to the root when the client named none: VS Code
/// never sends it (`_reconnectOrInitialize`, its `browser/agentHostProtocolClient.ts`), and
/// the root is the only channel `reconnect` goes on.
pub fn reconnect_on_root(mut params: Value) -> Value {
    if let Some(object) = params.as_object_mut() {
        object
            .entry("channel")
            .or_insert_with(|| Value::from(ROOT_RESOURCE_URI));
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn offer(versions: &[&str]) -> Result<Option<String>, String> {
        negotiate(&versions.iter().map(|v| v.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn each_offer_gets_the_version_vs_codes_own_host_would_answer() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["1.0.0", "0.10.0", "0.9.0"], Some("1.0.0")),
            (&["0.9.0", "0.10.0"], Some("0.10.0")),
            (&["0.10.0"], Some("0.10.0")),
            (&["0.9.0", "0.7.0"], Some("0.9.0")),
            (&["1.3.0"], Some("1.3.0")),
            (&["0.11.0"], None),
            (&["0.8.0"], None),
            (&[], None),
        ];
        for (offered, answer) in cases {
            assert_eq!(
                offer(offered),
                Ok(answer.map(str::to_string)),
                "{offered:?}"
            );
        }
        assert!(offer(&["0.10"]).is_err());
    }

    #[test]
    fn vs_code_windows_see_apps_as_do_clients_that_declare_them() {
        let params = |extra: serde_json::Value| -> InitializeParams {
            let mut base = json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"],
                                  "clientId": "c"});
            base.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value(base).unwrap()
        };
        assert!(!shown_mcp_apps(&params(json!({}))));
        assert!(shown_mcp_apps(&params(
            json!({"capabilities": {"mcpApps": {}}})
        )));
        assert!(shown_mcp_apps(&params(
            json!({"clientInfo": {"name": "vscode-agents-window"}})
        )));
        assert!(shown_mcp_apps(&params(
            json!({"clientInfo": {"name": "vscode-editor-window"}})
        )));
        assert!(!shown_mcp_apps(&params(
            json!({"clientInfo": {"name": "acme-ide"}})
        )));
    }

    #[test]
    fn a_reconnect_without_channel_goes_on_the_root() {
        assert_eq!(
            reconnect_on_root(json!({"clientId": "c"})),
            json!({"clientId": "c", "channel": "ahp-root://"})
        );
        assert_eq!(
            reconnect_on_root(json!({"channel": "elsewhere"})),
            json!({"channel": "elsewhere"})
        );
    }
}
