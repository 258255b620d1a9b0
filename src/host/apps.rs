//! MCP Apps as AHP shows them: each ready server's `mcp://` channel URI, the `mcpApp`
//! capabilities it really serves, what else its channel serves (prompts, in the server's
//! `_meta`), and the view without them (nor an App call's channel) for clients without `mcpApps`.
//!
//! Host state carries the full view. A connection that did not declare `mcpApps` gets
//! every snapshot and action through [`plain_snapshot`] / [`plain_action`]; the reducers
//! commute with that stripping, so its mirror equals the stripped host state.

use ahp_types::actions::{ActionEnvelope, StateAction};
use ahp_types::state::{
    AhpMcpUiHostCapabilities, ChildCustomization, Customization, McpServerCustomization,
    McpServerCustomizationApps, Snapshot, SnapshotState,
};
use serde_json::{json, Value};

use crate::supervisor::Served;

/// The server customization's `_meta` key that lists what its channel serves beyond the
/// MCP Apps host capabilities `mcpApp` carries: `{"prompts": {"listChanged": true}}`.
/// Prompts are no MCP Apps host capability (clients pass `mcpApp.capabilities` straight to
/// a View), so they are advertised here.
pub const CHANNEL_META: &str = "ahp-proxy/channel";

/// What one `mcp://` channel serves, as its server's customization advertises it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelOffer {
    /// The MCP Apps host capabilities of its `mcpApp`.
    pub apps: AhpMcpUiHostCapabilities,
    /// `prompts/list` and `prompts/get`, with whether changes are announced.
    pub prompts: Option<bool>,
}

impl ChannelOffer {
    /// What server `m`'s channel serves, read from what it advertises; `None` without
    /// `mcpApp` (a server that was never ready).
    pub fn of(m: &McpServerCustomization) -> Option<Self> {
        let apps = m.mcp_app.as_ref()?.capabilities.clone();
        let prompts = m
            .meta
            .as_ref()
            .and_then(|meta| meta.get(CHANNEL_META))
            .and_then(|channel| channel.get("prompts"))
            .map(|p| p.get("listChanged") == Some(&json!(true)));
        Some(Self { apps, prompts })
    }
}

/// Advertise what server `m`'s channel serves, from what it `served` when last ready
/// (`None`: never ready): its `mcpApp`, and prompts under [`CHANNEL_META`] in its `_meta`
/// (other `_meta` keys are kept).
pub fn advertise(m: &mut McpServerCustomization, served: Option<&Served>, sampling: bool) {
    m.mcp_app = served.map(|served| capabilities(served, sampling));
    let channel = served
        .and_then(|s| s.prompts)
        .map(|changes| json!({"prompts": list_capability(changes)}));
    set_channel_meta(m, channel);
}

/// Put `value` under [`CHANNEL_META`] in `m`'s `_meta` (or take the key out); whether
/// anything changed.
fn set_channel_meta(m: &mut McpServerCustomization, value: Option<Value>) -> bool {
    let mut meta = m.meta.take().unwrap_or_default();
    let changed = match value {
        Some(value) => meta.insert(CHANNEL_META.into(), value.clone()) != Some(value),
        None => meta.remove(CHANNEL_META).is_some(),
    };
    m.meta = (!meta.is_empty()).then_some(meta);
    changed
}

fn list_capability(changes: bool) -> Value {
    if changes {
        json!({"listChanged": true})
    } else {
        json!({})
    }
}

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
    McpServerCustomizationApps {
        capabilities: AhpMcpUiHostCapabilities {
            server_tools: served.tools.map(list_capability),
            server_resources: served.resources.map(list_capability),
            logging: served.logging.then(Default::default),
            sampling: sampling.then(|| json!({})),
        },
    }
}

/// The MCP methods a channel with this offer serves (requests only).
pub fn serves(offer: &ChannelOffer, method: &str) -> bool {
    let apps = &offer.apps;
    match method {
        "tools/list" | "tools/call" => apps.server_tools.is_some(),
        "resources/list" | "resources/templates/list" | "resources/read" => {
            apps.server_resources.is_some()
        }
        "logging/setLevel" => apps.logging.is_some(),
        "sampling/createMessage" => apps.sampling.is_some(),
        "prompts/list" | "prompts/get" => offer.prompts.is_some(),
        _ => false,
    }
}

/// Whether `list` (`"tools"`, `"resources"` or `"prompts"`) changes are announced on the
/// channel.
pub fn announces(offer: &ChannelOffer, list: &str) -> bool {
    let set = match list {
        "tools" => &offer.apps.server_tools,
        "resources" => &offer.apps.server_resources,
        "prompts" => return offer.prompts == Some(true),
        _ => return false,
    };
    set.as_ref()
        .is_some_and(|v| v.get("listChanged") == Some(&json!(true)))
}

/// A snapshot as a client without `mcpApps` sees it: no channels, no `mcpApp`s, and no
/// channel in a tool call's `_meta.ui` (a chat's calls, a session's input-needed entries).
pub fn plain_snapshot(mut snapshot: Snapshot) -> Snapshot {
    match &mut snapshot.state {
        SnapshotState::Session(session) => {
            session.customizations.iter_mut().flatten().for_each(|c| {
                strip_customization(c);
            });
            if let Some(requests) = session.input_needed.as_mut() {
                without_call_channels(requests);
            }
        }
        SnapshotState::Chat(chat) => {
            without_call_channels(chat);
        }
        _ => {}
    }
    snapshot
}

/// `typed` (a state holding tool calls) with `_meta.ui.channel` taken out of each call;
/// whether any was (left as it is when none was, or, which cannot be, it does not read back).
fn without_call_channels<T: serde::Serialize + serde::de::DeserializeOwned>(typed: &mut T) -> bool {
    let Ok(mut value) = serde_json::to_value(&*typed) else {
        return false;
    };
    if !strip_call_channels(&mut value) {
        return false;
    }
    match serde_json::from_value(value) {
        Ok(plain) => {
            *typed = plain;
            true
        }
        Err(_) => false,
    }
}

/// Take `_meta.ui.channel` out of every tool call (an object with a `toolCallId`) inside
/// `value`; whether any was.
fn strip_call_channels(value: &mut Value) -> bool {
    match value {
        Value::Object(fields) => {
            let own =
                fields.contains_key("toolCallId") && strip_meta_channel(fields.get_mut("_meta"));
            fields
                .iter_mut()
                .filter(|(key, _)| *key != "_meta")
                .fold(own, |any, (_, v)| strip_call_channels(v) | any)
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, v| strip_call_channels(v) | any),
        _ => false,
    }
}

/// Take `channel` out of a call's `_meta.ui`; whether it was there.
fn strip_meta_channel(meta: Option<&mut Value>) -> bool {
    meta.and_then(|m| m.get_mut("ui"))
        .and_then(Value::as_object_mut)
        .is_some_and(|ui| ui.remove("channel").is_some())
}

/// `_meta` of a call's action without `ui.channel`, when it had one.
fn plain_call_meta(
    meta: &Option<serde_json::Map<String, Value>>,
) -> Option<serde_json::Map<String, Value>> {
    let has = meta
        .as_ref()
        .and_then(|m| m.get("ui"))
        .is_some_and(|ui| ui.get("channel").is_some());
    has.then(|| {
        let mut meta = meta.clone().unwrap_or_default();
        if let Some(Value::Object(ui)) = meta.get_mut("ui") {
            ui.remove("channel");
        }
        meta
    })
}

/// An envelope as a client without `mcpApps` sees it, or `None` when it has nothing to
/// strip (send the shared frame).
pub fn plain_envelope(envelope: &ActionEnvelope) -> Option<ActionEnvelope> {
    plain_action(&envelope.action).map(|action| ActionEnvelope {
        action,
        ..envelope.clone()
    })
}

/// An action without channels and `mcpApp`s (nor a channel in a tool call's `_meta.ui`), or
/// `None` when it carries none.
pub fn plain_action(action: &StateAction) -> Option<StateAction> {
    match action {
        StateAction::ChatToolCallStart(a) => {
            return plain_call_meta(&a.meta).map(|meta| {
                StateAction::ChatToolCallStart(ahp_types::actions::ChatToolCallStartAction {
                    meta: Some(meta),
                    ..a.clone()
                })
            })
        }
        StateAction::ChatToolCallComplete(a) => {
            return plain_call_meta(&a.meta).map(|meta| {
                StateAction::ChatToolCallComplete(ahp_types::actions::ChatToolCallCompleteAction {
                    meta: Some(meta),
                    ..a.clone()
                })
            })
        }
        StateAction::SessionInputNeededSet(a) => {
            let mut plain = a.clone();
            return without_call_channels(&mut plain.request)
                .then_some(StateAction::SessionInputNeededSet(plain));
        }
        _ => {}
    }
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
    let meta = set_channel_meta(server, None);
    channel | app | meta
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
        let a = channel_uri("ahp-proxy:/default", "file:///p.json#notes");
        assert_eq!(a, channel_uri("ahp-proxy:/default", "file:///p.json#notes"));
        assert!(a.starts_with("mcp://default/"), "{a}");
        assert_ne!(a, channel_uri("ahp-proxy:/other", "file:///p.json#notes"));
        assert_ne!(a, channel_uri("ahp-proxy:/default", "file:///p.json#clock"));
    }

    /// A ready server customization advertising what `served` says.
    fn advertised(served: &Served, sampling: bool) -> McpServerCustomization {
        let mut m: McpServerCustomization = serde_json::from_value(json!({
            "type": "mcpServer", "id": "m", "uri": "file:///m.json", "name": "m",
            "state": {"kind": "ready"}, "_meta": {"other": 1}
        }))
        .unwrap();
        advertise(&mut m, Some(served), sampling);
        m
    }

    #[test]
    fn capabilities_advertise_only_what_is_served() {
        let served = Served {
            tools: Some(true),
            resources: None,
            prompts: None,
            logging: false,
        };
        let m = advertised(&served, false);
        let offer = ChannelOffer::of(&m).unwrap();
        let apps = &offer.apps;
        assert_eq!(apps.server_tools, Some(json!({"listChanged": true})));
        assert_eq!(apps.server_resources, None);
        assert!(apps.logging.is_none() && apps.sampling.is_none());
        assert_eq!(
            m.meta,
            Some(json!({"other": 1}).as_object().unwrap().clone())
        );
        assert!(serves(&offer, "tools/call") && serves(&offer, "tools/list"));
        for method in [
            "resources/read",
            "logging/setLevel",
            "sampling/createMessage",
            "prompts/list",
            "prompts/get",
            "initialize",
            "ping",
        ] {
            assert!(!serves(&offer, method), "{method}");
        }
        assert!(announces(&offer, "tools") && !announces(&offer, "resources"));
        assert!(!announces(&offer, "prompts"));
        let all = Served {
            tools: Some(false),
            resources: Some(false),
            prompts: Some(true),
            logging: true,
        };
        let m = advertised(&all, true);
        assert_eq!(
            m.meta.as_ref().unwrap()[CHANNEL_META],
            json!({"prompts": {"listChanged": true}})
        );
        let offer = ChannelOffer::of(&m).unwrap();
        assert!(!announces(&offer, "tools") && announces(&offer, "prompts"));
        for method in [
            "resources/templates/list",
            "logging/setLevel",
            "sampling/createMessage",
            "prompts/list",
            "prompts/get",
        ] {
            assert!(serves(&offer, method), "{method}");
        }
        // Never ready: nothing advertised, the server's own `_meta` kept.
        let mut m = m;
        advertise(&mut m, None, true);
        assert!(m.mcp_app.is_none() && ChannelOffer::of(&m).is_none());
        assert_eq!(
            m.meta,
            Some(json!({"other": 1}).as_object().unwrap().clone())
        );
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
                "mcpApp": {"capabilities": {"serverTools": {}}},
                "_meta": {"ahp-proxy/channel": {"prompts": {}}}}]
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
            child.get("channel").is_none()
                && child.get("mcpApp").is_none()
                && child.get("_meta").is_none(),
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

    #[test]
    fn plain_calls_lose_the_channel_in_their_ui_only() {
        let meta = json!({"ui": {"resourceUri": "ui://v", "channel": "mcp://default/1"},
                          "ahp-proxy/call": {"startedAt": "t"}});
        let start: StateAction = serde_json::from_value(json!({
            "type": "chat/toolCallStart", "turnId": "t", "toolCallId": "c", "toolName": "show",
            "displayName": "show", "_meta": meta}))
        .unwrap();
        let plain = serde_json::to_value(plain_action(&start).unwrap()).unwrap();
        assert_eq!(
            plain["_meta"],
            json!({"ui": {"resourceUri": "ui://v"}, "ahp-proxy/call": {"startedAt": "t"}})
        );
        // A call without a channel goes out as it is.
        let other: StateAction = serde_json::from_value(json!({
            "type": "chat/toolCallStart", "turnId": "t", "toolCallId": "c", "toolName": "now",
            "displayName": "now", "_meta": {"ui": {"resourceUri": "ui://v"}}}))
        .unwrap();
        assert!(plain_action(&other).is_none());
        // In a chat's snapshot, a call's `_meta` loses it; the result's own content keeps
        // whatever it says.
        let chat: Snapshot =
            serde_json::from_value(json!({"resource": "ahp-chat:/h", "fromSeq": 1,
            "state": {"resource": "ahp-chat:/h", "title": "h", "status": 1,
                "modifiedAt": "t", "turns": [{"id": "t", "startedAt": "t", "state": "complete",
                "message": {"text": "", "origin": {"kind": "agent"}}, "responseParts": [
                    {"kind": "toolCall", "toolCall": {"status": "completed", "toolCallId": "c",
                     "toolName": "show", "displayName": "show", "invocationMessage": "",
                     "success": true, "pastTenseMessage": "", "_meta": meta,
                     "structuredContent": {"_meta": {"ui": {"channel": "kept"}}}}}]}]}}))
            .unwrap();
        let plain = serde_json::to_value(plain_snapshot(chat)).unwrap();
        let call = &plain["state"]["turns"][0]["responseParts"][0]["toolCall"];
        assert_eq!(
            call["_meta"]["ui"],
            json!({"resourceUri": "ui://v"}),
            "{plain}"
        );
        assert_eq!(call["structuredContent"]["_meta"]["ui"]["channel"], "kept");
    }
}
