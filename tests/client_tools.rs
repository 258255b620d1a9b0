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
