//! `GET /healthz`'s answer, for service managers and containers: how many servers are in
//! each state, how many containers loaded, and how many harnesses are connected, with one
//! word for the whole (`ok`, or `degraded` when a server or a container is in trouble).
//! Pure: a session's customizations in, JSON out.

use std::collections::BTreeMap;

use ahp_types::state::{ChildCustomization, Customization, CustomizationLoadState, McpServerState};
use serde_json::json;

/// The summary of `customizations` (a session's, live states laid over) with `harnesses`
/// connected to the MCP front.
pub fn summary(customizations: &[Customization], harnesses: usize) -> serde_json::Value {
    let mut servers: BTreeMap<&'static str, usize> =
        ["ready", "starting", "authRequired", "error", "stopped"]
            .into_iter()
            .map(|k| (k, 0))
            .collect();
    let mut containers: BTreeMap<&'static str, usize> = ["loaded", "degraded", "error"]
        .into_iter()
        .map(|k| (k, 0))
        .collect();
    let mut count_server = |state: &McpServerState| {
        let key = match state {
            McpServerState::Ready(_) => "ready",
            McpServerState::Starting(_) => "starting",
            McpServerState::AuthRequired(_) => "authRequired",
            McpServerState::Error(_) => "error",
            McpServerState::Stopped(_) => "stopped",
            McpServerState::Unknown(_) => return,
        };
        *servers.entry(key).or_default() += 1;
    };
    for customization in customizations {
        let (load, children) = match customization {
            Customization::Plugin(p) => (p.load.as_ref(), p.children.as_deref()),
            Customization::Directory(d) => (d.load.as_ref(), d.children.as_deref()),
            Customization::McpServer(m) => {
                count_server(&m.state);
                continue;
            }
            Customization::Unknown(_) => continue,
        };
        let key = match load {
            Some(CustomizationLoadState::Degraded(_)) => "degraded",
            Some(CustomizationLoadState::Error(_)) => "error",
            _ => "loaded",
        };
        *containers.entry(key).or_default() += 1;
        for child in children.unwrap_or(&[]) {
            if let ChildCustomization::McpServer(m) = child {
                count_server(&m.state);
            }
        }
    }
    let trouble =
        servers["error"] + servers["authRequired"] + containers["error"] + containers["degraded"];
    json!({
        "status": if trouble == 0 { "ok" } else { "degraded" },
        "ready": servers["starting"] == 0,
        "servers": servers,
        "containers": containers,
        "harnesses": harnesses,
    })
}

/// The probes orchestrators use, on the MCP listener beside `/healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// `/healthz`: the summary, always 200.
    Health,
    /// `/readyz`: 200 once no enabled server is starting, 503 before and while draining.
    Ready,
    /// `/livez`: 200 while the proxy answers at all.
    Live,
}

impl Probe {
    /// The probe served at `path`, if any.
    pub fn at(path: &str) -> Option<Probe> {
        match path {
            "/healthz" => Some(Probe::Health),
            "/readyz" => Some(Probe::Ready),
            "/livez" => Some(Probe::Live),
            _ => None,
        }
    }

    /// The HTTP status for the [`summary`] `text` (`draining`: the proxy is stopping).
    pub fn status(self, text: &str, draining: bool) -> u16 {
        let ready = || {
            serde_json::from_str::<serde_json::Value>(text)
                .is_ok_and(|summary| summary["ready"] == true)
        };
        match self {
            Probe::Ready if draining || !ready() => 503,
            _ => 200,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_counted_and_trouble_degrades() {
        let tree: Vec<Customization> = serde_json::from_value(json!([
            {"type": "plugin", "id": "p", "uri": "file:///p", "name": "p", "load": {"kind": "loaded"},
             "children": [
                {"type": "mcpServer", "id": "a", "uri": "file:///p", "name": "a", "state": {"kind": "ready"}},
                {"type": "mcpServer", "id": "b", "uri": "file:///p", "name": "b", "state": {"kind": "starting"}}
             ]},
        ]))
        .expect("customizations");
        let ok = summary(&tree, 2);
        assert_eq!(ok["status"], "ok");
        assert_eq!(ok["ready"], false, "b is starting");
        let text = ok.to_string();
        assert_eq!(Probe::at("/readyz").unwrap().status(&text, false), 503);
        assert_eq!(Probe::Live.status(&text, true), 200);
        assert_eq!(Probe::Health.status(&text, true), 200);
        assert_eq!(Probe::at("/nope"), None);
        assert_eq!(ok["servers"]["ready"], 1);
        assert_eq!(ok["servers"]["starting"], 1);
        assert_eq!(ok["containers"]["loaded"], 1);
        assert_eq!(ok["harnesses"], 2);

        let broken: Vec<Customization> = serde_json::from_value(json!([
            {"type": "mcpServer", "id": "c", "uri": "file:///t", "name": "c",
             "state": {"kind": "error", "error": {"errorType": "spawn", "message": "x"}}},
        ]))
        .expect("customizations");
        let degraded = summary(&broken, 0);
        assert_eq!(degraded["status"], "degraded");
        assert_eq!(degraded["servers"]["error"], 1);
    }
}
