//! Who may decide held calls (issue 42): the real binary, a harness on its stdio, official
//! AHP clients with and without the approval key. A client that did not present the key sees
//! the held call but cannot approve, deny or review it (refused, naming why; the call stays
//! held until a keyed client decides) nor call a held tool on its `mcp://` channel; the View
//! origin cannot open an AHP connection at all, and its relay page may be framed only by the
//! console; the key lives in a 0600 file (gone after an ordered shutdown), never on the
//! `--stdio` proxy's stderr nor in a launched server's environment.

mod common;

use std::os::unix::fs::PermissionsExt;

use ahp_types::state::{SessionInputRequest, SnapshotState, ToolCallState};
use common::approver::Approver;
use common::ide::SESSION;
use common::raw::RawClient;
use common::{deciding_client, server, stdio_harness, Proxy};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The harness calls the echo example's `echo` with `text` while `meanwhile` runs: its answer.
async fn echo_meanwhile<T>(
    harness: &mut RawClient,
    text: &str,
    meanwhile: impl std::future::Future<Output = T>,
) -> (Value, T) {
    let params = json!({"name": "echo", "arguments": {"text": text}}).to_string();
    let mut none = |_: &str, _: &str| String::new();
    let (exchange, got) = tokio::join!(
        harness.request("tools/call", Some(&params), &mut none),
        meanwhile
    );
    (serde_json::from_str(exchange.response()).unwrap(), got)
}

/// Whether the default session lists call `call` as waiting for a decision, in the snapshot
/// a keyed client gets now.
async fn still_listed(proxy: &Proxy, call: &str) -> bool {
    let client = deciding_client(proxy, "a-look").await;
    let (snapshot, _session) = client.subscribe(SESSION.into()).await.unwrap();
    let SnapshotState::Session(session) = snapshot.snapshot.unwrap().state else {
        panic!("a session snapshot");
    };
    session.input_needed.iter().flatten().any(|r| match r {
        SessionInputRequest::ToolConfirmation(r) => {
            serde_json::to_value(&r.tool_call).unwrap()["toolCallId"] == call
        }
        _ => false,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_key_cannot_approve_or_deny_and_the_call_stays_held() {
    let config = format!(
        "{}[approval]\nmode = \"always\"\n",
        server("echo", "echo", &[])
    );
    let (proxy, mut harness) = stdio_harness(&config).await;
    let mut observer = Approver::watch(&proxy, "local-process").await;
    let mut keyed = Approver::join(&proxy, "console").await;
    let (answer, ()) = echo_meanwhile(&mut harness, "held", async {
        let (turn, pending) = observer.pending().await;
        let call = pending.tool_call_id.clone();
        observer
            .answer(&turn, &call, json!({"approved": true}))
            .await;
        let approve = observer.refusal(&call).await;
        observer
            .answer(&turn, &call, json!({"approved": false, "reason": "denied"}))
            .await;
        let deny = observer.refusal(&call).await;
        for why in [approve, deny] {
            assert!(
                why.contains("this connection did not present the approval key"),
                "{why}"
            );
        }
        // Nothing was decided: it still waits, and the keyed client's decision counts.
        assert!(still_listed(&proxy, &call).await);
        let (turn, pending) = keyed.pending().await;
        assert_eq!(pending.tool_call_id, call);
        keyed.answer(&turn, &call, json!({"approved": true})).await;
    })
    .await;
    assert_eq!(answer["result"]["content"][0]["text"], "held", "{answer}");
    let log = proxy.wait_for_log("tool call approval");
    assert!(log.contains("approved") && log.contains("console"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_key_cannot_review_a_result() {
    let config = format!(
        "{}[approval.servers.echo.tools.echo]\nreview_result = true\n",
        server("echo", "echo", &[])
    );
    let (proxy, mut harness) = stdio_harness(&config).await;
    let mut observer = Approver::watch(&proxy, "local-process").await;
    let mut keyed = Approver::join(&proxy, "console").await;
    let (answer, ()) = echo_meanwhile(&mut harness, "kept back", async {
        let (turn, call, _) = observer.pending_result().await;
        observer.review(&turn, &call, true).await;
        let why = observer.refusal_of_result(&call).await;
        assert!(why.contains("did not present the approval key"), "{why}");
        assert!(still_listed(&proxy, &call).await);
        let (turn, seen, _) = keyed.pending_result().await;
        assert_eq!(seen, call);
        keyed.review(&turn, &call, false).await;
    })
    .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(!answer.to_string().contains("kept back"), "{answer}");
    keyed
        .until(|s| matches!(s, ToolCallState::Cancelled(_)))
        .await;
}

/// The View origin's port, from the console's start-up log line.
fn views_port(proxy: &Proxy) -> u16 {
    let line = proxy.wait_for_log("console: open this URL");
    let event: Value = serde_json::from_str(&line).expect("a JSON log line");
    let views = event["fields"]["views"].as_str().expect("the View origin");
    views.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_origin_never_connects_and_only_the_console_frames_its_relay() {
    let proxy = Proxy::start("");
    let port = views_port(&proxy);
    for origin in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        // Even with the key.
        let mut request = proxy.approver_url().into_client_request().unwrap();
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
        match tokio_tungstenite::connect_async(request).await {
            Ok(_) => panic!("{origin} was admitted"),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status().as_u16(), 403, "{origin}");
                let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                    .into_owned();
                assert!(body.contains("View origin"), "{body}");
            }
            Err(other) => panic!("unexpected upgrade failure: {other}"),
        }
    }
    let relay = reqwest::get(format!("http://127.0.0.1:{port}/sandbox"))
        .await
        .expect("the relay page");
    assert_eq!(relay.status(), 200);
    let policy = relay.headers()["content-security-policy"].to_str().unwrap();
    let ahp = proxy.addr.port();
    assert!(
        policy.contains(&format!(
            "frame-ancestors 'self' http://127.0.0.1:{ahp} https://127.0.0.1:{ahp}"
        )),
        "{policy}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_the_users_alone_and_never_shown_to_the_harness() {
    let config = format!(
        "{}[approval]\nmode = \"always\"\n",
        server("echo", "echo", &[])
    );
    let (proxy, mut harness) = stdio_harness(&config).await;
    let file = proxy.key_file();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    let key = proxy.approval_key().unwrap();
    assert!(
        key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit()),
        "{key}"
    );
    // The server the harness reaches through the proxy is up.
    let mut none = |_: &str, _: &str| String::new();
    let list = harness.request("tools/list", None, &mut none).await;
    assert!(list.response().contains("echo"), "{}", list.response());
    // Neither the harness (the proxy's stderr) nor a launched server (its environment) has it.
    assert!(!proxy.logs().contains(&key), "{}", proxy.logs());
    let servers = common::child_pids(proxy.pid());
    assert!(!servers.is_empty());
    for pid in servers {
        let environment = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let environment = String::from_utf8_lossy(&environment);
        assert!(!environment.contains(&key), "server {pid} has the key");
    }
}

#[test]
fn an_ordered_shutdown_takes_the_key_file_away() {
    let runtime = common::ScratchDir::new("runtime");
    let at = runtime.path().to_str().unwrap();
    let proxy = Proxy::start_on("", "127.0.0.1:0", &[("XDG_RUNTIME_DIR", at)]);
    let file = runtime
        .path()
        .join(format!("ahp-proxy/approval-{}.key", proxy.addr.port()));
    let key = std::fs::read_to_string(&file).expect("the key file");
    // Not in its log either (stderr in a pipe).
    assert!(!proxy.logs().contains(key.trim()), "{}", proxy.logs());
    assert!(proxy.terminate().success());
    assert!(!file.exists(), "{}", file.display());
}

/// A client showing MCP Apps (`mcpApps` declared) connected at `url`, following the session.
async fn apps_client_at(url: &str, client_id: &str) -> common::Watcher {
    let client = common::client_at(url).await;
    let _: Value = client
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "clientId": client_id,
                   "protocolVersions": ["1.0.0"], "capabilities": {"mcpApps": {}}}),
        )
        .await
        .expect("initialize with mcpApps");
    common::Watcher::subscribed(client).await
}

/// `echo` called on `w`'s `mcp://` channel of the echo server: its result, or the error.
async fn echo_on_channel(w: &mut common::Watcher) -> Result<Value, String> {
    w.until("echo", "ready", &mut Vec::new()).await;
    let channel = w.server("echo")["channel"].clone();
    let params = json!({"channel": channel, "name": "echo", "arguments": {"text": "direct"}});
    w.client
        .request::<_, Value>("tools/call", params)
        .await
        .map_err(|e| e.to_string())
}

/// The `mcp://` channel is no way around approval: a tool the policy holds for the harness
/// cannot be called there by a connection without the key; a keyed client's call runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_tool_is_not_called_on_a_channel_without_the_key() {
    let config = format!(
        "{}[approval]\nmode = \"always\"\n",
        server("echo", "echo", &[])
    );
    let proxy = Proxy::start(&config);
    let mut observer = apps_client_at(&proxy.url, "local-process").await;
    let refused = echo_on_channel(&mut observer).await.unwrap_err();
    assert!(
        refused.contains("held for approval") && refused.contains("approval key"),
        "{refused}"
    );
    let mut keyed = apps_client_at(&proxy.approver_url(), "console").await;
    let called = echo_on_channel(&mut keyed).await.unwrap();
    assert_eq!(called["content"][0]["text"], "direct", "{called}");
    // Without a policy that holds it, anyone may call it, as before.
    let open = Proxy::start(&server("echo", "echo", &[]));
    let mut observer = apps_client_at(&open.url, "local-process").await;
    assert!(echo_on_channel(&mut observer).await.is_ok());
}
