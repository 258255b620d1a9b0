//! A server process the proxy started, and how it ended: waited for through a pidfd when
//! [`super::vfork`] started it, through tokio when the `fork` fallback did.
//!
//! Dropped before it was seen to end, it is SIGKILLed and reaped (as tokio's `kill_on_drop`).

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use rustix::process::{Pid, Signal, WaitOptions};
use tokio::io::unix::AsyncFd;

/// A running (or ended, not yet forgotten) server process.
#[derive(Debug)]
pub struct Child(Inner);

#[derive(Debug)]
enum Inner {
    Cloned {
        pid: Pid,
        /// Readable once the process has ended; `None` only while being dropped.
        pidfd: Option<AsyncFd<OwnedFd>>,
        status: Option<ExitStatus>,
    },
    Forked(tokio::process::Child),
}

impl Child {
    /// The child `pid` started by [`super::vfork`], watched through its pidfd (made here: the
    /// pid is this process's unreaped child, so it names no other process). Must be called in
    /// a tokio runtime.
    pub fn cloned(pid: Pid) -> std::io::Result<Self> {
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
        // SAFETY: an `OwnedFd` names the same open descriptor for as long as it lives, and
        // the `AsyncFd` owns it.
        let pidfd =
            unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
                .map_err(std::io::Error::from)?;
        Ok(Child(Inner::Cloned {
            pid,
            pidfd: Some(pidfd),
            status: None,
        }))
    }

    /// A child started by tokio (the fallback where pidfds are not available).
    pub fn forked(child: tokio::process::Child) -> Self {
        Child(Inner::Forked(child))
    }

    /// Its pid (also its process group's id), until it has been seen to end.
    pub fn id(&self) -> Option<u32> {
        match &self.0 {
            Inner::Cloned { pid, status, .. } => {
                status.is_none().then(|| pid.as_raw_nonzero().get() as u32)
            }
            Inner::Forked(child) => child.id(),
        }
    }

    /// How it ended, if it has (reaping it).
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match &mut self.0 {
            Inner::Cloned { pid, status, .. } => {
                if status.is_none() {
                    if let Some((_, raw)) =
                        rustix::process::waitpid(Some(*pid), WaitOptions::NOHANG)?
                    {
                        *status = Some(ExitStatus::from_raw(raw.as_raw()));
                    }
                }
                Ok(*status)
            }
            Inner::Forked(child) => child.try_wait(),
        }
    }

    /// Wait until it ends (cancel-safe).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            match &mut self.0 {
                Inner::Cloned {
                    pidfd: Some(pidfd), ..
                } => {
                    let mut ready = pidfd.readable().await?;
                    // Level-triggered: once it has ended it stays readable; `try_wait` reaps.
                    ready.retain_ready();
                }
                Inner::Cloned { pidfd: None, .. } => {
                    return Err(std::io::Error::other("the child is being dropped"))
                }
                Inner::Forked(child) => return child.wait().await,
            }
        }
    }

    /// Send it SIGKILL (through its pidfd: never another process that took its pid).
    pub fn start_kill(&mut self) -> std::io::Result<()> {
        match &mut self.0 {
            Inner::Cloned {
                pidfd: Some(pidfd),
                status: None,
                ..
            } => Ok(rustix::process::pidfd_send_signal(
                pidfd.get_ref(),
                Signal::KILL,
            )?),
            Inner::Cloned { .. } => Ok(()),
            Inner::Forked(child) => child.start_kill(),
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // tokio kills and reaps its own (`kill_on_drop`).
        if matches!(self.0, Inner::Forked(_)) || self.try_wait().is_ok_and(|s| s.is_some()) {
            return;
        }
        let _ = self.start_kill();
        let Inner::Cloned { pid, pidfd, .. } = &mut self.0 else {
            return;
        };
        let (pid, Some(pidfd)) = (*pid, pidfd.take()) else {
            return;
        };
        // Reaped once it has died (at once, for SIGKILL); outside a runtime (the proxy is
        // ending) the kernel's reaper takes it after the proxy.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                loop {
                    if !matches!(
                        rustix::process::waitpid(Some(pid), WaitOptions::NOHANG),
                        Ok(None)
                    ) {
                        return;
                    }
                    match pidfd.readable().await {
                        Ok(mut ready) => ready.retain_ready(),
                        Err(_) => return,
                    }
                }
            });
        }
    }
}
