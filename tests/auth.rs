//! Authentication bridged to AHP: a real streamable HTTP MCP server inside the test (rmcp
//! behind a small bearer check, with RFC 9728 metadata), the real proxy supervising it, and
//! the official AHP client driving `authenticate`.

mod common;
#[path = "common/protected.rs"]
mod protected;

use common::{Proxy, Watcher};
use protected::{harness_calls_add, protected, ready_with_narrow_token, Protected};
use serde_json::{json, Value};

async fn authenticate(w: &Watcher, params: Value) -> Result<Value, (i32, String, Option<Value>)> {
    let mut params = params;
    params["channel"] = json!("ahp-root://");
    w.client
        .request::<_, Value>("authenticate", params)
        .await
        .map_err(|e| match e {
            ahp::ClientError::Rpc(e) => (
                e.code,
                e.message,
                e.data.map(|d| serde_json::to_value(d).unwrap()),
            ),
            other => panic!("transport failure: {other}"),
        })
}

/// The protected server supervised by a proxy, a watcher, the states seen on the way, and
/// the server's state once it asks for a token.
async fn asking_for_a_token() -> (Protected, Proxy, Watcher, Vec<String>, Value) {
    let server = protected().await;
    let proxy = Proxy::start(&format!(
        "[supervisor]\nrestart_delay_ms = 50\n[servers.remote]\nurl = \"{}\"\n",
        server.url
    ));
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    let asked = w.until("remote", "authRequired", &mut seen).await;
    (server, proxy, w, seen, asked)
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_from_authenticate_bring_a_protected_server_up_and_expiry_takes_it_down() {
    // 401 with a challenge: authRequired, the fetched metadata, the challenge's scopes.
    let (server, proxy, mut w, mut seen, asked) = asking_for_a_token().await;
    assert_eq!(asked["reason"], "required", "{asked}");
    assert_eq!(asked["resource"], server.metadata, "{asked}");
    assert_eq!(asked["requiredScopes"], json!(["notes"]), "{asked}");

    // Unknown resources and scopes that do not cover the requirement are refused.
    let unknown = authenticate(
        &w,
        json!({"resource": "http://elsewhere/mcp", "token": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(unknown.0, -32602, "{unknown:?}");
    let narrow = authenticate(
        &w,
        json!({"resource": server.url, "token": "t", "scopes": ["other"]}),
    )
    .await
    .unwrap_err();
    assert_eq!(narrow.0, -32007, "{narrow:?}");
    assert_eq!(
        narrow.2.unwrap()["resources"][0]["resource"],
        json!(server.url)
    );

    // A token the server accepts: the server reconnects with it and is ready.
    server
        .tokens
        .lock()
        .unwrap()
        .insert("TOKEN-SENTINEL-1".into());
    let ok = authenticate(
        &w,
        json!({"resource": server.url, "token": "TOKEN-SENTINEL-1", "scopes": ["notes"]}),
    )
    .await
    .unwrap();
    assert_eq!(ok, json!({}));
    w.until("remote", "ready", &mut seen).await;

    // The server stops accepting it: the next request gets 401, the server is `expired`.
    server.tokens.lock().unwrap().clear();
    let mut raw = common::Raw::connect(&proxy).await;
    let _ = raw
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "clientId": "apps", "protocolVersions": ["1.0.0"],
                   "capabilities": {"mcpApps": {}}}),
        )
        .await;
    let channel = w.server("remote")["channel"].clone();
    assert!(
        channel.is_null(),
        "the plain watcher sees no channel: {channel}"
    );
    let snapshot = raw
        .request("subscribe", json!({"channel": common::DEFAULT_SESSION}))
        .await;
    let channel = snapshot["result"]["snapshot"]["state"]["customizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "remote")
        .and_then(|c| c["channel"].as_str())
        .expect("a channel while ready")
        .to_string();
    let refused = raw.request("tools/list", json!({"channel": channel})).await;
    assert!(refused.get("error").is_some(), "{refused}");
    let expired = w.until("remote", "authRequired", &mut seen).await;
    assert_eq!(expired["reason"], "expired", "{expired}");

    // A new token with a lifetime: ready, then `expired` again when the lifetime is over.
    server
        .tokens
        .lock()
        .unwrap()
        .insert("TOKEN-SENTINEL-2".into());
    authenticate(
        &w,
        json!({"resource": server.url, "token": "TOKEN-SENTINEL-2", "expiresIn": 1}),
    )
    .await
    .unwrap();
    w.until("remote", "ready", &mut seen).await;
    let lapsed = w.until("remote", "authRequired", &mut seen).await;
    assert_eq!(lapsed["reason"], "expired", "{lapsed}");

    // Revoking (empty token): back to `required` without any token.
    server
        .tokens
        .lock()
        .unwrap()
        .insert("TOKEN-SENTINEL-3".into());
    authenticate(
        &w,
        // A lifetime too long to represent is taken as none (and knocks nothing over).
        json!({"resource": server.url, "token": "TOKEN-SENTINEL-3", "expiresIn": i64::MAX}),
    )
    .await
    .unwrap();
    w.until("remote", "ready", &mut seen).await;
    authenticate(&w, json!({"resource": server.url, "token": ""}))
        .await
        .unwrap();
    let revoked = w.until("remote", "authRequired", &mut seen).await;
    assert_eq!(revoked["reason"], "required", "{revoked}");

    // Tokens never reach AHP state or the logs.
    let state = serde_json::to_string(&w.mirror).unwrap();
    assert!(!state.contains("TOKEN-SENTINEL"), "{state}");
    let logs = proxy.logs();
    assert!(!logs.contains("TOKEN-SENTINEL"), "{logs}");
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_naming_another_resource_is_not_shown() {
    // A server whose metadata claims to be somebody else: a client must not be led to hand
    // it that resource's token. The server's own URL is shown instead.
    let server = protected().await;
    *server.served.lock().unwrap() = json!({
        "resource": "https://api.github.com/",
        "authorization_servers": ["https://github.com/login/oauth"],
    });
    let proxy = Proxy::start(&format!("[servers.remote]\nurl = \"{}\"\n", server.url));
    let mut w = Watcher::open(&proxy).await;
    let asked = w.until("remote", "authRequired", &mut Vec::new()).await;
    assert_eq!(
        asked["resource"],
        json!({"resource": server.url}),
        "{asked}"
    );
    let refused = authenticate(
        &w,
        json!({"resource": "https://api.github.com/", "token": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.0, -32602, "{refused:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_that_needs_more_scope_pauses_until_authenticate_then_completes() {
    let (server, proxy, mut w, mut seen) = ready_with_narrow_token("").await;
    server.tokens.lock().unwrap().insert("WIDE-SENTINEL".into());
    server.admins.lock().unwrap().insert("WIDE-SENTINEL".into());

    // The harness chat, followed from before the call. (Subscribing later would not do:
    // in ahp-types 1.0.0 an `auth-required` tool call in a snapshot does not deserialize,
    // its `status` being both the tag and a field, so it arrives as `Unknown`.)
    let (chat_snapshot, mut chat) = w
        .client
        .subscribe("ahp-chat:/harness".into())
        .await
        .unwrap();
    let mut chat_state = match chat_snapshot.snapshot.unwrap().state {
        ahp_types::state::SnapshotState::Chat(c) => *c,
        other => panic!("{other:?}"),
    };

    // The harness calls `add`, which this token may not: the server says 403.
    let (_harness, call) = harness_calls_add(&proxy, 2, 3).await;
    let paused = w.until("remote", "authRequired", &mut seen).await;
    assert_eq!(paused["reason"], "insufficientScope", "{paused}");
    assert_eq!(
        paused["requiredScopes"],
        json!(["notes", "admin"]),
        "{paused}"
    );
    assert_eq!(paused["description"], "add needs admin", "{paused}");

    // The session asks for input; the mirrored call is paused in `auth-required`.
    let status_of = |chat: &ahp_types::state::ChatState| -> Option<String> {
        let parts = chat.active_turn.as_ref().map(|t| &t.response_parts)?;
        parts.iter().find_map(|p| match p {
            ahp_types::state::ResponsePart::ToolCall(t) => Some(
                serde_json::to_value(&t.tool_call).unwrap()["status"]
                    .as_str()?
                    .to_string(),
            ),
            _ => None,
        })
    };
    while w.mirror.input_needed.as_ref().is_none_or(|n| n.is_empty()) {
        w.step().await;
    }
    let needed = serde_json::to_value(&w.mirror.input_needed).unwrap();
    assert_eq!(needed[0]["kind"], "toolAuthentication", "{needed}");
    assert_eq!(needed[0]["toolCall"]["status"], "auth-required", "{needed}");
    assert_eq!(
        needed[0]["toolCall"]["auth"]["reason"], "insufficientScope",
        "{needed}"
    );
    while status_of(&chat_state).as_deref() != Some("auth-required") {
        let envelope = common::next_action(&mut chat).await;
        let _ = ahp::reducers::apply_action_to_chat(&mut chat_state, &envelope.action);
    }

    // A token with the scope: the server reconnects, the call is retried and completes.
    authenticate(
        &w,
        json!({"resource": server.url, "token": "WIDE-SENTINEL", "scopes": ["notes", "admin"]}),
    )
    .await
    .unwrap();
    let result = tokio::time::timeout(common::PATIENCE, call)
        .await
        .expect("the call completes")
        .unwrap()
        .expect("a result, not an error");
    let value = serde_json::to_value(&result).unwrap();
    assert_eq!(value["structuredContent"]["sum"], json!(5), "{value}");
    while !w.mirror.input_needed.as_ref().is_none_or(|n| n.is_empty()) {
        w.step().await;
    }
    // The paused call resumed (running) and completed, in the official reducers' eyes.
    let mut statuses = Vec::new();
    loop {
        if let Some(status) = status_of(&chat_state) {
            if statuses.last() != Some(&status) {
                statuses.push(status);
            }
        }
        if statuses.last().map(String::as_str) == Some("completed") {
            break;
        }
        let envelope = common::next_action(&mut chat).await;
        let _ = ahp::reducers::apply_action_to_chat(&mut chat_state, &envelope.action);
    }
    assert_eq!(statuses, ["auth-required", "running", "completed"]);
    let state = serde_json::to_string(&w.mirror).unwrap();
    assert!(!state.contains("SENTINEL"), "{state}");
    assert!(!proxy.logs().contains("SENTINEL"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_call_fails_clearly_when_no_token_comes() {
    // Nobody will authenticate: the wait is bounded by the request timeout.
    let (_server, proxy, mut w, mut seen) =
        ready_with_narrow_token("[mcp]\nrequest_timeout_ms = 500\n").await;
    let (_harness, call) = harness_calls_add(&proxy, 1, 1).await;
    let refused = call.await.unwrap().unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("needs more authorization (insufficient scope)"),
        "{message}"
    );
    let state = w.until("remote", "authRequired", &mut seen).await;
    assert_eq!(state["reason"], "insufficientScope", "{state}");
    // Whatever was shown meanwhile, nothing is left waiting for input (the entry, if the
    // pause was shown before the timeout, is removed).
    while w
        .mirror
        .input_needed
        .as_ref()
        .is_some_and(|n| !n.is_empty())
    {
        w.step().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_who_gives_up_ends_the_paused_call_at_once() {
    let (_server, proxy, mut w, _seen) = ready_with_narrow_token("").await;
    let (_harness, call) = harness_calls_add(&proxy, 1, 1).await;
    // The session asks for input; the user declines with a failed completion of the call.
    while w.mirror.input_needed.as_ref().is_none_or(|n| n.is_empty()) {
        w.step().await;
    }
    let needed = serde_json::to_value(&w.mirror.input_needed).unwrap();
    let (chat, turn, tool_call) = (
        needed[0]["chat"].as_str().unwrap().to_string(),
        needed[0]["turnId"].clone(),
        needed[0]["toolCall"]["toolCallId"].clone(),
    );
    let decline: ahp_types::StateAction = serde_json::from_value(json!({
        "type": "chat/toolCallComplete", "turnId": turn, "toolCallId": tool_call,
        "result": {"success": false, "pastTenseMessage": "Declined by the user"}
    }))
    .unwrap();
    w.client.dispatch(chat, decline).await.unwrap();
    let refused = tokio::time::timeout(common::PATIENCE, call)
        .await
        .expect("the call ends")
        .unwrap()
        .unwrap_err();
    assert!(refused.to_string().contains("declined"), "{refused}");
    while w
        .mirror
        .input_needed
        .as_ref()
        .is_some_and(|n| !n.is_empty())
    {
        w.step().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_session_summary_says_input_needed_while_a_call_waits_for_a_token() {
    let (server, proxy, _w, _seen) = ready_with_narrow_token("").await;
    server.tokens.lock().unwrap().insert("WIDE-SENTINEL".into());
    server.admins.lock().unwrap().insert("WIDE-SENTINEL".into());
    let mut observer = common::Raw::connect(&proxy).await;
    observer.initialize("observer", &["ahp-root://"]).await;

    let (_harness, call) = harness_calls_add(&proxy, 2, 3).await;
    let input_needed = 24;
    observer
        .notification(|n| common::announced_status(n) == Some(input_needed))
        .await;
    assert_eq!(observer.listed_status().await, input_needed);

    let mut raw = common::Raw::connect(&proxy).await;
    raw.initialize("granter", &[]).await;
    let granted = raw
        .request(
            "authenticate",
            json!({"channel": "ahp-root://", "resource": server.url, "token": "WIDE-SENTINEL",
                   "scopes": ["notes", "admin"]}),
        )
        .await;
    assert!(granted.get("result").is_some(), "{granted}");
    tokio::time::timeout(common::PATIENCE, call)
        .await
        .expect("the call completes")
        .unwrap()
        .expect("a result");
    observer
        .notification(|n| common::announced_status(n) == Some(1))
        .await;
    assert_eq!(observer.listed_status().await, 1);
    // The session's own status says the same, not the in-progress the input left behind.
    assert_eq!(observer.snapshot_status().await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_the_server_refuses_is_refused_by_authenticate() {
    let (server, proxy, mut w, mut seen, _) = asking_for_a_token().await;

    // The server answers 401 to this token: `authenticate` says so, with what to ask for.
    let refused = authenticate(
        &w,
        json!({"resource": server.url, "token": "BOGUS-SENTINEL"}),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.0, -32007, "{refused:?}");
    assert_eq!(
        refused.2.expect("the resources to authenticate")["resources"][0]["resource"],
        json!(server.url)
    );
    // A token it takes: answered once the server is up with it.
    server.tokens.lock().unwrap().insert("GOOD-SENTINEL".into());
    authenticate(
        &w,
        json!({"resource": server.url, "token": "GOOD-SENTINEL"}),
    )
    .await
    .unwrap();
    w.until("remote", "ready", &mut seen).await;
    assert!(!proxy.logs().contains("SENTINEL"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_lists_a_waiting_servers_protected_resource_until_it_has_a_token() {
    use ahp_types::state::{RootState, SnapshotState};
    let server = protected().await;
    let proxy = Proxy::start(&format!("[servers.remote]\nurl = \"{}\"\n", server.url));
    let mut w = Watcher::open(&proxy).await;
    let (snapshot, mut sub) = w.client.subscribe("ahp-root://".into()).await.unwrap();
    let mut root = match snapshot.snapshot.expect("snapshot").state {
        SnapshotState::Root(root) => *root,
        other => panic!("expected the root, got {other:?}"),
    };
    let listed = |root: &RootState| {
        root.agents[0]
            .protected_resources
            .iter()
            .flatten()
            .filter(|r| r.resource == server.url)
            .count()
    };
    while listed(&root) == 0 {
        let envelope = common::next_action(&mut sub).await;
        let _ = ahp::reducers::apply_action_to_root(&mut root, &envelope.action);
    }
    assert_eq!(listed(&root), 1);
    let shown = serde_json::to_value(&root.agents[0].protected_resources).unwrap();
    assert_eq!(shown[0], server.metadata, "{shown}");
    w.until("remote", "authRequired", &mut Vec::new()).await;

    server.tokens.lock().unwrap().insert("TOKEN".into());
    authenticate(&w, json!({"resource": server.url, "token": "TOKEN"}))
        .await
        .unwrap();
    w.until("remote", "ready", &mut Vec::new()).await;
    while listed(&root) != 0 {
        let envelope = common::next_action(&mut sub).await;
        let _ = ahp::reducers::apply_action_to_root(&mut root, &envelope.action);
    }
}
