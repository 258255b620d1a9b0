//! Two harnesses, one proxy.toml: a `serve --stdio` launched while another copy holds the
//! configured AHP port takes a free port instead (and says so), so both harnesses work; a
//! proxy started by hand on a taken port fails, saying how to pick another.

mod common;

use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use serde_json::json;

use common::{examples, Proxy, ScratchDir, PATIENCE};

/// A free loopback port (free when asked; the first proxy takes it).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Call the echo tool through a harness session on `pipes`; returns the text answered.
async fn echo_through(pipes: common::StdioPipes, text: &str) -> String {
    let session = tokio::time::timeout(PATIENCE, ().serve(pipes))
        .await
        .expect("handshake in time")
        .expect("MCP handshake over stdio");
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": "echo", "arguments": {"text": text}}))
            .expect("params");
    let result = tokio::time::timeout(PATIENCE, session.peer().call_tool(params))
        .await
        .expect("answered in time")
        .expect("the call succeeds");
    let value = serde_json::to_value(&result).expect("json");
    let _ = session.cancel().await;
    value["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_stdio_copy_takes_another_ahp_port_and_both_harnesses_work() {
    let examples = examples();
    let port = free_port();
    let config = format!(
        "[ahp]\nlisten = \"127.0.0.1:{port}\"\n[servers.echo]\ncommand = {examples:?}\nargs = [\"echo\"]\n"
    );
    let (first, first_pipes) = Proxy::start_stdio_as_configured(&config);
    assert_eq!(
        first.addr.port(),
        port,
        "the first copy gets the configured port"
    );
    let (second, second_pipes) = Proxy::start_stdio_as_configured(&config);
    assert_ne!(second.addr.port(), port);
    let said = second.wait_for_log("was not free; serving AHP on port");
    assert!(said.contains("\"level\":\"WARN\""), "{said}");
    assert!(said.contains(&format!("127.0.0.1:{port}")), "{said}");

    // Both are AHP hosts of their own.
    for proxy in [&first, &second] {
        let client = common::initialized_client(proxy, "two-harnesses").await;
        client.ping().await.expect("ping");
    }
    // And both harnesses are served (each proxy exits once its harness hangs up).
    assert_eq!(echo_through(first_pipes, "one").await, "one");
    assert_eq!(echo_through(second_pipes, "two").await, "two");
}

#[test]
fn a_proxy_started_by_hand_on_a_taken_port_says_how_to_pick_another() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let dir = ScratchDir::new("taken");
    let config = dir.path().join("proxy.toml");
    std::fs::write(&config, format!("[ahp]\nlisten = \"{addr}\"\n")).expect("write");
    let output = std::process::Command::new(common::proxy())
        .arg("--config")
        .arg(&config)
        .args(["serve", "--mcp-listen", "127.0.0.1:0"])
        .env_remove("AHP_PROXY_TOKEN")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr}"))
            && stderr.contains("`--listen 127.0.0.1:0` takes any free port"),
        "{stderr}"
    );
}
