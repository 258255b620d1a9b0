//! `ahp-proxy start|stop|restart <server>` and `enable|disable <server or plugin>`: the
//! matching AHP action (`mcpServerStartRequested`, `mcpServerStopRequested`,
//! `customizationToggled`) dispatched on the default session, then each server it concerns
//! followed until it settles, and the outcome printed.

use std::time::Duration;

use ahp_types::state::McpServerState;
use ahp_types::StateAction;
use serde_json::json;

use super::tree::{self, Target};
use super::{Connection, Endpoint};

/// How long a server may take to settle before the command stops waiting for it.
const PATIENCE: Duration = Duration::from_secs(60);

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `mcpServerStartRequested` (also gives a crash-looped server fresh attempts).
    Start,
    /// `mcpServerStopRequested`.
    Stop,
    /// Stop, then start.
    Restart,
    /// `customizationToggled` on, for a server or a plugin.
    Enable,
    /// `customizationToggled` off, for a server or a plugin.
    Disable,
}

/// Where a server should end up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Goal {
    Running,
    Stopped,
}

/// Run `verb` on `name`. Exit status 0 when every server ended as asked, 1 when one ended
/// in `error` or `authRequired` (or did not settle), 2 for a name that means nothing (or
/// several things) and a proxy that cannot be reached.
pub async fn run(endpoint: &Endpoint, verb: Verb, name: &str) -> u8 {
    let mut connection = match Connection::open(endpoint).await {
        Ok(connection) => connection,
        Err(error) => {
            eprintln!("ahp-proxy: {error}");
            return 2;
        }
    };
    let outcome = match pick(&connection, verb, name) {
        Ok(target) => steer(&mut connection, verb, &target).await,
        Err(message) => {
            eprintln!("ahp-proxy: {message}");
            2
        }
    };
    connection.close().await;
    outcome
}

/// The one thing `name` means for `verb`.
fn pick(connection: &Connection, verb: Verb, name: &str) -> Result<Target, String> {
    let found = tree::find(connection.customizations(), name);
    let target = match found.as_slice() {
        [] => {
            return Err(format!(
                "nothing named {name:?} at {} (`ahp-proxy status` lists every server and plugin)",
                connection.url
            ))
        }
        [one] => one.clone(),
        many => {
            let ids: Vec<String> = many
                .iter()
                .map(|t| match t {
                    Target::Server { id, .. } | Target::Container { id, .. } => format!("  {id}"),
                })
                .collect();
            return Err(format!(
                "{name:?} names {} things; say `<plugin>/<server>` or give an id:\n{}",
                many.len(),
                ids.join("\n")
            ));
        }
    };
    if matches!(target, Target::Container { .. })
        && matches!(verb, Verb::Start | Verb::Stop | Verb::Restart)
    {
        return Err(format!(
            "{name:?} is a plugin: start, stop and restart take a server (enable and disable take a plugin too)"
        ));
    }
    Ok(target)
}

async fn steer(connection: &mut Connection, verb: Verb, target: &Target) -> u8 {
    let (id, servers) = match target {
        Target::Server { id, .. } => (id.clone(), vec![id.clone()]),
        Target::Container { id, servers, .. } => (id.clone(), servers.clone()),
    };
    let steps: &[(&str, Goal)] = match verb {
        Verb::Start => &[("session/mcpServerStartRequested", Goal::Running)],
        Verb::Stop => &[("session/mcpServerStopRequested", Goal::Stopped)],
        Verb::Restart => &[
            ("session/mcpServerStopRequested", Goal::Stopped),
            ("session/mcpServerStartRequested", Goal::Running),
        ],
        Verb::Enable => &[("session/customizationToggled", Goal::Running)],
        Verb::Disable => &[("session/customizationToggled", Goal::Stopped)],
    };
    let mut status = 0;
    for (kind, goal) in steps {
        let mut action = json!({"type": kind, "id": id});
        if *kind == "session/customizationToggled" {
            action["enablement"] = json!([{"kind": "session", "enabled": *goal == Goal::Running}]);
        }
        let action: StateAction = match serde_json::from_value(action) {
            Ok(action) => action,
            Err(error) => {
                eprintln!("ahp-proxy: cannot build {kind}: {error}");
                return 2;
            }
        };
        status = match settle(connection, action, &servers, *goal).await {
            Ok(status) => status,
            Err(message) => {
                eprintln!("ahp-proxy: {message}");
                return 1;
            }
        };
    }
    status
}

/// Dispatch `action`, wait for its echo, then for each of `servers` to reach `goal` (or
/// fail); print where each ended. The status: 0 when all reached it.
async fn settle(
    connection: &mut Connection,
    action: StateAction,
    servers: &[String],
    goal: Goal,
) -> Result<u8, String> {
    let seq = connection.dispatch(action).await?;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    // The echo first: a refusal ends it here.
    loop {
        let envelope = tokio::time::timeout_at(deadline, connection.next())
            .await
            .map_err(|_| "the proxy did not answer the request".to_string())?
            .ok_or("the proxy closed the connection")?;
        match connection.echo_of(&envelope, seq) {
            Some(Ok(())) => break,
            Some(Err(reason)) => return Err(format!("the proxy refused: {reason}")),
            None => continue,
        }
    }
    // A start may first show the old state (an error) before `starting`: only a settled
    // state reached after `starting` (or `ready` itself) counts.
    let mut moved: Vec<String> = Vec::new();
    loop {
        let states = current(connection, servers);
        for (id, state) in &states {
            if matches!(state, Some(McpServerState::Starting(_))) && !moved.contains(id) {
                moved.push(id.clone());
            }
        }
        let settled = states.iter().all(|(id, state)| match (goal, state) {
            (_, None) => true,
            (Goal::Stopped, Some(s)) => matches!(s, McpServerState::Stopped(_)),
            (Goal::Running, Some(McpServerState::Ready(_))) => true,
            (Goal::Running, Some(McpServerState::Error(_) | McpServerState::AuthRequired(_))) => {
                moved.contains(id)
            }
            (Goal::Running, Some(_)) => false,
        });
        if settled {
            break;
        }
        match tokio::time::timeout_at(deadline, connection.next()).await {
            Ok(Some(_)) => {}
            Ok(None) => return Err("the proxy closed the connection".into()),
            Err(_) => break,
        }
    }
    let mut status = 0;
    let rows = tree::servers(connection.customizations());
    for id in servers {
        let Some(row) = rows.iter().find(|r| r.server.id == *id) else {
            println!("{id}  gone");
            continue;
        };
        let (word, detail) = tree::state_words(&row.server.state);
        let reached = match goal {
            Goal::Running => word == "ready",
            Goal::Stopped => word == "stopped",
        };
        if !reached {
            status = 1;
        }
        println!("{}  {word}", row.server.name);
        for line in detail.iter().flat_map(|d| d.lines()) {
            println!("    {line}");
        }
    }
    Ok(status)
}

/// The current state of each of `servers` (`None` when it is gone).
fn current(connection: &Connection, servers: &[String]) -> Vec<(String, Option<McpServerState>)> {
    let rows = tree::servers(connection.customizations());
    servers
        .iter()
        .map(|id| {
            let state = rows
                .iter()
                .find(|r| r.server.id == *id)
                .map(|r| r.server.state.clone());
            (id.clone(), state)
        })
        .collect()
}
