//! Soak: a bounded run of mixed traffic on both faces of the release proxy (harness sessions
//! on `/mcp`, AHP clients coming and going, restarts, crashes, edits on disk), sampling the
//! proxy's resident memory and open file descriptors every second; prints them at the start,
//! after warm-up, midway and at the end, and whether they stayed flat. Exits 2 when they
//! grew or the proxy went away (so a script can tell), 0 otherwise.
//!
//! Run: `cargo build --release && cargo run --release --example soak -- --secs 180`
//! (`tests/soak.rs` runs the same traffic for a few seconds in CI and checks descriptors).

use std::sync::Arc;
use std::time::Duration;

#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
mod sample;
mod traffic;

use sample::{trend_per_minute, Sample};
use tokio::time::Instant;

const DEFAULT_SECS: u64 = 180;

fn main() {
    // reqwest (rmcp's client) needs the TLS provider the proxy uses.
    ahp_proxy::supervisor::https::install_provider();
    let secs = parse_secs();
    let binary = common::proxy_binary();
    let dir = common::scratch_dir("soak");
    let (layout, config_text) = traffic::Layout::create(&dir, &common::examples_binary());
    let config = dir.join("proxy.toml");
    std::fs::write(&config, config_text).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let proxy = common::start_proxy(&binary, &config);
    let pid = proxy.child.id();
    let counts = Arc::new(traffic::Counts::default());

    let (idle_start, samples, idle_end) = runtime.block_on(async {
        let ids = traffic::wait_ready(&proxy.url, Duration::from_secs(60)).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut idle_start = sample::take(pid, Duration::ZERO).expect("the proxy is gone");
        idle_start.fds = steady(pid).await.expect("idle descriptors");
        let started = Instant::now();
        let until = started + Duration::from_secs(secs);
        let sampler = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut next = started;
            while next <= until {
                tokio::time::sleep_until(next).await;
                let Some(s) = sample::take(pid, started.elapsed()) else {
                    println!(
                        "{:>6.0}s  the proxy is gone",
                        started.elapsed().as_secs_f64()
                    );
                    break;
                };
                if samples.len() % 10 == 0 {
                    println!(
                        "{:>6.0}s  RSS {:>8.1} MiB  fds {:>4}",
                        s.at.as_secs_f64(),
                        mib(s.rss_kib),
                        s.fds
                    );
                }
                samples.push(s);
                next += Duration::from_secs(1);
            }
            samples
        });
        traffic::run(
            &proxy.url,
            &proxy.mcp_url,
            &layout,
            &ids,
            until,
            counts.clone(),
        )
        .await;
        let samples = sampler.await.unwrap();
        // Idle again: every client gone; wait for the descriptors to settle (at most 30 s).
        let settle = Instant::now() + Duration::from_secs(30);
        let idle_end = loop {
            let Some(mut now) = sample::take(pid, started.elapsed()) else {
                break None;
            };
            match steady(pid).await {
                Ok(fds) => now.fds = fds,
                Err(why) => {
                    println!("{why}");
                    break None;
                }
            }
            if now.fds <= idle_start.fds || Instant::now() >= settle {
                break Some(now);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        (idle_start, samples, idle_end)
    });

    let Some(idle_end) = idle_end else {
        println!(
            "\n== soak: the proxy did not come back to idle ({})",
            counts.summary()
        );
        let warnings = proxy.warnings.lock().unwrap();
        for line in warnings.iter().rev().take(10).rev() {
            println!("{line}");
        }
        std::process::exit(2);
    };
    let warmup = Duration::from_secs((secs / 10).max(10).min(secs / 2));
    let loaded: Vec<Sample> = samples.iter().copied().filter(|s| s.at >= warmup).collect();
    let after_warmup = loaded.first().copied().unwrap_or(idle_start);
    let middle = loaded.get(loaded.len() / 2).copied().unwrap_or(idle_start);
    let end = loaded.last().copied().unwrap_or(idle_start);
    let peak_rss = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    println!("\n== soak: {secs} s of mixed traffic ==");
    println!("{}", counts.summary());
    println!("{:<28} {:>8} {:>12} {:>6}", "", "at", "RSS", "fds");
    for (label, s) in [
        ("idle, before traffic", idle_start),
        ("after warm-up", after_warmup),
        ("midway", middle),
        ("end of traffic", end),
        ("idle, after traffic", idle_end),
    ] {
        println!(
            "{label:<28} {:>7.0}s {:>8.1} MiB {:>6}",
            s.at.as_secs_f64(),
            mib(s.rss_kib),
            s.fds
        );
    }
    // Flat: the second half of the run (after warm-up) peaks no higher than the first half
    // did, give or take 10 % (at least 4 MiB: the allocator breathes with the traffic). A
    // leak keeps raising the peak; bounded tables that fill up early do not.
    let (first, second) = loaded.split_at(loaded.len() / 2);
    let peak = |part: &[Sample]| part.iter().map(|s| mib(s.rss_kib)).fold(0.0, f64::max);
    let (first_peak, second_peak) = (peak(first), peak(second));
    let growth = second_peak - first_peak;
    let slack = (first_peak * 0.10).max(4.0);
    let trend = trend_per_minute(&loaded, |s| mib(s.rss_kib));
    let fd_trend = trend_per_minute(&loaded, |s| s.fds as f64);
    println!("peak RSS {:.1} MiB", mib(peak_rss));
    println!(
        "RSS peak, first half → second half after warm-up: {first_peak:.1} → {second_peak:.1} MiB \
         ({growth:+.1}, slack {slack:.1}), trend {trend:+.2} MiB/min: {}",
        verdict(growth <= slack)
    );
    println!(
        "fds idle before → idle after: {} → {}, trend under load {fd_trend:+.2}/min: {}",
        idle_start.fds,
        idle_end.fds,
        verdict(idle_end.fds <= idle_start.fds)
    );
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
    let lasted = samples.last().is_some_and(|s| s.at.as_secs() + 2 >= secs);
    if !lasted {
        println!("the samples stopped early: the proxy went away");
    }
    if !(lasted && growth <= slack && idle_end.fds <= idle_start.fds) {
        std::process::exit(2);
    }
}

/// Descriptors while every server runs (see [`sample::steady_fds`]).
async fn steady(pid: u32) -> Result<usize, String> {
    sample::steady_fds(pid, traffic::SERVERS.len(), Duration::from_secs(30)).await
}

fn verdict(flat: bool) -> &'static str {
    if flat {
        "flat"
    } else {
        "GROWING"
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn parse_secs() -> u64 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => DEFAULT_SECS,
        [flag, n] if flag == "--secs" => n.parse().expect("--secs N: a number of seconds"),
        _ => panic!("usage: soak [--secs N]"),
    }
}
