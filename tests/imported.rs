//! Configs imported unchanged: a Claude Desktop config, a Claude Code `.mcp.json`, a VS Code
//! `.vscode/mcp.json` and a Cursor `.cursor/mcp.json`, read as they are, launch exactly what
//! their own host would (argv, working folder, environment), as a stub server reports.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use common::{Proxy, ScratchDir, EXAMPLES, PATIENCE};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// Wait for the launch report the stub server writes at start-up.
fn report(proxy: &Proxy, path: &Path) -> Value {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return serde_json::from_str(&text).expect("report is JSON");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no launch report at {}; proxy logs:\n{}",
            path.display(),
            proxy.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A stub server entry: the example echo server, reporting to `report`, with `extra` args.
fn stub(report: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "echo".to_string(),
        "--report".to_string(),
        report.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    json!({"command": EXAMPLES, "args": args})
}

fn args_after_report(report: &Value) -> Vec<String> {
    report["argv"]
        .as_array()
        .expect("argv")
        .iter()
        .skip(4)
        .map(|a| a.as_str().unwrap_or_default().to_string())
        .collect()
}

fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).expect("canonical path")
}

#[test]
fn each_hosts_config_launches_what_that_host_would() {
    let scratch = ScratchDir::new("imported");
    let root = real(scratch.path());
    let reports = root.join("reports");
    std::fs::create_dir_all(&reports).expect("mkdir");
    let home = std::env::var("HOME").unwrap_or_default();

    // Claude Desktop: `mcpServers`, env added to the proxy's environment.
    let desktop = root.join("claude/claude_desktop_config.json");
    let mut entry = stub(&reports.join("desktop.json"), &[]);
    entry["env"] = json!({"DESKTOP_KEY": "d-1"});
    write(
        &desktop,
        &json!({"mcpServers": {"desk": entry}, "globalShortcut": ""}).to_string(),
    );

    // Claude Code: a project's `.mcp.json`, `${VAR:-default}` and `${VAR}`.
    let code_project = root.join("code-project");
    let mut entry = stub(
        &reports.join("code.json"),
        &["${AHP_PROXY_TEST_UNSET_IMPORT:-fallback}", "${HOME}"],
    );
    entry["type"] = json!("stdio");
    write(
        &code_project.join(".mcp.json"),
        &json!({"mcpServers": {"code": entry}}).to_string(),
    );

    // VS Code: `.vscode/mcp.json` with inputs, envFile and VS Code's variables.
    let vs_project = root.join("vs-project");
    write(
        &vs_project.join(".env"),
        "FROM_FILE=yes\nOVERRIDDEN=by-file\n",
    );
    let mut entry = stub(
        &reports.join("vscode.json"),
        &[
            "${workspaceFolder}",
            "${workspaceFolderBasename}",
            "${userHome}${/}x${pathSeparator}y",
            "${cwd}",
        ],
    );
    entry["type"] = json!("stdio");
    entry["envFile"] = json!("${workspaceFolder}/.env");
    entry["env"] = json!({
        "FROM_TOML": "${input:api-key}",
        "FROM_ENV": "${input:other}",
        "OVERRIDDEN": "by-env",
    });
    write(
        &vs_project.join(".vscode/mcp.json"),
        &json!({
            "inputs": [
                {"type": "promptString", "id": "api-key", "description": "API key", "password": true},
                {"type": "promptString", "id": "other"}
            ],
            "servers": {"vs": entry}
        })
        .to_string(),
    );

    // Cursor: `.cursor/mcp.json`, `${workspaceFolder}` is the project, a relative envFile.
    let cursor_project = root.join("cursor-project");
    write(&cursor_project.join("cursor.env"), "CURSOR_FILE=1\n");
    let mut entry = stub(&reports.join("cursor.json"), &["${workspaceFolder}"]);
    entry["envFile"] = json!("cursor.env");
    write(
        &cursor_project.join(".cursor/mcp.json"),
        &json!({"mcpServers": {"cur": entry}}).to_string(),
    );

    let manifests: Vec<String> = [
        desktop.clone(),
        code_project.join(".mcp.json"),
        vs_project.join(".vscode/mcp.json"),
        cursor_project.join(".cursor/mcp.json"),
    ]
    .iter()
    .map(|p| p.display().to_string())
    .collect();
    let config = format!(
        "manifests = {}\n[inputs]\napi-key = \"from-toml\"\nother = \"not-used\"\n",
        serde_json::to_string(&manifests).expect("json")
    );
    let proxy = Proxy::start_on(
        &config,
        "127.0.0.1:0",
        &[
            ("AHP_PROXY_INPUT_OTHER", "from-env"),
            ("OVERRIDDEN", "from-the-proxy"),
        ],
    );

    let desk = report(&proxy, &reports.join("desktop.json"));
    assert_eq!(desk["argv"][0], EXAMPLES);
    assert_eq!(desk["argv"][1], "echo");
    assert_eq!(desk["env"]["DESKTOP_KEY"], "d-1");
    assert_eq!(desk["cwd"], root.join("claude").display().to_string());

    let code = report(&proxy, &reports.join("code.json"));
    assert_eq!(args_after_report(&code), ["fallback", home.as_str()]);
    assert_eq!(code["cwd"], code_project.display().to_string());

    let vs = report(&proxy, &reports.join("vscode.json"));
    assert_eq!(
        args_after_report(&vs),
        [
            vs_project.display().to_string(),
            "vs-project".to_string(),
            format!("{home}/x/y"),
            env!("CARGO_MANIFEST_DIR").to_string(),
        ]
    );
    assert_eq!(
        vs["cwd"],
        vs_project.display().to_string(),
        "not in .vscode/"
    );
    assert_eq!(vs["env"]["FROM_FILE"], "yes");
    assert_eq!(vs["env"]["OVERRIDDEN"], "by-env", "env wins over envFile");
    assert_eq!(vs["env"]["FROM_TOML"], "from-toml");
    assert_eq!(
        vs["env"]["FROM_ENV"], "from-env",
        "the environment wins over [inputs]"
    );

    let cursor = report(&proxy, &reports.join("cursor.json"));
    assert_eq!(
        args_after_report(&cursor),
        [cursor_project.display().to_string()]
    );
    assert_eq!(cursor["cwd"], cursor_project.display().to_string());
    assert_eq!(cursor["env"]["CURSOR_FILE"], "1");
}

#[test]
fn an_unanswered_input_and_misspelt_keys_say_what_to_do() {
    let scratch = ScratchDir::new("imported-check");
    let root = real(scratch.path());
    let manifest = root.join("project/.vscode/mcp.json");
    write(
        &manifest,
        "{\n  \"servers\": {\n    \"asks\": {\"command\": \"x\", \"env\": {\"K\": \"${input:token}\"}},\n    \"typo\": {\"command\": \"x\", \"arg\": [\"a\"], \"disabled\": \"true\"}\n  }\n}\n",
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .current_dir(&root)
        .arg("--manifest")
        .arg(&manifest)
        .args(["check", "--json"])
        .env_remove("AHP_PROXY_INPUT_TOKEN")
        .output()
        .expect("run check");
    assert_eq!(output.status.code(), Some(1), "a server cannot start");
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let problems: Vec<String> = report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| {
            format!(
                "{}: {}",
                p["location"].as_str().unwrap_or_default(),
                p["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            "mcp.json:4:30: server \"typo\": unknown key `arg` (did you mean `args`?); ignored",
            "mcp.json:4:56: server \"typo\": `disabled` must be true or false, found a string; ignored",
            "mcp.json:3:5: server \"asks\" cannot start: ${input:token} asks for input ahp-proxy cannot prompt for: answer it in proxy.toml (`[inputs]` with token = \"…\") or in the environment (AHP_PROXY_INPUT_TOKEN=…) (used in the server's env)",
            // Its program is looked up, not started: `x` is on no PATH.
            "mcp.json:4:5: server \"typo\" cannot start: command not found: x (check the command and PATH)",
        ],
        "{report}"
    );
    // The misspelt server is still declared, and runs.
    let servers = report["customizations"][0]["children"]
        .as_array()
        .expect("children");
    assert_eq!(servers[1]["name"], "typo");
    assert_eq!(servers[1]["state"]["kind"], "starting");
}
