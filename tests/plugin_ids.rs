//! Customization ids are session-unique: a plugin an AHP client publishes may not take an id
//! the host already uses in the session (a host container's, a host skill's or server's
//! inside one, the session's own URI or one of its chats'), through the real binary with
//! the official client; the refusal says what holds the id.

mod common;

use std::path::Path;

use ahp_types::actions::ActionEnvelope;
use common::{initialized_client, Proxy, ScratchDir, Watcher};
use serde_json::{json, Value};

/// A host plugin folder `kit` with one skill and one server (`echo`) in its `.mcp.json`.
fn host_plugin(root: &Path) {
    let plugin = root.join("kit");
    std::fs::create_dir_all(plugin.join(".plugin")).unwrap();
    std::fs::write(
        plugin.join(".plugin/plugin.json"),
        r#"{"name": "kit", "version": "1.0.0"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(plugin.join("skills/review")).unwrap();
    std::fs::write(
        plugin.join("skills/review/SKILL.md"),
        "---\nname: review\ndescription: Review\n---\n",
    )
    .unwrap();
    let servers =
        json!({"mcpServers": {"echo": {"command": common::examples(), "args": ["echo"]}}});
    std::fs::write(plugin.join(".mcp.json"), servers.to_string()).unwrap();
}

/// The id of the host plugin's child named `name`.
fn child_id(watcher: &Watcher, name: &str) -> String {
    watcher
        .mirror
        .customizations
        .iter()
        .flatten()
        .map(|c| serde_json::to_value(c).unwrap())
        .flat_map(|c| c["children"].as_array().cloned().unwrap_or_default())
        .find(|c| c["name"] == name)
        .and_then(|c| c["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no child {name}"))
}

/// The next action `ide` dispatched, as the host answered it (accepted or echoed with a
/// reason), every action before it (a server starting, say) applied to the mirror.
async fn answer(ide: &mut Watcher) -> ActionEnvelope {
    loop {
        let envelope = common::next_action(&mut ide.sub).await;
        if envelope.rejection_reason.is_none() {
            let _ = ahp::reducers::apply_action_to_session(&mut ide.mirror, &envelope.action);
        }
        if envelope
            .origin
            .as_ref()
            .is_some_and(|o| o.client_id == "ide")
        {
            return envelope;
        }
    }
}

/// An `activeClientSet` publishing one plugin with id `id`.
fn publishing(id: &str, folder: &Path) -> Value {
    json!({"type": "session/activeClientSet", "activeClient": {
        "clientId": "ide", "tools": [],
        "customizations": [{"type": "plugin", "id": id,
            "uri": format!("file://{}", folder.display()), "name": "Mine"}]}})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_plugin_may_not_take_an_id_the_host_uses_in_the_session() {
    let dir = ScratchDir::new("plugin-ids");
    host_plugin(&dir.path().join("plugins"));
    let mine = dir.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    let config = format!(
        "plugin_roots = [{:?}]\n",
        dir.path().join("plugins").display().to_string()
    );
    let proxy = Proxy::start(&config);
    let mut ide = Watcher::subscribed(initialized_client(&proxy, "ide").await).await;
    let skill = child_id(&ide, "review");
    let server = child_id(&ide, "echo");
    let taken = [
        (skill.as_str(), "the host"),
        (server.as_str(), "the host"),
        ("ahp-proxy:/default", "this session's URI"),
        ("ahp-chat:/harness", "a chat of this session"),
    ];
    for (id, holder) in taken {
        ide.dispatch(publishing(id, &mine)).await;
        let echo = answer(&mut ide).await;
        let reason = echo
            .rejection_reason
            .unwrap_or_else(|| panic!("plugin id {id:?} was accepted"));
        assert!(
            reason.contains(id) && reason.contains(holder) && reason.contains("session-unique"),
            "{id}: {reason}"
        );
    }
    // Nothing of it reached the session; an id of its own is taken.
    assert!(ide.mirror.active_clients.is_empty());
    ide.dispatch(publishing("mine", &mine)).await;
    let echo = answer(&mut ide).await;
    assert!(
        echo.rejection_reason.is_none(),
        "{:?}",
        echo.rejection_reason
    );

    // createSession judges the plugins of its active client the same way.
    let refused = ide
        .client
        .request::<_, Value>(
            "createSession",
            json!({"channel": "ahp-proxy:/other", "activeClient": {
                "clientId": "ide", "tools": [],
                "customizations": [{"type": "plugin", "id": server,
                    "uri": format!("file://{}", mine.display()), "name": "Mine"}]}}),
        )
        .await
        .expect_err("an id the host uses");
    let text = refused.to_string();
    assert!(
        text.contains(&server) && text.contains("session-unique"),
        "{text}"
    );
    let refused = ide
        .client
        .request::<_, Value>(
            "createSession",
            json!({"channel": "ahp-proxy:/third", "activeClient": {
                "clientId": "ide", "tools": [],
                "customizations": [{"type": "plugin", "id": "ahp-proxy:/third",
                    "uri": format!("file://{}", mine.display()), "name": "Mine"}]}}),
        )
        .await
        .expect_err("the new session's own URI");
    assert!(refused.to_string().contains("session's URI"), "{refused}");
}
