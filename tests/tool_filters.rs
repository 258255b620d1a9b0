//! A server's declared tool filters (`disabledTools`, `includeTools`, `excludeTools`, from a
//! manifest or proxy.toml) hide tools from the harness on every MCP endpoint, a call to a
//! hidden tool is answered as an unknown tool's, and `check` shows what each server hides
//! and pre-approves.

mod common;

use std::process::Command;

use common::raw::RawClient;
use common::{examples, Proxy, ScratchDir};
use serde_json::Value;

/// A manifest (Roo Code / Cline dialect) with `calc` (the `features` example: echo, add,
/// slow) hiding `add` and pre-approving `echo` and `slow`, beside `plain` (the `echo`
/// example: its own `echo` among others, none named `add`).
fn manifest(dir: &ScratchDir) -> String {
    let examples = examples();
    let text = serde_json::json!({"mcpServers": {
        "calc": {"command": examples, "args": ["features"], "disabledTools": ["add"],
                 "alwaysAllow": ["echo"], "autoApprove": ["slow"]},
        "plain": {"command": examples, "args": ["echo"]},
    }});
    let path = dir.path().join("servers.mcp.json");
    std::fs::write(&path, text.to_string()).expect("write manifest");
    format!("manifests = [{:?}]\n", path.display().to_string())
}

/// The names a `tools/list` answer lists.
fn names(response: &str) -> Vec<String> {
    let value: Value = serde_json::from_str(response).expect("JSON answer");
    let mut names: Vec<String> = value["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {response}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// The error of a `tools/call` answer (its id removed).
fn error(response: &str) -> Value {
    let value: Value = serde_json::from_str(response).expect("JSON answer");
    assert!(value.get("result").is_none(), "an error: {response}");
    value["error"].clone()
}

async fn initialize(client: &mut RawClient) {
    client
        .request(
            "initialize",
            Some(r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}"#),
            &mut |_, _| String::new(),
        )
        .await;
    client.notify("notifications/initialized", None).await;
}

async fn list(client: &mut RawClient) -> Vec<String> {
    names(
        client
            .request("tools/list", None, &mut |_, _| String::new())
            .await
            .response(),
    )
}

async fn call(client: &mut RawClient, tool: &str) -> String {
    let params = format!(r#"{{"name":"{tool}","arguments":{{"a":1,"b":2,"text":"t"}}}}"#);
    client
        .request("tools/call", Some(&params), &mut |_, _| String::new())
        .await
        .response()
        .to_string()
}

/// A call to `hidden` is answered exactly as a call to a tool nobody has, but for the name.
async fn answered_as_unknown(client: &mut RawClient, hidden: &str) {
    let got = error(&call(client, hidden).await);
    let unknown = error(&call(client, "no_such_tool").await);
    assert_eq!(
        got.to_string().replace(hidden, "no_such_tool"),
        unknown.to_string(),
        "{hidden} is answered as an unknown tool"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_tools_are_hidden_on_every_endpoint() {
    let dir = ScratchDir::new("approvals-disabled");
    let config = manifest(&dir);
    let proxy = Proxy::start(&config);

    // Aggregated /mcp: two servers, `echo` prefixed on collision, `add` nowhere.
    let mut all = RawClient::http(&proxy.mcp_url);
    initialize(&mut all).await;
    let listed = list(&mut all).await;
    assert!(listed.contains(&"calc__echo".into()) && listed.contains(&"slow".into()));
    assert!(!listed.iter().any(|n| n.ends_with("add")), "{listed:?}");
    answered_as_unknown(&mut all, "add").await;
    answered_as_unknown(&mut all, "calc__add").await;

    // Per-server /mcp/calc: the server's own list without `add`; a call is refused here,
    // never reaching the server, with the proxy's unknown-tool answer.
    let mut one = RawClient::http(&format!("{}/calc", proxy.mcp_url));
    initialize(&mut one).await;
    assert_eq!(list(&mut one).await, ["echo", "slow"]);
    let refused = error(&call(&mut one, "add").await);
    assert_eq!(refused["code"], -32602, "{refused}");
    assert_eq!(refused["message"], r#"unknown tool "add""#, "{refused}");
    // What is not hidden still works.
    let echoed: Value = serde_json::from_str(&call(&mut one, "echo").await).unwrap();
    assert!(echoed.get("result").is_some(), "{echoed}");

    // serve --stdio: like /mcp.
    let (_stdio, mut harness) = common::stdio_harness(&config).await;
    assert_eq!(list(&mut harness).await, listed);
    answered_as_unknown(&mut harness, "add").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn include_and_exclude_tools_keep_only_what_they_say() {
    // proxy.toml takes the same keys; one server behind /mcp (its own answers passed on).
    let examples = examples();
    let config = format!(
        "[servers.calc]\ncommand = {examples:?}\nargs = [\"features\"]\n\
         includeTools = [\"echo\", \"slow\"]\nexcludeTools = [\"slow\"]\n"
    );
    let proxy = Proxy::start(&config);
    let mut all = RawClient::http(&proxy.mcp_url);
    initialize(&mut all).await;
    assert_eq!(list(&mut all).await, ["echo"]);
    for hidden in ["add", "slow"] {
        let refused = error(&call(&mut all, hidden).await);
        assert_eq!(refused["message"], format!("unknown tool {hidden:?}"));
    }
    let mut one = RawClient::http(&format!("{}/calc", proxy.mcp_url));
    initialize(&mut one).await;
    assert_eq!(list(&mut one).await, ["echo"]);

    let (_stdio, mut harness) = common::stdio_harness(&config).await;
    assert_eq!(list(&mut harness).await, ["echo"]);
    let refused = error(&call(&mut harness, "slow").await);
    assert_eq!(refused["message"], r#"unknown tool "slow""#);
}

#[test]
fn check_shows_what_each_server_hides_and_pre_approves() {
    let dir = ScratchDir::new("approvals-check");
    let config = dir.path().join("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "{}[servers.narrow]\ncommand = \"true\"\nincludeTools = [\"echo\"]\nexcludeTools = [\"slow\"]\n",
            manifest(&dir)
        ),
    )
    .expect("write config");
    let run = |json: bool| {
        let mut command = Command::new(common::proxy());
        command.arg("--config").arg(&config).arg("check");
        if json {
            command.arg("--json");
        }
        let output = command.output().expect("run check");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let text = run(false);
    // The tool lists are read, not reported as unknown keys.
    assert!(text.contains("problems (0)\n"), "{text}");
    assert!(text.contains("hides disabledTools add\n"), "{text}");
    assert!(text.contains("pre-approves echo, slow\n"), "{text}");
    assert!(
        text.contains("hides all but includeTools echo; excludeTools slow\n"),
        "{text}"
    );
    let report: Value = serde_json::from_str(&run(true)).expect("JSON");
    let filters = report["toolFilters"].as_object().expect("toolFilters");
    assert_eq!(filters.len(), 2, "{filters:?}");
    let calc = filters
        .values()
        .find(|f| f["name"] == "calc")
        .expect("calc");
    assert_eq!(calc["disabledTools"], serde_json::json!(["add"]));
    assert_eq!(calc["includeTools"], Value::Null);
    assert_eq!(calc["preApproved"], serde_json::json!(["echo", "slow"]));
    let narrow = filters
        .values()
        .find(|f| f["name"] == "narrow")
        .expect("narrow");
    assert_eq!(narrow["includeTools"], serde_json::json!(["echo"]));
    assert_eq!(narrow["excludeTools"], serde_json::json!(["slow"]));
}
