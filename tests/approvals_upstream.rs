//! Approvals as the server sees them: the `witness` example reports the exact params each
//! call brought it and how many came. An approved call reaches it with the harness's params
//! byte for byte (or the arguments a client edited, nothing else changed), with nothing about
//! approval in them; a denied call and a timed-out one never reach it; for a legacy and a
//! modern (2026-07-28) harness alike. A call approved with an edit and then retried for more
//! scope is sent again with the edit.

mod common;
#[allow(dead_code)] // the metadata is for tests/auth.rs
#[path = "common/protected.rs"]
mod protected;

use ahp_types::state::ToolCallState;
use common::approver::Approver;
use common::raw::RawClient;
use common::{server, stdio_harness, Proxy};
use serde_json::{json, Value};

/// The witness under `[approval] mode = "always"` (`extra` in the table), its `calls` never held.
fn config(extra: &str) -> String {
    format!(
        "{}[approval]\nmode = \"always\"\n{extra}[approval.servers.witness.tools.calls]\nmode = \"never\"\n",
        server("witness", "witness", &[]),
    )
}

/// A modern request's envelope members (what `_meta` carries besides the harness's own).
const ENVELOPE: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}"#;

/// The harness's `tools/call` with `params` (JSON text), answered.
async fn call(harness: &mut RawClient, params: &str) -> Value {
    let mut none = |_: &str, _: &str| String::new();
    let exchange = harness.request("tools/call", Some(params), &mut none).await;
    serde_json::from_str(exchange.response()).unwrap()
}

/// The harness calls with `params` while `ide` answers the held call with `answer`; the
/// harness's answer, once the chat shows the call ended (so the next call is the next held).
async fn decided(
    harness: &mut RawClient,
    ide: &mut Approver,
    params: &str,
    answer: Value,
) -> Value {
    let (got, id) = tokio::join!(call(harness, params), async {
        let (turn, pending) = ide.pending().await;
        ide.answer(&turn, &pending.tool_call_id, answer).await;
        pending.tool_call_id
    });
    ide.until(|s| {
        let ended = matches!(s, ToolCallState::Completed(_) | ToolCallState::Cancelled(_));
        ended && serde_json::to_value(s).unwrap()["toolCallId"] == id.as_str()
    })
    .await;
    got
}

/// The text of a tool result.
fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {answer}"))
        .to_string()
}

/// How many `record` calls reached the witness, asked with `_meta` members `meta`.
async fn recorded(harness: &mut RawClient, meta: &str) -> String {
    text(
        &call(
            harness,
            &format!(r#"{{"name":"calls","arguments":{{}},"_meta":{{{meta}}}}}"#),
        )
        .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_harness_call_reaches_the_server_as_sent_or_as_edited_and_denied_never() {
    let (proxy, mut harness) = stdio_harness(&config("")).await;
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let params = r#"{"name":"record","arguments":{"text":"as asked","n":1.50},"_meta":{"progressToken":"p-1","x-vendor/trace":{"z":1,"a":2}}}"#;
    // Approved: the server got the harness's params, byte for byte.
    let got = decided(&mut harness, &mut ide, params, json!({"approved": true})).await;
    assert_eq!(text(&got), params, "{got}");
    // Approved with an edit: the arguments are the edit, nothing else changed.
    let edit = json!({"approved": true, "editedToolInput": "{\"text\":\"as edited\"}"});
    let got = decided(&mut harness, &mut ide, params, edit).await;
    let edited = params.replace(r#"{"text":"as asked","n":1.50}"#, r#"{"text":"as edited"}"#);
    assert_eq!(text(&got), edited, "{got}");
    // Denied: it never reached the server.
    let no = json!({"approved": false, "reason": "denied", "reasonMessage": "no"});
    let got = decided(&mut harness, &mut ide, params, no).await;
    assert_eq!(got["result"]["isError"], true, "{got}");
    assert_eq!(recorded(&mut harness, "").await, "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_harness_call_reaches_the_server_as_sent_or_as_edited_and_denied_never() {
    let (proxy, (stdout, stdin)) = Proxy::start_stdio(&config(""));
    let mut harness = RawClient::stdio(stdout, stdin);
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let params = format!(
        r#"{{"name":"record","arguments":{{"text":"as asked"}},"_meta":{{{ENVELOPE},"x-vendor/trace":"t-1"}}}}"#
    );
    // A legacy server is not shown the modern envelope (it spoke at `initialize`); the rest
    // is the harness's, byte for byte.
    let sent =
        r#"{"name":"record","arguments":{"text":"as asked"},"_meta":{"x-vendor/trace":"t-1"}}"#;
    let got = decided(&mut harness, &mut ide, &params, json!({"approved": true})).await;
    assert_eq!(got["result"]["resultType"], "complete", "{got}");
    assert_eq!(text(&got), sent, "{got}");
    let edit = json!({"approved": true, "editedToolInput": "{\"text\":\"as edited\"}"});
    let got = decided(&mut harness, &mut ide, &params, edit).await;
    assert_eq!(text(&got), sent.replace("as asked", "as edited"), "{got}");
    let got = decided(&mut harness, &mut ide, &params, json!({"approved": false})).await;
    assert_eq!(got["result"]["isError"], true, "{got}");
    assert_eq!(recorded(&mut harness, ENVELOPE).await, "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_nobody_answered_in_time_never_reaches_the_server() {
    let config = config("timeout_ms = 1000\n");
    let (_proxy, mut legacy) = stdio_harness(&config).await;
    let got = call(&mut legacy, r#"{"name":"record","arguments":{}}"#).await;
    assert!(
        text(&got).contains("nobody answered within 1000 ms"),
        "{got}"
    );
    assert_eq!(recorded(&mut legacy, "").await, "0");
    let (_proxy, (stdout, stdin)) = Proxy::start_stdio(&config);
    let mut modern = RawClient::stdio(stdout, stdin);
    let params = format!(r#"{{"name":"record","arguments":{{}},"_meta":{{{ENVELOPE}}}}}"#);
    let got = call(&mut modern, &params).await;
    assert!(
        text(&got).contains("nobody answered within 1000 ms"),
        "{got}"
    );
    assert_eq!(recorded(&mut modern, ENVELOPE).await, "0");
}

/// A call approved with an edited input, then refused by its HTTP server for want of scope
/// (403 `insufficient_scope`), is sent again once a wider token came: with the edit.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_retried_for_more_scope_keeps_the_edited_input() {
    let (server, proxy, mut w, mut seen) =
        protected::ready_with_narrow_token("[approval]\nmode = \"always\"\n").await;
    server.tokens.lock().unwrap().insert("WIDE-SENTINEL".into());
    server.admins.lock().unwrap().insert("WIDE-SENTINEL".into());
    let mut ide = Approver::join(&proxy, "ide-1").await;
    let (_harness, call) = protected::harness_calls_add(&proxy, 2, 3).await;
    let (turn, pending) = ide.pending().await;
    let edit = json!({"approved": true, "editedToolInput": "{\"a\":20,\"b\":22}"});
    ide.answer(&turn, &pending.tool_call_id, edit).await;
    w.until("remote", "authRequired", &mut seen).await;
    w.client
        .request::<_, Value>(
            "authenticate",
            json!({"channel": "ahp-root://", "resource": server.url,
                   "token": "WIDE-SENTINEL", "scopes": ["notes", "admin"]}),
        )
        .await
        .expect("authenticate");
    let result = tokio::time::timeout(common::PATIENCE, call)
        .await
        .expect("the call completes")
        .unwrap()
        .expect("a result, not an error");
    let value = serde_json::to_value(&result).unwrap();
    assert_eq!(value["structuredContent"]["sum"], json!(42), "{value}");
}
