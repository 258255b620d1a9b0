//! Every listener seen from outside: the View origin bounded like the others (a flood on it
//! under a low descriptor limit leaves `/healthz` and the AHP endpoint answering), its
//! configured port, and the MCP front's `Host` guard against a malformed name.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use common::{Proxy, PATIENCE};

/// The View origin's `http://IP:PORT`, from the console's start-up log line.
fn views_url(proxy: &Proxy) -> String {
    let line = proxy.wait_for_log("console: open this URL");
    let event: Value = serde_json::from_str(&line).expect("a JSON log line");
    event["fields"]["views"]
        .as_str()
        .expect("the View origin's URL")
        .to_string()
}

/// A raw request's status line and the rest, read until the peer closes.
fn exchange(addr: &str, request: &str) -> String {
    let mut socket = TcpStream::connect(addr).expect("connect");
    socket.set_read_timeout(Some(PATIENCE)).expect("timeout");
    socket.write_all(request.as_bytes()).expect("send");
    let mut answer = Vec::new();
    let _ = socket.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_on_the_view_origin_leaves_the_other_listeners_answering() {
    // 256 descriptors in all; 400 peers each send half a request to the View origin and
    // hold it, with the handshake deadline ten minutes away.
    let proxy =
        Proxy::start_with_descriptor_limit("[limits]\nhandshake_timeout_ms = 600000\n", 256);
    let views = views_url(&proxy);
    let views_addr: std::net::SocketAddr = views
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let mut held = Vec::new();
    for _ in 0..400 {
        // A listener that no longer accepts fills its queue, and then a connection does not
        // complete: the flood is as large as it can get.
        let Ok(mut peer) = TcpStream::connect_timeout(&views_addr, Duration::from_secs(1)) else {
            break;
        };
        let _ = peer.write_all(b"GET /sandbox HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        held.push(peer);
    }
    let health = proxy.mcp_url.replace("/mcp", "/healthz");
    let answer = tokio::time::timeout(PATIENCE, reqwest::get(&health))
        .await
        .expect("/healthz answered while the View origin is flooded")
        .expect("GET /healthz");
    assert_eq!(answer.status(), 200);
    let client = tokio::time::timeout(
        PATIENCE,
        common::initialized_client(&proxy, "after-the-flood"),
    )
    .await
    .expect("the AHP endpoint answered while the View origin is flooded");
    client.shutdown().await;
    let logs = proxy.logs();
    assert!(
        logs.contains("descriptor limit 256"),
        "the limits derived from RLIMIT_NOFILE are said: {logs}"
    );
    drop(held);
}

#[test]
fn the_view_origin_listens_on_the_configured_port() {
    // A port the OS just handed out (and took back).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let proxy = Proxy::start(&format!("[ahp]\nviews_port = {port}\n"));
    assert_eq!(views_url(&proxy), format!("http://127.0.0.1:{port}"));
    let answer = exchange(
        &format!("127.0.0.1:{port}"),
        "GET /sandbox HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn the_mcp_front_refuses_a_host_with_an_unclosed_bracket() {
    let proxy = Proxy::start("");
    let addr = proxy
        .mcp_url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let ask = |host: &str| {
        exchange(
            &addr,
            &format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
    };
    for bad in ["[::1", "[::1]x", "[::1]:", "localhost:"] {
        let answer = ask(bad);
        assert!(answer.starts_with("HTTP/1.1 403"), "{bad}: {answer}");
    }
    for good in ["[::1]", "[::1]:8766", "localhost", "127.0.0.1:80"] {
        let answer = ask(good);
        assert!(answer.starts_with("HTTP/1.1 200"), "{good}: {answer}");
    }
    // Two Origin headers, the first a loopback one: refused.
    let answer = exchange(
        &addr,
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nOrigin: http://localhost\r\nOrigin: http://evil.example\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
}

/// Issue 49: `GET /metrics` on the MCP listener, in the OpenTelemetry MCP conventions: each
/// forwarded call timed on both sides (`error_type` `tool_error` for a result with
/// `isError`), the servers by state, the harnesses.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_time_each_call_on_both_sides_in_the_opentelemetry_mcp_conventions() {
    let proxy = Proxy::start(&common::server("features", "features", &[]));
    let mut w = common::Watcher::open(&proxy).await;
    w.until("features", "ready", &mut Vec::new()).await;
    let http = reqwest::Client::new();
    let session = common::http_session::RawSession::open(&http, &proxy.mcp_url).await;
    for (id, arguments) in [
        (2, serde_json::json!({"text": "x"})),
        (3, serde_json::json!({})),
    ] {
        let answered = session
            .post(
                serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "echo", "arguments": arguments}}),
            )
            .await
            .expect("an answer");
        assert!(answered.status().is_success());
        let _ = answered.text().await;
    }
    let scraped = http
        .get(proxy.mcp_url.replace("/mcp", "/metrics"))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(scraped.status(), 200);
    let kind = scraped.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let text = scraped.text().await.unwrap();
    for line in [
        r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="echo"} 1"#,
        r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="echo",error_type="tool_error"} 1"#,
        r#"mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="echo",mcp_server_name="features"} 1"#,
        r#"ahp_proxy_servers{state="ready"} 1"#,
        "ahp_proxy_harnesses 1",
    ] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
}
