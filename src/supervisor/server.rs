//! One server's lifecycle task: start (spawn + handshake + tools/list), watch it run, stop it,
//! restart it with backoff after a failure, and report every transition as a [`Status`].

use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::connections::{Connected, Connections};
use super::policy::{Jitter, RestartPolicy};
use super::process::{self, Spawned};
use super::stderr::{self, SharedTail};
use super::stdout;
use super::upstream::{self, ConnectError, Connection};
use super::{Desired, ServerEvent, Status};
use crate::config::SupervisorConfig;
use crate::spec::Launch;
use std::sync::Arc;

/// How often a running server's transport is checked (a stdio crash is seen at once through
/// its exit; this catches a server that hangs up but lives), and how often HTTP servers
/// are pinged.
const CLOSED_POLL: Duration = Duration::from_secs(1);
const HTTP_PING_EVERY: Duration = Duration::from_secs(15);
const HTTP_PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Why a server that wrote an overlong stdout line is stopped.
const TOO_LONG: &str =
    "wrote a stdout line longer than 16 MiB, which cannot be read as an MCP message; stopped";
/// After a failed handshake, how long to wait for the child's exit status.
const EXIT_STATUS_WAIT: Duration = Duration::from_secs(1);

/// Everything one lifecycle task needs besides its desired-state channel.
pub struct Task {
    /// The customization id.
    pub id: String,
    /// The declared name (logs).
    pub name: String,
    /// Timings.
    pub config: SupervisorConfig,
    /// Where transitions go.
    pub events: mpsc::Sender<ServerEvent>,
    /// Cancelled when the sidecar shuts down.
    pub shutdown: CancellationToken,
    /// Where a ready server's connection is published for the MCP front.
    pub connections: Arc<Connections>,
    /// The last `WWW-Authenticate` challenge the server sent (for a timer expiry).
    pub last_challenge: std::sync::Mutex<Option<String>>,
}

/// A started server: its connection and, for stdio, its process.
struct Running {
    connection: Connection,
    child: Option<tokio::process::Child>,
    tail: SharedTail,
    /// The task draining its stderr (stdio only): done once the pipe is closed.
    drained: Option<tokio::task::JoinHandle<()>>,
    /// What its stdout carried besides MCP (stdio only).
    stdout: Arc<stdout::Report>,
}

/// How a running server stopped running.
enum Ended {
    /// It died or hung up: the message says how.
    Failed(String),
    /// It broke the stdio framing (a line too long to be read): the message says how.
    Broken(String),
    /// We want something else now (stop, restart with a new spec, removal).
    Changed,
    /// Its token expired, or the server started refusing it: this status says how.
    AuthLost(Status),
    /// The sidecar is shutting down.
    Shutdown,
}

/// Whether a failure was a broken protocol (`protocol`) rather than an exit (`exited`).
enum EndedKind {
    Broken,
    Other,
}

/// Why a start did not produce a running server.
enum Interrupted {
    /// It failed; this status says how.
    Failed(Status),
    /// The desired state changed (or shutdown) first.
    Woke(Wake),
}

/// What the desired-state channel said while we waited.
enum Wake {
    Changed,
    Removed,
    Shutdown,
}

impl Task {
    /// Run until the server is removed or the sidecar shuts down.
    pub async fn run(self, mut desired: watch::Receiver<Desired>) {
        let policy = RestartPolicy::new(&self.config);
        let mut jitter = Jitter::new(seed(&self.id));
        let mut failures: u32 = 0;
        let mut epoch = desired.borrow().epoch;
        let mut launch_seen = desired.borrow().launch.clone();
        loop {
            let want = desired.borrow_and_update().clone();
            // A start request or a new launch spec deserves fresh attempts.
            if want.epoch != epoch || want.launch != launch_seen {
                epoch = want.epoch;
                launch_seen = want.launch.clone();
                failures = 0;
            }
            let wake = if !want.run {
                self.report(Status::Stopped).await;
                self.wait(&mut desired).await
            } else {
                match &want.launch {
                    Err(message) => {
                        self.report(Status::error("config", message.clone())).await;
                        self.wait(&mut desired).await
                    }
                    Ok(launch) => {
                        match self
                            .attempt(launch, &mut desired, &policy, &mut failures)
                            .await
                        {
                            Some(wake) => wake,
                            None => {
                                // Failed: back off (or give up) before the next attempt.
                                if policy.gives_up(failures) {
                                    self.wait(&mut desired).await
                                } else {
                                    let delay = policy.delay(failures, jitter.next_unit());
                                    tracing::debug!(server = %self.name, failures, delay_ms = delay.as_millis() as u64, "restarting after a delay");
                                    tokio::select! {
                                        _ = tokio::time::sleep(delay) => Wake::Changed,
                                        wake = self.wait(&mut desired) => wake,
                                    }
                                }
                            }
                        }
                    }
                }
            };
            match wake {
                Wake::Changed => continue,
                Wake::Removed => {
                    self.connections.clear_auth_status(&self.id);
                    let _ = self
                        .events
                        .send(ServerEvent {
                            id: self.id.clone(),
                            status: None,
                        })
                        .await;
                    return;
                }
                Wake::Shutdown => {
                    self.report(Status::Stopped).await;
                    return;
                }
            }
        }
    }

    /// One start and, if it comes up, its whole run. `None` means it failed (the error is
    /// already reported and counted); `Some` means the desired state changed first.
    async fn attempt(
        &self,
        launch: &Launch,
        desired: &mut watch::Receiver<Desired>,
        policy: &RestartPolicy,
        failures: &mut u32,
    ) -> Option<Wake> {
        self.report(Status::Starting).await;
        let bearer = desired.borrow().bearer.clone();
        let mut running = match self.start(launch, bearer.as_ref(), desired).await {
            Ok(running) => running,
            Err(Interrupted::Woke(wake)) => return Some(wake),
            Err(Interrupted::Failed(status @ Status::AuthRequired { .. })) => {
                // Retrying without credentials cannot help: wait to be asked again.
                self.report(status).await;
                return Some(self.wait(desired).await);
            }
            Err(Interrupted::Failed(status)) => {
                *failures = policy.count_failure(*failures, None);
                self.report(self.give_up_if_needed(status, policy, *failures))
                    .await;
                return None;
            }
        };
        let tools = running.connection.tool_count();
        // Subscribed before anyone can use the connection: no refusal is missed.
        let mut losses = self.connections.auth_losses();
        // Published before `ready` is reported, so a client that sees `ready` can use it.
        self.connections.insert(
            &self.id,
            Connected {
                name: self.name.clone(),
                peer: running.connection.service.peer().clone(),
                capabilities: running.connection.capabilities.clone(),
                instructions: running.connection.instructions.clone(),
                server_info: running.connection.server_info.clone(),
                offer: running.connection.offer.clone(),
            },
        );
        let served = super::Served::of(&running.connection.capabilities);
        self.report(Status::Ready { tools, served }).await;
        tracing::info!(server = %self.name, tools, "server ready");
        let up_since = Instant::now();
        let ended = self
            .watch_running(&mut running, launch, bearer.as_ref(), &mut losses, desired)
            .await;
        if let Ended::AuthLost(status) = &ended {
            self.connections.set_auth_status(&self.id, status.clone());
        }
        self.connections.remove(&self.id);
        let ended_kind = match &ended {
            Ended::Broken(_) => EndedKind::Broken,
            _ => EndedKind::Other,
        };
        match ended {
            Ended::AuthLost(status) => {
                // Shown before the (possibly slow) hang-up, so a client can authenticate at once.
                tracing::info!(server = %self.name, "authorization lost; waiting for a new token");
                self.report(status).await;
                self.stop(running).await;
                Some(self.wait(desired).await)
            }
            Ended::Failed(how) | Ended::Broken(how) => {
                let kind = if matches!(ended_kind, EndedKind::Broken) {
                    "protocol"
                } else {
                    "exited"
                };
                let uptime = up_since.elapsed();
                let noise = running.stdout.clone();
                let stderr_tail = self.stop(running).await;
                *failures = policy.count_failure(*failures, Some(uptime));
                tracing::warn!(server = %self.name, failures, "server failed: {how}");
                let status = Status::error(kind, with_tail(noise.explain(how), &stderr_tail));
                self.report(self.give_up_if_needed(status, policy, *failures))
                    .await;
                None
            }
            Ended::Changed => {
                self.stop(running).await;
                Some(Wake::Changed)
            }
            Ended::Shutdown => {
                self.stop(running).await;
                Some(Wake::Shutdown)
            }
        }
    }

    /// After the crash-loop limit the error says so, and the task waits to be asked.
    fn give_up_if_needed(&self, status: Status, policy: &RestartPolicy, failures: u32) -> Status {
        match status {
            Status::Error { kind, message } if policy.gives_up(failures) => Status::Error {
                kind: "crashLoop",
                message: format!(
                    "failed {failures} times in a row ({kind}); not restarting until a start is requested. Last failure: {message}"
                ),
            },
            other => other,
        }
    }

    /// Spawn (stdio) or dial (HTTP), then handshake within the start timeout. A change of
    /// the desired state or shutdown interrupts it (and stops what was started).
    async fn start(
        &self,
        launch: &Launch,
        bearer: Option<&super::Bearer>,
        desired: &mut watch::Receiver<Desired>,
    ) -> Result<Running, Interrupted> {
        let failed = |status| Interrupted::Failed(status);
        match launch {
            Launch::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let Spawned {
                    mut child,
                    stdin,
                    stdout,
                    stderr: pipe,
                } = process::spawn(command, args, env, cwd.as_deref())
                    .map_err(|m| failed(Status::error("spawn", m)))?;
                let tail = SharedTail::default();
                let mut drained =
                    tokio::spawn(stderr::drain(pipe, self.name.clone(), tail.clone()));
                let report = Arc::new(stdout::Report::default());
                let stdout = stdout::Watched::new(stdout, report.clone(), self.name.clone());
                let handshake = tokio::time::timeout(
                    self.config.start_timeout,
                    upstream::connect(self.upstream(), (stdout, stdin), None),
                );
                let outcome = tokio::select! {
                    outcome = handshake => outcome,
                    _ = report.broken() => {
                        process::terminate(&mut child, self.config.stop_grace).await;
                        let tail = stderr::last_lines(&tail, &mut drained).await;
                        let how = report.explain(TOO_LONG.into());
                        return Err(failed(Status::error("protocol", with_tail(how, &tail))));
                    }
                    wake = self.wait(desired) => {
                        process::terminate(&mut child, self.config.stop_grace).await;
                        return Err(Interrupted::Woke(wake));
                    }
                };
                match outcome {
                    Ok(Ok(connection)) => Ok(Running {
                        connection,
                        child: Some(child),
                        tail,
                        drained: Some(drained),
                        stdout: report,
                    }),
                    Ok(Err(error)) => {
                        let why = match error {
                            ConnectError::Failed(message) => message,
                            ConnectError::AuthRequired { .. } => {
                                "the server asked for authorization".into()
                            }
                        };
                        let exit = tokio::time::timeout(EXIT_STATUS_WAIT, child.wait()).await;
                        let how = match exit {
                            Ok(Ok(status)) => {
                                process::kill_group(&child, libc::SIGKILL);
                                format!(
                                    "{} before the MCP handshake completed",
                                    process::describe_exit(&status)
                                )
                            }
                            _ => {
                                process::terminate(&mut child, self.config.stop_grace).await;
                                why
                            }
                        };
                        let tail = stderr::last_lines(&tail, &mut drained).await;
                        let how = report.explain(how);
                        Err(failed(Status::error("startFailed", with_tail(how, &tail))))
                    }
                    Err(_) => {
                        process::terminate(&mut child, self.config.stop_grace).await;
                        let tail = stderr::last_lines(&tail, &mut drained).await;
                        let how = report.explain(format!(
                            "did not finish initialize and tools/list within {} ms",
                            self.config.start_timeout.as_millis()
                        ));
                        Err(failed(Status::error("timeout", with_tail(how, &tail))))
                    }
                }
            }
            Launch::Http { sse: true, .. } => Err(failed(Status::error(
                "unsupported",
                "the legacy HTTP+SSE transport is not supported; use streamable HTTP".into(),
            ))),
            Launch::Http {
                url,
                headers,
                sse: false,
            } => {
                let token = bearer.map(|b| b.token.as_str());
                let transport = upstream::http_transport(url, headers, token)
                    .map_err(|m| failed(Status::error("config", m)))?;
                let handshake = tokio::time::timeout(
                    self.config.start_timeout,
                    upstream::connect(self.upstream(), transport, Some(url)),
                );
                let outcome = tokio::select! {
                    outcome = handshake => outcome,
                    wake = self.wait(desired) => return Err(Interrupted::Woke(wake)),
                };
                let status = match outcome {
                    Ok(Ok(connection)) => {
                        return Ok(Running {
                            connection,
                            child: None,
                            tail: SharedTail::default(),
                            drained: None,
                            stdout: Arc::default(),
                        })
                    }
                    Ok(Err(ConnectError::AuthRequired {
                        challenge,
                        insufficient_scope,
                    })) => {
                        let reason = if insufficient_scope {
                            super::AuthReason::InsufficientScope
                        } else if bearer.is_some() {
                            // The token we sent was refused.
                            super::AuthReason::Expired
                        } else {
                            super::AuthReason::Required
                        };
                        self.auth_status(url, challenge, reason).await
                    }
                    Ok(Err(ConnectError::Failed(message))) => Status::error("startFailed", message),
                    Err(_) => Status::error(
                        "timeout",
                        format!(
                            "did not finish initialize and tools/list within {} ms",
                            self.config.start_timeout.as_millis()
                        ),
                    ),
                };
                Err(failed(status))
            }
        }
    }

    /// Wait while the server runs: until it fails, the wanted state changes, or shutdown.
    /// A change that keeps the same launch spec running (a start request on a ready server)
    /// is answered with `ready` again instead of a restart.
    async fn watch_running(
        &self,
        running: &mut Running,
        launch: &Launch,
        bearer: Option<&super::Bearer>,
        losses: &mut tokio::sync::broadcast::Receiver<super::connections::AuthLost>,
        desired: &mut watch::Receiver<Desired>,
    ) -> Ended {
        let peer = running.connection.service.peer().clone();
        let is_http = running.child.is_none();
        let url = match launch {
            Launch::Http { url, .. } => Some(url.as_str()),
            _ => None,
        };
        let expiry = async {
            match bearer.and_then(|b| b.expires_at) {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expiry);
        let id = self.id.clone();
        let refused = async move {
            loop {
                match losses.recv().await {
                    Ok(lost) if lost.server == id => {
                        return (lost.challenge, lost.insufficient_scope)
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        std::future::pending::<()>().await
                    }
                }
            }
        };
        tokio::pin!(refused);
        let health = async {
            let mut last_ping = Instant::now();
            loop {
                tokio::time::sleep(CLOSED_POLL).await;
                if peer.is_transport_closed() {
                    return Ok("closed the MCP connection".to_string());
                }
                if is_http && last_ping.elapsed() >= HTTP_PING_EVERY {
                    last_ping = Instant::now();
                    let ping = tokio::time::timeout(
                        HTTP_PING_TIMEOUT,
                        peer.send_request(rmcp::model::ClientRequest::PingRequest(
                            Default::default(),
                        )),
                    );
                    match ping.await {
                        Ok(Ok(_)) => {}
                        Ok(Err(error)) => {
                            if let Some(refused) = super::auth::auth_failure(&error) {
                                return Err(refused);
                            }
                            return Ok(upstream::scrub(
                                &format!("stopped answering: {error}"),
                                url,
                            ));
                        }
                        Err(_) => return Ok("did not answer ping within 10 s".to_string()),
                    }
                }
            }
        };
        tokio::pin!(health);
        let report = running.stdout.clone();
        loop {
            let exited = async {
                match running.child.as_mut() {
                    Some(child) => child.wait().await.ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                status = exited => {
                    return Ended::Failed(match status {
                        Some(status) => process::describe_exit(&status),
                        None => "ended".into(),
                    });
                }
                _ = report.broken() => return Ended::Broken(TOO_LONG.into()),
                how = &mut health => return match how {
                    Ok(how) => Ended::Failed(how),
                    Err((challenge, insufficient_scope)) => {
                        let reason = if insufficient_scope {
                            super::AuthReason::InsufficientScope
                        } else {
                            super::AuthReason::Expired
                        };
                        Ended::AuthLost(self.auth_status(url.unwrap_or_default(), Some(challenge), reason).await)
                    }
                },
                (challenge, insufficient_scope) = &mut refused => {
                    let reason = if insufficient_scope {
                        super::AuthReason::InsufficientScope
                    } else {
                        super::AuthReason::Expired
                    };
                    tracing::info!(server = %self.name, ?reason, "the server refused a request's authorization");
                    return Ended::AuthLost(self.auth_status(url.unwrap_or_default(), Some(challenge), reason).await);
                }
                _ = &mut expiry => {
                    tracing::info!(server = %self.name, "bearer token expired");
                    return Ended::AuthLost(self.auth_status(url.unwrap_or_default(), None, super::AuthReason::Expired).await);
                }
                _ = self.shutdown.cancelled() => return Ended::Shutdown,
                changed = desired.changed() => {
                    if changed.is_err() {
                        return Ended::Changed;
                    }
                    let now = desired.borrow().clone();
                    if now.run && now.launch.as_ref().ok() == Some(launch) && now.bearer.as_ref() == bearer {
                        let served = super::Served::of(&running.connection.capabilities);
                        self.report(Status::Ready { tools: running.connection.tool_count(), served }).await;
                        continue;
                    }
                    return Ended::Changed;
                }
            }
        }
    }

    /// Hang up and stop the process group. Returns the stderr tail.
    async fn stop(&self, running: Running) -> String {
        let Running {
            connection,
            child,
            tail,
            drained,
            stdout: _,
        } = running;
        if let Some(mut child) = child {
            process::terminate(&mut child, self.config.stop_grace).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), connection.service.cancel()).await;
        match drained {
            Some(mut drained) => stderr::last_lines(&tail, &mut drained).await,
            None => tail.lock().unwrap_or_else(|p| p.into_inner()).text(),
        }
    }

    /// `authRequired` for the server at `url`, with the metadata its challenge points at.
    /// Without a challenge (a timer expiry), the last one seen is used.
    async fn auth_status(
        &self,
        url: &str,
        challenge: Option<String>,
        reason: super::AuthReason,
    ) -> Status {
        let challenge = {
            let mut last = self
                .last_challenge
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match challenge {
                Some(challenge) => {
                    *last = Some(challenge.clone());
                    Some(challenge)
                }
                None => last.clone(),
            }
        };
        let metadata = super::auth::fetch_metadata(challenge.as_deref(), url).await;
        Status::AuthRequired {
            resource: public_resource(url),
            challenge,
            reason,
            metadata,
        }
    }

    fn upstream(&self) -> upstream::Upstream {
        upstream::Upstream::new(&self.id, &self.name, self.connections.clone())
    }

    /// Wait for the desired state to change.
    async fn wait(&self, desired: &mut watch::Receiver<Desired>) -> Wake {
        tokio::select! {
            changed = desired.changed() => match changed {
                Ok(()) => Wake::Changed,
                Err(_) => Wake::Removed,
            },
            _ = self.shutdown.cancelled() => Wake::Shutdown,
        }
    }

    async fn report(&self, status: Status) {
        tracing::debug!(server = %self.name, ?status, "status");
        self.connections
            .set_pending(&self.id, matches!(status, Status::Starting));
        // What `authenticate` may answer: the servers that show authRequired right now.
        match &status {
            Status::AuthRequired { .. } => {
                self.connections.set_auth_status(&self.id, status.clone())
            }
            _ => self.connections.clear_auth_status(&self.id),
        }
        let _ = self
            .events
            .send(ServerEvent {
                id: self.id.clone(),
                status: Some(status),
            })
            .await;
    }
}

fn with_tail(how: String, tail: &str) -> String {
    if tail.is_empty() {
        how
    } else {
        format!("{how}; last stderr lines:\n{tail}")
    }
}

/// The server URL without credentials, query or fragment: what may be shown as the
/// protected resource.
pub fn public_resource(url: &str) -> String {
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let url = &url[..cut];
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_string(),
    }
}

fn seed(id: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    hash ^ now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_resource_drops_credentials_query_and_fragment() {
        assert_eq!(
            public_resource("https://user:pw@mcp.example.com:8443/v1/mcp?key=s3cret#x"),
            "https://mcp.example.com:8443/v1/mcp"
        );
        assert_eq!(
            public_resource("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
    }
}
