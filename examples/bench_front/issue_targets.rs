//! The targets of issue 34 (speed at the floor by default) and of issue 30's benchmark part
//! (a modern harness's path adds no more than a legacy one's), as lines with the figures
//! and the target beside each: information, not assertions.

use crate::common::percentile;
use crate::report::{direct_stdio, first_p50, rate, thousands, Row};
use crate::startup::Startup;
use crate::targets::{FORMER_DEFAULT, MODERN_MARK};

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "not met"
    }
}

/// The HTTP row labelled exactly `label`, if it was measured.
fn row<'a>(http: &'a [Row<'a>], label: &str) -> Option<&'a Row<'a>> {
    http.iter().find(|r| r.label == label && r.failed.is_none())
}

/// Issue 34's three figures and issue 30's modern paths.
pub fn print(stdio: &[Row], http: &[Row], sessions: &[usize], startup: Option<&Startup>) {
    println!("\ntargets (issue 34: speed at the floor by default; issue 30: the modern paths), this run:");
    let direct = direct_stdio(stdio).map_or(f64::NAN, first_p50);
    let stdio_echo = "ahp-proxy /mcp/echo → stdio echo";
    let former = http
        .iter()
        .find(|r| r.label.starts_with(FORMER_DEFAULT) && r.failed.is_none());

    // 1. One call in flight over HTTP, within 10 µs of the direct HTTP echo's own cost.
    if let (Some(ours), Some(echo)) = (row(http, stdio_echo), row(http, "echo --http direct")) {
        // (The difference needs no direct stdio path: the p50s' own difference.)
        let (added, floor) = (first_p50(ours) - direct, first_p50(echo) - direct);
        let beyond = first_p50(ours) - first_p50(echo);
        println!(
            "  1 call in flight over HTTP: {stdio_echo} adds {added:+.1} µs over direct stdio, the direct HTTP echo {floor:+.1} µs: {beyond:+.1} µs ≤ +10 µs: {}{}",
            verdict(beyond <= 10.0),
            former.map_or(String::new(), |f| format!(
                " (the former default, a worker per core: {:+.1} µs beyond the direct HTTP echo)",
                first_p50(f) - first_p50(echo)
            ))
        );
    }
    // 2. Throughput at 8 and 32 sessions no lower than the former default's.
    match (row(http, stdio_echo), former) {
        (Some(ours), Some(former)) => {
            for (level, n) in sessions.iter().enumerate().filter(|(_, n)| **n > 1) {
                let (a, b) = (rate(&ours.tallies[level]), rate(&former.tallies[level]));
                println!(
                    "  calls/s at {n} sessions, {stdio_echo}: {} vs {} with a worker per core (target ≥): {} ({:.0} %)",
                    thousands(a),
                    thousands(b),
                    verdict(a >= b),
                    a / b * 100.0
                );
            }
        }
        _ => println!("  calls/s against the former default: not measured (one core, or left out)"),
    }
    // 3. The HTTP upstream at the last level, against direct; with an AHP client following?
    let last = sessions.len().saturating_sub(1);
    let watcher = match std::env::var("BENCH_FRONT_AHP_WATCHER") {
        Ok(_) => "with an AHP client following each proxy",
        Err(_) => "no AHP client (the target is for BENCH_FRONT_AHP_WATCHER=1)",
    };
    if let (Some(ours), Some(echo)) = (
        row(http, "ahp-proxy /mcp/echo → HTTP echo"),
        row(http, "echo --http direct"),
    ) {
        let share = rate(&ours.tallies[last]) / rate(&echo.tallies[last]);
        println!(
            "  ahp-proxy /mcp/echo → HTTP echo at {} sessions, {watcher}: {:.0} % of direct (target ≥ 80 %): {}",
            sessions[last],
            share * 100.0,
            verdict(share >= 0.8)
        );
    }
    // 4. Start-up of many stdio servers: ≤ 1.2 × the servers' own (rmcp's client, as the
    // issue measured it; the raw client beside).
    if let Some(startup) = startup {
        let median = |runs: &[f64]| {
            let mut sorted = runs.to_vec();
            sorted.sort_by(f64::total_cmp);
            percentile(&sorted, 50.0)
        };
        let (proxied, rmcp, raw) = (
            median(&startup.proxied),
            median(&startup.direct_rmcp),
            median(&startup.direct_raw),
        );
        println!(
            "  start-up of {} stdio servers, median of {}: ahp-proxy spawned → AHP client sees all ready {proxied:.1} ms; the servers alone {rmcp:.1} ms (rmcp client), {raw:.1} ms (raw client): {:.2}× ≤ 1.2×: {} ({:.2}× the raw client's)",
            startup.servers,
            startup.proxied.len(),
            proxied / rmcp,
            verdict(proxied / rmcp <= 1.2),
            proxied / raw
        );
        let runs = |label: &str, runs: &[f64]| {
            let each: Vec<String> = runs.iter().map(|ms| format!("{ms:.1}")).collect();
            println!("    {label}: {} ms", each.join(", "));
        };
        runs("ahp-proxy, each run", &startup.proxied);
        runs("servers alone (rmcp), each run", &startup.direct_rmcp);
        runs("servers alone (raw), each run", &startup.direct_raw);
    }
    // 5. Issue 30: a modern harness's path adds no more than a legacy harness's, each
    // against the direct echo spoken to in its own era.
    let direct_modern = row(http, &format!("echo --http direct{MODERN_MARK}"));
    let direct_legacy = row(http, "echo --http direct");
    for modern in http
        .iter()
        .filter(|r| r.ours && r.proxied && r.label.ends_with(MODERN_MARK))
    {
        let legacy_label = modern.label.trim_end_matches(MODERN_MARK);
        let (Some(legacy), Some(dm), Some(dl)) =
            (row(http, legacy_label), direct_modern, direct_legacy)
        else {
            continue;
        };
        if modern.failed.is_some() {
            continue;
        }
        let (added_modern, added_legacy) = (
            first_p50(modern) - first_p50(dm),
            first_p50(legacy) - first_p50(dl),
        );
        let (rate_modern, rate_legacy) = (
            rate(&modern.tallies[last]) / rate(&dm.tallies[last]),
            rate(&legacy.tallies[last]) / rate(&dl.tallies[last]),
        );
        println!(
            "  2026-07-28 harness, {legacy_label}: adds {added_modern:+.1} µs at p50 over the direct echo at 2026-07-28, a legacy harness {added_legacy:+.1} µs over the direct echo (target: no more): {}; calls/s at {} sessions {:.0} % of direct vs {:.0} %",
            verdict(added_modern <= added_legacy),
            sessions[last],
            rate_modern * 100.0,
            rate_legacy * 100.0
        );
    }
}
