//! `scripts/conformance.sh` as the Rust tests run it: one run of the MCP conformance suite, and
//! the summary it prints last (`AHP-CONFORMANCE {json}`), parsed.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `scripts/conformance.sh ARGS --quiet [-- SUITE-ARGS]`, with the project's binaries of this
/// build; its summary (a panic with the script's output when it printed none).
pub fn run(args: &[&str], suite_args: &[&str]) -> Value {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .parent()
        .expect("the binaries' folder");
    let mut command = Command::new(manifest.join("scripts/conformance.sh"));
    command
        .args(args)
        .arg("--quiet")
        .env("AHP_PROXY_BIN_DIR", bin_dir);
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
    serde_json::from_str(summary).expect("a JSON summary")
}
