//! `ahp-proxy start|stop|restart <server>` and `enable|disable <server or plugin>`: the
//! matching AHP action (`mcpServerStartRequested`, `mcpServerStopRequested`,
//! `customizationToggled`) dispatched on the default session, then each server it concerns
//! followed until it settles, and the outcome printed.

use std::time::Duration;

use ahp_types::actions::{
    SessionCustomizationToggledAction, SessionMcpServerStartRequestedAction,
    SessionMcpServerStopRequestedAction,
};
use ahp_types::state::{CustomizationEnablement, McpServerState};
use ahp_types::StateAction;

use super::error::{ControlError, Step, STEP_DEADLINE};
use super::tree::{self, Target};
use super::{Connection, Endpoint};
use crate::untrusted::Escaped;

/// The actions, by their wire type.
const START: &str = "session/mcpServerStartRequested";
const STOP: &str = "session/mcpServerStopRequested";
const TOGGLE: &str = "session/customizationToggled";

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
/// in `error` or `authRequired` (or did not settle) or the proxy refused, 2 for a name that
/// means nothing (or several things) and a proxy that cannot be reached or does not answer.
pub async fn run(endpoint: &Endpoint, verb: Verb, name: &str) -> u8 {
    let outcome = match Connection::open(endpoint).await {
        Ok(mut connection) => {
            let outcome = match pick(&connection, verb, name) {
                Ok(target) => steer(&mut connection, verb, &target).await,
                Err(error) => Err(error),
            };
            connection.close().await;
            outcome
        }
        Err(error) => Err(error),
    };
    outcome.unwrap_or_else(|error| {
        eprintln!("ahp-proxy: {error}");
        error.exit_status()
    })
}

/// The one thing `name` means for `verb`.
fn pick(connection: &Connection, verb: Verb, name: &str) -> Result<Target, ControlError> {
    let customizations = connection.customizations();
    let found = tree::find(customizations, name);
    let target = match found.as_slice() {
        [] => {
            let names = tree::names(customizations);
            return Err(ControlError::NotFound {
                name: name.to_string(),
                url: connection.url.clone(),
                guess: crate::guess::nearest(name, names.iter().map(String::as_str))
                    .map(str::to_string),
            });
        }
        [one] => one.clone(),
        many => {
            return Err(ControlError::Ambiguous {
                name: name.to_string(),
                ids: many
                    .iter()
                    .map(|t| match t {
                        Target::Server { id, .. } | Target::Container { id, .. } => id.clone(),
                    })
                    .collect(),
            })
        }
    };
    if matches!(target, Target::Container { .. })
        && matches!(verb, Verb::Start | Verb::Stop | Verb::Restart)
    {
        return Err(ControlError::NotAServer {
            name: name.to_string(),
        });
    }
    Ok(target)
}

async fn steer(
    connection: &mut Connection,
    verb: Verb,
    target: &Target,
) -> Result<u8, ControlError> {
    let (id, servers) = match target {
        Target::Server { id, .. } => (id.clone(), vec![id.clone()]),
        Target::Container { id, servers, .. } => (id.clone(), servers.clone()),
    };
    let steps: &[(&str, Goal)] = match verb {
        Verb::Start => &[(START, Goal::Running)],
        Verb::Stop => &[(STOP, Goal::Stopped)],
        Verb::Restart => &[(STOP, Goal::Stopped), (START, Goal::Running)],
        Verb::Enable => &[(TOGGLE, Goal::Running)],
        Verb::Disable => &[(TOGGLE, Goal::Stopped)],
    };
    let mut status = 0;
    for (kind, goal) in steps {
        let id = id.clone();
        let action =
            match *kind {
                START => StateAction::SessionMcpServerStartRequested(
                    SessionMcpServerStartRequestedAction { id },
                ),
                STOP => StateAction::SessionMcpServerStopRequested(
                    SessionMcpServerStopRequestedAction { id },
                ),
                _ => StateAction::SessionCustomizationToggled(SessionCustomizationToggledAction {
                    id,
                    enablement: vec![CustomizationEnablement::Session {
                        enabled: *goal == Goal::Running,
                    }],
                }),
            };
        status = settle(connection, action, Step::Request(kind), &servers, *goal).await?;
    }
    Ok(status)
}

/// Dispatch `action`, wait for its echo (at most a step's deadline), then for each of
/// `servers` to reach `goal` (or fail, at most [`PATIENCE`]); print where each ended. The
/// status: 0 when all reached it.
async fn settle(
    connection: &mut Connection,
    action: StateAction,
    step: Step,
    servers: &[String],
    goal: Goal,
) -> Result<u8, ControlError> {
    let seq = connection.dispatch(action, step).await?;
    let url = connection.url.clone();
    let closed = || ControlError::Closed { url: url.clone() };
    // The echo first: a refusal ends it here.
    let echo = tokio::time::Instant::now() + STEP_DEADLINE;
    loop {
        let envelope = tokio::time::timeout_at(echo, connection.next())
            .await
            .map_err(|_| ControlError::TimedOut {
                url: url.clone(),
                step,
                after: STEP_DEADLINE,
            })?
            .ok_or_else(closed)?;
        match connection.echo_of(&envelope, seq) {
            Some(Ok(())) => break,
            Some(Err(refusal)) => return Err(refusal),
            None => continue,
        }
    }
    // A start may first show the old state (an error) before `starting`: only a settled
    // state reached after `starting` (or `ready` itself) counts.
    let deadline = tokio::time::Instant::now() + PATIENCE;
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
            Ok(None) => return Err(closed()),
            Err(_) => break,
        }
    }
    let mut status = 0;
    let rows = tree::servers(connection.customizations());
    for id in servers {
        let Some(row) = rows.iter().find(|r| r.server.id == *id) else {
            println!("{}  gone", Escaped(id));
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
        println!("{}  {word}", Escaped(&row.server.name));
        for line in detail.iter().flat_map(|d| d.lines()) {
            println!("    {}", Escaped(line));
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
