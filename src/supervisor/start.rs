//! Bringing a server up: spawn a stdio child or dial a streamable HTTP URL, probe its era
//! (`server/discover`, cached per launch spec), then the MCP handshake (legacy) or the
//! modern link, within the start timeout (a slow stdio start gets a second, longer window);
//! a change of the desired state interrupts it.

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
use super::upstream::{self, ConnectError, Connection, Opening, Patience};
use super::{AuthReason, Bearer, Desired, Failure, Status};
use crate::spec::Launch;
use crate::upstream::era::{self, Discovered, Era, Verdict};
use crate::upstream::handshake::{self, HandshakeError, Identity};
use crate::upstream::session::{Session, Unanswered};
use crate::upstream::stateless::ProbeFailure;

/// Why a server that wrote an overlong stdout line is stopped.
pub(super) const TOO_LONG: &str =
    "wrote a stdout line longer than 16 MiB, which cannot be read as an MCP message; stopped";
/// How long a stdio server may leave the `server/discover` probe unanswered before
/// `initialize` is sent beside it, on the same child. Whichever is answered first with an
/// era decides (a refusal of either leaves it to the other), so a server busy starting is
/// still asked in the order it reads, and a legacy server that ignores requests before
/// `initialize` needs no second child.
const NUDGE: Duration = Duration::from_secs(2);
/// How many times a probe answered `-32022` naming 2026-07-28 as supported (the version it
/// was asked in: a contradiction, seen from a server still starting) is asked again, and
/// the pause before the first retry (doubled each time).
const CONTRADICTION_RETRIES: u32 = 3;
const CONTRADICTION_PAUSE: Duration = Duration::from_millis(200);
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
        let deadlines = Deadlines::from_now(&self.config);
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
                    &deadlines,
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

    /// Spawn the child and, within `deadlines`, probe its era (when `probe`: as `part` of the
    /// probe of its launch spec, when there is one in flight) and handshake. Past the first
    /// deadline the start is reported slow and goes on while the child runs, up to the last.
    async fn spawn_stdio(
        &self,
        launch: process::Launch,
        identity: &Identity,
        probe: bool,
        part: Option<Part>,
        deadlines: &Deadlines,
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
        let patience = self.patience();
        let handshake = async {
            let opening = match probe {
                true => probe_as(part, &session, identity, patience.start).await?,
                false => Opening::Legacy(None),
            };
            self.establish(session, identity, opening, patience).await
        };
        tokio::pin!(handshake);
        let slow = tokio::time::sleep_until(deadlines.slow);
        tokio::pin!(slow);
        let mut is_slow = false;
        let grace = self.config.stop_grace;
        // What kind of failure, and how it happened (before the stdout noise and stderr tail).
        let (failure, how): (fn(String) -> Failure, String) = loop {
            tokio::select! {
                // A broken stdout also ends the handshake: said as what it is.
                biased;
                _ = report.broken() => {
                    process::terminate(&mut child, grace).await;
                    break (Failure::Protocol, TOO_LONG.into());
                }
                outcome = &mut handshake => match outcome {
                    Ok(connection) => {
                        return Ok(Attempt::Up(Box::new(Running {
                            connection,
                            child: Some(child),
                            tail,
                            drained: Some(drained),
                            stdout: report,
                        })))
                    }
                    Err(ConnectError::ProbeUnanswered) => {
                        // Reaped here: no process outlives the probe.
                        process::terminate(&mut child, grace).await;
                        drained.abort();
                        return Ok(Attempt::Respawn);
                    }
                    Err(error) => {
                        break (Failure::StartFailed, self.no_handshake(&mut child, error).await)
                    }
                },
                _ = &mut slow, if !is_slow => {
                    // Still going (an exit would have ended the handshake): a slow start,
                    // not a failure; it keeps its chance until the last deadline.
                    is_slow = true;
                    tracing::warn!(
                        server = %self.name,
                        "server {} is slow to start: still running after {} ms; waiting up to {} ms in all",
                        crate::untrusted::Untrusted(&self.name),
                        self.config.start_timeout.as_millis(),
                        deadlines.total.as_millis(),
                    );
                    self.report(Status::Starting { slow: true }).await;
                }
                _ = tokio::time::sleep_until(deadlines.last) => {
                    process::terminate(&mut child, grace).await;
                    break (Failure::Timeout, self.too_slow(deadlines.total));
                }
                wake = self.wait(desired) => {
                    process::terminate(&mut child, grace).await;
                    return Err(Interrupted::Woke(wake));
                }
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
            let opening = match &discovered {
                Some(discovered) => Opening::Modern(discovered.clone()),
                None => Opening::Legacy(None),
            };
            let session = if discovered.is_some() {
                crate::upstream::stateless::connect(client, target)
            } else if sse {
                crate::upstream::legacy_sse::connect(client, target, patience).await?
            } else {
                crate::upstream::http::connect(client, target)
            };
            self.establish(session, identity, opening, self.patience())
                .await
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
            Err(_) => Failure::Timeout(self.too_slow(patience)),
        };
        Err(Interrupted::Failed(failure))
    }

    /// Handshake on `session` as `identity` as `opening` leaves it (speak modern to a server
    /// that answered the probe) and read what the server offers.
    async fn establish(
        &self,
        session: Session,
        identity: &Identity,
        opening: Opening,
        patience: Patience,
    ) -> Result<Connection, ConnectError> {
        let established = upstream::establish(
            session.clone(),
            identity,
            opening,
            upstream::Owner {
                id: &self.id,
                name: &self.name,
                connections: &self.connections,
            },
            patience,
        )
        .await;
        if established.is_err() {
            session.end();
        }
        established
    }

    /// How long the requests of a start may wait: the deadlines around the whole start
    /// decide, so a request never fails first; list re-reads later wait as a start would.
    fn patience(&self) -> Patience {
        let slack = Duration::from_secs(5);
        Patience {
            start: Deadlines::total_of(&self.config) + slack,
            refresh: self.config.start_timeout + slack,
        }
    }

    fn too_slow(&self, within: Duration) -> String {
        format!(
            "did not finish initialize and tools/list within {} ms",
            within.as_millis()
        )
    }
}

/// When a stdio start turns slow (`start_timeout` after it began) and when it fails (the
/// slow-start limit, never sooner than the start timeout). Shared by a respawn after the probe.
struct Deadlines {
    slow: tokio::time::Instant,
    last: tokio::time::Instant,
    total: Duration,
}

impl Deadlines {
    fn from_now(config: &crate::config::SupervisorConfig) -> Self {
        let now = tokio::time::Instant::now();
        let total = Self::total_of(config);
        Self {
            slow: now + config.start_timeout,
            last: now + total,
            total,
        }
    }

    fn total_of(config: &crate::config::SupervisorConfig) -> Duration {
        config.slow_start_limit.max(config.start_timeout)
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
/// sends no probe; a leader tells its followers what it found (a child that exits on the
/// probe: legacy, as its fresh one will be spoken to); anyone else probes its own child.
async fn probe_as(
    part: Option<Part>,
    session: &Session,
    identity: &Identity,
    patience: Duration,
) -> Result<Opening, ConnectError> {
    match part {
        Some(Part::Follow(follow)) => match follow.verdict().await {
            Some(Era::Legacy) => Ok(Opening::Legacy(None)),
            _ => probe_stdio(session, identity, patience).await,
        },
        Some(Part::Lead(lead)) => {
            let found = probe_stdio(session, identity, patience).await;
            match &found {
                Ok(Opening::Legacy(_)) | Err(ConnectError::ProbeUnanswered) => {
                    lead.settle(Era::Legacy)
                }
                Ok(Opening::Modern(_)) => lead.settle(Era::Modern),
                Err(_) => {}
            }
            found
        }
        None => probe_stdio(session, identity, patience).await,
    }
}

/// Ask a stdio server `server/discover`; if no answer came within [`NUDGE`], send
/// `initialize` beside it. The first answer that names an era decides: a modern discover
/// result, or an `initialize` result (legacy, already handshaken). A child that exits on
/// the probe asks for a fresh one.
async fn probe_stdio(
    session: &Session,
    identity: &Identity,
    patience: Duration,
) -> Result<Opening, ConnectError> {
    let params = era::discover_params(&identity.capabilities, &identity.client_info);
    let discover = discover_stdio(session, &params, patience);
    tokio::pin!(discover);
    tokio::select! {
        found = &mut discover => {
            return Ok(match found? {
                Some(discovered) => Opening::Modern(discovered),
                None => Opening::Legacy(None),
            })
        }
        _ = tokio::time::sleep(NUDGE) => {}
    }
    let initialize = handshake::initialize(session, identity, patience);
    tokio::pin!(initialize);
    let (mut discovering, mut initializing) = (true, true);
    let mut refused = None;
    loop {
        tokio::select! {
            found = &mut discover, if discovering => match found? {
                Some(discovered) => return Ok(Opening::Modern(discovered)),
                // Not modern: the `initialize` in flight decides.
                None => discovering = false,
            },
            answered = &mut initialize, if initializing => match answered {
                Ok(initialized) => return Ok(Opening::Legacy(Some(initialized))),
                Err(HandshakeError::Failed(Unanswered::Stopped)) => {
                    return Err(ConnectError::ProbeUnanswered)
                }
                // Refused (a modern-only server does): the probe decides.
                Err(error) => {
                    initializing = false;
                    refused = Some(error);
                }
            },
            else => {
                let why = refused.map_or_else(|| "no answer".into(), |e| e.to_string());
                return Err(ConnectError::Failed(why));
            }
        }
    }
}

/// The stdio probe itself: the modern answer, `None` for anything else but a recognised
/// modern refusal (asked again while it contradicts itself).
async fn discover_stdio(
    session: &Session,
    params: &str,
    patience: Duration,
) -> Result<Option<Discovered>, ConnectError> {
    let mut pause = CONTRADICTION_PAUSE;
    for retry in 0..=CONTRADICTION_RETRIES {
        let answer = match session
            .call("server/discover", Some(params), patience)
            .await
        {
            Ok(answer) => answer,
            Err(Unanswered::Stopped | Unanswered::Timeout(_)) => {
                return Err(ConnectError::ProbeUnanswered)
            }
            Err(other) => return Err(other.into()),
        };
        match era::classify(&answer) {
            Verdict::ModernRefusal(error)
                if era::contradicts(&error) && retry < CONTRADICTION_RETRIES =>
            {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            verdict => return spoken(verdict),
        }
    }
    Err(ConnectError::ProbeUnanswered)
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
    let mut pause = CONTRADICTION_PAUSE;
    for retry in 0..=CONTRADICTION_RETRIES {
        match crate::upstream::stateless::probe(client.clone(), target, &params, patience).await {
            Ok(Verdict::ModernRefusal(error))
                if era::contradicts(&error) && retry < CONTRADICTION_RETRIES =>
            {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Ok(verdict) => return spoken(verdict),
            Err(ProbeFailure::Refused(refusal)) => {
                return Err(ConnectError::AuthRequired {
                    challenge: refusal.challenge,
                    insufficient_scope: refusal.insufficient_scope,
                })
            }
            Err(ProbeFailure::Outage(why)) => return Err(ConnectError::Failed(why)),
        }
    }
    Err(ConnectError::ProbeUnanswered)
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
