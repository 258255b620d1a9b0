//! A ready server's run, watched until it exits, hangs up, stops answering pings, loses its
//! authorization or is no longer wanted as it is; says how it ended ([`Ended`]).

use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;

use super::connections::AuthLost;
use super::start::{Running, TOO_LONG};
use super::task::Task;
use super::{process, AuthReason, Bearer, Desired, Status};
use crate::spec::Launch;
use crate::upstream::session::{Session, Unanswered};

/// How often HTTP servers are pinged (a stdio crash is seen at once through its exit, a
/// hang-up through the end of its session).
const HTTP_PING_EVERY: Duration = Duration::from_secs(15);
const HTTP_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// How a running server stopped running.
pub(super) enum Ended {
    /// It died or hung up (`exited`): the message says how.
    Exited(String),
    /// It broke the stdio framing, a line too long to be read (`protocol`): the message
    /// says how.
    Broken(String),
    /// We want something else now (stop, restart with a new spec, removal).
    Changed,
    /// Its token expired, or the server started refusing it: this status says how.
    AuthLost(Status),
    /// The sidecar is shutting down.
    Shutdown,
}

/// What the health check saw end a run.
enum Unhealthy {
    /// It hung up or stopped answering: how.
    Failed(String),
    /// A ping was refused for its authorization: the challenge, and whether for scope.
    Refused(String, bool),
}

impl Task {
    /// Wait while the server runs: until it fails, the wanted state changes, or shutdown.
    /// A change that keeps the same launch spec running (a start request on a ready server)
    /// is answered with `ready` again instead of a restart.
    pub(super) async fn watch_running(
        &self,
        running: &mut Running,
        launch: &Launch,
        bearer: Option<&Bearer>,
        losses: &mut broadcast::Receiver<AuthLost>,
        desired: &mut watch::Receiver<Desired>,
    ) -> Ended {
        let url = match launch {
            Launch::Http { url, .. } => Some(url.as_str()),
            _ => None,
        };
        let session = running.connection.session.clone();
        let health = health(session, running.child.is_none());
        tokio::pin!(health);
        let refused = refusal(losses, &self.id);
        tokio::pin!(refused);
        let expiry = expiry(bearer);
        tokio::pin!(expiry);
        let report = running.stdout.clone();
        loop {
            let exited = async {
                match running.child.as_mut() {
                    Some(child) => child.wait().await.ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = report.broken() => return Ended::Broken(TOO_LONG.into()),
                status = exited => {
                    return Ended::Exited(match status {
                        Some(status) => process::describe_exit(&status),
                        None => "ended".into(),
                    });
                }
                unhealthy = &mut health => return match unhealthy {
                    Unhealthy::Failed(how) => Ended::Exited(exit_of(running.child.as_mut()).await.unwrap_or(how)),
                    Unhealthy::Refused(challenge, scope) => {
                        self.auth_lost(url, Some(challenge), lost(scope)).await
                    }
                },
                (challenge, scope) = &mut refused => {
                    let reason = lost(scope);
                    tracing::info!(server = %self.name, ?reason, "the server refused a request's authorization");
                    return self.auth_lost(url, Some(challenge), reason).await;
                }
                _ = &mut expiry => {
                    tracing::info!(server = %self.name, "bearer token expired");
                    return self.auth_lost(url, None, AuthReason::Expired).await;
                }
                _ = self.shutdown.cancelled() => return Ended::Shutdown,
                changed = desired.changed() => {
                    if changed.is_err() || !unchanged(desired, launch, bearer) {
                        return Ended::Changed;
                    }
                    self.report(running.connection.ready()).await;
                }
            }
        }
    }

    async fn auth_lost(
        &self,
        url: Option<&str>,
        challenge: Option<String>,
        reason: AuthReason,
    ) -> Ended {
        let status = self
            .auth_status(url.unwrap_or_default(), challenge, reason)
            .await;
        Ended::AuthLost(status)
    }
}

/// How a child whose pipes closed ended, if it exits within a moment (its exit status
/// says more than the closed pipe).
async fn exit_of(child: Option<&mut super::process::Child>) -> Option<String> {
    let child = child?;
    let status = tokio::time::timeout(Duration::from_secs(1), child.wait())
        .await
        .ok()?
        .ok()?;
    Some(process::describe_exit(&status))
}

/// Why a token that worked stopped working.
fn lost(insufficient_scope: bool) -> AuthReason {
    if insufficient_scope {
        AuthReason::InsufficientScope
    } else {
        AuthReason::Expired
    }
}

/// Whether the desired state still asks for this very run (a start request on a ready
/// server).
fn unchanged(desired: &watch::Receiver<Desired>, launch: &Launch, bearer: Option<&Bearer>) -> bool {
    let now = desired.borrow();
    now.run && now.launch.as_ref().ok() == Some(launch) && now.bearer.as_ref() == bearer
}

/// Resolves when the session ends or, over HTTP, a ping fails.
async fn health(session: Session, is_http: bool) -> Unhealthy {
    if !is_http {
        session.ended().await;
        return Unhealthy::Failed("closed the MCP connection".to_string());
    }
    loop {
        tokio::select! {
            _ = session.ended() => {
                return Unhealthy::Failed("closed the MCP connection".to_string());
            }
            _ = tokio::time::sleep(HTTP_PING_EVERY) => {}
        }
        match session.call("ping", None, HTTP_PING_TIMEOUT).await {
            Ok(_) => {}
            Err(Unanswered::Unauthorized {
                challenge,
                insufficient_scope,
                ..
            }) => return Unhealthy::Refused(challenge.unwrap_or_default(), insufficient_scope),
            Err(Unanswered::Timeout(_)) => {
                return Unhealthy::Failed("did not answer ping within 10 s".to_string())
            }
            Err(failure) => return Unhealthy::Failed(format!("stopped answering: {failure}")),
        }
    }
}

/// Resolves when a request to server `id` was refused for its authorization (seen by the
/// front): the challenge, and whether for scope.
async fn refusal(losses: &mut broadcast::Receiver<AuthLost>, id: &str) -> (String, bool) {
    loop {
        match losses.recv().await {
            Ok(lost) if lost.server == id => return (lost.challenge, lost.insufficient_scope),
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}

/// Resolves when the bearer token expires (never without one, or without an expiry).
async fn expiry(bearer: Option<&Bearer>) {
    match bearer.and_then(|b| b.expires_at) {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
