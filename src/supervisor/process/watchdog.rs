//! The watchdog: this program again, started by the proxy as a process of no parent's and
//! of its own session. It holds the read end of a pipe whose write end only the proxy holds;
//! when the pipe closes (the proxy exited, or was killed, even with SIGKILL) it kills
//! everything carrying the proxy's marker or sitting in its cgroups, removes the cgroups,
//! and exits.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, ExitCode, Stdio};

use super::cgroup;
use super::sweep::{kill_all, Targets, MARKER};

/// Set (to the proxy's token) in the environment of a watchdog; nowhere else.
pub const TOKEN_ENV: &str = "AHP_PROXY_WATCHDOG";
/// The proxy's cgroup base, for its watchdog.
pub const CGROUPS_ENV: &str = "AHP_PROXY_WATCHDOG_CGROUPS";

/// Start the watchdog of the proxy `token` (with its cgroup base, if any). Returns the
/// pipe's write end, to be held for the proxy's whole life; `None` if it could not start.
pub fn start(token: &str, cgroups: Option<&Path>) -> Option<ChildStdin> {
    let mut command = Command::new("/proc/self/exe");
    command
        .env(TOKEN_ENV, token)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match cgroups {
        Some(path) => command.env(CGROUPS_ENV, path),
        None => command.env_remove(CGROUPS_ENV),
    };
    let mut first = command.spawn().ok()?;
    let pipe = first.stdin.take();
    // The first process forks the watchdog proper and exits at once.
    let _ = first.wait();
    pipe
}

/// First thing in `main`: when this process was started as a watchdog, be one (until the
/// proxy is gone) and return the exit code; `None` for any other start.
pub fn run_if_asked() -> Option<ExitCode> {
    let token = std::env::var(TOKEN_ENV).ok()?;
    let cgroups = std::env::var_os(CGROUPS_ENV).map(PathBuf::from);
    if !super::detach() {
        return Some(ExitCode::FAILURE);
    }
    let mut stdin = std::io::stdin();
    let mut sink = [0u8; 64];
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    // The proxy is gone: nothing it started may stay.
    kill_all(&Targets {
        entry: format!("{MARKER}={token}/").into_bytes(),
        prefix: true,
        root: None,
        cgroup: cgroups.clone(),
    });
    if let Some(path) = cgroups {
        cgroup::Base::at(path).kill_all_and_remove();
    }
    Some(ExitCode::SUCCESS)
}
