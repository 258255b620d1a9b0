//! The MCP HTTP front's access token through the real binary: with `[mcp] token` (or
//! `AHP_PROXY_MCP_TOKEN`, which wins) every request to `/mcp` and `/mcp/<server>` presents
//! `Authorization: Bearer <token>` or gets `401` with `WWW-Authenticate` naming the RFC 9728
//! metadata; `/healthz` and the metadata stay open; a listener beyond loopback does not start
//! without a token; the token is never in a log line, an answer or `check`'s output.

mod common;

use common::http_session::{post, RawSession};
use common::{Proxy, PATIENCE};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

const TOKEN: &str = "mcp-front-secret-0123456789";
const OTHER: &str = "another-secret-9876543210";

fn config(token: Option<&str>) -> String {
    let mut text = String::new();
    if let Some(token) = token {
        text.push_str(&format!("[mcp]\ntoken = {token:?}\n"));
    }
    text.push_str(&common::server("echo", "echo", &[]));
    text
}

/// `http://127.0.0.1:<port>` of the MCP front.
fn base(proxy: &Proxy) -> String {
    proxy.mcp_url.trim_end_matches("/mcp").to_string()
}

/// A reqwest client that sends `Authorization: Bearer <token>` with every request.
fn bearing(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {token}").parse().expect("a header value");
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("a client")
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
}

/// The JSON-RPC message answering `id` in a response: plain JSON or an event stream.
async fn answer(response: reqwest::Response, id: u64) -> Value {
    let text = response.text().await.expect("a body");
    if let Ok(value) = serde_json::from_str::<Value>(&text) {
        return value;
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id} in {text}"))
}

/// A `401` as the MCP authorization spec asks: the challenge naming `endpoint`'s metadata,
/// a JSON-RPC error without an id, neither holding a token.
async fn assert_refused(response: reqwest::Response, base: &str, endpoint: &str, wrong: bool) {
    assert_eq!(response.status(), 401);
    let challenge = response
        .headers()
        .get("www-authenticate")
        .expect("a WWW-Authenticate header")
        .to_str()
        .unwrap()
        .to_string();
    let mut want = format!(
        "Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource{endpoint}\""
    );
    if wrong {
        want.push_str(", error=\"invalid_token\"");
    }
    assert_eq!(challenge, want);
    let body = response.text().await.unwrap();
    let value: Value = serde_json::from_str(&body).expect("a JSON body");
    assert_eq!(value["jsonrpc"], "2.0");
    assert_eq!(value["id"], Value::Null, "{body}");
    assert!(value["error"]["message"].is_string(), "{body}");
    assert!(!body.contains(TOKEN) && !body.contains(OTHER), "{body}");
}

/// `echo` called in an initialized session, its text.
async fn echoed(session: &RawSession, text: &str) -> String {
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "echo", "arguments": {"text": text}}});
    let response = session.post(call).await.unwrap();
    assert_eq!(response.status(), 200);
    let answer = answer(response, 2).await;
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {answer}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_token_every_mcp_request_presents_it() {
    let proxy = Proxy::start(&config(Some(TOKEN)));
    let base = base(&proxy);
    let http = reqwest::Client::new();
    let echo_url = format!("{}/echo", proxy.mcp_url);
    // Without it: 401 on both endpoints and every method, before any session.
    let bare = post(&http, &proxy.mcp_url, None, initialize())
        .await
        .unwrap();
    assert_refused(bare, &base, "/mcp", false).await;
    let bare = post(&http, &echo_url, None, initialize()).await.unwrap();
    assert_refused(bare, &base, "/mcp/echo", false).await;
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let bare = http
            .request(method, &proxy.mcp_url)
            .header("mcp-session-id", "0123")
            .send()
            .await
            .unwrap();
        assert_refused(bare, &base, "/mcp", false).await;
    }
    // A server that is not declared is not told apart before the token.
    let unknown = post(
        &http,
        &format!("{}/nobody", proxy.mcp_url),
        None,
        initialize(),
    )
    .await
    .unwrap();
    assert_refused(unknown, &base, "/mcp/nobody", false).await;
    // With a wrong one: 401, `invalid_token`.
    let wrong = post(&bearing(OTHER), &proxy.mcp_url, None, initialize())
        .await
        .unwrap();
    assert_refused(wrong, &base, "/mcp", true).await;
    // A session opened with the token cannot be used without it.
    let session = RawSession::open(&bearing(TOKEN), &proxy.mcp_url).await;
    let borrowed = post(
        &http,
        &proxy.mcp_url,
        Some(&session.id),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    )
    .await
    .unwrap();
    assert_refused(borrowed, &base, "/mcp", false).await;
    // With it: initialize and a tool call, on both endpoints.
    assert_eq!(echoed(&session, "through /mcp").await, "through /mcp");
    let own = RawSession::open(&bearing(TOKEN), &echo_url).await;
    assert_eq!(echoed(&own, "through /mcp/echo").await, "through /mcp/echo");
    assert_eq!(own.delete().await.status(), 200);
    // `/healthz` stays open for service managers.
    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    // `/metrics` does not (it names servers and tools): the token, as `/mcp` asks.
    let metrics = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(metrics.status(), 401);
    let scraped = (bearing(TOKEN).get(format!("{base}/metrics")).send().await).unwrap();
    assert_eq!(scraped.status(), 200);
    // The token is in no log line (the start-up line says one is set).
    proxy.wait_for_log("MCP endpoint listening");
    let logs = proxy.logs();
    assert!(!logs.contains(TOKEN), "{logs}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_protected_resource_metadata_names_each_endpoint() {
    let proxy = Proxy::start(&config(Some(TOKEN)));
    let base = base(&proxy);
    let http = reqwest::Client::new();
    for (path, resource) in [
        ("/.well-known/oauth-protected-resource", "/mcp"),
        ("/.well-known/oauth-protected-resource/mcp", "/mcp"),
        (
            "/.well-known/oauth-protected-resource/mcp/echo",
            "/mcp/echo",
        ),
    ] {
        // Open: a client reads it to learn how to authenticate.
        let response = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let document: Value = response.json().await.unwrap();
        assert_eq!(
            document,
            json!({"resource": format!("{base}{resource}"), "bearer_methods_supported": ["header"]}),
            "{path}"
        );
    }
    // Without a token nothing is protected, and there is no metadata; MCP answers as before.
    let open = Proxy::start(&config(None));
    let path = "/.well-known/oauth-protected-resource/mcp";
    let open_base = open.mcp_url.trim_end_matches("/mcp").to_string();
    let response = http.get(format!("{open_base}{path}")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let session = RawSession::open(&http, &open.mcp_url).await;
    assert_eq!(echoed(&session, "open").await, "open");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_token_wins_over_the_config() {
    let proxy = Proxy::start_mcp_on(
        &config(Some(OTHER)),
        "127.0.0.1:0",
        &[("AHP_PROXY_MCP_TOKEN", TOKEN)],
    );
    let base = base(&proxy);
    let from_file = post(&bearing(OTHER), &proxy.mcp_url, None, initialize())
        .await
        .unwrap();
    assert_refused(from_file, &base, "/mcp", true).await;
    let session = RawSession::open(&bearing(TOKEN), &proxy.mcp_url).await;
    assert_eq!(echoed(&session, "env").await, "env");
}

#[test]
fn beyond_loopback_the_mcp_front_does_not_start_without_a_token() {
    let dir = common::ScratchDir::new("mcp-no-token");
    let config_path = dir.path().join("proxy.toml");
    std::fs::write(&config_path, config(None)).unwrap();
    let mut child = std::process::Command::new(common::proxy())
        .arg("--config")
        .arg(&config_path)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--mcp-listen",
            "0.0.0.0:0",
        ])
        .env_remove("AHP_PROXY_TOKEN")
        .env_remove("AHP_PROXY_MCP_TOKEN")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run ahp-proxy");
    // Its stderr, read to the end in a thread: a proxy that served instead never ends it
    // (PATIENCE is only the hang guard).
    let mut pipe = child.stderr.take().expect("stderr is piped");
    let (done, read) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
        let _ = done.send(text);
    });
    let Ok(stderr) = read.recv_timeout(PATIENCE) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the proxy started on 0.0.0.0 without a token");
    };
    let status = child.wait().expect("its exit status");
    assert!(!status.success());
    assert!(
        stderr.contains("not a loopback address")
            && stderr.contains("AHP_PROXY_MCP_TOKEN")
            && stderr.contains("mcp.token"),
        "{stderr}"
    );
    assert!(!stderr.contains("MCP endpoint listening"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn beyond_loopback_with_a_token_an_rmcp_client_calls_a_tool() {
    let proxy = Proxy::start_mcp_on(
        &config(None),
        "0.0.0.0:0",
        &[("AHP_PROXY_MCP_TOKEN", TOKEN)],
    );
    assert!(
        proxy.mcp_url.starts_with("http://127.0.0.1:"),
        "{}",
        proxy.mcp_url
    );
    let bare = post(&reqwest::Client::new(), &proxy.mcp_url, None, initialize())
        .await
        .unwrap();
    assert_refused(bare, &base(&proxy), "/mcp", false).await;
    // rmcp's streamable HTTP client, the token as its bearer header.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(proxy.mcp_url.clone()).auth_header(TOKEN),
    );
    let client = tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("handshake in time")
        .expect("the MCP handshake with the token");
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": "echo", "arguments": {"text": "hello"}})).unwrap();
    let result = tokio::time::timeout(PATIENCE, client.peer().call_tool(params))
        .await
        .expect("in time")
        .expect("a result");
    let result = serde_json::to_value(&result).unwrap();
    assert_eq!(result["content"][0]["text"], "hello", "{result}");
    // Without the token, rmcp's client does not get through the handshake.
    let transport = StreamableHttpClientTransport::from_uri(proxy.mcp_url.clone());
    let refused = tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("refused in time");
    assert!(refused.is_err());
    let _ = client.cancel().await;
}

#[test]
fn check_says_a_token_is_required_and_never_shows_it() {
    let dir = common::ScratchDir::new("mcp-check");
    let config_path = dir.path().join("proxy.toml");
    std::fs::write(&config_path, config(Some(OTHER))).unwrap();
    let output = std::process::Command::new(common::proxy())
        .arg("--config")
        .arg(&config_path)
        .arg("check")
        .env("AHP_PROXY_MCP_TOKEN", TOKEN)
        .output()
        .expect("run ahp-proxy check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains("/mcp (and /mcp/<server>); token required"),
        "{stdout}"
    );
    for secret in [TOKEN, OTHER] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{stdout}{stderr}"
        );
    }
    // Beyond loopback without one, it says the proxy would not start.
    std::fs::write(
        &config_path,
        format!("[mcp]\nlisten = \"0.0.0.0:8766\"\n{}", config(None)),
    )
    .unwrap();
    let output = std::process::Command::new(common::proxy())
        .arg("--config")
        .arg(&config_path)
        .arg("check")
        .env_remove("AHP_PROXY_MCP_TOKEN")
        .output()
        .expect("run ahp-proxy check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "will not start: not loopback and no token (set AHP_PROXY_MCP_TOKEN or mcp.token)"
        ),
        "{stdout}"
    );
}
