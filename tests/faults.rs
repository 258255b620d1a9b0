//! Faults end to end: the real binary supervises example servers that crash at random, hang,
//! flood, print garbage or resist shutdown, and watches plugin folders that vanish under it.
//! Each test checks the sidecar stays up, the AHP states are right and no process leaks.
//!
//! Quick by default (what CI runs); `AHP_PROXY_FAULT_ROUNDS=200 cargo test --test faults --
//! --nocapture` repeats the random parts ten times more and prints what it measured.

mod common;

use std::path::Path;
use std::time::Duration;

use common::tagged::{carrying, tag, tagged, Tagged, ALWAYS_PREFIX};
use common::{alive, descendants, examples, server, Proxy, ScratchDir, Watcher, PATIENCE};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{json, Value};

/// How many rounds the random loops run: 20 by default, `AHP_PROXY_FAULT_ROUNDS` by hand.
fn rounds() -> usize {
    std::env::var("AHP_PROXY_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(20)
}

/// The command line of `pid`, spaces between arguments.
fn cmdline(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .replace('\0', " ")
}

/// Wait (up to a generous bound, never asserting how long) until `check` holds; returns
/// whether it did.
async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Wait until no process carries `tag`; panics naming the survivors.
async fn none_left(tag: &str) {
    let mut left = Vec::new();
    let gone = eventually(|| {
        left = carrying(tag);
        left.is_empty()
    })
    .await;
    assert!(
        gone,
        "leaked: {:?}",
        left.iter().map(|p| (p, cmdline(*p))).collect::<Vec<_>>()
    );
}

/// Peak resident memory of `pid` in MiB (`VmHWM`).
fn peak_rss_mib(pid: u32) -> u64 {
    common::status_kib(pid, "VmHWM:") / 1024
}

/// Bytes `pid` has written so far (`/proc/<pid>/io`).
fn written(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The one live child of the proxy whose command line contains `marker`.
async fn child_with(proxy: &Proxy, marker: &str) -> u32 {
    let mut pid = None;
    let found = eventually(|| {
        pid = descendants(proxy.pid())
            .into_iter()
            .find(|p| cmdline(*p).contains(marker));
        pid.is_some()
    })
    .await;
    assert!(found, "no child running {marker}");
    pid.unwrap_or_default()
}

type Harness = RunningService<RoleClient, ()>;

/// A harness session on the proxy's `/mcp`.
async fn harness(proxy: &Proxy) -> Harness {
    let session = tokio::time::timeout(
        PATIENCE,
        ().serve(StreamableHttpClientTransport::from_uri(
            proxy.mcp_url.clone(),
        )),
    )
    .await
    .expect("MCP handshake in time")
    .expect("MCP handshake");
    session
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    session
}

async fn call(harness: &Harness, tool: &str, text: &str) -> Result<String, ServiceError> {
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": tool, "arguments": {"text": text}})).unwrap();
    let result = tokio::time::timeout(PATIENCE, harness.peer().call_tool(params))
        .await
        .expect("an answer within the patience window")?;
    let value = serde_json::to_value(&result).unwrap();
    Ok(value["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string())
}

/// The sidecar is up: AHP answers `ping`, and a fresh harness session on `/mcp` gets an
/// answer from the well-behaved server `steady`.
async fn still_up(proxy: &Proxy, w: &Watcher) {
    w.client.ping().await.expect("AHP ping");
    let h = harness(proxy).await;
    assert_eq!(
        call(&h, "steady__echo", "still up")
            .await
            .expect("steady answers"),
        "still up"
    );
    let _ = h.cancel().await;
}

/// Wait for the crash-loop error of `name`.
async fn until_crash_loop(w: &mut Watcher, name: &str, seen: &mut Vec<String>) -> Value {
    loop {
        let state = w.until(name, "error", seen).await;
        if state["error"]["errorType"] == "crashLoop" {
            return state;
        }
        w.until(name, "starting", seen).await;
    }
}

fn error_of(state: &Value) -> (String, String) {
    (
        state["error"]["errorType"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        state["error"]["message"].as_str().unwrap_or("").to_string(),
    )
}

/// Stop the proxy with SIGTERM: it exits 0 and nothing carrying `tag` survives it.
async fn shut_down(proxy: Proxy, tag: &str) {
    let pid = proxy.pid();
    let status = tokio::task::spawn_blocking(move || proxy.terminate())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0), "exit status of {pid}");
    none_left(tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_crashing_at_random_during_calls_fail_those_calls_restart_and_leak_nothing() {
    let Tagged {
        tag,
        proxy,
        mut w,
        mut seen,
    } = Tagged::start(
        "crash",
        "[supervisor]\nrestart_delay_ms = 10\nrestart_delay_max_ms = 50\ncrash_loop_limit = 1000\nhealthy_after_ms = 0\nstop_grace_ms = 500\n",
        |tag| tagged("dice", "echo", &["--fault", "crash-random", "--fault-rate", "0.5"], tag),
    )
    .await;
    let h = harness(&proxy).await;
    let (mut answered, mut crashed, mut most) = (0, 0, 0);
    for round in 0..rounds() {
        w.until("dice", "ready", &mut seen).await;
        let children = descendants(proxy.pid()).len();
        most = most.max(children);
        assert_eq!(children, 2, "round {round}: one process per server");
        match call(&h, "dice__echo", &format!("round {round}")).await {
            Ok(text) => {
                assert_eq!(text, format!("round {round}"));
                answered += 1;
            }
            Err(ServiceError::McpError(error)) => {
                assert!(
                    error
                        .message
                        .contains("MCP server dice stopped before answering tools/call"),
                    "{error:?}"
                );
                crashed += 1;
                let (kind, message) = error_of(&w.until("dice", "error", &mut seen).await);
                assert_eq!(kind, "exited", "{message}");
                assert!(message.starts_with("exited with status 3"), "{message}");
                assert!(message.contains("crashing at random"), "{message}");
                // Meanwhile the other server answers.
                assert_eq!(
                    call(&h, "steady__echo", "meanwhile").await.unwrap(),
                    "meanwhile"
                );
            }
            Err(other) => panic!("round {round}: {other}"),
        }
    }
    eprintln!(
        "random crashes: {} rounds, {answered} answered, {crashed} crashed; at most {most} children",
        rounds()
    );
    assert!(
        answered > 0 && crashed > 0,
        "{answered} answered, {crashed} crashed"
    );
    still_up(&proxy, &w).await;
    let _ = h.cancel().await;
    shut_down(proxy, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_hangs_on_initialize_times_out_is_killed_and_gives_up() {
    let Tagged {
        tag,
        proxy,
        mut w,
        mut seen,
    } = Tagged::start(
        "hang",
        "[supervisor]\nstart_timeout_ms = 200\nslow_start_limit_ms = 300\nrestart_delay_ms = 20\nrestart_delay_max_ms = 50\ncrash_loop_limit = 3\nstop_grace_ms = 500\n",
        |tag| tagged("hang", "echo", &["--fault", "hang-initialize"], tag),
    )
    .await;
    let (kind, message) = error_of(&w.until("hang", "error", &mut seen).await);
    assert_eq!(kind, "timeout", "{message}");
    assert!(
        message.starts_with("did not finish initialize and tools/list within 300 ms"),
        "{message}"
    );
    assert!(
        message.contains("last stderr lines:\nexample-server: never answering initialize"),
        "{message}"
    );
    let gave_up = until_crash_loop(&mut w, "hang", &mut seen).await;
    let (_, message) = error_of(&gave_up);
    assert!(
        message.contains("failed 3 times in a row (timeout)"),
        "{message}"
    );
    // Each attempt's process was killed: only steady is left.
    let mut children = Vec::new();
    assert!(
        eventually(|| {
            children = descendants(proxy.pid());
            children.len() == 1
        })
        .await,
        "{:?}",
        children.iter().map(|p| cmdline(*p)).collect::<Vec<_>>()
    );
    assert!(
        cmdline(children[0]).contains("echo"),
        "{}",
        cmdline(children[0])
    );
    still_up(&proxy, &w).await;
    shut_down(proxy, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
#[allow(deprecated)] // logging/setLevel is deprecated by SEP-2577 but still served
async fn floods_on_stdout_and_stderr_neither_grow_memory_nor_block_other_servers() {
    let Tagged {
        tag,
        proxy,
        mut w,
        mut seen,
    } = Tagged::start("flood", "", |tag| {
        [
            tagged("flood", "echo", &["--fault", "flood-stdout"], tag),
            tagged("chatty", "echo", &["--fault", "flood-stderr"], tag),
        ]
        .concat()
    })
    .await;
    for name in ["flood", "chatty", "steady"] {
        w.until(name, "ready", &mut seen).await;
    }
    // A harness is connected the whole time (the flood's log messages are below the level
    // it asked for: a harness that stops reading them has a test of its own).
    let h = harness(&proxy).await;
    let quiet: rmcp::model::SetLevelRequestParams =
        serde_json::from_value(json!({"level": "emergency"})).unwrap();
    h.peer().set_level(quiet).await.expect("logging/setLevel");
    let flood = child_with(&proxy, "flood-stdout").await;
    let chatty = child_with(&proxy, "flood-stderr").await;
    let target = 32 * 1024 * 1024 * rounds() as u64 / 20;
    let mut calls = 0;
    let deadline = tokio::time::Instant::now() + PATIENCE * 3;
    while written(flood) < target || written(chatty) < target {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the floods stalled: {} and {} bytes written",
            written(flood),
            written(chatty)
        );
        let tool = format!("{}__echo", ["steady", "flood", "chatty"][calls % 3]);
        assert_eq!(call(&h, &tool, "during").await.unwrap(), "during", "{tool}");
        calls += 1;
    }
    let peak = peak_rss_mib(proxy.pid());
    // Each flood round ends in a burst of 64 `tools/list_changed`: the sidecar re-reads
    // the list once or twice per burst, not 64 times.
    let stats: Value =
        serde_json::from_str(&call(&h, "flood__fault_stats", "").await.unwrap()).unwrap();
    let (listed, floods) = (
        stats["toolsListed"].as_u64().unwrap(),
        stats["floodRounds"].as_u64().unwrap(),
    );
    eprintln!(
        "floods: {} MiB on stdout ({floods} rounds, {listed} tools/list) and {} MiB on stderr read while {calls} calls answered; sidecar peak RSS {peak} MiB",
        written(flood) >> 20,
        written(chatty) >> 20
    );
    assert!(floods > 0);
    assert!(
        listed <= 2 * floods + 4,
        "{listed} re-reads for {floods} bursts"
    );
    assert!(peak < 128, "peak RSS {peak} MiB");
    // Still ready, still the same processes.
    assert_eq!(w.server("flood")["state"]["kind"], "ready");
    assert_eq!(w.server("chatty")["state"]["kind"], "ready");
    assert!(alive(flood) && alive(chatty));
    still_up(&proxy, &w).await;
    let _ = h.cancel().await;
    shut_down(proxy, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_flood_towards_a_harness_that_stopped_reading_stays_bounded() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let tag = tag("stalled");
    let config = format!(
        "{ALWAYS_PREFIX}{}{}",
        tagged("flood", "echo", &["--fault", "flood-stdout"], &tag),
        tagged("steady", "echo", &[], &tag),
    );
    let (proxy, (stdout, mut stdin)) = Proxy::start_stdio(&config);
    // A harness that says hello, then never reads again.
    let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "stalled", "version": "1"}}});
    stdin
        .write_all(format!("{hello}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let answer = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("initialize answered")
        .unwrap()
        .unwrap();
    assert!(answer.contains("\"id\":1"), "{answer}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    stdin
        .write_all(format!("{initialized}\n").as_bytes())
        .await
        .unwrap();
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("flood", "ready", &mut seen).await;
    w.until("steady", "ready", &mut seen).await;
    let flood = child_with(&proxy, "flood-stdout").await;
    let target = 128 * 1024 * 1024 * rounds() as u64 / 20;
    let deadline = tokio::time::Instant::now() + PATIENCE * 3;
    while written(flood) < target {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the flood stalled at {} bytes",
            written(flood)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let peak = peak_rss_mib(proxy.pid());
    eprintln!(
        "log flood to a stalled harness: {} MiB read from the server; sidecar peak RSS {peak} MiB",
        written(flood) >> 20
    );
    assert!(peak < 128, "peak RSS {peak} MiB");
    w.client.ping().await.expect("AHP ping");
    drop(lines);
    drop(stdin);
    shut_down(proxy, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn non_json_on_stdout_is_ignored_and_shown_when_the_server_fails() {
    let dir = ScratchDir::new("noise");
    let marker = dir.path().join("crashed");
    let Tagged {
        tag,
        proxy,
        mut w,
        mut seen,
    } = Tagged::start(
        "noise",
        "[supervisor]\nrestart_delay_ms = 20\nstop_grace_ms = 500\n",
        |tag| {
            [
                tagged("noisy", "echo", &["--fault", "noise-stdout"], tag),
                tagged(
                    "dying",
                    "echo",
                    &[
                        "--fault",
                        "noise-stdout",
                        "--exit-after-ms",
                        "500",
                        "--once",
                        marker.to_str().unwrap(),
                    ],
                    tag,
                ),
            ]
            .concat()
        },
    )
    .await;
    w.until("noisy", "ready", &mut seen).await;
    // Lines between messages change nothing: calls work, the server stays ready.
    let h = harness(&proxy).await;
    for i in 0..5 {
        let text = format!("call {i}");
        assert_eq!(call(&h, "noisy__echo", &text).await.unwrap(), text);
    }
    assert_eq!(w.server("noisy")["state"]["kind"], "ready");
    // When a noisy server fails, its error shows the stdout it could not understand.
    let (kind, message) = error_of(&w.until("dying", "error", &mut seen).await);
    assert!(
        kind == "exited" || kind == "startFailed",
        "{kind}: {message}"
    );
    assert!(
        message.contains("non-JSON stdout lines were ignored, the last:\n"),
        "{message}"
    );
    assert!(
        message.contains("Example server 1.0 starting (this banner is not JSON)")
            || message.contains("all fine"),
        "{message}"
    );
    w.until("dying", "ready", &mut seen).await;
    // Said once per process at warn level, without the line itself.
    let logs = proxy.logs();
    assert!(
        logs.contains("the server writes lines that are not JSON on stdout"),
        "{logs}"
    );
    assert!(!logs.contains("all fine"), "stdout content in info logs");
    still_up(&proxy, &w).await;
    let _ = h.cancel().await;
    shut_down(proxy, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stdout_line_that_never_ends_is_a_protocol_error_not_a_hang() {
    let Tagged {
        tag,
        proxy,
        mut w,
        mut seen,
    } = Tagged::start(
        "endless",
        "[supervisor]\nrestart_delay_ms = 20\nrestart_delay_max_ms = 50\ncrash_loop_limit = 2\nstop_grace_ms = 500\n",
        |tag| tagged("endless", "echo", &["--fault", "endless-line"], tag),
    )
    .await;
    let (kind, message) = error_of(&w.until("endless", "error", &mut seen).await);
    assert_eq!(kind, "protocol", "{message}");
    assert!(message.contains("longer than 16 MiB"), "{message}");
    assert!(
        message.contains("example-server: starting a stdout line that never ends"),
        "{message}"
    );
    let (_, message) = error_of(&until_crash_loop(&mut w, "endless", &mut seen).await);
    assert!(message.contains("(protocol)"), "{message}");
    let peak = peak_rss_mib(proxy.pid());
    eprintln!("endless stdout line: sidecar peak RSS {peak} MiB");
    assert!(peak < 192, "peak RSS {peak} MiB");
    assert!(eventually(|| descendants(proxy.pid()).len() == 1).await);
    still_up(&proxy, &w).await;
    shut_down(proxy, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_that_resist_or_die_during_shutdown_are_stopped_and_leave_nothing() {
    let Tagged {
        tag,
        proxy,
        mut w,
        mut seen,
    } = Tagged::start("shutdown", "[supervisor]\nstop_grace_ms = 1000\n", |tag| {
        [
            tagged("stubborn", "echo", &["--fault", "ignore-sigterm"], tag),
            tagged(
                "slow",
                "echo",
                &["--fault", "slow-exit", "--exit-delay-ms", "300"],
                tag,
            ),
            tagged("toggled", "echo", &["--fault", "ignore-sigterm"], tag),
            tagged("hanging", "echo", &["--fault", "hang-initialize"], tag),
        ]
        .concat()
    })
    .await;
    for name in ["stubborn", "slow", "toggled", "steady"] {
        w.until(name, "ready", &mut seen).await;
    }
    assert_eq!(w.server("hanging")["state"]["kind"], "starting");
    // Five servers (one still starting: it hangs on initialize, the start timeout is 30 s),
    // and each stubborn one has a grandchild that ignores SIGTERM too.
    assert!(eventually(|| descendants(proxy.pid()).len() == 7).await);
    assert_eq!(carrying(&tag).len(), 7);
    // Stopping one at run time takes its whole process group, grandchild included.
    let id = w.id("toggled");
    w.dispatch(json!({"type": "session/mcpServerStopRequested", "id": id}))
        .await;
    w.until("toggled", "stopped", &mut seen).await;
    assert!(eventually(|| descendants(proxy.pid()).len() == 5).await);
    still_up(&proxy, &w).await;
    // SIGTERM to the sidecar: every server reported stopped (not error), exit 0, nothing
    // left, although one ignores SIGTERM, one dies with status 3 on the way out and one is
    // in the middle of its handshake.
    let pid = proxy.pid();
    let logs = proxy.log_sink();
    let exit = tokio::task::spawn_blocking(move || proxy.terminate());
    let stopped = async move {
        let mut seen = Vec::new();
        for name in ["stubborn", "slow", "hanging", "steady"] {
            w.until(name, "stopped", &mut seen).await;
        }
        seen
    };
    let seen = match tokio::spawn(stopped).await {
        Ok(seen) => seen,
        Err(panic) => panic!("{panic:?}; stderr:\n{}", logs.lock().unwrap().join("\n")),
    };
    assert!(!seen.iter().any(|s| s.ends_with(" error")), "{seen:?}");
    assert_eq!(exit.await.unwrap().code(), Some(0), "exit status of {pid}");
    none_left(&tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_the_sidecar_leaves_no_grandchild_behind() {
    let tag = tag("kill9");
    let config = format!(
        "{}{}",
        tagged("stubborn", "echo", &["--fault", "ignore-sigterm"], &tag),
        tagged("hang", "echo", &["--fault", "hang-initialize"], &tag),
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("stubborn", "ready", &mut seen).await;
    assert!(eventually(|| carrying(&tag).len() == 3).await);
    let watchdog = the_watchdog_of(proxy.pid());
    assert!(kill_9(proxy.pid()), "kill -9 of the proxy");
    none_left(&tag).await;
    // Its work done, the watchdog is gone too.
    assert!(
        eventually(|| !alive(watchdog)).await,
        "the watchdog {watchdog} outlived its work"
    );
}

/// The watchdog of proxy `proxy`, checked for what it must be: named `ahp-watchdog`, not the
/// proxy's child, in a session of its own, holding nothing of the proxy's but its pipe (a
/// harness's stdout held open would keep the harness from seeing the proxy end): 0, 1 and 2
/// on /dev/null and one more descriptor, the read end of a pipe whose other end the proxy
/// holds.
fn the_watchdog_of(proxy: u32) -> u32 {
    let descriptors = |pid: u32| -> Vec<(String, String)> {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| {
                let target = std::fs::read_link(e.path()).unwrap_or_default();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    target.display().to_string(),
                )
            })
            .collect()
    };
    let proxy_pipes: Vec<String> = descriptors(proxy)
        .into_iter()
        .map(|(_, target)| target)
        .filter(|t| t.starts_with("pipe:"))
        .collect();
    let candidates: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "ahp-watchdog")
        })
        .collect();
    let found = candidates.iter().copied().find(|pid| {
        descriptors(*pid)
            .iter()
            .any(|(_, target)| proxy_pipes.contains(target))
    });
    let Some(watchdog) = found else {
        panic!("no watchdog shares a pipe with proxy {proxy}: candidates {candidates:?}")
    };
    let stat = std::fs::read_to_string(format!("/proc/{watchdog}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    assert_ne!(fields.get(1), Some(&proxy.to_string().as_str()), "{stat}");
    assert_eq!(
        fields.get(3),
        Some(&watchdog.to_string().as_str()),
        "{stat}"
    );
    let mut held = descriptors(watchdog);
    held.sort_by_key(|(fd, _)| fd.parse::<u32>().unwrap_or(u32::MAX));
    assert_eq!(held.len(), 4, "{held:?}");
    for (fd, target) in &held[..3] {
        assert!(
            ["0", "1", "2"].contains(&fd.as_str()) && target == "/dev/null",
            "{held:?}"
        );
    }
    assert!(
        proxy_pipes.contains(&held[3].1),
        "{held:?} vs {proxy_pipes:?}"
    );
    watchdog
}

/// `[servers.<name>]` for an example server, tagged, whose daemons write their pids to
/// `pids` (`AHP_FAULT_PIDS`).
fn tagged_with_pids(name: &str, extra: &[&str], tag: &str, pids: &Path) -> String {
    format!(
        "{}env = {{ AHP_FAULT_TAG = \"{tag}\", AHP_FAULT_PIDS = {:?} }}\n",
        server(name, "echo", extra),
        pids.display().to_string()
    )
}

/// The two daemon-leaving servers, `daemon` (`daemonize`) and `deaf` (`deaf-grandchild`).
fn daemon_servers(tag: &str, pids: &Path) -> String {
    format!(
        "{}{}",
        tagged_with_pids("daemon", &["--fault", "daemonize"], tag, pids),
        tagged_with_pids("deaf", &["--fault", "deaf-grandchild"], tag, pids),
    )
}

/// The pids the daemons wrote so far.
fn recorded(pids: &Path) -> Vec<u32> {
    std::fs::read_to_string(pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Wait until `n` more daemons than `known` recorded their pids; returns the new ones, each
/// alive and (recorded beforehand, re-parented or not) below the proxy in the process tree.
async fn daemons(proxy: &Proxy, pids: &Path, known: usize, n: usize) -> Vec<u32> {
    assert!(eventually(|| recorded(pids).len() >= known + n).await);
    let found: Vec<u32> = recorded(pids).into_iter().skip(known).collect();
    for pid in &found {
        assert!(alive(*pid), "daemon {pid} is not running");
    }
    let mut below = Vec::new();
    let owned = eventually(|| {
        below = descendants(proxy.pid());
        found.iter().all(|pid| below.contains(pid))
    })
    .await;
    assert!(
        owned,
        "daemons {found:?} are not all below the proxy {} ({below:?})",
        proxy.pid()
    );
    found
}

/// Wait until none of `pids` runs; panics naming the survivors.
async fn all_gone(pids: &[u32]) {
    let gone = eventually(|| pids.iter().all(|pid| !alive(*pid))).await;
    let left: Vec<(u32, String)> = pids
        .iter()
        .filter(|pid| alive(**pid))
        .map(|pid| (*pid, cmdline(*pid)))
        .collect();
    assert!(gone, "survived: {left:?}");
}

/// `kill -9` of `pid`; whether the signal was sent.
fn kill_9(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .is_ok_and(|status| status.success())
}

/// Stop server `stop` and toggle server `toggle` off, each until clients see it `stopped`;
/// their ids.
async fn stop_and_toggle_off(
    w: &mut Watcher,
    seen: &mut Vec<String>,
    stop: &str,
    toggle: &str,
) -> (String, String) {
    let stop_id = w.id(stop);
    w.dispatch(json!({"type": "session/mcpServerStopRequested", "id": stop_id}))
        .await;
    w.until(stop, "stopped", seen).await;
    let toggle_id = w.id(toggle);
    w.dispatch(
        json!({"type": "session/customizationToggled", "id": toggle_id,
        "enablement": [{"kind": "session", "enabled": false}]}),
    )
    .await;
    w.until(toggle, "stopped", seen).await;
    (stop_id, toggle_id)
}

#[tokio::test(flavor = "multi_thread")]
async fn daemons_and_stubborn_grandchildren_go_with_their_server_and_the_sidecar() {
    let dir = ScratchDir::new("daemons");
    let pids = dir.path().join("pids");
    let Tagged {
        tag,
        proxy,
        mut w,
        mut seen,
    } = Tagged::start("daemons", "[supervisor]\nstop_grace_ms = 300\n", |tag| {
        daemon_servers(tag, &pids)
    })
    .await;
    for name in ["daemon", "deaf", "steady"] {
        w.until(name, "ready", &mut seen).await;
    }
    // A setsid daemon whose parent exited, and a grandchild in the server's group, both
    // ignoring SIGTERM and SIGHUP and reading nothing: the proxy has them in its tree.
    let first = daemons(&proxy, &pids, 0, 2).await;
    // Stopping the daemonizing server takes its daemon; toggling off the other takes its
    // grandchild.
    let (daemon_id, deaf_id) = stop_and_toggle_off(&mut w, &mut seen, "daemon", "deaf").await;
    all_gone(&first).await;
    still_up(&proxy, &w).await;
    // Both again, then SIGTERM to the sidecar: nothing it ever started is left.
    w.dispatch(json!({"type": "session/mcpServerStartRequested", "id": daemon_id}))
        .await;
    w.dispatch(json!({"type": "session/customizationToggled", "id": deaf_id, "enablement": []}))
        .await;
    w.until("daemon", "ready", &mut seen).await;
    w.until("deaf", "ready", &mut seen).await;
    let second = daemons(&proxy, &pids, 2, 2).await;
    shut_down(proxy, &tag).await;
    all_gone(&second).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_the_sidecar_leaves_no_daemon_behind() {
    let tag = tag("kill9-daemons");
    let dir = ScratchDir::new("kill9-daemons");
    let pids = dir.path().join("pids");
    let proxy = Proxy::start(&daemon_servers(&tag, &pids));
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("daemon", "ready", &mut seen).await;
    w.until("deaf", "ready", &mut seen).await;
    let recorded = daemons(&proxy, &pids, 0, 2).await;
    assert!(kill_9(proxy.pid()), "kill -9 of the proxy");
    all_gone(&recorded).await;
    none_left(&tag).await;
}

/// Where no cgroup is used (`[supervisor] cgroups = false`, as on a machine without a
/// writable cgroup v2), exactly what docs/servers.md's "no usable cgroup" row says: a stop
/// or toggle-off takes every descendant that kept the marker or stayed below the server;
/// shutdown also takes an orphan the proxy adopted, marker or not; `kill -9` of the proxy
/// takes every descendant that kept the marker, and one that took it out of its environment
/// survives.
#[tokio::test(flavor = "multi_thread")]
async fn without_cgroups_the_marker_and_the_process_tree_find_what_the_table_says() {
    let tag = tag("no-cgroup");
    let dir = ScratchDir::new("no-cgroup");
    let pids = |name: &str| dir.path().join(format!("{name}.pids"));
    let servers = |names: &[(&str, &str, bool)]| -> String {
        names
            .iter()
            .map(|(name, fault, unmarked)| {
                let mut extra = vec!["--fault", fault];
                if *unmarked {
                    extra.push("--unmarked");
                }
                tagged_with_pids(name, &extra, &tag, &pids(name))
            })
            .collect()
    };
    let config = |names: &[(&str, &str, bool)]| {
        format!(
            "[supervisor]\ncgroups = false\nstop_grace_ms = 300\n{ALWAYS_PREFIX}{}",
            servers(names)
        )
    };
    // Stop, toggle-off, SIGTERM.
    let proxy = Proxy::start(&config(&[
        ("daemon", "daemonize", false),
        ("deaf", "deaf-grandchild", true),
        ("adopted", "daemonize", true),
    ]));
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    for name in ["daemon", "deaf", "adopted"] {
        w.until(name, "ready", &mut seen).await;
    }
    let daemon = daemons(&proxy, &pids("daemon"), 0, 1).await;
    let deaf = daemons(&proxy, &pids("deaf"), 0, 1).await;
    let adopted = daemons(&proxy, &pids("adopted"), 0, 1).await;
    for pid in daemon.iter().chain(&deaf).chain(&adopted) {
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        assert!(
            !cgroup.contains("ahp-proxy-"),
            "{pid} is in a cgroup of the proxy: {cgroup}"
        );
    }
    // A double-forked `setsid` daemon that kept the marker goes with its server's stop; a
    // grandchild without the marker, still below its server, goes with its toggle-off.
    stop_and_toggle_off(&mut w, &mut seen, "daemon", "deaf").await;
    all_gone(&daemon).await;
    all_gone(&deaf).await;
    // A daemon without the marker whose parent exited is the proxy's adopted orphan: it goes
    // at shutdown.
    assert!(alive(adopted[0]));
    shut_down(proxy, &tag).await;
    all_gone(&adopted).await;

    // `kill -9` of the proxy: the watchdog takes what kept the marker, not what did not.
    let proxy = Proxy::start(&config(&[
        ("daemon-2", "daemonize", false),
        ("adopted-2", "daemonize", true),
    ]));
    let mut w = Watcher::open(&proxy).await;
    for name in ["daemon-2", "adopted-2"] {
        w.until(name, "ready", &mut seen).await;
    }
    let marked = daemons(&proxy, &pids("daemon-2"), 0, 1).await;
    let unmarked = daemons(&proxy, &pids("adopted-2"), 0, 1).await;
    assert!(kill_9(proxy.pid()), "kill -9 of the proxy");
    all_gone(&marked).await;
    let survived = alive(unmarked[0]);
    // Ours to clean up: it ignores SIGTERM.
    kill_9(unmarked[0]);
    assert!(
        survived,
        "the unmarked daemon did not survive kill -9: the table claims less than holds"
    );
    all_gone(&unmarked).await;
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let _ = std::fs::write(path, text);
}

/// A plugin folder `name` with a manifest, a skill and one tagged server.
fn make_plugin(root: &Path, name: &str, tag: &str) {
    let examples = examples();
    let dir = root.join(name);
    write(
        &dir.join(".plugin/plugin.json"),
        &format!("{{\"name\": \"{name}\", \"version\": \"1.0.0\"}}"),
    );
    write(
        &dir.join("skills/s/SKILL.md"),
        "---\ndescription: a skill\n---\n",
    );
    write(
        &dir.join(".mcp.json"),
        &format!(
            "{{\"mcpServers\": {{\"{name}-srv\": {{\"command\": {examples:?}, \"args\": [\"echo\"], \"env\": {{\"AHP_FAULT_TAG\": \"{tag}\"}}}}}}}}"
        ),
    );
}

/// The names of the top-level customizations in the mirror, sorted.
fn plugin_names(w: &Watcher) -> Vec<String> {
    let mut names: Vec<String> = w
        .mirror
        .customizations
        .iter()
        .flatten()
        .map(|c| {
            serde_json::to_value(c).unwrap()["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    names.sort();
    names
}

/// A plugin folder `name` with only a manifest and a skill (no server: cheap in bulk).
fn make_bulk_plugin(root: &Path, name: &str) {
    let dir = root.join(name);
    write(
        &dir.join(".plugin/plugin.json"),
        &format!("{{\"name\": \"{name}\", \"version\": \"1.0.0\"}}"),
    );
    write(
        &dir.join("skills/s/SKILL.md"),
        "---\ndescription: a skill\n---\n",
    );
}

/// Apply actions until the mirror shows exactly `want` (plugins), each complete: a
/// `bulk-*` plugin with its skill, any other with its skill and its server ready. Then a
/// fresh snapshot equals the mirror.
async fn settle(proxy: &Proxy, w: &mut Watcher, want: &[&str]) {
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    let settled = |w: &Watcher| {
        plugin_names(w) == want
            && w.mirror.customizations.iter().flatten().all(|c| {
                let c = serde_json::to_value(c).unwrap();
                let children = c["children"].as_array().cloned().unwrap_or_default();
                if c["name"].as_str().unwrap_or("").starts_with("bulk-") {
                    return children.len() == 1;
                }
                children.len() == 2
                    && children
                        .iter()
                        .any(|k| k["type"] == "mcpServer" && k["state"]["kind"] == "ready")
            })
    };
    while !settled(w) {
        // Shorter than the patience of `step` itself, so the message below is the one seen.
        let step = tokio::time::timeout(PATIENCE * 3 / 4, w.step()).await;
        assert!(
            step.is_ok(),
            "did not settle on {want:?}; mirror shows {:?}: {}",
            plugin_names(w),
            serde_json::to_string(&w.mirror.customizations).unwrap()
        );
        // Apply the rest of a burst before looking again (looking is not cheap).
        while tokio::time::timeout(Duration::from_millis(5), w.step())
            .await
            .is_ok()
        {}
    }
    let fresh = Watcher::open(proxy).await;
    assert_eq!(
        serde_json::to_value(&fresh.mirror.customizations).unwrap(),
        serde_json::to_value(&w.mirror.customizations).unwrap(),
        "the mirror drifted from the host"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_folders_deleted_while_being_scanned_settle_on_what_is_on_disk() {
    let tag = tag("folders");
    let dir = ScratchDir::new("fault-folders");
    let root = dir.path().join("plugins");
    make_plugin(&root, "keep", &tag);
    let config = format!(
        "plugin_roots = [{:?}]\n[supervisor]\nrestart_delay_ms = 20\nstop_grace_ms = 500\n[limits]\nwatch_debounce_ms = 1\n",
        root.display().to_string()
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    settle(&proxy, &mut w, &["keep"]).await;
    // Create and delete plugin folders as fast as the disk allows, for a while, racing
    // the rescans (a 1 ms debounce scans while folders come and go).
    let ops = rounds() * 15;
    let churn = {
        let root = root.clone();
        let tag = tag.clone();
        std::thread::spawn(move || {
            let mut seed: u64 = 0x5eed ^ u64::from(std::process::id());
            for i in 0..ops {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let name = format!("p{}", (seed >> 33) % 4);
                if (seed >> 40).is_multiple_of(2) {
                    make_plugin(&root, &name, &tag);
                } else {
                    let _ = std::fs::remove_dir_all(root.join(&name));
                }
                if i.is_multiple_of(8) {
                    std::thread::sleep(Duration::from_millis((seed >> 50) % 5));
                }
            }
            for name in ["p0", "p1", "p2", "p3"] {
                let _ = std::fs::remove_dir_all(root.join(name));
            }
            make_plugin(&root, "p1", &tag);
        })
    };
    // The sidecar keeps answering while it churns.
    while !churn.is_finished() {
        w.client.ping().await.expect("AHP ping during the churn");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    churn.join().unwrap();
    settle(&proxy, &mut w, &["keep", "p1"]).await;
    // One server process per plugin left on disk, nothing else.
    let mut children = Vec::new();
    let exact = eventually(|| {
        children = descendants(proxy.pid());
        children.len() == 2
    })
    .await;
    assert!(
        exact,
        "{:?}",
        children.iter().map(|p| cmdline(*p)).collect::<Vec<_>>()
    );
    eprintln!(
        "plugin churn: {ops} creates/deletes; {} server processes after",
        children.len()
    );
    shut_down(proxy, &tag).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_watched_root_removed_and_recreated_is_watched_again() {
    let tag = tag("root");
    let dir = ScratchDir::new("fault-root");
    let root = dir.path().join("plugins");
    make_plugin(&root, "first", &tag);
    let config = format!(
        "plugin_roots = [{:?}]\n[supervisor]\nrestart_delay_ms = 20\nstop_grace_ms = 500\n[limits]\nwatch_debounce_ms = 20\n",
        root.display().to_string()
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    settle(&proxy, &mut w, &["first"]).await;
    let cycles = rounds() / 2;
    // Remove and recreate the root quickly, without waiting for the sidecar.
    for i in 0..cycles {
        let _ = std::fs::remove_dir_all(&root);
        std::thread::sleep(Duration::from_millis(i as u64 % 7));
        make_plugin(&root, &format!("r{}", i % 3), &tag);
    }
    let last = format!("r{}", (cycles - 1) % 3);
    settle(&proxy, &mut w, &[last.as_str()]).await;
    // Then one at a time: the root is moved away and comes back full (100 plugins, so
    // rescanning it takes a while), and one more plugin is written at different moments
    // after that (before, during and after the sidecar rescans it). Each time the view
    // ends up equal to the folder.
    let aside = dir.path().join("aside");
    let _ = std::fs::remove_dir_all(&root);
    let mut want: Vec<String> = (0..100).map(|i| format!("bulk-{i:03}")).collect();
    for name in &want {
        make_bulk_plugin(&aside, name);
    }
    settle(&proxy, &mut w, &[]).await;
    for (i, delay) in (0u64..=40).step_by(8).enumerate() {
        std::fs::rename(&aside, &root).unwrap();
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let name = format!("s{i}");
        make_plugin(&root, &name, &tag);
        want.push(name);
        settle(
            &proxy,
            &mut w,
            &want.iter().map(String::as_str).collect::<Vec<_>>(),
        )
        .await;
        std::fs::rename(&root, &aside).unwrap();
        settle(&proxy, &mut w, &[]).await;
    }
    std::fs::rename(&aside, &root).unwrap();
    // And an edit inside the recreated root still arrives.
    make_plugin(&root, "late", &tag);
    want.push("late".into());
    settle(
        &proxy,
        &mut w,
        &want.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    assert!(eventually(|| descendants(proxy.pid()).len() == 7).await);
    eprintln!("root removed and recreated {} times", cycles + 6);
    shut_down(proxy, &tag).await;
}
