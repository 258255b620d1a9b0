//! One server's lifecycle task: start it (`start`), watch it run (`running`), stop it,
//! restart it with backoff after a failure, and report every transition as a [`Status`].

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::alerts::Secrets;
use super::connections::Connected;
use super::policy::{Jitter, RestartPolicy};
use super::running::Ended;
use super::start::{Interrupted, Running};
use super::stderr::with_tail;
use super::task::{Task, Wake};
use super::{process, stderr};
use super::{AuthReason, Desired, Failure, ServerEvent, Status};
use crate::spec::Launch;

/// A task's count of failures in a row, and how it backs off from them.
struct Retries {
    policy: RestartPolicy,
    jitter: Jitter,
    failures: u32,
}

impl Task {
    /// Run until the server is removed or the sidecar shuts down.
    pub async fn run(self, mut desired: watch::Receiver<Desired>) {
        let mut retries = Retries {
            policy: RestartPolicy::new(&self.config),
            jitter: Jitter::new(seed(&self.id)),
            failures: 0,
        };
        let mut epoch = desired.borrow().epoch;
        let mut launch_seen = desired.borrow().launch.clone();
        loop {
            // Removed (its sender dropped): not one more start.
            if desired.has_changed().is_err() {
                self.removed().await;
                return;
            }
            let want = desired.borrow_and_update().clone();
            // A start request or a new launch spec deserves fresh attempts.
            if want.epoch != epoch || want.launch != launch_seen {
                epoch = want.epoch;
                launch_seen = want.launch.clone();
                retries.failures = 0;
            }
            match self.pursue(&want, &mut desired, &mut retries).await {
                Wake::Changed => continue,
                Wake::Idle => return,
                Wake::Removed => {
                    self.removed().await;
                    return;
                }
                Wake::Shutdown => {
                    self.report(Status::Stopped).await;
                    return;
                }
            }
        }
    }

    /// The server was removed: nobody waits for it to start, and clients hear it is gone.
    async fn removed(&self) {
        self.connections.set_pending(&self.id, false);
        self.connections.clear_auth_status(&self.id);
        let _ = self
            .events
            .send(ServerEvent {
                id: self.id.clone(),
                status: None,
            })
            .await;
    }

    /// Do what `want` asks (stay stopped, show why the spec is unusable, or run it, backing
    /// off after a failure) until the desired state changes.
    async fn pursue(
        &self,
        want: &Desired,
        desired: &mut watch::Receiver<Desired>,
        retries: &mut Retries,
    ) -> Wake {
        if !want.run {
            self.report(Status::Stopped).await;
            return Wake::Idle;
        }
        let launch = match &want.launch {
            Ok(launch) => launch,
            Err(error) => {
                self.report_failure(Failure::Config(error.to_string()), 1, false)
                    .await;
                return self.wait(desired).await;
            }
        };
        *lock(&self.secrets) = Secrets::of(launch, want.bearer.as_ref().map(|b| b.token.as_str()));
        if let Some(wake) = self.attempt(launch, desired, retries).await {
            return wake;
        }
        // Failed: back off (or give up) before the next attempt.
        if retries.policy.gives_up(retries.failures) {
            return self.wait(desired).await;
        }
        let delay = (retries.policy).delay(retries.failures, retries.jitter.next_unit());
        tracing::debug!(server = %self.name, failures = retries.failures, delay_ms = delay.as_millis() as u64, "restarting after a delay");
        tokio::select! {
            _ = tokio::time::sleep(delay) => Wake::Changed,
            wake = self.wait(desired) => wake,
        }
    }

    /// One start and, if it comes up, its whole run. `None` means it failed (the error is
    /// already reported and counted); `Some` means the desired state changed first.
    async fn attempt(
        &self,
        launch: &Launch,
        desired: &mut watch::Receiver<Desired>,
        retries: &mut Retries,
    ) -> Option<Wake> {
        self.report(Status::Starting { slow: false }).await;
        let bearer = desired.borrow().bearer.clone();
        let mut running = match self.start(launch, bearer.as_ref(), desired).await {
            Ok(running) => running,
            Err(Interrupted::Woke(wake)) => return Some(wake),
            Err(Interrupted::AuthRequired(status)) => {
                // Retrying without credentials cannot help: wait to be asked again.
                self.report(status).await;
                return Some(self.wait(desired).await);
            }
            Err(Interrupted::Failed(failure)) => {
                let failures = retries.count(None);
                self.report_failure(retries.verdict(failure), failures, false)
                    .await;
                return None;
            }
        };
        // Subscribed before anyone can use the connection: no refusal is missed.
        let mut losses = self.connections.auth_losses();
        // Published before `ready` is reported, so a client that sees `ready` can use it.
        self.publish(&running);
        let tools = running.connection.tool_count();
        self.report(running.connection.ready()).await;
        // One line per server at start-up (with fifty servers, a second one per server was
        // measurable in the start-up): the MCP revision it speaks is a field of this one.
        let version = running.connection.version();
        tracing::info!(server = %self.name, tools, %version, "server ready");
        let up_since = Instant::now();
        let ended = self
            .watch_running(&mut running, launch, bearer.as_ref(), &mut losses, desired)
            .await;
        self.after_run(ended, running, up_since, desired, retries)
            .await
    }

    /// Unpublish a run that ended, stop what is left of it, and report how it ended (a
    /// failure is counted). `None` after a failure, as for [`Task::attempt`].
    async fn after_run(
        &self,
        ended: Ended,
        running: Running,
        up_since: Instant,
        desired: &mut watch::Receiver<Desired>,
        retries: &mut Retries,
    ) -> Option<Wake> {
        if let Ended::AuthLost(status) = &ended {
            self.connections.set_auth_status(&self.id, status.clone());
        }
        let uptime = up_since.elapsed();
        // Restarting a server that ran and crashed is as good as starting it: the MCP front
        // waits for it from before it goes, even after earlier failures (a call then waits
        // at most the first-list wait). One that keeps failing to start is not waited for
        // while it backs off: a failed start reports without `pending`.
        let failures = retries.policy.count_failure(retries.failures, Some(uptime));
        let restarts = matches!(ended, Ended::Exited(_) | Ended::Broken(_))
            && !retries.policy.gives_up(failures);
        if restarts {
            self.connections.set_pending(&self.id, true);
        }
        self.connections.remove(&self.id);
        let (failure, how): (fn(String) -> Failure, String) = match ended {
            Ended::Exited(how) => (Failure::Exited, how),
            Ended::Broken(how) => (Failure::Protocol, how),
            Ended::AuthLost(status) => {
                // Shown before the (possibly slow) hang-up, so a client can authenticate at once.
                tracing::info!(server = %self.name, "authorization lost; waiting for a new token");
                self.report(status).await;
                self.stop(running).await;
                return Some(self.wait(desired).await);
            }
            Ended::Changed => {
                self.stop(running).await;
                return Some(Wake::Changed);
            }
            Ended::Shutdown => {
                self.stop(running).await;
                return Some(Wake::Shutdown);
            }
        };
        let noise = running.stdout.clone();
        let stderr_tail = self.stop(running).await;
        let failures = retries.count(Some(uptime));
        let failure = failure(with_tail(noise.explain(how), &stderr_tail));
        self.report_failure(retries.verdict(failure), failures, restarts)
            .await;
        None
    }

    /// Show a ready server's connection to the MCP front.
    fn publish(&self, running: &Running) {
        let connection = &running.connection;
        self.connections.insert(
            &self.id,
            Connected {
                name: self.name.clone(),
                session: connection.session.clone(),
                initialized: connection.initialized.clone(),
                offer: connection.offer.clone(),
            },
        );
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
        // MCP's stdio shutdown: close its input first, then TERM, then KILL.
        connection.session.end();
        if let Some(mut child) = child {
            process::terminate(&mut child, self.config.stop_grace).await;
        }
        match drained {
            Some(mut drained) => stderr::last_lines(&tail, &mut drained).await,
            None => tail.lock().unwrap_or_else(|p| p.into_inner()).text(),
        }
    }

    /// `authRequired` for the server at `url`, with the metadata its challenge points at.
    /// Without a challenge (a timer expiry), the last one seen is used.
    pub(super) async fn auth_status(
        &self,
        url: &str,
        challenge: Option<String>,
        reason: AuthReason,
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

    /// Wait for the desired state to change.
    pub(super) async fn wait(&self, desired: &mut watch::Receiver<Desired>) -> Wake {
        tokio::select! {
            changed = desired.changed() => match changed {
                Ok(()) => Wake::Changed,
                Err(_) => Wake::Removed,
            },
            _ = self.shutdown.cancelled() => Wake::Shutdown,
        }
    }

    /// Report a failure (the `failures`-th in a row), its secrets blanked; the MCP front
    /// keeps waiting for the server when it `restarts` on its own soon.
    async fn report_failure(&self, failure: Failure, failures: u32, restarts: bool) {
        let failure = lock(&self.secrets).scrub_failure(failure);
        self.announce(&Status::Error(failure.clone()), failures);
        self.send_keeping_pending(Status::Error(failure), restarts)
            .await;
    }

    /// Tell the terminal about a transition into trouble (WARN), once; repeats go to debug.
    fn announce(&self, status: &Status, failures: u32) {
        match lock(&self.alerts).on(status, failures) {
            Some(line) => {
                let line = super::stdout::without_noise(&line);
                tracing::warn!(server = %self.name, "server {} {line}", self.name)
            }
            None => tracing::debug!(server = %self.name, ?status, "status"),
        }
    }

    pub(super) async fn report(&self, status: Status) {
        self.announce(&status, 0);
        self.send(status).await;
    }

    async fn send(&self, status: Status) {
        let starting = matches!(status, Status::Starting { .. });
        self.send_keeping_pending(status, starting).await;
    }

    /// Report `status`; the MCP front waits for this server while `pending`.
    async fn send_keeping_pending(&self, status: Status, pending: bool) {
        self.connections.set_pending(&self.id, pending);
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

impl Retries {
    /// Count one more failure (after `uptime` of running, if it ran); the count in effect.
    fn count(&mut self, uptime: Option<Duration>) -> u32 {
        self.failures = self.policy.count_failure(self.failures, uptime);
        self.failures
    }

    /// `failure` as reported: after the crash-loop limit the error says so, and the task
    /// waits to be asked.
    fn verdict(&self, failure: Failure) -> Failure {
        if self.policy.gives_up(self.failures) {
            Failure::CrashLoop {
                failures: self.failures,
                last: Box::new(failure),
            }
        } else {
            failure
        }
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

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
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
