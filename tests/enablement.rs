//! A server its manifest (or proxy.toml) disables is published with that decision as an
//! `enablement` entry (scope `global`), so clients that read `enablement` show it off; the
//! entry stays beside a client's own decisions across toggles and rescans, and the
//! supervisor runs what the resolved decision says. The real binary, the official client.

mod common;

use std::path::Path;

use ahp_types::state::SnapshotState;
use common::{server, Proxy, ScratchDir, Watcher};
use serde_json::{json, Value};

/// A plugin `kit` whose `.mcp.json` declares `quiet` disabled and `loud` enabled.
fn write_plugin(root: &Path, version: &str) {
    let plugin = root.join("kit");
    std::fs::create_dir_all(plugin.join(".plugin")).unwrap();
    let servers = json!({"mcpServers": {
        "quiet": {"command": common::examples(), "args": ["echo"], "disabled": true},
        "loud": {"command": common::examples(), "args": ["clock"]}}});
    std::fs::write(plugin.join(".mcp.json"), servers.to_string()).unwrap();
    // Written last, renamed into place: the rescan it causes sees the whole plugin.
    let temp = plugin.join(".plugin/.plugin.json.tmp");
    std::fs::write(
        &temp,
        json!({"name": "kit", "version": version}).to_string(),
    )
    .unwrap();
    std::fs::rename(&temp, plugin.join(".plugin/plugin.json")).unwrap();
}

fn kit_version(w: &Watcher) -> Value {
    w.mirror
        .customizations
        .iter()
        .flatten()
        .map(|c| serde_json::to_value(c).unwrap())
        .find(|c| c["name"] == "kit")
        .map(|c| c["version"].clone())
        .unwrap_or_default()
}

async fn toggle(w: &Watcher, id: &str, enablement: Value) {
    w.dispatch(json!({"type": "session/customizationToggled", "id": id,
        "enablement": enablement}))
        .await;
}

/// Apply actions until server `name` shows `enablement` and its state is `kind`.
async fn until_shown(w: &mut Watcher, name: &str, enablement: &Value, kind: &str) {
    while w.server(name)["enablement"] != *enablement || w.server(name)["state"]["kind"] != kind {
        w.step().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disabled_server_is_published_disabled_across_toggles_and_rescans() {
    let dir = ScratchDir::new("enablement");
    let plugins = dir.path().join("plugins");
    write_plugin(&plugins, "1.0.0");
    let config = format!(
        "plugin_roots = [{:?}]\n[limits]\nwatch_debounce_ms = 50\n{}enabled = false\n",
        plugins.display().to_string(),
        server("off", "echo", &[])
    );
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let off = json!([{"kind": "global", "enabled": false}]);

    // Published as the manifest (and proxy.toml) decided, and not running.
    let mut seen = Vec::new();
    w.until("loud", "ready", &mut seen).await;
    for name in ["quiet", "off"] {
        let shown = w.server(name);
        assert_eq!(shown["enablement"], off, "{shown}");
        assert_eq!(shown["state"]["kind"], "stopped", "{shown}");
    }
    assert!(w.server("loud").get("enablement").is_none());

    // A client's session decision goes first, the manifest's stays after it; it runs.
    let quiet = w.id("quiet");
    let on_here = json!([{"kind": "session", "enabled": true},
        {"kind": "global", "enabled": false}]);
    toggle(&w, &quiet, json!([{"kind": "session", "enabled": true}])).await;
    until_shown(&mut w, "quiet", &on_here, "ready").await;

    // A rescan of the plugin keeps both and the running server.
    write_plugin(&plugins, "1.0.1");
    while kit_version(&w) != "1.0.1" {
        w.step().await;
    }
    assert_eq!(w.server("quiet")["enablement"], on_here);
    assert_eq!(w.server("quiet")["state"]["kind"], "ready");

    // The client's decision cleared: the manifest's is left, and the server stops; a
    // rescan keeps it so.
    toggle(&w, &quiet, json!([])).await;
    until_shown(&mut w, "quiet", &off, "stopped").await;
    write_plugin(&plugins, "1.0.2");
    while kit_version(&w) != "1.0.2" {
        w.step().await;
    }
    assert_eq!(w.server("quiet")["enablement"], off);
    assert_eq!(w.server("quiet")["state"]["kind"], "stopped");

    // A client's global decision replaces the manifest's (it is the same scope).
    let on = json!([{"kind": "global", "enabled": true}]);
    toggle(&w, &w.id("off"), on.clone()).await;
    until_shown(&mut w, "off", &on, "ready").await;

    // A new session shows the same decisions.
    let _: Value = w
        .client
        .request("createSession", json!({"channel": "ahp-proxy:/other"}))
        .await
        .expect("createSession");
    let (other, sub) = w.client.subscribe("ahp-proxy:/other".into()).await.unwrap();
    let SnapshotState::Session(state) = other.snapshot.unwrap().state else {
        panic!("a session snapshot");
    };
    let other = Watcher {
        client: w.client.clone(),
        sub,
        mirror: *state,
    };
    assert_eq!(other.server("quiet")["enablement"], off);
    assert_eq!(other.server("off")["enablement"], on);
}
