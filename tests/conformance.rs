//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, the server
//! scenarios of MCP 2025-11-25) against its reference server — the project's fixture,
//! `ahp-proxy-example-server conformance` — directly and through `ahp-proxy`: both
//! endpoints, the server as a stdio child and as an HTTP upstream. The same scenarios must
//! pass. `scripts/conformance.sh` installs a pinned Node ≥ 22 and the suite when missing.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Run `scripts/conformance.sh` with `args`; its summary line.
fn run(args: &[&str]) -> Value {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = Path::new(common::proxy())
        .parent()
        .expect("the binaries' folder");
    let output = Command::new(manifest.join("scripts/conformance.sh"))
        .args(args)
        .arg("--quiet")
        .env("AHP_PROXY_BIN_DIR", bin_dir)
        .output()
        .expect("run scripts/conformance.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .lines()
        .find_map(|line| line.strip_prefix("AHP-CONFORMANCE "))
        .unwrap_or_else(|| {
            panic!(
                "no summary from conformance.sh {args:?} (exit {:?}):\n{stdout}\n{}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            )
        });
    serde_json::from_str(summary).expect("a JSON summary")
}

/// The scenarios that passed, and the failures with their checks.
fn outcome(summary: &Value) -> (Vec<String>, Vec<String>) {
    let mut passed = Vec::new();
    let mut failed = Vec::new();
    for scenario in summary["scenarios"].as_array().expect("scenarios") {
        let name = scenario["name"].as_str().unwrap_or_default().to_string();
        if scenario["status"] == "pass" {
            passed.push(name);
        } else {
            failed.push(format!("{name}: {}", scenario["failures"]));
        }
    }
    (passed, failed)
}

#[test]
fn the_proxy_passes_the_same_conformance_scenarios_as_the_server_it_fronts() {
    let direct = run(&["reference"]);
    let (want, failed) = outcome(&direct);
    assert!(
        failed.is_empty() && want.len() >= 30,
        "the fixture itself: {want:?} {failed:?}"
    );
    for (upstream, endpoint) in [
        ("stdio", "server"),
        ("stdio", "aggregate"),
        ("http", "server"),
        ("http", "aggregate"),
    ] {
        let summary = run(&["proxy", "--upstream", upstream, "--endpoint", endpoint]);
        let (passed, failed) = outcome(&summary);
        assert_eq!(
            passed, want,
            "{upstream} upstream, {endpoint} endpoint: {failed:?}"
        );
        eprintln!(
            "conformance through ahp-proxy ({upstream} upstream, {endpoint} endpoint): {} scenarios, {} checks passed in {} ms",
            passed.len(),
            summary["checks_passed"],
            summary["elapsed_ms"]
        );
    }
}
