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
    // A configured manifest is named by its whole path.
    let manifest = dir.path().join("self.mcp.json").display().to_string();
    for (name, location) in [("folder", "folder"), ("self.mcp.json", manifest.as_str())] {
        let message = format!("{location}: symbolic link loop; nothing loaded");
        assert_eq!(load(name)["kind"], "error", "{name}: {report}");
        assert_eq!(load(name)["message"], message, "{name}: {report}");
        assert!(
            report["problems"]
                .as_array()
                .expect("problems")
                .iter()
                .any(|p| p["location"] == location
                    && p["message"] == "symbolic link loop; nothing loaded"),
            "{name}: {report}"
        );
    }
}

/// Run `command` to its end, or kill it and fail once [`common::PATIENCE`] has passed (a
/// read that blocks forever must fail the test, not hang it).
fn finished(command: &mut Command) -> std::process::Output {
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("collect");
            panic!(
                "still running after {:?}; stderr:\n{}",
                common::PATIENCE,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect")
}

/// Make a FIFO at `path` (nobody ever writes to it).
fn fifo(path: &std::path::Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success());
}

#[test]
fn env_files_icons_and_the_config_are_read_like_every_source_file() {
    let dir = ScratchDir::new("bounded-reads");
    let plugin = dir.path().join("plugins/p");
    plugin_with_manifest(
        &plugin,
        "{ \"name\": \"p\", \"icon\": \"icon.png\", \"mcpServers\": {\
           \"piped\": { \"command\": \"true\", \"envFile\": \"pipe.env\" },\
           \"huge\": { \"command\": \"true\", \"envFile\": \"huge.env\" },\
           \"fine\": { \"command\": \"true\", \"envFile\": \"fine.env\" } } }",
    );
    // A FIFO nobody writes to would block discovery forever; a 5 MiB file is over the cap.
    fifo(&plugin.join("pipe.env"));
    fifo(&plugin.join("icon.png"));
    std::fs::write(plugin.join("huge.env"), "A=1\n".repeat(5 * 1024 * 1024 / 4)).expect("huge");
    std::fs::write(plugin.join("fine.env"), "A=1\n").expect("fine");
    let config = plugins_config(dir.path());
    let output = finished(
        proxy()
            .arg("--config")
            .arg(&config)
            .args(["check", "--json"]),
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let problems = report["problems"].to_string();
    assert!(
        problems.contains("envFile \\\"pipe.env\\\" cannot be read (not a regular file)"),
        "{problems}"
    );
    assert!(
        problems.contains("envFile \\\"huge.env\\\" cannot be read (larger than 4194304 bytes)"),
        "{problems}"
    );
    assert!(
        problems.contains("icon.png: cannot read the icon: not a regular file"),
        "{problems}"
    );
    assert!(!problems.contains("fine.env"), "{problems}");

    // proxy.toml itself.
    let piped = dir.path().join("piped.toml");
    fifo(&piped);
    let output = finished(proxy().arg("--config").arg(&piped).arg("check"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("piped.toml: cannot read config file: not a regular file"),
        "{stderr}"
    );
}

#[test]
fn a_manifest_that_cannot_be_read_is_named_by_its_path() {
    let dir = ScratchDir::new("missing-manifest");
    let output =
        finished(
            proxy()
                .current_dir(dir.path())
                .args(["--manifest", "nope/.mcp.json", "check"]),
        );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("nope/.mcp.json: cannot read"), "{stdout}");
}

#[test]
fn check_looks_up_each_command_without_starting_it() {
    let dir = ScratchDir::new("commands");
    std::fs::create_dir_all(dir.path().join("bin")).expect("mkdir");
    let config = dir.path().join("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.here]\ncommand = {:?}\n[servers.onpath]\ncommand = \"true\"\n\
             [servers.gone]\ncommand = \"ahp-proxy-test-no-such-server\"\n\
             [servers.relative]\ncommand = \"bin/not-built\"\n\
             [servers.off]\ncommand = \"also-missing\"\nenabled = false\n",
            common::examples()
        ),
    )
    .expect("write config");
    let output = finished(proxy().arg("--config").arg(&config).arg("check"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "server \"gone\" cannot start: command not found: ahp-proxy-test-no-such-server"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("server \"relative\" cannot start: command not found: not-built"),
        "{stdout}"
    );
    for fine in ["\"here\"", "\"onpath\"", "\"off\""] {
        assert!(
            !stdout.contains(&format!("server {fine} cannot")),
            "{stdout}"
        );
    }
    // Which config was read.
    assert!(
        stdout.contains(&format!("config         {}", config.display())),
        "{stdout}"
    );
    let (code, report) = check_json(&config);
    assert_eq!(code, Some(1));
    assert_eq!(
        report["problems"].as_array().map(Vec::len),
        Some(2),
        "{report}"
    );
}

#[test]
fn check_help_lists_every_exit_status() {
    let output = finished(proxy().args(["check", "--help"]));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Exit 1 when"), "{stdout}");
    assert!(
        stdout.contains("2 when the configuration is invalid"),
        "{stdout}"
    );
}

#[test]
fn a_proxy_toml_above_the_working_directory_is_found_and_named() {
    let dir = ScratchDir::new("upward");
    let sub = dir.path().join("src/deep");
    std::fs::create_dir_all(&sub).expect("mkdir");
    std::fs::write(
        dir.path().join("proxy.toml"),
        "[session]\ntitle = \"Found upward\"\n",
    )
    .expect("write config");
    let output = finished(proxy().current_dir(&sub).arg("check"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("session        Found upward"), "{stdout}");
    let found = std::path::absolute(dir.path().join("proxy.toml")).expect("absolute");
    assert!(
        stdout.contains(&format!("config         {}", found.display())),
        "{stdout}"
    );
}

#[test]
fn without_the_example_server_beside_it_the_proxy_says_what_to_build() {
    let dir = ScratchDir::new("no-examples");
    let lonely = dir.path().join("ahp-proxy");
    std::fs::copy(env!("CARGO_BIN_EXE_ahp-proxy"), &lonely).expect("copy the binary");
    let config = dir.path().join("proxy.toml");
    std::fs::write(
        &config,
        "[servers.notes]\ncommand = \"${AHP_PROXY_EXAMPLES}\"\nargs = [\"notes\"]\n",
    )
    .expect("write config");
    let output = finished(
        Command::new(&lonely)
            .arg("--config")
            .arg(&config)
            .arg("check"),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("command not found: ahp-proxy-example-server (it is built beside ahp-proxy by `cargo build`"),
        "{stdout}"
    );
}

#[test]
fn a_misspelt_config_key_gets_a_guess() {
    let dir = ScratchDir::new("guess");
    let path = dir.path().join("proxy.toml");
    std::fs::write(
        &path,
        "[servers.a]\ncomand = \"x\"\n[ahp]\nlisen = \"127.0.0.1:1\"\n",
    )
    .expect("write config");
    let output = finished(proxy().arg("--config").arg(&path).arg("check"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown field `comand`"), "{stderr}");
    assert!(stderr.contains("did you mean `command`?"), "{stderr}");
    assert!(stderr.contains("did you mean `listen`?"), "{stderr}");
}

/// `ahp-proxy <args> --url <the proxy's>`, run to its end.
fn terminal(
    proxy: &common::Proxy,
) -> impl Fn(&[&str]) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::process::Output>>>
{
    terminal_in(proxy, proxy.runtime_dir())
}

/// The terminal's commands for `proxy`, with `runtime` as their `XDG_RUNTIME_DIR` (where
/// they look for the approval key; `HOME` beside it).
fn terminal_in(
    proxy: &common::Proxy,
    runtime: &std::path::Path,
) -> impl Fn(&[&str]) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::process::Output>>>
{
    let url = proxy.url.clone();
    let runtime = runtime.to_path_buf();
    move |args: &[&str]| {
        let mut command = tokio::process::Command::new(common::proxy());
        command
            .args(args)
            .args(["--url", &url])
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("HOME", &runtime);
        Box::pin(async move { command.output().await.expect("run the command") })
    }
}

/// Wait until the session lists a call (or result) waiting for a decision, other than
/// `done`: its id.
async fn waiting(watcher: &mut common::Watcher, done: &str) -> String {
    loop {
        let waiting = watcher.mirror.input_needed.iter().flatten().find_map(|r| {
            let r = serde_json::to_value(r).unwrap();
            let id = r["toolCall"]["toolCallId"].as_str().unwrap_or_default();
            (r["kind"] == "toolConfirmation" && id != done).then(|| id.to_string())
        });
        if let Some(id) = waiting {
            return id;
        }
        watcher.step().await;
    }
}

/// The echo example under `[approval]` (`approval`, the table's body), a raw harness on the
/// proxy's stdio, and a watcher of the default session.
async fn echo_under(approval: &str) -> (common::Proxy, common::raw::RawClient, common::Watcher) {
    let config = format!(
        "{}[approval]\n{approval}",
        common::server("echo", "echo", &[])
    );
    let (proxy, harness) = common::stdio_harness(&config).await;
    let watcher = common::Watcher::open(&proxy).await;
    (proxy, harness, watcher)
}

/// `ahp-proxy approvals` lists a held call; `deny ID --reason …` denies it (the harness reads
/// who and why); `approve ID` lets the next through; an id that waits no more is refused.
/// The terminal decides with the approval key the proxy wrote for its user; without it,
/// `approve` is refused (exit 1) and the call still waits; `status` prints the URLs with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_approve_and_deny_steer_held_calls_from_the_terminal() {
    let (proxy, mut harness, mut watcher) = echo_under("mode = \"always\"\n").await;
    let run = terminal(&proxy);
    let elsewhere = common::ScratchDir::new("no-key");
    let keyless = terminal_in(&proxy, elsewhere.path());
    let key = proxy.approval_key().expect("the key file");
    let status = run(&["status"]).await;
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.contains(&format!("VS Code: paste {}/?tkn={key} into", proxy.url))
            && status.contains(&format!(
                "console: open http://{}/?token={key}\n",
                proxy.addr
            )),
        "{status}"
    );
    let params = r#"{"name":"echo","arguments":{"text":"hi"}}"#;
    let mut none = |_: &str, _: &str| String::new();
    let (denied, listed) = tokio::join!(
        harness.request("tools/call", Some(params), &mut none),
        async {
            let id = waiting(&mut watcher, "").await;
            let listed = run(&["approvals"]).await;
            let json = run(&["approvals", "--json"]).await;
            let said: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
            assert_eq!(said[0]["id"], id.as_str(), "{said}");
            assert_eq!(said[0]["tool"], "echo", "{said}");
            assert_eq!(said[0]["waits"], "call", "{said}");
            // Without the key: refused, and it still waits.
            let refused = keyless(&["approve", &id]).await;
            assert_eq!(refused.status.code(), Some(1), "{refused:?}");
            let why = String::from_utf8_lossy(&refused.stderr);
            assert!(why.contains("did not present the approval key"), "{why}");
            let still = keyless(&["approvals", "--json"]).await;
            let still: serde_json::Value = serde_json::from_slice(&still.stdout).unwrap();
            assert_eq!(still[0]["id"], id.as_str(), "{still}");
            let deny = run(&["deny", &id, "--reason", "not from this terminal"]).await;
            assert!(deny.status.success(), "{deny:?}");
            // It waits no more: a second decision is refused.
            let again = run(&["approve", &id]).await;
            assert_eq!(again.status.code(), Some(2), "{again:?}");
            let why = String::from_utf8_lossy(&again.stderr);
            assert!(why.contains("waits for approval"), "{why}");
            (String::from_utf8_lossy(&listed.stdout).into_owned(), id)
        }
    );
    let (listed, id) = listed;
    assert!(
        listed.contains(&id) && listed.contains("call    Allow `echo` on `echo`?"),
        "{listed}"
    );
    let denied: serde_json::Value = serde_json::from_str(denied.response()).unwrap();
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    let said = denied["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("denied by AHP client \"ahp-proxy-cli-")
            && said.contains("not from this terminal"),
        "{said}"
    );
    let (approved, ()) = tokio::join!(
        harness.request("tools/call", Some(params), &mut none),
        async {
            let id = waiting(&mut watcher, &id).await;
            let approve = run(&["approve", &id]).await;
            assert!(approve.status.success(), "{approve:?}");
        }
    );
    let approved: serde_json::Value = serde_json::from_str(approved.response()).unwrap();
    assert_eq!(approved["result"]["content"][0]["text"], "hi", "{approved}");
}

/// A result held for review is listed as a result, with what it would tell the harness;
/// `approve ID` delivers it, `deny ID` gives the harness an error instead of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_and_deny_decide_results_held_for_review_from_the_terminal() {
    let (proxy, mut harness, mut watcher) =
        echo_under("[approval.servers.echo.tools.echo]\nreview_result = true\n").await;
    let run = terminal(&proxy);
    let mut none = |_: &str, _: &str| String::new();
    let params = r#"{"name":"echo","arguments":{"text":"kept result"}}"#;
    let (approved, (listed, id)) = tokio::join!(
        harness.request("tools/call", Some(params), &mut none),
        async {
            let id = waiting(&mut watcher, "").await;
            let listed = run(&["approvals"]).await;
            let json = run(&["approvals", "--json"]).await;
            let said: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
            assert_eq!(said[0]["id"], id.as_str(), "{said}");
            assert_eq!(said[0]["waits"], "result", "{said}");
            let result = said[0]["result"].as_str().unwrap_or_default();
            assert!(result.contains("kept result"), "{said}");
            let approve = run(&["approve", &id]).await;
            assert!(approve.status.success(), "{approve:?}");
            // Decided: a second decision is refused.
            let again = run(&["deny", &id]).await;
            assert_eq!(again.status.code(), Some(2), "{again:?}");
            (String::from_utf8_lossy(&listed.stdout).into_owned(), id)
        }
    );
    let line = listed
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_default();
    assert!(
        line.contains("  result  ") && line.contains("kept result"),
        "{listed}"
    );
    let approved: serde_json::Value = serde_json::from_str(approved.response()).unwrap();
    assert_eq!(
        approved["result"]["content"][0]["text"], "kept result",
        "{approved}"
    );
    let params = r#"{"name":"echo","arguments":{"text":"dropped result"}}"#;
    let (denied, ()) = tokio::join!(
        harness.request("tools/call", Some(params), &mut none),
        async {
            let id = waiting(&mut watcher, &id).await;
            let deny = run(&["deny", &id]).await;
            assert!(deny.status.success(), "{deny:?}");
        }
    );
    let denied: serde_json::Value = serde_json::from_str(denied.response()).unwrap();
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(!denied.to_string().contains("dropped result"), "{denied}");
    let said = denied["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("The result of tool \"echo\" on MCP server \"echo\" was denied by AHP client \"ahp-proxy-cli-"),
        "{said}"
    );
}
