//! A status view without writing a client: `ahp-proxy status` (text, JSON, `--watch`), the
//! steering commands (`start`, `stop`, `restart`, `enable`, `disable`), `GET /healthz`, and
//! `check --start`, all through the real binary against a real proxy.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use common::{Proxy, ScratchDir, Watcher, EXAMPLES, PATIENCE};

fn cli(args: &[&str], url: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .args(args)
        .args(["--url", url])
        .env_remove("AHP_PROXY_TOKEN")
        .output()
        .expect("run ahp-proxy")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// An echo server, a server that cannot start, and a plugin with one server.
fn setup() -> (ScratchDir, String) {
    let dir = ScratchDir::new("status");
    let plugin = dir.path().join("plugins/plug");
    std::fs::create_dir_all(&plugin).expect("mkdir");
    std::fs::write(
        plugin.join(".mcp.json"),
        format!("{{\"mcpServers\": {{\"inside\": {{\"command\": {EXAMPLES:?}, \"args\": [\"echo\"]}}}}}}"),
    )
    .expect("write");
    let config = format!(
        "plugin_roots = [{:?}]\n[supervisor]\ncrash_loop_limit = 1\n[servers.echo]\ncommand = {EXAMPLES:?}\nargs = [\"echo\"]\n[servers.broken]\ncommand = \"/nowhere/broken-mcp\"\n",
        dir.path().join("plugins").display().to_string()
    );
    (dir, config)
}

/// The proxy on `setup()`'s config once every server has settled, and a watcher on it.
async fn settled() -> (ScratchDir, Proxy, Watcher) {
    let (dir, config) = setup();
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("echo", "ready", &mut seen).await;
    w.until("inside", "ready", &mut seen).await;
    w.until("broken", "error", &mut seen).await;
    (dir, proxy, w)
}

fn echo_pid(proxy: &Proxy) -> Vec<u32> {
    common::child_pids(proxy.pid())
}

#[tokio::test(flavor = "multi_thread")]
async fn status_shows_the_tree_and_the_steering_commands_act() {
    let (_dir, proxy, mut w) = settled().await;
    let mut seen = Vec::new();
    let url = proxy.url.clone();

    let status = cli(&["status"], &url);
    let shown = text(&status);
    assert_eq!(status.status.code(), Some(1), "a server in error: {shown}");
    assert!(
        shown.starts_with(&format!(
            "ahp-proxy at {url}: 3 servers: 2 ready, 1 error\n"
        )),
        "{shown}"
    );
    assert!(
        shown.contains("echo                 ready  1 tool\n"),
        "{shown}"
    );
    assert!(
        shown.contains("Last failure: cannot start the server: command not found: broken-mcp"),
        "{shown}"
    );
    assert!(shown.contains("plugin plug  [loaded]\n  inside"), "{shown}");

    let json: Value =
        serde_json::from_slice(&cli(&["status", "--json"], &url).stdout).expect("JSON");
    assert_eq!(json["status"], "error");
    let echo = json["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .find(|s| s["name"] == "echo")
        .expect("echo")
        .clone();
    assert_eq!(echo["state"], "ready");
    assert_eq!(echo["tools"], 1);

    let stop = cli(&["stop", "echo"], &url);
    assert_eq!(stop.status.code(), Some(0), "{}", text(&stop));
    assert_eq!(String::from_utf8_lossy(&stop.stdout), "echo  stopped\n");
    w.until("echo", "stopped", &mut seen).await;
    let start = cli(&["start", "echo"], &url);
    assert_eq!(String::from_utf8_lossy(&start.stdout), "echo  ready\n");
    w.until("echo", "ready", &mut seen).await;

    let before = echo_pid(&proxy);
    let restart = cli(&["restart", "echo"], &url);
    assert_eq!(
        String::from_utf8_lossy(&restart.stdout),
        "echo  stopped\necho  ready\n"
    );
    let after = echo_pid(&proxy);
    assert!(
        after.iter().any(|pid| !before.contains(pid)),
        "a new process: {before:?} → {after:?}"
    );

    let disable = cli(&["disable", "plug"], &url);
    assert_eq!(
        String::from_utf8_lossy(&disable.stdout),
        "inside  stopped\n"
    );
    w.until("inside", "stopped", &mut seen).await;
    let enable = cli(&["enable", "plug"], &url);
    assert_eq!(String::from_utf8_lossy(&enable.stdout), "inside  ready\n");

    let start_broken = cli(&["start", "broken"], &url);
    assert_eq!(start_broken.status.code(), Some(1), "it fails again");
    let nothing = cli(&["start", "nope"], &url);
    assert_eq!(nothing.status.code(), Some(2));
    assert!(
        text(&nothing).contains("nothing named \"nope\""),
        "{}",
        text(&nothing)
    );
    let plugin = cli(&["stop", "plug"], &url);
    assert_eq!(plugin.status.code(), Some(2));
    assert!(text(&plugin).contains("is a plugin"), "{}", text(&plugin));
}

#[tokio::test(flavor = "multi_thread")]
async fn status_watch_follows_every_change() {
    let (_dir, config) = setup();
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("echo", "ready", &mut seen).await;
    let mut watch = Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .args(["status", "--watch", "--json", "--url", &proxy.url])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn status --watch");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let state_of = |line: &str| -> String {
        let view: Value = serde_json::from_str(line).expect("one JSON object per line");
        view["servers"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == "echo").cloned())
            .map(|s| s["state"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    let first = rx.recv_timeout(PATIENCE).expect("a first view");
    assert_eq!(state_of(&first), "ready");
    let stop = cli(&["stop", "echo"], &proxy.url);
    assert_eq!(stop.status.code(), Some(0));
    loop {
        let line = rx.recv_timeout(PATIENCE).expect("a view after the change");
        if state_of(&line) == "stopped" {
            break;
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
}

#[tokio::test(flavor = "multi_thread")]
async fn healthz_sums_up_the_proxy_for_service_managers() {
    let (_dir, proxy, _w) = settled().await;
    let health_url = proxy.mcp_url.replace("/mcp", "/healthz");
    let response = reqwest::get(&health_url).await.expect("GET /healthz");
    assert_eq!(response.status(), 200);
    let health: Value = response.json().await.expect("JSON");
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["servers"]["ready"], 2, "{health}");
    assert_eq!(health["servers"]["error"], 1, "{health}");
    assert_eq!(health["containers"]["loaded"], 1, "{health}");
    assert_eq!(health["harnesses"], 0, "{health}");
    let post = reqwest::Client::new()
        .post(&health_url)
        .send()
        .await
        .expect("POST");
    assert_eq!(post.status(), 405);
}

#[test]
fn a_token_protected_proxy_needs_the_token() {
    let proxy = Proxy::start_on(
        "",
        "0.0.0.0:0",
        &[("AHP_PROXY_TOKEN", "status-test-token-0123456789")],
    );
    let refused = cli(&["status"], &proxy.url);
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused).contains("401"), "{}", text(&refused));
    let allowed = Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .args(["status", "--url", &proxy.url])
        .env("AHP_PROXY_TOKEN", "status-test-token-0123456789")
        .output()
        .expect("run");
    assert_eq!(allowed.status.code(), Some(0), "{}", text(&allowed));
    // The token is printed once, asked for: in the URL to paste into VS Code.
    let shown = text(&allowed);
    let (for_vscode, rest): (Vec<&str>, Vec<&str>) = shown
        .lines()
        .partition(|line| line.starts_with("VS Code: paste "));
    assert!(!rest.join("\n").contains("status-test-token"), "{shown}");
    assert_eq!(
        for_vscode,
        [format!(
            "VS Code: paste {}/?tkn=status-test-token-0123456789 into Agents: Add Remote Agent Host…",
            proxy.url
        )]
    );
}

#[test]
fn check_start_runs_every_server_once_and_lists_its_tools() {
    let dir = ScratchDir::new("check-start");
    let config = dir.path().join("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.echo]\ncommand = {EXAMPLES:?}\nargs = [\"echo\"]\n[servers.fail]\ncommand = {EXAMPLES:?}\nargs = [\"fail\"]\n[servers.off]\ncommand = \"x\"\nenabled = false\n"
        ),
    )
    .expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .arg("--config")
        .arg(&config)
        .args(["check", "--start"])
        .output()
        .expect("run");
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(1), "fail failed: {shown}");
    assert!(shown.contains("echo    ready         1: echo\n"), "{shown}");
    assert!(shown.contains("fail    error         -\n"), "{shown}");
    assert!(
        shown.contains("exited with status 1 before the MCP handshake"),
        "{shown}"
    );
    assert!(shown.contains("off     disabled      -\n"), "{shown}");
    assert!(
        shown.contains("2 servers started and stopped again; 1 failed"),
        "{shown}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .arg("--config")
        .arg(&config)
        .args(["check", "--start", "--json"])
        .output()
        .expect("run");
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["serversStarted"], true);
    assert_eq!(report["servers"][0]["name"], "echo");
    assert_eq!(report["servers"][0]["tools"][0], "echo");
}
