//! The routes around the proxy's judgement (approvals, tool filters) tried as an attacker
//! would, against a real last-wins upstream (`fixtures/servers/last_wins.py`: Python's json,
//! which runs the last member of a name, and runs calls sent as notifications): duplicate
//! members, a request sent without an id, a message written as an array, and guessable
//! session ids. Each is refused before anything reaches the server, on stdio, `/mcp` and
//! `/mcp/<server>`, for legacy and 2026-07-28 harnesses.

mod common;

use std::path::Path;

use ahp_types::state::ToolCallState;
use common::approver::Approver;
use common::http_session::RawSession;
use common::raw::RawClient;
use common::{stdio_harness, Proxy, ScratchDir};
use serde_json::Value;

/// A manifest declaring the last-wins server as `lw` with `record` disabled, and an approval
/// policy holding every call that is not read-only (`read`).
fn config(dir: &ScratchDir) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/servers/last_wins.py");
    let text = serde_json::json!({"mcpServers": {
        "lw": {"command": "python3", "args": [script], "disabledTools": ["record"]},
    }});
    let path = dir.path().join("servers.mcp.json");
    std::fs::write(&path, text.to_string()).expect("write manifest");
    format!(
        "manifests = [{:?}]\n[approval]\nmode = \"destructive\"\ntimeout_ms = 60000\n",
        path.display().to_string()
    )
}

/// The walk-arounds of a tool's name and arguments: each must be refused as it stands.
const TWICE: &[&str] = &[
    // The first name is judged (harmless), a last-wins server runs the disabled one.
    r#"{"name":"calls","arguments":{},"name":"record"}"#,
    // The same, the second name spelt with an escape.
    r#"{"name":"calls","arguments":{},"na\u006de":"record"}"#,
    // The approver would be shown (and edit) the first arguments; the server runs the last.
    r#"{"name":"calls","arguments":{"path":"/tmp/x"},"arguments":{"path":"/etc/shadow"}}"#,
    // Deeper: the arguments read one way by the approver, another by the server.
    r#"{"name":"calls","arguments":{"o":{"path":"/tmp/x","path":"/etc/shadow"}}}"#,
];

/// What the last-wins server ran so far (its `ran` tool), as JSON.
fn ran(answer: &str) -> Value {
    let value: Value = serde_json::from_str(answer).expect("JSON answer");
    let text = value["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {answer}"));
    serde_json::from_str(text).expect("the list of what ran")
}

/// The last-wins server ran nothing: its `ran` tool lists no call.
async fn nothing_ran(harness: &mut RawClient) {
    let answer = harness
        .request("tools/call", Some(r#"{"name":"ran"}"#), &mut |_, _| {
            String::new()
        })
        .await;
    assert_eq!(ran(answer.response()), serde_json::json!([]), "nothing ran");
}

fn refused_as_invalid(answer: &str, what: &str) {
    let value: Value = serde_json::from_str(answer).expect("JSON answer");
    assert_eq!(value["error"]["code"], -32600, "{what}: {answer}");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        !message.is_empty(),
        "{what}: the refusal says why: {answer}"
    );
}

#[tokio::test]
async fn duplicate_members_requests_without_ids_and_arrays_never_reach_a_stdio_server() {
    let dir = ScratchDir::new("routes-stdio");
    let (_proxy, mut harness) = stdio_harness(&config(&dir)).await;
    for params in TWICE {
        let exchange = harness
            .request("tools/call", Some(params), &mut |_, _| String::new())
            .await;
        refused_as_invalid(exchange.response(), params);
        assert!(exchange.response().contains("appears twice"));
    }
    // A request method as a notification: dropped (nothing is answered to a notification).
    harness
        .send_raw_line(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"record"}}"#)
        .await;
    // A message written as an array: refused at once, not waited on.
    harness
        .send_raw_line(r#"["2.0",52,"tools/call",{"name":"record"}]"#)
        .await;
    let line = harness.read_line().await;
    refused_as_invalid(&line, "a positional array");
    assert!(line.contains(r#""id":null"#), "{line}");
    nothing_ran(&mut harness).await;
}

#[tokio::test]
async fn duplicate_members_requests_without_ids_and_arrays_never_reach_a_server_over_http() {
    let dir = ScratchDir::new("routes-http");
    let proxy = Proxy::start(&config(&dir));
    let http = reqwest::Client::new();
    for url in [proxy.mcp_url.clone(), format!("{}/lw", proxy.mcp_url)] {
        let session = RawSession::open(&http, &url).await;
        for params in TWICE {
            let text =
                format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{params}}}"#);
            let response = session.post_text(&text).await;
            assert_eq!(response.status(), 400, "{url}: {params}");
            let body = response.text().await.unwrap();
            refused_as_invalid(&body, params);
            assert!(
                body.contains(r#""id":9"#),
                "the refusal keeps the id: {body}"
            );
        }
        let notification = r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"record"}}"#;
        let response = session.post_text(notification).await;
        assert_eq!(response.status(), 400, "{url}: a request without an id");
        refused_as_invalid(&response.text().await.unwrap(), "without an id");
        let array = session
            .post_text(r#"["2.0",52,"tools/call",{"name":"record"}]"#)
            .await;
        assert_eq!(array.status(), 400, "{url}: an array");
        refused_as_invalid(&array.text().await.unwrap(), "an array");
    }
    // A 2026-07-28 request (no session) with a duplicate name: refused the same way.
    let modern = http
        .post(format!("{}/lw", proxy.mcp_url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "calls")
        .body(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calls","arguments":{},"name":"record","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(modern.status(), 400);
    refused_as_invalid(&modern.text().await.unwrap(), "a modern duplicate");
    let mut harness = harness_at(&format!("{}/lw", proxy.mcp_url), "h").await;
    nothing_ran(&mut harness).await;
}

#[tokio::test]
async fn session_ids_are_128_random_bits_with_nothing_in_common() {
    let dir = ScratchDir::new("routes-ids");
    let proxy = Proxy::start(&config(&dir));
    let http = reqwest::Client::new();
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(RawSession::open(&http, &proxy.mcp_url).await.id);
    }
    for id in &ids {
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
    // Sessions opened one after the other share no 32-bit quarter: no counter, clock or
    // salt shows through (each quarter of 8 random hex digits collides with odds 2^-32).
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            for quarter in [0..8, 8..16, 16..24, 24..32] {
                assert_ne!(a[quarter.clone()], b[quarter], "{a} {b}");
            }
        }
    }
}

/// An initialized legacy harness on `url`.
async fn harness_at(url: &str, name: &str) -> RawClient {
    let mut harness = RawClient::http(url);
    let params = format!(
        r#"{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"{name}","version":"1"}}}}"#
    );
    harness
        .request("initialize", Some(&params), &mut |_, _| String::new())
        .await;
    harness.notify("notifications/initialized", None).await;
    harness
}

async fn ask(harness: &mut RawClient, method: &str, params: &str) -> Value {
    let exchange = harness
        .request(method, Some(params), &mut |_, _| String::new())
        .await;
    serde_json::from_str(exchange.response()).expect("JSON answer")
}

/// Harness B on `/mcp/t1` (the transparency example numbers its tasks `task-1`, `task-2`…)
/// cannot read, cancel or list harness A's task; A can.
#[tokio::test]
async fn a_task_is_its_creators_on_a_per_server_endpoint_too() {
    let proxy = Proxy::start(&common::server("t1", "transparency", &[]));
    let url = format!("{}/t1", proxy.mcp_url);
    let mut a = harness_at(&url, "a").await;
    let mut b = harness_at(&url, "b").await;
    let call = r#"{"name":"structured","arguments":{"zeta":"x"},"task":{"ttl":60000}}"#;
    let created = ask(&mut a, "tools/call", call).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_string();
    let named = format!(r#"{{"taskId":"{task}"}}"#);
    for method in ["tasks/result", "tasks/get", "tasks/cancel"] {
        let refused = ask(&mut b, method, &named).await;
        assert_eq!(refused["error"]["code"], -32602, "B's {method}: {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown task")),
            "{refused}"
        );
    }
    let listed = ask(&mut b, "tasks/list", "{}").await;
    assert_eq!(listed["result"]["tasks"], serde_json::json!([]), "{listed}");
    let own = ask(&mut a, "tasks/list", "{}").await;
    let ids: Vec<&str> = (own["result"]["tasks"].as_array().expect("tasks").iter())
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert_eq!(ids, [task.as_str()], "{own}");
    let result = ask(&mut a, "tasks/result", &named).await;
    assert!(result.get("result").is_some(), "A reads its own: {result}");
}

/// A tool whose results are held for review cannot be run as a task (its result would come
/// by `tasks/result`, past the review): the call is refused before it reaches the server.
#[tokio::test]
async fn a_reviewed_tool_cannot_be_run_as_a_task_to_skip_its_review() {
    let config = format!(
        "{}[approval.servers.t1.tools.structured]\nreview_result = true\n",
        common::server("t1", "transparency", &[])
    );
    let proxy = Proxy::start(&config);
    for url in [format!("{}/t1", proxy.mcp_url), proxy.mcp_url.clone()] {
        let mut harness = harness_at(&url, "h").await;
        let call = r#"{"name":"structured","arguments":{"zeta":"x"},"task":{"ttl":60000}}"#;
        let refused = ask(&mut harness, "tools/call", call).await;
        assert_eq!(refused["error"]["code"], -32602, "{url}: {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("held for review")),
            "{refused}"
        );
        // Nothing was created: the server's first task is still to come, and unknown here.
        let result = ask(&mut harness, "tasks/result", r#"{"taskId":"task-1"}"#).await;
        assert_eq!(result["error"]["code"], -32602, "{url}: {result}");
    }
}

/// Writes the manifest of `calc` (the `features` example: echo, add, slow) with these
/// filters.
fn write_calc(path: &Path, filters: Value) {
    let mut calc = serde_json::json!({"command": common::examples(), "args": ["features"]});
    calc.as_object_mut()
        .unwrap()
        .extend(filters.as_object().unwrap().clone());
    let text = serde_json::json!({"mcpServers": {"calc": calc}});
    std::fs::write(path, text.to_string()).expect("write manifest");
}

/// Edits of a watched manifest's `disabledTools` and `alwaysAllow` apply on the next
/// request, and a call held before the edit is judged again when it is approved: its tool
/// now disabled, it is refused, never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_and_pre_approval_edits_apply_at_once_even_to_held_calls() {
    let dir = ScratchDir::new("routes-live");
    let manifest = dir.path().join("calc.mcp.json");
    write_calc(&manifest, serde_json::json!({"alwaysAllow": ["echo"]}));
    let config = format!(
        "manifests = [{:?}]\n[approval]\nmode = \"always\"\ntimeout_ms = 60000\n",
        manifest.display().to_string()
    );
    let proxy = Proxy::start(&config);
    let mut harness = harness_at(&proxy.mcp_url, "h").await;
    let mut other = harness_at(&proxy.mcp_url, "o").await;
    let mut approver = Approver::join(&proxy, "ide-1").await;
    let echoed = ask(
        &mut harness,
        "tools/call",
        r#"{"name":"echo","arguments":{"text":"pre"}}"#,
    )
    .await;
    assert!(
        echoed["result"]["content"].is_array(),
        "pre-approved: {echoed}"
    );
    let call = r#"{"name":"add","arguments":{"a":1,"b":2}}"#;
    let mut none = |_: &str, _: &str| String::new();
    let (held, first) = tokio::join!(
        harness.request("tools/call", Some(call), &mut none),
        async {
            let (turn, pending) = approver.pending().await;
            // While it waits, `add` is disabled and `echo` no longer pre-approved.
            write_calc(&manifest, serde_json::json!({"disabledTools": ["add"]}));
            let listed = |answer: &Value| {
                (answer["result"]["tools"].as_array().into_iter().flatten())
                    .any(|tool| tool["name"] == "add")
            };
            let deadline = std::time::Instant::now() + common::PATIENCE;
            while listed(&ask(&mut other, "tools/list", "{}").await) {
                assert!(std::time::Instant::now() < deadline, "add still listed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            let fields = serde_json::json!({"approved": true});
            approver.answer(&turn, &pending.tool_call_id, fields).await;
            pending.tool_call_id
        }
    );
    let held: Value = serde_json::from_str(held.response()).unwrap();
    assert_eq!(held["error"]["code"], -32602, "judged again: {held}");
    let again = ask(&mut other, "tools/call", call).await;
    assert_eq!(again["error"]["code"], -32602, "disabled now: {again}");
    let (echo, ()) = tokio::join!(
        other.request(
            "tools/call",
            Some(r#"{"name":"echo","arguments":{"text":"x"}}"#),
            &mut none
        ),
        async {
            let (turn, pending) = approver
                .until(|s| matches!(s, ToolCallState::PendingConfirmation(p) if p.tool_call_id != first))
                .await;
            let fields = serde_json::json!({"approved": false, "reason": "denied"});
            let ToolCallState::PendingConfirmation(pending) = pending else {
                unreachable!()
            };
            approver.answer(&turn, &pending.tool_call_id, fields).await;
        }
    );
    let echo: Value = serde_json::from_str(echo.response()).unwrap();
    assert_eq!(
        echo["result"]["isError"], true,
        "held now, and denied: {echo}"
    );
}

/// A 2026-07-28 request declaring the Tasks extension (`_meta` members).
const MODERN: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/clientInfo":{"name":"m","version":"1"}"#;

async fn ask_modern(harness: &mut RawClient, method: &str, members: &str) -> Value {
    ask(
        harness,
        method,
        &format!(r#"{{{members},"_meta":{{{MODERN}}}}}"#),
    )
    .await
}

/// A sessionless 2026-07-28 harness's task is handed out under a handle the proxy mints;
/// the server's own id (`task-1`, guessable) reaches nothing, from a modern request or a
/// legacy harness, on `/mcp/<server>` as on `/mcp`.
#[tokio::test]
async fn a_modern_task_is_reached_by_its_handle_only() {
    let proxy = Proxy::start(&common::server("t", "transparency-modern", &[]));
    for url in [format!("{}/t", proxy.mcp_url), proxy.mcp_url.clone()] {
        let mut a = RawClient::http_modern(&url);
        let created = ask_modern(&mut a, "tools/call", r#""name":"slow","arguments":{}"#).await;
        assert_eq!(created["result"]["resultType"], "task", "{url}: {created}");
        let handle = created["result"]["taskId"].as_str().unwrap().to_string();
        assert_eq!(handle.len(), 32, "{url}: {created}");
        let mut b = RawClient::http_modern(&url);
        for raw in ["task-1", "task-2"] {
            let guessed = ask_modern(&mut b, "tasks/get", &format!(r#""taskId":"{raw}""#)).await;
            assert_eq!(guessed["error"]["code"], -32602, "{url}: {guessed}");
        }
        let mut legacy = harness_at(&url, "legacy").await;
        let raw = if url.ends_with("/t") {
            "task-1"
        } else {
            "task-2"
        };
        let guessed = ask(
            &mut legacy,
            "tasks/get",
            &format!(r#"{{"taskId":"{raw}"}}"#),
        )
        .await;
        assert_eq!(guessed["error"]["code"], -32602, "{url}: {guessed}");
        let own = ask_modern(&mut a, "tasks/get", &format!(r#""taskId":"{handle}""#)).await;
        assert_eq!(own["result"]["taskId"], handle.as_str(), "{url}: {own}");
    }
}
