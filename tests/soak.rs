//! Soak, the quick version (`examples/soak` is the long one, with the same traffic): a few
//! seconds of mixed traffic on both faces, then every client gone; the proxy's open file
//! descriptors come back to where they were before the traffic (RSS is only printed).

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
/// Descriptors the proxy may hold beyond its idle count: a server caught mid-restart.
const FD_SLACK: usize = 2;

#[tokio::test(flavor = "multi_thread")]
async fn mixed_traffic_on_both_faces_leaves_no_descriptor_behind() {
    let dir = ScratchDir::new("soak");
    let exe = Path::new(env!("CARGO_BIN_EXE_ahp-proxy"));
    let (layout, config) = traffic::Layout::create(dir.path(), exe);
    let proxy = Proxy::start(&config);
    let pid = proxy.pid();
    let ids = traffic::wait_ready(&proxy.url, PATIENCE).await;
    let idle = sample::take(pid, Duration::ZERO);

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
    let loaded = sample::take(pid, TRAFFIC);
    let n = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert!(n(&counts.harness_sessions) > 1, "{}", counts.summary());
    assert!(n(&counts.harness_requests) > 10, "{}", counts.summary());
    assert!(n(&counts.ahp_connections) > 4, "{}", counts.summary());
    assert!(n(&counts.restarts) > 1, "{}", counts.summary());

    // Every client is gone: the descriptors come back (servers are running again, as at
    // the start; `crashy` may be between two runs). A hang guard, not a timing assertion.
    let deadline = Instant::now() + PATIENCE;
    let mut now = sample::fds(pid);
    while now > idle.fds + FD_SLACK {
        assert!(
            Instant::now() < deadline,
            "descriptors leaked: {} idle before the traffic, {now} after ({}); open: {:?}",
            idle.fds,
            counts.summary(),
            open_fds(pid)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        now = sample::fds(pid);
    }
    eprintln!(
        "soak (quick): {}; fds {} idle → {} loaded → {now} idle; RSS {} → {} KiB",
        counts.summary(),
        idle.fds,
        loaded.fds,
        idle.rss_kib,
        sample::rss_kib(pid)
    );
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
