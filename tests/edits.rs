//! Edits must not lose running servers: a half-typed save of a `.mcp.json` (in a plugin, or
//! a manifest file) or of one server entry keeps the servers it declared running (same
//! process), the container says why (`degraded`, logged at WARN), fixing the file changes
//! nothing, and only a real change of a launch spec restarts a server.

mod common;

use std::path::Path;

use serde_json::Value;

use common::{examples, Proxy, ScratchDir, Watcher, PATIENCE};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A `.mcp.json` declaring one echo server `name`, marked by `marker` in its arguments.
fn declaring(name: &str, marker: &str) -> String {
    let examples = examples();
    format!(
        "{{\"mcpServers\": {{\"{name}\": {{\"command\": {examples:?}, \"args\": [\"echo\", \"{marker}\"]}}}}}}"
    )
}

/// The pid of the proxy's child whose command line contains `marker` (exactly one).
fn pid_of(proxy: &Proxy, marker: &str) -> u32 {
    let found: Vec<u32> = common::child_pids(proxy.pid())
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .split('\0')
                .any(|arg| arg == marker)
        })
        .collect();
    assert_eq!(found.len(), 1, "processes with {marker}: {found:?}");
    found[0]
}

/// The container named `name` in the mirror, as JSON.
fn container(w: &Watcher, name: &str) -> Value {
    w.mirror
        .customizations
        .iter()
        .flatten()
        .map(|c| serde_json::to_value(c).expect("json"))
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// Apply actions until container `name` has load state `kind`; returns it.
async fn until_load(w: &mut Watcher, name: &str, kind: &str) -> Value {
    let wait = async {
        loop {
            let c = container(w, name);
            if c["load"]["kind"] == kind {
                return c;
            }
            w.step().await;
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .unwrap_or_else(|_| panic!("{name} never became {kind}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_half_typed_save_keeps_the_servers_it_declared_running() {
    let examples = examples();
    let dir = ScratchDir::new("edits");
    let plugin_file = dir.path().join("plugins/p/.mcp.json");
    let manifest = dir.path().join("project/.mcp.json");
    write(&plugin_file, &declaring("a", "marker-a"));
    write(&manifest, &declaring("b", "marker-b"));
    let config = format!(
        "plugin_roots = [{:?}]\nmanifests = [{:?}]\n[limits]\nwatch_debounce_ms = 20\n",
        dir.path().join("plugins").display().to_string(),
        manifest.display().to_string()
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("a", "ready", &mut seen).await;
    w.until("b", "ready", &mut seen).await;
    let (a, b) = (pid_of(&proxy, "marker-a"), pid_of(&proxy, "marker-b"));

    // Half-typed saves of both files: nothing stops.
    write(&plugin_file, "{\"mcpServers\": {\"a\": {\"command\": ");
    write(&manifest, "{\"mcpServers\": {\"b\": {\"comm");
    let p = until_load(&mut w, "p", "degraded").await;
    let message = p["load"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("invalid JSON"), "{message}");
    assert!(
        message.contains("kept as last declared until it parses again: server a"),
        "{message}"
    );
    let file = until_load(&mut w, ".mcp.json", "degraded").await;
    assert_eq!(file["children"][0]["name"], "b", "{file}");
    assert_eq!(w.server("a")["state"]["kind"], "ready");
    assert_eq!(w.server("b")["state"]["kind"], "ready");
    proxy.wait_for_log("invalid JSON");
    let warned = proxy.logs().lines().any(|line| {
        line.contains("\"level\":\"WARN\"")
            && line.contains("discovery problem")
            && line.contains("invalid JSON")
    });
    assert!(
        warned,
        "the broken file is logged at WARN:\n{}",
        proxy.logs()
    );

    // One entry refused (a wrong type) keeps its last good declaration too.
    write(
        &plugin_file,
        &format!(
            "{{\"mcpServers\": {{\"a\": {{\"command\": {examples:?}, \"args\": \"not a list\"}}}}}}"
        ),
    );
    let p = loop {
        let p = until_load(&mut w, "p", "degraded").await;
        if p["load"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`args` must be an array"))
        {
            break p;
        }
        w.step().await;
    };
    assert_eq!(p["children"][0]["name"], "a");

    // Fixed as it was: loaded again, the very same processes.
    write(&plugin_file, &declaring("a", "marker-a"));
    write(&manifest, &format!("{}\n", declaring("b", "marker-b")));
    until_load(&mut w, "p", "loaded").await;
    until_load(&mut w, ".mcp.json", "loaded").await;
    assert_eq!(pid_of(&proxy, "marker-a"), a, "a was not restarted");
    assert_eq!(pid_of(&proxy, "marker-b"), b, "b was not restarted");
    assert_eq!(w.server("a")["state"]["kind"], "ready");

    // A real change of the launch spec restarts that server, and only it.
    write(&plugin_file, &declaring("a", "marker-a2"));
    w.until("a", "starting", &mut seen).await;
    w.until("a", "ready", &mut seen).await;
    assert_ne!(pid_of(&proxy, "marker-a2"), a);
    assert_eq!(pid_of(&proxy, "marker-b"), b);
}
