//! The other direction: an AHP client (an IDE) publishes a tool, the MCP-only harness lists
//! and calls it through `serve --stdio`, and the client runs it — shown in the harness chat
//! with the client as contributor, completed by the client, its result the harness's answer;
//! its refusal, its absence or the harness giving up end the call cleanly on both sides.

mod common;

use ahp_types::actions::StateAction;
use ahp_types::state::{ResponsePart, SnapshotState, ToolCallState};
use common::ide::{call_meanwhile, harness_and_ide, listed, running, CHAT, SESSION};
use common::{initialized_client, server, PATIENCE};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread")]
async fn a_harness_calls_an_ide_tool_and_gets_what_the_ide_completed() {
    let (proxy, mut harness, mut ide) = harness_and_ide(&server("notes", "notes", &[])).await;

    // Listed next to the servers' tools, under its own name, and announced.
    let listed = listed(&mut harness, "runUnitTests").await;
    let list: Value = serde_json::from_str(&listed).unwrap();
    let tool = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "runUnitTests")
        .unwrap()
        .clone();
    assert_eq!(tool["title"], "Run unit tests");
    assert!(harness
        .received
        .iter()
        .any(|m| m.contains("notifications/tools/list_changed")));

    // The harness calls it; the IDE sees the call, with itself as contributor, and runs it.
    let (exchange, call_id) = call_meanwhile(
        &mut harness,
        r#"{"name":"runUnitTests","arguments":{"filter":"parser"},"_meta":{"progressToken":"p1"}}"#,
        async {
            let (turn, state) = ide.until_call(|s| running(s).is_some()).await;
            let (call_id, contributor) = running(&state).unwrap();
            assert_eq!(contributor, json!({"kind": "client", "clientId": "ide-1"}));
            ide.dispatch(CHAT, json!({"type": "chat/toolCallContentChanged", "turnId": turn,
                "toolCallId": call_id, "content": [{"type": "text", "text": "3 of 12"}]}))
                .await;
            ide.dispatch(CHAT, json!({"type": "chat/toolCallComplete", "turnId": turn, "toolCallId": call_id,
                "result": {"success": true, "pastTenseMessage": "Ran the tests",
                           "content": [{"type": "text", "text": "12 passed"},
                                       {"type": "embeddedResource", "data": "iVBORw0KGgo=", "contentType": "image/png"}]}}))
                .await;
            call_id
        }
    )
    .await;
    let answer: Value = serde_json::from_str(exchange.response()).unwrap();
    assert_eq!(
        answer["result"]["content"][0],
        json!({"type": "text", "text": "12 passed"})
    );
    assert_eq!(
        answer["result"]["content"][1],
        json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
    );
    assert_eq!(answer["result"]["isError"], false);
    // The content change reached the harness as progress, before the answer.
    let received: Vec<&str> = exchange.received().collect();
    assert!(
        received[0].contains(r#""progressToken":"p1","progress":1,"message":"3 of 12""#),
        "{received:?}"
    );
    let (_, done) = ide
        .until_call(|s| matches!(s, ToolCallState::Completed(_)))
        .await;
    assert!(matches!(done, ToolCallState::Completed(c) if c.success));

    // Another client may not complete the IDE's call; the IDE refuses to run it: the
    // harness gets a clear error.
    let other = initialized_client(&proxy, "intruder").await;
    let (exchange, second) = call_meanwhile(
        &mut harness,
        r#"{"name":"runUnitTests","arguments":{}}"#,
        async {
            let (turn, state) = ide
                .until_call(|s| running(s).is_some_and(|(id, _)| id != call_id))
                .await;
            let (second, _) = running(&state).unwrap();
            let fake: StateAction = serde_json::from_value(json!({"type": "chat/toolCallComplete",
                "turnId": turn, "toolCallId": second,
                "result": {"success": true, "pastTenseMessage": "fake"}}))
            .unwrap();
            let _ = other.dispatch(CHAT.into(), fake).await;
            ide.dispatch(
                CHAT,
                json!({"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": second,
                "approved": false, "reason": "denied", "reasonMessage": "no tests here"}),
            )
            .await;
            second
        },
    )
    .await;
    let answer: Value = serde_json::from_str(exchange.response()).unwrap();
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("declined") && message.contains("no tests here"),
        "{answer}"
    );

    // The IDE goes away mid-call: the harness gets an error, the call fails in AHP state.
    let watcher = initialized_client(&proxy, "watcher").await;
    let (snapshot, mut sub) = watcher.subscribe(CHAT.into()).await.unwrap();
    let mut chat = match snapshot.snapshot.unwrap().state {
        SnapshotState::Chat(chat) => *chat,
        other => panic!("{other:?}"),
    };
    let (exchange, ()) = call_meanwhile(
        &mut harness,
        r#"{"name":"runUnitTests","arguments":{}}"#,
        async {
            let _ = ide
                .until_call(|s| running(s).is_some_and(|(id, _)| id != call_id && id != second))
                .await;
            ide.dispatch(
                SESSION,
                json!({"type": "session/activeClientRemoved", "clientId": "ide-1"}),
            )
            .await;
        },
    )
    .await;
    let answer: Value = serde_json::from_str(exchange.response()).unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("went away"),
        "{answer}"
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let failed = chat
            .turns
            .iter()
            .flat_map(|t| &t.response_parts)
            .chain(chat.active_turn.iter().flat_map(|t| &t.response_parts))
            .filter(|p| matches!(p, ResponsePart::ToolCall(tc) if matches!(&tc.tool_call, ToolCallState::Completed(c) if !c.success)))
            .count();
        if failed >= 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call was not failed in AHP state"
        );
        let envelope = common::next_action(&mut sub).await;
        let _ = ahp::reducers::apply_action_to_chat(&mut chat, &envelope.action);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn client_tool_names_follow_mcps_rules_and_no_tool_is_dropped() {
    let (proxy, mut harness, _ide) = harness_and_ide(&server("echo", "echo", &[])).await;
    let client = initialized_client(&proxy, "ide-2").await;
    let (_, mut sub) = client.subscribe(SESSION.into()).await.unwrap();
    let publish = |tools: Vec<Value>| {
        serde_json::from_value::<StateAction>(json!({"type": "session/activeClientSet",
            "activeClient": {"clientId": "ide-2", "displayName": "ide", "tools": tools}}))
        .unwrap()
    };
    let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});

    // Names that break MCP's tool-name rules are refused when published, saying why.
    let long = "x".repeat(100_000);
    for bad in ["", "two\nlines", "\u{1b}[2Jclear", "../../x", long.as_str()] {
        client
            .dispatch(SESSION.into(), publish(vec![tool("fine"), tool(bad)]))
            .await
            .unwrap();
        let echo = common::next_action(&mut sub).await;
        let reason = echo
            .rejection_reason
            .unwrap_or_else(|| panic!("{bad:?} was accepted"));
        assert!(reason.contains("tool name"), "{reason}");
    }
    // So is the same name twice.
    client
        .dispatch(SESSION.into(), publish(vec![tool("twice"), tool("twice")]))
        .await
        .unwrap();
    let echo = common::next_action(&mut sub).await;
    let reason = echo
        .rejection_reason
        .expect("a name listed twice is refused");
    assert!(reason.contains("twice"), "{reason}");

    // Names that collide with each other once renamed: every tool stays listed, each under
    // a name of its own.
    client
        .dispatch(
            SESSION.into(),
            publish(vec![tool("echo"), tool("echo__echo"), tool("ide__echo")]),
        )
        .await
        .unwrap();
    let listed: Value = serde_json::from_str(&listed(&mut harness, "ide__echo").await).unwrap();
    let mut names: Vec<String> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    // The host's echo, the client's three, the first IDE's runUnitTests.
    assert_eq!(names.len(), 5, "{names:?}");
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 5, "{names:?}");
}
