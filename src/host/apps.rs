//! MCP Apps as AHP shows them: each ready server's `mcp://` channel URI, the `mcpApp`
//! capabilities it really serves, and the view without both for clients without `mcpApps`.
//!
//! Host state carries the full view. A connection that did not declare `mcpApps` gets
//! every snapshot and action through [`plain_snapshot`] / [`plain_action`]; the reducers
//! commute with that stripping, so its mirror equals the stripped host state.

use ahp_types::actions::{ActionEnvelope, StateAction};
use ahp_types::state::{
    AhpMcpUiHostCapabilities, ChildCustomization, Customization, McpServerCustomization,
    McpServerCustomizationApps, Snapshot, SnapshotState,
};
use serde_json::json;

use crate::supervisor::Served;

/// The `mcp://` channel of server `id` in session `session`: one per customization per
/// session, the same for the whole life of the proxy (and across restarts of the server).
pub fn channel_uri(session: &str, id: &str) -> String {
    let session_key = session.rsplit(['/', ':']).next().unwrap_or("session");
    format!(
        "mcp://{}/{:016x}",
        slug(session_key),
        fnv1a(format!("{session}\n{id}").as_bytes())
    )
}

/// The `mcpApp` a ready server gets: exactly the method sets the channel serves for it.
/// `sampling` only while some harness declared sampling (the channel forwards it there).
pub fn capabilities(served: &Served, sampling: bool) -> McpServerCustomizationApps {
    let list = |changes: bool| {
        if changes {
            json!({"listChanged": true})
        } else {
            json!({})
        }
    };
    McpServerCustomizationApps {
        capabilities: AhpMcpUiHostCapabilities {
            server_tools: served.tools.map(list),
            server_resources: served.resources.map(list),
            logging: served.logging.then(Default::default),
            sampling: sampling.then(|| json!({})),
        },
    }
}

/// The MCP methods a channel with these capabilities serves (requests only).
pub fn serves(apps: &AhpMcpUiHostCapabilities, method: &str) -> bool {
    match method {
        "tools/list" | "tools/call" => apps.server_tools.is_some(),
        "resources/list" | "resources/templates/list" | "resources/read" => {
            apps.server_resources.is_some()
        }
        "logging/setLevel" => apps.logging.is_some(),
        "sampling/createMessage" => apps.sampling.is_some(),
        _ => false,
    }
}

/// Whether `list` (`"tools"` or `"resources"`) changes are announced on the channel.
pub fn announces(apps: &AhpMcpUiHostCapabilities, list: &str) -> bool {
    let set = match list {
        "tools" => &apps.server_tools,
        "resources" => &apps.server_resources,
        _ => return false,
    };
    set.as_ref()
        .is_some_and(|v| v.get("listChanged") == Some(&json!(true)))
}

/// A snapshot as a client without `mcpApps` sees it.
pub fn plain_snapshot(mut snapshot: Snapshot) -> Snapshot {
    if let SnapshotState::Session(session) = &mut snapshot.state {
        session.customizations.iter_mut().flatten().for_each(|c| {
            strip_customization(c);
        });
    }
    snapshot
}

/// An envelope as a client without `mcpApps` sees it, or `None` when it has nothing to
/// strip (send the shared frame).
pub fn plain_envelope(envelope: &ActionEnvelope) -> Option<ActionEnvelope> {
    plain_action(&envelope.action).map(|action| ActionEnvelope {
        action,
        ..envelope.clone()
    })
}

/// An action without channels and `mcpApp`s, or `None` when it carries neither.
pub fn plain_action(action: &StateAction) -> Option<StateAction> {
    if !matches!(
        action,
        StateAction::SessionMcpServerStateChanged(_)
            | StateAction::SessionCustomizationUpdated(_)
            | StateAction::SessionCustomizationsChanged(_)
    ) {
        return None;
    }
    let mut plain = action.clone();
    let stripped = match &mut plain {
        StateAction::SessionMcpServerStateChanged(a) => a.channel.take().is_some(),
        StateAction::SessionCustomizationUpdated(a) => strip_customization(&mut a.customization),
        StateAction::SessionCustomizationsChanged(a) => a
            .customizations
            .iter_mut()
            .fold(false, |any, c| strip_customization(c) | any),
        _ => false,
    };
    stripped.then_some(plain)
}

/// Remove channels and `mcpApp`s from a customization and its children; whether any were.
fn strip_customization(customization: &mut Customization) -> bool {
    match customization {
        Customization::McpServer(m) => strip_server(m),
        Customization::Plugin(p) => strip_children(p.children.as_mut()),
        Customization::Directory(d) => strip_children(d.children.as_mut()),
        Customization::Unknown(_) => false,
    }
}

fn strip_children(children: Option<&mut Vec<ChildCustomization>>) -> bool {
    children.into_iter().flatten().fold(false, |any, child| {
        let stripped = match child {
            ChildCustomization::McpServer(m) => strip_server(m),
            _ => false,
        };
        stripped | any
    })
}

fn strip_server(server: &mut McpServerCustomization) -> bool {
    let channel = server.channel.take().is_some();
    let app = server.mcp_app.take().is_some();
    channel | app
}

fn slug(text: &str) -> String {
    let slug: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    if slug.is_empty() {
        "session".into()
    } else {
        slug
    }
}

/// 64-bit FNV-1a: a stable, dependency-free fingerprint (not a security boundary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_types::actions::SessionMcpServerStateChangedAction;
    use ahp_types::state::{McpServerReadyState, McpServerState};

    #[test]
    fn channel_uris_are_stable_per_session_and_server() {
        let a = channel_uri("ahp-session:/default", "file:///p.json#notes");
        assert_eq!(
            a,
            channel_uri("ahp-session:/default", "file:///p.json#notes")
        );
        assert!(a.starts_with("mcp://default/"), "{a}");
        assert_ne!(a, channel_uri("ahp-session:/other", "file:///p.json#notes"));
        assert_ne!(
            a,
            channel_uri("ahp-session:/default", "file:///p.json#clock")
        );
    }

    #[test]
    fn capabilities_advertise_only_what_is_served() {
        let served = Served {
            tools: Some(true),
            resources: None,
            logging: false,
        };
        let apps = capabilities(&served, false).capabilities;
        assert_eq!(apps.server_tools, Some(json!({"listChanged": true})));
        assert_eq!(apps.server_resources, None);
        assert!(apps.logging.is_none() && apps.sampling.is_none());
        assert!(serves(&apps, "tools/call") && serves(&apps, "tools/list"));
        for method in [
            "resources/read",
            "logging/setLevel",
            "sampling/createMessage",
            "prompts/list",
            "initialize",
            "ping",
        ] {
            assert!(!serves(&apps, method), "{method}");
        }
        assert!(announces(&apps, "tools") && !announces(&apps, "resources"));
        let all = Served {
            tools: Some(false),
            resources: Some(false),
            logging: true,
        };
        let apps = capabilities(&all, true).capabilities;
        assert!(!announces(&apps, "tools"));
        for method in [
            "resources/templates/list",
            "logging/setLevel",
            "sampling/createMessage",
        ] {
            assert!(serves(&apps, method), "{method}");
        }
    }

    #[test]
    fn plain_actions_lose_channels_and_apps_only() {
        let ready = StateAction::SessionMcpServerStateChanged(Box::new(
            SessionMcpServerStateChangedAction {
                id: "m".into(),
                state: McpServerState::Ready(McpServerReadyState {}),
                channel: Some("mcp://default/1".into()),
            },
        ));
        match plain_action(&ready) {
            Some(StateAction::SessionMcpServerStateChanged(a)) => {
                assert_eq!(a.channel, None);
                assert_eq!(a.state, McpServerState::Ready(McpServerReadyState {}));
            }
            other => panic!("{other:?}"),
        }
        let plugin: Customization = serde_json::from_value(json!({
            "type": "plugin", "id": "p", "uri": "file:///p", "name": "p",
            "loadState": {"kind": "loaded"},
            "children": [{"type": "mcpServer", "id": "m", "uri": "file:///p", "name": "m",
                "state": {"kind": "ready"}, "channel": "mcp://default/1",
                "mcpApp": {"capabilities": {"serverTools": {}}}}]
        }))
        .unwrap();
        let updated = StateAction::SessionCustomizationUpdated(Box::new(
            ahp_types::actions::SessionCustomizationUpdatedAction {
                customization: plugin,
            },
        ));
        let plain = serde_json::to_value(plain_action(&updated).unwrap()).unwrap();
        let child = &plain["customization"]["children"][0];
        assert_eq!(child["state"]["kind"], "ready");
        assert!(
            child.get("channel").is_none() && child.get("mcpApp").is_none(),
            "{child}"
        );
        // Nothing to strip: the shared frame goes out.
        let stopped = StateAction::SessionMcpServerStateChanged(Box::new(
            SessionMcpServerStateChangedAction {
                id: "m".into(),
                state: McpServerState::Ready(McpServerReadyState {}),
                channel: None,
            },
        ));
        assert!(plain_action(&stopped).is_none());
    }
}
