//! Soak, the quick version (`examples/soak` is the long one, with the same traffic): a few
//! seconds of mixed traffic on both faces, all of it served, then every client gone; the
//! proxy is still up and its open file descriptors, counted while every server runs, come
//! back to where they were before the traffic (RSS is only printed).

mod common;
#[allow(dead_code)]
#[path = "../examples/soak/sample.rs"]
mod sample;
#[allow(dead_code)]
#[path = "../examples/soak/traffic.rs"]
mod traffic;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{Proxy, ScratchDir, PATIENCE};
use tokio::time::Instant;

/// Long enough for every kind of traffic to happen several times (restarts every 1.5 s,
/// `crashy` every 3 s, edits every 0.7 s).
const TRAFFIC: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread")]
async fn mixed_traffic_on_both_faces_leaves_no_descriptor_behind() {
    let dir = ScratchDir::new("soak");
    let (layout, config) = traffic::Layout::create(dir.path(), Path::new(common::examples()));
    let proxy = Proxy::start(&config);
    let pid = proxy.pid();
    let ids = traffic::wait_ready(&proxy.url, PATIENCE).await;
    let servers = traffic::SERVERS.len();
    // Idle: every server running, no client left (the readiness client is closing).
    let idle_rss = sample::rss_kib(pid).expect("the proxy is gone");
    let idle = settled(&proxy, servers, None).await;

    let counts = Arc::new(traffic::Counts::default());
    let until = Instant::now() + TRAFFIC;
    traffic::run(
        &proxy.url,
        &proxy.mcp_url,
        &layout,
        &ids,
        until,
        counts.clone(),
    )
    .await;
    assert!(sample::alive(pid), "the proxy died: {}", proxy.logs());
    let loaded = sample::take(pid, TRAFFIC).expect("the proxy is gone");
    let n = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let summary = counts.summary();
    // Every kind of traffic happened, and it was served.
    assert!(n(&counts.harness_sessions) > 1, "{summary}");
    assert!(n(&counts.harness_requests) > 10, "{summary}");
    assert!(
        n(&counts.harness_errors) * 10 < n(&counts.harness_requests),
        "{summary}"
    );
    assert!(n(&counts.ahp_connections) > 4, "{summary}");
    assert!(n(&counts.ahp_actions) > 0, "{summary}");
    assert_eq!(n(&counts.ahp_errors), 0, "{summary}");
    assert!(n(&counts.restarts) > 1, "{summary}");
    assert!(n(&counts.edits) > 1, "{summary}");

    // Every client is gone and every server runs again: the descriptors come back to the
    // idle count (a hang guard, not a timing assertion: they may take a moment to close).
    let after = settled(&proxy, servers, Some(idle)).await;
    assert!(sample::alive(pid), "the proxy died: {}", proxy.logs());
    eprintln!(
        "soak (quick): {summary}; fds {idle} idle → {} loaded → {after} idle; RSS {idle_rss} → {} KiB",
        loaded.fds,
        sample::rss_kib(pid).unwrap_or(0)
    );
}

/// The proxy's descriptors while all `servers` run, once they stop changing (or, with
/// `target`, once they are back to it; a leak shows as never getting there).
async fn settled(proxy: &Proxy, servers: usize, target: Option<usize>) -> usize {
    let pid = proxy.pid();
    let deadline = Instant::now() + PATIENCE;
    let mut last = None;
    loop {
        let fds = sample::steady_fds(pid, servers, PATIENCE)
            .await
            .unwrap_or_else(|why| panic!("{why}; the proxy's last lines:\n{}", tail(proxy)));
        let done = match target {
            Some(target) => fds <= target,
            None => last == Some(fds),
        };
        if done {
            return fds;
        }
        assert!(
            Instant::now() < deadline,
            "descriptors did not settle: {fds} now, {target:?} expected; open: {:?}",
            open_fds(pid)
        );
        last = Some(fds);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The proxy's last 30 log lines.
fn tail(proxy: &Proxy) -> String {
    let logs = proxy.logs();
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// What each open descriptor of `pid` points at (for the failure message).
fn open_fds(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}
