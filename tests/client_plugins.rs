//! Plugins an AHP client publishes (`activeClients[].customizations`): read like any plugin
//! folder and shown in the client's session with its `clientId`, their MCP servers launched
//! and served to the MCP-only harness, kept up to date from disk, and gone with the client
//! however it leaves; what the host cannot read says why; `[clients]` decides what runs.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use ahp::client::Client;
use ahp_types::actions::StateAction;
use ahp_types::state::SnapshotState;
use common::raw::RawClient;
use common::{examples, initialized_client, Proxy, ScratchDir, Watcher, DEFAULT_SESSION, PATIENCE};
use serde_json::{json, Value};

/// The first top-level customization of the watcher's mirror that `pick` accepts, as JSON.
fn find_customization(watcher: &Watcher, pick: impl Fn(&Value) -> bool) -> Option<Value> {
    watcher
        .mirror
        .customizations
        .iter()
        .flatten()
        .map(|c| serde_json::to_value(c).unwrap())
        .find(|c| pick(c))
}

/// The top-level customization `id` of the watcher's mirror, as JSON.
fn customization(watcher: &Watcher, id: &str) -> Option<Value> {
    find_customization(watcher, |c| c["id"] == id)
}

/// Apply actions to the watcher's mirror until `done` holds for it.
async fn until(watcher: &mut Watcher, what: &str, done: impl Fn(&Watcher) -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done(watcher) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not reached; the session shows {:#?}",
            watcher.mirror.customizations
        );
        let envelope = common::next_action(&mut watcher.sub).await;
        // The host sends no update that changes nothing (traffic to every client).
        if let StateAction::SessionCustomizationUpdated(update) = &envelope.action {
            assert!(
                !watcher
                    .mirror
                    .customizations
                    .iter()
                    .flatten()
                    .any(|c| *c == update.customization),
                "{what}: a customizationUpdated that changes nothing: {:?}",
                update.customization
            );
        }
        let _ = ahp::reducers::apply_action_to_session(&mut watcher.mirror, &envelope.action);
    }
}

/// Apply actions until the top-level customization `id` satisfies `done`; returns it.
async fn until_customization(
    watcher: &mut Watcher,
    id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    until(watcher, what, |w| {
        customization(w, id).is_some_and(|c| done(&c))
    })
    .await;
    customization(watcher, id).unwrap()
}

/// Publish `plugins` as active client `client_id` (with no tools) in the default session.
async fn publish(watcher: &Watcher, client_id: &str, plugins: Value) {
    watcher
        .dispatch(json!({"type": "session/activeClientSet", "activeClient": {
            "clientId": client_id, "displayName": "My IDE", "tools": [],
            "customizations": plugins}}))
        .await;
}

/// An official client as `client_id`, following the default session. It declares `mcpApps`,
/// so it is shown the host's whole state: a client without it is also sent the updates that
/// change only channels and `mcpApp`s (every 1.0 client sees every `serverSeq` of its
/// channels), which change nothing it sees, and `until` could not tell them from no-ops.
async fn joined(proxy: &Proxy, client_id: &str) -> Watcher {
    Watcher::open_with_apps(proxy, client_id).await
}

/// A plugin folder with one skill and the `notes` example server in its `.mcp.json`.
fn plugin_folder(dir: &Path) -> PathBuf {
    let plugin = dir.join("ide-tools");
    std::fs::create_dir_all(plugin.join("skills/review")).unwrap();
    std::fs::write(
        plugin.join("skills/review/SKILL.md"),
        "---\nname: review\ndescription: Review the change\n---\nLook closely.\n",
    )
    .unwrap();
    let servers = json!({"mcpServers": {"notes": {"command": examples(), "args": ["notes"]}}});
    std::fs::write(plugin.join(".mcp.json"), servers.to_string()).unwrap();
    plugin
}

fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The child named `name` of a container (JSON).
fn child(container: &Value, name: &str) -> Option<Value> {
    container["children"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
}

fn child_kinds(container: &Value) -> Vec<String> {
    container["children"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{} {}",
                c["type"].as_str().unwrap(),
                c["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// List the harness's tools until `done` holds for the listing's text; returns it.
async fn tools_until(harness: &mut RawClient, done: impl Fn(&str) -> bool) -> String {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let list = harness
                .request("tools/list", None, &mut |_, _| String::new())
                .await;
            if done(list.response()) {
                return list.response().to_string();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the harness's tool list changes as expected")
}

/// Wait until the proxy has no child process (every server it ran is gone).
async fn until_no_children(proxy: &Proxy) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !common::child_pids(proxy.pid()).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "servers still running: {:?}",
            common::child_pids(proxy.pid())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_plugin_is_shown_served_kept_up_to_date_and_gone_with_its_client() {
    let dir = ScratchDir::new("client-plugin");
    let folder = plugin_folder(dir.path());
    let (proxy, mut harness) = common::stdio_harness("").await;
    let mut ide = joined(&proxy, "ide-1").await;
    let plugin = json!({"type": "plugin", "id": "ide-tools", "uri": file_uri(&folder),
        "name": "IDE tools", "nonce": "1"});
    publish(&ide, "ide-1", json!([plugin])).await;

    // Shown in the session as a plugin of the client, read like any plugin folder.
    let shown = until_customization(
        &mut ide,
        "ide-tools",
        "the plugin with a ready server",
        |c| child(c, "notes").is_some_and(|s| s["state"]["kind"] == "ready"),
    )
    .await;
    assert_eq!(shown["type"], "plugin");
    assert_eq!(shown["clientId"], "ide-1");
    assert_eq!(shown["name"], "IDE tools");
    assert_eq!(shown["uri"], file_uri(&folder));
    assert_eq!(shown["load"]["kind"], "loaded");
    assert_eq!(child_kinds(&shown), ["skill review", "mcpServer notes"]);
    let skill = child(&shown, "review").unwrap();
    assert_eq!(skill["description"], "Review the change");
    let server = child(&shown, "notes").unwrap();
    assert!(server["range"].is_object(), "{server}");
    assert!(
        !server.to_string().contains(examples()),
        "no launch spec in AHP: {server}"
    );

    // The harness is served its tools.
    tools_until(&mut harness, |list| list.contains("list_notes")).await;
    assert_eq!(common::child_pids(proxy.pid()).len(), 1, "one server runs");

    // An edit on disk while published: the plugin is read again.
    std::fs::create_dir_all(folder.join("skills/fix")).unwrap();
    std::fs::write(
        folder.join("skills/fix/SKILL.md"),
        "---\nname: fix\ndescription: Fix it\n---\n",
    )
    .unwrap();
    until_customization(&mut ide, "ide-tools", "the new skill", |c| {
        child(c, "fix").is_some()
    })
    .await;

    // A new nonce and name from the client: shown, the server keeps running.
    let renamed = json!({"type": "plugin", "id": "ide-tools", "uri": file_uri(&folder),
        "name": "IDE tools 2", "nonce": "2"});
    publish(&ide, "ide-1", json!([renamed])).await;
    let shown = until_customization(&mut ide, "ide-tools", "the new name", |c| {
        c["name"] == "IDE tools 2"
    })
    .await;
    assert_eq!(child(&shown, "notes").unwrap()["state"]["kind"], "ready");

    // A session created with the client active publishes there too, and only there: the
    // same folder, so the same server, which runs once.
    let mine = json!({"type": "plugin", "id": "mine", "uri": file_uri(&folder), "name": "Mine"});
    let _: Value = ide
        .client
        .request(
            "createSession",
            json!({"channel": "ahp-proxy:/other", "activeClient": {
                "clientId": "ide-1", "tools": [], "customizations": [mine]}}),
        )
        .await
        .expect("createSession");
    let (other, other_sub) = ide
        .client
        .subscribe("ahp-proxy:/other".into())
        .await
        .unwrap();
    let SnapshotState::Session(other) = other.snapshot.unwrap().state else {
        panic!("a session");
    };
    let mut other = Watcher {
        client: ide.client.clone(),
        sub: other_sub,
        mirror: *other,
    };
    let shown = until_customization(&mut other, "mine", "the other session's plugin", |c| {
        child(c, "notes").is_some_and(|s| s["state"]["kind"] == "ready")
    })
    .await;
    assert_eq!(shown["clientId"], "ide-1");
    assert!(customization(&other, "ide-tools").is_none());
    assert!(customization(&ide, "mine").is_none());
    assert_eq!(common::child_pids(proxy.pid()).len(), 1, "one server runs");

    // The client leaves the default session: its plugin goes there; the other session's
    // still declares the server, which keeps running.
    ide.dispatch(json!({"type": "session/activeClientRemoved", "clientId": "ide-1"}))
        .await;
    until(&mut ide, "the plugin removed", |o| {
        customization(o, "ide-tools").is_none()
    })
    .await;
    assert!(customization(&other, "mine").is_some());
    assert_eq!(common::child_pids(proxy.pid()).len(), 1, "still running");

    // The other session goes: so do its plugin, the server and the harness's tools.
    let _: Value = ide
        .client
        .request("disposeSession", json!({"channel": "ahp-proxy:/other"}))
        .await
        .expect("disposeSession");
    until_no_children(&proxy).await;
    tools_until(&mut harness, |list| !list.contains("list_notes")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_the_host_cannot_read_says_why() {
    let dir = ScratchDir::new("client-plugin-unreadable");
    let proxy = Proxy::start("");
    let mut ide = joined(&proxy, "ide").await;
    let missing = dir.path().join("not-there");
    publish(
        &ide,
        "ide",
        json!([
            {"type": "plugin", "id": "virtual", "uri": "virtual://ide/plugins/x", "name": "Virtual"},
            {"type": "plugin", "id": "remote", "uri": "https://example.com/plugin", "name": "Remote"},
            {"type": "plugin", "id": "missing", "uri": file_uri(&missing), "name": "Missing"}
        ]),
    )
    .await;
    let cases = [
        ("virtual", "lives in the client"),
        ("remote", "cannot read https: URIs"),
        ("missing", "no such folder on this host"),
    ];
    for (id, why) in cases {
        let shown = until_customization(&mut ide, id, "the plugin in error", |c| {
            c["load"]["kind"] == "error"
        })
        .await;
        let message = shown["load"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{id}: {message}");
        assert_eq!(shown["clientId"], "ide");
        assert_eq!(shown["children"], json!([]));
    }

    // The missing folder appears: it is read while published.
    plugin_folder(dir.path());
    std::fs::rename(dir.path().join("ide-tools"), &missing).unwrap();
    let shown = until_customization(&mut ide, "missing", "the folder read", |c| {
        c["load"]["kind"] == "loaded"
    })
    .await;
    assert_eq!(child_kinds(&shown), ["skill review", "mcpServer notes"]);
}

/// Publish the plugin of `folder` as client `ide` and wait until its server shows `kind`.
async fn published_server(proxy: &Proxy, folder: &Path, kind: &str) -> (Watcher, Value) {
    let mut ide = joined(proxy, "ide").await;
    let plugin = json!({"type": "plugin", "id": "p", "uri": file_uri(folder), "name": "P"});
    publish(&ide, "ide", json!([plugin])).await;
    let shown = until_customization(&mut ide, "p", "the server's state", |c| {
        child(c, "notes").is_some_and(|s| s["state"]["kind"] == kind)
    })
    .await;
    let server = child(&shown, "notes").unwrap();
    (ide, server)
}

#[tokio::test(flavor = "multi_thread")]
async fn launch_servers_decides_whether_client_plugins_run_their_servers() {
    let dir = ScratchDir::new("client-plugin-launch");
    let folder = plugin_folder(dir.path());

    // Off: the server is shown, not run; asked to start, it says why.
    let proxy = Proxy::start("[clients]\nlaunch_servers = false\n");
    let (mut ide, server) = published_server(&proxy, &folder, "stopped").await;
    let id = server["id"].as_str().unwrap().to_string();
    ide.dispatch(json!({"type": "session/mcpServerStartRequested", "id": id}))
        .await;
    let shown = until_customization(&mut ide, "p", "the start refused", |c| {
        child(c, "notes").is_some_and(|s| s["state"]["kind"] == "error")
    })
    .await;
    let error = &child(&shown, "notes").unwrap()["state"]["error"];
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("launch_servers = false"),
        "{error}"
    );
    assert!(common::child_pids(proxy.pid()).is_empty());
    drop(ide);
    drop(proxy);

    // By default, a listener that is not loopback-only does not run them either.
    const TOKEN: &str = "client-plugins-token-0123456789";
    let proxy = Proxy::start_on("", "0.0.0.0:0", &[("AHP_PROXY_TOKEN", TOKEN)]);
    let transport = ahp_ws::WebSocketTransport::connect(&format!("{}/?token={TOKEN}", proxy.url))
        .await
        .unwrap();
    let client = Client::connect(transport, ahp::ClientConfig::default())
        .await
        .unwrap();
    client
        .initialize("ide".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    let mut ide = Watcher::subscribed(client).await;
    let plugin = json!({"type": "plugin", "id": "p", "uri": file_uri(&folder), "name": "P"});
    publish(&ide, "ide", json!([plugin])).await;
    until_customization(&mut ide, "p", "the server shown stopped", |c| {
        child(c, "notes").is_some_and(|s| s["state"]["kind"] == "stopped")
    })
    .await;
    assert!(common::child_pids(proxy.pid()).is_empty());
    drop(ide);
    drop(proxy);

    // Set on, it runs even there.
    let proxy = Proxy::start("[clients]\nlaunch_servers = true\n");
    let (_ide, _) = published_server(&proxy, &folder, "ready").await;
    assert_eq!(common::child_pids(proxy.pid()).len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_plugins_off_client_plugins_are_not_shown() {
    let dir = ScratchDir::new("client-plugin-off");
    let folder = plugin_folder(dir.path());
    let roots = dir.path().join("roots");
    std::fs::create_dir_all(&roots).unwrap();
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\n[clients]\nplugins = false\n",
        roots.display().to_string()
    ));
    let mut ide = joined(&proxy, "ide").await;
    let plugin = json!({"type": "plugin", "id": "p", "uri": file_uri(&folder), "name": "P"});
    publish(&ide, "ide", json!([plugin])).await;
    until(&mut ide, "the client is active", |o| {
        !o.mirror.active_clients.is_empty()
    })
    .await;
    // A plugin of the host's appears after the publication: the client's never did.
    plugin_folder(&roots);
    until(&mut ide, "the host's plugin", |o| {
        o.mirror
            .customizations
            .iter()
            .flatten()
            .any(|c| serde_json::to_value(c).unwrap()["name"] == "ide-tools")
    })
    .await;
    assert!(customization(&ide, "p").is_none());
    assert!(common::child_pids(proxy.pid()).len() <= 1);
}

/// Whether plugin `p`'s `notes` server is shown ready.
fn published_server_ready(o: &Watcher) -> bool {
    customization(o, "p")
        .and_then(|c| child(&c, "notes"))
        .is_some_and(|s| s["state"]["kind"] == "ready")
}

/// Client `client_id` joins, publishes `plugin` (seen with its server ready), and its
/// connection goes without unsubscribing.
async fn published_then_gone(
    proxy: &Proxy,
    watcher: &mut Watcher,
    client_id: &str,
    plugin: &Value,
) {
    let ide = joined(proxy, client_id).await;
    publish(&ide, client_id, plugin.clone()).await;
    until(watcher, "published", published_server_ready).await;
    ide.client.shutdown().await;
}

/// After `what`, client `client_id` has left the session: its plugin, its entry in
/// `activeClients` and its server's process are gone.
async fn has_left(proxy: &Proxy, watcher: &mut Watcher, client_id: &str, what: &str) {
    until(watcher, &format!("gone after {what}"), |o| {
        customization(o, "p").is_none()
    })
    .await;
    assert!(watcher
        .mirror
        .active_clients
        .iter()
        .all(|c| c.client_id != client_id));
    until_no_children(proxy).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_leaves_takes_its_plugins_and_their_servers() {
    let dir = ScratchDir::new("client-plugin-leaving");
    let folder = plugin_folder(dir.path());
    let plugin = json!([{"type": "plugin", "id": "p", "uri": file_uri(&folder), "name": "P"}]);
    let proxy = Proxy::start("[limits]\nactive_client_grace_secs = 3600\n");
    let mut watcher = joined(&proxy, "watcher").await;
    let ready = published_server_ready;

    // Unsubscribing from the session.
    let ide = joined(&proxy, "ide").await;
    publish(&ide, "ide", plugin.clone()).await;
    until(&mut watcher, "published", ready).await;
    ide.client
        .unsubscribe(DEFAULT_SESSION.into())
        .await
        .unwrap();
    until(&mut watcher, "gone after unsubscribe", |o| {
        customization(o, "p").is_none()
    })
    .await;
    until_no_children(&proxy).await;

    // A reconnect that no longer lists the session: at once, whatever the grace period.
    published_then_gone(&proxy, &mut watcher, "ide-r", &plugin).await;
    let again = common::client(&proxy).await;
    again
        .reconnect("ide-r".into(), 0, vec!["ahp-root://".into()])
        .await
        .expect("reconnect");
    has_left(&proxy, &mut watcher, "ide-r", "the reconnect").await;

    // A fresh initialize (not a reconnect) within the grace period starts afresh: the
    // sessions it does not subscribe to lose it at once, as with the reconnect above.
    published_then_gone(&proxy, &mut watcher, "ide-i", &plugin).await;
    let _fresh = initialized_client(&proxy, "ide-i").await;
    has_left(&proxy, &mut watcher, "ide-i", "the fresh initialize").await;
    drop(watcher);
    drop(proxy);

    // Disconnecting, once the grace period is over.
    let proxy = Proxy::start("[limits]\nactive_client_grace_secs = 0\n");
    let mut watcher = joined(&proxy, "watcher").await;
    let ide = joined(&proxy, "ide").await;
    publish(&ide, "ide", plugin).await;
    until(&mut watcher, "published", ready).await;
    ide.client.shutdown().await;
    drop(ide);
    until(&mut watcher, "gone after the disconnect", |o| {
        customization(o, "p").is_none()
    })
    .await;
    until_no_children(&proxy).await;
}

/// The host's own plugin `name` (JSON), once shown.
fn host_plugin(watcher: &Watcher, name: &str) -> Option<Value> {
    find_customization(watcher, |c| c["name"] == name && c["clientId"].is_null())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_withdrawn_plugin_over_the_hosts_own_folders_leaves_the_host_watching_them() {
    let dir = ScratchDir::new("client-overlap");
    let root = dir.path().join("vhost");
    let host = root.join("hp");
    std::fs::create_dir_all(host.join("skills/review")).unwrap();
    let skill = host.join("skills/review/SKILL.md");
    let write_skill = |description: &str| {
        std::fs::write(
            &skill,
            format!("---\nname: review\ndescription: {description}\n---\n"),
        )
        .unwrap();
    };
    write_skill("first");
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\n",
        root.display().to_string()
    ));
    let mut ide = joined(&proxy, "ide-1").await;
    until(&mut ide, "the host's plugin", |w| {
        host_plugin(w, "hp").is_some()
    })
    .await;

    // The same folder, by itself and by another path, a folder inside it, the root above it,
    // a folder that is not there: each published, then withdrawn.
    let published = [
        file_uri(&host),
        format!("{}/../hp", file_uri(&host)),
        file_uri(&host.join("skills")),
        file_uri(&root),
        file_uri(&host.join("skills/missing")),
    ];
    for (n, uri) in published.iter().enumerate() {
        let id = format!("ide-{n}");
        publish(
            &ide,
            "ide-1",
            json!([{"type": "plugin", "id": id, "uri": uri, "name": "overlap"}]),
        )
        .await;
        until(&mut ide, "the published plugin", |w| {
            customization(w, &id).is_some()
        })
        .await;
        publish(&ide, "ide-1", json!([])).await;
        until(&mut ide, "the published plugin gone", |w| {
            customization(w, &id).is_none()
        })
        .await;
        // The host still sees its own folder change.
        let description = format!("edited after {uri}");
        write_skill(&description);
        until(
            &mut ide,
            &format!("the host's edit seen after {uri}"),
            |w| {
                host_plugin(w, "hp")
                    .and_then(|p| child(&p, "review"))
                    .is_some_and(|s| s["description"] == description.as_str())
            },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_folder_by_another_path_runs_its_server_once() {
    let dir = ScratchDir::new("client-same-folder");
    let root = dir.path().join("vhost");
    let folder = plugin_folder(&root);
    let proxy = Proxy::start(&format!(
        "plugin_roots = [{:?}]\n",
        root.display().to_string()
    ));
    let mut ide = joined(&proxy, "ide-1").await;
    until(&mut ide, "the host's server ready", |w| {
        host_plugin(w, "ide-tools")
            .and_then(|p| child(&p, "notes"))
            .is_some_and(|s| s["state"]["kind"] == "ready")
    })
    .await;
    let by_detour = format!("{}/../ide-tools", file_uri(&folder));
    publish(
        &ide,
        "ide-1",
        json!([{"type": "plugin", "id": "detour", "uri": by_detour, "name": "detour"}]),
    )
    .await;
    // The published plugin's server shown ready: the host's own (the same id, so one entry
    // in the supervisor), or a second copy that has started by then.
    until(&mut ide, "the published plugin's server ready", |w| {
        customization(w, "detour")
            .and_then(|c| child(&c, "notes"))
            .is_some_and(|s| s["state"]["kind"] == "ready")
    })
    .await;
    let id = |c: Option<Value>| c.and_then(|c| child(&c, "notes")).map(|s| s["id"].clone());
    assert_eq!(
        id(customization(&ide, "detour")),
        id(host_plugin(&ide, "ide-tools")),
        "the folder's server is the host's by either path"
    );
    assert_eq!(
        common::child_pids(proxy.pid()).len(),
        1,
        "the folder's server runs once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_published_folder_too_big_to_watch_is_read_once_and_says_so() {
    let dir = ScratchDir::new("client-big");
    let folder = plugin_folder(dir.path());
    for n in 0..1_001 {
        std::fs::create_dir_all(folder.join(format!("data/{n}"))).unwrap();
    }
    let proxy = Proxy::start("");
    let mut ide = joined(&proxy, "ide-1").await;
    publish(
        &ide,
        "ide-1",
        json!([{"type": "plugin", "id": "big", "uri": file_uri(&folder), "name": "big"}]),
    )
    .await;
    let shown = until_customization(&mut ide, "big", "the big plugin read", |c| {
        c["load"]["kind"] == "degraded"
    })
    .await;
    let message = shown["load"]["message"].as_str().unwrap();
    assert!(
        message.contains("more than 1000 folders, so only its top folder is watched"),
        "{message}"
    );
    assert!(child(&shown, "review").is_some(), "still read: {shown}");
    // Only a handful of watches, not one per folder.
    let watches = common::inotify_watches(proxy.pid());
    assert!(watches < 100, "{watches} inotify watches");
}
