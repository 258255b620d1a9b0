//! Bringing a server up: spawn a stdio child or dial a streamable HTTP URL, probe its era
//! (`server/discover`, cached per launch spec), then the MCP handshake (legacy) or the
//! modern link, within the start timeout; a change of the desired state interrupts it.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::era_probes::Part;
use super::process::{self, Spawned};
use super::stderr::{self, with_tail, SharedTail};
use super::stdout;
use super::task::{Task, Wake};
use super::upstream::{self, ConnectError, Connection};
use super::{AuthReason, Bearer, Desired, Failure, Status};
use crate::spec::Launch;
use crate::upstream::era::{self, Discovered, Era, Verdict};
use crate::upstream::handshake::Identity;
use crate::upstream::session::{Session, Unanswered};
use crate::upstream::stateless::ProbeFailure;

/// Why a server that wrote an overlong stdout line is stopped.
pub(super) const TOO_LONG: &str =
    "wrote a stdout line longer than 16 MiB, which cannot be read as an MCP message; stopped";
/// How long a stdio server may take to answer the `server/discover` probe before it is
/// taken for a legacy server that ignores requests before `initialize`. Generous: a Node
/// server on a busy machine can take seconds to start, and a modern one taken for legacy
/// would not come up; a server that stays silent is rare (most answer an error at once).
const PROBE_WAIT: Duration = Duration::from_secs(10);
/// After a failed handshake, how long to wait for the child's exit status.
const EXIT_STATUS_WAIT: Duration = Duration::from_secs(1);

/// A started server: its connection and, for stdio, its process.
pub(super) struct Running {
    pub connection: Connection,
    pub child: Option<super::process::Child>,
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
        // Who the proxy is to the server: with a stdio harness, that harness (known once
        // it sent `initialize`); the start timeout counts from here.
        let identity = tokio::select! {
            identity = self.connections.identity() => identity,
            wake = self.wait(desired) => return Err(Interrupted::Woke(wake)),
        };
        match launch {
            Launch::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                self.start_stdio(command, args, env, cwd.as_deref(), &identity, desired)
                    .await
            }
            Launch::Http { url, headers, sse } => {
                self.start_http(url, headers, *sse, bearer, &identity, desired)
                    .await
            }
        }
    }

    async fn start_stdio(
        &self,
        command: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
        cwd: Option<&Path>,
        identity: &Identity,
        desired: &mut watch::Receiver<Desired>,
    ) -> Result<Running, Interrupted> {
        let key = era_key(&(command, args, env, cwd));
        let deadline = tokio::time::Instant::now() + self.config.start_timeout;
        // Probe unless the launch spec is known to be legacy; a child that exits on the
        // probe (or never answers it) is legacy, and a fresh one is started for it. Starts
        // of the same spec at once share one probe: the others spawn meanwhile, then go on
        // with its verdict (a modern one still asks its own child, for its own answer).
        let known = self.connections.era_of(key);
        let mut probe = known != Some(Era::Legacy);
        let mut part = known
            .is_none()
            .then(|| self.connections.join_era_probe(key));
        let launch = process::Launch {
            command: command.to_string(),
            args: args.to_vec(),
            env: env.clone(),
            cwd: cwd.map(Path::to_path_buf),
        };
        loop {
            match self
                .spawn_stdio(
                    launch.clone(),
                    identity,
                    probe,
                    part.take(),
                    deadline,
                    desired,
                )
                .await
            {
                Ok(Attempt::Up(running)) => {
                    let era = running.connection.session.era();
                    self.connections.set_era(key, Some(era));
                    return Ok(*running);
                }
                Ok(Attempt::Respawn) if probe => probe = false,
                Ok(Attempt::Respawn) => {
                    let why = ConnectError::ProbeUnanswered.to_string();
                    return Err(Interrupted::Failed(Failure::StartFailed(why)));
                }
                Err(interrupted) => {
                    self.connections.set_era(key, None);
                    return Err(interrupted);
                }
            }
        }
    }

    /// Spawn the child and, within `deadline`, probe its era (when `probe`: as `part` of the
    /// probe of its launch spec, when there is one in flight) and handshake.
    async fn spawn_stdio(
        &self,
        launch: process::Launch,
        identity: &Identity,
        probe: bool,
        part: Option<Part>,
        deadline: tokio::time::Instant,
        desired: &mut watch::Receiver<Desired>,
    ) -> Result<Attempt, Interrupted> {
        let Spawned {
            mut child,
            stdin,
            stdout,
            stderr: pipe,
        } = process::spawn_off_worker(launch)
            .await
            .map_err(|e| Interrupted::Failed(Failure::Spawn(e.to_string())))?;
        let tail = SharedTail::default();
        let mut drained = tokio::spawn(stderr::drain(pipe, self.name.clone(), tail.clone()));
        let report = Arc::new(stdout::Report::new(&self.name));
        let session = crate::upstream::stdio::connect_child(stdin, stdout, report.clone());
        let handshake = tokio::time::timeout_at(deadline, async {
            let discovered = match probe {
                true => probe_as(part, &session, identity).await?,
                false => None,
            };
            self.establish(session, identity, discovered).await
        });
        let grace = self.config.stop_grace;
        // What kind of failure, and how it happened (before the stdout noise and stderr tail).
        let (failure, how): (fn(String) -> Failure, String) = tokio::select! {
            // A broken stdout also ends the handshake: said as what it is.
            biased;
            _ = report.broken() => {
                process::terminate(&mut child, grace).await;
                (Failure::Protocol, TOO_LONG.into())
            }
            outcome = handshake => match outcome {
                Ok(Ok(connection)) => {
                    return Ok(Attempt::Up(Box::new(Running {
                        connection,
                        child: Some(child),
                        tail,
                        drained: Some(drained),
                        stdout: report,
                    })))
                }
                Ok(Err(ConnectError::ProbeUnanswered)) => {
                    // Reaped here: no process outlives the probe.
                    process::terminate(&mut child, grace).await;
                    drained.abort();
                    return Ok(Attempt::Respawn);
                }
                Ok(Err(error)) => (Failure::StartFailed, self.no_handshake(&mut child, error).await),
                Err(_) => {
                    process::terminate(&mut child, grace).await;
                    (Failure::Timeout, self.too_slow())
                }
            },
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
    async fn no_handshake(&self, child: &mut super::process::Child, error: ConnectError) -> String {
        match tokio::time::timeout(EXIT_STATUS_WAIT, child.wait()).await {
            Ok(Ok(status)) => {
                process::kill_group(child, rustix::process::Signal::KILL);
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
        sse: bool,
        bearer: Option<&Bearer>,
        identity: &Identity,
        desired: &mut watch::Receiver<Desired>,
    ) -> Result<Running, Interrupted> {
        let token = bearer.map(|b| b.token.as_str());
        let config = |message: String| Interrupted::Failed(Failure::Config(message));
        let headers = crate::upstream::http::header_map(headers, token).map_err(config)?;
        let parsed = reqwest::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| config("the server URL is not an http:// or https:// URL".into()))?;
        let connections = Arc::downgrade(&self.connections);
        let id = self.id.clone();
        let target = crate::upstream::http::Target {
            url: parsed,
            headers,
            on_refusal: Arc::new(move |refusal: crate::upstream::http::Refusal| {
                if let Some(connections) = connections.upgrade() {
                    connections.auth_lost(super::connections::AuthLost {
                        server: id.clone(),
                        challenge: refusal.challenge.unwrap_or_default(),
                        insufficient_scope: refusal.insufficient_scope,
                    });
                }
            }),
        };
        let client = self.connections.http_client();
        let patience = self.config.start_timeout;
        let key = era_key(&url);
        let probe = !sse && self.connections.era_of(key) != Some(Era::Legacy);
        let handshake = tokio::time::timeout(patience, async {
            let discovered = match probe {
                true => probe_http(client.clone(), &target, identity, patience).await?,
                false => None,
            };
            let session = if discovered.is_some() {
                crate::upstream::stateless::connect(client, target)
            } else if sse {
                crate::upstream::legacy_sse::connect(client, target, patience).await?
            } else {
                crate::upstream::http::connect(client, target)
            };
            self.establish(session, identity, discovered).await
        });
        let outcome = tokio::select! {
            outcome = handshake => outcome,
            wake = self.wait(desired) => return Err(Interrupted::Woke(wake)),
        };
        let era = match &outcome {
            Ok(Ok(connection)) => Some(connection.session.era()),
            _ => None,
        };
        self.connections.set_era(key, era);
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
            Ok(Err(ConnectError::ProbeUnanswered)) => {
                Failure::StartFailed(ConnectError::ProbeUnanswered.to_string())
            }
            Err(_) => Failure::Timeout(self.too_slow()),
        };
        Err(Interrupted::Failed(failure))
    }

    /// Handshake on `session` as `identity` (or, for a server that answered `discovered`,
    /// speak modern to it) and read what the server offers.
    async fn establish(
        &self,
        session: Session,
        identity: &Identity,
        discovered: Option<Discovered>,
    ) -> Result<Connection, ConnectError> {
        let established = upstream::establish(
            session.clone(),
            identity,
            discovered,
            &self.id,
            &self.name,
            &self.connections,
            // The start timeout around the whole start decides; a request never fails first.
            self.config.start_timeout + std::time::Duration::from_secs(5),
        )
        .await;
        if established.is_err() {
            session.end();
        }
        established
    }

    fn too_slow(&self) -> String {
        format!(
            "did not finish initialize and tools/list within {} ms",
            self.config.start_timeout.as_millis()
        )
    }
}

/// What a stdio start attempt came to.
enum Attempt {
    Up(Box<Running>),
    /// The child exited on the probe or never answered it: start a fresh one, legacy.
    Respawn,
}

/// The era cache's key for a launch spec (a hash: the spec itself is secret).
fn era_key(launch: &impl Hash) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    launch.hash(&mut hasher);
    hasher.finish()
}

/// Probe as `part` of the probe of a launch spec: a follower whose leader found legacy
/// sends no probe; a leader tells its followers what it found (a silent child: legacy, as
/// its fresh one will be spoken to); anyone else probes its own child.
async fn probe_as(
    part: Option<Part>,
    session: &Session,
    identity: &Identity,
) -> Result<Option<Discovered>, ConnectError> {
    match part {
        Some(Part::Follow(follow)) => match follow.verdict().await {
            Some(Era::Legacy) => Ok(None),
            _ => probe_stdio(session, identity).await,
        },
        Some(Part::Lead(lead)) => {
            let found = probe_stdio(session, identity).await;
            match &found {
                Ok(None) | Err(ConnectError::ProbeUnanswered) => lead.settle(Era::Legacy),
                Ok(Some(_)) => lead.settle(Era::Modern),
                Err(_) => {}
            }
            found
        }
        None => probe_stdio(session, identity).await,
    }
}

/// Ask a stdio server `server/discover`: its answer if it speaks modern (and lists no
/// legacy version), `None` to go on with `initialize` on the same child. A child that
/// exits on the probe or stays silent asks for a fresh one.
async fn probe_stdio(
    session: &Session,
    identity: &Identity,
) -> Result<Option<Discovered>, ConnectError> {
    let params = era::discover_params(&identity.capabilities, &identity.client_info);
    match session
        .call("server/discover", Some(&params), PROBE_WAIT)
        .await
    {
        Ok(answer) => spoken(era::classify(&answer)),
        Err(Unanswered::Stopped | Unanswered::Timeout(_)) => Err(ConnectError::ProbeUnanswered),
        Err(other) => Err(other.into()),
    }
}

/// POST `server/discover` to an HTTP server: its answer if it speaks modern, `None` to
/// go on with `initialize`. 401/403 stay a question of credentials, 5xx an outage.
async fn probe_http(
    client: reqwest::Client,
    target: &crate::upstream::http::Target,
    identity: &Identity,
    patience: Duration,
) -> Result<Option<Discovered>, ConnectError> {
    let params = era::discover_params(&identity.capabilities, &identity.client_info);
    match crate::upstream::stateless::probe(client, target, &params, patience).await {
        Ok(verdict) => spoken(verdict),
        Err(ProbeFailure::Refused(refusal)) => Err(ConnectError::AuthRequired {
            challenge: refusal.challenge,
            insufficient_scope: refusal.insufficient_scope,
        }),
        Err(ProbeFailure::Outage(why)) => Err(ConnectError::Failed(why)),
    }
}

/// What a probe's verdict makes of the start.
fn spoken(verdict: Verdict) -> Result<Option<Discovered>, ConnectError> {
    match verdict {
        Verdict::Discovered(discovered) if discovered.spoken() == Era::Modern => {
            Ok(Some(discovered))
        }
        Verdict::Discovered(_) | Verdict::Legacy => Ok(None),
        Verdict::ModernRefusal(error) => Err(ConnectError::Failed(format!(
            "the server refused server/discover: {error}"
        ))),
    }
}
