//! The README's harness snippets, taken from the Markdown as written (fenced blocks whose info
//! string says `snippet:<name>`) and run against the real binary: every stdio entry hands
//! the proxy the argv it needs and is served over MCP; every URL is the proxy's MCP endpoint.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::Value;

use common::{examples, Proxy, ScratchDir, PATIENCE};

const README: &str = include_str!("../README.md");

/// What the snippets say instead of real paths.
const BINARY_PLACEHOLDER: &str = "/path/to/ahp-proxy";
const CONFIG_PLACEHOLDER: &str = "/path/to/proxy.toml";

/// Every snippet the README marks, by name (a name marked twice fails).
fn snippets() -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in README.lines() {
        match open.take() {
            Some((name, body)) if line.trim_end() == "```" => {
                let previous = found.insert(name.clone(), body.join("\n"));
                assert!(previous.is_none(), "snippet:{name} is marked twice");
            }
            Some((name, mut body)) => {
                body.push(line);
                open = Some((name, body));
            }
            None => {
                let info = line.strip_prefix("```").unwrap_or_default();
                if let Some(name) = info
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("snippet:"))
                {
                    open = Some((name.to_string(), Vec::new()));
                }
            }
        }
    }
    assert!(open.is_none(), "a snippet's fence is never closed");
    found
}

fn snippet(name: &str) -> String {
    snippets()
        .remove(name)
        .unwrap_or_else(|| panic!("README has no snippet:{name}"))
}

/// A scratch folder holding a proxy.toml with one server whose tool is `echo`.
fn workspace() -> ScratchDir {
    let examples = examples();
    let dir = ScratchDir::new("snippet");
    std::fs::write(
        dir.path().join("proxy.toml"),
        format!(
            "[ahp]\nlisten = \"127.0.0.1:0\"\n[servers.snippet-echo]\ncommand = {examples:?}\nargs = [\"echo\"]\n"
        ),
    )
    .expect("write proxy.toml");
    dir
}

/// `text` with the placeholders (and `${workspaceFolder}`, which VS Code and Cursor expand
/// before launching) replaced by this test's binary and folder.
fn filled(text: &str, workspace: &Path) -> String {
    let config = workspace.join("proxy.toml");
    let text = text
        .replace(BINARY_PLACEHOLDER, common::proxy())
        .replace(CONFIG_PLACEHOLDER, &config.to_string_lossy())
        .replace("${workspaceFolder}", &workspace.to_string_lossy());
    assert!(
        !text.contains("/path/to/"),
        "an unknown placeholder: {text}"
    );
    text
}

/// Launch `command args` as a harness would, check the argv the proxy received, and list
/// its tools over stdio: the workspace's server must be served.
async fn served_over_stdio(command: &str, args: &[String], workspace: &Path) {
    let config = workspace.join("proxy.toml");
    let mut launch = tokio::process::Command::new(command);
    launch.args(args).current_dir(workspace);
    let child = as_harness(launch);
    let pid = child.id().expect("a running child");
    let argv = argv_of(pid).await;
    let expected = [
        common::proxy().to_string(),
        "--config".into(),
        config.to_string_lossy().into_owned(),
        "serve".into(),
        "--stdio".into(),
    ];
    assert_eq!(argv, expected, "the argv ahp-proxy receives");
    serves_echo_then_exits(child).await;
}

/// Spawn `launch` as a harness launches its MCP server: MCP on its stdin/stdout.
fn as_harness(mut launch: tokio::process::Command) -> tokio::process::Child {
    launch
        .env("RUST_LOG", "warn")
        .env_remove("AHP_PROXY_TOKEN")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("launch the snippet's command")
}

/// A harness session on `child`'s pipes lists exactly the workspace's `echo` tool; once it
/// hangs up, the child exits 0.
async fn serves_echo_then_exits(mut child: tokio::process::Child) {
    let pipes = (
        child.stdout.take().expect("stdout"),
        child.stdin.take().expect("stdin"),
    );
    assert_eq!(tool_names_over(pipes).await, ["echo"]);
    let status = tokio::time::timeout(PATIENCE, child.wait())
        .await
        .expect("it exits once its harness hangs up")
        .expect("wait");
    assert!(status.success(), "{status}");
}

/// The arguments process `pid` was started with (its `/proc` entry is empty for a moment
/// while `exec` finishes).
async fn argv_of(pid: u32) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    // Until it has exec'd, the child still shows this test's own command line.
    let own = std::fs::read("/proc/self/cmdline").expect("read own cmdline");
    loop {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("read cmdline");
        if !cmdline.is_empty() && cmdline != own {
            return cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no cmdline for {pid}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// The tool names a harness session on `transport` lists (then it hangs up).
async fn tool_names_over<T, E, A>(transport: T) -> Vec<String>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let session = tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("handshake in time")
        .expect("MCP handshake");
    let tools = tokio::time::timeout(PATIENCE, session.peer().list_all_tools())
        .await
        .expect("listed in time")
        .expect("tools/list");
    let _ = session.cancel().await;
    tools.into_iter().map(|t| t.name.to_string()).collect()
}

/// A snippet's URL must be the proxy's default MCP endpoint; the same path on a running
/// proxy (on a free port) serves its servers.
async fn served_over_http(url: &str) {
    let defaults = ahp_proxy::config::Config::parse("", "proxy.toml", Path::new("/"))
        .expect("the empty config is valid");
    let listen = defaults.mcp.listen.expect("the MCP front is on by default");
    assert_eq!(url, format!("http://{listen}/mcp"));
    let workspace = workspace();
    let config = std::fs::read_to_string(workspace.path().join("proxy.toml")).expect("read");
    let proxy = Proxy::start(&config);
    let authority = proxy
        .mcp_url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let url = url.replace(&listen.to_string(), authority);
    assert_eq!(url, proxy.mcp_url);
    let transport = StreamableHttpClientTransport::from_uri(url);
    assert_eq!(tool_names_over(transport).await, ["echo"]);
}

/// The `ahp-proxy` entry of a JSON snippet, under `mcpServers` or VS Code's `servers`.
fn entry(name: &str, key: &str) -> Value {
    let value: Value = serde_json::from_str(&snippet(name))
        .unwrap_or_else(|e| panic!("snippet:{name} is not JSON: {e}"));
    value[key]["ahp-proxy"].clone()
}

/// `command` and `args` of a JSON entry, filled in.
fn launch_of(entry: &Value, workspace: &Path) -> (String, Vec<String>) {
    let command = filled(entry["command"].as_str().expect("command"), workspace);
    let args = entry["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| filled(a.as_str().expect("a string"), workspace))
        .collect();
    (command, args)
}

/// The snippet's command lines (comments left out), as words; the snippets quote nothing.
fn command_lines(name: &str) -> Vec<Vec<String>> {
    snippet(name)
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| {
            assert!(!l.contains(['"', '\'']), "quoting: {l}");
            l.split_whitespace().map(str::to_string).collect()
        })
        .collect()
}

/// What `claude mcp add [options] <name> <url> | <name> -- <command> [args…]` registers.
enum ClaudeCodeEntry {
    Stdio(String, Vec<String>),
    Http(String),
}

fn claude_mcp_add(words: &[String]) -> ClaudeCodeEntry {
    assert_eq!(words[..3], ["claude", "mcp", "add"], "{words:?}");
    let rest = &words[3..];
    let (options, launch) = match rest.iter().position(|w| w == "--") {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut transport = "stdio".to_string();
    let mut positional = Vec::new();
    let mut options = options.iter();
    while let Some(word) = options.next() {
        match word.as_str() {
            "--transport" | "-t" => transport = options.next().expect("a value").clone(),
            "--scope" | "-s" | "--env" | "-e" | "--header" | "-H" => {
                options.next();
            }
            other if other.starts_with('-') => panic!("an option this test does not know: {other}"),
            other => positional.push(other.to_string()),
        }
    }
    assert_eq!(positional.first().map(String::as_str), Some("ahp-proxy"));
    match (transport.as_str(), launch) {
        ("stdio", Some(launch)) => ClaudeCodeEntry::Stdio(launch[0].clone(), launch[1..].to_vec()),
        ("http", None) => ClaudeCodeEntry::Http(positional[1].clone()),
        other => panic!("unexpected claude mcp add: {other:?}"),
    }
}

/// The command and arguments MCP Inspector launches for `npx @modelcontextprotocol/inspector
/// …`, split as its `cli.ts` does: its own options before the first `--` (where `--config`
/// names a JSON file of servers for the Inspector itself), everything after it passed on.
fn inspector_launch(words: &[String]) -> Result<(String, Vec<String>), String> {
    assert_eq!(words[..2], ["npx", "@modelcontextprotocol/inspector"]);
    let rest = &words[2..];
    let (before, after) = match rest.iter().position(|w| w == "--") {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[rest.len()..]),
    };
    let mut positional = Vec::new();
    let mut options = before.iter();
    while let Some(word) = options.next() {
        match word.as_str() {
            "--config" => {
                return Err(format!(
                    "the Inspector reads --config {} as its own servers file",
                    options.next().map(String::as_str).unwrap_or_default()
                ))
            }
            "-e" | "--server" | "--transport" | "--server-url" | "--header" => {
                options.next();
            }
            "--cli" => {}
            other => positional.push(other.to_string()),
        }
    }
    positional.extend(after.iter().cloned());
    match positional.split_first() {
        Some((command, args)) => Ok((command.clone(), args.to_vec())),
        None => Err("no command".into()),
    }
}

#[test]
fn every_marked_snippet_has_a_check_here() {
    let names: Vec<String> = snippets().into_keys().collect();
    assert_eq!(
        names,
        [
            "claude-code",
            "claude-desktop",
            "cursor",
            "cursor-http",
            "import",
            "inspector",
            "vscode",
            "vscode-http"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_desktop_launches_the_proxy_on_its_config() {
    let workspace = workspace();
    let (command, args) = launch_of(&entry("claude-desktop", "mcpServers"), workspace.path());
    served_over_stdio(&command, &args, workspace.path()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_launches_the_proxy_or_reaches_it_over_http() {
    let lines = command_lines("claude-code");
    assert_eq!(lines.len(), 2, "a stdio line and an HTTP line");
    let workspace = workspace();
    for line in lines {
        let line: Vec<String> = line.iter().map(|w| filled(w, workspace.path())).collect();
        match claude_mcp_add(&line) {
            ClaudeCodeEntry::Stdio(command, args) => {
                served_over_stdio(&command, &args, workspace.path()).await
            }
            ClaudeCodeEntry::Http(url) => served_over_http(&url).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn vscode_launches_the_proxy_from_the_workspace_or_reaches_it_over_http() {
    let workspace = workspace();
    let stdio = entry("vscode", "servers");
    assert_eq!(stdio["type"], "stdio");
    let (command, args) = launch_of(&stdio, workspace.path());
    served_over_stdio(&command, &args, workspace.path()).await;

    let http = entry("vscode-http", "servers");
    assert_eq!(http["type"], "http");
    served_over_http(http["url"].as_str().expect("url")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cursor_launches_the_proxy_from_the_project_or_reaches_it_over_http() {
    let workspace = workspace();
    let (command, args) = launch_of(&entry("cursor", "mcpServers"), workspace.path());
    served_over_stdio(&command, &args, workspace.path()).await;

    let http = entry("cursor-http", "mcpServers");
    served_over_http(http["url"].as_str().expect("url")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_inspector_passes_the_proxy_its_own_config_after_the_separator() {
    let lines = command_lines("inspector");
    assert_eq!(lines.len(), 1);
    let workspace = workspace();
    let words: Vec<String> = lines[0]
        .iter()
        .map(|w| filled(w, workspace.path()))
        .collect();
    let (command, args) = inspector_launch(&words).expect("the Inspector launches something");
    served_over_stdio(&command, &args, workspace.path()).await;

    // Why the separator is there: without it the Inspector keeps `--config` for itself.
    let without: Vec<String> = words.iter().filter(|w| *w != "--").cloned().collect();
    let refused = inspector_launch(&without).expect_err("--config taken by the Inspector");
    assert!(refused.contains("its own servers file"), "{refused}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_imported_claude_desktop_config_is_served_as_it_is() {
    // The block runs as written in a home of its own, with `ahp-proxy` on PATH.
    let home = ScratchDir::new("snippet-home");
    let claude = home.path().join(".config/Claude");
    std::fs::create_dir_all(&claude).expect("mkdir");
    let entry = serde_json::json!({"mcpServers": {"snippet-echo": {"command": examples(), "args": ["echo"]}}});
    std::fs::write(claude.join("claude_desktop_config.json"), entry.to_string()).expect("write");
    let bin = Path::new(common::proxy())
        .parent()
        .expect("the binary's folder");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut shell = tokio::process::Command::new("bash");
    shell
        .args(["-e", "-c", &snippet("import")])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("PATH", path);
    serves_echo_then_exits(as_harness(shell)).await;
    assert!(home.path().join("mcp-servers.json").is_file());
}
