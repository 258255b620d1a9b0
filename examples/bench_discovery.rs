//! Discovery benchmark: prints numbers, baseline side by side, no assertions.
//!
//! 1. Initial scan of 1,000 plugins / 10,000 files: `Catalog::scan` vs a plain walk that only
//!    reads every file (the I/O floor), each in a fresh process so peak RSS is its own.
//! 2. Edit → `session/customizationUpdated` at a subscribed official AHP client, through the
//!    real `ahp-proxy` binary watching that tree, over 200 edits; baseline: the raw notify
//!    event for the same write, seen by a watcher in this process.
//!
//! Run: `cargo run --release --example bench_discovery` (builds the proxy binary first:
//! `cargo build --release`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;

use ahp::{Client, ClientConfig, SubscriptionEvent};
use ahp_proxy::catalog::{Catalog, Sources};
use ahp_proxy::discovery::Context;
use ahp_types::StateAction;
use notify::Watcher as _;

const PLUGINS: usize = 1_000;
const EDITS: usize = 200;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("scan") => return child_scan(Path::new(&args[2])),
        Some("walk") => return child_walk(Path::new(&args[2])),
        _ => {}
    }
    let dir = std::env::temp_dir().join(format!("ahp-proxy-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let plugins = dir.join("plugins");
    let files = generate(&plugins);
    println!(
        "tree: {PLUGINS} plugins, {files} files under {}",
        plugins.display()
    );

    println!("\n== initial scan (fresh process each, 3 runs, best shown) ==");
    let walk = best_of(3, || run_child("walk", &plugins));
    let scan = best_of(3, || run_child("scan", &plugins));
    println!(
        "{:<28} {:>10} {:>14} {:>12}",
        "", "time", "peak RSS", "items"
    );
    println!(
        "{:<28} {:>8.1}ms {:>11.1}MiB {:>12}",
        "baseline: read every file", walk.0, walk.1, walk.2
    );
    println!(
        "{:<28} {:>8.1}ms {:>11.1}MiB {:>12}",
        "Catalog::scan (discovery)", scan.0, scan.1, scan.2
    );

    println!("\n== edit -> customizationUpdated ({EDITS} edits, debounce 50 ms) ==");
    let (proxy_ms, notify_ms) = edit_latency(&dir, &plugins);
    report("baseline: raw notify event", &notify_ms);
    report("AHP client receives update", &proxy_ms);
    let _ = std::fs::remove_dir_all(&dir);
}

fn report(label: &str, samples: &[f64]) {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let pct = |p: f64| common::percentile(&s, p * 100.0);
    println!(
        "{label:<28} p50 {:>7.1}ms  p99 {:>7.1}ms  max {:>7.1}ms  (n={})",
        pct(0.5),
        pct(0.99),
        s[s.len() - 1],
        s.len()
    );
}

fn best_of(n: usize, mut f: impl FnMut() -> (f64, f64, usize)) -> (f64, f64, usize) {
    (0..n)
        .map(|_| f())
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("n > 0")
}

/// Write the tree: per plugin a manifest with one inline server, 3 skills, 2 agents,
/// 1 command, 2 rules, 1 hooks file = 10 files. The servers are declared `disabled`: this
/// measures discovery, not 1,000 supervisors retrying a command that does not exist.
fn generate(root: &Path) -> usize {
    let mut count = 0;
    let mut put = |path: PathBuf, text: String| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        count += 1;
    };
    for i in 0..PLUGINS {
        let p = root.join(format!("plugin-{i:04}"));
        put(
            p.join(".plugin/plugin.json"),
            format!("{{\n  \"name\": \"plugin-{i:04}\",\n  \"version\": \"1.0.{i}\",\n  \"mcpServers\": {{\n    \"server-{i}\": {{ \"command\": \"${{PLUGIN_ROOT}}/bin/server\", \"args\": [\"--id\", \"{i}\"], \"disabled\": true }}\n  }}\n}}\n"),
        );
        for s in 0..3 {
            put(p.join(format!("skills/skill-{s}/SKILL.md")), format!("---\nname: skill-{s}\ndescription: Skill {s} of plugin {i}.\n---\n\nDo the thing.\n"));
        }
        for a in 0..2 {
            put(p.join(format!("agents/agent-{a}.md")), format!("---\nname: agent-{a}\ndescription: Agent {a}\nmodel: sonnet\ntools: Read, Grep\n---\n\nYou review.\n"));
        }
        put(
            p.join("commands/run.md"),
            "---\ndescription: Run it\n---\n\nRun $ARGUMENTS.\n".into(),
        );
        for r in 0..2 {
            put(p.join(format!("rules/rule-{r}.mdc")), format!("---\ndescription: Rule {r}\nglobs: src/**/*.rs,tests/**/*.rs\nalwaysApply: false\n---\n\nBe exact.\n"));
        }
        put(p.join("hooks/hooks.json"), "{ \"hooks\": { \"SessionStart\": [ { \"hooks\": [ { \"type\": \"command\", \"command\": \"true\" } ] } ] } }\n".into());
    }
    count
}

/// `(milliseconds, peak RSS MiB, items)` reported by a child run.
fn run_child(mode: &str, plugins: &Path) -> (f64, f64, usize) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([mode, &plugins.to_string_lossy()])
        .output()
        .expect("run child");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text
        .split_whitespace()
        .map(|p| p.parse::<f64>().unwrap_or(0.0));
    (
        parts.next().unwrap_or(0.0),
        parts.next().unwrap_or(0.0),
        parts.next().unwrap_or(0.0) as usize,
    )
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn child_scan(plugins: &Path) {
    let ctx = Context::from_process(
        std::env::temp_dir().join("ahp-proxy-bench-data"),
        &Default::default(),
    );
    let started = Instant::now();
    let catalog = Catalog::scan(
        Sources {
            plugin_roots: vec![plugins.to_path_buf()],
            ..Sources::default()
        },
        &ctx,
    );
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let children: usize = catalog
        .customizations()
        .iter()
        .map(|c| {
            serde_json::to_value(c).unwrap()["children"]
                .as_array()
                .map_or(0, Vec::len)
        })
        .sum();
    println!("{elapsed} {} {children}", peak_rss_mib());
}

fn child_walk(plugins: &Path) {
    fn walk(dir: &Path, n: &mut usize) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, n);
            } else {
                let _ = std::fs::read(&path).unwrap();
                *n += 1;
            }
        }
    }
    let started = Instant::now();
    let mut n = 0;
    walk(plugins, &mut n);
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    println!("{elapsed} {} {n}", peak_rss_mib());
}

/// Start the real binary on the tree and time edits end to end.
fn edit_latency(dir: &Path, plugins: &Path) -> (Vec<f64>, Vec<f64>) {
    let binary = common::proxy_binary();
    let config = dir.join("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "plugin_roots = [{:?}]\n[limits]\nwatch_debounce_ms = 50\n[trust]\nmanifests = \"trusted\"\nplugins = \"trusted\"\ndirectories = \"trusted\"\n",
            plugins.display().to_string()
        ),
    )
    .unwrap();
    let proxy = common::start_proxy(&binary, &config);
    let url = proxy.url.clone();

    // Raw notify baseline: a watcher in this process on the same tree.
    let (ev_tx, ev_rx) = mpsc::channel::<Instant>();
    let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if let Ok(e) = e {
            if !matches!(e.kind, notify::EventKind::Access(_)) {
                let _ = ev_tx.send(Instant::now());
            }
        }
    })
    .unwrap();
    watcher
        .watch(plugins, notify::RecursiveMode::Recursive)
        .unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(async {
        let transport = ahp_ws::WebSocketTransport::connect(&url).await.unwrap();
        let client = Client::connect(transport, ClientConfig::default())
            .await
            .unwrap();
        client
            .initialize("bench".into(), vec!["1.0.0".into()], vec![])
            .await
            .unwrap();
        let (_, mut sub) = client.subscribe("ahp-proxy:/default".into()).await.unwrap();
        let mut proxy_ms = Vec::new();
        let mut notify_ms = Vec::new();
        for edit in 0..EDITS {
            let plugin = edit % PLUGINS;
            let path = plugins.join(format!("plugin-{plugin:04}/skills/skill-0/SKILL.md"));
            while ev_rx.try_recv().is_ok() {}
            let started = Instant::now();
            std::fs::write(
                &path,
                format!("---\nname: skill-0\ndescription: edit {edit}\n---\n"),
            )
            .unwrap();
            loop {
                let event = tokio::time::timeout(Duration::from_secs(10), sub.recv())
                    .await
                    .expect("update within 10 s")
                    .expect("subscription open");
                if let SubscriptionEvent::Action(envelope) = event {
                    if matches!(envelope.action, StateAction::SessionCustomizationUpdated(_)) {
                        break;
                    }
                }
            }
            proxy_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            if let Ok(first) = ev_rx.recv_timeout(Duration::from_secs(1)) {
                notify_ms.push(first.duration_since(started).as_secs_f64() * 1000.0);
            }
        }
        client.shutdown().await;
        (proxy_ms, notify_ms)
    });
    drop(proxy);
    result
}
