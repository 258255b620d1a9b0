//! `scripts/conformance.sh` as the Rust tests run it: one run of the MCP conformance suite, and
//! the summary it prints last (`AHP-CONFORMANCE {json}`), parsed.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

#[path = "../common/binaries.rs"]
#[allow(dead_code)]
mod binaries;

/// `scripts/conformance.sh ARGS --quiet [-- SUITE-ARGS]`, with the project's binaries of this
/// build (the example servers built first); its summary (a panic with the script's output when it printed none).
pub fn run(args: &[&str], suite_args: &[&str]) -> Value {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = Path::new(binaries::proxy())
        .parent()
        .expect("the binaries' folder");
    // The script's folders (results, proxy logs) go in one of this run's own, removed once
    // the summary is read: a test run leaves nothing in the system's temporary folder.
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let scratch = std::env::temp_dir().join(format!(
        "ahp-proxy-test-conformance-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&scratch).expect("create the conformance scratch folder");
    let mut command = Command::new(manifest.join("scripts/conformance.sh"));
    command
        .args(args)
        .arg("--quiet")
        .env("AHP_PROXY_BIN_DIR", bin_dir)
        .env("TMPDIR", &scratch);
    if !suite_args.is_empty() {
        command.arg("--").args(suite_args);
    }
    let output = command.output().expect("run scripts/conformance.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .lines()
        .find_map(|line| line.strip_prefix("AHP-CONFORMANCE "))
        .unwrap_or_else(|| {
            panic!(
                "no summary from conformance.sh {args:?} {suite_args:?} (exit {:?}):\n{stdout}\n{}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let summary = serde_json::from_str(summary).expect("a JSON summary");
    let _ = std::fs::remove_dir_all(&scratch);
    summary
}

/// The scored scenarios of a summary that passed, and those that did not.
pub fn scored(summary: &Value) -> (Vec<String>, Vec<String>) {
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    for s in summary["scenarios"].as_array().expect("scenarios") {
        let name = s["name"].as_str().unwrap_or_default().to_string();
        match (s["scored"] == true, s["status"] == "pass") {
            (true, true) => passed.push(name),
            (true, false) => failed.push(name),
            _ => {}
        }
    }
    (passed, failed)
}
