//! A status view without writing a client: `ahp-proxy status` (text, JSON, `--watch`), the
//! steering commands (`start`, `stop`, `restart`, `enable`, `disable`), `GET /healthz`, and
//! `check --start`, all through the real binary against a real proxy.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use common::{examples, Proxy, ScratchDir, Watcher, PATIENCE};

fn cli(args: &[&str], url: &str) -> Output {
    Command::new(common::proxy())
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
    let examples = examples();
    let dir = ScratchDir::new("status");
    let plugin = dir.path().join("plugins/plug");
    std::fs::create_dir_all(&plugin).expect("mkdir");
    std::fs::write(
        plugin.join(".mcp.json"),
        format!("{{\"mcpServers\": {{\"inside\": {{\"command\": {examples:?}, \"args\": [\"echo\"]}}}}}}"),
    )
    .expect("write");
    let config = format!(
        "plugin_roots = [{:?}]\n[supervisor]\ncrash_loop_limit = 1\n[servers.echo]\ncommand = {examples:?}\nargs = [\"echo\"]\n[servers.broken]\ncommand = \"/nowhere/broken-mcp\"\n",
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
    let typo = cli(&["stop", "ech"], &url);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        text(&typo).contains("nothing named \"ech\"")
            && text(&typo).contains("did you mean \"echo\"?"),
        "{}",
        text(&typo)
    );

    // Steering from the terminal is said on the proxy's: the action and who asked.
    let line = proxy.wait_for_log("session/mcpServerStopRequested");
    assert!(line.contains("steering requested"), "{line}");
    assert!(line.contains("ahp-proxy-cli-"), "{line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_watch_follows_every_change() {
    let (_dir, config) = setup();
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("echo", "ready", &mut seen).await;
    let mut watch = Command::new(common::proxy())
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

/// The terminal follows the default session by the name the proxy publishes it under,
/// `<provider>:/default`, whatever provider is configured.
#[test]
fn status_follows_the_session_of_a_configured_provider() {
    let examples = examples();
    let proxy = Proxy::start(&format!(
        "[agent]\nprovider = \"my.agent+2-x\"\n[servers.echo]\ncommand = {examples:?}\nargs = [\"echo\"]\n"
    ));
    let status = cli(&["status", "--json"], &proxy.url);
    let shown = text(&status);
    assert!(status.status.code().is_some_and(|c| c < 2), "{shown}");
    let json: Value = serde_json::from_slice(&status.stdout).expect("JSON");
    let servers = json["servers"].as_array().expect("servers");
    assert!(servers.iter().any(|s| s["name"] == "echo"), "{shown}");
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
    let allowed = Command::new(common::proxy())
        .args(["status", "--url", &proxy.url])
        .env("AHP_PROXY_TOKEN", "status-test-token-0123456789")
        .output()
        .expect("run");
    assert_eq!(allowed.status.code(), Some(0), "{}", text(&allowed));
    // The token is printed where asked for: in the URLs to open the console and to paste
    // into VS Code.
    let shown = text(&allowed);
    let (urls, rest): (Vec<&str>, Vec<&str>) = shown.lines().partition(|line| {
        line.starts_with("VS Code: paste ") || line.starts_with("console: open ")
    });
    assert!(!rest.join("\n").contains("status-test-token"), "{shown}");
    let (for_vscode, for_console): (Vec<&str>, Vec<&str>) = urls
        .into_iter()
        .partition(|line| line.starts_with("VS Code"));
    assert_eq!(
        for_console,
        [format!(
            "console: open http://{}/?token=status-test-token-0123456789",
            proxy.addr
        )]
    );
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
    let examples = examples();
    let dir = ScratchDir::new("check-start");
    let config = dir.path().join("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.echo]\ncommand = {examples:?}\nargs = [\"echo\"]\n[servers.fail]\ncommand = {examples:?}\nargs = [\"fail\"]\n[servers.off]\ncommand = \"x\"\nenabled = false\n"
        ),
    )
    .expect("write");
    let output = Command::new(common::proxy())
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

    let output = Command::new(common::proxy())
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

/// What a hostile endpoint does to a client command.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// Accepts TCP and never says anything (no answer to the upgrade).
    Silent,
    /// Completes the upgrade, then answers every frame with text that is not JSON.
    Garbage,
    /// Relays to a real proxy, but drops the client's messages with this method.
    Drop(&'static str),
    /// Relays to a real proxy, but answers this method's request under another id.
    WrongId(&'static str),
}

/// A hostile endpoint in front of the real proxy at `real`: its `ws://` URL.
async fn hostile(mode: Hostile, real: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(misbehave(tcp, mode, real.clone()));
        }
    });
    url
}

async fn misbehave(tcp: tokio::net::TcpStream, mode: Hostile, real: String) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    if let Hostile::Silent = mode {
        let _held = tcp;
        return std::future::pending::<()>().await;
    }
    let Ok(mut client) = tokio_tungstenite::accept_async(tcp).await else {
        return;
    };
    if let Hostile::Garbage = mode {
        while let Some(Ok(_)) = client.next().await {
            if client.send(Message::text("}{ not JSON")).await.is_err() {
                return;
            }
        }
        return;
    }
    let Ok((mut upstream, _)) = tokio_tungstenite::connect_async(real.as_str()).await else {
        return;
    };
    let mut renamed: Vec<Value> = Vec::new();
    loop {
        tokio::select! {
            from_client = client.next() => {
                let Some(Ok(message)) = from_client else { return };
                if let Message::Text(text) = &message {
                    let value: Value = serde_json::from_str(text).unwrap_or_default();
                    match mode {
                        Hostile::Drop(method) if value["method"] == method => continue,
                        Hostile::WrongId(method) if value["method"] == method => {
                            renamed.push(value["id"].clone());
                        }
                        _ => {}
                    }
                }
                if upstream.send(message).await.is_err() {
                    return;
                }
            }
            from_proxy = upstream.next() => {
                let Some(Ok(mut message)) = from_proxy else { return };
                if let Message::Text(text) = &message {
                    let mut value: Value = serde_json::from_str(text).unwrap_or_default();
                    if renamed.contains(&value["id"]) {
                        value["id"] = (value["id"].as_i64().unwrap_or_default() + 1000).into();
                        message = Message::text(value.to_string());
                    }
                }
                if client.send(message).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Run a client command against `url` to its end (killed and failed after [`PATIENCE`]).
async fn cli_within(args: &[&str], url: &str) -> Output {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .args(args)
        .args(["--url", url])
        .env_remove("AHP_PROXY_TOKEN")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(PATIENCE, run)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "`{}` against {url} still running after {PATIENCE:?}",
                args.join(" ")
            )
        })
        .expect("run ahp-proxy")
}

#[tokio::test(flavor = "multi_thread")]
async fn client_commands_give_up_on_an_endpoint_that_stalls_at_any_step() {
    let (_dir, proxy, _w) = settled().await;
    let real = proxy.url.clone();
    // A listener whose accept queue is full: the TCP connection itself never completes.
    let full = tokio::net::TcpSocket::new_v4().expect("socket");
    full.bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let full_addr = full.local_addr().expect("addr");
    let full = full.listen(0).expect("listen");
    let _filler = std::net::TcpStream::connect(full_addr).expect("fill the queue");
    let mut cases = vec![(
        vec!["status"],
        format!("ws://{full_addr}"),
        "the TCP connection",
    )];
    for (mode, step) in [
        (Hostile::Silent, "the WebSocket upgrade"),
        (Hostile::Garbage, "`initialize`"),
        (Hostile::Drop("initialize"), "`initialize`"),
        (Hostile::WrongId("initialize"), "`initialize`"),
        (Hostile::Drop("subscribe"), "`subscribe`"),
    ] {
        for command in [vec!["status"], vec!["stop", "echo"]] {
            cases.push((command, hostile(mode, real.clone()).await, step));
        }
    }
    // Everything answered but the request itself: its echo never comes.
    cases.push((
        vec!["stop", "echo"],
        hostile(Hostile::Drop("dispatchAction"), real.clone()).await,
        "session/mcpServerStopRequested",
    ));
    let runs = cases.iter().map(|(args, url, _)| cli_within(args, url));
    let outputs = futures_util::future::join_all(runs).await;
    for ((args, url, step), output) in cases.iter().zip(outputs) {
        let shown = text(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?} at {url}: {shown}");
        assert!(
            shown.contains(step),
            "{args:?} at {url} names {step:?}: {shown}"
        );
    }
    drop(full);
}

#[tokio::test(flavor = "multi_thread")]
async fn remote_text_reaches_the_terminal_escaped() {
    let dir = ScratchDir::new("escapes");
    let script = dir.path().join("hostile-server");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf 'boom\\033[2J\\rahp-proxy at ws://evil: 0 servers \\342\\200\\256txt\\n' >&2\nexit 1\n",
    )
    .expect("write");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let proxy = Proxy::start(&format!(
        "[supervisor]\ncrash_loop_limit = 1\n[servers.hostile]\ncommand = {:?}\n",
        script.display().to_string()
    ));
    let mut w = Watcher::open(&proxy).await;
    w.until("hostile", "error", &mut Vec::new()).await;
    let status = cli(&["status"], &proxy.url);
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(shown.contains("boom"), "{shown}");
    assert!(
        !shown.contains('\u{1b}'),
        "an escape sequence reached the terminal: {shown:?}"
    );
    assert!(
        !shown.contains('\r'),
        "a carriage return reached the terminal: {shown:?}"
    );
    assert!(shown.contains("boom\\u{1b}[2J\\r"), "{shown}");
    assert!(shown.contains("\\u{202e}txt"), "{shown}");
    // JSON too: the same value, nothing raw that a terminal would act on.
    let json = cli(&["status", "--json"], &proxy.url);
    let json = String::from_utf8_lossy(&json.stdout);
    assert!(
        !json
            .chars()
            .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
        "{json:?}"
    );
    let value: Value = serde_json::from_str(&json).expect("JSON");
    assert!(value.to_string().contains("boom\\u001b[2J"), "{value}");
}

/// Against a proxy with an access token, `status` without it, or with another, says the
/// token is missing or wrong (the upgrade's 401), not that no proxy may be running there.
#[test]
fn status_without_the_token_says_the_token_is_missing_or_wrong() {
    let proxy = Proxy::start_on(
        "",
        "127.0.0.1:0",
        &[("AHP_PROXY_TOKEN", "the-right-token-0123456789")],
    );
    for token in [None, Some("a-wrong-token-0123456789")] {
        let mut command = Command::new(common::proxy());
        command.args(["status", "--url", &proxy.url]);
        match token {
            Some(token) => command.env("AHP_PROXY_TOKEN", token),
            None => command.env_remove("AHP_PROXY_TOKEN"),
        };
        let output = command.output().expect("run ahp-proxy status");
        let shown = text(&output);
        assert_eq!(output.status.code(), Some(2), "{shown}");
        assert!(
            shown.contains("the access token is missing or wrong"),
            "{token:?}: {shown}"
        );
        assert!(shown.contains("AHP_PROXY_TOKEN"), "{shown}");
        assert!(!shown.contains("is ahp-proxy running there"), "{shown}");
        assert!(!shown.contains("the-right-token"), "{shown}");
    }
}
