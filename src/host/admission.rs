//! Which client-dispatched actions the host accepts, judged against current state.
//! Pure: returns the `rejectionReason` for refused actions; accepted ones go to the reducers.

use std::collections::HashSet;

use ahp_types::actions::StateAction;
use ahp_types::state::{
    ChildCustomization, Customization, CustomizationEnablement, RootState, SessionState,
    ToolDefinition,
};

use super::bounds::OutOfBounds;
use super::plugin_ids::{self, PluginRefusal};

/// Why a client's action is refused: what its `rejectionReason` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It is too big to keep.
    Bounds(OutOfBounds),
    /// The plugins it publishes cannot be shown.
    Plugins(PluginRefusal),
    /// Another of the host's rules, as the client reads it.
    Rule(String),
}

impl Refusal {
    /// A rule's refusal.
    pub fn rule(text: impl Into<String>) -> Self {
        Self::Rule(text.into())
    }
}

impl From<OutOfBounds> for Refusal {
    fn from(refusal: OutOfBounds) -> Self {
        Self::Bounds(refusal)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bounds(refusal) => refusal.fmt(f),
            Self::Plugins(refusal) => refusal.fmt(f),
            Self::Rule(text) => f.write_str(text),
        }
    }
}

/// What a customization id refers to, as far as admission cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An MCP server (top-level or inside a container).
    McpServer,
    /// Any other customization (plugin, directory, or a non-MCP child).
    Other,
}

/// Find the customization `id` among the top-level entries and their children.
pub fn find_customization(list: &[Customization], id: &str) -> Option<Target> {
    for entry in list {
        let (entry_id, target, children) = match entry {
            Customization::Plugin(p) => (p.id.as_str(), Target::Other, p.children.as_deref()),
            Customization::Directory(d) => (d.id.as_str(), Target::Other, d.children.as_deref()),
            Customization::McpServer(m) => (m.id.as_str(), Target::McpServer, None),
            Customization::Unknown(_) => continue,
        };
        if entry_id == id {
            return Some(target);
        }
        for child in children.unwrap_or(&[]) {
            let (child_id, target) = match child {
                ChildCustomization::McpServer(m) => (m.id.as_str(), Target::McpServer),
                ChildCustomization::Agent(c) => (c.id.as_str(), Target::Other),
                ChildCustomization::Skill(c) => (c.id.as_str(), Target::Other),
                ChildCustomization::Prompt(c) => (c.id.as_str(), Target::Other),
                ChildCustomization::Rule(c) => (c.id.as_str(), Target::Other),
                ChildCustomization::Hook(c) => (c.id.as_str(), Target::Other),
                ChildCustomization::Unknown(_) => continue,
            };
            if child_id == id {
                return Some(target);
            }
        }
    }
    None
}

/// Judge an action a client dispatched on the root channel.
pub fn admit_root(root: &RootState, action: &StateAction) -> Result<(), Refusal> {
    match action {
        StateAction::RootConfigChanged(_) if root.config.is_none() => Err(Refusal::rule(
            "this host has no root configuration to change",
        )),
        StateAction::RootConfigChanged(_) => Ok(()),
        other if is_session_dispatchable(other) => Err(Refusal::rule(format!(
            "{} belongs on a session channel, not ahp-root://",
            type_name(other)
        ))),
        other => Err(Refusal::rule(not_dispatchable(other))),
    }
}

/// Judge an action client `client_id` dispatched on session `uri`.
pub fn admit_session(
    uri: &str,
    session: &SessionState,
    client_id: &str,
    action: &StateAction,
) -> Result<(), Refusal> {
    let customizations = session.customizations.as_deref().unwrap_or(&[]);
    match action {
        StateAction::SessionTitleChanged(_)
        | StateAction::SessionIsReadChanged(_)
        | StateAction::SessionIsArchivedChanged(_) => Ok(()),
        StateAction::SessionConfigChanged(_) => match session.config {
            None => Err(Refusal::rule("this session has no configuration to change")),
            Some(_) => Err(Refusal::rule(
                "no session configuration property is client-mutable",
            )),
        },
        StateAction::SessionActiveClientSet(a) if a.active_client.client_id != client_id => {
            Err(Refusal::rule(format!(
                "a client may only set itself as active client (you are {client_id:?}, not {:?})",
                a.active_client.client_id
            )))
        }
        StateAction::SessionActiveClientSet(a) => {
            client_tools(&a.active_client.tools).map_err(Refusal::Rule)?;
            let shown = plugin_ids::Session {
                uri,
                chats: &session.chats,
                shown: customizations,
            };
            plugin_ids::client_plugins(
                &shown,
                session
                    .active_clients
                    .iter()
                    .filter(|c| c.client_id != client_id),
                client_id,
                a.active_client.customizations.as_deref().unwrap_or(&[]),
            )
            .map_err(Refusal::Plugins)
        }
        StateAction::SessionActiveClientRemoved(a) if a.client_id != client_id => {
            Err(Refusal::rule(format!(
            "a client may only remove itself from activeClients (you are {client_id:?}, not {:?})",
            a.client_id
        )))
        }
        StateAction::SessionActiveClientRemoved(_) => Ok(()),
        StateAction::SessionCustomizationToggled(a) => {
            find_customization(customizations, &a.id).ok_or_else(|| {
                Refusal::rule(format!(
                    "no customization with id {:?} in this session",
                    a.id
                ))
            })?;
            check_enablement(&a.enablement)
        }
        StateAction::SessionMcpServerStartRequested(a) => mcp_server(customizations, &a.id),
        StateAction::SessionMcpServerStopRequested(a) => mcp_server(customizations, &a.id),
        StateAction::SessionMcpServerBackgroundRequested(a) => mcp_server(customizations, &a.id),
        StateAction::SessionDefaultChatChanged(a) => match &a.default_chat {
            Some(chat) if !session.chats.iter().any(|c| &c.resource == chat) => {
                Err(Refusal::rule(format!("no chat {chat:?} in this session")))
            }
            _ => Ok(()),
        },
        StateAction::SessionWorkingDirectorySet(_)
        | StateAction::SessionWorkingDirectoryRemoved(_)
        | StateAction::SessionWorkingDirectoryReplaced(_) => Err(Refusal::rule(
            "this host does not manage working directories",
        )),
        StateAction::RootConfigChanged(_) => Err(Refusal::rule(format!(
            "{} belongs on ahp-root://, not a session channel",
            type_name(action)
        ))),
        other => Err(Refusal::rule(not_dispatchable(other))),
    }
}

/// The longest tool name MCP allows, in characters.
pub const MAX_TOOL_NAME: usize = 128;

/// Judge the tools a client offers the harness: each named by MCP's tool-name rules (1 to
/// 128 characters, each an ASCII letter, a digit, `_`, `-` or `.`), each name once.
pub fn client_tools(tools: &[ToolDefinition]) -> Result<(), String> {
    let mut seen = HashSet::new();
    for tool in tools {
        let name = tool.name.as_str();
        let fits = (1..=MAX_TOOL_NAME).contains(&name.chars().count())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !fits {
            return Err(format!(
                "tool name {} breaks MCP's tool-name rules: 1 to {MAX_TOOL_NAME} characters, each an ASCII letter, a digit, `_`, `-` or `.`",
                shown(name)
            ));
        }
        if !seen.insert(name) {
            return Err(format!(
                "tool name {name:?} appears twice in activeClient.tools"
            ));
        }
    }
    Ok(())
}

/// A name as a message shows it: quoted and escaped, cut after 40 characters.
fn shown(name: &str) -> String {
    let count = name.chars().count();
    if count <= 40 {
        return format!("{name:?}");
    }
    let cut: String = name.chars().take(40).collect();
    format!("{cut:?}… ({count} characters)")
}

/// What an admitted chat action is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatAdmission {
    /// Read/archived marks.
    Plain,
    /// A give-up on a call waiting for authorization (a failed `chat/toolCallComplete`).
    GiveUp,
    /// The owning client acting on a call it runs.
    ClientRun,
}

/// Judge an action client `client_id` dispatched on a chat channel. The host's chats mirror
/// the harness's tool calls: clients may mark them read or archived, act on calls they run
/// themselves (a harness call of their tool: content, completion, refusal), and give up on
/// a call that waits for authorization (a failed `chat/toolCallComplete`), nothing else.
pub fn admit_chat(
    chat: &ahp_types::state::ChatState,
    client_id: &str,
    action: &StateAction,
) -> Result<ChatAdmission, Refusal> {
    let runner = |turn: &str, call: &str| super::client_tools::runner_of(chat, turn, call);
    let own = |turn: &str, call: &str| match runner(turn, call) {
        Some(owner) if owner == client_id => Ok(ChatAdmission::ClientRun),
        Some(owner) => Err(Refusal::rule(format!(
            "tool call {call:?} is run by client {owner:?}; only it may act on it"
        ))),
        None => Err(Refusal::rule(format!(
            "tool call {call:?} of turn {turn:?} is not one a client runs"
        ))),
    };
    match action {
        StateAction::ChatIsReadChanged(_) | StateAction::ChatIsArchivedChanged(_) => {
            Ok(ChatAdmission::Plain)
        }
        StateAction::ChatToolCallContentChanged(a) => own(&a.turn_id, &a.tool_call_id),
        StateAction::ChatToolCallConfirmed(a) => own(&a.turn_id, &a.tool_call_id),
        StateAction::ChatToolCallComplete(a) if runner(&a.turn_id, &a.tool_call_id).is_some() => {
            own(&a.turn_id, &a.tool_call_id)
        }
        StateAction::ChatToolCallComplete(a) => {
            if a.result.success {
                return Err(Refusal::rule("only the host completes tool calls; a client may only give up on one waiting for authorization (success: false)"));
            }
            let paused = chat
                .active_turn
                .as_ref()
                .filter(|t| t.id == a.turn_id)
                .into_iter()
                .flat_map(|t| &t.response_parts)
                .any(|p| match p {
                    ahp_types::state::ResponsePart::ToolCall(t) => matches!(
                        &t.tool_call,
                        ahp_types::state::ToolCallState::AuthRequired(s) if s.tool_call_id == a.tool_call_id
                    ),
                    _ => false,
                });
            if paused {
                Ok(ChatAdmission::GiveUp)
            } else {
                Err(Refusal::rule(format!(
                    "tool call {:?} of turn {:?} is not waiting for authorization",
                    a.tool_call_id, a.turn_id
                )))
            }
        }
        StateAction::ChatTurnStarted(_)
        | StateAction::ChatPendingMessageSet(_)
        | StateAction::ChatDraftChanged(_) => Err(Refusal::rule(
            "this chat is read-only: it shows the MCP harness's tool calls, and this host has no model to send messages to"
                ,
        )),
        other => Err(Refusal::rule(not_dispatchable(other))),
    }
}

fn mcp_server(list: &[Customization], id: &str) -> Result<(), Refusal> {
    match find_customization(list, id) {
        Some(Target::McpServer) => Ok(()),
        Some(Target::Other) => Err(Refusal::rule(format!(
            "customization {id:?} is not an MCP server"
        ))),
        None => Err(Refusal::rule(format!(
            "no MCP server with id {id:?} in this session"
        ))),
    }
}

/// Entries sorted session → workspace → global, each kind at most once, no unknown kinds.
fn check_enablement(entries: &[CustomizationEnablement]) -> Result<(), Refusal> {
    let mut last_rank = 0;
    for entry in entries {
        let (rank, kind) = match entry {
            CustomizationEnablement::Session { .. } => (1, "session"),
            CustomizationEnablement::Workspace { .. } => (2, "workspace"),
            CustomizationEnablement::Global { .. } => (3, "global"),
            CustomizationEnablement::Unknown(value) => {
                return Err(Refusal::rule(format!("unknown enablement entry {value}")))
            }
        };
        if rank <= last_rank {
            return Err(Refusal::rule(format!(
                "enablement entries must be ordered session, workspace, global with each kind at most once ({kind} is out of place)"
            )));
        }
        last_rank = rank;
    }
    Ok(())
}

fn is_session_dispatchable(action: &StateAction) -> bool {
    matches!(
        action,
        StateAction::SessionTitleChanged(_)
            | StateAction::SessionIsReadChanged(_)
            | StateAction::SessionIsArchivedChanged(_)
            | StateAction::SessionConfigChanged(_)
            | StateAction::SessionActiveClientSet(_)
            | StateAction::SessionActiveClientRemoved(_)
            | StateAction::SessionCustomizationToggled(_)
            | StateAction::SessionMcpServerStartRequested(_)
            | StateAction::SessionMcpServerStopRequested(_)
            | StateAction::SessionMcpServerBackgroundRequested(_)
            | StateAction::SessionDefaultChatChanged(_)
            | StateAction::SessionWorkingDirectorySet(_)
            | StateAction::SessionWorkingDirectoryRemoved(_)
            | StateAction::SessionWorkingDirectoryReplaced(_)
    )
}

fn not_dispatchable(action: &StateAction) -> String {
    match action {
        StateAction::Unknown(value) => super::malformed::why(value)
            .unwrap_or_else(|| format!("unknown action type {}", type_name(action))),
        _ => format!(
            "{} cannot be dispatched by a client on this channel",
            type_name(action)
        ),
    }
}

/// The action's wire `type`, quoted, for messages.
fn type_name(action: &StateAction) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.get("type").map(ToString::to_string))
        .unwrap_or_else(|| "\"(untyped)\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn session(customizations: serde_json::Value) -> SessionState {
        serde_json::from_value(json!({
            "provider": "p", "title": "t", "status": 1, "lifecycle": "ready",
            "activeClients": [], "chats": [], "customizations": customizations
        }))
        .expect("valid session")
    }

    fn action(value: serde_json::Value) -> StateAction {
        serde_json::from_value(value).expect("valid action")
    }

    fn tree() -> SessionState {
        session(json!([
            {"type": "mcpServer", "id": "m1", "uri": "file:///a", "name": "a", "state": {"kind": "ready"}},
            {"type": "plugin", "id": "p1", "uri": "file:///p", "name": "p", "children": [
                {"type": "skill", "id": "s1", "uri": "file:///p/s", "name": "s"},
                {"type": "mcpServer", "id": "m2", "uri": "file:///p/.mcp.json", "name": "b", "state": {"kind": "stopped"}}
            ]}
        ]))
    }

    #[test]
    fn client_tool_names_follow_mcps_rules() {
        let tools = |names: &[&str]| -> Vec<ToolDefinition> {
            names
                .iter()
                .map(|n| serde_json::from_value(json!({"name": n})).expect("a tool"))
                .collect()
        };
        assert!(client_tools(&tools(&["runTests", "a.b-c_d", &"x".repeat(128)])).is_ok());
        for bad in ["", "two\nlines", "\u{1b}[2J", "../x", "with space", "é"] {
            let refused = client_tools(&tools(&["fine", bad])).unwrap_err();
            assert!(refused.contains("tool name"), "{refused}");
        }
        let long = client_tools(&tools(&[&"x".repeat(100_000)])).unwrap_err();
        assert!(
            long.contains("100000 characters") && long.len() < 300,
            "{long}"
        );
        let twice = client_tools(&tools(&["a", "a"])).unwrap_err();
        assert!(twice.contains("twice"), "{twice}");
    }

    #[test]
    fn plain_session_actions_are_accepted() {
        let s = tree();
        assert!(admit_session(
            "ahp-proxy:/s",
            &s,
            "c",
            &action(json!({"type": "session/titleChanged", "title": "x"}))
        )
        .is_ok());
        assert!(admit_session(
            "ahp-proxy:/s",
            &s,
            "c",
            &action(json!({"type": "session/isReadChanged", "isRead": true}))
        )
        .is_ok());
    }

    #[test]
    fn mcp_server_requests_need_an_mcp_server() {
        let s = tree();
        let start = |id: &str| action(json!({"type": "session/mcpServerStartRequested", "id": id}));
        assert!(admit_session("ahp-proxy:/s", &s, "c", &start("m1")).is_ok());
        assert!(admit_session("ahp-proxy:/s", &s, "c", &start("m2")).is_ok());
        assert!(admit_session("ahp-proxy:/s", &s, "c", &start("s1"))
            .unwrap_err()
            .to_string()
            .contains("not an MCP server"));
        assert!(admit_session("ahp-proxy:/s", &s, "c", &start("zz"))
            .unwrap_err()
            .to_string()
            .contains("no MCP server"));
    }

    #[test]
    fn toggles_need_a_known_id_and_ordered_enablement() {
        let s = tree();
        let toggle = |id: &str, enablement: serde_json::Value| {
            action(
                json!({"type": "session/customizationToggled", "id": id, "enablement": enablement}),
            )
        };
        assert!(admit_session(
            "ahp-proxy:/s",
            &s,
            "c",
            &toggle("p1", json!([{"kind": "session", "enabled": false}]))
        )
        .is_ok());
        assert!(admit_session("ahp-proxy:/s", &s, "c", &toggle("s1", json!([]))).is_ok());
        assert!(admit_session("ahp-proxy:/s", &s, "c", &toggle("nope", json!([]))).is_err());
        let reversed =
            json!([{"kind": "global", "enabled": true}, {"kind": "session", "enabled": false}]);
        assert!(
            admit_session("ahp-proxy:/s", &s, "c", &toggle("p1", reversed))
                .unwrap_err()
                .to_string()
                .contains("ordered")
        );
        let twice =
            json!([{"kind": "session", "enabled": true}, {"kind": "session", "enabled": false}]);
        assert!(admit_session("ahp-proxy:/s", &s, "c", &toggle("p1", twice)).is_err());
    }

    #[test]
    fn clients_only_manage_their_own_active_client_entry() {
        let s = tree();
        let set = |id: &str| {
            action(
                json!({"type": "session/activeClientSet", "activeClient": {"clientId": id, "tools": []}}),
            )
        };
        assert!(admit_session("ahp-proxy:/s", &s, "me", &set("me")).is_ok());
        assert!(admit_session("ahp-proxy:/s", &s, "me", &set("you")).is_err());
        let remove = action(json!({"type": "session/activeClientRemoved", "clientId": "you"}));
        assert!(admit_session("ahp-proxy:/s", &s, "me", &remove).is_err());
    }

    #[test]
    fn server_only_and_unknown_actions_are_refused() {
        let s = tree();
        let server_only = action(
            json!({"type": "session/mcpServerStateChanged", "id": "m1", "state": {"kind": "ready"}}),
        );
        assert!(admit_session("ahp-proxy:/s", &s, "c", &server_only)
            .unwrap_err()
            .to_string()
            .contains("session/mcpServerStateChanged"));
        let unknown = action(json!({"type": "session/frobnicated"}));
        assert!(admit_session("ahp-proxy:/s", &s, "c", &unknown)
            .unwrap_err()
            .to_string()
            .contains("unknown action type"));
        let root: RootState = serde_json::from_value(json!({"agents": []})).expect("valid root");
        assert!(admit_root(
            &root,
            &action(json!({"type": "session/titleChanged", "title": "x"}))
        )
        .unwrap_err()
        .to_string()
        .contains("session channel"));
        assert!(admit_root(
            &root,
            &action(json!({"type": "root/activeSessionsChanged", "activeSessions": 9}))
        )
        .is_err());
        assert!(admit_root(
            &root,
            &action(json!({"type": "root/configChanged", "config": {}}))
        )
        .is_err());
    }

    #[test]
    fn clients_may_only_give_up_on_calls_waiting_for_authorization() {
        use crate::mirror::{CallStart, Turns};
        let mut chat: ahp_types::state::ChatState = serde_json::from_value(json!({
            "resource": "ahp-chat:/t", "title": "t", "status": 1,
            "modifiedAt": "2026-01-01T00:00:00.000Z", "turns": []
        }))
        .unwrap();
        let mut turns = Turns::new();
        let start = CallStart::example(1);
        let mut actions = turns.start(start, 0, 0, "2026-01-01T00:00:00.000Z");
        let give_up = action(
            json!({"type": "chat/toolCallComplete", "turnId": crate::mirror::turn_id(1),
            "toolCallId": crate::mirror::call_id(1), "result": {"success": false, "pastTenseMessage": "Declined"}}),
        );
        let succeed = action(
            json!({"type": "chat/toolCallComplete", "turnId": crate::mirror::turn_id(1),
            "toolCallId": crate::mirror::call_id(1), "result": {"success": true, "pastTenseMessage": "Done"}}),
        );
        for a in actions.drain(..) {
            ahp::reducers::apply_action_to_chat(&mut chat, &a);
        }
        // Running: nothing to give up on.
        assert!(admit_chat(&chat, "c", &give_up).is_err());
        let auth = serde_json::from_value(json!({"reason": "insufficientScope",
            "resource": {"resource": "http://h/mcp"}}))
        .unwrap();
        let (_, paused) = turns.auth_required(1, auth).unwrap();
        ahp::reducers::apply_action_to_chat(&mut chat, &paused);
        assert_eq!(admit_chat(&chat, "c", &give_up), Ok(ChatAdmission::GiveUp));
        assert!(admit_chat(&chat, "c", &succeed).is_err());
        let other = action(
            json!({"type": "chat/toolCallComplete", "turnId": crate::mirror::turn_id(1),
            "toolCallId": crate::mirror::call_id(9), "result": {"success": false, "pastTenseMessage": "x"}}),
        );
        assert!(admit_chat(&chat, "c", &other).is_err());
    }
}
