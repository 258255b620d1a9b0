//! What a person sees on the terminal: one WARN line per server that falls into trouble,
//! saying what to fix (secrets blanked, repeats summarised), plain text logs in a pipe, and
//! the start-up banner.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use common::{examples, Proxy, ScratchDir, PATIENCE};

/// WARN lines (JSON logs) whose message starts with `server <name> `.
fn warnings_about(proxy: &Proxy, name: &str) -> Vec<String> {
    proxy
        .logs()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["level"] == "WARN")
        .filter_map(|event| event["fields"]["message"].as_str().map(str::to_string))
        .filter(|message| message.starts_with(&format!("server {name} ")))
        .collect()
}

#[test]
fn every_server_in_trouble_is_warned_about_once_saying_what_to_fix() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let refused_at = closed.local_addr().expect("addr");
    drop(closed);
    let config = format!(
        r#"
[supervisor]
crash_loop_limit = 6
restart_delay_ms = 1
restart_delay_max_ms = 1

[servers.missing]
command = "/opt/secret-folder/acme-mcp"
args = ["--token=sup3rsecretarg"]

[servers.refused]
url = "http://{refused_at}/mcp"

[servers.unset]
command = "true"
env = {{ T = "${{AHP_PROXY_TEST_UNSET_UX}}" }}

[servers.leaky]
command = "sh"
args = ["-c", "echo \"my token is $LEAKY_TOKEN\" >&2; exit 1"]
env = {{ LEAKY_TOKEN = "sup3rsecretenv" }}
"#
    );
    let proxy = Proxy::start(&config);
    for name in ["missing", "refused", "leaky"] {
        proxy.wait_for_log(&format!("server {name} failed (crashLoop)"));
    }
    proxy.wait_for_log("server unset failed (config)");

    // Six failures in a row: the first, a reminder at the fourth, and giving up.
    let missing = warnings_about(&proxy, "missing");
    assert_eq!(missing.len(), 3, "{missing:#?}");
    assert_eq!(
        missing[0],
        "server missing failed (spawn): cannot start the server: command not found: acme-mcp (check the command and PATH)"
    );
    assert!(
        missing[1].starts_with("server missing failed 4 times in a row"),
        "{missing:#?}"
    );
    assert!(
        missing[2]
            .starts_with("server missing failed (crashLoop): failed 6 times in a row (spawn)"),
        "{missing:#?}"
    );
    let refused = warnings_about(&proxy, "refused");
    assert_eq!(
        refused[0],
        format!("server refused failed (startFailed): connection refused at {refused_at}")
    );
    let unset = warnings_about(&proxy, "unset");
    assert_eq!(
        unset,
        ["server unset failed (config): ${AHP_PROXY_TEST_UNSET_UX} is not set (used in the server's env)"]
    );
    let leaky = warnings_about(&proxy, "leaky");
    assert!(
        leaky[0].contains("my token is [redacted]"),
        "the stderr tail is shown, the secret is not: {leaky:#?}"
    );
    let logs = proxy.logs();
    for secret in ["sup3rsecret", "secret-folder"] {
        assert!(!logs.contains(secret), "{secret} leaked into\n{logs}");
    }
}

/// Run `ahp-proxy` with text logs into a pipe until a stderr line contains `until`; returns
/// every line read by then. The proxy is killed afterwards.
fn text_logs_until(dir: &std::path::Path, args: &[&str], until: &str) -> Vec<String> {
    let mut child = Command::new(common::proxy())
        .current_dir(dir)
        .args(args)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--mcp-listen",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "info")
        .env_remove("AHP_PROXY_TOKEN")
        // Killed below: its approval key's file stays in the scratch folder.
        .env("XDG_RUNTIME_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ahp-proxy");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(line) => {
                let done = line.contains(until);
                lines.push(line);
                if done {
                    break;
                }
            }
            Err(_) => {
                let _ = child.kill();
                panic!("no line with {until:?} in\n{}", lines.join("\n"));
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn text_logs_in_a_pipe_are_plain_and_the_banner_says_where_everything_is() {
    let examples = examples();
    let dir = ScratchDir::new("banner");
    std::fs::write(
        dir.path().join("proxy.toml"),
        format!("[servers.echo]\ncommand = {examples:?}\nargs = [\"echo\"]\n"),
    )
    .expect("write config");
    let lines = text_logs_until(dir.path(), &[], "  found    ");
    let text = lines.join("\n");
    assert!(
        !text.contains('\u{1b}'),
        "colour escapes in a pipe:\n{text}"
    );
    let config = std::path::absolute(dir.path().join("proxy.toml")).expect("absolute");
    assert!(
        text.contains(&format!("  config   {}", config.display())),
        "{text}"
    );
    assert!(text.contains("  AHP      ws://127.0.0.1:"), "{text}");
    // What to paste into VS Code carries the approval key: in a pipe, `status` prints it.
    assert!(
        text.contains("  VS Code  `ahp-proxy status` prints it")
            && text.contains("(Agents: Add Remote Agent Host…)"),
        "{text}"
    );
    assert!(text.contains("  MCP      http://127.0.0.1:"), "{text}");
    assert!(text.contains("  found    0 plugins, 1 server"), "{text}");
    // The README's first step: open the console.
    assert!(text.contains("  console  http://127.0.0.1:"), "{text}");

    // Started in a sub-folder of the project: the proxy.toml above is found, and named.
    let sub = dir.path().join("src/deep");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let lines = text_logs_until(&sub, &[], "  found    ");
    let text = lines.join("\n");
    assert!(
        text.contains(&format!("  config   {}", config.display())),
        "{text}"
    );
    assert!(text.contains("  found    0 plugins, 1 server"), "{text}");

    // No proxy.toml here: defaults, and said so.
    let empty = ScratchDir::new("banner-empty");
    let lines = text_logs_until(empty.path(), &[], "  found    ");
    let text = lines.join("\n");
    assert!(text.contains("  config   none found"), "{text}");

    // With a token and stderr in a pipe (a harness's log of its servers): the token stays out,
    // and the line says where to get the whole URL.
    let secured = ScratchDir::new("banner-token");
    std::fs::write(
        secured.path().join("proxy.toml"),
        "[ahp]\ntoken = \"banner-token-0123456789\"\n",
    )
    .expect("write config");
    let lines = text_logs_until(secured.path(), &[], "  found    ");
    let text = lines.join("\n");
    assert!(!text.contains("banner-token-0123456789"), "{text}");
    assert!(
        text.contains("  VS Code  `ahp-proxy status` prints it"),
        "{text}"
    );
}

/// The banner of `ahp-proxy serve` (plus `extra` arguments) run in `dir` on a terminal (a
/// pseudo-terminal from util-linux's `script`), with `dir` as its `XDG_RUNTIME_DIR`: its
/// lines up to `found`, and the approval key it wrote.
fn banner_on_a_terminal(dir: &std::path::Path, extra: &str) -> (String, String) {
    let script = "/usr/bin/script";
    assert!(
        std::path::Path::new(script).exists(),
        "{script} is missing: install util-linux's script (Debian: bsdutils)"
    );
    let command = format!(
        "{} --log-format text serve --listen 127.0.0.1:0 --mcp-listen 127.0.0.1:0 {extra}",
        common::proxy()
    );
    let mut child = Command::new(script)
        .args(["-qfec", &command, "/dev/null"])
        .current_dir(dir)
        .env("RUST_LOG", "info")
        .env("XDG_RUNTIME_DIR", dir)
        .env_remove("AHP_PROXY_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn script");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(PATIENCE) {
        let done = line.contains("  found    ");
        lines.push(line);
        if done {
            break;
        }
    }
    let text = lines.join("\n");
    let key_dir = dir.join("ahp-proxy");
    let key = std::fs::read_dir(&key_dir)
        .ok()
        .and_then(|mut files| files.next())
        .and_then(|file| std::fs::read_to_string(file.ok()?.path()).ok());
    // The proxy runs below `script` on its own terminal: stopped as a user would (SIGTERM),
    // and waited for, before `script` goes (killing `script` alone left it running).
    let below = common::descendants(child.id());
    for pid in &below {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    let deadline = std::time::Instant::now() + PATIENCE;
    while below.iter().any(|pid| common::alive(*pid)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let left: Vec<u32> = below
        .into_iter()
        .filter(|pid| common::alive(*pid))
        .collect();
    assert!(left.is_empty(), "still running after SIGTERM: {left:?}");
    let key = key.unwrap_or_else(|| panic!("no approval key in {}:\n{text}", key_dir.display()));
    (text, key.trim().to_string())
}

/// On a terminal the console's and VS Code's URLs carry the approval key; with `--stdio`
/// (the harness reads the proxy's stderr) they never do, terminal or not.
#[test]
fn the_banner_gives_the_key_on_a_terminal_but_never_with_stdio() {
    let dir = ScratchDir::new("banner-key");
    let (text, key) = banner_on_a_terminal(dir.path(), "");
    assert!(
        text.contains("  VS Code  ws://127.0.0.1:")
            && text.contains(&format!("/?tkn={key}  (Agents: Add Remote Agent Host…)")),
        "{text}"
    );
    assert!(
        text.contains("  console  http://127.0.0.1:") && text.contains(&format!("/?token={key}")),
        "{text}"
    );
    // The log line naming the file does not name the key.
    assert_eq!(text.matches(key.as_str()).count(), 2, "{text}");

    let harnessed = ScratchDir::new("banner-key-stdio");
    let (text, key) = banner_on_a_terminal(harnessed.path(), "--stdio");
    assert!(!text.contains(&key), "{text}");
    assert!(
        text.contains("  VS Code  `ahp-proxy status` prints it"),
        "{text}"
    );
}
