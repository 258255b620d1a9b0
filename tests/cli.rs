//! The command line: `check`, `--version`, and config errors that name file:line:col.

mod common;

use std::process::Command;

use common::ScratchDir;

fn proxy() -> Command {
    Command::new(common::proxy())
}

/// An Open Plugins folder at `plugin` with `manifest` as its `.plugin/plugin.json`.
fn plugin_with_manifest(plugin: &std::path::Path, manifest: &str) {
    std::fs::create_dir_all(plugin.join(".plugin")).expect("mkdir");
    std::fs::write(plugin.join(".plugin/plugin.json"), manifest).expect("write manifest");
}

/// `check --json` on `config` (with `AHP_PROXY_TEST_UNSET_VAR` unset): its exit code and
/// the report it printed.
fn check_json(config: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let output = proxy()
        .arg("--config")
        .arg(config)
        .args(["check", "--json"])
        .env_remove("AHP_PROXY_TEST_UNSET_VAR")
        .output()
        .expect("run");
    let report = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    (output.status.code(), report)
}

/// A proxy.toml in `dir` naming `dir/plugins` as the plugin root.
fn plugins_config(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("proxy.toml");
    std::fs::write(&config, "plugin_roots = [\"plugins\"]\n").expect("write config");
    config
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
    // Every dialect example, the plugins.json plugins, the directory, and the broken one.
    for line in [
        "plugin team-notes 0.1.0  [loaded]",
        "plugin release-helper 0.4.0  [loaded]",
        "plugin lint-kit 1.0.0  [loaded]",
        "plugin broken-plugin 0.0.1  [degraded]",
        "plugin ops-tools 0.2.0  [loaded]",
        "directory Prompts  [loaded, writable]",
        "mcpServer notes  [starting] @ 8:5-13:6",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    assert!(
        stdout.contains("broken-plugin/.mcp.json:4:41: invalid JSON: Expected comma"),
        "{stdout}"
    );
}

#[test]
fn check_json_prints_the_wire_tree_and_fails_on_errors() {
    let dir = ScratchDir::new("check-json");
    let plugin = dir.path().join("plugins/p");
    plugin_with_manifest(
        &plugin,
        "{ \"name\": \"p\", \"mcpServers\": { \"s\": { \"command\": \"x\", \"env\": { \"T\": \"${AHP_PROXY_TEST_UNSET_VAR}\" } } } }",
    );
    let config = plugins_config(dir.path());
    let (code, tree) = check_json(&config);
    assert_eq!(code, Some(1), "a server in error fails check");
    let server = &tree["customizations"][0]["children"][0];
    assert_eq!(server["type"], "mcpServer");
    assert_eq!(server["state"]["kind"], "error");
    let message = server["state"]["error"]["message"]
        .as_str()
        .expect("message");
    assert!(
        message.contains("${AHP_PROXY_TEST_UNSET_VAR} is not set"),
        "{message}"
    );
    // Counted as a problem too, at its declaration.
    let problems = tree["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]["location"]
            .as_str()
            .is_some_and(|l| l == "p/.plugin/plugin.json:1:32"),
        "{problems:?}"
    );
    assert!(
        problems[0]["message"]
            .as_str()
            .is_some_and(|m| m
                .starts_with("server \"s\" cannot start: ${AHP_PROXY_TEST_UNSET_VAR} is not set")),
        "{problems:?}"
    );

    std::fs::write(plugin.join(".plugin/plugin.json"), "{ \"name\": ").expect("break it");
    let output = proxy()
        .arg("--config")
        .arg(&config)
        .arg("check")
        .output()
        .expect("run");
    assert_eq!(
        output.status.code(),
        Some(1),
        "a container in error fails check"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("plugin p  [error]"), "{stdout}");
    assert!(
        stdout.contains("p/.plugin/plugin.json:1:11: invalid JSON"),
        "{stdout}"
    );
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

#[test]
fn worker_threads_below_one_are_refused_others_accepted() {
    let dir = ScratchDir::new("workers");
    let config = dir.path().join("proxy.toml");
    std::fs::write(&config, "").expect("write config");
    let refused = proxy()
        .arg("--config")
        .arg(&config)
        .args(["serve", "--stdio", "--worker-threads", "0"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run serve");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--worker-threads"), "{stderr}");
    // A harness that closes stdin at once: the sidecar (three workers) exits cleanly.
    let served = proxy()
        .arg("--config")
        .arg(&config)
        .args(["serve", "--stdio", "--listen", "127.0.0.1:0"])
        .args(["--worker-threads", "3"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run serve");
    assert!(
        served.status.success(),
        "{}",
        String::from_utf8_lossy(&served.stderr)
    );
}

#[test]
fn symbolic_link_loops_where_files_belong_degrade_the_plugin() {
    let dir = ScratchDir::new("check-loops");
    // One plugin whose .mcp.json is a link to itself, one whose hooks file and skill folder
    // are a loop of two links, and one that is nothing but a looping .mcp.json.
    let looping = dir.path().join("plugins/looping");
    plugin_with_manifest(&looping, "{ \"name\": \"looping\" }");
    std::os::unix::fs::symlink(".mcp.json", looping.join(".mcp.json")).expect("link");
    let hooks = dir.path().join("plugins/hooky");
    plugin_with_manifest(&hooks, "{ \"name\": \"hooky\" }");
    std::os::unix::fs::symlink("b.json", hooks.join("hooks.json")).expect("link");
    std::os::unix::fs::symlink("hooks.json", hooks.join("b.json")).expect("link");
    std::os::unix::fs::symlink("skills", hooks.join("skills")).expect("link");
    let bare = dir.path().join("plugins/bare");
    std::fs::create_dir_all(&bare).expect("mkdir");
    std::os::unix::fs::symlink(".mcp.json", bare.join(".mcp.json")).expect("link");
    let config = plugins_config(dir.path());
    let (_, report) = check_json(&config);
    let plugins = report["customizations"].as_array().expect("customizations");
    let state = |name: &str| {
        let plugin = plugins
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no plugin {name} in {report}"));
        (
            plugin["load"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            plugin["load"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    for (name, looped) in [
        ("looping", "looping/.mcp.json: symbolic link loop"),
        ("hooky", "hooky/hooks.json: symbolic link loop"),
        ("bare", "bare/.mcp.json: symbolic link loop"),
    ] {
        let (kind, message) = state(name);
        assert_eq!(kind, "degraded", "{name}: {report}");
        assert!(message.contains(looped), "{name}: {message}");
    }
    assert!(state("hooky")
        .1
        .contains("hooky/skills: symbolic link loop"));
    let problems = report["problems"].as_array().expect("problems");
    assert!(problems.len() >= 4, "{problems:?}");
}

#[test]
fn check_reports_every_config_mistake_at_once_even_as_json() {
    let dir = ScratchDir::new("mistakes");
    let path = dir.path().join("proxy.toml");
    std::fs::write(
        &path,
        "lisen = 1\n[ahp]\ntokn = \"x\"\n[limits]\nclient_queue = \"many\"\nreplay_log = -5\n[servers.a]\ncomand = \"x\"\n[servers.b]\nargs = \"--flag\"\ncommand = \"y\"\n",
    )
    .expect("write config");
    let output = proxy()
        .arg("--config")
        .arg(&path)
        .args(["check", "--json"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("JSON even for an invalid config");
    assert_eq!(report["configValid"], false);
    let locations: Vec<String> = report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| {
            let location = p["location"].as_str().unwrap_or_default();
            location
                .rsplit_once("proxy.toml:")
                .map_or("", |(_, l)| l)
                .to_string()
        })
        .collect();
    // unknown key, unknown key, wrong type, out of range, no command, unknown key, wrong type
    assert_eq!(
        locations,
        ["1:1", "3:1", "5:16", "6:14", "7:1", "8:1", "10:8"],
        "{report}"
    );
}

#[test]
fn check_says_servers_were_not_started_and_survives_a_closed_pipe() {
    let dir = ScratchDir::new("summary");
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, "[servers.a]\ncommand = \"true\"\n").expect("write config");
    let output = proxy()
        .arg("--config")
        .arg(&path)
        .arg("check")
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("1 server declared; none was started (`check --start`"),
        "{stdout}"
    );
    // `check | head`: the reader is gone before anything is written.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    for json in [false, true] {
        let mut command = proxy();
        command.arg("--config").arg(&path).arg("check");
        if json {
            command.arg("--json");
        }
        let output = command
            .stdout(writer.try_clone().expect("clone pipe"))
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_plugin_folder_or_manifest_that_is_a_link_loop_is_an_error_container_naming_it() {
    let dir = ScratchDir::new("check-whole-loops");
    // A plugin folder that is a link to itself, beside a good plugin, and a configured
    // manifest that is a link to itself. Neither has anything usable: `error`, not silence.
    let plugins = dir.path().join("plugins");
    plugin_with_manifest(&plugins.join("good"), "{ \"name\": \"good\" }");
    std::os::unix::fs::symlink("folder", plugins.join("folder")).expect("link");
    std::os::unix::fs::symlink("self.mcp.json", dir.path().join("self.mcp.json")).expect("link");
    let config = dir.path().join("proxy.toml");
    std::fs::write(
        &config,
        "plugin_roots = [\"plugins\"]\nmanifests = [\"self.mcp.json\"]\n",
    )
    .expect("write config");
    let (code, report) = check_json(&config);
    assert_eq!(code, Some(1), "a container in error fails check");
    let load = |name: &str| {
        report["customizations"]
            .as_array()
            .expect("customizations")
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no container {name} in {report}"))["load"]
            .clone()
    };
    assert_eq!(load("good")["kind"], "loaded");
    for (name, message) in [
        ("folder", "folder: symbolic link loop; nothing loaded"),
        (
            "self.mcp.json",
            "self.mcp.json: symbolic link loop; nothing loaded",
        ),
    ] {
        assert_eq!(load(name)["kind"], "error", "{name}: {report}");
        assert_eq!(load(name)["message"], message, "{name}: {report}");
        assert!(
            report["problems"]
                .as_array()
                .expect("problems")
                .iter()
                .any(|p| p["location"] == name
                    && p["message"] == "symbolic link loop; nothing loaded"),
            "{name}: {report}"
        );
    }
}
