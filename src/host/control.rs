//! What clients ask of the servers, handed to the supervisor as desired state: recorded in
//! the supervisor's `Requests` under the host lock, as the action that asks is committed.
//!
//! So what clients are shown and what the supervisor is asked can never part: a request is
//! never queued where it could be dropped, and the supervisor catches up on the latest.

use tokio::sync::watch;

use super::{Core, Host};
use crate::supervisor::{Request, Requests};

impl Host {
    /// Record what clients ask (toggle, start, stop, tokens) here, for the supervisor.
    pub fn set_control(&self, control: watch::Sender<Requests>) {
        self.core().control = Some(control);
    }

    /// Stop recording (shutdown): client requests are no longer carried out.
    pub fn set_control_closed(&self) {
        self.core().control = None;
    }
}

impl Core {
    /// Ask `request` of the supervisor, if it still takes requests; whether it does.
    pub(super) fn ask(&mut self, request: Request) -> bool {
        match &self.control {
            Some(control) => {
                control.send_modify(|requests| requests.ask(request));
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ahp_types::commands::DispatchActionParams;
    use serde_json::json;

    use super::super::audience::Named;
    use super::super::Host;
    use crate::discovery::DeclaredServer;
    use crate::spec::Launch;
    use crate::supervisor::{Command, ServerEvent, Status, Supervisor};

    fn declared(name: &str, enabled: bool) -> Arc<DeclaredServer> {
        Arc::new(DeclaredServer {
            id: format!("file:///flood.json#mcp={name}"),
            name: name.into(),
            declared_at: "flood.json:1:1".into(),
            enabled,
            // Fails at once, with no process: whether it runs shows in its reports.
            launch: Ok(Launch::Stdio {
                command: "/nonexistent/ahp-proxy-flood-test".into(),
                args: Vec::new(),
                env: Default::default(),
                cwd: None,
            }),
            tools: Default::default(),
            container: None,
        })
    }

    fn dispatch(host: &Host, conn: u64, seq: i64, action: serde_json::Value) {
        let params = DispatchActionParams {
            channel: host.default_session(),
            client_seq: seq,
            action: serde_json::from_value(action).unwrap(),
        };
        let session = host.default_session();
        host.dispatch(conn, "c", params, &Named::own(&session));
    }

    /// The supervisor's next report, fed to the host.
    async fn next(
        host: &Host,
        events: &mut tokio::sync::mpsc::Receiver<ServerEvent>,
    ) -> ServerEvent {
        let event = tokio::time::timeout(std::time::Duration::from_secs(20), events.recv())
            .await
            .expect("the supervisor reports within the hang guard")
            .expect("the supervisor runs");
        host.server_event(event.clone());
        event
    }

    /// The next report about `id`, every report fed to the host on the way.
    async fn next_of(
        host: &Host,
        events: &mut tokio::sync::mpsc::Receiver<ServerEvent>,
        id: &str,
    ) -> Option<Status> {
        loop {
            let event = next(host, events).await;
            if event.id == id {
                return event.status;
            }
        }
    }

    /// Thousands of toggles dispatched while the supervisor cannot run (one thread, no
    /// await between them): every one is committed and shown, and the supervisor ends up
    /// doing what the last one says.
    #[tokio::test]
    async fn a_flood_of_toggles_ends_with_the_supervisor_doing_what_the_last_one_says() {
        let config = crate::config::Config::parse(
            "[supervisor]\nrestart_delay_ms = 3600000\n",
            "proxy.toml",
            std::path::Path::new("."),
        )
        .unwrap();
        let host = Host::new(&config);
        let conn = host.attach(true).id;
        let servers = vec![declared("x", true), declared("fence", false)];
        let shown: Vec<serde_json::Value> = servers
            .iter()
            .map(|s| {
                json!({"type": "mcpServer", "id": s.id, "uri": "file:///flood.json",
                    "name": s.name, "state": {"kind": "starting"}})
            })
            .collect();
        host.emit_to_sessions(
            &serde_json::from_value(
                json!({"type": "session/customizationsChanged", "customizations": shown}),
            )
            .unwrap(),
        );
        let connections = crate::supervisor::connections::Connections::new();
        // Nothing here asks for trust: a store that is never written.
        let trust = std::path::Path::new("/nonexistent/ahp-proxy-control-test");
        let trust = std::sync::Arc::new(crate::trust::TrustStore::open(trust));
        let (supervisor, mut events) =
            Supervisor::spawn(config.supervisor.clone(), connections, trust);
        host.set_control(supervisor.requests());
        supervisor
            .commands()
            .send(Command::Sync {
                servers: servers.clone(),
                asks_trust: Default::default(),
            })
            .await
            .unwrap();
        let (x, fence) = (servers[0].id.clone(), servers[1].id.clone());
        // x runs (and fails at once, waiting an hour before it tries again).
        assert_eq!(
            next_of(&host, &mut events, &x).await,
            Some(Status::Starting { slow: false })
        );
        assert!(matches!(
            next_of(&host, &mut events, &x).await,
            Some(Status::Error(_))
        ));

        let toggles: i64 = 3_000;
        for seq in 0..toggles {
            // Ends with `enabled: false`.
            let enabled = seq % 2 == 0;
            dispatch(
                &host,
                conn,
                seq + 1,
                json!({"type": "session/customizationToggled", "id": x,
                    "enablement": [{"kind": "session", "enabled": enabled}]}),
            );
        }
        let shown = host.snapshot(&host.default_session()).unwrap();
        let shown = serde_json::to_value(&shown.state).unwrap();
        assert_eq!(
            shown["customizations"][0]["enablement"],
            json!([{"kind": "session", "enabled": false}]),
            "what clients are shown"
        );
        // Asked after the flood: once it starts, the supervisor has taken everything before.
        dispatch(
            &host,
            conn,
            toggles + 1,
            json!({"type": "session/mcpServerStartRequested", "id": fence}),
        );
        // Both follow, in either order: the fence starts, x stops.
        let (mut fenced, mut x_now) = (false, None);
        while !fenced || x_now != Some(Status::Stopped) {
            let event = next(&host, &mut events).await;
            if event.id == fence {
                fenced |= event.status == Some(Status::Starting { slow: false });
            } else if event.id == x {
                x_now = event.status;
            }
        }
        supervisor.shutdown().await;
    }
}
