//! VS Code's Agents window, as it really connects: a client that does, step by step, what
//! microsoft/vscode `src/vs/platform/agentHost/` makes the window do (each step names the
//! file), against the real binary, asserting what the window needs to see.

mod common;

use ahp_types::state::{ChatState, ResponsePart, SessionState, ToolCallState};
use base64::Engine as _;
use common::raw::RawClient;
use common::{server, Proxy, Raw, ScratchDir};
use serde_json::{json, Value};

const ROOT: &str = "ahp-root://";
/// An access token with characters a URL query must escape.
const TOKEN: &str = "vs+code/token=0123456789";
/// `agent.provider`'s default: the scheme VS Code names the host's sessions by.
const PROVIDER: &str = "ahp-proxy";
/// The session as VS Code computes it: `AgentSession.uri(provider, id)` (common/agent.ts),
/// which `newAgentHostSessionUri` (common/agentHostSessionIdentity.ts) returns for a host not
/// marked as VS Code's own. The host publishes its session by that name.
const PROVIDER_SESSION: &str = "ahp-proxy:/default";
/// The name the host published the session by before (an older client's).
const OLD_SESSION: &str = "ahp-session:/default";
const HARNESS_CHAT: &str = "ahp-chat:/harness";
const APP_URI: &str = "ui://release-dashboard/view.html";

/// `buildDefaultChatUri` (common/state/sessionState.ts): `ahp-chat://default/` and the session
/// URI in unpadded base64url (`encodeBase64(…, false, true)`).
fn derived_chat(session: &str) -> String {
    format!(
        "ahp-chat://default/{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(session)
    )
}

/// `encodeURIComponent`, as `WebSocketClientTransport.connect` escapes the token.
fn uri_component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'!'
            | b'~'
            | b'*'
            | b'\''
            | b'('
            | b')' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The URL the window opens for a pasted one: `parseRemoteAgentHostInput`
/// (common/remoteAgentHostService.ts) takes `tkn` out of the pasted URL and keeps the
/// address, and `WebSocketClientTransport.connect` (browser/webSocketClientTransport.ts)
/// appends it again as `connectionTokenQueryName` (base/common/network.ts: `tkn`); the
/// browser's `WebSocket` requests `/?tkn=…` for `ws://host:port?tkn=…`.
fn window_url(pasted: &str) -> String {
    let url = reqwest::Url::parse(pasted).expect("a URL");
    let token = url
        .query_pairs()
        .find(|(key, _)| key == "tkn")
        .map(|(_, value)| value.into_owned());
    let address = format!(
        "{}:{}",
        url.host_str().expect("a host"),
        url.port().expect("a port")
    );
    match token {
        Some(token) => format!("ws://{address}/?tkn={}", uri_component(&token)),
        None => format!("ws://{address}/"),
    }
}

/// What `ahp-proxy status` tells a person to paste into **Agents: Add Remote Agent Host…**.
async fn pasted_url(proxy: &Proxy) -> String {
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .args(["status", "--url", &proxy.url])
        .env("AHP_PROXY_TOKEN", TOKEN)
        .output()
        .await
        .expect("run ahp-proxy status");
    let shown = String::from_utf8_lossy(&status.stdout).into_owned();
    shown
        .lines()
        .find_map(|line| line.strip_prefix("VS Code: paste "))
        .and_then(|rest| rest.split_once(" into Agents: Add Remote Agent Host…"))
        .map(|(url, _)| url.to_string())
        .unwrap_or_else(|| panic!("no URL for VS Code in:\n{shown}"))
}

fn config() -> String {
    format!(
        "[supervisor]\nrestart_delay_ms = 50\n{}{}",
        server("dash", "app", &[]),
        server("notes", "notes", &[])
    )
}

/// One VS Code window: its socket, its client id, its `clientSeq`, and the session state
/// it follows (by the name it subscribed under), kept by the official reducers.
struct Window {
    raw: Raw,
    client_id: String,
    client_seq: i64,
    last_seen: i64,
    session: Option<(String, SessionState)>,
    /// The chat it follows (by the name it subscribed under), kept by the official reducers.
    chat: Option<(String, ChatState)>,
}

impl Window {
    /// Connect and `initialize` as `AgentHostProtocolClient.connect` does
    /// (browser/agentHostProtocolClient.ts): the root only, every version it can speak,
    /// its `clientInfo` (common/agentHostClientInfo.ts) and `_meta`, and no `capabilities`.
    async fn open(pasted: &str, client_id: &str, name: &str, title: &str) -> (Self, Value) {
        let mut raw = Raw::connect_url(&window_url(pasted)).await;
        let init = raw
            .request(
                "initialize",
                json!({"channel": ROOT, "protocolVersions": ["1.0.0", "0.10.0", "0.9.0"],
                       "clientId": client_id, "clientInfo": {"name": name, "title": title},
                       "_meta": {"vscode.clientConnectionKind": "webSocket",
                                 "vscode.telemetryLevel": "off"},
                       "initialSubscriptions": [ROOT]}),
            )
            .await;
        assert!(init.get("result").is_some(), "initialize: {init}");
        let last_seen = init["result"]["serverSeq"].as_i64().unwrap();
        let window = Self {
            raw,
            client_id: client_id.into(),
            client_seq: 0,
            last_seen,
            session: None,
            chat: None,
        };
        (window, init["result"].clone())
    }

    /// `dispatchAction` (browser/agentHostProtocolClient.ts `dispatch`): a notification
    /// with the next `clientSeq`, which it returns.
    async fn dispatch(&mut self, channel: &str, action: Value) -> i64 {
        self.client_seq += 1;
        self.raw
            .notify(
                "dispatchAction",
                json!({"channel": channel, "clientSeq": self.client_seq, "action": action}),
            )
            .await;
        self.client_seq
    }

    /// `subscribe` to the session by `name`; its snapshot, which seeds the mirror.
    async fn follow_session(&mut self, name: &str) -> Value {
        let subscribed = self
            .raw
            .request("subscribe", json!({"channel": name}))
            .await;
        let snapshot = subscribed["result"]["snapshot"].clone();
        assert_eq!(snapshot["resource"], name, "{subscribed}");
        let state: SessionState = serde_json::from_value(snapshot["state"].clone())
            .unwrap_or_else(|e| panic!("a session state ({e}): {subscribed}"));
        self.session = Some((name.to_string(), state));
        snapshot
    }

    /// The next notification (queued while waiting for a response, or still to come); an
    /// action on the followed session goes through the official reducers, as the window's
    /// `SessionStateSubscription` applies only envelopes whose `channel` is the URI it
    /// subscribed under (common/state/agentSubscription.ts `_isRelevantEnvelope`).
    async fn next(&mut self) -> Value {
        let frame = if self.raw.notifications.is_empty() {
            loop {
                let frame = self.raw.recv().await;
                if frame.get("method").is_some() {
                    break frame;
                }
            }
        } else {
            self.raw.notifications.remove(0)
        };
        if frame["method"] == "action" {
            let envelope = &frame["params"];
            if let Some(seq) = envelope["serverSeq"].as_i64() {
                self.last_seen = self.last_seen.max(seq);
            }
            if let Some((name, state)) = &mut self.session {
                if envelope["channel"] == name.as_str() && envelope.get("rejectionReason").is_none()
                {
                    let action = serde_json::from_value(envelope["action"].clone()).unwrap();
                    let _ = ahp::reducers::apply_action_to_session(state, &action);
                }
            }
            if let Some((name, state)) = &mut self.chat {
                if envelope["channel"] == name.as_str() && envelope.get("rejectionReason").is_none()
                {
                    let action = serde_json::from_value(envelope["action"].clone()).unwrap();
                    let _ = ahp::reducers::apply_action_to_chat(state, &action);
                }
            }
        }
        frame
    }

    /// `subscribe` to the chat by `name` (the one VS Code derives from the session); its
    /// snapshot seeds the chat it follows.
    async fn follow_chat(&mut self, name: &str) -> Value {
        let subscribed = self
            .raw
            .request("subscribe", json!({"channel": name}))
            .await;
        let snapshot = subscribed["result"]["snapshot"].clone();
        let state: ChatState = serde_json::from_value(snapshot["state"].clone())
            .unwrap_or_else(|e| panic!("a chat state ({e}): {subscribed}"));
        self.chat = Some((name.to_string(), state));
        snapshot
    }

    /// Every tool call of the followed chat (finished turns first, then the active one):
    /// its turn id and state, as JSON (the fields VS Code reads).
    fn calls(&self) -> Vec<(String, Value)> {
        let (_, chat) = self.chat.as_ref().expect("a followed chat");
        let turns = (chat.turns.iter().map(|t| (&t.id, &t.response_parts)))
            .chain(chat.active_turn.iter().map(|t| (&t.id, &t.response_parts)));
        turns
            .flat_map(|(id, parts)| {
                parts.iter().filter_map(move |p| match p {
                    ResponsePart::ToolCall(tc) => Some((
                        id.clone(),
                        serde_json::to_value::<&ToolCallState>(&tc.tool_call).unwrap(),
                    )),
                    _ => None,
                })
            })
            .collect()
    }

    /// Follow until a call of tool `tool` is in `status` (the first such one); its turn id
    /// and state.
    async fn until_call(&mut self, tool: &str, status: &str) -> (String, Value) {
        loop {
            let found = self
                .calls()
                .into_iter()
                .find(|(_, c)| c["toolName"] == tool && c["status"] == status);
            if let Some(found) = found {
                return found;
            }
            self.next().await;
        }
    }

    /// Notifications until one `want` accepts.
    async fn until(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        loop {
            let frame = self.next().await;
            if want(&frame) {
                return frame;
            }
        }
    }

    /// The echo of this window's action number `seq`.
    async fn echo(&mut self, seq: i64) -> Value {
        let me = self.client_id.clone();
        self.until(|f| {
            f["method"] == "action"
                && f["params"]["origin"]["clientId"] == me.as_str()
                && f["params"]["origin"]["clientSeq"] == seq
        })
        .await["params"]
            .clone()
    }

    /// Server `name` as the followed session shows it.
    fn server(&self, name: &str) -> Value {
        let (_, state) = self.session.as_ref().expect("a followed session");
        let tree = serde_json::to_value(&state.customizations).unwrap();
        let mut all: Vec<Value> = Vec::new();
        for entry in tree.as_array().into_iter().flatten() {
            all.push(entry.clone());
            all.extend(entry["children"].as_array().into_iter().flatten().cloned());
        }
        all.into_iter()
            .find(|c| c["type"] == "mcpServer" && c["name"] == name)
            .unwrap_or_else(|| panic!("no server {name} in {tree}"))
    }

    /// Follow the session until server `name` is in state `kind`.
    async fn until_server(&mut self, name: &str, kind: &str) -> Value {
        while self.server(name)["state"]["kind"] != kind {
            self.next().await;
        }
        self.server(name)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agents_window_connects_and_steers_as_its_source_says() {
    let proxy = Proxy::start_on(&config(), "127.0.0.1:0", &[("AHP_PROXY_TOKEN", TOKEN)]);

    // The person pastes what `ahp-proxy status` prints: the endpoint, the token in `tkn`
    // (escaped as a query value).
    let pasted = pasted_url(&proxy).await;
    assert_eq!(
        pasted,
        format!("ws://{}/?tkn=vs%2Bcode%2Ftoken%3D0123456789", proxy.addr)
    );
    // The token goes in `tkn` (base/common/network.ts, browser/webSocketClientTransport.ts):
    // without it the upgrade is refused, with it the window is in.
    match tokio_tungstenite::connect_async(proxy.url.as_str()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401)
        }
        other => panic!("no token, no connection: {:?}", other.map(|_| ())),
    }
    let (mut window, init) = Window::open(
        &pasted,
        "agents-window",
        "vscode-agents-window",
        "VS Code Agents Window",
    )
    .await;
    // It offers 1.0.0 first (common/agentHostProtocolCompatibility.ts): 1.0.0 it is.
    assert_eq!(init["protocolVersion"], "1.0.0", "{init}");
    assert_eq!(
        init["snapshots"][0]["state"]["agents"][0]["provider"], PROVIDER,
        "{init}"
    );

    // Right after `initialize` it mirrors its settings into the root config
    // (`_forwardClientConfig`, browser/agentHostProtocolClient.ts). This host has no root
    // config: the echo says so, and changes nothing (the root reducer ignores a config
    // change without a config, also when the window applies the echo).
    let seq = window
        .dispatch(
            ROOT,
            json!({"type": "root/configChanged", "config": {"telemetryLevel": "off"}}),
        )
        .await;
    let echo = window.echo(seq).await;
    assert!(
        echo["rejectionReason"]
            .as_str()
            .is_some_and(|r| r.contains("no root configuration")),
        "{echo}"
    );

    // `listSessions` on the root (browser/agentHostProtocolClient.ts `listSessions`).
    let listed = window
        .raw
        .request("listSessions", json!({"channel": ROOT}))
        .await;
    let default = listed["result"]["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["resource"] == PROVIDER_SESSION))
        .unwrap_or_else(|| panic!("no default session: {listed}"))
        .clone();
    assert_eq!(default["provider"], PROVIDER, "{default}");
    // VS Code 1.139 lists a session under the provider its URI's scheme names
    // (`_makeEntryFromMetadata`), and drops it unless that is the agent's.
    let scheme = default["resource"]
        .as_str()
        .and_then(|uri| uri.split_once(':'))
        .map(|(scheme, _)| scheme);
    assert_eq!(scheme, Some(PROVIDER), "{default}");

    // It subscribes to the session under the name it computed, `ahp-proxy:/default`
    // (common/agentHostSessionIdentity.ts): the snapshot comes under that name.
    let snapshot = window.follow_session(PROVIDER_SESSION).await;
    assert_eq!(snapshot["state"]["provider"], PROVIDER, "{snapshot}");
    // Only the channel goes by its name: inside, the session still names its chat as published.
    assert_eq!(snapshot["state"]["defaultChat"], HARNESS_CHAT, "{snapshot}");

    // And to the chat it derives from it (`buildDefaultChatUri`,
    // common/state/sessionState.ts): the harness's chat, under that name.
    let chat = derived_chat(PROVIDER_SESSION);
    let subscribed = window
        .raw
        .request("subscribe", json!({"channel": chat}))
        .await;
    let chat_snapshot = &subscribed["result"]["snapshot"];
    assert_eq!(chat_snapshot["resource"], chat.as_str(), "{subscribed}");
    assert_eq!(
        chat_snapshot["state"]["resource"],
        chat.as_str(),
        "{subscribed}"
    );
    assert!(chat_snapshot["state"]["turns"].is_array(), "{subscribed}");
    // The chat is the harness's: the window's message box has nothing to send to.
    let seq = window
        .dispatch(
            &chat,
            json!({"type": "chat/turnStarted", "turnId": "t1",
                   "startedAt": "2026-01-01T00:00:00.000Z",
                   "message": {"text": "hello", "origin": {"kind": "user"}}}),
        )
        .await;
    let refused = window.echo(seq).await;
    assert_eq!(refused["channel"], chat.as_str(), "{refused}");
    assert!(
        refused["rejectionReason"]
            .as_str()
            .is_some_and(|r| r.contains("read-only")),
        "{refused}"
    );

    // The editor window follows the same session by the name the host published before
    // (`ahp-session:/default`), and the chat VS Code would derive from that name: each
    // window gets what it asked for, by its own name.
    let (mut editor, _) =
        Window::open(&pasted, "editor-window", "vscode-editor-window", "VS Code").await;
    editor.follow_session(OLD_SESSION).await;
    let old_chat = derived_chat(OLD_SESSION);
    let subscribed = editor
        .raw
        .request("subscribe", json!({"channel": old_chat}))
        .await;
    assert_eq!(
        subscribed["result"]["snapshot"]["resource"],
        old_chat.as_str(),
        "{subscribed}"
    );

    // MCP Apps: the window declares no `capabilities` at `initialize`
    // (browser/agentHostProtocolClient.ts) and renders Apps anyway, since VS Code's own host
    // puts `mcpApp` on every server and the `mcp://` channel on every ready one, for every
    // client (node/shared/mcpCustomizationController.ts). Named a VS Code window
    // (common/agentHostClientInfo.ts), it is shown them; its App's View is read over the
    // channel (`handleMcpRequest`).
    let dash = window.until_server("dash", "ready").await;
    assert!(
        dash["mcpApp"]["capabilities"]["serverResources"].is_object(),
        "{dash}"
    );
    let channel = dash["channel"].as_str().expect("a channel").to_string();
    let read = window
        .raw
        .request(
            "resources/read",
            json!({"channel": channel, "uri": APP_URI}),
        )
        .await;
    assert_eq!(
        read["result"]["contents"][0]["mimeType"], "text/html;profile=mcp-app",
        "{read}"
    );

    // Toggling a server (`session/customizationToggled` on the session it follows): the echo
    // comes under the window's name for the session, and the server stops.
    window.until_server("notes", "ready").await;
    let notes = window.server("notes")["id"].as_str().unwrap().to_string();
    let seq = window
        .dispatch(
            PROVIDER_SESSION,
            json!({"type": "session/customizationToggled", "id": notes,
                   "enablement": [{"kind": "global", "enabled": false}]}),
        )
        .await;
    let echo = window.echo(seq).await;
    assert_eq!(echo["channel"], PROVIDER_SESSION, "{echo}");
    assert!(echo.get("rejectionReason").is_none(), "{echo}");
    window.until_server("notes", "stopped").await;
    // An older client's toggle shape (`{id, enabled}`) is refused naming the field it lacks.
    let seq = window
        .dispatch(
            PROVIDER_SESSION,
            json!({"type": "session/customizationToggled", "id": notes, "enabled": true}),
        )
        .await;
    let refused = window.echo(seq).await;
    let reason = refused["rejectionReason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("session/customizationToggled") && reason.contains("enablement"),
        "{refused}"
    );
    let seq = window
        .dispatch(
            PROVIDER_SESSION,
            json!({"type": "session/customizationToggled", "id": notes,
                   "enablement": [{"kind": "global", "enabled": true}]}),
        )
        .await;
    window.echo(seq).await;
    window.until_server("notes", "ready").await;

    // Stopping and starting one (`session/mcpServerStopRequested` / `StartRequested`).
    let dash_id = dash["id"].as_str().unwrap().to_string();
    window
        .dispatch(
            PROVIDER_SESSION,
            json!({"type": "session/mcpServerStopRequested", "id": dash_id}),
        )
        .await;
    window.until_server("dash", "stopped").await;
    window
        .dispatch(
            PROVIDER_SESSION,
            json!({"type": "session/mcpServerStartRequested", "id": dash_id}),
        )
        .await;
    assert_eq!(
        window.until_server("dash", "ready").await["channel"],
        channel.as_str()
    );

    // Rename: the window dispatches `session/titleChanged` on the chat it shows (Qusic/pi-ahp
    // src/core/client-workarounds.ts records it; VS Code's own host takes a rename on a chat,
    // its agent-host conformance suite's `rename` helper dispatching it there). Applied to the
    // session, echoed to the window under the session's name it follows, announced on the
    // root.
    let seq = window
        .dispatch(
            &chat,
            json!({"type": "session/titleChanged", "title": "Renamed in VS Code"}),
        )
        .await;
    let echo = window.echo(seq).await;
    assert_eq!(echo["channel"], PROVIDER_SESSION, "{echo}");
    assert_eq!(echo["action"]["title"], "Renamed in VS Code", "{echo}");
    let announced = window
        .until(|f| {
            f["method"] == "root/sessionSummaryChanged"
                && f["params"]["changes"]["title"] == "Renamed in VS Code"
        })
        .await;
    // The root names the session as published.
    assert_eq!(
        announced["params"]["session"], PROVIDER_SESSION,
        "{announced}"
    );
    assert_eq!(
        window.session.as_ref().unwrap().1.title,
        "Renamed in VS Code"
    );
    // The same from the editor window, on the chat the session publishes.
    let seq = editor
        .dispatch(
            HARNESS_CHAT,
            json!({"type": "session/titleChanged", "title": "Editor title"}),
        )
        .await;
    let echo = editor.echo(seq).await;
    assert_eq!(echo["channel"], OLD_SESSION, "{echo}");
    // A rename without a title is refused naming the field.
    let seq = window
        .dispatch(PROVIDER_SESSION, json!({"type": "session/titleChanged"}))
        .await;
    let refused = window.echo(seq).await;
    let reason = refused["rejectionReason"].as_str().unwrap_or_default();
    assert!(reason.contains("title"), "{refused}");
    assert!(!reason.contains("unknown action type"), "{refused}");

    // Completions aimed at the session (browser/agentHostProtocolClient.ts `completions`
    // passes the chat input's params through; Qusic/pi-ahp src/core/client-workarounds.ts:
    // VS Code targets them at the provider-form session): nothing to complete.
    let completions = window
        .raw
        .request(
            "completions",
            json!({"channel": PROVIDER_SESSION, "kind": "userMessage", "text": "@", "offset": 1}),
        )
        .await;
    assert_eq!(completions["result"], json!({"items": []}), "{completions}");

    // The default session cannot be disposed, whatever the window calls it.
    let disposed = window
        .raw
        .request("disposeSession", json!({"channel": PROVIDER_SESSION}))
        .await;
    assert_eq!(common::error_code(&disposed), -32602, "{disposed}");
    // The window sets itself active in the session and leaves it by its name: it is gone
    // from the session's active clients, as the editor window sees.
    let seq = window
        .dispatch(
            PROVIDER_SESSION,
            json!({"type": "session/activeClientSet",
                   "activeClient": {"clientId": "agents-window", "tools": []}}),
        )
        .await;
    assert!(window.echo(seq).await.get("rejectionReason").is_none());
    window
        .raw
        .notify("unsubscribe", json!({"channel": PROVIDER_SESSION}))
        .await;
    editor
        .until(|f| {
            f["params"]["channel"] == OLD_SESSION
                && f["params"]["action"]["type"] == "session/activeClientRemoved"
                && f["params"]["action"]["clientId"] == "agents-window"
        })
        .await;

    // The socket drops. Meanwhile the editor window renames the session again.
    let (followed, missed_from) = (window.session.take(), window.last_seen);
    drop(window.raw);
    let seq = editor
        .dispatch(
            OLD_SESSION,
            json!({"type": "session/titleChanged", "title": "While away"}),
        )
        .await;
    editor.echo(seq).await;
    // A new socket, and `reconnect` without `channel` (`_reconnectOrInitialize`,
    // browser/agentHostProtocolClient.ts): what it missed, under the names it follows.
    let mut raw = Raw::connect_url(&window_url(&pasted)).await;
    let back = raw
        .request(
            "reconnect",
            json!({"clientId": "agents-window", "lastSeenServerSeq": missed_from,
                   "subscriptions": [ROOT, PROVIDER_SESSION, chat],
                   "_meta": {"vscode.clientConnectionKind": "webSocket"}}),
        )
        .await;
    let result = &back["result"];
    assert_eq!(result["type"], "replay", "{back}");
    assert_eq!(result["missing"], json!([]), "{back}");
    let renamed = result["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"]["title"] == "While away")
        .unwrap_or_else(|| panic!("the missed rename: {back}"));
    assert_eq!(renamed["channel"], PROVIDER_SESSION, "{back}");
    // And it carries on under those names.
    let mut window = Window {
        raw,
        client_id: "agents-window".into(),
        client_seq: 100,
        last_seen: missed_from,
        session: followed,
        chat: None,
    };
    let seq = window
        .dispatch(
            PROVIDER_SESSION,
            json!({"type": "session/titleChanged", "title": "Back"}),
        )
        .await;
    assert_eq!(window.echo(seq).await["channel"], PROVIDER_SESSION);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_vs_code_release_is_answered_with_a_version_it_offered() {
    let proxy = Proxy::start("");
    for (offered, answered) in [
        // The newest (common/agentHostProtocolCompatibility.ts): 1.0.0 first.
        (json!(["1.0.0", "0.10.0", "0.9.0"]), "1.0.0"),
        // The release that called its protocol 0.10.0 (the same file: "VS Code's 0.10.0
        // release shares the wire contract"), alone or before 0.9.0.
        (json!(["0.10.0"]), "0.10.0"),
        (json!(["0.10.0", "0.9.0"]), "0.10.0"),
        // A 0.9.0 copy of the registry without 0.8.0 (`CLIENT_SUPPORTED_PROTOCOL_VERSIONS`,
        // browser/agentHostProtocolClient.ts).
        (
            json!(["0.9.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1"]),
            "0.9.0",
        ),
    ] {
        let mut raw = Raw::connect(&proxy).await;
        let init = raw
            .request(
                "initialize",
                json!({"channel": ROOT, "protocolVersions": offered, "clientId": "offer"}),
            )
            .await;
        assert_eq!(
            init["result"]["protocolVersion"], answered,
            "{offered}: {init}"
        );
    }
}

/// The harness's servers for the chat tests: a clock, the App, notes whose calls are held
/// for approval, and echo (whose call without its argument is a tool error).
fn chat_config() -> String {
    format!(
        "[supervisor]\nrestart_delay_ms = 50\n{}{}{}{}[approval]\nmode = \"never\"\n\
         [approval.servers.notes]\nmode = \"always\"\n",
        server("clock", "clock", &[]),
        server("dash", "app", &[]),
        server("notes", "notes", &[]),
        server("echo", "echo", &[]),
    )
}

/// The harness calls `tool` with `arguments`; its answer.
async fn harness_call(harness: &mut RawClient, tool: &str, arguments: Value) -> Value {
    let params = json!({"name": tool, "arguments": arguments}).to_string();
    let exchange = harness
        .request("tools/call", Some(&params), &mut |_, _| String::new())
        .await;
    serde_json::from_str(exchange.response()).unwrap()
}

/// A VS Code 1.139 window that presented the approval key (`tkn`), following the session and
/// the chat it derives from it, both under VS Code's names.
async fn window_on(proxy: &Proxy, client_id: &str) -> Window {
    let key = proxy.approval_key().expect("an approval key");
    let pasted = format!("ws://{}/?tkn={key}", proxy.addr);
    let (mut window, _) = Window::open(&pasted, client_id, "vscode-agents-window", "VS Code").await;
    window.follow_session(PROVIDER_SESSION).await;
    window.follow_chat(&derived_chat(PROVIDER_SESSION)).await;
    window
}

/// The text of a `StringOrMarkdown` as VS Code reads it (`ET`: a string, or `.markdown`).
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other["markdown"].as_str().unwrap_or_default().to_string(),
    }
}

/// What VS Code 1.139 shows of a mirrored call (`stateToProgressAdapter`: `toolCallStateToInvocation`
/// / `finalizeToolInvocation`, `turnsToHistory` for a reopened chat): the invocation message
/// while it runs, the past-tense message once it completed, and, in the call's details, its
/// `toolInput` and result `content`. Each names the tool and its server, for a call that ran,
/// one that was approved, one denied, one whose tool failed, and an App's.
#[tokio::test(flavor = "multi_thread")]
async fn vs_code_shows_each_call_as_the_tool_on_its_server_with_its_input_and_output() {
    let (proxy, mut harness) = common::stdio_harness(&chat_config()).await;
    let mut window = window_on(&proxy, "reader").await;
    common::ide::listed(&mut harness, "show_dashboard").await;
    common::ide::listed(&mut harness, "add_note").await;

    // A call that needs no approval.
    let answer = harness_call(&mut harness, "now", json!({})).await;
    let time = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, now) = window.until_call("now", "completed").await;
    assert!(
        shown(&now["invocationMessage"]).contains("`now` on `clock`"),
        "{now}"
    );
    let past = shown(&now["pastTenseMessage"]);
    assert!(past.contains("`now` on `clock`"), "{now}");
    assert_eq!(now["toolInput"], "{}", "{now}");
    assert_eq!(now["content"][0]["text"], time.as_str(), "{now}");
    assert_eq!(now["contributor"]["kind"], "mcp", "{now}");

    // A call its tool answered with an error.
    let answer = harness_call(&mut harness, "echo", json!({})).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let (_, failed) = window.until_call("echo", "completed").await;
    assert_eq!(failed["success"], false, "{failed}");
    let past = shown(&failed["pastTenseMessage"]);
    assert!(past.contains("`echo` on `echo`"), "{failed}");
    assert!(
        failed["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("missing"),
        "{failed}"
    );

    // A call held for approval, approved in the window: the card names it, and so does the
    // call once it ran.
    let note = json!({"title": "Release", "text": "Tag v1"});
    let (answer, ()) = tokio::join!(
        harness_call(&mut harness, "add_note", note.clone()),
        async {
            let (turn, held) = window.until_call("add_note", "pending-confirmation").await;
            // The card: its title, and the invocation message under it (the question).
            let title = shown(&held["confirmationTitle"]);
            assert!(title.contains("`add_note` on `notes`"), "{held}");
            let asked = shown(&held["invocationMessage"]);
            assert!(
                asked.contains("`add_note`") && asked.contains("`notes`"),
                "{held}"
            );
            let call = held["toolCallId"].as_str().unwrap().to_string();
            window
            .dispatch(
                &derived_chat(PROVIDER_SESSION),
                json!({"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": call,
                       "approved": true, "confirmed": "user-action", "selectedOptionId": "allow-once"}),
            )
            .await;
        }
    );
    assert!(answer.get("result").is_some(), "{answer}");
    let (_, approved) = window.until_call("add_note", "completed").await;
    assert!(
        shown(&approved["pastTenseMessage"]).contains("`add_note` on `notes`"),
        "{approved}"
    );
    let input: Value = serde_json::from_str(approved["toolInput"].as_str().unwrap()).unwrap();
    assert_eq!(input, note, "{approved}");
    assert!(
        approved["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Release"),
        "{approved}"
    );

    // One denied: it ends cancelled, still named.
    let (answer, ()) = tokio::join!(
        harness_call(
            &mut harness,
            "add_note",
            json!({"title": "No", "text": "x"})
        ),
        async {
            let (turn, held) = loop {
                let found = window.calls().into_iter().find(|(_, c)| {
                    c["toolName"] == "add_note" && c["status"] == "pending-confirmation"
                });
                match found {
                    Some(found) => break found,
                    None => {
                        window.next().await;
                    }
                }
            };
            let call = held["toolCallId"].as_str().unwrap().to_string();
            window
                .dispatch(
                    &derived_chat(PROVIDER_SESSION),
                    json!({"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": call,
                           "approved": false, "reason": "denied"}),
                )
                .await;
        }
    );
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let (_, denied) = window.until_call("add_note", "cancelled").await;
    let asked = shown(&denied["invocationMessage"]);
    assert!(
        asked.contains("`add_note`") && asked.contains("`notes`"),
        "{denied}"
    );

    // An App's call: VS Code renders its View only when `_meta.ui` names the server's
    // `mcp://` channel beside the View, and the call's contributor is the MCP server.
    let dash = window.until_server("dash", "ready").await;
    let channel = dash["channel"].as_str().expect("a channel").to_string();
    harness_call(&mut harness, "show_dashboard", json!({})).await;
    let (_, app) = window.until_call("show_dashboard", "completed").await;
    assert_eq!(app["_meta"]["ui"]["resourceUri"], APP_URI, "{app}");
    assert_eq!(app["_meta"]["ui"]["channel"], channel.as_str(), "{app}");
    assert_eq!(app["contributor"]["kind"], "mcp", "{app}");
    assert_eq!(app["contributor"]["customizationId"], dash["id"], "{app}");
    // The View's own call on the channel (its Refresh button) is shown as the window's call,
    // with the View's URI but no channel: VS Code would render a second View for it.
    let refreshed = window
        .raw
        .request(
            "tools/call",
            json!({"channel": channel, "name": "refresh_dashboard", "arguments": {}}),
        )
        .await;
    assert_eq!(refreshed["result"]["isError"], false, "{refreshed}");
    let (_, own) = window.until_call("refresh_dashboard", "completed").await;
    assert_eq!(
        own["_meta"]["ahp-proxy/call"]["clientId"], "reader",
        "{own}"
    );
    assert_eq!(own["_meta"]["ui"]["resourceUri"], APP_URI, "{own}");
    assert!(own["_meta"]["ui"].get("channel").is_none(), "{own}");
    assert!(
        shown(&app["pastTenseMessage"]).contains("`show_dashboard` on `dash`"),
        "{app}"
    );
}

/// A client that is not shown MCP Apps is not shown the channel in a call's `_meta` either.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_without_mcp_apps_gets_app_calls_without_the_channel() {
    let (proxy, mut harness) = common::stdio_harness(&chat_config()).await;
    common::ide::listed(&mut harness, "show_dashboard").await;
    let mut plain = Raw::connect(&proxy).await;
    plain.initialize("plain", &[]).await;
    let subscribed = plain
        .request("subscribe", json!({"channel": HARNESS_CHAT}))
        .await;
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    harness_call(&mut harness, "show_dashboard", json!({})).await;
    let start = plain
        .notification(|f| f["params"]["action"]["type"] == "chat/toolCallComplete")
        .await;
    let meta = &start["params"]["action"]["_meta"];
    assert_eq!(meta["ui"]["resourceUri"], APP_URI, "{start}");
    assert!(meta["ui"].get("channel").is_none(), "{start}");
    // Its snapshot of the chat has the call without it too.
    let mut later = Raw::connect(&proxy).await;
    later.initialize("later", &[]).await;
    let snapshot = later
        .request("subscribe", json!({"channel": HARNESS_CHAT}))
        .await;
    let text = snapshot.to_string();
    assert!(
        text.contains("show_dashboard") && !text.contains("mcp://"),
        "{snapshot}"
    );
}

/// Turn and call ids carry the proxy's run: after a restart the new calls do not take the
/// ids of the old ones, and a VS Code window that comes back is sent the new chat.
#[tokio::test(flavor = "multi_thread")]
async fn ids_are_new_after_a_restart_and_a_returning_window_sees_the_new_chat() {
    let config = chat_config();
    let (first, mut harness) = common::stdio_harness(&config).await;
    let mut window = window_on(&first, "returning").await;
    harness_call(&mut harness, "now", json!({})).await;
    let (old_turn, old_call) = window.until_call("now", "completed").await;
    let old_call = old_call["toolCallId"].as_str().unwrap().to_string();
    let last_seen = window.last_seen;
    drop(harness);
    first.terminate();

    let (second, mut harness) = common::stdio_harness(&config).await;
    harness_call(&mut harness, "now", json!({})).await;
    // The window reconnects under its client id: the new proxy does not know it and says to
    // initialize; it does, and subscribes again.
    let mut raw = Raw::connect_url(&format!(
        "ws://{}/?tkn={}",
        second.addr,
        second.approval_key().unwrap()
    ))
    .await;
    let back = raw
        .request(
            "reconnect",
            json!({"clientId": "returning", "lastSeenServerSeq": last_seen,
                   "subscriptions": [ROOT, PROVIDER_SESSION, derived_chat(PROVIDER_SESSION)]}),
        )
        .await;
    assert!(back.get("error").is_some(), "{back}");
    drop(raw);
    let mut window = window_on(&second, "returning").await;
    let (new_turn, new_call) = window.until_call("now", "completed").await;
    let new_call = new_call["toolCallId"].as_str().unwrap().to_string();
    assert_ne!(new_turn, old_turn);
    assert_ne!(new_call, old_call);
    let ids: Vec<String> = window.calls().into_iter().map(|(turn, _)| turn).collect();
    assert!(!ids.contains(&old_turn), "{ids:?}");
}

/// The session as VS Code lists it: a title that names the harness and the proxy (not
/// "Workspace", VS Code's own local session), and `workingDirectories` (VS Code lists a
/// host's session in a window whose folders hold one of them): the plugin roots and the
/// manifests' folders, or what `[session] working_directories` says.
#[tokio::test(flavor = "multi_thread")]
async fn the_session_is_titled_for_the_harness_and_works_in_the_plugin_folders() {
    let dir = ScratchDir::new("vscode-folders");
    let roots = dir.path().join("plugins");
    let manifests = dir.path().join("team");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::write(manifests.join("plugins.json"), "{\"plugins\": []}").unwrap();
    let uri = |path: &std::path::Path| format!("file://{}", path.display());
    let config = format!(
        "plugin_roots = [{:?}]\nmanifests = [{:?}]\n",
        roots.display().to_string(),
        manifests.join("plugins.json").display().to_string()
    );
    let proxy = Proxy::start(&config);
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("lister", &[]).await;
    let listed = raw.request("listSessions", json!({"channel": ROOT})).await;
    let session = &listed["result"]["items"][0];
    assert_eq!(session["title"], "MCP harness (ahp-proxy)", "{listed}");
    assert_eq!(
        session["workingDirectories"],
        json!([uri(&roots), uri(&manifests)]),
        "{listed}"
    );

    // Said in the config: those folders instead.
    let chosen = dir.path().join("project");
    std::fs::create_dir_all(&chosen).unwrap();
    let config = format!(
        "{config}[session]\nworking_directories = [{:?}]\n",
        chosen.display().to_string()
    );
    let proxy = Proxy::start(&config);
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("lister", &[]).await;
    let listed = raw.request("listSessions", json!({"channel": ROOT})).await;
    assert_eq!(
        listed["result"]["items"][0]["workingDirectories"],
        json!([uri(&chosen)]),
        "{listed}"
    );
}
