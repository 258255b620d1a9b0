//! The 2026-07-28 Tasks extension (`io.modelcontextprotocol/tasks`) through the aggregating
//! fronts, and the extensions the proxy offers there: two modern servers (the
//! `transparency-modern` example, task ids `a-…` and `b-…`) behind `/mcp` and `--stdio`; a
//! modern harness creates a task on each, polls it to its result, cancels one, and gets the
//! spec's `-32602` for a task nobody created.

mod common;

use common::raw::{wait_listening, RawClient};
use common::{server, HttpExampleServer, Proxy, Watcher};
use serde_json::Value;

/// A modern harness's envelope, declaring the Tasks extension (and one the proxy does not know).
const ENVELOPE: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{},"x-harness/ext":{"v":1}}},"io.modelcontextprotocol/clientInfo":{"name":"tasks-test","version":"1"}"#;

fn config() -> String {
    format!(
        "[supervisor]\nrestart_delay_ms = 50\n{}{}",
        server("a", "transparency-modern", &["--task-prefix", "a-"]),
        server("b", "transparency-modern", &["--task-prefix", "b-"]),
    )
}

/// Send `method` with `params` (an object's members, without braces) and the envelope; the
/// parsed response.
async fn ask(client: &mut RawClient, method: &str, members: &str) -> Value {
    ask_as(client, ENVELOPE, method, members).await
}

/// [`ask`] with another envelope.
async fn ask_as(client: &mut RawClient, envelope: &str, method: &str, members: &str) -> Value {
    let comma = if members.is_empty() { "" } else { "," };
    let params = format!(r#"{{{members}{comma}"_meta":{{{envelope}}}}}"#);
    let exchange = client
        .request(method, Some(&params), &mut |m, r| {
            panic!("unexpected server request {m}: {r}")
        })
        .await;
    serde_json::from_str(exchange.response()).expect("a JSON response")
}

/// The handle a task was handed out under: 32 hex digits.
fn handle(created: &Value, what: &str) -> String {
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: a task id: {created}"));
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{what}: a handle, not the server's id: {created}"
    );
    id.to_string()
}

/// The whole life of two tasks on two servers, through one aggregating front.
async fn tasks_reach_their_servers(client: &mut RawClient, what: &str) {
    let discovered = ask(client, "server/discover", "").await;
    let extensions = &discovered["result"]["capabilities"]["extensions"];
    assert!(
        extensions["io.modelcontextprotocol/tasks"].is_object(),
        "{what}: the proxy offers Tasks, which it routes: {discovered}"
    );
    assert!(
        extensions.get("x-vendor/ext").is_none(),
        "{what}: not an extension it cannot route: {discovered}"
    );

    let created = ask(
        client,
        "tools/call",
        r#""name":"a__slow","arguments":{"zeta":"on a"}"#,
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{what}: {created}");
    // Handed out under a handle the proxy minted (128 random bits), never the server's id.
    let a = handle(&created, what);
    let other = ask(
        client,
        "tools/call",
        r#""name":"b__slow","arguments":{"zeta":"on b"}"#,
    )
    .await;
    let b = handle(&other, what);
    assert_ne!(a, b);
    let by_server_id = ask(client, "tasks/get", r#""taskId":"a-task-1""#).await;
    assert_eq!(
        by_server_id["error"]["code"], -32602,
        "{what}: {by_server_id}"
    );

    // Polled at the server that made it (the other one does not know it: -32602).
    let working = ask(client, "tasks/get", &format!(r#""taskId":"{a}""#)).await;
    assert_eq!(working["result"]["status"], "working", "{what}: {working}");
    assert_eq!(working["result"]["taskId"], a.as_str(), "{what}: {working}");
    let update = ask(
        client,
        "tasks/update",
        &format!(r#""taskId":"{a}","inputResponses":{{}}"#),
    )
    .await;
    assert_eq!(
        update["result"]["resultType"], "complete",
        "{what}: {update}"
    );
    let done = ask(client, "tasks/get", &format!(r#""taskId":"{a}""#)).await;
    assert_eq!(done["result"]["status"], "completed", "{what}: {done}");
    assert_eq!(
        done["result"]["result"]["structuredContent"]["arguments"]["zeta"], "on a",
        "{what}: {done}"
    );

    // Cancelled at its own server: b's task ends cancelled, a's other work is untouched.
    let cancel = ask(client, "tasks/cancel", &format!(r#""taskId":"{b}""#)).await;
    assert_eq!(
        cancel["result"]["resultType"], "complete",
        "{what}: {cancel}"
    );
    let cancelled = ask(client, "tasks/get", &format!(r#""taskId":"{b}""#)).await;
    assert_eq!(
        cancelled["result"]["status"], "cancelled",
        "{what}: {cancelled}"
    );

    let unknown = ask(client, "tasks/get", r#""taskId":"nobody-made-this""#).await;
    assert_eq!(unknown["error"]["code"], -32602, "{what}: {unknown}");
    let unknown = ask(client, "tasks/cancel", r#""taskId":"nobody-made-this""#).await;
    assert_eq!(unknown["error"]["code"], -32602, "{what}: {unknown}");

    // A harness that did not declare Tasks gets the server's own -32021.
    let without = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}"#;
    let refused = ask_as(
        client,
        without,
        "tools/call",
        r#""name":"a__slow","arguments":{}"#,
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{what}: {refused}");
    assert!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{what}: {refused}"
    );

    // What the harness declared reaches the servers, its extensions included.
    let echoed = ask(
        client,
        "tools/call",
        r#""name":"a__echo_meta","arguments":{}"#,
    )
    .await;
    let forwarded = &echoed["result"]["structuredContent"]["meta"]
        ["io.modelcontextprotocol/clientCapabilities"]["extensions"];
    assert!(
        forwarded["io.modelcontextprotocol/tasks"].is_object()
            && forwarded["x-harness/ext"]["v"] == 1,
        "{what}: {echoed}"
    );
}

#[tokio::test]
async fn a_modern_harness_on_the_aggregate_routes_tasks_to_their_servers() {
    let proxy = Proxy::start(&config());
    let mut watcher = Watcher::open(&proxy).await;
    watcher.until("a", "ready", &mut Vec::new()).await;
    watcher.until("b", "ready", &mut Vec::new()).await;
    let mut client = RawClient::http_modern(&proxy.mcp_url);
    tasks_reach_their_servers(&mut client, "/mcp").await;
}

/// The same with both servers over stateless HTTP.
#[tokio::test]
async fn tasks_at_stateless_http_servers_reach_their_servers() {
    let a = HttpExampleServer::start("transparency-modern", &["--task-prefix", "a-"]);
    let b = HttpExampleServer::start("transparency-modern", &["--task-prefix", "b-"]);
    wait_listening(&a.url).await;
    wait_listening(&b.url).await;
    let config = format!(
        "[servers.a]\nurl = \"{}\"\n[servers.b]\nurl = \"{}\"\n",
        a.url, b.url
    );
    let proxy = Proxy::start(&config);
    let mut watcher = Watcher::open(&proxy).await;
    watcher.until("a", "ready", &mut Vec::new()).await;
    watcher.until("b", "ready", &mut Vec::new()).await;
    let mut client = RawClient::http_modern(&proxy.mcp_url);
    tasks_reach_their_servers(&mut client, "/mcp, HTTP upstream").await;
}

#[tokio::test]
async fn a_modern_harness_on_the_stdio_front_routes_tasks_to_their_servers() {
    let (proxy, (stdout, stdin)) = Proxy::start_stdio(&config());
    let mut client = RawClient::stdio(stdout, stdin);
    // The servers start as the harness, once it sent its first request; `server/discover`
    // is answered at once (issue 46), with the extensions of the servers up by then.
    ask(&mut client, "server/discover", "").await;
    let mut watcher = Watcher::open(&proxy).await;
    for server in ["a", "b"] {
        watcher.until(server, "ready", &mut Vec::new()).await;
    }
    tasks_reach_their_servers(&mut client, "--stdio").await;
}

/// A modern harness's call that went on as a task is mirrored into the harness chat until
/// the task ends: its completion carries the result a `tasks/get` brought back.
#[tokio::test]
async fn a_modern_task_call_is_mirrored_with_the_result_its_poll_brought() {
    let proxy = Proxy::start(&config());
    let mut ahp = common::Raw::connect(&proxy).await;
    let init = ahp
        .request(
            "initialize",
            serde_json::json!({"channel": "ahp-root://", "clientId": "task-watcher",
                "protocolVersions": ["1.0.0"], "initialSubscriptions": ["ahp-chat:/harness"]}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    let mut client = RawClient::http_modern(&proxy.mcp_url);
    let created = ask(
        &mut client,
        "tools/call",
        r#""name":"a__slow","arguments":{"zeta":"mirrored"}"#,
    )
    .await;
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_string();
    let get = format!(r#""taskId":"{task}""#);
    while ask(&mut client, "tasks/get", &get).await["result"]["status"] == "working" {}
    let completed = ahp
        .notification(|n| n["params"]["action"]["type"] == "chat/toolCallComplete")
        .await;
    let text = completed.to_string();
    assert!(
        text.contains("slow caf") && text.contains("mirrored"),
        "the task's own result: {completed}"
    );
}

/// A legacy harness's extensions (declared in its `initialize`) reach modern servers too, in
/// the envelope the proxy sends for it.
#[tokio::test]
async fn a_legacy_harness_extensions_reach_modern_servers() {
    let proxy = Proxy::start(&config());
    let mut watcher = Watcher::open(&proxy).await;
    watcher.until("a", "ready", &mut Vec::new()).await;
    let mut legacy = RawClient::http(&proxy.mcp_url);
    let mut none = |m: &str, r: &str| panic!("unexpected server request {m}: {r}");
    legacy
        .request(
            "initialize",
            Some(r#"{"protocolVersion":"2025-11-25","capabilities":{"extensions":{"x-harness/ext":{"v":2}}},"clientInfo":{"name":"old","version":"1"}}"#),
            &mut none,
        )
        .await;
    legacy.notify("notifications/initialized", None).await;
    let exchange = legacy
        .request(
            "tools/call",
            Some(r#"{"name":"a__echo_meta","arguments":{}}"#),
            &mut none,
        )
        .await;
    let echoed: Value = serde_json::from_str(exchange.response()).expect("JSON");
    let meta = &echoed["result"]["structuredContent"]["meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"]["extensions"]["x-harness/ext"]["v"], 2,
        "{echoed}"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"], "old via ahp-proxy",
        "{echoed}"
    );
}
