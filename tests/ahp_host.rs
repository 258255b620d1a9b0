//! The AHP host end to end: the real binary, real sockets, the official `ahp` + `ahp-ws`
//! client, and a raw WebSocket for what the official client would never send.

mod common;

use ahp::reducers::{apply_action_to_root, apply_action_to_session};
use ahp::ClientError;
use ahp_types::actions::{
    SessionCustomizationToggledAction, SessionIsReadChangedAction, SessionTitleChangedAction,
    StateAction,
};
use ahp_types::commands::{ListSessionsResult, ReconnectResult};
use ahp_types::state::{
    CustomizationEnablement, RootState, SessionLifecycle, SessionState, SnapshotState,
};
use ahp_types::ROOT_RESOURCE_URI;
use common::{
    client, error_code, initialized_client, next_action, padded_action, rss_kib, Ending, Proxy,
    Raw, Watcher, DEFAULT_SESSION, PATIENCE,
};
use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The agent's provider is left at its default (`ahp-proxy`), which names the default
/// session (`DEFAULT_SESSION`); `PROVIDER_CONFIG` sets another one.
const CONFIG: &str = r#"
[agent]
display_name = "Test harness"
description = "An MCP-only harness under test"

[session]
title = "Test workspace"
"#;

fn session_state(state: SnapshotState) -> SessionState {
    match state {
        SnapshotState::Session(session) => *session,
        other => panic!("expected a session snapshot, got {other:?}"),
    }
}

fn root_state(state: SnapshotState) -> RootState {
    match state {
        SnapshotState::Root(root) => *root,
        other => panic!("expected a root snapshot, got {other:?}"),
    }
}

fn title(text: &str) -> StateAction {
    StateAction::SessionTitleChanged(SessionTitleChangedAction { title: text.into() })
}

#[tokio::test]
async fn official_client_initializes_pings_and_decodes_root_and_session_snapshots() {
    let proxy = Proxy::start(CONFIG);
    let client = client(&proxy).await;

    client.ping().await.expect("ping works before initialize");
    let init = client
        .initialize(
            "c1".into(),
            vec!["1.0.0".into()],
            vec![ROOT_RESOURCE_URI.into()],
        )
        .await
        .expect("initialize");
    assert_eq!(init.protocol_version, "1.0.0");
    assert_eq!(init.snapshots.len(), 1);
    let root = root_state(init.snapshots[0].state.clone());
    assert_eq!(root.agents.len(), 1);
    assert_eq!(root.agents[0].provider, "ahp-proxy");
    assert_eq!(root.agents[0].display_name, "Test harness");
    assert!(root.agents[0].models.is_empty());
    assert_eq!(root.active_sessions, Some(1));

    client.ping().await.expect("ping after initialize");

    let sessions: ListSessionsResult = client
        .request("listSessions", json!({"channel": ROOT_RESOURCE_URI}))
        .await
        .expect("listSessions");
    assert_eq!(sessions.items.len(), 1);
    assert_eq!(sessions.items[0].resource, DEFAULT_SESSION);
    assert_eq!(sessions.items[0].provider, "ahp-proxy");
    assert_eq!(sessions.items[0].title, "Test workspace");
    assert!(sessions.next_cursor.is_none());

    let (result, _sub) = client
        .subscribe(DEFAULT_SESSION.into())
        .await
        .expect("subscribe");
    let snapshot = result.snapshot.expect("session snapshot");
    assert_eq!(snapshot.resource, DEFAULT_SESSION);
    assert_eq!(snapshot.from_seq, init.server_seq);
    let session = session_state(snapshot.state);
    assert_eq!(session.lifecycle, SessionLifecycle::Ready);
    assert_eq!(session.provider, "ahp-proxy");
    assert_eq!(session.title, "Test workspace");
    assert_eq!(session.status, 1);
    assert_eq!(session.customizations, Some(vec![]));
    client.shutdown().await;
}

#[tokio::test]
async fn version_negotiation_picks_the_highest_supported_and_refuses_the_rest() {
    let proxy = Proxy::start(CONFIG);
    for (offered, chosen) in [
        (json!(["0.9.0", "0.8.0"]), "0.9.0"),
        (json!(["1.3.0", "2.0.0"]), "1.3.0"),
        (json!(["0.9.0", "1.0.0"]), "1.0.0"),
    ] {
        let mut raw = Raw::connect(&proxy).await;
        let response = raw
            .request(
                "initialize",
                json!({"channel": "ahp-root://", "protocolVersions": offered, "clientId": "v"}),
            )
            .await;
        assert_eq!(response["result"]["protocolVersion"], chosen, "{response}");
    }

    let mut raw = Raw::connect(&proxy).await;
    let response = raw
        .request("initialize", json!({"channel": "ahp-root://", "protocolVersions": ["0.8.0", "2.0.0"], "clientId": "old"}))
        .await;
    assert_eq!(error_code(&response), -32005);
    assert_eq!(
        response["error"]["data"]["supportedVersions"],
        json!(["^1.0.0", "0.10.0", "^0.9.0"])
    );
    assert!(
        matches!(raw.ending().await, Ending::Closed(_)),
        "connection closes after -32005"
    );

    let mut raw = Raw::connect(&proxy).await;
    let response = raw
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1"], "clientId": "bad"}),
        )
        .await;
    assert_eq!(
        error_code(&response),
        -32602,
        "a malformed version is a params error"
    );
}

#[tokio::test]
async fn an_action_from_one_client_reaches_both_with_one_server_seq_and_mirrors_match_the_host() {
    let proxy = Proxy::start(CONFIG);
    let (
        Watcher {
            client: a,
            sub: mut sub_a,
            mirror: mut mirror_a,
        },
        Watcher {
            client: b,
            sub: mut sub_b,
            mirror: mut mirror_b,
        },
    ) = Watcher::pair(&proxy).await;
    let (root_a, mut root_sub_a) = a.subscribe(ROOT_RESOURCE_URI.into()).await.expect("root a");
    let mut root_mirror_a = root_state(root_a.snapshot.expect("snapshot").state);

    let handle = a
        .dispatch(DEFAULT_SESSION.into(), title("Renamed"))
        .await
        .expect("dispatch");
    let seen_a = next_action(&mut sub_a).await;
    let seen_b = next_action(&mut sub_b).await;
    assert_eq!(seen_a.server_seq, seen_b.server_seq);
    assert_eq!(seen_a, seen_b);
    let origin = seen_a
        .origin
        .clone()
        .expect("client-originated echo carries origin");
    assert_eq!(origin.client_id, "a");
    assert_eq!(origin.client_seq, handle.client_seq);
    assert!(seen_a.rejection_reason.is_none());

    b.dispatch(
        DEFAULT_SESSION.into(),
        StateAction::SessionIsReadChanged(SessionIsReadChangedAction { is_read: true }),
    )
    .await
    .expect("dispatch");
    let second_a = next_action(&mut sub_a).await;
    let second_b = next_action(&mut sub_b).await;
    assert_eq!(second_a.server_seq, seen_a.server_seq + 1);
    assert_eq!(second_a, second_b);

    for envelope in [&seen_a, &second_a] {
        apply_action_to_session(&mut mirror_a, &envelope.action);
    }
    for envelope in [&seen_b, &second_b] {
        apply_action_to_session(&mut mirror_b, &envelope.action);
    }

    // A third connection's fresh snapshot is the host's state.
    let Watcher {
        client: c,
        mirror: host_session,
        ..
    } = Watcher::open_as(&proxy, "c").await;
    assert_eq!(host_session.title, "Renamed");
    assert_eq!(mirror_a, host_session);
    assert_eq!(mirror_b, host_session);

    // Root actions too: a created session changes activeSessions for every root subscriber.
    let _: () = b
        .request("createSession", json!({"channel": "ahp-proxy:/second"}))
        .await
        .expect("createSession answers null");
    let envelope = next_action(&mut root_sub_a).await;
    apply_action_to_root(&mut root_mirror_a, &envelope.action);
    let (host_root, _) = c.subscribe(ROOT_RESOURCE_URI.into()).await.expect("root c");
    assert_eq!(
        root_mirror_a,
        root_state(host_root.snapshot.expect("snapshot").state)
    );
    assert_eq!(root_mirror_a.active_sessions, Some(2));
}

#[tokio::test]
async fn rejected_actions_are_echoed_to_the_sender_only_and_change_nothing() {
    let proxy = Proxy::start(CONFIG);
    let (
        Watcher {
            client: a,
            sub: mut sub_a,
            mirror: before,
        },
        Watcher {
            client: b,
            sub: mut sub_b,
            ..
        },
    ) = Watcher::pair(&proxy).await;

    let toggle = StateAction::SessionCustomizationToggled(SessionCustomizationToggledAction {
        id: "no-such-customization".into(),
        enablement: vec![CustomizationEnablement::Session { enabled: false }],
    });
    let handle = a
        .dispatch(DEFAULT_SESSION.into(), toggle.clone())
        .await
        .expect("dispatch");
    let echo = next_action(&mut sub_a).await;
    assert_eq!(echo.action, toggle);
    assert_eq!(echo.origin.expect("origin").client_seq, handle.client_seq);
    let reason = echo.rejection_reason.expect("rejected");
    assert!(reason.contains("no-such-customization"), "{reason}");

    // A server-only action is refused the same way.
    let state_change: StateAction = serde_json::from_value(json!({
        "type": "session/mcpServerStateChanged", "id": "x", "state": {"kind": "ready"}
    }))
    .expect("valid action");
    a.dispatch(DEFAULT_SESSION.into(), state_change)
        .await
        .expect("dispatch");
    let echo = next_action(&mut sub_a).await;
    assert!(echo.rejection_reason.is_some());

    // B saw none of it: its next action is the accepted one that follows.
    a.dispatch(DEFAULT_SESSION.into(), title("after"))
        .await
        .expect("dispatch");
    let next_b = next_action(&mut sub_b).await;
    assert_eq!(next_b.action, title("after"));
    assert!(next_b.rejection_reason.is_none());

    let (after, _) = b
        .subscribe(DEFAULT_SESSION.into())
        .await
        .expect("resubscribe");
    let mut after = session_state(after.snapshot.expect("snapshot").state);
    after.title = before.title.clone();
    assert_eq!(after, before, "rejected actions left no trace");
}

#[tokio::test]
async fn reconnect_replays_exactly_the_missed_actions() {
    let proxy = Proxy::start(CONFIG);
    let a = client(&proxy).await;
    let init = a
        .initialize(
            "returning".into(),
            vec!["1.0.0".into()],
            vec![DEFAULT_SESSION.into()],
        )
        .await
        .expect("init");
    let last_seen = init.server_seq;
    a.shutdown().await;
    drop(a);

    let Watcher {
        client: b,
        sub: mut sub_b,
        ..
    } = Watcher::open_as(&proxy, "b").await;
    for n in 0..3 {
        b.dispatch(DEFAULT_SESSION.into(), title(&format!("t{n}")))
            .await
            .expect("dispatch");
        next_action(&mut sub_b).await;
    }

    let again = client(&proxy).await;
    let mut live = again.attach_subscription(DEFAULT_SESSION).await;
    let result = again
        .reconnect(
            "returning".into(),
            last_seen,
            vec![DEFAULT_SESSION.into(), "ahp-proxy:/gone".into()],
        )
        .await
        .expect("reconnect");
    let ReconnectResult::Replay(replay) = result else {
        panic!("expected a replay, got {result:?}");
    };
    let titles: Vec<StateAction> = replay.actions.iter().map(|e| e.action.clone()).collect();
    assert_eq!(titles, vec![title("t0"), title("t1"), title("t2")]);
    let seqs: Vec<u64> = replay.actions.iter().map(|e| e.server_seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert!(seqs[0] as i64 > last_seen);
    assert_eq!(replay.missing, vec!["ahp-proxy:/gone".to_string()]);

    // The subscription is live again on the new connection.
    b.dispatch(DEFAULT_SESSION.into(), title("live"))
        .await
        .expect("dispatch");
    assert_eq!(next_action(&mut live).await.action, title("live"));
}

#[tokio::test]
async fn reconnect_past_the_replay_log_falls_back_to_snapshots() {
    let proxy = Proxy::start(&format!("{CONFIG}\n[limits]\nreplay_log = 2\n"));
    let a = client(&proxy).await;
    let init = a
        .initialize(
            "late".into(),
            vec!["1.0.0".into()],
            vec![DEFAULT_SESSION.into()],
        )
        .await
        .expect("init");
    a.shutdown().await;

    let Watcher {
        client: b,
        sub: mut sub_b,
        ..
    } = Watcher::open_as(&proxy, "b").await;
    for n in 0..5 {
        b.dispatch(DEFAULT_SESSION.into(), title(&format!("t{n}")))
            .await
            .expect("dispatch");
        next_action(&mut sub_b).await;
    }

    let again = client(&proxy).await;
    let result = again
        .reconnect("late".into(), init.server_seq, vec![DEFAULT_SESSION.into()])
        .await
        .expect("reconnect");
    let ReconnectResult::Snapshot(fresh) = result else {
        panic!("expected snapshots, got {result:?}");
    };
    assert_eq!(fresh.snapshots.len(), 1);
    assert!(fresh.snapshots[0].from_seq >= init.server_seq + 5);
    assert_eq!(session_state(fresh.snapshots[0].state.clone()).title, "t4");
}

#[tokio::test]
async fn a_failed_reconnect_leaves_the_socket_open_for_initialize() {
    let proxy = Proxy::start(CONFIG);
    let client = client(&proxy).await;
    let refused = client
        .reconnect("never-seen".into(), 3, vec![DEFAULT_SESSION.into()])
        .await
        .expect_err("unknown client id");
    match refused {
        ClientError::Rpc(error) => assert_eq!(error.code, -32008),
        other => panic!("expected an RPC error, got {other:?}"),
    }
    let init = client
        .initialize("never-seen".into(), vec!["1.0.0".into()], vec![])
        .await
        .expect("initialize on the same socket");
    assert_eq!(init.protocol_version, "1.0.0");
}

#[tokio::test]
async fn sessions_are_created_listed_and_disposed_per_spec() {
    let proxy = Proxy::start(CONFIG);
    let mut watcher = Raw::connect(&proxy).await;
    watcher.initialize("watcher", &[ROOT_RESOURCE_URI]).await;
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("maker", &[]).await;

    let created = raw
        .request(
            "createSession",
            json!({"channel": "ahp-proxy:/extra", "provider": "ahp-proxy",
            "activeClient": {"clientId": "maker", "tools": []}}),
        )
        .await;
    assert_eq!(
        created["result"],
        json!(null),
        "createSession answers null: {created}"
    );
    assert!(created.as_object().expect("object").contains_key("result"));

    // Root subscribers learn about it: the activeSessions action and root/sessionAdded.
    let mut seen = Vec::new();
    while seen.len() < 2 {
        seen.push(watcher.recv().await);
    }
    let methods: Vec<&str> = seen.iter().filter_map(|f| f["method"].as_str()).collect();
    assert!(methods.contains(&"root/sessionAdded"), "{seen:?}");
    assert!(methods.contains(&"action"), "{seen:?}");
    let added = seen
        .iter()
        .find(|f| f["method"] == "root/sessionAdded")
        .expect("added");
    assert_eq!(added["params"]["summary"]["resource"], "ahp-proxy:/extra");
    assert_eq!(added["params"]["channel"], ROOT_RESOURCE_URI);

    let snapshot = raw
        .request("subscribe", json!({"channel": "ahp-proxy:/extra"}))
        .await;
    assert_eq!(
        snapshot["result"]["snapshot"]["state"]["activeClients"][0]["clientId"],
        "maker"
    );

    let duplicate = raw
        .request("createSession", json!({"channel": "ahp-proxy:/extra"}))
        .await;
    assert_eq!(error_code(&duplicate), -32003);
    let provider = raw
        .request(
            "createSession",
            json!({"channel": "ahp-proxy:/x", "provider": "someone-else"}),
        )
        .await;
    assert_eq!(error_code(&provider), -32002);
    let impostor = raw
        .request("createSession", json!({"channel": "ahp-proxy:/y", "activeClient": {"clientId": "watcher", "tools": []}}))
        .await;
    assert_eq!(error_code(&impostor), -32602);

    let listed = raw
        .request(
            "listSessions",
            json!({"channel": ROOT_RESOURCE_URI, "limit": 1}),
        )
        .await;
    assert_eq!(
        listed["result"]["items"].as_array().expect("items").len(),
        1
    );
    let cursor = listed["result"]["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let page2 = raw
        .request(
            "listSessions",
            json!({"channel": ROOT_RESOURCE_URI, "limit": 1, "cursor": cursor}),
        )
        .await;
    assert_eq!(page2["result"]["items"].as_array().expect("items").len(), 1);
    assert!(page2["result"].get("nextCursor").is_none());
    let bad_cursor = raw
        .request(
            "listSessions",
            json!({"channel": ROOT_RESOURCE_URI, "cursor": "bogus"}),
        )
        .await;
    assert_eq!(error_code(&bad_cursor), -32602);

    let disposed = raw
        .request("disposeSession", json!({"channel": "ahp-proxy:/extra"}))
        .await;
    assert_eq!(disposed["result"], json!(null));
    let mut removed = None;
    while removed.is_none() {
        let frame = watcher.recv().await;
        if frame["method"] == "root/sessionRemoved" {
            removed = Some(frame);
        }
    }
    assert_eq!(
        removed.expect("removed")["params"]["session"],
        "ahp-proxy:/extra"
    );
    let gone = raw
        .request("subscribe", json!({"channel": "ahp-proxy:/extra"}))
        .await;
    assert_eq!(error_code(&gone), -32001);
    let again = raw
        .request("disposeSession", json!({"channel": "ahp-proxy:/extra"}))
        .await;
    assert_eq!(error_code(&again), -32001);
}

#[tokio::test]
async fn the_default_session_cannot_be_disposed() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("disposer", &[]).await;
    let refused = raw
        .request("disposeSession", json!({"channel": DEFAULT_SESSION}))
        .await;
    assert_eq!(error_code(&refused), -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot be disposed")),
        "{refused}"
    );
    // Still there for everyone, harness chat included.
    let mut late = Raw::connect(&proxy).await;
    let init = late.initialize("late", &[DEFAULT_SESSION]).await;
    let session = &init["snapshots"][0]["state"];
    assert_eq!(session["defaultChat"], "ahp-chat:/harness", "{init}");
}

/// A configured provider, with every character a URI scheme allows besides letters.
const PROVIDER_CONFIG: &str = "[agent]\nprovider = \"my.agent+2-x\"\n";

/// The name the host published its default session under before it took the provider's
/// scheme; still accepted from clients.
const OLD_SESSION: &str = "ahp-session:/default";

/// `ahp-chat://default/<base64url(session)>`: the default chat VS Code derives from a
/// session's URI (`buildDefaultChatUri`).
fn derived_chat(session: &str) -> String {
    use base64::Engine as _;
    format!(
        "ahp-chat://default/{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(session)
    )
}

/// VS Code 1.139 takes a listed session's provider from its URI's scheme
/// (`_makeEntryFromMetadata`) and drops the session when that is not the agent's: the
/// host lists its default session as `<provider>:/default`, by default and when configured.
#[tokio::test]
async fn the_listed_default_session_is_named_by_the_agents_provider() {
    for (config, provider) in [(CONFIG, "ahp-proxy"), (PROVIDER_CONFIG, "my.agent+2-x")] {
        let proxy = Proxy::start(config);
        let client = client(&proxy).await;
        let init = client
            .initialize(
                "lister".into(),
                vec!["1.0.0".into()],
                vec![ROOT_RESOURCE_URI.into()],
            )
            .await
            .expect("initialize");
        let root = root_state(init.snapshots[0].state.clone());
        assert_eq!(root.agents[0].provider, provider);
        let sessions: ListSessionsResult = client
            .request("listSessions", json!({"channel": ROOT_RESOURCE_URI}))
            .await
            .expect("listSessions");
        let listed = &sessions.items[0];
        assert_eq!(listed.resource, format!("{provider}:/default"));
        let scheme = listed.resource.split_once(':').map(|(scheme, _)| scheme);
        assert_eq!(scheme, Some(root.agents[0].provider.as_str()), "{listed:?}");
        assert_eq!(listed.provider, provider);
        // Subscribed by that name, it is that session.
        let (result, _sub) = client
            .subscribe(listed.resource.clone())
            .await
            .expect("subscribe");
        let snapshot = result.snapshot.expect("session snapshot");
        assert_eq!(snapshot.resource, listed.resource);
        assert_eq!(session_state(snapshot.state).provider, provider);
        client.shutdown().await;
    }
}

/// A client that still names the default session `ahp-session:/default` reaches it: it
/// subscribes, acts and hears back under that name while others hear the published one;
/// the session can no more be disposed, nor created again, under that name.
#[tokio::test]
async fn the_old_name_of_the_default_session_still_works() {
    let proxy = Proxy::start(PROVIDER_CONFIG);
    let published = "my.agent+2-x:/default";
    let mut old = Raw::connect(&proxy).await;
    let init = old.initialize("old", &[OLD_SESSION]).await;
    assert_eq!(init["snapshots"][0]["resource"], OLD_SESSION, "{init}");
    assert_eq!(
        init["snapshots"][0]["state"]["provider"], "my.agent+2-x",
        "{init}"
    );
    let mut new = Raw::connect(&proxy).await;
    new.initialize("new", &[published]).await;

    old.notify(
        "dispatchAction",
        json!({"channel": OLD_SESSION, "clientSeq": 1,
               "action": {"type": "session/titleChanged", "title": "Renamed"}}),
    )
    .await;
    for (raw, name) in [(&mut old, OLD_SESSION), (&mut new, published)] {
        let action = raw
            .notification(|f| {
                f["method"] == "action" && f["params"]["action"]["type"] == "session/titleChanged"
            })
            .await;
        assert_eq!(action["params"]["channel"], name, "{action}");
        assert_eq!(action["params"]["action"]["title"], "Renamed", "{action}");
        assert!(
            action["params"].get("rejectionReason").is_none(),
            "{action}"
        );
    }

    let refused = old
        .request("disposeSession", json!({"channel": OLD_SESSION}))
        .await;
    assert_eq!(error_code(&refused), -32602, "{refused}");
    let duplicate = old
        .request("createSession", json!({"channel": OLD_SESSION}))
        .await;
    assert_eq!(error_code(&duplicate), -32003, "{duplicate}");
    let listed = old
        .request("listSessions", json!({"channel": ROOT_RESOURCE_URI}))
        .await;
    let names: Vec<&str> = listed["result"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["resource"].as_str())
        .collect();
    assert_eq!(names, [published], "{listed}");
    // A session that does not exist, by either scheme, is no session; another URI no channel.
    for (uri, code) in [
        ("ahp-session:/nowhere", -32001),
        ("my.agent+2-x:/nowhere", -32001),
        ("other:/nowhere", -32008),
    ] {
        let missing = old.request("subscribe", json!({"channel": uri})).await;
        assert_eq!(error_code(&missing), code, "{missing}");
    }
}

/// The default chat VS Code derives from the session's URI is the harness's chat, whichever
/// name of the session it derives it from.
#[tokio::test]
async fn the_derived_default_chat_resolves_under_either_session_name() {
    let proxy = Proxy::start(PROVIDER_CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("chats", &[]).await;
    for session in ["my.agent+2-x:/default", OLD_SESSION] {
        let chat = derived_chat(session);
        let subscribed = raw.request("subscribe", json!({"channel": chat})).await;
        let snapshot = &subscribed["result"]["snapshot"];
        assert_eq!(snapshot["resource"], chat.as_str(), "{subscribed}");
        assert!(snapshot["state"]["turns"].is_array(), "{subscribed}");
    }
    // A session that does not exist has no derived chat.
    let nowhere = raw
        .request(
            "subscribe",
            json!({"channel": derived_chat("ahp-proxy:/default")}),
        )
        .await;
    assert!(nowhere.get("error").is_some(), "{nowhere}");
}

/// What VS Code 1.139 (code-server 4.139.1) sent on connecting: its version list, several
/// `root/configChanged` all with `clientSeq` 0, and a notification this host does not know.
/// The first config change is refused (no root config), the others as repeats; the unknown
/// notification is ignored; the connection serves on.
#[tokio::test]
async fn what_vs_code_1_139_sends_on_connecting_is_tolerated() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    let init = raw
        .request(
            "initialize",
            json!({"channel": ROOT_RESOURCE_URI, "clientId": "code-server",
                   "protocolVersions": ["0.9.0", "0.7.0", "0.6.0", "0.5.2", "0.5.1"],
                   "initialSubscriptions": [ROOT_RESOURCE_URI]}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], "0.9.0", "{init}");
    for _ in 0..3 {
        raw.notify(
            "dispatchAction",
            json!({"channel": ROOT_RESOURCE_URI, "clientSeq": 0,
                   "action": {"type": "root/configChanged", "config": {"telemetryLevel": "off"}}}),
        )
        .await;
    }
    let mut reasons = Vec::new();
    while reasons.len() < 3 {
        let echo = raw
            .notification(|f| f["method"] == "action" && f["params"]["origin"]["clientSeq"] == 0)
            .await;
        let reason = echo["params"]["rejectionReason"]
            .as_str()
            .unwrap_or_default();
        reasons.push(reason.to_string());
    }
    assert!(reasons[0].contains("no root configuration"), "{reasons:?}");
    for repeat in &reasons[1..] {
        assert!(repeat.contains("clientSeq 0 is not greater"), "{reasons:?}");
    }
    raw.notify(
        "setClientManagedSettingsPermissions",
        json!({"channel": ROOT_RESOURCE_URI}),
    )
    .await;
    let listed = raw
        .request("listSessions", json!({"channel": ROOT_RESOURCE_URI}))
        .await;
    assert_eq!(
        listed["result"]["items"][0]["resource"], DEFAULT_SESSION,
        "{listed}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_cannot_grow_the_hosts_memory_without_limit() {
    let proxy = Proxy::start(&format!(
        "{CONFIG}\n[limits]\nreplay_log_bytes = 4194304\nmax_sessions = 20\n"
    ));
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("hog", &[]).await;
    raw.ping().await;
    let before = rss_kib(proxy.pid());
    // 32 titles of 1 MiB: refused (at most 1 KiB), each echoed to the sender only.
    for seq in 0..32 {
        raw.notify(
            "dispatchAction",
            json!({"channel": DEFAULT_SESSION, "clientSeq": seq, "action":
                {"type": "session/titleChanged", "title": "t".repeat(1024 * 1024)}}),
        )
        .await;
        let echo = raw.recv().await;
        let reason = echo["params"]["rejectionReason"]
            .as_str()
            .unwrap_or_default();
        assert!(reason.contains("title of 1048576 bytes"), "{reason}");
    }
    // 100 legal actions of 200 KB each (an active client with a long tool description):
    // applied, but the replay log keeps at most 4 MiB of them.
    for seq in 0..100 {
        raw.notify(
            "dispatchAction",
            json!({"channel": DEFAULT_SESSION, "clientSeq": 100 + seq, "action":
                {"type": "session/activeClientSet", "activeClient": {"clientId": "hog",
                 "tools": [{"name": "t", "description": format!("{seq}{}", "d".repeat(200_000)),
                            "inputSchema": {"type": "object"}}]}}}),
        )
        .await;
    }
    // 500 sessions asked for: 19 made (20 with the default one), the rest refused.
    let mut made = 0;
    for n in 0..500 {
        let answer = raw
            .request(
                "createSession",
                json!({"channel": format!("ahp-proxy:/hog-{n}")}),
            )
            .await;
        if answer.get("result").is_some() {
            made += 1;
        } else {
            assert_eq!(error_code(&answer), -32603, "{answer}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("at most 20 sessions"), "{message}");
        }
    }
    assert_eq!(made, 19);
    raw.ping().await;
    let after = rss_kib(proxy.pid());
    // 32 MiB of titles, 20 MB of tool descriptions and 500 sessions went in; what stays is
    // the last active-client record, 4 MiB of replay log and 19 sessions.
    eprintln!("RSS {before} KiB -> {after} KiB");
    assert!(
        after < before + 24 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    // A reconnect from before the attack gets snapshots: the gap no longer fits the log.
    let mut back = Raw::connect(&proxy).await;
    let resumed = back
        .request(
            "reconnect",
            json!({"channel": "ahp-root://", "clientId": "hog", "lastSeenServerSeq": 1,
                   "subscriptions": [DEFAULT_SESSION]}),
        )
        .await;
    assert!(resumed["result"]["snapshots"].is_array(), "{resumed}");
}

// ─── bad input, one test each ───────────────────────────────────────────────

#[tokio::test]
async fn text_that_is_not_json_gets_a_parse_error_and_the_connection_lives_on() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.send_text("{this is not json").await;
    let response = raw.response().await;
    assert_eq!(error_code(&response), -32700);
    assert_eq!(response["id"], json!(null));
    raw.ping().await;
}

#[tokio::test]
async fn client_text_cannot_forge_log_lines_or_flood_the_log() {
    let proxy = Proxy::start_with_text_log(CONFIG);
    let forged_line = "2026-01-01T00:00:00.000000Z  INFO ahp_proxy: forged";
    let client_id = format!("evil\n{forged_line}\r\u{1b}[2J\u{1b}]0;title\u{7}");
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize(&client_id, &[DEFAULT_SESSION]).await;
    raw.notify(
        "dispatchAction",
        json!({"channel": format!("ahp-proxy:/x\n{forged_line}"), "clientSeq": 1,
               "action": {"type": "session/titleChanged", "title": "t"}}),
    )
    .await;
    raw.notify(&format!("bogus\n{forged_line}"), json!({}))
        .await;
    // A 1 MiB clientId is refused at initialize, and not logged whole.
    let mut big = Raw::connect(&proxy).await;
    let refused = big
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"],
                   "clientId": "x".repeat(1024 * 1024)}),
        )
        .await;
    assert_eq!(error_code(&refused), -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("longer than 256")),
        "{refused}"
    );
    raw.ping().await;
    big.ping().await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while proxy.log_count("unknown notification ignored") == 0 {
        assert!(tokio::time::Instant::now() < deadline, "{}", proxy.logs());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let logs = proxy.logs();
    assert!(logs.contains("client=evil\\n2026-01-01"), "{logs}");
    for line in logs.lines() {
        assert!(!line.starts_with("2026-01-01"), "forged line: {line:?}");
        assert!(
            !line.contains('\u{1b}') && !line.contains('\r') && !line.contains('\u{7}'),
            "raw control character: {line:?}"
        );
        assert!(line.len() < 4096, "a line of {} bytes", line.len());
    }
}

#[tokio::test]
async fn binary_frames_get_an_invalid_request_error() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.send_binary(
        br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"channel":"ahp-root://"}}"#.to_vec(),
    )
    .await;
    let response = raw.response().await;
    assert_eq!(error_code(&response), -32600);
    assert!(response["error"]["message"]
        .as_str()
        .expect("message")
        .contains("text frame"));
}

#[tokio::test]
async fn unknown_methods_get_method_not_found() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("u", &[]).await;
    let response = raw
        .request("frobnicate", json!({"channel": ROOT_RESOURCE_URI}))
        .await;
    assert_eq!(error_code(&response), -32601);
    let unsupported = raw
        .request("createTerminal", json!({"channel": "ahp-terminal:/t"}))
        .await;
    assert_eq!(error_code(&unsupported), -32601);
}

#[tokio::test]
async fn bad_params_get_invalid_params() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    let missing = raw
        .request("initialize", json!({"channel": ROOT_RESOURCE_URI}))
        .await;
    assert_eq!(error_code(&missing), -32602);
    raw.initialize("p", &[]).await;
    let wrong_type = raw.request("subscribe", json!({"channel": 5})).await;
    assert_eq!(error_code(&wrong_type), -32602);
    raw.send_text(r#"{"jsonrpc":"2.0","id":99,"method":"subscribe","params":[1,2]}"#)
        .await;
    let response = raw.response().await;
    assert_eq!(response["id"], json!(99));
    assert_eq!(error_code(&response), -32602);
    let negative = raw
        .request(
            "listSessions",
            json!({"channel": ROOT_RESOURCE_URI, "limit": 0}),
        )
        .await;
    assert_eq!(error_code(&negative), -32602);
}

#[tokio::test]
async fn requests_before_initialize_are_refused_but_ping_works() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.ping().await;
    let early = raw
        .request("subscribe", json!({"channel": DEFAULT_SESSION}))
        .await;
    assert_eq!(error_code(&early), -32601);
    assert!(early["error"]["message"]
        .as_str()
        .expect("message")
        .contains("initialize"));
    raw.initialize("late-starter", &[]).await;
    let twice = raw
        .request(
            "initialize",
            json!({"channel": ROOT_RESOURCE_URI, "protocolVersions": ["1.0.0"], "clientId": "x"}),
        )
        .await;
    assert_eq!(error_code(&twice), -32601);
}

#[tokio::test]
async fn string_ids_and_non_jsonrpc_objects_get_invalid_request() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.send_text(
        r#"{"jsonrpc":"2.0","id":"seven","method":"ping","params":{"channel":"ahp-root://"}}"#,
    )
    .await;
    let response = raw.response().await;
    assert_eq!(error_code(&response), -32600);
    assert_eq!(response["id"], "seven");
    raw.send_text(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .await;
    assert_eq!(error_code(&raw.response().await), -32600);
    raw.send_text(r#"{"id":2,"method":"ping"}"#).await;
    assert_eq!(error_code(&raw.response().await), -32600);
}

#[tokio::test]
async fn frames_over_the_size_limit_close_that_connection_only() {
    let proxy = Proxy::start(&format!("{CONFIG}\n[limits]\nmax_frame_bytes = 4096\n"));
    let mut bystander = Raw::connect(&proxy).await;
    bystander.initialize("bystander", &[]).await;
    let mut raw = Raw::connect(&proxy).await;
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"channel":"ahp-root://","_meta":{{"pad":"{}"}}}}}}"#,
        "x".repeat(10_000)
    );
    raw.send_text(huge).await;
    match raw.ending().await {
        Ending::Closed(Some(frame)) => assert_eq!(frame.code, CloseCode::Size),
        other => panic!("expected a 1009 close, got {other:?}"),
    }
    bystander.ping().await;
}

#[tokio::test]
async fn dispatch_on_an_unknown_channel_is_ignored() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("d", &[DEFAULT_SESSION]).await;
    raw.notify(
        "dispatchAction",
        json!({"channel": "ahp-proxy:/nowhere", "clientSeq": 1,
        "action": {"type": "session/titleChanged", "title": "x"}}),
    )
    .await;
    raw.notify(
        "dispatchAction",
        json!({"channel": DEFAULT_SESSION, "clientSeq": 2,
        "action": {"type": "session/titleChanged", "title": "y"}}),
    )
    .await;
    let frame = raw.recv().await;
    assert_eq!(frame["method"], "action");
    assert_eq!(
        frame["params"]["origin"]["clientSeq"], 2,
        "the first dispatch produced nothing"
    );
}

#[tokio::test]
async fn a_stalled_client_is_disconnected_and_the_others_get_everything() {
    let proxy = Proxy::start(&format!("{CONFIG}\n[limits]\nclient_queue = 8\n"));
    let mut stalled = Raw::connect(&proxy).await;
    stalled.initialize("stalled", &[DEFAULT_SESSION]).await;
    let busy = initialized_client(&proxy, "busy").await;
    let (_, mut sub) = busy
        .subscribe(DEFAULT_SESSION.into())
        .await
        .expect("subscribe");

    // Far more than the socket buffers and the 8-frame queue can hold while nobody reads.
    let total = 400;
    let mut last = 0;
    for n in 0..total {
        busy.dispatch(
            DEFAULT_SESSION.into(),
            padded_action("busy", &n.to_string(), 64 * 1024),
        )
        .await
        .expect("dispatch");
        let envelope = next_action(&mut sub).await;
        assert!(envelope.server_seq > last);
        last = envelope.server_seq;
    }

    let (received, ending) = stalled.drain_until_end().await;
    assert!(
        received < total,
        "the stalled client was cut off ({received} of {total} frames)"
    );
    if let Ending::Closed(Some(frame)) = ending {
        assert_eq!(frame.code, CloseCode::Policy);
    }
    busy.ping().await.expect("the host is still responsive");
    let logs = proxy.logs();
    assert!(logs.contains("outbound queue full"), "{logs}");
}

#[tokio::test]
async fn sigterm_closes_clients_and_exits_zero() {
    let proxy = Proxy::start(CONFIG);
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("t", &[]).await;
    let status = proxy.terminate();
    assert!(status.success(), "exit status {status:?}");
    match raw.ending().await {
        Ending::Closed(Some(frame)) => assert_eq!(frame.code, CloseCode::Away),
        other => panic!("expected a 1001 close, got {other:?}"),
    }
}

#[tokio::test]
async fn leaving_a_session_removes_the_client_from_active_clients() {
    let proxy = Proxy::start(CONFIG);
    let a = initialized_client(&proxy, "a").await;
    let b = initialized_client(&proxy, "b").await;
    let (_, mut watch) = b.subscribe(DEFAULT_SESSION.into()).await.expect("sub b");
    let (_, _sub) = a.subscribe(DEFAULT_SESSION.into()).await.expect("sub a");
    let set: StateAction = serde_json::from_value(json!({
        "type": "session/activeClientSet",
        "activeClient": {"clientId": "a", "displayName": "A", "tools": []}
    }))
    .expect("valid");
    a.dispatch(DEFAULT_SESSION.into(), set)
        .await
        .expect("dispatch");
    let added = next_action(&mut watch).await;
    assert!(added.rejection_reason.is_none());
    a.unsubscribe(DEFAULT_SESSION.into())
        .await
        .expect("unsubscribe");
    let removed = next_action(&mut watch).await;
    assert!(removed.origin.is_none(), "host-originated");
    match removed.action {
        StateAction::SessionActiveClientRemoved(action) => assert_eq!(action.client_id, "a"),
        other => panic!("expected activeClientRemoved, got {other:?}"),
    }
}
