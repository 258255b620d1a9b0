//! Who gets what from the MCP front, and when: a server's request reaches only the harness
//! whose call caused it (or fails with a clear error when nothing says which), never before
//! that harness finished its handshake; a server's own `list_changed` reaches the harnesses
//! of `/mcp/<server>`; the front's HTTP answers keep the request's id and the server's SSE
//! `retry`.

mod common;

use std::sync::{Arc, Mutex};

use common::raw::{EventReader, RawClient};
use common::{server, HttpExampleServer, Proxy, PATIENCE};
use futures_util::StreamExt;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

const SAMPLING: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"$NAME","version":"1"}}"#;

/// An HTTP session on `url` that declared sampling, initialized.
async fn sampling_session(url: &str, name: &str) -> RawClient {
    let mut harness = RawClient::http(url);
    harness
        .request(
            "initialize",
            Some(&SAMPLING.replace("$NAME", name)),
            &mut |method, _| panic!("unexpected {method}"),
        )
        .await;
    harness.notify("notifications/initialized", None).await;
    harness
}

/// Two HTTP harnesses on `/mcp`: A's call asks for sampling while B's call is in flight at
/// the same server. A's prompt never reaches B, and B's answer never becomes A's result.
async fn two_harnesses_race(proxy: &Proxy) -> Value {
    let mut a = sampling_session(&proxy.mcp_url, "a").await;
    let mut b = sampling_session(&proxy.mcp_url, "b").await;
    let b_heard: Arc<Mutex<Vec<String>>> = Arc::default();
    let heard = b_heard.clone();
    let mut b_answers = move |_: &str, text: &str| {
        heard.lock().unwrap().push(text.to_string());
        r#"{"role":"assistant","content":{"type":"text","text":"B's answer"},"model":"b"}"#
            .to_string()
    };
    let mut a_answers = |method: &str, text: &str| {
        assert_eq!(method, "sampling/createMessage");
        assert!(text.contains("A's private prompt"), "{text}");
        r#"{"role":"assistant","content":{"type":"text","text":"A's answer"},"model":"a"}"#
            .to_string()
    };
    // B's call: in flight until A's ends. A's call asks once both are being answered.
    let b_call = b.request(
        "tools/call",
        Some(r#"{"name":"slow","arguments":{"ms":600000}}"#),
        &mut b_answers,
    );
    let a_call = a.request(
        "tools/call",
        Some(
            r#"{"name":"ask_llm","arguments":{"prompt":"A's private prompt","wait_for_calls":2}}"#,
        ),
        &mut a_answers,
    );
    let exchange = tokio::select! {
        exchange = a_call => exchange,
        _ = b_call => panic!("B's ten-minute call ended first"),
    };
    let heard = b_heard.lock().unwrap().clone();
    assert!(heard.is_empty(), "B was asked: {heard:?}");
    let result = json(exchange.response());
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!text.contains("B's answer"), "{result}");
    result
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_request_reaches_only_the_harness_whose_call_caused_it() {
    // Over streamable HTTP the request rides A's call's stream: A answers it.
    let upstream = HttpExampleServer::start("features", &[]);
    let proxy = Proxy::start(&format!("[servers.remote]\nurl = \"{}\"\n", upstream.url));
    let result = two_harnesses_race(&proxy).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "A's answer",
        "{result}"
    );
    drop(proxy);

    // Over stdio nothing on the wire says which call it belongs to, and two harnesses have
    // calls in flight: the server is refused, clearly, and nobody is asked.
    let proxy = Proxy::start(&server("local", "features", &[]));
    let result = two_harnesses_race(&proxy).await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("cannot tell which MCP client (harness)"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn server_requests_wait_until_the_harness_is_initialized() {
    // The server asks for roots while the proxy lists its tools, before the harness's
    // `initialize` is even answered.
    let (_proxy, (stdout, stdin)) =
        Proxy::start_stdio(&server("t", "transparency", &["--roots-when-listed"]));
    let mut harness = RawClient::stdio(stdout, stdin);
    let mut asked = Vec::new();
    let init = harness
        .request(
            "initialize",
            Some(r#"{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"h","version":"1"}}"#),
            &mut |method, _| {
                asked.push(method.to_string());
                r#"{"roots":[]}"#.to_string()
            },
        )
        .await;
    assert_eq!(
        init.messages.len(),
        1,
        "nothing before the initialize answer: {:?}",
        init.messages
    );
    // Held until `notifications/initialized`, then sent: the first listing (which waits
    // for the server to be up; `initialize` does not) brings it.
    harness.notify("notifications/initialized", None).await;
    let listed = harness
        .request("tools/list", None, &mut |method, _| {
            asked.push(method.to_string());
            r#"{"roots":[]}"#.to_string()
        })
        .await;
    // (The server asks each time it is listed: the proxy may list it more than once.)
    assert!(
        !asked.is_empty() && asked.iter().all(|m| m == "roots/list"),
        "{asked:?}: {:?}",
        listed.messages
    );
}

/// An HTTP session's standalone GET stream: the messages of its events, as they come.
async fn listen(url: &str, session: &str) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let response = reqwest::Client::new()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .send()
        .await
        .expect("GET");
    assert!(response.status().is_success(), "{}", response.status());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut events = EventReader::default();
        let mut body = response.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            for data in events.feed(&chunk) {
                let _ = tx.send(data);
            }
        }
    });
    rx
}

#[tokio::test(flavor = "multi_thread")]
async fn a_servers_own_list_changed_reaches_its_endpoint() {
    let proxy = Proxy::start(&server("feat", "features", &[]));
    let url = format!("{}/feat", proxy.mcp_url);
    let watching = sampling_session(&url, "watching").await;
    let session = watching.session().expect("a session id");
    let mut heard = listen(&url, &session).await;
    let mut calling = sampling_session(&url, "calling").await;

    let added = calling
        .request(
            "tools/call",
            Some(r#"{"name":"add_tool","arguments":{"name":"fresh"}}"#),
            &mut |method, _| panic!("unexpected {method}"),
        )
        .await;
    // On the call's own stream, before its answer, as the server sent it ...
    let received: Vec<&str> = added.received().collect();
    assert!(
        received.len() == 2 && received[0].contains("notifications/tools/list_changed"),
        "{received:?}"
    );
    // ... and on the other session's stream.
    let wait = async {
        loop {
            let message = heard.recv().await.expect("the GET stream is open");
            if message.contains("notifications/tools/list_changed") {
                return;
            }
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .expect("list_changed on the GET stream");
}

#[tokio::test(flavor = "multi_thread")]
async fn http_answers_keep_the_request_id_and_the_servers_retry() {
    let upstream = HttpExampleServer::start("conformance", &[]);
    let proxy = Proxy::start(&format!("[servers.ref]\nurl = \"{}\"\n", upstream.url));
    let http = reqwest::Client::new();

    // A version the proxy does not know: refused, with the request's own id.
    let refused = http
        .post(&proxy.mcp_url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "1999-01-01")
        .body(r#"{"jsonrpc":"2.0","id":42,"method":"initialize","params":{}}"#)
        .send()
        .await
        .expect("POST");
    assert_eq!(refused.status(), 400);
    let refused = json(&refused.text().await.expect("body"));
    assert_eq!(refused["id"], 42, "{refused}");

    // The server's SSE streams ask clients to wait 5 s before resuming; so does its
    // endpoint through the proxy.
    let url = format!("{}/ref", proxy.mcp_url);
    let mut harness = sampling_session(&url, "h").await;
    let session = harness.session().expect("a session id");
    let streamed = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_tool_with_logging","arguments":{}}}"#)
        .send()
        .await
        .expect("POST");
    let body = tokio::time::timeout(PATIENCE, streamed.text())
        .await
        .expect("the stream ends with its answer")
        .expect("body");
    assert!(body.contains("retry: 5000\n"), "{body}");
    assert!(!body.contains("retry: 1000\n"), "{body}");
    // So does the session's GET stream, from its first bytes.
    let mut stream = http
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("GET")
        .bytes_stream();
    let first = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("the stream opens")
        .expect("a chunk")
        .expect("bytes");
    let first = String::from_utf8_lossy(&first).into_owned();
    assert!(first.starts_with("retry: 5000\n"), "{first}");
    // The harness's own session still works.
    harness
        .request("ping", None, &mut |method, _| panic!("unexpected {method}"))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_list_on_mcp_joins_each_harness_own_tasks_with_the_servers_meta() {
    let config = format!(
        "{}{}",
        server("t1", "transparency", &[]),
        server("t2", "transparency", &[])
    );
    let proxy = Proxy::start(&config);
    let mut a = sampling_session(&proxy.mcp_url, "a").await;
    let mut b = sampling_session(&proxy.mcp_url, "b").await;
    let mut none = |method: &str, _: &str| -> String { panic!("unexpected {method}") };
    for (who, tool) in [("a", "t1"), ("a", "t2"), ("b", "t1")] {
        let harness = if who == "a" { &mut a } else { &mut b };
        let params = format!(
            r#"{{"name":"{tool}__structured","arguments":{{"zeta":"x"}},"task":{{"ttl":60000}}}}"#
        );
        let created = harness
            .request("tools/call", Some(&params), &mut none)
            .await;
        assert!(
            created.response().contains(r#""task":"#),
            "{}",
            created.response()
        );
    }
    let listed = json(a.request("tasks/list", None, &mut none).await.response());
    let tasks = listed["result"]["tasks"].as_array().expect("tasks").clone();
    // A's task on each server; B's (t1's task-2) is not A's to see.
    let ids: Vec<&str> = tasks.iter().filter_map(|t| t["taskId"].as_str()).collect();
    assert_eq!(ids, ["task-1", "task-1"], "{listed}");
    assert_eq!(
        listed["result"]["_meta"],
        serde_json::json!({"x-listed": {"z": 0.7, "a": 1e3}}),
        "{listed}"
    );
}
