//! `ahp-proxy check --start`: launch every enabled server with the real supervisor, wait
//! until each is ready or has failed once, note its tools, stop them all, and report a table
//! (or JSON). Nothing else of the proxy runs: no AHP, no MCP front.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::catalog::Catalog;
use crate::config::SupervisorConfig;
use crate::supervisor::connections::Connections;
use crate::supervisor::{Status, Supervisor};
use crate::untrusted::Escaped;

/// How one server's start went.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Its declared name.
    pub name: String,
    /// `ready`, `error`, `authRequired`, `disabled`, or `timeout` (it never settled).
    pub state: &'static str,
    /// The error (kind and message) or what authorization it needs.
    pub detail: Option<String>,
    /// Its tools' names, when it came up.
    pub tools: Vec<String>,
}

impl Outcome {
    /// Whether this counts as a failure (`check --start` then exits 1).
    pub fn failed(&self) -> bool {
        matches!(self.state, "error" | "authRequired" | "timeout")
    }
}

/// Start every server of `catalog` that needs no trust or is trusted in `trust`, wait for
/// each to settle, stop them; outcomes in catalog order (one awaiting trust says so).
pub async fn start_all(
    config: &SupervisorConfig,
    catalog: &Catalog,
    trust: Arc<crate::trust::TrustStore>,
) -> Vec<Outcome> {
    let connections = Connections::new();
    let awaiting: Vec<String> = (crate::trusting::asking(catalog, &trust).into_iter())
        .filter(crate::trusting::Asking::waits)
        .map(|server| server.id)
        .collect();
    let (supervisor, mut events) =
        Supervisor::spawn(config.clone(), connections.clone(), trust.clone());
    // A server awaiting trust is not started: there is nothing to wait for.
    let servers: Vec<(String, String, bool)> = catalog
        .servers()
        .map(|s| {
            (
                s.id.clone(),
                s.name.clone(),
                s.enabled && !awaiting.contains(&s.id),
            )
        })
        .collect();
    let _ = supervisor.commands().send(catalog.supervision()).await;
    let mut settled: BTreeMap<String, Outcome> = BTreeMap::new();
    let waiting = servers.iter().filter(|(_, _, enabled)| *enabled).count();
    // A start fails by itself at `start_timeout` (a slow stdio one at `slow_start_limit`);
    // this only guards against a stuck wait.
    let longest = config.start_timeout.max(config.slow_start_limit);
    let deadline = tokio::time::Instant::now() + longest + Duration::from_secs(10);
    while settled.len() < waiting {
        let event = match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(event)) => event,
            _ => break,
        };
        let Some((_, name, true)) = servers.iter().find(|(id, _, _)| *id == event.id) else {
            continue;
        };
        if settled.contains_key(&event.id) {
            continue;
        }
        let outcome = match event.status {
            Some(Status::Ready { .. }) => Outcome {
                name: name.clone(),
                state: "ready",
                detail: None,
                tools: connections
                    .get(&event.id)
                    .map(|c| c.offer().tools.iter().map(|t| t.key.clone()).collect())
                    .unwrap_or_default(),
            },
            Some(Status::Error(failure)) => Outcome {
                name: name.clone(),
                state: "error",
                detail: Some(format!("{}: {failure}", failure.kind())),
                tools: Vec::new(),
            },
            Some(Status::AuthRequired { resource, .. }) => Outcome {
                name: name.clone(),
                state: "authRequired",
                detail: Some(format!("needs a token for {resource}")),
                tools: Vec::new(),
            },
            _ => continue,
        };
        settled.insert(event.id.clone(), outcome);
    }
    supervisor.shutdown().await;
    servers
        .into_iter()
        .map(|(id, name, enabled)| match settled.remove(&id) {
            Some(outcome) => outcome,
            None if awaiting.contains(&id) => Outcome {
                detail: Some(format!(
                    "not started: trust it first (ahp-proxy trust {name})"
                )),
                name,
                state: "awaitingTrust",
                tools: Vec::new(),
            },
            None if !enabled => Outcome {
                name,
                state: "disabled",
                detail: None,
                tools: Vec::new(),
            },
            None => Outcome {
                name,
                state: "timeout",
                detail: Some("neither ready nor failed in time".into()),
                tools: Vec::new(),
            },
        })
        .collect()
}

/// The outcomes as a table: server, state, tools (or what went wrong).
pub fn render_text(outcomes: &[Outcome]) -> String {
    let width = outcomes
        .iter()
        .map(|o| o.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("server".len());
    let mut out = format!("{:<width$}  {:<12}  tools\n", "server", "state");
    for o in outcomes {
        let tools = if o.state == "ready" {
            format!("{}: {}", o.tools.len(), o.tools.join(", "))
        } else {
            "-".into()
        };
        // Tool names and errors come from the servers: escaped for the terminal.
        let name = Escaped(&o.name).to_string();
        let tools = Escaped(&tools);
        out.push_str(&format!("{name:<width$}  {:<12}  {tools}\n", o.state));
        for line in o.detail.iter().flat_map(|d| d.lines()) {
            out.push_str(&format!("{:<width$}    {}\n", "", Escaped(line)));
        }
    }
    let failed = outcomes.iter().filter(|o| o.failed()).count();
    out.push_str(&format!(
        "{} server{} started and stopped again; {failed} failed\n",
        outcomes.iter().filter(|o| o.state != "disabled").count(),
        if outcomes.len() == 1 { "" } else { "s" },
    ));
    out
}

/// The outcomes as JSON objects.
pub fn render_json(outcomes: &[Outcome]) -> Value {
    json!(outcomes
        .iter()
        .map(|o| json!({"name": o.name, "state": o.state, "detail": o.detail, "tools": o.tools}))
        .collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_tools_and_failures() {
        let outcomes = [
            Outcome {
                name: "notes".into(),
                state: "ready",
                detail: None,
                tools: vec!["add".into(), "list".into()],
            },
            Outcome {
                name: "broken".into(),
                state: "error",
                detail: Some("spawn: command not found: x".into()),
                tools: Vec::new(),
            },
        ];
        let text = render_text(&outcomes);
        assert!(
            text.contains("notes   ready         2: add, list\n"),
            "{text}"
        );
        assert!(
            text.contains("broken  error         -\n          spawn: command not found: x\n"),
            "{text}"
        );
        assert!(
            text.ends_with("2 servers started and stopped again; 1 failed\n"),
            "{text}"
        );
    }
}
