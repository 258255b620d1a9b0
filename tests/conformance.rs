//! The official MCP conformance suite (`@modelcontextprotocol/conformance`): the server
//! scenarios of MCP 2025-11-25 against the project's fixture, and those of 2026-07-28 and
//! 2025-11-25 against the SDK v2 reference server, directly and through `ahp-proxy`: both
//! endpoints, the server as a stdio child and as an HTTP upstream. The same scenarios must
//! pass. `scripts/conformance.sh` installs a pinned Node ≥ 22 and the suite when missing.

mod suite;

use std::sync::RwLock;

use serde_json::Value;

/// The server-scenario tests run side by side; the client scenarios through the proxy (one
/// proxy and one SDK client per scenario, within the suite's 30 s each) run alone.
static LOAD: RwLock<()> = RwLock::new(());

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
    let _shared = LOAD.read().unwrap_or_else(|p| p.into_inner());
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

/// MCP 2026-07-28 through the proxy: the SDK v2 reference server (dual-era, spoken to in
/// modern) behind ahp-proxy on every path passes every scored 2026-07-28 scenario it passes
/// direct (37, `tests/era_direct.rs`), and the 2025-11-25 ones stay as they are direct (33).
#[test]
fn the_proxy_passes_the_2026_07_28_scenarios_the_modern_server_it_fronts_passes() {
    let _shared = LOAD.read().unwrap_or_else(|p| p.into_inner());
    for (upstream, endpoint) in [
        ("stdio", "server"),
        ("stdio", "aggregate"),
        ("http", "server"),
        ("http", "aggregate"),
    ] {
        let path = [
            "proxy",
            "--sdk",
            "--upstream",
            upstream,
            "--endpoint",
            endpoint,
        ];
        let modern = suite::run(&path, &["--requirements", "2026-07-28"]);
        let (passed, failed) = suite::scored(&modern);
        assert!(
            failed.is_empty() && passed.len() == 37,
            "2026-07-28, {upstream} upstream, {endpoint} endpoint: passed {}, failed {failed:?}",
            passed.len()
        );
        let legacy = suite::run(&path, &["--requirements", "2025-11-25"]);
        assert_eq!(
            (
                legacy["scenarios_passed"].as_u64(),
                legacy["scenarios_failed"].as_u64()
            ),
            (Some(33), Some(0)),
            "2025-11-25, {upstream} upstream, {endpoint} endpoint: {:?}",
            legacy["failed_scenarios"]
        );
        eprintln!(
            "SDK v2 reference server through ahp-proxy ({upstream} upstream, {endpoint} endpoint): 2026-07-28 {} scored scenarios in {} ms, 2025-11-25 33 in {} ms",
            passed.len(),
            modern["elapsed_ms"],
            legacy["elapsed_ms"]
        );
    }
}

/// ahp-proxy as the client under test of the 2026-07-28 client scenarios: the suite's mock
/// server is its HTTP server, and the SDK v2 reference client drives it on `/mcp/<server>`
/// (`scripts/conformance.sh client --through-proxy`): every scored scenario but OAuth passes,
/// `Mcp-Param-*` headers (`http-custom-headers`) included.
#[test]
fn the_proxy_as_the_client_passes_the_2026_07_28_client_scenarios_but_oauth() {
    let _alone = LOAD.write().unwrap_or_else(|p| p.into_inner());
    let summary = suite::run(
        &["client", "--through-proxy"],
        &["--requirements", "2026-07-28"],
    );
    let (passed, failed) = suite::scored(&summary);
    let not_oauth = |names: &[String]| -> Vec<String> {
        let names = names.iter().filter(|n| !n.starts_with("auth/"));
        names.cloned().collect()
    };
    let mut want = vec![
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
    ];
    let mut got = not_oauth(&passed);
    got.sort();
    want.sort();
    assert_eq!(got, want, "failed: {failed:?}");
    assert!(not_oauth(&failed).is_empty(), "{failed:?}");
    eprintln!(
        "ahp-proxy as the client: the {} scored 2026-07-28 client scenarios but OAuth in {} ms",
        got.len(),
        summary["elapsed_ms"]
    );
}
