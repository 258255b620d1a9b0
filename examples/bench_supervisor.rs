//! Supervisor benchmark: prints numbers, baseline side by side, no assertions.
//!
//! 1. Start-up of 50 stdio servers (the bundled echo example) until all are `ready`:
//!    through the real `ahp-proxy` binary, timed from its spawn until an official AHP client
//!    has seen all 50 `ready`; baseline: this process spawns the same 50 children and does
//!    the same handshake + `tools/list` with rmcp directly.
//! 2. Sidecar RSS with 50 servers ready (children excluded) vs the same binary with none.
//! 3. Crash → state at an AHP client: a server's process is SIGKILLed; time until the
//!    client receives `error`, and `starting` (the restart); baseline: the same child
//!    killed under this process, time until `wait()` returns (the kernel's notification).
//!
//! Run: `cargo build --release && cargo run --release --example bench_supervisor`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;

use common::{examples_binary, percentile, proxy_binary, start_proxy, Proxy};

use ahp::{Client, ClientConfig, SessionSubscription, SubscriptionEvent};
use ahp_types::state::{SessionState, SnapshotState};
use ahp_types::StateAction;
use rmcp::ServiceExt;

const SERVERS: usize = 50;
const RUNS: usize = 3;
const CRASHES: usize = 100;

fn main() {
    let binary = proxy_binary();
    let examples = examples_binary();
    let dir = common::scratch_dir("bench-sup");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    println!("== start-up of {SERVERS} stdio servers to all ready ({RUNS} runs, median) ==");
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    let mut rss_full = Vec::new();
    let mut rss_empty = Vec::new();
    for run in 0..RUNS {
        direct.push(runtime.block_on(direct_startup(&examples)));
        let config = dir.join(format!("proxy-{run}.toml"));
        std::fs::write(&config, servers_config(&examples, SERVERS, "echo", "")).unwrap();
        let (ms, rss) = runtime.block_on(proxied_startup(&binary, &config));
        proxied.push(ms);
        rss_full.push(rss);
        let empty = dir.join("empty.toml");
        std::fs::write(&empty, "").unwrap();
        rss_empty.push(runtime.block_on(idle_rss(&binary, &empty)));
    }
    println!("{:<52} {:>10}", "", "time");
    println!(
        "{:<52} {:>8.1}ms",
        "baseline: spawn + rmcp handshake + tools/list here",
        median(&mut direct)
    );
    println!(
        "{:<52} {:>8.1}ms",
        "ahp-proxy: spawn proxy → AHP client sees all ready",
        median(&mut proxied)
    );
    println!("\n== sidecar RSS (children excluded, median) ==");
    println!(
        "{:<52} {:>8.1}MiB",
        "ahp-proxy with no servers",
        median(&mut rss_empty)
    );
    println!(
        "{:<52} {:>8.1}MiB",
        format!("ahp-proxy with {SERVERS} servers ready"),
        median(&mut rss_full)
    );

    println!(
        "\n== crash (SIGKILL of the server process) → state at the client, {CRASHES} crashes =="
    );
    let mut baseline = runtime.block_on(direct_crash(&examples));
    let config = dir.join("crash.toml");
    std::fs::write(
        &config,
        servers_config(
            &examples,
            1,
            "echo",
            "[supervisor]\nrestart_delay_ms = 1\nrestart_delay_max_ms = 1\ncrash_loop_limit = 1000\nhealthy_after_ms = 0\n",
        ),
    )
    .unwrap();
    let (mut error, mut starting) = runtime.block_on(proxied_crash(&binary, &config));
    println!("{:<52} {:>9} {:>9} {:>9}", "", "p50", "p99", "max");
    for (label, samples) in [
        ("baseline: waitpid in the parent returns", &mut baseline),
        ("AHP client receives `error`", &mut error),
        ("AHP client receives `starting` (restart)", &mut starting),
    ] {
        samples.sort_by(f64::total_cmp);
        println!(
            "{:<52} {:>7.2}ms {:>7.2}ms {:>7.2}ms",
            label,
            percentile(samples, 50.0),
            percentile(samples, 99.0),
            samples.last().copied().unwrap_or(0.0)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn servers_config(examples: &Path, n: usize, kind: &str, extra: &str) -> String {
    let mut text = String::from(extra);
    for i in 0..n {
        text.push_str(&format!(
            "[servers.s{i:02}]\ncommand = {:?}\nargs = [{kind:?}]\n",
            examples.display().to_string()
        ));
    }
    text
}

async fn direct_startup(examples: &Path) -> f64 {
    let started = Instant::now();
    let mut handshakes = Vec::new();
    for _ in 0..SERVERS {
        let examples = examples.to_path_buf();
        handshakes.push(tokio::spawn(async move {
            let mut child = tokio::process::Command::new(examples)
                .arg("echo")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
            let service = ().serve(io).await.unwrap();
            service.peer().list_all_tools().await.unwrap();
            (service, child)
        }));
    }
    let mut running = Vec::new();
    for h in handshakes {
        running.push(h.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    for (service, mut child) in running {
        let _ = service.cancel().await;
        let _ = child.kill().await;
    }
    elapsed
}

async fn subscribe(proxy: &Proxy) -> (Client, SessionSubscription, SessionState) {
    let transport = ahp_ws::WebSocketTransport::connect(&proxy.url)
        .await
        .unwrap();
    let client = Client::connect(transport, ClientConfig::default())
        .await
        .unwrap();
    client
        .initialize("bench".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    let (result, sub) = client.subscribe("ahp-proxy:/default".into()).await.unwrap();
    let state = match result.snapshot.unwrap().state {
        SnapshotState::Session(s) => *s,
        _ => panic!("not a session"),
    };
    (client, sub, state)
}

fn states(session: &SessionState) -> Vec<String> {
    session
        .customizations
        .iter()
        .flatten()
        .map(|c| {
            serde_json::to_value(c).unwrap()["state"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

async fn next_action(sub: &mut SessionSubscription) -> StateAction {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), sub.recv()).await {
            Ok(Some(SubscriptionEvent::Action(envelope))) => return envelope.action,
            Ok(Some(_)) => continue,
            other => panic!("subscription ended: {}", other.is_ok()),
        }
    }
}

async fn proxied_startup(binary: &Path, config: &Path) -> (f64, f64) {
    let started = Instant::now();
    let proxy = start_proxy(binary, config);
    let (client, mut sub, mut mirror) = subscribe(&proxy).await;
    while states(&mirror).iter().filter(|s| *s == "ready").count() < SERVERS {
        let action = next_action(&mut sub).await;
        let _ = ahp::reducers::apply_action_to_session(&mut mirror, &action);
    }
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let rss = rss_mib(proxy.child.id());
    client.shutdown().await;
    (elapsed, rss)
}

async fn idle_rss(binary: &Path, config: &Path) -> f64 {
    let proxy = start_proxy(binary, config);
    let (client, _sub, _) = subscribe(&proxy).await;
    let rss = rss_mib(proxy.child.id());
    client.shutdown().await;
    rss
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

async fn direct_crash(examples: &Path) -> Vec<f64> {
    let mut samples = Vec::new();
    for _ in 0..CRASHES {
        let mut child = tokio::process::Command::new(examples)
            .arg("echo")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let service = ().serve(io).await.unwrap();
        let pid = child.id().unwrap();
        let started = Instant::now();
        kill9(pid);
        let _ = child.wait().await;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        let _ = service.cancel().await;
    }
    samples
}

fn kill9(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// The one child of `parent`.
fn child_of(parent: u32) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(1) == Some(&parent.to_string().as_str()) {
            return Some(pid);
        }
    }
    None
}

async fn proxied_crash(binary: &Path, config: &Path) -> (Vec<f64>, Vec<f64>) {
    let proxy = start_proxy(binary, config);
    let (client, mut sub, mut mirror) = subscribe(&proxy).await;
    let mut errors = Vec::new();
    let mut startings = Vec::new();
    for _ in 0..CRASHES {
        while states(&mirror) != ["ready"] {
            let action = next_action(&mut sub).await;
            let _ = ahp::reducers::apply_action_to_session(&mut mirror, &action);
        }
        let pid = child_of(proxy.child.id()).expect("the server process");
        let started = Instant::now();
        kill9(pid);
        let mut seen_error = false;
        loop {
            let action = next_action(&mut sub).await;
            let at = started.elapsed().as_secs_f64() * 1000.0;
            let _ = ahp::reducers::apply_action_to_session(&mut mirror, &action);
            match states(&mirror)[0].as_str() {
                "error" if !seen_error => {
                    errors.push(at);
                    seen_error = true;
                }
                "starting" if seen_error => {
                    startings.push(at);
                    break;
                }
                _ => {}
            }
        }
    }
    client.shutdown().await;
    (errors, startings)
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
