//! AHP as the spec (ahp-types 1.0.0) says, where an audit found the host off: the session
//! summary's status over a harness turn, tool call errors as objects, `completions` on a
//! chat, strictly increasing `clientSeq`, `resourceWrite` preconditions and folder deletes,
//! icons, and what a client that negotiated 0.9.0 is sent. Real binary, official client or
//! raw frames where the official client cannot send what is tested.

mod common;

use ahp_types::state::ToolCallState;
use base64::Engine as _;
use common::ide::{call_meanwhile, harness_and_ide, running, CHAT, SESSION};
use common::{announced_status, error_code, server, Proxy, Raw, ScratchDir, Watcher};
use serde_json::{json, Value};

const ROOT: &str = "ahp-root://";
const IDLE: u64 = 1;
const IN_PROGRESS: u64 = 8;
/// `tools/call` params of the IDE's tool, without arguments.
const NO_ARGUMENTS: &str = r#"{"name":"runUnitTests","arguments":{}}"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_session_summary_announces_the_status_listed_while_a_harness_turn_runs_and_after() {
    let (proxy, mut harness, mut ide) = harness_and_ide(&server("notes", "notes", &[])).await;
    let mut observer = Raw::connect(&proxy).await;
    observer.initialize("observer", &[ROOT]).await;

    let (exchange, ()) = call_meanwhile(&mut harness, NO_ARGUMENTS, async {
        let (turn, state) = ide.until_call(|s| running(s).is_some()).await;
        let (call, _) = running(&state).unwrap();
        // The turn runs: announced as in progress, listed so, and the session says so.
        observer
            .notification(|n| announced_status(n) == Some(IN_PROGRESS))
            .await;
        assert_eq!(observer.listed_status().await, IN_PROGRESS);
        assert_eq!(observer.snapshot_status().await, IN_PROGRESS);
        ide.dispatch(
            CHAT,
            json!({"type": "chat/toolCallComplete", "turnId": turn,
                "toolCallId": call, "result": {"success": true, "pastTenseMessage": "Ran"}}),
        )
        .await;
    })
    .await;
    assert!(
        exchange.response().contains(r#""isError":false"#),
        "{exchange:?}"
    );
    // The turn ends: announced idle, listed so, and the session says so.
    observer
        .notification(|n| announced_status(n) == Some(IDLE))
        .await;
    assert_eq!(observer.listed_status().await, IDLE);
    assert_eq!(observer.snapshot_status().await, IDLE);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_tool_call_carries_its_error_as_an_object_with_a_message() {
    let (_proxy, mut harness, mut ide) = harness_and_ide(&server("notes", "notes", &[])).await;
    // The IDE goes away mid-call: the call fails, with an error saying why.
    let (exchange, ()) = call_meanwhile(&mut harness, NO_ARGUMENTS, async {
        ide.until_call(|s| running(s).is_some()).await;
        ide.dispatch(
            SESSION,
            json!({"type": "session/activeClientRemoved", "clientId": "ide-1"}),
        )
        .await;
    })
    .await;
    assert!(exchange.response().contains("went away"), "{exchange:?}");
    let (_, failed) = ide
        .until_call(|s| matches!(s, ToolCallState::Completed(c) if !c.success))
        .await;
    let ToolCallState::Completed(failed) = failed else {
        unreachable!()
    };
    let error = failed.error.expect("a failed call says why");
    assert!(error.is_object(), "error must be an object: {error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("went away")),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn completions_on_the_harness_chat_or_its_session_offer_nothing_rather_than_an_error() {
    let proxy = Proxy::start("");
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("typist", &[]).await;
    let params = |channel: &str| json!({"channel": channel, "kind": "userMessage", "text": "@no", "offset": 3});
    let answer = raw.request("completions", params(CHAT)).await;
    assert_eq!(answer["result"], json!({"items": []}), "{answer}");
    // Aimed at the session (as VS Code aims them): the same.
    let answer = raw.request("completions", params(SESSION)).await;
    assert_eq!(answer["result"], json!({"items": []}), "{answer}");
    // A chat that does not exist is not found.
    let missing = raw
        .request("completions", params("ahp-chat:/nowhere"))
        .await;
    assert_eq!(error_code(&missing), -32008, "{missing}");
}

/// A raw `dispatchAction` of a title change with `clientSeq` `seq`.
async fn retitle(raw: &mut Raw, seq: i64, title: &str) {
    raw.notify(
        "dispatchAction",
        json!({"channel": SESSION, "clientSeq": seq,
               "action": {"type": "session/titleChanged", "title": title}}),
    )
    .await;
}

/// The next `action` notification on the default session.
async fn next_session_action(raw: &mut Raw) -> Value {
    raw.notification(|n| n["method"] == "action" && n["params"]["channel"] == SESSION)
        .await["params"]
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_sequence_number_must_increase_on_its_connection() {
    let proxy = Proxy::start("");
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("counter", &[SESSION]).await;

    retitle(&mut raw, 5, "five").await;
    let accepted = next_session_action(&mut raw).await;
    assert_eq!(accepted["origin"]["clientSeq"], 5, "{accepted}");
    assert!(accepted.get("rejectionReason").is_none(), "{accepted}");
    // The same number again, and a lower one: refused, nothing applied.
    for (seq, title) in [(5, "again"), (3, "lower")] {
        retitle(&mut raw, seq, title).await;
        let refused = next_session_action(&mut raw).await;
        assert_eq!(refused["origin"]["clientSeq"], seq, "{refused}");
        let reason = refused["rejectionReason"].as_str().unwrap_or_default();
        assert!(reason.contains("clientSeq"), "{refused}");
    }
    retitle(&mut raw, 6, "six").await;
    let accepted = next_session_action(&mut raw).await;
    assert!(accepted.get("rejectionReason").is_none(), "{accepted}");
    let snapshot = raw.request("subscribe", json!({"channel": SESSION})).await;
    assert_eq!(snapshot["result"]["snapshot"]["state"]["title"], "six");

    // A new connection starts counting afresh (the official client does, on reconnect).
    let mut again = Raw::connect(&proxy).await;
    again.initialize("counter", &[SESSION]).await;
    retitle(&mut again, 1, "one").await;
    let accepted = next_session_action(&mut again).await;
    assert!(accepted.get("rejectionReason").is_none(), "{accepted}");
}

#[tokio::test(flavor = "multi_thread")]
async fn folders_are_deleted_only_when_asked_and_writes_honour_if_match() {
    let dir = ScratchDir::new("preconditions");
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    let proxy = Proxy::start(&format!(
        "[[directories]]\npath = {:?}\ncontents = \"prompt\"\nwritable = true\n",
        prompts.display().to_string()
    ));
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("writer", &[]).await;
    let uri = |name: &str| ahp_proxy::discovery::uri::file_uri(&prompts.join(name));
    let write = |name: &str, data: &str, if_match: Option<&str>| {
        let mut params =
            json!({"channel": ROOT, "uri": uri(name), "data": data, "encoding": "utf-8"});
        if let Some(tag) = if_match {
            params["ifMatch"] = json!(tag);
        }
        params
    };
    // A folder with something in it goes only with `recursive`.
    let ok = raw
        .request("resourceWrite", write("sub/b.prompt.md", "b", None))
        .await;
    assert!(ok.get("result").is_some(), "{ok}");
    let refused = raw
        .request(
            "resourceDelete",
            json!({"channel": ROOT, "uri": uri("sub")}),
        )
        .await;
    assert_eq!(error_code(&refused), -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not empty") && message.contains("recursive"),
        "{refused}"
    );
    assert!(prompts.join("sub/b.prompt.md").exists());
    let ok = raw
        .request(
            "resourceDelete",
            json!({"channel": ROOT, "uri": uri("sub"), "recursive": true}),
        )
        .await;
    assert!(ok.get("result").is_some(), "{ok}");
    assert!(!prompts.join("sub").exists());

    let ok = raw
        .request("resourceWrite", write("a.prompt.md", "one", None))
        .await;
    assert!(ok.get("result").is_some(), "{ok}");
    let resolved = raw
        .request(
            "resourceResolve",
            json!({"channel": ROOT, "uri": uri("a.prompt.md")}),
        )
        .await;
    let etag = resolved["result"]["etag"]
        .as_str()
        .unwrap_or_else(|| panic!("a file has an etag: {resolved}"))
        .to_string();
    // The current etag: written.
    let ok = raw
        .request("resourceWrite", write("a.prompt.md", "two", Some(&etag)))
        .await;
    assert!(ok.get("result").is_some(), "{ok}");
    assert_eq!(
        std::fs::read_to_string(prompts.join("a.prompt.md")).unwrap(),
        "two"
    );
    // A stale one: a conflict, the file untouched.
    let stale = raw
        .request("resourceWrite", write("a.prompt.md", "three", Some(&etag)))
        .await;
    assert_eq!(error_code(&stale), -32011, "{stale}");
    assert_eq!(
        std::fs::read_to_string(prompts.join("a.prompt.md")).unwrap(),
        "two"
    );
}

/// The customization named `name` (top level or child) in a session state, as JSON.
fn customization(state: &Value, name: &str) -> Value {
    state["customizations"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| std::iter::once(c).chain(c["children"].as_array().into_iter().flatten()))
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {state}"))
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_manifest_icons_and_server_icons_reach_the_customizations() {
    let dir = ScratchDir::new("icons");
    let plugins = dir.path().join("plugins");
    let png = b"\x89PNG\r\n\x1a\nnot really an image";
    let open = plugins.join("pictured");
    std::fs::create_dir_all(open.join(".plugin")).unwrap();
    std::fs::create_dir_all(open.join("assets")).unwrap();
    std::fs::write(open.join("assets/icon.png"), png).unwrap();
    std::fs::write(
        open.join(".plugin/plugin.json"),
        r#"{"name": "pictured", "icon": "assets/icon.png"}"#,
    )
    .unwrap();
    let cursor = plugins.join("branded");
    std::fs::create_dir_all(cursor.join(".cursor-plugin")).unwrap();
    std::fs::write(
        cursor.join(".cursor-plugin/plugin.json"),
        r#"{"name": "branded", "logo": "https://example.com/logo.svg"}"#,
    )
    .unwrap();
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\n{}",
        plugins.display().to_string(),
        server("notes", "notes", &[])
    ));
    let mut w = Watcher::open(&proxy).await;
    w.until("notes", "ready", &mut Vec::new()).await;
    let state = serde_json::to_value(&w.mirror).unwrap();

    let pictured = customization(&state, "pictured");
    let expected = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(png)
    );
    assert_eq!(pictured["icons"][0]["src"], expected, "{pictured}");
    assert_eq!(pictured["icons"][0]["contentType"], "image/png");
    let branded = customization(&state, "branded");
    assert_eq!(
        branded["icons"],
        json!([{"src": "https://example.com/logo.svg"}]),
        "{branded}"
    );
    // The notes example server names an icon in its serverInfo.
    let notes = customization(&state, "notes");
    let icon = &notes["icons"][0];
    assert!(
        icon["src"]
            .as_str()
            .is_some_and(|s| s.starts_with("data:image/svg+xml;base64,")),
        "{notes}"
    );
    assert_eq!(icon["contentType"], "image/svg+xml", "{notes}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_negotiated_0_9_0_never_gets_fields_introduced_in_1_0_0() {
    let proxy = Proxy::start("");
    let mut old = Raw::connect(&proxy).await;
    let init = old
        .request(
            "initialize",
            json!({"channel": ROOT, "protocolVersions": ["0.9.0"], "clientId": "vscode",
                   "initialSubscriptions": [ROOT, SESSION]}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], "0.9.0", "{init}");
    let mut new = Raw::connect(&proxy).await;
    new.initialize("current", &[ROOT, SESSION]).await;

    // `SessionSummary.defaultChat` came with 1.0.0.
    let listed = |list: &Value| {
        list["result"]["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["resource"] == SESSION))
            .cloned()
            .unwrap_or_else(|| panic!("no default session in {list}"))
    };
    let current = listed(&new.request("listSessions", json!({"channel": ROOT})).await);
    assert_eq!(current["defaultChat"], CHAT, "{current}");
    let legacy = listed(&old.request("listSessions", json!({"channel": ROOT})).await);
    assert!(legacy.get("defaultChat").is_none(), "{legacy}");
    assert_eq!(legacy["title"], current["title"]);

    // So is its change in `root/sessionSummaryChanged`: the default chat is cleared and set
    // again by the current client.
    let changed = |n: &Value| {
        n["method"] == "root/sessionSummaryChanged" && n["params"]["session"] == SESSION
    };
    for (seq, chat) in [(1, Value::Null), (2, json!(CHAT))] {
        new.notify(
            "dispatchAction",
            json!({"channel": SESSION, "clientSeq": seq,
                   "action": {"type": "session/defaultChatChanged", "defaultChat": chat}}),
        )
        .await;
        let seen = new.notification(changed).await;
        let sent = old.notification(changed).await;
        if !chat.is_null() {
            assert_eq!(seen["params"]["changes"]["defaultChat"], CHAT, "{seen}");
        }
        assert!(
            sent["params"]["changes"].get("defaultChat").is_none(),
            "{sent}"
        );
        assert!(sent["params"]["changes"].get("chats").is_none(), "{sent}");
    }
    // `chat/isReadChanged` is not in a 0.9.0 copy of the protocol (VS Code's
    // src/vs/platform/agentHost/common/state/protocol/version/registry.ts at 0.9.0 has no
    // such action): the old client is not sent it, and is sent what follows it.
    let chat = old.request("subscribe", json!({"channel": CHAT})).await;
    assert!(chat["result"]["snapshot"].is_object(), "{chat}");
    new.request("subscribe", json!({"channel": CHAT})).await;
    new.notify(
        "dispatchAction",
        json!({"channel": CHAT, "clientSeq": 3, "action": {"type": "chat/isReadChanged", "isRead": true}}),
    )
    .await;
    let read = |n: &Value| {
        n["method"] == "action" && n["params"]["action"]["type"] == "chat/isReadChanged"
    };
    let marked = new.notification(read).await;
    assert!(
        marked["params"].get("rejectionReason").is_none(),
        "{marked}"
    );
    retitle(&mut new, 4, "after the read mark").await;
    let next = old
        .notification(|n| {
            read(n)
                || (n["method"] == "action"
                    && n["params"]["action"]["type"] == "session/titleChanged")
        })
        .await;
    assert_eq!(
        next["params"]["action"]["type"], "session/titleChanged",
        "{next}"
    );

    // The session itself (its `defaultChat` is 0.9.0) still reaches the old client whole.
    let snapshot = old.request("subscribe", json!({"channel": SESSION})).await;
    assert_eq!(
        snapshot["result"]["snapshot"]["state"]["defaultChat"], CHAT,
        "{snapshot}"
    );
}
