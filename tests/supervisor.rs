//! The supervisor end to end: the real binary launches real child processes (the bundled
//! example servers), and the official AHP client watches their lifecycle and steers them.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{
    alive, examples, server, HttpExampleServer, Proxy, Raw, ScratchDir, Watcher, DEFAULT_SESSION,
    PATIENCE,
};
use serde_json::{json, Value};

/// `[supervisor]` timings that keep crash tests short.
const FAST: &str = "[supervisor]\nrestart_delay_ms = 50\nrestart_delay_max_ms = 200\ncrash_loop_limit = 3\nstop_grace_ms = 500\n";

/// `(pid, command line)` of every process whose parent is `parent`.
fn children_of(parent: u32) -> Vec<(u32, String)> {
    common::child_pids(parent)
        .into_iter()
        .map(|pid| {
            let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ");
            (pid, cmdline)
        })
        .collect()
}

async fn wait_until_gone(pids: &[u32]) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || tokio::time::Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_come_up_ready_and_a_missing_command_is_an_error_without_secrets() {
    let config = format!(
        "{FAST}{}{}[servers.missing]\ncommand = \"/no/secret-dir/acme-server\"\n",
        server("echo", "echo", &[]),
        server("app", "app", &[]),
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("echo", "ready", &mut seen).await;
    w.until("app", "ready", &mut seen).await;
    let error = w.until("missing", "error", &mut seen).await;
    let message = error["error"]["message"].as_str().unwrap();
    // On a busy machine it may already have given up by the time the others are ready.
    let kind = error["error"]["errorType"].as_str().unwrap();
    assert!(
        kind == "spawn" || (kind == "crashLoop" && message.contains("(spawn)")),
        "{kind}: {message}"
    );
    // What to fix: the program's file name; never where it was looked for.
    assert!(
        message.contains("command not found: acme-server"),
        "{message}"
    );
    assert!(!message.contains("secret-dir"), "{message}");
    // A spawn failure is retried with backoff like any failure, then given up on.
    let error = w.until_crash_loop("missing", &mut seen).await;
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("failed 3 times in a row"));
}

/// The bundled `plugins-examples/` (what `proxy.toml` serves): each manifest names
/// `${AHP_PROXY_EXAMPLES}`, which the proxy sets to the example-server binary next to its own.
#[tokio::test(flavor = "multi_thread")]
async fn the_bundled_examples_run_the_example_server_next_to_the_proxy() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins-examples");
    let data = ScratchDir::new("bundled");
    let config = format!(
        "plugin_roots = [{:?}]\nmanifests = [{:?}]\ndata_dir = {:?}\n",
        examples.display().to_string(),
        examples.join("plugins.json").display().to_string(),
        data.path().display().to_string(),
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    for name in [
        "notes",
        "lint",
        "clock",
        "release-dashboard",
        "scratch-notes",
        "flaky",
    ] {
        w.until(name, "ready", &mut seen).await;
    }
    // The one that fails on purpose fails as itself, not as a missing program.
    let error = w.until("misconfigured", "error", &mut seen).await;
    let message = error["error"]["message"].as_str().unwrap();
    assert_eq!(error["error"]["errorType"], "startFailed", "{message}");
    assert!(
        message.contains("example-server: refusing to start"),
        "{message}"
    );
}

impl Watcher {
    /// Wait for the crash-loop error of `name`.
    async fn until_crash_loop(&mut self, name: &str, seen: &mut Vec<String>) -> Value {
        loop {
            let state = self.until(name, "error", seen).await;
            if state["error"]["errorType"] == "crashLoop" {
                return state;
            }
            // Not yet: wait for the next attempt.
            self.until(name, "starting", seen).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_is_an_error_with_exit_status_and_stderr_then_a_restart() {
    let dir = ScratchDir::new("crash-once");
    let marker = dir.path().join("crashed");
    let config = format!(
        "{FAST}{}",
        server(
            "flaky",
            "echo",
            &[
                "--exit-after-ms",
                "300",
                "--exit-code",
                "7",
                "--once",
                marker.to_str().unwrap()
            ]
        ),
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("flaky", "ready", &mut seen).await;
    let error = w.until("flaky", "error", &mut seen).await;
    let message = error["error"]["message"].as_str().unwrap();
    assert_eq!(error["error"]["errorType"], "exited");
    assert!(message.starts_with("exited with status 7"), "{message}");
    assert!(
        message.contains("last stderr lines:\nexample-server: exiting with status 7"),
        "{message}"
    );
    w.until("flaky", "starting", &mut seen).await;
    w.until("flaky", "ready", &mut seen).await;
    // (`exited`, not `startFailed`: it was running when it crashed.)
    assert!(
        seen.ends_with(&[
            "flaky error".into(),
            "flaky starting".into(),
            "flaky ready".into()
        ]),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_loop_stops_at_the_limit_until_a_start_request() {
    let config = format!(
        "{FAST}{}",
        server("loop", "echo", &["--exit-after-ms", "100"])
    );
    // The lifecycle's own account of each restart it schedules (a debug line).
    let proxy = Proxy::start_on(
        &config,
        "127.0.0.1:0",
        &[("RUST_LOG", "info,ahp_proxy::supervisor::server=debug")],
    );
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    let error = w.until_crash_loop("loop", &mut seen).await;
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("failed 3 times in a row (exited)"),
        "{message}"
    );
    assert!(message.contains("exited with status 3"), "{message}");
    // A start request tries again (and it comes up before crashing again).
    let id = w.id("loop");
    w.dispatch(json!({"type": "session/mcpServerStartRequested", "id": id}))
        .await;
    seen.clear();
    w.until("loop", "ready", &mut seen).await;
    assert_eq!(seen.first().map(String::as_str), Some("loop starting"));
    // Given up, no restart followed on its own: the lifecycle logs a restart when it
    // schedules one, before it takes the next request, so everything it scheduled before
    // the run our request started is in the log above that run's "server ready" (the 4th).
    let of_loop = |line: &str, message: &str| {
        serde_json::from_str::<Value>(line).is_ok_and(|event| {
            event["fields"]["message"] == message
                && (event["fields"]["server"] == "loop" || event["span"]["name"] == "loop")
        })
    };
    let before_ours = proxy.log_until(4, |line| of_loop(line, "server ready"));
    let restarts = before_ours
        .iter()
        .filter(|line| of_loop(line, "restarting after a delay"))
        .count();
    assert_eq!(
        restarts,
        2,
        "one restart after each of the first two failures, none after the crash loop:\n{}",
        before_ours.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn toggles_and_start_stop_requests_are_obeyed_and_answered() {
    let config = format!(
        "{FAST}{}{}",
        server("a", "echo", &[]),
        server("b", "clock", &[])
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("a", "ready", &mut seen).await;
    w.until("b", "ready", &mut seen).await;
    let a = w.id("a");
    let pid_of = |marker: &str| {
        children_of(proxy.pid())
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(marker))
            .map(|(pid, _)| pid)
            .collect::<Vec<_>>()
    };
    let echo_pids = pid_of("example-server echo");
    assert_eq!(echo_pids.len(), 1);

    // Toggle off: stopped, process gone; b untouched.
    w.dispatch(json!({"type": "session/customizationToggled", "id": a,
        "enablement": [{"kind": "session", "enabled": false}]}))
        .await;
    seen.clear();
    w.until("a", "stopped", &mut seen).await;
    assert!(wait_until_gone(&echo_pids).await.is_empty());
    assert_eq!(
        w.server("a")["enablement"],
        json!([{"kind": "session", "enabled": false}])
    );

    // Toggle on again: starting → ready.
    w.dispatch(json!({"type": "session/customizationToggled", "id": a,
        "enablement": [{"kind": "session", "enabled": true}]}))
        .await;
    seen.clear();
    w.until("a", "ready", &mut seen).await;
    assert!(seen.contains(&"a starting".to_string()), "{seen:?}");

    // Stop request: the optimistic `stopped` is confirmed by the host.
    w.dispatch(json!({"type": "session/mcpServerStopRequested", "id": a}))
        .await;
    seen.clear();
    w.until("a", "stopped", &mut seen).await;
    // Start request: starting → ready.
    w.dispatch(json!({"type": "session/mcpServerStartRequested", "id": a}))
        .await;
    seen.clear();
    w.until("a", "ready", &mut seen).await;
    // A start request on a ready server is answered with `ready`, without a restart.
    let before = pid_of("example-server echo");
    w.dispatch(json!({"type": "session/mcpServerStartRequested", "id": a}))
        .await;
    seen.clear();
    w.until("a", "starting", &mut seen).await; // the client's own optimistic echo
    w.until("a", "ready", &mut seen).await;
    assert_eq!(pid_of("example-server echo"), before);
    assert!(!seen.iter().any(|s| s.starts_with("b ")), "{seen:?}");
    assert_eq!(w.server("b")["state"], json!({"kind": "ready"}));
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn mcp_json(b_arg: &str) -> String {
    let examples = examples();
    let args = |extra: &str| {
        let mut v = vec!["echo", "--exit-code"];
        v.push(extra);
        serde_json::to_string(&v).unwrap()
    };
    format!(
        "{{\"mcpServers\": {{\n  \"a\": {{\"command\": {examples:?}, \"args\": {}}},\n  \"b\": {{\"command\": {examples:?}, \"args\": {}}}\n}}}}\n",
        args("11"),
        args(b_arg)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_edit_restarts_only_the_edited_server_and_removal_stops_it() {
    let examples = examples();
    let dir = ScratchDir::new("edit");
    let plugin = dir.path().join("plugins/kit");
    write(
        &plugin.join(".plugin/plugin.json"),
        "{\"name\": \"kit\", \"version\": \"1.0.0\"}",
    );
    write(&plugin.join(".mcp.json"), &mcp_json("12"));
    let config = format!(
        "plugin_roots = [{:?}]\n{FAST}[limits]\nwatch_debounce_ms = 50\n",
        dir.path().join("plugins").display().to_string()
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("a", "ready", &mut seen).await;
    w.until("b", "ready", &mut seen).await;
    let pid_with = |code: &str| {
        children_of(proxy.pid())
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(&format!("--exit-code {code}")))
            .map(|(pid, _)| pid)
            .collect::<Vec<_>>()
    };
    let a_pid = pid_with("11");
    let b_pid = pid_with("12");
    assert_eq!((a_pid.len(), b_pid.len()), (1, 1));

    write(&plugin.join(".mcp.json"), &mcp_json("13"));
    seen.clear();
    w.until("b", "starting", &mut seen).await;
    w.until("b", "ready", &mut seen).await;
    assert!(!seen.iter().any(|s| s.starts_with("a ")), "{seen:?}");
    assert_eq!(pid_with("11"), a_pid, "a kept running");
    assert!(wait_until_gone(&b_pid).await.is_empty(), "old b stopped");
    assert_eq!(pid_with("13").len(), 1);

    // Removing b from the manifest stops its process.
    let b_new = pid_with("13");
    write(
        &plugin.join(".mcp.json"),
        &format!(
            "{{\"mcpServers\": {{\"a\": {{\"command\": {examples:?}, \"args\": [\"echo\", \"--exit-code\", \"11\"]}}}}}}"
        ),
    );
    assert!(
        wait_until_gone(&b_new).await.is_empty(),
        "removed b stopped"
    );
    assert_eq!(pid_with("11"), a_pid);

    // Toggling the plugin off stops the servers it declares; on starts them again, and the
    // plugin's enablement survives a rescan of the folder.
    let kit = |w: &Watcher| {
        w.mirror
            .customizations
            .iter()
            .flatten()
            .map(|c| serde_json::to_value(c).unwrap())
            .find(|c| c["name"] == "kit")
            .unwrap()
    };
    let plugin_id = kit(&w)["id"].as_str().unwrap().to_string();
    w.dispatch(
        json!({"type": "session/customizationToggled", "id": plugin_id,
        "enablement": [{"kind": "session", "enabled": false}]}),
    )
    .await;
    seen.clear();
    w.until("a", "stopped", &mut seen).await;
    assert!(wait_until_gone(&a_pid).await.is_empty());
    write(
        &plugin.join(".plugin/plugin.json"),
        "{\"name\": \"kit\", \"version\": \"1.0.1\"}",
    );
    while kit(&w)["version"] != "1.0.1" {
        w.step().await;
    }
    assert_eq!(
        kit(&w)["enablement"],
        json!([{"kind": "session", "enabled": false}])
    );
    assert_eq!(kit(&w)["children"][0]["state"], json!({"kind": "stopped"}));
    w.dispatch(
        json!({"type": "session/customizationToggled", "id": plugin_id,
        "enablement": [{"kind": "session", "enabled": true}]}),
    )
    .await;
    w.until("a", "ready", &mut seen).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_the_sidecar_leaves_no_child_behind() {
    let config = format!(
        "{}{}{}",
        server("one", "echo", &[]),
        server("two", "clock", &[]),
        server("three", "notes", &[])
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    for name in ["one", "two", "three"] {
        w.until(name, "ready", &mut seen).await;
    }
    let pids: Vec<u32> = children_of(proxy.pid())
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(pids.len(), 3, "{pids:?}");
    let status = std::process::Command::new("kill")
        .args(["-KILL", &proxy.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(wait_until_gone(&pids).await, Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_every_server_tells_clients_and_exits_0() {
    let config = format!(
        "{}{}",
        server("one", "echo", &[]),
        server("two", "app", &[])
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("one", "ready", &mut seen).await;
    w.until("two", "ready", &mut seen).await;
    let pids: Vec<u32> = children_of(proxy.pid())
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(pids.len(), 2);
    let pid = proxy.pid();
    let logs = proxy.log_sink();
    let exit = tokio::task::spawn_blocking(move || proxy.terminate());
    let stopped = async move {
        w.until("one", "stopped", &mut seen).await;
        w.until("two", "stopped", &mut seen).await;
    };
    if let Err(panic) = tokio::spawn(stopped).await {
        panic!(
            "{panic:?}; proxy stderr:\n{}",
            logs.lock().unwrap().join("\n")
        );
    }
    let status = exit.await.unwrap();
    assert_eq!(status.code(), Some(0), "exit status of {pid}");
    assert_eq!(wait_until_gone(&pids).await, Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn http_servers_get_their_headers_and_401_is_auth_required() {
    let upstream = HttpExampleServer::start(
        "notes",
        &["--require-header", "x-api-key=HEADER-SENTINEL-5d1"],
    );
    let remote = upstream.url.clone();
    let config = format!(
        "{FAST}[servers.remote]\nurl = \"{remote}\"\nheaders = {{ x-api-key = \"HEADER-SENTINEL-5d1\" }}\n\
         [servers.locked]\nurl = \"{remote}?token=QUERY-SENTINEL-77\"\n"
    );
    // The upstream may need a moment to listen; the supervisor retries with backoff anyway.
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("remote", "ready", &mut seen).await;
    let auth = w.until("locked", "authRequired", &mut seen).await;
    assert_eq!(auth["reason"], "required");
    assert_eq!(auth["resource"]["resource"], remote);
    let snapshot = serde_json::to_string(&w.mirror).unwrap();
    assert!(!snapshot.contains("SENTINEL"), "{snapshot}");
    drop(upstream);
    // The upstream went away: the ready server notices (transport closed or failed ping).
    let _ = w.until("remote", "error", &mut seen).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_launch_secret_ever_appears_in_ahp_frames_or_info_logs() {
    let examples = examples();
    let dir = ScratchDir::new("secrets");
    let plugin = dir.path().join("plugins/sec");
    write(
        &plugin.join(".plugin/plugin.json"),
        "{\"name\": \"sec\", \"version\": \"1.0.0\"}",
    );
    write(
        &plugin.join(".mcp.json"),
        &format!(
            "{{\"mcpServers\": {{\"s\": {{\"command\": {examples:?}, \"args\": [\"echo\", \"--require-header\", \"x-k=ARG-SENTINEL-a81\"], \"env\": {{\"TOKEN\": \"ENV-SENTINEL-a81\"}}}},\n\
             \"gone\": {{\"command\": \"/nope/CMD-SENTINEL-a81/server\", \"env\": {{\"K\": \"ENV-SENTINEL-a81\"}}}},\n\
             \"web\": {{\"url\": \"http://127.0.0.1:9/mcp?key=URL-SENTINEL-a81\", \"headers\": {{\"Authorization\": \"Bearer HDR-SENTINEL-a81\"}}}},\n\
             \"path\": {{\"url\": \"http://USER-SENTINEL-a81:PASS-SENTINEL-a81@127.0.0.1:9/KEY-SENTINEL-a81/mcp?k=Q-SENTINEL-a81'x#FRAG-SENTINEL-a81\"}}}}}}"
        ),
    );
    let config = format!(
        "plugin_roots = [{:?}]\n{FAST}",
        dir.path().join("plugins").display().to_string()
    );
    let proxy = Proxy::start(&config);
    // A raw client sees every frame exactly as sent.
    let mut raw = Raw::connect(&proxy).await;
    raw.initialize("raw-capture", &[DEFAULT_SESSION]).await;
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("s", "ready", &mut seen).await;
    w.until_crash_loop("gone", &mut seen).await;
    w.until_crash_loop("web", &mut seen).await;
    w.until_crash_loop("path", &mut seen).await;
    // The error still says where it failed, from facts: host and port, no path or query.
    let failed = w.server("path").to_string();
    assert!(failed.contains("127.0.0.1:9"), "{failed}");
    let s = w.id("s");
    w.dispatch(json!({"type": "session/mcpServerStopRequested", "id": s}))
        .await;
    w.until("s", "stopped", &mut seen).await;
    w.dispatch(json!({"type": "session/mcpServerStartRequested", "id": s}))
        .await;
    w.until("s", "ready", &mut seen).await;
    // Everything the raw client received up to a ping round trip.
    raw.ping().await;
    let frames: Vec<String> = raw.notifications.iter().map(Value::to_string).collect();
    assert!(frames.len() > 10, "captured {} frames", frames.len());
    for frame in &frames {
        assert!(
            !frame.contains("SENTINEL"),
            "secret in an AHP frame: {frame}"
        );
    }
    let logs = proxy.logs();
    for line in logs.lines() {
        let level = serde_json::from_str::<Value>(line)
            .map(|v| v["level"].as_str().unwrap_or("").to_string())
            .unwrap_or_default();
        if level == "INFO" || level == "WARN" || level == "ERROR" {
            assert!(!line.contains("SENTINEL"), "secret in a log line: {line}");
        }
    }
}

/// A legacy stdio MCP server in `sh` that writes the method of every message it reads to
/// the file named by its argument: answers `server/discover` with -32601, `initialize` and
/// an empty `tools/list`.
const METHOD_LOGGING_SERVER: &str = r#"log="$1"
while IFS= read -r line; do
  method=$(printf '%s' "$line" | sed -n 's/.*"method":"\([^"]*\)".*/\1/p')
  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\),.*/\1/p')
  printf '%s\n' "$method" >> "$log"
  [ -n "$id" ] || continue
  case "$method" in
    server/discover) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"unknown"}}\n' "$id" ;;
    initialize) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" ;;
    tools/list) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}\n' "$id" ;;
    *) printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  esac
done
"#;

#[tokio::test(flavor = "multi_thread")]
async fn servers_of_one_launch_spec_starting_together_share_one_era_probe() {
    // Three servers declared alike (one launch spec): one server/discover between them,
    // the others initialized on the verdict (issue 34: start-up of many servers).
    let dir = ScratchDir::new("one-probe");
    let script = dir.path().join("server.sh");
    std::fs::write(&script, METHOD_LOGGING_SERVER).unwrap();
    let log = dir.path().join("methods.log");
    let mut config = String::from(FAST);
    for name in ["a", "b", "c"] {
        config.push_str(&format!(
            "[servers.{name}]\ncommand = \"sh\"\nargs = [{:?}, {:?}]\n",
            script.display().to_string(),
            log.display().to_string()
        ));
    }
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    for name in ["a", "b", "c"] {
        w.until(name, "ready", &mut seen).await;
    }
    let methods = std::fs::read_to_string(&log).unwrap();
    let count = |method: &str| methods.lines().filter(|l| *l == method).count();
    assert_eq!(count("initialize"), 3, "{methods}");
    assert_eq!(count("server/discover"), 1, "{methods}");
}

/// Whether server `name` shows the host's "slow start" mark.
fn shown_slow(w: &Watcher, name: &str) -> bool {
    w.server(name)["_meta"]["ahp-proxy/start"]["slow"] == true
}

#[tokio::test(flavor = "multi_thread")]
async fn a_start_slower_than_the_start_timeout_is_slow_not_a_failure() {
    // Ready after about 3 s, with a 1 s start timeout and no second chance after a failure.
    let script = format!("sleep 3; exec {:?} echo", examples());
    let config = format!(
        "[supervisor]\nstart_timeout_ms = 1000\nslow_start_limit_ms = 120000\ncrash_loop_limit = 1\n\
         [servers.late]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        serde_json::to_string(&script).unwrap()
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    while !shown_slow(&w, "late") {
        let state = w.server("late")["state"]["kind"].clone();
        assert!(state == "starting" || state == "stopped", "{state}");
        w.step().await;
    }
    assert_eq!(w.server("late")["state"]["kind"], "starting");
    let mut seen = Vec::new();
    w.until("late", "ready", &mut seen).await;
    assert!(!seen.iter().any(|s| s.ends_with("error")), "{seen:?}");
    assert!(!shown_slow(&w, "late"), "{}", w.server("late"));
    proxy.wait_for_log(
        "is slow to start: still running after 1000 ms; waiting up to 120000 ms in all",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_start_past_its_limit_fails_and_says_how_long_it_waited() {
    let config =
        "[supervisor]\nstart_timeout_ms = 300\nslow_start_limit_ms = 1200\ncrash_loop_limit = 1\n\
                  [servers.stuck]\ncommand = \"sleep\"\nargs = [\"60\"]\n";
    let proxy = Proxy::start(config);
    let mut w = Watcher::open(&proxy).await;
    let error = w.until("stuck", "error", &mut Vec::new()).await;
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("within 1200 ms"), "{message}");
    assert!(!shown_slow(&w, "stuck"));
    // Nothing left running.
    assert!(common::child_pids(proxy.pid()).is_empty());
}
