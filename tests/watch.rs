//! Live discovery end to end: the real binary watches scratch plugin folders while the
//! official AHP client is subscribed; files are edited on disk the way editors and people do,
//! and each test asserts the exact actions that arrive (and that a mirror built with the
//! official reducers matches a fresh snapshot).

mod common;

use std::path::Path;

use ahp_types::actions::ActionEnvelope;
use ahp_types::commands::{
    ContentEncoding, ResourceDeleteParams, ResourceListParams, ResourceReadParams,
    ResourceWriteParams,
};
use ahp_types::state::{Customization, SessionState};
use ahp_types::StateAction;
use common::{next_action, Proxy, ScratchDir, Watcher};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A burst of writes must land in one debounce window even on a loaded CI machine, so the
/// window is wider here than the default 50 ms (a split burst would be a second update).
fn config(plugins: &Path, extra: &str) -> String {
    format!(
        "plugin_roots = [{:?}]\n{extra}\n[limits]\nwatch_debounce_ms = 250\n",
        plugins.display().to_string()
    )
}

/// `updated <name>` / `removed <last path segment of the id>`.
fn describe(envelope: &ActionEnvelope) -> String {
    match &envelope.action {
        StateAction::SessionCustomizationUpdated(u) => {
            let v = serde_json::to_value(&u.customization).unwrap();
            format!("updated {}", v["name"].as_str().unwrap())
        }
        StateAction::SessionCustomizationRemoved(r) => {
            format!("removed {}", r.id.rsplit('/').next().unwrap())
        }
        other => format!("other {other:?}"),
    }
}

fn names(state: &SessionState) -> Vec<String> {
    state
        .customizations
        .iter()
        .flatten()
        .map(|c| {
            serde_json::to_value(c).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn plugin_json(name: &str, version: &str) -> String {
    format!("{{ \"name\": \"{name}\", \"version\": \"{version}\" }}\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn edits_on_disk_become_the_minimal_actions_and_the_mirror_never_drifts() {
    let dir = ScratchDir::new("watch");
    let plugins = dir.path().join("plugins");
    write(
        &plugins.join("alpha/.plugin/plugin.json"),
        &plugin_json("alpha", "1.0.0"),
    );
    write(
        &plugins.join("beta/.claude-plugin/plugin.json"),
        &plugin_json("beta", "1.0.0"),
    );
    let proxy = Proxy::start(&config(&plugins, ""));
    let Watcher {
        client,
        mut sub,
        mut mirror,
    } = Watcher::open_as(&proxy, "watcher").await;
    assert_eq!(names(&mirror), ["alpha", "beta"]);
    let mut seen = Vec::new();
    let mut expect = |envelope: ActionEnvelope, mirror: &mut SessionState| {
        let _ = ahp::reducers::apply_action_to_session(mirror, &envelope.action);
        let text = describe(&envelope);
        seen.push(text.clone());
        text
    };

    // 1. A new skill file: one update for alpha only.
    write(
        &plugins.join("alpha/skills/new/SKILL.md"),
        "---\ndescription: fresh\n---\n",
    );
    assert_eq!(
        expect(next_action(&mut sub).await, &mut mirror),
        "updated alpha"
    );

    // 2. Editor save: write a temp file, rename it over the manifest. One update.
    let manifest = plugins.join("alpha/.plugin/plugin.json");
    let temp = plugins.join("alpha/.plugin/.plugin.json.swp");
    write(&temp, &plugin_json("alpha", "2.0.0"));
    std::fs::rename(&temp, &manifest).unwrap();
    let envelope = next_action(&mut sub).await;
    assert_eq!(expect(envelope, &mut mirror), "updated alpha");

    // 3. Truncate, then write, then a burst of rewrites ending in one new state: one update.
    std::fs::write(&manifest, "").unwrap();
    for i in 0..20 {
        std::fs::write(&manifest, plugin_json("alpha", &format!("3.0.{i}"))).unwrap();
    }
    assert_eq!(
        expect(next_action(&mut sub).await, &mut mirror),
        "updated alpha"
    );

    // 4. A change that leaves the tree as it was: nothing. The next action proves it.
    write(
        &plugins.join("alpha/README.md"),
        "notes that are not a component\n",
    );
    write(
        &plugins.join("gamma/.plugin/plugin.json"),
        &plugin_json("gamma", "1.0.0"),
    );
    assert_eq!(
        expect(next_action(&mut sub).await, &mut mirror),
        "updated gamma"
    );

    // 5. Renaming a plugin folder: the new one appears, the old one goes.
    std::fs::rename(plugins.join("gamma"), plugins.join("delta")).unwrap();
    let mut pair = vec![
        expect(next_action(&mut sub).await, &mut mirror),
        expect(next_action(&mut sub).await, &mut mirror),
    ];
    pair.sort();
    assert_eq!(
        pair,
        ["removed gamma", "updated gamma"],
        "delta keeps the manifest name gamma"
    );

    // 6. Deleting a plugin folder: one removal.
    std::fs::remove_dir_all(plugins.join("beta")).unwrap();
    assert_eq!(
        expect(next_action(&mut sub).await, &mut mirror),
        "removed beta"
    );

    // The mirror built from actions with the official reducers equals a fresh snapshot.
    let Watcher {
        client: other,
        mirror: fresh,
        ..
    } = Watcher::open_as(&proxy, "late-joiner").await;
    assert_eq!(mirror.customizations, fresh.customizations);
    assert_eq!(names(&fresh), ["alpha", "gamma"]);
    let alpha = match &fresh.customizations.as_ref().unwrap()[0] {
        Customization::Plugin(p) => p.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(alpha.version.as_deref(), Some("3.0.19"));
    assert_eq!(seen.len(), 7, "exactly one action per change: {seen:?}");
    client.shutdown().await;
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_manifest_degrades_its_plugin_and_fixing_it_recovers() {
    let dir = ScratchDir::new("watch-broken");
    let plugins = dir.path().join("plugins");
    write(
        &plugins.join("p/.plugin/plugin.json"),
        &plugin_json("p", "1.0.0"),
    );
    write(
        &plugins.join("q/.plugin/plugin.json"),
        &plugin_json("q", "1.0.0"),
    );
    let proxy = Proxy::start(&config(&plugins, ""));
    let Watcher {
        client, mut sub, ..
    } = Watcher::open_as(&proxy, "broken").await;

    write(
        &plugins.join("p/.mcp.json"),
        "{ \"mcpServers\": {\n  \"s\": { \"command\": \"x\" \"args\": [] }\n} }\n",
    );
    let envelope = next_action(&mut sub).await;
    let StateAction::SessionCustomizationUpdated(update) = &envelope.action else {
        panic!("{envelope:?}")
    };
    let v = serde_json::to_value(&update.customization).unwrap();
    assert_eq!(v["name"], "p");
    assert_eq!(v["load"]["kind"], "degraded");
    let message = v["load"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("p/.mcp.json:2:24: invalid JSON: Expected comma"),
        "{message}"
    );
    assert_eq!(v["children"], serde_json::json!([]));

    write(
        &plugins.join("p/.mcp.json"),
        "{ \"mcpServers\": {\n  \"s\": { \"command\": \"x\", \"args\": [] }\n} }\n",
    );
    let envelope = next_action(&mut sub).await;
    let StateAction::SessionCustomizationUpdated(update) = &envelope.action else {
        panic!("{envelope:?}")
    };
    let v = serde_json::to_value(&update.customization).unwrap();
    assert_eq!(v["load"]["kind"], "loaded");
    assert_eq!(v["children"][0]["name"], "s");
    assert_eq!(v["children"][0]["state"]["kind"], "starting");
    assert_eq!(
        v["children"][0]["range"],
        serde_json::json!({"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 37}})
    );
    // The sibling never changed, and no launch spec ever reached the wire.
    assert!(!serde_json::to_string(&v).unwrap().contains("\"command\""));
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn writable_directories_accept_resource_commands_only_inside() {
    let dir = ScratchDir::new("resources");
    let prompts = dir.path().join("prompts");
    let readonly = dir.path().join("rules");
    write(
        &prompts.join("review.prompt.md"),
        "---\ndescription: Review\n---\n",
    );
    write(&readonly.join("style.md"), "---\ndescription: Style\n---\n");
    write(&dir.path().join("secret.txt"), "do not read\n");
    let extra = format!(
        "[[directories]]\npath = {:?}\ncontents = \"prompt\"\nwritable = true\n\n[[directories]]\npath = {:?}\ncontents = \"rule\"\n",
        prompts.display().to_string(),
        readonly.display().to_string()
    );
    let proxy = Proxy::start(&format!("{extra}\n[limits]\nwatch_debounce_ms = 50\n"));
    let Watcher {
        client,
        mut sub,
        mirror: state,
    } = Watcher::open_as(&proxy, "writer").await;
    let dirs: Vec<serde_json::Value> = state
        .customizations
        .iter()
        .flatten()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert_eq!(dirs.len(), 2);
    assert_eq!(dirs[0]["type"], "directory");
    assert_eq!(dirs[0]["writable"], true);
    assert_eq!(dirs[1]["writable"], false);

    let uri = |p: &Path| ahp_proxy::discovery::uri::file_uri(p);
    let new_file = prompts.join("explain.prompt.md");
    client
        .resource_write(ResourceWriteParams {
            channel: String::new(),
            meta: None,
            uri: uri(&new_file),
            data: "---\ndescription: Explain the code\n---\nBody\n".into(),
            encoding: ContentEncoding::Utf8,
            content_type: None,
            create_only: Some(true),
            mode: None,
            if_match: None,
            position: None,
        })
        .await
        .expect("write inside the writable directory");
    // The watcher turns the new file into a new child.
    let envelope = next_action(&mut sub).await;
    let StateAction::SessionCustomizationUpdated(update) = &envelope.action else {
        panic!("{envelope:?}")
    };
    let v = serde_json::to_value(&update.customization).unwrap();
    assert_eq!(v["type"], "directory");
    let children: Vec<&str> = v["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(children, ["explain", "review"]);

    let read = client
        .resource_read(ResourceReadParams {
            channel: String::new(),
            meta: None,
            uri: uri(&new_file),
            encoding: None,
        })
        .await
        .expect("read");
    assert_eq!(read.data, "---\ndescription: Explain the code\n---\nBody\n");
    let listed = client
        .resource_list(ResourceListParams {
            channel: String::new(),
            meta: None,
            uri: uri(&prompts),
        })
        .await
        .expect("list");
    let listed: Vec<&str> = listed.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(listed, ["explain.prompt.md", "review.prompt.md"]);

    // Outside, escaping, or read-only: refused with a clear error, nothing touched.
    let escape = format!("{}/../secret.txt", uri(&prompts));
    for target in [
        escape,
        uri(&dir.path().join("secret.txt")),
        uri(&readonly.join("style.md")),
    ] {
        let error = client
            .resource_read(ResourceReadParams {
                channel: String::new(),
                meta: None,
                uri: target.clone(),
                encoding: None,
            })
            .await
            .expect_err("refused");
        let text = error.to_string();
        assert!(text.contains("-32009"), "{target}: {text}");
        assert!(
            text.contains("outside every writable directory"),
            "{target}: {text}"
        );
    }
    let error = client
        .resource_write(ResourceWriteParams {
            channel: String::new(),
            meta: None,
            uri: uri(&readonly.join("new.md")),
            data: "x".into(),
            encoding: ContentEncoding::Utf8,
            content_type: None,
            create_only: None,
            mode: None,
            if_match: None,
            position: None,
        })
        .await
        .expect_err("read-only directory");
    assert!(error.to_string().contains("-32009"), "{error}");
    assert!(!readonly.join("new.md").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("secret.txt")).unwrap(),
        "do not read\n"
    );

    client
        .resource_delete(ResourceDeleteParams {
            channel: String::new(),
            meta: None,
            uri: uri(&new_file),
            recursive: None,
        })
        .await
        .expect("delete");
    let envelope = next_action(&mut sub).await;
    let StateAction::SessionCustomizationUpdated(update) = &envelope.action else {
        panic!("{envelope:?}")
    };
    let v = serde_json::to_value(&update.customization).unwrap();
    assert_eq!(v["children"].as_array().unwrap().len(), 1);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_root_created_after_start_up_or_replaced_is_picked_up() {
    let dir = ScratchDir::new("watch-late-root");
    let plugins = dir.path().join("plugins");
    let proxy = Proxy::start(&config(&plugins, ""));
    let Watcher {
        client,
        mut sub,
        mirror,
    } = Watcher::open_as(&proxy, "late").await;
    assert_eq!(names(&mirror), Vec::<String>::new());

    // The root did not exist at start-up: creating it (and a plugin in it) is noticed.
    write(
        &plugins.join("late/.plugin/plugin.json"),
        &plugin_json("late", "1.0.0"),
    );
    assert_eq!(describe(&next_action(&mut sub).await), "updated late");

    // Replace the whole root (rm -rf + re-create, as a fresh checkout does).
    std::fs::remove_dir_all(&plugins).unwrap();
    assert_eq!(describe(&next_action(&mut sub).await), "removed late");
    write(
        &plugins.join("again/.plugin/plugin.json"),
        &plugin_json("again", "1.0.0"),
    );
    assert_eq!(describe(&next_action(&mut sub).await), "updated again");
    // And the new root is watched: an edit inside it still arrives.
    write(
        &plugins.join("again/skills/s/SKILL.md"),
        "---\ndescription: s\n---\n",
    );
    assert_eq!(describe(&next_action(&mut sub).await), "updated again");
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn link_loops_made_while_watched_are_reported_not_passed_over() {
    let dir = ScratchDir::new("watch-loops");
    let plugins = dir.path().join("plugins");
    write(
        &plugins.join("p/.plugin/plugin.json"),
        &plugin_json("p", "1.0.0"),
    );
    let proxy = Proxy::start(&config(&plugins, ""));
    let Watcher {
        client, mut sub, ..
    } = Watcher::open_as(&proxy, "loops").await;
    let updated = |envelope: ActionEnvelope| {
        let StateAction::SessionCustomizationUpdated(update) = &envelope.action else {
            panic!("{envelope:?}")
        };
        serde_json::to_value(&update.customization).unwrap()
    };

    // A plugin's .mcp.json becomes a link to itself: the plugin is degraded, naming it.
    std::os::unix::fs::symlink(".mcp.json", plugins.join("p/.mcp.json")).unwrap();
    let v = updated(next_action(&mut sub).await);
    assert_eq!(v["name"], "p");
    assert_eq!(v["load"]["kind"], "degraded", "{v}");
    assert_eq!(
        v["load"]["message"],
        "p/.mcp.json: symbolic link loop; ignored"
    );

    // A plugin folder appears that is a link to itself: an error container naming it.
    std::os::unix::fs::symlink("loop", plugins.join("loop")).unwrap();
    let v = updated(next_action(&mut sub).await);
    assert_eq!(v["name"], "loop");
    assert_eq!(v["load"]["kind"], "error", "{v}");
    assert_eq!(
        v["load"]["message"],
        "loop: symbolic link loop; nothing loaded"
    );
    assert_eq!(v["children"], serde_json::json!([]));

    // Removing the link removes the container.
    std::fs::remove_file(plugins.join("loop")).unwrap();
    assert_eq!(describe(&next_action(&mut sub).await), "removed loop");
    client.shutdown().await;
}
