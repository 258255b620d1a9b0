//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, the server
//! scenarios of MCP 2025-11-25) against its reference server — the project's fixture,
//! `ahp-proxy-example-server conformance` — directly and through `ahp-proxy`: both
//! endpoints, the server as a stdio child and as an HTTP upstream. The same scenarios must
//! pass. `scripts/conformance.sh` installs a pinned Node ≥ 22 and the suite when missing.

mod suite;

use serde_json::Value;

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
    let direct = suite::run(&["reference"], &[]);
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
        let summary = suite::run(
            &["proxy", "--upstream", upstream, "--endpoint", endpoint],
            &[],
        );
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
