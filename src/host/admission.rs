//! Which client-dispatched actions the host accepts, judged against current state.
//! Pure: returns the `rejectionReason` for refused actions; accepted ones go to the reducers.

use std::collections::{HashMap, HashSet};

use ahp_types::actions::StateAction;
use ahp_types::state::{
    ChildCustomization, ClientPluginCustomization, Customization, CustomizationEnablement,
    CustomizationType, RootState, SessionActiveClient, SessionState, ToolDefinition,
};

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
pub fn admit_root(root: &RootState, action: &StateAction) -> Result<(), String> {
    match action {
        StateAction::RootConfigChanged(_) if root.config.is_none() => {
            Err("this host has no root configuration to change".into())
        }
        StateAction::RootConfigChanged(_) => Ok(()),
        other if is_session_dispatchable(other) => Err(format!(
            "{} belongs on a session channel, not ahp-root://",
            type_name(other)
        )),
        other => Err(not_dispatchable(other)),
    }
}

/// Judge an action client `client_id` dispatched on a session channel.
pub fn admit_session(
    session: &SessionState,
    client_id: &str,
    action: &StateAction,
) -> Result<(), String> {
    let customizations = session.customizations.as_deref().unwrap_or(&[]);
    match action {
        StateAction::SessionTitleChanged(_)
        | StateAction::SessionIsReadChanged(_)
        | StateAction::SessionIsArchivedChanged(_) => Ok(()),
        StateAction::SessionConfigChanged(_) => match session.config {
            None => Err("this session has no configuration to change".into()),
            Some(_) => Err("no session configuration property is client-mutable".into()),
        },
        StateAction::SessionActiveClientSet(a) if a.active_client.client_id != client_id => {
            Err(format!(
                "a client may only set itself as active client (you are {client_id:?}, not {:?})",
                a.active_client.client_id
            ))
        }
        StateAction::SessionActiveClientSet(a) => {
            client_tools(&a.active_client.tools)?;
            client_plugins(
                customizations,
                session
                    .active_clients
                    .iter()
                    .filter(|c| c.client_id != client_id),
                client_id,
                a.active_client.customizations.as_deref().unwrap_or(&[]),
            )
        }
        StateAction::SessionActiveClientRemoved(a) if a.client_id != client_id => Err(format!(
            "a client may only remove itself from activeClients (you are {client_id:?}, not {:?})",
            a.client_id
        )),
        StateAction::SessionActiveClientRemoved(_) => Ok(()),
        StateAction::SessionCustomizationToggled(a) => {
            find_customization(customizations, &a.id)
                .ok_or_else(|| format!("no customization with id {:?} in this session", a.id))?;
            check_enablement(&a.enablement)
        }
        StateAction::SessionMcpServerStartRequested(a) => mcp_server(customizations, &a.id),
        StateAction::SessionMcpServerStopRequested(a) => mcp_server(customizations, &a.id),
        StateAction::SessionMcpServerBackgroundRequested(a) => mcp_server(customizations, &a.id),
        StateAction::SessionDefaultChatChanged(a) => match &a.default_chat {
            Some(chat) if !session.chats.iter().any(|c| &c.resource == chat) => {
                Err(format!("no chat {chat:?} in this session"))
            }
            _ => Ok(()),
        },
        StateAction::SessionWorkingDirectorySet(_)
        | StateAction::SessionWorkingDirectoryRemoved(_)
        | StateAction::SessionWorkingDirectoryReplaced(_) => {
            Err("this host does not manage working directories".into())
        }
        StateAction::RootConfigChanged(_) => Err(format!(
            "{} belongs on ahp-root://, not a session channel",
            type_name(action)
        )),
        other => Err(not_dispatchable(other)),
    }
}

/// Whether the plugins client `client_id` publishes can be shown in a session that shows
/// `shown` and has the `others` active clients: each must be a plugin whose id is its own in
/// the session (not a host customization's, not another client's plugin, not repeated), since
/// every action that targets a customization names it by id.
pub fn client_plugins<'a>(
    shown: &[Customization],
    others: impl Iterator<Item = &'a SessionActiveClient>,
    client_id: &str,
    plugins: &[ClientPluginCustomization],
) -> Result<(), String> {
    if plugins.is_empty() {
        return Ok(());
    }
    let mut taken: HashMap<&str, String> = HashMap::new();
    for entry in shown {
        let (id, owner) = match entry {
            Customization::Plugin(p) => (&p.id, p.client_id.as_deref()),
            Customization::Directory(d) => (&d.id, d.client_id.as_deref()),
            Customization::McpServer(m) => (&m.id, None),
            Customization::Unknown(_) => continue,
        };
        if owner != Some(client_id) {
            let owner = owner.map_or_else(|| "the host".to_string(), |o| format!("client {o:?}"));
            taken.insert(id, owner);
        }
    }
    for other in others {
        for plugin in other.customizations.iter().flatten() {
            taken.insert(&plugin.id, format!("client {:?}", other.client_id));
        }
    }
    let mut mine = HashSet::new();
    for plugin in plugins {
        if plugin.r#type != CustomizationType::Plugin {
            return Err(format!(
                "customization {:?} has type {}: clients publish only plugins",
                plugin.id,
                serde_json::to_string(&plugin.r#type).unwrap_or_default()
            ));
        }
        if plugin.id.is_empty() {
            return Err("a published plugin needs a non-empty id".into());
        }
        if !mine.insert(plugin.id.as_str()) {
            return Err(format!(
                "plugin id {:?} appears twice in activeClient.customizations",
                plugin.id
            ));
        }
        if let Some(owner) = taken.get(plugin.id.as_str()) {
            return Err(format!(
                "plugin id {:?} is already used in this session by {owner}; customization ids are session-unique",
                plugin.id
            ));
        }
    }
    Ok(())
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
) -> Result<ChatAdmission, String> {
    let runner = |turn: &str, call: &str| super::client_tools::runner_of(chat, turn, call);
    let own = |turn: &str, call: &str| match runner(turn, call) {
        Some(owner) if owner == client_id => Ok(ChatAdmission::ClientRun),
        Some(owner) => Err(format!(
            "tool call {call:?} is run by client {owner:?}; only it may act on it"
        )),
        None => Err(format!(
            "tool call {call:?} of turn {turn:?} is not one a client runs"
        )),
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
                return Err("only the host completes tool calls; a client may only give up on one waiting for authorization (success: false)".into());
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
                Err(format!(
                    "tool call {:?} of turn {:?} is not waiting for authorization",
                    a.tool_call_id, a.turn_id
                ))
            }
        }
        StateAction::ChatTurnStarted(_)
        | StateAction::ChatPendingMessageSet(_)
        | StateAction::ChatDraftChanged(_) => Err(
            "this chat is read-only: it shows the MCP harness's tool calls, and this host has no model to send messages to"
                .into(),
        ),
        other => Err(not_dispatchable(other)),
    }
}

fn mcp_server(list: &[Customization], id: &str) -> Result<(), String> {
    match find_customization(list, id) {
        Some(Target::McpServer) => Ok(()),
        Some(Target::Other) => Err(format!("customization {id:?} is not an MCP server")),
        None => Err(format!("no MCP server with id {id:?} in this session")),
    }
}

/// Entries sorted session → workspace → global, each kind at most once, no unknown kinds.
fn check_enablement(entries: &[CustomizationEnablement]) -> Result<(), String> {
    let mut last_rank = 0;
    for entry in entries {
        let (rank, kind) = match entry {
            CustomizationEnablement::Session { .. } => (1, "session"),
            CustomizationEnablement::Workspace { .. } => (2, "workspace"),
            CustomizationEnablement::Global { .. } => (3, "global"),
            CustomizationEnablement::Unknown(value) => {
                return Err(format!("unknown enablement entry {value}"))
            }
        };
        if rank <= last_rank {
            return Err(format!(
                "enablement entries must be ordered session, workspace, global with each kind at most once ({kind} is out of place)"
            ));
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
            &s,
            "c",
            &action(json!({"type": "session/titleChanged", "title": "x"}))
        )
        .is_ok());
        assert!(admit_session(
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
        assert!(admit_session(&s, "c", &start("m1")).is_ok());
        assert!(admit_session(&s, "c", &start("m2")).is_ok());
        assert!(admit_session(&s, "c", &start("s1"))
            .unwrap_err()
            .contains("not an MCP server"));
        assert!(admit_session(&s, "c", &start("zz"))
            .unwrap_err()
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
            &s,
            "c",
            &toggle("p1", json!([{"kind": "session", "enabled": false}]))
        )
        .is_ok());
        assert!(admit_session(&s, "c", &toggle("s1", json!([]))).is_ok());
        assert!(admit_session(&s, "c", &toggle("nope", json!([]))).is_err());
        let reversed =
            json!([{"kind": "global", "enabled": true}, {"kind": "session", "enabled": false}]);
        assert!(admit_session(&s, "c", &toggle("p1", reversed))
            .unwrap_err()
            .contains("ordered"));
        let twice =
            json!([{"kind": "session", "enabled": true}, {"kind": "session", "enabled": false}]);
        assert!(admit_session(&s, "c", &toggle("p1", twice)).is_err());
    }

    #[test]
    fn clients_only_manage_their_own_active_client_entry() {
        let s = tree();
        let set = |id: &str| {
            action(
                json!({"type": "session/activeClientSet", "activeClient": {"clientId": id, "tools": []}}),
            )
        };
        assert!(admit_session(&s, "me", &set("me")).is_ok());
        assert!(admit_session(&s, "me", &set("you")).is_err());
        let remove = action(json!({"type": "session/activeClientRemoved", "clientId": "you"}));
        assert!(admit_session(&s, "me", &remove).is_err());
    }

    #[test]
    fn published_plugin_ids_are_unique_in_the_session() {
        let mut s = tree();
        let set = |client: &str, ids: &[&str]| {
            let plugins: Vec<_> = ids
                .iter()
                .map(|id| json!({"type": "plugin", "id": id, "uri": "file:///x", "name": "x"}))
                .collect();
            action(json!({"type": "session/activeClientSet", "activeClient": {
                "clientId": client, "tools": [], "customizations": plugins}}))
        };
        assert!(admit_session(&s, "me", &set("me", &["mine", "also-mine"])).is_ok());
        let host = admit_session(&s, "me", &set("me", &["p1"])).unwrap_err();
        assert!(
            host.contains("already used in this session by the host"),
            "{host}"
        );
        let twice = admit_session(&s, "me", &set("me", &["a", "a"])).unwrap_err();
        assert!(twice.contains("appears twice"), "{twice}");
        let server = admit_session(&s, "me", &set("me", &["m1"])).unwrap_err();
        assert!(server.contains("the host"), "{server}");
        // Another client's plugin, published or already shown, is taken; one's own is not.
        s.active_clients = vec![serde_json::from_value(json!({"clientId": "you", "tools": [],
            "customizations": [{"type": "plugin", "id": "yours", "uri": "file:///y", "name": "y"}]}))
        .unwrap()];
        let other = admit_session(&s, "me", &set("me", &["yours"])).unwrap_err();
        assert!(other.contains("client \"you\""), "{other}");
        s.customizations.as_mut().unwrap().push(
            serde_json::from_value(json!({"type": "plugin", "id": "shown", "uri": "file:///s",
                "name": "s", "clientId": "me"}))
            .unwrap(),
        );
        assert!(admit_session(&s, "me", &set("me", &["shown"])).is_ok());
        assert!(admit_session(&s, "you", &set("you", &["shown"])).is_err());
        let skill: StateAction =
            action(json!({"type": "session/activeClientSet", "activeClient": {
            "clientId": "me", "tools": [], "customizations": [
                {"type": "skill", "id": "k", "uri": "file:///k", "name": "k"}]}}));
        assert!(admit_session(&s, "me", &skill)
            .unwrap_err()
            .contains("only plugins"));
    }

    #[test]
    fn server_only_and_unknown_actions_are_refused() {
        let s = tree();
        let server_only = action(
            json!({"type": "session/mcpServerStateChanged", "id": "m1", "state": {"kind": "ready"}}),
        );
        assert!(admit_session(&s, "c", &server_only)
            .unwrap_err()
            .contains("session/mcpServerStateChanged"));
        let unknown = action(json!({"type": "session/frobnicated"}));
        assert!(admit_session(&s, "c", &unknown)
            .unwrap_err()
            .contains("unknown action type"));
        let root: RootState = serde_json::from_value(json!({"agents": []})).expect("valid root");
        assert!(admit_root(
            &root,
            &action(json!({"type": "session/titleChanged", "title": "x"}))
        )
        .unwrap_err()
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
            json!({"type": "chat/toolCallComplete", "turnId": "harness-1",
            "toolCallId": "harness-call-1", "result": {"success": false, "pastTenseMessage": "Declined"}}),
        );
        let succeed = action(
            json!({"type": "chat/toolCallComplete", "turnId": "harness-1",
            "toolCallId": "harness-call-1", "result": {"success": true, "pastTenseMessage": "Done"}}),
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
            json!({"type": "chat/toolCallComplete", "turnId": "harness-1",
            "toolCallId": "harness-call-9", "result": {"success": false, "pastTenseMessage": "x"}}),
        );
        assert!(admit_chat(&chat, "c", &other).is_err());
    }
}
