//! Bringing a server up: spawn a stdio child or dial a streamable HTTP URL, then the MCP
//! handshake within the start timeout; a change of the desired state interrupts it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::process::{self, Spawned};
use super::server::{Task, Wake};
use super::stderr::{self, SharedTail};
use super::stdout;
use super::upstream::{self, ConnectError, Connection};
use super::{AuthReason, Bearer, Desired, Failure, Status};
use crate::spec::Launch;

/// Why a server that wrote an overlong stdout line is stopped.
pub(super) const TOO_LONG: &str =
    "wrote a stdout line longer than 16 MiB, which cannot be read as an MCP message; stopped";
/// After a failed handshake, how long to wait for the child's exit status.
const EXIT_STATUS_WAIT: Duration = Duration::from_secs(1);

/// A started server: its connection and, for stdio, its process.
pub(super) struct Running {
    pub connection: Connection,
    pub child: Option<tokio::process::Child>,
    pub tail: SharedTail,
    /// The task draining its stderr (stdio only): done once the pipe is closed.
    pub drained: Option<tokio::task::JoinHandle<()>>,
    /// What its stdout carried besides MCP (stdio only).
    pub stdout: Arc<stdout::Report>,
}

/// Why a start did not produce a running server.
pub(super) enum Interrupted {
    /// It failed.
    Failed(Failure),
    /// It wants credentials first: this `authRequired` status says which.
    AuthRequired(Status),
    /// The desired state changed (or shutdown) first.
    Woke(Wake),
}

impl Task {
    /// Spawn (stdio) or dial (HTTP), then handshake within the start timeout. A change of
    /// the desired state or shutdown interrupts it (and stops what was started).
    pub(super) async fn start(
        &self,
        launch: &Launch,
        bearer: Option<&Bearer>,
        desired: &mut watch::Receiver<Desired>,
    ) -> Result<Running, Interrupted> {
        match launch {
            Launch::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                self.start_stdio(command, args, env, cwd.as_deref(), desired)
                    .await
            }
            Launch::Http { sse: true, .. } => Err(Interrupted::Failed(Failure::Unsupported)),
            Launch::Http {
                url,
                headers,
                sse: false,
            } => self.start_http(url, headers, bearer, desired).await,
        }
    }

    async fn start_stdio(
        &self,
        command: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
        cwd: Option<&Path>,
        desired: &mut watch::Receiver<Desired>,
    ) -> Result<Running, Interrupted> {
        let Spawned {
            mut child,
            stdin,
            stdout,
            stderr: pipe,
        } = process::spawn(command, args, env, cwd)
            .map_err(|e| Interrupted::Failed(Failure::Spawn(e.to_string())))?;
        let tail = SharedTail::default();
        let mut drained = tokio::spawn(stderr::drain(pipe, self.name.clone(), tail.clone()));
        let report = Arc::new(stdout::Report::default());
        let stdout = stdout::Watched::new(stdout, report.clone(), self.name.clone());
        let handshake = tokio::time::timeout(
            self.config.start_timeout,
            upstream::connect(self.upstream(), (stdout, stdin), None),
        );
        let grace = self.config.stop_grace;
        // What kind of failure, and how it happened (before the stdout noise and stderr tail).
        let (failure, how): (fn(String) -> Failure, String) = tokio::select! {
            outcome = handshake => match outcome {
                Ok(Ok(connection)) => {
                    return Ok(Running {
                        connection,
                        child: Some(child),
                        tail,
                        drained: Some(drained),
                        stdout: report,
                    })
                }
                Ok(Err(error)) => (Failure::StartFailed, self.no_handshake(&mut child, error).await),
                Err(_) => {
                    process::terminate(&mut child, grace).await;
                    (Failure::Timeout, self.too_slow())
                }
            },
            _ = report.broken() => {
                process::terminate(&mut child, grace).await;
                (Failure::Protocol, TOO_LONG.into())
            }
            wake = self.wait(desired) => {
                process::terminate(&mut child, grace).await;
                return Err(Interrupted::Woke(wake));
            }
        };
        let tail = stderr::last_lines(&tail, &mut drained).await;
        let how = with_tail(report.explain(how), &tail);
        Err(Interrupted::Failed(failure(how)))
    }

    /// The handshake failed: how the child ended when it exits at once, else why the
    /// handshake failed. The child is stopped either way.
    async fn no_handshake(&self, child: &mut tokio::process::Child, error: ConnectError) -> String {
        match tokio::time::timeout(EXIT_STATUS_WAIT, child.wait()).await {
            Ok(Ok(status)) => {
                process::kill_group(child, libc::SIGKILL);
                format!(
                    "{} before the MCP handshake completed",
                    process::describe_exit(&status)
                )
            }
            _ => {
                process::terminate(child, self.config.stop_grace).await;
                error.to_string()
            }
        }
    }

    async fn start_http(
        &self,
        url: &str,
        headers: &BTreeMap<String, String>,
        bearer: Option<&Bearer>,
        desired: &mut watch::Receiver<Desired>,
    ) -> Result<Running, Interrupted> {
        let token = bearer.map(|b| b.token.as_str());
        let transport = upstream::http_transport(url, headers, token)
            .map_err(|e| Interrupted::Failed(Failure::Config(e.to_string())))?;
        let handshake = tokio::time::timeout(
            self.config.start_timeout,
            upstream::connect(self.upstream(), transport, Some(url)),
        );
        let outcome = tokio::select! {
            outcome = handshake => outcome,
            wake = self.wait(desired) => return Err(Interrupted::Woke(wake)),
        };
        let failure = match outcome {
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
                    AuthReason::InsufficientScope
                } else if bearer.is_some() {
                    // The token we sent was refused.
                    AuthReason::Expired
                } else {
                    AuthReason::Required
                };
                let status = self.auth_status(url, challenge, reason).await;
                return Err(Interrupted::AuthRequired(status));
            }
            Ok(Err(ConnectError::Failed(message))) => Failure::StartFailed(message),
            Err(_) => Failure::Timeout(self.too_slow()),
        };
        Err(Interrupted::Failed(failure))
    }

    fn too_slow(&self) -> String {
        format!(
            "did not finish initialize and tools/list within {} ms",
            self.config.start_timeout.as_millis()
        )
    }
}

/// `how`, followed by the last stderr lines when there are some.
pub(super) fn with_tail(how: String, tail: &str) -> String {
    if tail.is_empty() {
        how
    } else {
        format!("{how}; last stderr lines:\n{tail}")
    }
}
