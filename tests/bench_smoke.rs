//! The front benchmark (`examples/bench_front`) runs once in `--quick` mode: it starts every
//! path of ours, measures each a moment and prints its tables (the numbers are not judged).

mod common;

use std::path::PathBuf;
use std::process::Command;

/// `target/<profile>/examples/bench_front`, built by `cargo test` with the examples.
fn bench_front() -> PathBuf {
    let proxy = PathBuf::from(common::proxy());
    let examples = proxy.parent().expect("a target dir").join("examples");
    let binary = examples.join(format!("bench_front{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "{} is missing: plain `cargo test` builds the examples (or `cargo build --example bench_front`)",
        binary.display()
    );
    binary
}

#[test]
fn bench_front_quick_prints_every_table_for_every_path_of_ours() {
    let output = Command::new(bench_front())
        .args(["--quick", "--no-peers"])
        .output()
        .expect("run bench_front");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bench_front --quick failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    for heading in [
        "| path | added p50 over direct stdio | calls/s at 1 / 8 / 32 HTTP sessions |",
        "latency, 1 call in flight",
        "CPU µs per call",
        "targets (issue 18), this run:",
        "targets (issue 34: speed at the floor by default; issue 30: the modern paths), this run:",
        "  start-up of 50 stdio servers, median of 1: ahp-proxy spawned → AHP client sees all ready",
        "  1 call in flight over HTTP: ahp-proxy /mcp/echo → stdio echo adds",
        "  2026-07-28 harness, ahp-proxy /mcp/echo → stdio echo: adds",
    ] {
        assert!(stdout.contains(heading), "no {heading:?} in:\n{stdout}");
    }
    // Every path of ours has a row of numbers in the summary (a path that failed has none).
    for path in [
        "echo --http direct",
        "ahp-proxy /mcp/echo → stdio echo",
        "ahp-proxy /mcp → stdio echo",
        "ahp-proxy /mcp/echo → HTTP echo",
        "echo --http direct (2026-07-28)",
        "ahp-proxy /mcp/echo → stdio echo (2026-07-28)",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {path} |")))
            .unwrap_or_else(|| panic!("no summary row for {path} in:\n{stdout}"));
        let rates: Vec<&str> = row.rsplit('|').nth(1).unwrap().split('/').collect();
        assert_eq!(rates.len(), 3, "{row}");
        // How many calls fit in a quick window depends on the machine: only their form is
        // checked (every call made was answered, or the run would have failed).
        for rate in rates {
            let parsed = rate.trim().replace(',', "").parse::<u64>();
            assert!(parsed.is_ok(), "not a rate: {rate:?} in {row}");
        }
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("| ahp-proxy serve --stdio | +")
                || l.starts_with("| ahp-proxy serve --stdio | -")),
        "no stdio row in:\n{stdout}"
    );
}
