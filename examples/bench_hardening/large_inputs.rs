//! Large legal inputs: a manifest of 10,000 servers edited over and over, and one plugin
//! beside thousands of disabled servers (memory, edit latency, start-up and shutdown).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::ahp::{self, SESSION};
use crate::common;
use crate::proxy::{config, Options, Running};
use crate::verdict;

/// How much resident memory may still grow over the second half of the manifest's edits,
/// in MiB: once the replay log is full, memory must stay flat (the first edits raise it a
/// lot, docs/hardening.md says why).
const LATE_GROWTH_BOUND: f64 = 32.0;
/// What a disabled server may cost, in bytes of resident memory: a guard against going back
/// (it was ~23 KB, then 5 to 6 KB; now about 2.5 KB), not the goal of a few hundred bytes
/// (docs/hardening.md says why).
const PER_SERVER_BOUND: f64 = 4096.0;
/// How many times the `manifest` section edits its manifest (a multiple of 30; more with
/// `AHP_PROXY_BENCH_EDITS`).
fn edits() -> usize {
    std::env::var("AHP_PROXY_BENCH_EDITS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(60, |n| n.div_ceil(30).max(1) * 30)
}
/// How long the proxy may take to go idle after start-up before the bench moves on.
const SETTLE_LIMIT: Duration = Duration::from_secs(180);

/// A manifest of `n` disabled servers, the first one named `first`: as short as a server
/// can be written, so that 100,000 fit in one file (4 MiB at most).
fn write_manifest(path: &Path, n: usize, first: &str) {
    let mut servers = serde_json::Map::new();
    for i in 0..n {
        let name = if i == 0 {
            first.to_string()
        } else {
            format!("s{i}")
        };
        servers.insert(name, json!({"command": "t", "disabled": true}));
    }
    std::fs::write(path, json!({"mcpServers": servers}).to_string()).unwrap();
}

pub async fn manifest(binary: &Path, dir: &Path) -> bool {
    let root = dir.join("manifest-edits");
    std::fs::create_dir_all(&root).unwrap();
    let manifest = root.join("servers.mcp.json");
    write_manifest(&manifest, 10_000, "first-0");
    let config = config(
        &root,
        "proxy.toml",
        &format!(
            "manifests = [{:?}]\n[limits]\nwatch_debounce_ms = 0\n[trust]\nmanifests = \"trusted\"\nplugins = \"trusted\"\ndirectories = \"trusted\"\n",
            manifest.display().to_string()
        ),
        "",
    );
    let started = Instant::now();
    let proxy = Running::start(binary, &config, Options::default()).expect("manifest");
    proxy.settle(started, SETTLE_LIMIT);
    let mut ws = ahp::connect(&proxy.url).await;
    ahp::initialize(&mut ws, "watcher", &[SESSION]).await;
    // Each sample once the proxy is idle again: what it keeps, not what an edit in flight
    // holds for a moment.
    let idle = Duration::from_secs(10);
    proxy.settle(Instant::now(), idle);
    let before = proxy.rss_mib();
    // RSS after every 15 edits: the replay log fills in the first few (each update is the
    // whole container), so the later ones show whether memory still grows.
    let mut samples = Vec::new();
    let edits = edits();
    for edit in 1..=edits {
        let name = format!("first-{edit}");
        write_manifest(&manifest, 10_000, &name);
        ahp::until_frame_with(&mut ws, &format!("\"{name}\"")).await;
        if edit % 15 == 0 {
            proxy.settle(Instant::now(), idle);
            samples.push(proxy.rss_mib());
        }
    }
    proxy.stop();
    let after = samples.last().copied().unwrap_or(before);
    let late_growth = after - samples[samples.len() / 2 - 1];
    let shown: Vec<String> = samples.iter().map(|rss| format!("{rss:.1}")).collect();
    verdict(
        late_growth <= LATE_GROWTH_BOUND,
        format!(
            "manifest: 10,000 disabled servers, the manifest edited {edits} times: RSS {before:.1} \
             MiB before, {} MiB after every 15 edits",
            shown.join(" → ")
        ),
    )
}

/// One plugin beside a manifest of `n` disabled servers; prints the figures and returns the
/// resident memory (`base`: the same with no servers, for the cost per server) and whether
/// the cost per server is within its bound.
pub async fn disabled(binary: &Path, dir: &Path, n: usize, base: f64) -> (f64, bool) {
    let root = dir.join(format!("disabled-{n}"));
    let plugin = root.join("plugins/one");
    std::fs::create_dir_all(plugin.join("skills/s")).unwrap();
    let skill = plugin.join("skills/s/SKILL.md");
    std::fs::write(&skill, "---\nname: s\ndescription: start\n---\n").unwrap();
    let manifest = root.join("servers.mcp.json");
    write_manifest(&manifest, n, "s0");
    let manifest_bytes = std::fs::metadata(&manifest).map(|m| m.len()).unwrap_or(0);
    let config = config(
        &root,
        "proxy.toml",
        &format!(
            "plugin_roots = [{:?}]\nmanifests = [{:?}]\n[limits]\nwatch_debounce_ms = 0\n[trust]\nmanifests = \"trusted\"\nplugins = \"trusted\"\ndirectories = \"trusted\"\n",
            root.join("plugins").display().to_string(),
            manifest.display().to_string()
        ),
        "",
    );
    let started = Instant::now();
    let proxy = Running::start(binary, &config, Options::default()).expect("disabled");
    let settled = proxy.settle(started, SETTLE_LIMIT);
    let rss = proxy.rss_mib();
    let mut ws = ahp::connect(&proxy.url).await;
    ahp::initialize(&mut ws, "editor", &[SESSION]).await;
    let mut latencies = Vec::new();
    for edit in 0..30 {
        let marker = format!("edit-{edit}-done");
        let written = Instant::now();
        std::fs::write(
            &skill,
            format!("---\nname: s\ndescription: {marker}\n---\n"),
        )
        .unwrap();
        ahp::until_frame_with(&mut ws, &marker).await;
        latencies.push(written.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    drop(ws);
    let stopped = proxy.stop();
    let cost = if n > 0 {
        (rss - base).max(0.0) * 1048576.0 / n as f64
    } else {
        0.0
    };
    let per_server = if n > 0 {
        format!(" ({cost:.0} bytes per server)")
    } else {
        String::new()
    };
    let line = format!(
        "disabled: {n} servers ({} KiB manifest) and one plugin: idle {} after start, \
         RSS {rss:.1} MiB{per_server}; an edit of the plugin reaches a client in p50 {:.1} ms, \
         max {:.1} ms; shutdown {:.2} s",
        manifest_bytes / 1024,
        settled.map_or(
            format!("not yet {} s", SETTLE_LIMIT.as_secs()),
            |d| format!("{:.1} s", d.as_secs_f64())
        ),
        common::percentile(&latencies, 50.0),
        latencies.last().copied().unwrap_or(0.0),
        stopped.as_secs_f64()
    );
    (rss, verdict(cost <= PER_SERVER_BOUND, line))
}
