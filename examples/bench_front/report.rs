//! The printed tables: the summary (added p50 over direct stdio, calls/s at each
//! HTTP concurrency), latency in detail, CPU per call, and the targets.

use crate::common::percentile;
use crate::measure::Tally;
use crate::targets::BEFORE;

/// The figures of one path, ready to print.
pub struct Row<'a> {
    pub label: &'a str,
    /// One tally per concurrency level (one for a stdio path).
    pub tallies: &'a [Tally],
    pub proxied: bool,
    pub ours: bool,
    pub failed: Option<&'a str>,
}

impl crate::targets::Route {
    /// Its row: one tally per concurrency level (one for a stdio path).
    pub fn row<'a>(&'a self, tallies: &'a [Tally], failed: &'a Option<String>) -> Row<'a> {
        Row {
            label: &self.label,
            tallies,
            proxied: self.proxy.is_some(),
            ours: self.ours,
            failed: failed.as_deref(),
        }
    }
}

/// (p50, p99) of a tally's latencies, µs.
pub fn p50_p99(tally: &Tally) -> (f64, f64) {
    let mut sorted = tally.samples.clone();
    sorted.sort_by(f64::total_cmp);
    (percentile(&sorted, 50.0), percentile(&sorted, 99.0))
}

pub fn rate(tally: &Tally) -> f64 {
    tally.calls as f64 / tally.seconds.max(1e-9)
}

pub fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return "—".into();
    }
    let digits = format!("{:.0}", value);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn signed_us(value: f64) -> String {
    if value.is_finite() {
        format!("{value:+.0} µs")
    } else {
        "—".into()
    }
}

/// The table: added p50 over direct stdio, calls/s at each concurrency.
pub fn summary(stdio: &[Row], http: &[Row], sessions: &[usize]) {
    let direct = direct_stdio(stdio).map_or(f64::NAN, first_p50);
    let levels: Vec<String> = sessions.iter().map(|s| s.to_string()).collect();
    println!(
        "\n| path | added p50 over direct stdio | calls/s at {} HTTP sessions |",
        levels.join(" / ")
    );
    println!("|---|---|---|");
    for row in http {
        if let Some(failed) = row.failed {
            println!("| {} | failed: {failed} | — |", row.label);
            continue;
        }
        let rates: Vec<String> = row.tallies.iter().map(|t| thousands(rate(t))).collect();
        println!(
            "| {} | {} | {} |",
            row.label,
            signed_us(first_p50(row) - direct),
            rates.join(" / ")
        );
    }
    for row in stdio.iter().filter(|r| r.proxied) {
        println!(
            "| {} | {} (direct round trip {:.0} µs with the raw-lines client) | — |",
            row.label,
            signed_us(first_p50(row) - direct),
            direct
        );
    }
}

/// The direct stdio path: the reference of every "added" figure.
pub fn direct_stdio<'a>(stdio: &'a [Row<'a>]) -> Option<&'a Row<'a>> {
    stdio.iter().find(|r| !r.proxied && r.failed.is_none())
}

pub fn first_p50(row: &Row) -> f64 {
    row.tallies.first().map_or(f64::NAN, |t| p50_p99(t).0)
}

/// Latency with one call in flight: each path's p50/p99 and what it adds over direct stdio.
pub fn latency(stdio: &[Row], http: &[Row]) {
    let Some(direct) = direct_stdio(stdio).and_then(|r| r.tallies.first()) else {
        return;
    };
    let (d50, d99) = p50_p99(direct);
    println!(
        "\n{:<64} {:>8} {:>9} {:>9} {:>11} {:>11}",
        "latency, 1 call in flight", "calls", "p50", "p99", "added p50", "added p99"
    );
    for row in stdio.iter().chain(http) {
        let Some(tally) = row.tallies.first().filter(|_| row.failed.is_none()) else {
            continue;
        };
        let (p50, p99) = p50_p99(tally);
        println!(
            "{:<64} {:>8} {:>6.1} µs {:>6.1} µs {:>11} {:>11}",
            row.label,
            tally.samples.len(),
            p50,
            p99,
            signed_us(p50 - d50),
            signed_us(p99 - d99)
        );
    }
}

/// CPU per call: the stdio paths (1 in flight), the HTTP paths at the last concurrency and
/// (when it differs) the first.
pub fn cpu(stdio: &[Row], http: &[Row], sessions: &[usize]) {
    let last = sessions.len().saturating_sub(1);
    println!(
        "\n{:<64} {:>12} {:>12} {:>12} {:>16}",
        "CPU µs per call (all threads, /proc schedstat)",
        "proxy",
        "echo server",
        "this client",
        "proxy switches"
    );
    let label = |level: usize| match sessions[level] {
        1 => "1 session".to_string(),
        n => format!("{n} sessions"),
    };
    let mut levels = vec![last];
    if last > 0 {
        levels.push(0);
    }
    let rows = stdio
        .iter()
        .map(|r| (r, 0, "1 in flight".to_string()))
        .chain(
            levels
                .into_iter()
                .flat_map(|level| http.iter().map(move |r| (r, level, label(level)))),
        );
    for (row, level, what) in rows {
        let Some(tally) = row.tallies.get(level).filter(|_| row.failed.is_none()) else {
            continue;
        };
        let per_call = |us: f64| us / tally.cpu_calls.max(1) as f64;
        let (proxy, switches) = if row.proxied {
            (
                format!("{:.1}", per_call(tally.cpu.proxy)),
                format!("{:.2}", per_call(tally.cpu.proxy_switches)),
            )
        } else {
            ("—".into(), "—".into())
        };
        println!(
            "{:<64} {:>12} {:>12.1} {:>12.1} {:>16}",
            format!("{} ({what})", row.label),
            proxy,
            per_call(tally.cpu.servers),
            per_call(tally.cpu.client),
            switches
        );
    }
}

/// The targets, as plain lines (information, not assertions).
pub fn targets(stdio: &[Row], http: &[Row], sessions: &[usize]) {
    println!("\ntargets (issue 18), this run:");
    let verdict = |ok: bool| if ok { "met" } else { "not met" };
    let proxied = stdio
        .iter()
        .find(|r| r.ours && r.proxied && r.failed.is_none());
    if let (Some(direct), Some(proxied)) = (direct_stdio(stdio), proxied) {
        if let (Some(d), Some(p)) = (direct.tallies.first(), proxied.tallies.first()) {
            let ((d50, d99), (p50, p99)) = (p50_p99(d), p50_p99(p));
            let limit = 2.0 * d99 + 100.0;
            println!(
                "  serve --stdio added p50 {:.1} µs ≤ 40 µs: {}; p99 {:.1} µs ≤ 2 × direct p99 {:.1} + 100 = {:.1} µs: {}",
                p50 - d50,
                verdict(p50 - d50 <= 40.0),
                p99,
                d99,
                limit,
                verdict(p99 <= limit)
            );
        }
    }
    let ok = |r: &&Row| r.failed.is_none();
    let legacy = |r: &&Row| !r.label.ends_with(crate::targets::MODERN_MARK);
    let direct = http.iter().filter(ok).find(|r| !r.proxied && legacy(r));
    let last = sessions.len().saturating_sub(1);
    // (A modern harness's paths have their own lines: `issue_targets`.)
    for ours in http
        .iter()
        .filter(ok)
        .filter(legacy)
        .filter(|r| r.ours && r.proxied)
    {
        if let Some(direct) = direct {
            let share = rate(&ours.tallies[last]) / rate(&direct.tallies[last]);
            println!(
                "  {} at {} sessions: {:.0} % of direct HTTP (target ≥ 80 %): {}",
                ours.label,
                sessions[last],
                share * 100.0,
                verdict(share >= 0.8)
            );
        }
        // The peer on the same upstream kind: the label's part after the arrow.
        let upstream = ours.label.rsplit('→').next().unwrap_or("");
        let peers = http
            .iter()
            .filter(ok)
            .filter(|r| !r.ours && !r.label.starts_with(BEFORE) && r.label.ends_with(upstream));
        for peer in peers {
            let ratios: Vec<String> = ours
                .tallies
                .iter()
                .zip(peer.tallies)
                .map(|(a, b)| format!("{:.2}×", rate(a) / rate(b)))
                .collect();
            let (a50, b50) = (first_p50(ours), first_p50(peer));
            println!(
                "  {} vs {}: calls/s {}; p50 {:.0} vs {:.0} µs: {}",
                ours.label,
                peer.label,
                ratios.join(" / "),
                a50,
                b50,
                verdict(
                    a50 <= b50
                        && ours
                            .tallies
                            .iter()
                            .zip(peer.tallies)
                            .all(|(a, b)| rate(a) >= rate(b))
                )
            );
        }
    }
}

/// With an earlier build measured beside this one: each of its paths next to the same path
/// now (p50 with one call in flight, calls/s at each concurrency, CPU per call at the last).
pub fn before_after(stdio: &[Row], http: &[Row], sessions: &[usize]) {
    let ok = |r: &&Row| r.failed.is_none();
    let rows: Vec<&Row> = stdio.iter().chain(http).filter(ok).collect();
    let pairs: Vec<(&Row, &Row)> = rows
        .iter()
        .filter(|r| r.label.starts_with(BEFORE))
        .filter_map(|before| {
            let now = before.label.replacen(BEFORE, "ahp-proxy", 1);
            rows.iter()
                .find(|r| r.label == now)
                .map(|now| (*before, *now))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let last = sessions.len().saturating_sub(1);
    let levels: Vec<String> = sessions.iter().map(|s| s.to_string()).collect();
    println!("\n== before / after (same run, same client, interleaved) ==\n");
    println!(
        "| path | p50, 1 in flight | calls/s at {} HTTP sessions | proxy CPU µs per call (last level) |",
        levels.join(" / ")
    );
    println!("|---|---|---|---|");
    for (before, now) in pairs {
        let path = now.label.trim_start_matches("ahp-proxy ");
        let cpu = |row: &Row| {
            let level = if row.tallies.len() > 1 { last } else { 0 };
            row.tallies
                .get(level)
                .map_or(f64::NAN, |t| t.cpu.proxy / t.cpu_calls.max(1) as f64)
        };
        let rates = |row: &Row| {
            if row.tallies.len() > 1 {
                row.tallies
                    .iter()
                    .map(|t| thousands(rate(t)))
                    .collect::<Vec<_>>()
                    .join(" / ")
            } else {
                "—".into()
            }
        };
        println!(
            "| {path} | {:.0} → {:.0} µs | {} → {} | {:.1} → {:.1} |",
            first_p50(before),
            first_p50(now),
            rates(before),
            rates(now),
            cpu(before),
            cpu(now)
        );
    }
}
