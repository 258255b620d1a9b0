//! Mixed traffic on both faces of a running proxy, for the soak: harness sessions listing and
//! calling on `/mcp`, AHP clients coming and going, servers restarted, files edited.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ahp::{Client, ClientConfig, SubscriptionEvent};
use ahp_types::state::SnapshotState;
use ahp_types::StateAction;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::time::Instant;

pub const SESSION: &str = "ahp-proxy:/default";
const HARNESS_CHAT: &str = "ahp-chat:/harness";
/// Servers the soak declares; `crashy` exits every 3 s and is restarted each time.
pub const SERVERS: [&str; 4] = ["a", "features", "crashy", "clock"];
/// Concurrent harness sessions and AHP client loops.
const HARNESSES: usize = 3;
const AHP_LOOPS: usize = 4;
/// Hang guard for any one request of the traffic (an error, counted, not a panic).
const REQUEST_GUARD: Duration = Duration::from_secs(30);

/// The files the soak's proxy watches.
pub struct Layout {
    plugins: PathBuf,
    manifest: PathBuf,
    examples: PathBuf,
}

impl Layout {
    /// Plugins and a manifest under `dir` whose servers run `examples` (the example-server
    /// binary); returns the layout and the proxy.toml text.
    pub fn create(dir: &Path, examples: &Path) -> (Self, String) {
        let layout = Self {
            plugins: dir.join("plugins"),
            manifest: dir.join("servers.mcp.json"),
            examples: examples.to_path_buf(),
        };
        layout.plugin(
            "alpha",
            "1.0.0",
            json!({"a": layout.server("echo", &[], 0)}),
        );
        layout.plugin(
            "beta",
            "1.0.0",
            json!({"features": layout.server("features", &[], 0)}),
        );
        layout.plugin(
            "gamma",
            "1.0.0",
            json!({"crashy": layout.server("echo", &["--exit-after-ms", "3000"], 0)}),
        );
        layout.write_manifest(0);
        let config = format!(
            "plugin_roots = [{:?}]\nmanifests = [{:?}]\n\
             [trust]\nmanifests = \"trusted\"\nplugins = \"trusted\"\n\
             [mcp]\nrequest_timeout_ms = 10000\n\
             [supervisor]\nrestart_delay_ms = 50\nrestart_delay_max_ms = 200\n\
             crash_loop_limit = 1000\nhealthy_after_ms = 1000\nstop_grace_ms = 500\n",
            layout.plugins.display().to_string(),
            layout.manifest.display().to_string()
        );
        (layout, config)
    }

    fn server(&self, kind: &str, extra: &[&str], round: u64) -> Value {
        let mut args = vec![kind];
        args.extend(extra);
        json!({"command": self.examples, "args": args, "env": {"ROUND": round.to_string()}})
    }

    fn plugin(&self, name: &str, version: &str, servers: Value) {
        let root = self.plugins.join(name);
        write(
            &root.join(".plugin/plugin.json"),
            &json!({"name": name, "version": version}).to_string(),
        );
        write(
            &root.join(".mcp.json"),
            &json!({ "mcpServers": servers }).to_string(),
        );
    }

    /// The manifest; a new `round` changes `clock`'s launch spec (a restart).
    fn write_manifest(&self, round: u64) {
        let servers = json!({"clock": self.server("clock", &[], round)});
        write(
            &self.manifest,
            &json!({ "mcpServers": servers }).to_string(),
        );
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let temp = path.with_extension("soak-tmp");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// What the traffic did, counted as it goes.
#[derive(Default)]
pub struct Counts {
    /// Harness sessions that connected.
    pub harness_sessions: AtomicU64,
    pub harness_requests: AtomicU64,
    /// Harness requests that failed (a server restarting under a call is expected).
    pub harness_errors: AtomicU64,
    /// AHP clients that went through their whole script.
    pub ahp_connections: AtomicU64,
    pub ahp_actions: AtomicU64,
    /// AHP clients or requests that failed.
    pub ahp_errors: AtomicU64,
    /// Stop + start pairs the host accepted.
    pub restarts: AtomicU64,
    pub edits: AtomicU64,
}

impl Counts {
    pub fn summary(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "{} harness sessions, {} MCP requests ({} failed), {} AHP connections, {} actions \
             received ({} AHP errors), {} restarts, {} edits",
            n(&self.harness_sessions),
            n(&self.harness_requests),
            n(&self.harness_errors),
            n(&self.ahp_connections),
            n(&self.ahp_actions),
            n(&self.ahp_errors),
            n(&self.restarts),
            n(&self.edits)
        )
    }
}

fn bump(counter: &AtomicU64) -> u64 {
    counter.fetch_add(1, Ordering::Relaxed)
}

async fn ahp_client(url: &str, client_id: &str) -> Result<Client, String> {
    let transport = ahp_ws::WebSocketTransport::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    let client = Client::connect(transport, ClientConfig::default())
        .await
        .map_err(|e| e.to_string())?;
    client
        .initialize(client_id.into(), vec!["1.0.0".into()], vec![])
        .await
        .map_err(|e| e.to_string())?;
    Ok(client)
}

/// Wait until every server in [`SERVERS`] is `ready`; returns their customization ids.
pub async fn wait_ready(url: &str, patience: Duration) -> HashMap<String, String> {
    let client = ahp_client(url, "soak-ready").await.expect("AHP client");
    let (result, mut sub) = client.subscribe(SESSION.into()).await.expect("subscribe");
    let SnapshotState::Session(session) = result.snapshot.expect("snapshot").state else {
        panic!("not a session");
    };
    let mut mirror = *session;
    let deadline = Instant::now() + patience;
    loop {
        let mut states = HashMap::new();
        let mut ids = HashMap::new();
        for c in mirror.customizations.iter().flatten() {
            let c = serde_json::to_value(c).unwrap();
            let children = c["children"].as_array().cloned().unwrap_or_default();
            for s in children.iter().chain(std::iter::once(&c)) {
                if s["type"] == "mcpServer" {
                    let name = s["name"].as_str().unwrap_or_default().to_string();
                    states.insert(name.clone(), s["state"]["kind"].clone());
                    ids.insert(name, s["id"].as_str().unwrap_or_default().to_string());
                }
            }
        }
        if SERVERS
            .iter()
            .all(|name| states.get(*name) == Some(&json!("ready")))
        {
            client.shutdown().await;
            return ids;
        }
        match tokio::time::timeout_at(deadline, sub.recv()).await {
            Ok(Some(SubscriptionEvent::Action(envelope))) => {
                let _ = ahp::reducers::apply_action_to_session(&mut mirror, &envelope.action);
            }
            Ok(Some(_)) => {}
            _ => panic!("servers not all ready: {states:?}"),
        }
    }
}

/// Run every kind of traffic until `until`; returns once all of it has stopped and every
/// client it opened is closed. `ids` are the servers' customization ids ([`wait_ready`]).
pub async fn run(
    ahp_url: &str,
    mcp_url: &str,
    layout: &Layout,
    ids: &HashMap<String, String>,
    until: Instant,
    counts: Arc<Counts>,
) {
    let mut tasks = Vec::new();
    for seed in 0..HARNESSES {
        tasks.push(tokio::spawn(harness(
            mcp_url.to_string(),
            seed,
            until,
            counts.clone(),
        )));
    }
    for seed in 0..AHP_LOOPS {
        tasks.push(tokio::spawn(ahp_loop(
            ahp_url.to_string(),
            seed,
            until,
            counts.clone(),
        )));
    }
    tasks.push(tokio::spawn(restarter(
        ahp_url.to_string(),
        ids.clone(),
        until,
        counts.clone(),
    )));
    editor(layout, until, &counts).await;
    for task in tasks {
        task.await.expect("traffic task");
    }
}

/// Harness sessions on `/mcp`, one after another: list, call, list prompts and resources,
/// then close (every fourth one just goes away, as a crashed harness would).
async fn harness(url: String, seed: usize, until: Instant, counts: Arc<Counts>) {
    let mut session = 0u64;
    while Instant::now() < until {
        session += 1;
        let transport = StreamableHttpClientTransport::from_uri(url.clone());
        let client = match tokio::time::timeout(REQUEST_GUARD, ().serve(transport)).await {
            Ok(Ok(client)) => client,
            _ => {
                bump(&counts.harness_errors);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        bump(&counts.harness_sessions);
        let peer = client.peer().clone();
        let calls = 20 + (seed as u64 * 7 + session * 13) % 30;
        for k in 0..calls {
            if Instant::now() >= until {
                break;
            }
            let ok = tokio::time::timeout(REQUEST_GUARD, async {
                let tools = peer.list_all_tools().await.map_err(|_| ())?;
                bump(&counts.harness_requests);
                let echo = tools
                    .iter()
                    .find(|t| t.name.ends_with("echo"))
                    .map(|t| t.name.to_string())
                    .ok_or(())?;
                let mut arguments = serde_json::Map::new();
                arguments.insert("text".into(), format!("soak {seed} {session} {k}").into());
                let call = CallToolRequestParams::new(echo).with_arguments(arguments);
                bump(&counts.harness_requests);
                peer.call_tool(call).await.map_err(|_| ())?;
                if k % 5 == 0 {
                    bump(&counts.harness_requests);
                    peer.list_all_prompts().await.map_err(|_| ())?;
                    bump(&counts.harness_requests);
                    peer.list_all_resources().await.map_err(|_| ())?;
                }
                Ok::<(), ()>(())
            })
            .await;
            if !matches!(ok, Ok(Ok(()))) {
                bump(&counts.harness_errors);
            }
        }
        if session.is_multiple_of(4) {
            drop(client);
        } else {
            let _ = tokio::time::timeout(REQUEST_GUARD, client.cancel()).await;
        }
    }
}

/// AHP clients, one after another: subscribe to the default session (and some to the
/// harness chat), create and dispose a session of their own, claim the active-client role,
/// change the title, follow for a while, then leave (every third one just drops).
async fn ahp_loop(url: String, seed: usize, until: Instant, counts: Arc<Counts>) {
    let mut k = 0u64;
    while Instant::now() < until {
        k += 1;
        let client_id = format!("soak-{seed}-{k}");
        let outcome = tokio::time::timeout(REQUEST_GUARD, async {
            let client = ahp_client(&url, &client_id).await?;
            let (_, mut sub) = client
                .subscribe(SESSION.into())
                .await
                .map_err(|e| e.to_string())?;
            let _chat = if k.is_multiple_of(2) {
                Some(
                    client
                        .subscribe(HARNESS_CHAT.into())
                        .await
                        .map_err(|e| e.to_string())?,
                )
            } else {
                None
            };
            let own = format!("ahp-proxy:/soak-{seed}-{k}");
            let _: Value = client
                .request("createSession", json!({"channel": own}))
                .await
                .map_err(|e| e.to_string())?;
            let _: Value = client
                .request("disposeSession", json!({"channel": own}))
                .await
                .map_err(|e| e.to_string())?;
            if k.is_multiple_of(3) {
                let claim = json!({"type": "session/activeClientSet",
                    "activeClient": {"clientId": client_id, "tools": []}});
                dispatch(&client, claim).await?;
            }
            let title = format!("soak {client_id}");
            dispatch(
                &client,
                json!({"type": "session/titleChanged", "title": title}),
            )
            .await?;
            // Follow until our own title comes back, then a little longer.
            let linger = Instant::now() + Duration::from_millis(100 + (k % 5) * 100);
            let mut echoed = false;
            while !echoed || Instant::now() < linger {
                let wait = if echoed {
                    linger
                } else {
                    Instant::now() + REQUEST_GUARD
                };
                match tokio::time::timeout_at(wait, sub.recv()).await {
                    Ok(Some(SubscriptionEvent::Action(envelope))) => {
                        bump(&counts.ahp_actions);
                        echoed |= matches!(&envelope.action,
                            StateAction::SessionTitleChanged(t) if t.title == title);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return Err("subscription closed".to_string()),
                    Err(_) if echoed => break,
                    Err(_) => return Err("no echo".to_string()),
                }
            }
            if k % 3 != 1 {
                client.shutdown().await;
            }
            Ok::<(), String>(())
        })
        .await;
        if matches!(outcome, Ok(Ok(()))) {
            bump(&counts.ahp_connections);
        } else {
            bump(&counts.ahp_errors);
        }
    }
}

async fn dispatch(client: &Client, action: Value) -> Result<(), String> {
    let action: StateAction = serde_json::from_value(action).map_err(|e| e.to_string())?;
    client
        .dispatch(SESSION.into(), action)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Stop and start `a` and `clock` in turn through one long-lived AHP client; at the end,
/// start everything, so the proxy ends with every server running.
async fn restarter(url: String, ids: HashMap<String, String>, until: Instant, counts: Arc<Counts>) {
    let Ok(client) = ahp_client(&url, "soak-restarter").await else {
        bump(&counts.ahp_errors);
        return;
    };
    let targets = ["a", "clock"];
    let mut k = 0;
    while Instant::now() < until {
        let id = &ids[targets[k % targets.len()]];
        k += 1;
        let stop = json!({"type": "session/mcpServerStopRequested", "id": id});
        let start = json!({"type": "session/mcpServerStartRequested", "id": id});
        let stopped = dispatch(&client, stop).await.is_ok();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = dispatch(&client, start).await.is_ok();
        if stopped && started {
            bump(&counts.restarts);
        } else {
            bump(&counts.ahp_errors);
        }
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    for id in ids.values() {
        let _ = dispatch(
            &client,
            json!({"type": "session/mcpServerStartRequested", "id": id}),
        )
        .await;
    }
    let _ = client.ping().await;
    client.shutdown().await;
}

/// Edits on disk every 700 ms: a plugin's version, a skill added and an old one removed,
/// and now and then the manifest (a restart of `clock`).
async fn editor(layout: &Layout, until: Instant, counts: &Counts) {
    let mut k = 0u64;
    while Instant::now() < until {
        k += 1;
        bump(&counts.edits);
        let alpha = layout.plugins.join("alpha/.plugin/plugin.json");
        write(
            &alpha,
            &json!({"name": "alpha", "version": format!("1.0.{k}")}).to_string(),
        );
        if k.is_multiple_of(3) {
            let skills = layout.plugins.join("beta/skills");
            write(
                &skills.join(format!("s{k}/SKILL.md")),
                "---\ndescription: soak\n---\n",
            );
            let _ = std::fs::remove_dir_all(skills.join(format!("s{}", k.saturating_sub(6))));
        }
        if k.is_multiple_of(10) {
            layout.write_manifest(k);
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
}
