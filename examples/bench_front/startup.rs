//! Start-up of many stdio servers (issue 34): `ahp-proxy serve` spawned with N echo
//! servers declared, timed until an official AHP client has seen all N `ready`, beside the
//! servers' own start-up in this process (spawn, `initialize`, `tools/list`), with rmcp's
//! client (the baseline) and with the raw-lines client, in interleaved runs.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ahp::{Client, ClientConfig, SessionSubscription, SubscriptionEvent};
use ahp_types::state::{Customization, McpServerState, SessionState, SnapshotState};
use rmcp::ServiceExt;
use tokio::process::Command;

use crate::process::Reaped;
use crate::stdio_client::StdioClient;

/// The figures of every run, ms.
#[derive(Debug, Default)]
pub struct Startup {
    pub servers: usize,
    /// The servers alone, with rmcp's client (spawn + handshake + `tools/list`).
    pub direct_rmcp: Vec<f64>,
    /// The same with the raw-lines client.
    pub direct_raw: Vec<f64>,
    /// Spawning `ahp-proxy` → an AHP client has seen every server `ready`.
    pub proxied: Vec<f64>,
}

/// `runs` interleaved runs of each, `servers` echo servers each.
pub async fn measure(
    proxy: &Path,
    examples: &Path,
    dir: &Path,
    servers: usize,
    runs: usize,
) -> Result<Startup, String> {
    let config = dir.join(format!("startup-{servers}.toml"));
    let mut text = String::new();
    for i in 0..servers {
        text.push_str(&format!(
            "[servers.s{i:03}]\ncommand = {:?}\nargs = [\"echo\"]\n",
            examples.display().to_string()
        ));
    }
    std::fs::write(&config, text).map_err(|e| format!("write {}: {e}", config.display()))?;
    let mut startup = Startup {
        servers,
        ..Startup::default()
    };
    for _ in 0..runs {
        startup
            .direct_rmcp
            .push(direct(examples, servers, true).await?);
        startup
            .direct_raw
            .push(direct(examples, servers, false).await?);
        startup
            .proxied
            .push(proxied(proxy, &config, servers).await?);
    }
    Ok(startup)
}

/// Spawn `servers` echo servers here and handshake + list with each, all at once; ms until
/// the last has answered `tools/list`.
async fn direct(examples: &Path, servers: usize, rmcp: bool) -> Result<f64, String> {
    let started = Instant::now();
    let mut children = Vec::new();
    let mut handshakes = Vec::new();
    for _ in 0..servers {
        let mut child = Command::new(examples)
            .arg("echo")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the echo: {e}"))?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err("the echo has no pipes".into());
        };
        children.push(child);
        handshakes.push(tokio::spawn(async move {
            if rmcp {
                let service = ().serve((stdout, stdin)).await.map_err(|e| e.to_string())?;
                service
                    .peer()
                    .list_all_tools()
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(Some(service))
            } else {
                let mut client = StdioClient::connect((stdout, stdin)).await?;
                client.exchange("tools/list", "{}").await?;
                Ok(None)
            }
        }));
    }
    let mut services = Vec::new();
    for handshake in handshakes {
        let service = handshake
            .await
            .map_err(|e| format!("a handshake's task failed: {e}"))??;
        services.push(service);
    }
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    for service in services.into_iter().flatten() {
        let _ = service.cancel().await;
    }
    for mut child in children {
        let _ = child.kill().await;
    }
    Ok(elapsed)
}

/// Spawn `ahp-proxy serve` on `config`; ms until an AHP client following the default
/// session has seen `servers` servers `ready` (the client connects once the proxy says
/// where: that wait is inside the figure, as for a user).
async fn proxied(proxy: &Path, config: &Path, servers: usize) -> Result<f64, String> {
    let started = Instant::now();
    let mut process = Reaped::spawn(
        "ahp-proxy serve (start-up)",
        Command::new(proxy)
            .args(["--log-format", "json", "--config"])
            .arg(config)
            .args(crate::common::SERVE_ON_FREE_PORTS),
        false,
    )?;
    let url = process
        .wait_for_log("AHP endpoint listening", "url")
        .await?;
    let outcome = tokio::time::timeout(Duration::from_secs(60), all_ready(&url, servers)).await;
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    process.finish(Duration::from_millis(0)).await;
    match outcome {
        Ok(Ok(())) => Ok(elapsed),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(format!("not all {servers} servers were ready within 60 s")),
    }
}

/// Follow the default session at `url` until `servers` servers are `ready`.
async fn all_ready(url: &str, servers: usize) -> Result<(), String> {
    let transport = ahp_ws::WebSocketTransport::connect(url)
        .await
        .map_err(|e| format!("AHP connect: {e}"))?;
    let client = Client::connect(transport, ClientConfig::default())
        .await
        .map_err(|e| format!("AHP client: {e}"))?;
    client
        .initialize("bench-startup".into(), vec!["1.0.0".into()], vec![])
        .await
        .map_err(|e| format!("AHP initialize: {e}"))?;
    let (first, mut subscription) = client
        .subscribe("ahp-proxy:/default".into())
        .await
        .map_err(|e| format!("AHP subscribe: {e}"))?;
    let mut session = match first.snapshot.map(|s| s.state) {
        Some(SnapshotState::Session(state)) => *state,
        _ => return Err("the default session has no snapshot".into()),
    };
    while ready(&session) < servers {
        let action = next_action(&mut subscription).await?;
        let _ = ahp::reducers::apply_action_to_session(&mut session, &action);
    }
    client.shutdown().await;
    Ok(())
}

async fn next_action(
    subscription: &mut SessionSubscription,
) -> Result<ahp_types::StateAction, String> {
    loop {
        match subscription.recv().await {
            Some(SubscriptionEvent::Action(envelope)) => return Ok(envelope.action),
            Some(_) => continue,
            None => return Err("the session's subscription ended".into()),
        }
    }
}

/// How many servers of the session are `ready` (a match on the typed state: the client
/// must stay light, its own cost is inside the figure).
fn ready(session: &SessionState) -> usize {
    session
        .customizations
        .iter()
        .flatten()
        .filter(|c| {
            matches!(c, Customization::McpServer(server)
                if matches!(server.state, McpServerState::Ready(_)))
        })
        .count()
}
