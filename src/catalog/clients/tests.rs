//! Unit tests of the client plugin source: folders read and dressed as published, the nonce
//! rule, what cannot be read, enablement and the launch switch, per-session views.

use super::*;
use serde_json::json;

struct Folder(PathBuf);

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn folder(tag: &str) -> Folder {
    let dir = std::env::temp_dir().join(format!(
        "ahp-proxy-client-plugins-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let plugin = dir.join("tools");
    std::fs::create_dir_all(plugin.join("skills/review")).unwrap();
    std::fs::write(
        plugin.join("skills/review/SKILL.md"),
        "---\nname: review\ndescription: Review a change\n---\nbody\n",
    )
    .unwrap();
    std::fs::write(
        plugin.join(".mcp.json"),
        r#"{"mcpServers": {"notes": {"command": "notes-server"}, "clock": {"command": "clock-server"}}}"#,
    )
    .unwrap();
    Folder(dir)
}

fn ctx(dir: &Path) -> Context {
    Context {
        data_dir: dir.join("data"),
        env: Box::new(|_| None),
    }
}

fn published(id: &str, uri: &str, extra: serde_json::Value) -> PublishedPlugin {
    let mut plugin = json!({"type": "plugin", "id": id, "uri": uri, "name": "Tools"});
    plugin
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    PublishedPlugin {
        session: "ahp-proxy:/default".into(),
        client: "ide".into(),
        plugin: serde_json::from_value(plugin).unwrap(),
    }
}

fn shown(plugins: &ClientPlugins) -> Vec<serde_json::Value> {
    plugins
        .view(&HashSet::new())
        .into_values()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect()
}

fn names(container: &serde_json::Value) -> Vec<String> {
    container["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["type"].as_str().unwrap(),
                c["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_published_folder_is_read_like_any_plugin_and_shown_as_published() {
    let dir = folder("read");
    let ctx = ctx(&dir.0);
    let uri = uri::file_uri(&dir.0.join("tools"));
    let mut plugins = ClientPlugins::new(true);
    assert!(plugins.publish(&[published("p1", &uri, json!({"nonce": "1"}))], &ctx));
    let [container] = &shown(&plugins)[..] else {
        panic!("one container: {:?}", shown(&plugins));
    };
    assert_eq!(container["id"], "p1");
    assert_eq!(container["uri"], uri.as_str());
    assert_eq!(container["clientId"], "ide");
    assert_eq!(container["name"], "Tools");
    assert_eq!(container["load"]["kind"], "loaded");
    assert_eq!(
        names(container),
        ["skill review", "mcpServer notes", "mcpServer clock"]
    );
    let servers: Vec<_> = plugins.servers().collect();
    assert_eq!(servers.len(), 2);
    assert!(servers
        .iter()
        .all(|s| s.container.as_deref() == Some("p1") && s.enabled));
    assert!(servers[0].launch.is_ok());
    assert_eq!(plugins.watch_targets(), [(dir.0.join("tools"), true)]);
    let skill = dir.0.join("tools/skills/review/SKILL.md");
    assert_eq!(plugins.dirty_for(&skill).count(), 1);
    assert_eq!(plugins.dirty_for(&dir.0.join("elsewhere")).count(), 0);
}

#[test]
fn the_nonce_decides_whether_a_plugin_is_read_again() {
    let dir = folder("nonce");
    let ctx = ctx(&dir.0);
    let uri = uri::file_uri(&dir.0.join("tools"));
    let mut plugins = ClientPlugins::new(true);
    plugins.publish(&[published("p1", &uri, json!({"nonce": "1"}))], &ctx);
    std::fs::create_dir_all(dir.0.join("tools/skills/fix")).unwrap();
    std::fs::write(
        dir.0.join("tools/skills/fix/SKILL.md"),
        "---\nname: fix\n---\n",
    )
    .unwrap();

    // The same nonce, another name: shown renamed, not read again.
    let renamed = published("p1", &uri, json!({"nonce": "1", "name": "Renamed"}));
    assert!(!plugins.publish(std::slice::from_ref(&renamed), &ctx));
    let container = &shown(&plugins)[0];
    assert_eq!(container["name"], "Renamed");
    assert!(!names(container).contains(&"skill fix".to_string()));

    // A new nonce: read again.
    plugins.publish(&[published("p1", &uri, json!({"nonce": "2"}))], &ctx);
    assert!(names(&shown(&plugins)[0]).contains(&"skill fix".to_string()));

    // Without a nonce, any change reads it again; an identical publication does not.
    std::fs::remove_dir_all(dir.0.join("tools/skills/fix")).unwrap();
    plugins.publish(&[published("p1", &uri, json!({}))], &ctx);
    assert!(!names(&shown(&plugins)[0]).contains(&"skill fix".to_string()));
    std::fs::create_dir_all(dir.0.join("tools/skills/fix")).unwrap();
    std::fs::write(
        dir.0.join("tools/skills/fix/SKILL.md"),
        "---\nname: fix\n---\n",
    )
    .unwrap();
    plugins.publish(&[published("p1", &uri, json!({}))], &ctx);
    assert!(!names(&shown(&plugins)[0]).contains(&"skill fix".to_string()));
    plugins.publish(&[published("p1", &uri, json!({"name": "Other"}))], &ctx);
    assert!(names(&shown(&plugins)[0]).contains(&"skill fix".to_string()));

    // Gone from the set: gone.
    assert!(plugins.publish(&[], &ctx));
    assert!(plugins.is_empty());
    assert_eq!(plugins.servers().count(), 0);
}

#[test]
fn what_the_host_cannot_read_is_an_error_saying_why() {
    let dir = folder("unreadable");
    let ctx = ctx(&dir.0);
    let file = dir.0.join("tools/.mcp.json");
    let cases = [
        ("virtual://ide/plugins/x", "lives in the client"),
        ("https://example.com/plugin", "cannot read https: URIs"),
        ("file://host/x", "not a file: URI of a folder on this host"),
        (
            &*uri::file_uri(&dir.0.join("missing")),
            "no such folder on this host",
        ),
        (&*uri::file_uri(&file), "not a folder"),
        (&*uri::file_uri(&dir.0), "not a plugin folder"),
    ];
    for (uri, why) in cases {
        let mut plugins = ClientPlugins::new(true);
        plugins.publish(&[published("p", uri, json!({}))], &ctx);
        let container = &shown(&plugins)[0];
        assert_eq!(container["load"]["kind"], "error", "{uri}");
        let message = container["load"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{uri}: {message}");
        assert_eq!(container["children"], json!([]), "{uri}");
        assert_eq!(container["clientId"], "ide");
        assert_eq!(plugins.servers().count(), 0);
    }
    // A folder that is not a plugin yet is watched with its parent, not everything in it.
    let mut plugins = ClientPlugins::new(true);
    plugins.publish(&[published("p", &uri::file_uri(&dir.0), json!({}))], &ctx);
    let parent = dir.0.parent().unwrap().to_path_buf();
    assert_eq!(
        plugins.watch_targets(),
        [(dir.0.clone(), false), (parent, false)]
    );
}

#[test]
fn enablement_and_the_launch_switch_decide_which_servers_run() {
    let dir = folder("enablement");
    let ctx = ctx(&dir.0);
    let uri = uri::file_uri(&dir.0.join("tools"));
    let mut plugins = ClientPlugins::new(true);
    let decisions = json!({"childEnablement": {
        "clock": [{"kind": "global", "enabled": false}],
        "review": [{"kind": "global", "enabled": false}]}});
    plugins.publish(&[published("p", &uri, decisions)], &ctx);
    let running: Vec<(&str, bool)> = plugins
        .servers()
        .map(|s| (s.name.as_str(), s.enabled))
        .collect();
    assert_eq!(running, [("notes", true), ("clock", false)]);
    let container = &shown(&plugins)[0];
    let children = container["children"].as_array().unwrap();
    assert_eq!(
        children[0]["enabled"], false,
        "the skill the client turned off"
    );
    assert_eq!(children[2]["state"]["kind"], "stopped");
    assert_eq!(children[2]["enablement"][0]["enabled"], false);

    let off = json!({"enablement": [{"kind": "global", "enabled": false}]});
    plugins.publish(&[published("p", &uri, off)], &ctx);
    assert!(plugins.servers().all(|s| !s.enabled));

    let mut unlaunched = ClientPlugins::new(false);
    unlaunched.publish(&[published("p", &uri, json!({}))], &ctx);
    for server in unlaunched.servers() {
        assert!(!server.enabled);
        assert_eq!(server.launch, Err(LaunchError::not_launched(NOT_LAUNCHED)));
        assert_eq!(
            server.launch.as_ref().unwrap_err().to_string(),
            format!("not launched: {NOT_LAUNCHED}")
        );
    }
    let container = &shown(&unlaunched)[0];
    assert_eq!(container["children"][1]["state"]["kind"], "stopped");
}

#[test]
fn each_session_shows_its_own_and_the_host_keeps_its_ids() {
    let dir = folder("sessions");
    let ctx = ctx(&dir.0);
    let uri = uri::file_uri(&dir.0.join("tools"));
    let mut plugins = ClientPlugins::new(true);
    let mut other = published("p", &uri, json!({}));
    other.session = "ahp-proxy:/other".into();
    plugins.publish(&[published("p", &uri, json!({})), other.clone()], &ctx);
    let none = HashSet::new();
    let before = plugins.view(&none);
    assert_eq!(before.len(), 2);

    // The host shows a customization with the same id: the client's is hidden, and no
    // removal is sent (the host's own update replaced it).
    let host: HashSet<&str> = HashSet::from(["p"]);
    let shadowed = plugins.view(&host);
    assert!(shadowed.is_empty());
    assert!(diff(&before, &shadowed, &host).is_empty());
    // The host lets go of it: the client's comes back in both sessions.
    let back = diff(&shadowed, &plugins.view(&none), &none);
    let sessions: Vec<&str> = back.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(sessions, ["ahp-proxy:/default", "ahp-proxy:/other"]);

    // One session's client leaves: only that session loses it.
    plugins.publish(&[other], &ctx);
    let gone = diff(&before, &plugins.view(&none), &none);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].0, "ahp-proxy:/default");
    assert!(matches!(gone[0].1, StateAction::SessionCustomizationRemoved(ref a) if a.id == "p"));
}
