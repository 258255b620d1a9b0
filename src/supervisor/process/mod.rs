//! Child processes for stdio servers: each in its own process group (and cgroup, where the
//! machine allows), carrying the proxy's marker, killed by the kernel if the sidecar dies;
//! stopped with SIGTERM to the whole group and SIGKILL after a grace period, and then
//! everything it left behind (`ownership`). Started by [`vfork`] (no copy of the proxy),
//! or by tokio's `fork` with a `pre_exec` step where pidfds are missing. Its `unsafe`:
//! `vfork`, `child`'s pidfd registration, `pre_exec` and the watchdog's `fork` (other system
//! calls go through rustix, safely); the crate's only other is `heap`'s.

pub mod cgroup;
pub mod child;
pub mod ownership;
pub mod program;
pub mod spawner;
pub mod sweep;
pub mod tree;
pub mod vfork;
pub mod watchdog;

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::net::unix::pipe;
use tokio::process::Command;

pub use child::Child;

pub use ownership::{Owned, Ownership};

/// A running child with its pipes taken apart (non-blocking, registered with the runtime).
pub struct Spawned {
    /// The process (its pid is also its process group id).
    pub child: Child,
    /// Its stdin (MCP requests go here).
    pub stdin: pipe::Sender,
    /// Its stdout (MCP responses come from here).
    pub stdout: pipe::Receiver,
    /// Its stderr (drained into logs and the error tail).
    pub stderr: pipe::Receiver,
}

/// Why a child could not be started. The text names the command's file name (what the user
/// must fix) but never its folder, arguments or environment (they may be secrets).
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The working directory is missing.
    #[error("cannot start the server: its working directory does not exist")]
    NoDirectory,
    /// No such program.
    #[error("cannot start the server: command not found: {0} ({hint})", hint = not_found_hint(.0))]
    NotFound(String),
    /// The program cannot be run.
    #[error("cannot start the server: permission denied: {0} (is the command executable?)")]
    PermissionDenied(String),
    /// Anything else the system said.
    #[error("cannot start the server: {0}")]
    Other(std::io::Error),
}

/// A stdio server's launch, owned, to be spawned on a blocking thread.
#[derive(Debug, Clone)]
pub struct Launch {
    pub command: String,
    pub args: Vec<String>,
    pub env: std::collections::BTreeMap<String, String>,
    pub cwd: Option<std::path::PathBuf>,
}

/// [`spawn`] on one of the long-lived [`spawner`] threads: off the async workers (the fork
/// waits until the child has `exec`ed or failed to, and for its cgroup write, which would
/// stop every task of a one-worker runtime meanwhile), and never on a thread that may exit
/// (its exit would deliver the child's parent-death signal).
pub async fn spawn_off_worker(launch: Launch) -> Result<Spawned, SpawnError> {
    spawner::run(move || {
        spawn(
            &launch.command,
            &launch.args,
            &launch.env,
            launch.cwd.as_deref(),
        )
    })
    .await
    .unwrap_or_else(|| {
        Err(SpawnError::Other(std::io::Error::other(
            "no thread to start it on",
        )))
    })
}

/// Start `command args` in `cwd` with `env` added, in a new process group, with SIGKILL as
/// its parent-death signal; when the proxy owns its servers ([`Ownership::establish`]),
/// with its marker in the environment and in its own cgroup. Started without copying the
/// proxy ([`vfork`]) where the kernel gives pidfds (Linux 5.3), else with tokio's `fork`.
pub fn spawn(
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> Result<Spawned, SpawnError> {
    spawn_as(Start::best(), command, args, env, cwd)
}

/// How a child is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// [`vfork`], watched through a pidfd.
    Clone,
    /// tokio's `Command` with a `pre_exec` step (`fork`, then `exec`).
    Fork,
}

impl Start {
    /// [`Start::Clone`] when this kernel gives pidfds (asked once).
    fn best() -> Self {
        static PIDFDS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let pidfds = *PIDFDS.get_or_init(|| {
            rustix::process::pidfd_open(
                rustix::process::getpid(),
                rustix::process::PidfdFlags::empty(),
            )
            .is_ok()
        });
        if pidfds {
            Start::Clone
        } else {
            Start::Fork
        }
    }

    /// Start what `order` says this way.
    fn start(self, order: &Order<'_>) -> std::io::Result<Spawned> {
        match self {
            Start::Clone => start_cloned(order),
            Start::Fork => start_forked(order),
        }
    }
}

/// What to start: a server's launch, with the proxy's marker and the server's cgroup.
struct Order<'a> {
    command: &'a str,
    args: &'a [String],
    env: &'a std::collections::BTreeMap<String, String>,
    marker: Option<(&'a str, &'a str)>,
    cwd: Option<&'a Path>,
    cgroup: Option<&'a Path>,
}

fn spawn_as(
    how: Start,
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> Result<Spawned, SpawnError> {
    let ownership = Ownership::get();
    let plan = ownership.map(Ownership::plan);
    let marker = plan.as_ref().and_then(|p| {
        let (name, value) = p.marker.split_once('=')?;
        Some((name.to_string(), value.to_string()))
    });
    let marker = marker.as_ref().map(|(n, v)| (n.as_str(), v.as_str()));
    let cgroup = plan.as_ref().and_then(|p| p.cgroup.clone());
    let order = Order {
        command,
        args,
        env,
        marker,
        cwd,
        cgroup: cgroup.as_deref(),
    };
    let start = || how.start(&order);
    let started = match (ownership, plan) {
        (Some(ownership), Some(plan)) => ownership.spawn_registered(plan, start),
        _ => start(),
    };
    started.map_err(|error| spawn_error(error, command, cwd))
}

/// The server's whole environment: the proxy's, with `env` and the marker over it.
fn environment(
    env: &std::collections::BTreeMap<String, String>,
    marker: Option<(&str, &str)>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut whole: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = std::env::vars_os()
        .map(|(name, value)| (name.into_encoded_bytes(), value.into_encoded_bytes()))
        .collect();
    for (name, value) in env
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .chain(marker)
    {
        whole.insert(name.as_bytes().to_vec(), value.as_bytes().to_vec());
    }
    whole.into_iter().collect()
}

fn start_cloned(order: &Order<'_>) -> std::io::Result<Spawned> {
    let environment = environment(order.env, order.marker);
    let Order {
        command,
        args,
        cwd,
        cgroup,
        ..
    } = *order;
    let Some(plan) = vfork::Plan::new(command, args, &environment, cwd, cgroup) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a NUL byte in the command, its arguments, environment or folder",
        ));
    };
    let started = vfork::start(&plan)?;
    // Watched (and killed when dropped) before anything else can fail.
    let child = Child::cloned(started.pid)?;
    Ok(Spawned {
        child,
        stdin: pipe::Sender::from_owned_fd(started.stdin)?,
        stdout: pipe::Receiver::from_owned_fd(started.stdout)?,
        stderr: pipe::Receiver::from_owned_fd(started.stderr)?,
    })
}

fn start_forked(order: &Order<'_>) -> std::io::Result<Spawned> {
    let cgroup_procs = order.cgroup.and_then(cgroup::procs_file);
    let mut cmd = Command::new(order.command);
    cmd.args(order.args)
        .envs(order.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    if let Some(cwd) = order.cwd {
        cmd.current_dir(cwd);
    }
    if let Some((name, value)) = order.marker {
        cmd.env(name, value);
    }
    #[cfg(target_os = "linux")]
    {
        let parent = rustix::process::getpid();
        // SAFETY: the closure runs in the forked child before exec and only makes system
        // calls (prctl, getppid, open, write, close), which are async-signal-safe, on data
        // prepared before the fork; it allocates nothing (an error from an errno does not).
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
                // The sidecar may have died between fork and prctl: then nobody will signal
                // us. The error ends the child (and nobody waits for its spawn).
                if rustix::process::getppid() != Some(parent) {
                    return Err(rustix::io::Errno::SRCH.into());
                }
                // Into the server's own cgroup ("0": the writing process). Best effort: a
                // server that cannot join still carries the marker.
                if let Some(path) = &cgroup_procs {
                    use rustix::fs::{Mode, OFlags};
                    if let Ok(fd) = rustix::fs::open(
                        path.as_c_str(),
                        OFlags::WRONLY | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) {
                        let _ = rustix::io::write(&fd, b"0");
                    }
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other(
            "the server process started without its pipes",
        ));
    };
    let child = Child::forked(child);
    Ok(Spawned {
        child,
        stdin: pipe::Sender::from_owned_fd(stdin.into_owned_fd()?)?,
        stdout: pipe::Receiver::from_owned_fd(stdout.into_owned_fd()?)?,
        stderr: pipe::Receiver::from_owned_fd(stderr.into_owned_fd()?)?,
    })
}

fn spawn_error(error: std::io::Error, command: &str, cwd: Option<&Path>) -> SpawnError {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::NotFound if cwd.is_some_and(|c| !c.is_dir()) => SpawnError::NoDirectory,
        ErrorKind::NotFound => SpawnError::NotFound(file_name(command)),
        ErrorKind::PermissionDenied => SpawnError::PermissionDenied(file_name(command)),
        _ => SpawnError::Other(error),
    }
}

/// What to do about a program that is not there: the example servers are built beside the
/// proxy (not by `cargo run`, which builds only the proxy); anything else is the user's to
/// install or name.
fn not_found_hint(name: &str) -> &'static str {
    if name == crate::discovery::EXAMPLES_BINARY {
        "it is built beside ahp-proxy by `cargo build` or `cargo build --release`; `cargo run` builds only ahp-proxy"
    } else {
        "check the command and PATH"
    }
}

/// The last component of `command` (`/opt/acme/bin/server` → `server`): enough to say which
/// program is missing without showing where it was looked for.
fn file_name(command: &str) -> String {
    Path::new(command)
        .file_name()
        .map_or_else(|| command.to_string(), |n| n.to_string_lossy().into_owned())
}

/// Stop `child` and everything in its process group: SIGTERM, then SIGKILL after `grace`;
/// then everything else it started (its marker, its cgroup, its tree), SIGTERMed with the
/// group and SIGKILLed with it. Returns how it ended (None if it could not be waited for).
pub async fn terminate(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    let group = child.id();
    let ownership = Ownership::get();
    if let Ok(Some(status)) = child.try_wait() {
        signal_group(group, Signal::KILL);
        if let (Some(ownership), Some(pid)) = (ownership, group) {
            ownership.clear(pid, true).await;
        }
        return Some(status);
    }
    signal_group(group, Signal::TERM);
    if let (Some(ownership), Some(pid)) = (ownership, group) {
        ownership.ask_to_stop(pid).await;
    }
    let status = match tokio::time::timeout(grace, child.wait()).await {
        // Grandchildren that ignored SIGTERM go too.
        Ok(status) => {
            signal_group(group, Signal::KILL);
            status.ok()
        }
        Err(_) => {
            signal_group(group, Signal::KILL);
            child.wait().await.ok()
        }
    };
    if let (Some(ownership), Some(pid)) = (ownership, group) {
        ownership.clear(pid, true).await;
    }
    status
}

/// Send `signal` to the group of a child that may already have exited.
pub fn kill_group(child: &Child, signal: Signal) {
    signal_group(child.id(), signal);
}

/// Send `signal` to process `pid` (a stale pid fails with ESRCH, harmlessly).
fn signal(pid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Reap child `pid` if it has exited (an orphan the proxy adopted as subreaper).
fn reap(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
    }
}

/// Make the proxy the subreaper of its descendants: an orphaned process below it (a
/// server's daemon whose parent exited) becomes its child instead of init's.
fn become_subreaper() {
    #[cfg(target_os = "linux")]
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// Send `signal` to process group `pid` (a stale group id fails with ESRCH, harmlessly).
fn signal_group(pid: Option<u32>, signal: Signal) {
    if let Some(pid) = pid.and_then(|p| Pid::from_raw(i32::try_from(p).ok()?)) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// "exited with status 3" / "killed by signal 9 (SIGKILL)".
pub fn describe_exit(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    match status.signal() {
        Some(signal) => format!("killed by signal {signal} ({})", signal_name(signal)),
        None => "ended".into(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    const NAMES: [(Signal, &str); 11] = [
        (Signal::HUP, "SIGHUP"),
        (Signal::INT, "SIGINT"),
        (Signal::QUIT, "SIGQUIT"),
        (Signal::ILL, "SIGILL"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::BUS, "SIGBUS"),
        (Signal::FPE, "SIGFPE"),
        (Signal::KILL, "SIGKILL"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::PIPE, "SIGPIPE"),
        (Signal::TERM, "SIGTERM"),
    ];
    NAMES
        .iter()
        .find(|(known, _)| known.as_raw() == signal)
        .map_or("signal", |(_, name)| name)
}

#[cfg(test)]
mod start_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn exits_are_described_by_status_or_signal() {
        assert_eq!(
            describe_exit(&ExitStatus::from_raw(3 << 8)),
            "exited with status 3"
        );
        assert_eq!(
            describe_exit(&ExitStatus::from_raw(9)),
            "killed by signal 9 (SIGKILL)"
        );
    }

    #[tokio::test]
    async fn a_missing_command_is_named_by_its_file_name_only() {
        let error = spawn(
            "/no/secret-folder/acme-server",
            &["--token=s3cret".into()],
            &Default::default(),
            None,
        )
        .err()
        .expect("cannot spawn");
        assert!(matches!(error, SpawnError::NotFound(_)), "{error:?}");
        let error = error.to_string();
        assert!(
            error.contains("command not found: acme-server ("),
            "{error}"
        );
        assert!(!error.contains("secret"), "{error}");
    }

    #[tokio::test]
    async fn terminate_takes_the_whole_group() {
        // A shell that starts a grandchild and ignores SIGTERM: both must be gone.
        let script = "trap '' TERM; sleep 300 & echo $!; wait".to_string();
        let mut spawned =
            spawn("sh", &["-c".into(), script], &Default::default(), None).expect("sh runs");
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(&mut spawned.stdout).lines();
        let grandchild: i32 = lines
            .next_line()
            .await
            .unwrap()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let status = terminate(&mut spawned.child, Duration::from_millis(200)).await;
        assert!(status.is_some());
        // The grandchild was SIGKILLed with the group; once reaped by init it is gone.
        let mut gone = false;
        for _ in 0..250 {
            // Gone, or a zombie waiting for a reaper: either way it runs no more.
            let stat =
                std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
            if stat.is_empty()
                || stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone, "grandchild {grandchild} survived");
    }

    /// Threads of this process named `name` (as `/proc` shows it, 15 bytes at most).
    fn threads_named(name: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .map(|tasks| {
                tasks
                    .flatten()
                    .filter(|t| {
                        std::fs::read_to_string(t.path().join("comm"))
                            .is_ok_and(|comm| comm.trim_end() == name)
                    })
                    .count()
            })
            .unwrap_or(0)
    }

    #[test]
    fn a_server_outlives_the_thread_idle_time_of_the_runtime_that_started_it() {
        // Linux delivers the parent-death signal (SIGKILL here) when the forking *thread*
        // exits. A runtime whose blocking threads retire after 100 ms idle: a server forked
        // on one of them would die 100 ms after its start.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("spawn-test-pool")
            .thread_keep_alive(Duration::from_millis(100))
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let launch = Launch {
                command: "sleep".into(),
                args: vec!["60".into()],
                env: Default::default(),
                cwd: None,
            };
            let mut spawned = spawn_off_worker(launch).await.expect("sleep starts");
            // Every blocking thread of the runtime has retired (within 10 s).
            for _ in 0..500 {
                if threads_named("spawn-test-pool") == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(threads_named("spawn-test-pool"), 0, "blocking threads stay");
            // The server is still there a second later (a killed one is seen at once).
            for _ in 0..50 {
                let status = spawned.child.try_wait().expect("try_wait");
                assert!(status.is_none(), "the server ended: {status:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // kill_on_drop ends it.
            let _ = spawned.child.start_kill();
        });
    }
}
