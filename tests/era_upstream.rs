//! The dual-era upstream through the real binary: modern-only and dual-era servers on the
//! official SDK v2 (stdio and stateless HTTP) come up `ready` and serve a legacy harness (the
//! official SDK v1 client, through `/mcp/<server>`) like any server; the rmcp example
//! server stays legacy; a server that exits on the probe is started afresh; a crashing
//! modern server is an `error` with its exit status and stderr.

mod common;
#[allow(dead_code)] // the toolkit serves several test files
mod era;

use common::{child_pids, server, Proxy, Watcher};
use era::{HttpServer, Outcome, Target, Toolkit, Transport, V1};

const FAST: &str = "[supervisor]\nrestart_delay_ms = 50\nrestart_delay_max_ms = 200\ncrash_loop_limit = 3\nstop_grace_ms = 500\n";

/// A `[servers.<name>]` table for era server `kind` over `transport` (an HTTP one is
/// started here and returned).
fn era_server(
    toolkit: &Toolkit,
    name: &str,
    kind: &str,
    transport: Transport,
) -> (String, Option<HttpServer>) {
    match transport {
        Transport::Stdio => {
            let argv = toolkit.server(kind, transport);
            let table = format!(
                "[servers.{name}]\ncommand = {:?}\nargs = {}\n",
                argv[0],
                serde_json::to_string(&argv[1..]).unwrap()
            );
            (table, None)
        }
        Transport::Http => {
            let http = toolkit.start_http(kind);
            (
                format!("[servers.{name}]\nurl = \"{}\"\n", http.url),
                Some(http),
            )
        }
    }
}

/// The outcomes of SDK v1 through `/mcp/<name>`, once the server is ready.
async fn through_proxy(toolkit: &Toolkit, config: &str, name: &str) -> (Proxy, Vec<Outcome>) {
    let proxy = Proxy::start(&format!("{FAST}{config}"));
    let mut w = Watcher::open(&proxy).await;
    w.until(name, "ready", &mut Vec::new()).await;
    let target = Target::Url(format!("{}/{name}", proxy.mcp_url));
    let outcomes = tokio::task::block_in_place(|| toolkit.drive(V1, &target));
    (proxy, outcomes)
}

/// Whether every scenario in `names` passed.
fn passed(outcomes: &[Outcome], names: &[&str]) -> Vec<String> {
    outcomes
        .iter()
        .filter(|o| names.contains(&o.scenario.as_str()) && !o.ok)
        .map(|o| format!("{}: {}", o.scenario, o.line))
        .collect()
}

async fn a_modern_only_server_serves_a_legacy_harness(transport: Transport) {
    let toolkit = Toolkit::load();
    let (table, _http) = era_server(&toolkit, "modern", "modern", transport);
    let (proxy, outcomes) = through_proxy(&toolkit, &table, "modern").await;
    let failed = passed(&outcomes, &["list", "call", "progress"]);
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(outcomes.iter().all(|o| o.era.as_deref() == Some("legacy")));
    proxy.wait_for_log(r#""version":"2026-07-28""#);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modern_only_stdio_server_is_ready_and_lists_and_calls_for_a_legacy_harness() {
    a_modern_only_server_serves_a_legacy_harness(Transport::Stdio).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modern_only_http_server_is_ready_and_lists_and_calls_for_a_legacy_harness() {
    a_modern_only_server_serves_a_legacy_harness(Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dual_era_sdk_server_is_spoken_to_in_modern() {
    let toolkit = Toolkit::load();
    for transport in [Transport::Stdio, Transport::Http] {
        let (table, _http) = era_server(&toolkit, "dual", "dual", transport);
        let (proxy, outcomes) = through_proxy(&toolkit, &table, "dual").await;
        let failed = passed(&outcomes, &["list", "call", "progress"]);
        assert!(failed.is_empty(), "{transport:?}: {failed:#?}");
        proxy.wait_for_log(r#""version":"2026-07-28""#);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rmcp_example_server_stays_legacy_on_one_process() {
    let proxy = Proxy::start(&format!("{FAST}{}", server("echo", "echo", &[])));
    let mut w = Watcher::open(&proxy).await;
    w.until("echo", "ready", &mut Vec::new()).await;
    proxy.wait_for_log(r#""version":"2025-11-25""#);
    assert_eq!(proxy.log_count(r#""version":"2026-07-28""#), 0);
    // The probe was answered on the child that serves: one process, nothing left behind.
    assert_eq!(
        child_pids(proxy.pid()).len(),
        1,
        "{:?}",
        child_pids(proxy.pid())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_exits_on_the_probe_is_started_afresh_in_legacy() {
    // A legacy server that exits on anything but `initialize` first (as some rmcp builds do).
    let script = format!(
        "read -r line; case \"$line\" in *server/discover*) exit 0;; esac; \
         {{ printf '%s\\n' \"$line\"; cat; }} | exec {:?} echo",
        common::examples()
    );
    let config = format!(
        "{FAST}[servers.picky]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        serde_json::to_string(&script).unwrap()
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("picky", "ready", &mut seen).await;
    assert!(!seen.iter().any(|s| s.ends_with("error")), "{seen:?}");
    proxy.wait_for_log(r#""version":"2025-11-25""#);
    // The probed child was reaped: only the serving one (sh, its pipeline) is left.
    let children = child_pids(proxy.pid());
    assert_eq!(children.len(), 1, "{children:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashing_modern_server_is_an_error_with_its_exit_status_and_stderr() {
    // Answers the probe as a modern-only server, then dies.
    let discover = r#"{"jsonrpc":"2.0","id":ID,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private"}}"#;
    let script = format!(
        "read -r line; id=$(printf '%s' \"$line\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/'); \
         printf '%s\\n' '{discover}' | sed \"s/ID/$id/\"; \
         read -r line; echo 'modern: out of luck' >&2; exit 5"
    );
    let config = format!(
        "{FAST}[servers.doomed]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        serde_json::to_string(&script).unwrap()
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let error = w.until("doomed", "error", &mut Vec::new()).await;
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("status 5"), "{message}");
    assert!(message.contains("modern: out of luck"), "{message}");
}

/// SDK v1 (a legacy harness declaring elicitation, sampling and roots) against a modern-only
/// server over `transport`, through `front`: its `input_required` answers become real
/// requests to the harness, and the server's list changes and resource updates (read from
/// the proxy's listen stream) reach it.
async fn a_legacy_harness_answers_a_modern_server(transport: Transport, stdio_front: bool) {
    let toolkit = Toolkit::load();
    let (table, _http) = era_server(&toolkit, "modern", "modern", transport);
    let wanted = [
        "elicit",
        "sample",
        "roots",
        "list_changed",
        "resource_updated",
    ];
    let outcomes = if stdio_front {
        let scratch = common::ScratchDir::new("bridge");
        let path = scratch.path().join("bridge.toml");
        std::fs::write(&path, format!("{FAST}{table}")).unwrap();
        let argv = vec![
            env!("CARGO_BIN_EXE_ahp-proxy").to_string(),
            "--config".into(),
            path.display().to_string(),
            "serve".into(),
            "--stdio".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ];
        tokio::task::block_in_place(|| toolkit.drive(V1, &Target::Command(argv)))
    } else {
        through_proxy(&toolkit, &table, "modern").await.1
    };
    let failed = passed(&outcomes, &wanted);
    assert!(failed.is_empty(), "{transport:?}: {failed:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_harness_answers_a_modern_stdio_server_through_its_endpoint() {
    a_legacy_harness_answers_a_modern_server(Transport::Stdio, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_harness_answers_a_modern_http_server_through_its_endpoint() {
    a_legacy_harness_answers_a_modern_server(Transport::Http, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_harness_on_stdio_answers_a_modern_server() {
    a_legacy_harness_answers_a_modern_server(Transport::Stdio, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_capability_the_harness_did_not_declare_is_a_clear_error() {
    let toolkit = Toolkit::load();
    let (table, _http) = era_server(&toolkit, "modern", "modern", Transport::Stdio);
    // A raw legacy harness declaring no capabilities at all.
    let (proxy, mut harness) = common::stdio_harness(&format!("{FAST}{table}")).await;
    let mut w = Watcher::open(&proxy).await;
    w.until("modern", "ready", &mut Vec::new()).await;
    let mut asked = Vec::new();
    let exchange = harness
        .request(
            "tools/call",
            Some(r#"{"name":"elicit","arguments":{}}"#),
            &mut |method, _| {
                asked.push(method.to_string());
                String::new()
            },
        )
        .await;
    let response: serde_json::Value = serde_json::from_str(exchange.response()).unwrap();
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("elicitation/create") && message.contains("elicitation"),
        "{response}"
    );
    assert!(asked.is_empty(), "{asked:?}");
}

/// A launch log: `sh -c` runs `then` after writing a line to `log` (one line per spawn).
fn logged(log: &std::path::Path, then: &str) -> String {
    format!("echo spawned >> {:?}; {then}", log.display().to_string())
}

fn spawns(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .count()
}

/// Server `name`, run by `sh -c` as `script` (which is given the spawn log to write to),
/// comes up `ready` without an error, spoken to in `version`, from one child.
async fn ready_on_one_child(
    name: &str,
    script: impl Fn(&std::path::Path) -> String,
    version: &str,
) {
    let scratch = common::ScratchDir::new(name);
    let log = scratch.path().join("spawns");
    let config = format!(
        "{FAST}[servers.{name}]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        serde_json::to_string(&script(&log)).unwrap()
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until(name, "ready", &mut seen).await;
    assert!(!seen.iter().any(|s| s.ends_with("error")), "{seen:?}");
    proxy.wait_for_log(&format!(r#""version":"{version}""#));
    assert_eq!(spawns(&log), 1, "one child");
}

/// The SDK v2 modern-only stdio server's command line, quoted for `sh`.
fn modern_server_command(toolkit: &Toolkit) -> String {
    let argv = toolkit.server("modern", Transport::Stdio);
    let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    quoted.join(" ")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modern_server_answering_the_probe_after_twelve_seconds_is_modern_on_one_child() {
    let command = modern_server_command(&Toolkit::load());
    let script = |log: &std::path::Path| logged(log, &format!("sleep 12; exec {command}"));
    ready_on_one_child("late", script, "2026-07-28").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_server_silent_on_the_probe_is_initialized_on_the_same_child() {
    // Drops the probe unanswered, passes everything else to the rmcp example server.
    let script = |log: &std::path::Path| {
        logged(
            log,
            &format!(
                "while IFS= read -r line; do case \"$line\" in *server/discover*) ;; \
                 *) printf '%s\\n' \"$line\";; esac; done | exec {:?} echo",
                common::examples()
            ),
        )
    };
    ready_on_one_child("quiet", script, "2025-11-25").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_probe_refused_with_the_version_it_asked_for_is_asked_again() {
    let command = modern_server_command(&Toolkit::load());
    // The first probe is refused `-32022` naming 2026-07-28, the version asked, as
    // supported; then the SDK v2 modern-only server reads the rest.
    let refusal = r#"{"jsonrpc":"2.0","id":ID,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}"#;
    let script = |log: &std::path::Path| {
        logged(
            log,
            &format!(
                "read -r line; id=$(printf '%s' \"$line\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/'); \
                 printf '%s\\n' '{refusal}' | sed \"s/ID/$id/\"; exec {command}"
            ),
        )
    };
    ready_on_one_child("contrary", script, "2026-07-28").await;
}
