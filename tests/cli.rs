//! The command line: `check`, `--version`, and config errors that name file:line:col.

mod common;

use std::process::Command;

use common::ScratchDir;

fn proxy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
}

#[test]
fn check_accepts_the_bundled_config() {
    let output = proxy()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("check")
        .output()
        .expect("run check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("ws://127.0.0.1:8765"), "{stdout}");
    assert!(stdout.contains("plugins-examples"), "{stdout}");
}

#[test]
fn check_and_serve_reject_unknown_keys_with_file_line_and_column() {
    let dir = ScratchDir::new("cli");
    let path = dir.path().join("proxy.toml");
    std::fs::write(
        &path,
        "[ahp]\nlisten = \"127.0.0.1:0\"\n\n[limits]\nclient_queue = 8\ntypo_key = 1\n",
    )
    .expect("write config");
    for command in ["check", "serve"] {
        let output = proxy()
            .arg("--config")
            .arg(&path)
            .arg(command)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        let expected = format!("{}:6:1: unknown field `typo_key`", path.display());
        assert!(stderr.contains(&expected), "{command}: {stderr}");
    }
}

#[test]
fn a_missing_config_file_is_named() {
    let output = proxy()
        .args(["--config", "/nonexistent/proxy.toml", "check"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("/nonexistent/proxy.toml: cannot read config file"),
        "{stderr}"
    );
}

#[test]
fn version_is_printed() {
    let output = proxy().arg("--version").output().expect("run");
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.trim(),
        format!("ahp-proxy {}", env!("CARGO_PKG_VERSION"))
    );
}
