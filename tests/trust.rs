//! Trust in server definitions, end to end with the real binary: a manifest's server waits
//! (asked about in the harness chat) while proxy.toml's own runs; `ahp-proxy trust` starts
//! it, a change of its definition makes it wait again, an AHP client holding the approval key
//! trusts it from the chat, one without the key cannot, and `ahp-proxy untrust` stops it.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use ahp_types::state::ToolCallState;
use common::approver::Approver;
use common::{examples, proxy, server, Proxy, ScratchDir, Watcher};
use serde_json::{json, Value};

/// A manifest declaring `calc` (the features example) with `args`.
fn write_manifest(path: &Path, args: &[&str]) {
    let mut all = vec!["features"];
    all.extend(args);
    let text = json!({"mcpServers": {"calc": {"command": examples(), "args": all}}});
    std::fs::write(path, text.to_string()).expect("write manifest");
}

/// proxy.toml: the manifest (asked about, the default), and `echo` declared in it.
fn config(manifest: &Path) -> String {
    format!(
        "manifests = [{:?}]\n{}[trust]\nmanifests = \"ask\"\n",
        manifest.display().to_string(),
        server("echo", "echo", &[])
    )
}

/// `ahp-proxy <args>` on the running proxy's config and data folder.
fn cli(running: &Proxy, args: &[&str]) -> Output {
    Command::new(proxy())
        .arg("--config")
        .arg(running.runtime_dir().join("proxy.toml"))
        .args(args)
        .env("XDG_DATA_HOME", running.runtime_dir().join("data"))
        .output()
        .expect("run ahp-proxy")
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The trust question about `calc` pending in the harness chat: its turn and call id.
async fn question(approver: &mut Approver, not: &[String]) -> (String, String, String) {
    let (turn, state) = approver
        .until(|s| matches!(s, ToolCallState::PendingConfirmation(p) if !not.contains(&p.tool_call_id)))
        .await;
    let ToolCallState::PendingConfirmation(pending) = state else {
        unreachable!()
    };
    let title = serde_json::to_value(&pending.confirmation_title).unwrap();
    (turn, pending.tool_call_id, title.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifests_server_runs_once_trusted_and_waits_again_when_it_changes() {
    let dir = ScratchDir::new("trust-cli");
    let manifest = dir.path().join("project.mcp.json");
    write_manifest(&manifest, &[]);
    let proxy = Proxy::start(&config(&manifest));
    let mut watcher = Watcher::open(&proxy).await;
    let mut approver = Approver::join(&proxy, "ide-1").await;
    // proxy.toml's own server runs; the manifest's is asked about, with what it would run.
    watcher.until("echo", "ready", &mut Vec::new()).await;
    let (_, first, title) = question(&mut approver, &[]).await;
    assert!(
        title.contains("Trust and run MCP server") && title.contains("calc"),
        "{title}"
    );
    assert_eq!(watcher.server("calc")["state"]["kind"], "stopped");
    let listed = cli(&proxy, &["trust"]);
    let text = said(&listed);
    assert!(text.contains("calc (awaiting trust)"), "{text}");
    assert!(
        text.contains(&format!("runs: {} features", examples())),
        "{text}"
    );
    assert!(
        !text.contains("echo"),
        "proxy.toml's own server asks nothing: {text}"
    );
    let checked = said(&cli(&proxy, &["check"]));
    assert!(
        checked.contains("awaiting trust (1)\n  calc  declared at"),
        "{checked}"
    );
    let status = said(&cli(&proxy, &["status", "--url", &proxy.url]));
    assert!(
        status.contains("awaiting trust: calc  (ahp-proxy trust calc"),
        "{status}"
    );
    assert!(proxy.logs().contains("servers await trust before they run"));

    let trusted = cli(&proxy, &["trust", "calc"]);
    assert!(trusted.status.success(), "{}", said(&trusted));
    watcher.until("calc", "ready", &mut Vec::new()).await;

    // Another definition: it waits again, and is asked about again.
    write_manifest(&manifest, &["--changed"]);
    watcher.until("calc", "stopped", &mut Vec::new()).await;
    let (_, second, _) = question(&mut approver, std::slice::from_ref(&first)).await;
    assert_ne!(first, second);
    assert!(said(&cli(&proxy, &["trust"])).contains("calc (awaiting trust)"));
    let wrong = cli(&proxy, &["trust", "clac"]);
    assert!(!wrong.status.success());
    assert!(
        said(&wrong).contains("did you mean \"calc\""),
        "{}",
        said(&wrong)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_trusts_from_the_chat_an_observer_cannot_and_untrust_stops_it() {
    let dir = ScratchDir::new("trust-ahp");
    let manifest = dir.path().join("project.mcp.json");
    write_manifest(&manifest, &[]);
    let proxy = Proxy::start(&config(&manifest));
    let mut watcher = Watcher::open(&proxy).await;
    let mut approver = Approver::join(&proxy, "ide-1").await;
    let (turn, call, _) = question(&mut approver, &[]).await;

    // A client without the approval key is refused, and nothing starts.
    let mut observer = Approver::watch(&proxy, "observer").await;
    observer
        .answer(&turn, &call, json!({"approved": true}))
        .await;
    let refused = observer.refusal(&call).await;
    assert!(refused.contains("approval key"), "{refused}");
    assert_eq!(watcher.server("calc")["state"]["kind"], "stopped");

    approver
        .answer(&turn, &call, json!({"approved": true}))
        .await;
    watcher.until("calc", "ready", &mut Vec::new()).await;
    let listed = said(&cli(&proxy, &["trust"]));
    assert!(listed.contains("calc (trusted)"), "{listed}");
    // Kept on disk, 0600.
    use std::os::unix::fs::PermissionsExt;
    let kept = proxy.runtime_dir().join("data/ahp-proxy/trusted.json");
    let mode = std::fs::metadata(&kept)
        .expect("the decision is kept")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let text: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    assert_eq!(
        text["trusted"].as_object().map(|t| t.len()),
        Some(1),
        "{text}"
    );

    let untrusted = cli(&proxy, &["untrust", "calc"]);
    assert!(untrusted.status.success(), "{}", said(&untrusted));
    watcher.until("calc", "stopped", &mut Vec::new()).await;
}

/// A server whose definition cannot be used runs nothing: it is shown in `error` with why,
/// as without trust, and nobody is asked about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_that_cannot_be_used_shows_its_error_without_asking() {
    let dir = ScratchDir::new("trust-broken");
    let manifest = dir.path().join("project.mcp.json");
    let text = json!({"mcpServers": {"broken": {"command": "${AHP_PROXY_TEST_UNSET_VARIABLE}"}}});
    std::fs::write(&manifest, text.to_string()).expect("write manifest");
    let proxy = Proxy::start(&config(&manifest));
    let mut watcher = Watcher::open(&proxy).await;
    let state = watcher.until("broken", "error", &mut Vec::new()).await;
    assert!(
        state.to_string().contains("AHP_PROXY_TEST_UNSET_VARIABLE"),
        "{state}"
    );
    watcher.until("echo", "ready", &mut Vec::new()).await;
    let listed = said(&cli(&proxy, &["trust"]));
    assert!(!listed.contains("broken"), "{listed}");
}
