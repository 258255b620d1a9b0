//! Misbehaviour for the example servers (`<kind> --fault <mode>`): real child
//! processes that crash at random, hang, flood, print garbage or resist being stopped.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// One way for a server to misbehave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// Each tool call exits the process (status `--exit-code`) with probability
    /// `--fault-rate`, drawn from `--seed`: a crash in the middle of a call. Like a panic, it
    /// first writes a long backtrace (20,000 short lines) and then the reason on stderr.
    CrashRandom,
    /// Reads its requests but never answers `initialize` (nor anything else), and lives on
    /// until it is killed, even after its stdin closes.
    HangInitialize,
    /// After the handshake, writes valid MCP notifications to stdout without end, as fast as
    /// they are read: 1 MiB `notifications/message` lines, each followed by 64
    /// `notifications/tools/list_changed`. Its own answers go first: it still works.
    FloodStdout,
    /// From start-up, writes lines to stderr without end (and every 100th is 64 KiB long).
    /// Still answers.
    FloodStderr,
    /// Prints lines that are not JSON on stdout: a banner before its first message and a
    /// line between every two messages. Otherwise a normal server.
    NoiseStdout,
    /// After answering `initialize` and `tools/list`, starts one stdout line that never
    /// ends (no newline, ever): nothing it says can be read any more.
    EndlessLine,
    /// Ignores SIGTERM (only SIGKILL stops it) and starts a grandchild in its process group
    /// that ignores SIGTERM too (`linger`).
    IgnoreSigterm,
    /// On SIGTERM, says so on stderr, takes `--exit-delay-ms` to exit, then exits with
    /// status `--exit-code`: a server that dies (badly) while the sidecar shuts down.
    SlowExit,
    /// Not an MCP server: ignores SIGTERM and waits until its stdin closes or it is killed.
    /// What `ignore-sigterm` starts as its grandchild.
    Linger,
    /// Double-forks a daemon (`daemon`) in a session of its own (`setsid`), then serves MCP
    /// as usual: the daemon's parent exits at once, so it is nobody's child and in no
    /// process group of the server's.
    Daemonize,
    /// Starts a grandchild (`daemon`) in its own process group, with nothing on its stdin,
    /// then serves MCP as usual.
    DeafGrandchild,
    /// Not an MCP server: the middle process of `daemonize`, which starts the daemon (under
    /// `setsid` when that program exists) and exits.
    DaemonLauncher,
    /// Not an MCP server: ignores SIGTERM and SIGHUP, never reads its stdin, writes its pid
    /// to the file `$AHP_FAULT_PIDS` (one line each) and lives until SIGKILL.
    Daemon,
}

/// `tools/list` requests this process answered (reported by the `fault_stats` tool).
pub static TOOLS_LISTED: AtomicU64 = AtomicU64::new(0);
/// Rounds of the stdout flood written so far (reported by the `fault_stats` tool).
pub static FLOOD_ROUNDS: AtomicU64 = AtomicU64::new(0);

/// What `fault_stats` answers: `{"toolsListed": n, "floodRounds": m}`.
pub fn stats() -> String {
    serde_json::json!({
        "toolsListed": TOOLS_LISTED.load(Ordering::Relaxed),
        "floodRounds": FLOOD_ROUNDS.load(Ordering::Relaxed),
    })
    .to_string()
}

/// The fault options of `ahp-proxy-example-server`.
#[derive(Debug, Clone, clap::Args)]
pub struct FaultOptions {
    /// Misbehave this way (for fault tests; see `Fault`).
    #[arg(long, value_enum)]
    pub fault: Option<Fault>,
    /// With `--fault crash-random`: the chance (0 to 1) that a tool call crashes the server.
    #[arg(long, default_value_t = 0.3)]
    pub fault_rate: f64,
    /// With `--fault crash-random`: the random seed (default: from the clock and the pid).
    #[arg(long)]
    pub seed: Option<u64>,
    /// With `--fault slow-exit`: how long exiting takes after SIGTERM.
    #[arg(long, default_value_t = 300)]
    pub exit_delay_ms: u64,
    /// With `--fault daemonize` or `deaf-grandchild`: the daemon starts with the proxy's
    /// marker (`AHP_PROXY_OWNER`) taken out of its environment, as a program that clears
    /// its environment would.
    #[arg(long)]
    pub unmarked: bool,
}

impl FaultOptions {
    /// Whether `fault` is the chosen one.
    pub fn is(&self, fault: Fault) -> bool {
        self.fault == Some(fault)
    }
}

/// A seeded coin for `crash-random` (splitmix64: small, and the same on every platform).
#[derive(Debug, Clone)]
pub struct Dice {
    state: Arc<Mutex<u64>>,
    rate: f64,
    seed: u64,
}

impl Dice {
    /// A coin that comes up "crash" with probability `rate`.
    pub fn new(seed: Option<u64>, rate: f64) -> Self {
        let seed = seed.unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            nanos ^ (u64::from(std::process::id()) << 32)
        });
        Self {
            state: Arc::new(Mutex::new(seed)),
            rate: rate.clamp(0.0, 1.0),
            seed,
        }
    }

    /// Throw: true with probability `rate`.
    pub fn crash(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64) < self.rate
    }

    /// Exit at once when the coin says so (called inside a tool call).
    pub fn maybe_crash(&self, exit_code: i32) {
        if self.crash() {
            let mut stderr = std::io::stderr().lock();
            for frame in 0..20_000 {
                let _ = writeln!(stderr, "  at {frame}");
            }
            drop(stderr);
            eprintln!(
                "example-server: crashing at random during a tool call (seed {}), status {exit_code}",
                self.seed
            );
            std::process::exit(exit_code);
        }
    }
}

/// What runs before the MCP server starts: signal behaviour, the grandchild, the stderr
/// flood. Returns false when the process must not serve MCP at all (`linger`, `hang`).
pub async fn prepare(options: &FaultOptions, exit_code: i32) -> bool {
    match options.fault {
        Some(Fault::IgnoreSigterm) => {
            ignore_sigterm();
            start_grandchild();
        }
        Some(Fault::SlowExit) => {
            let delay = Duration::from_millis(options.exit_delay_ms);
            if let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                tokio::spawn(async move {
                    term.recv().await;
                    eprintln!(
                        "example-server: SIGTERM received; exiting slowly (--fault slow-exit)"
                    );
                    tokio::time::sleep(delay).await;
                    std::process::exit(exit_code);
                });
            }
        }
        Some(Fault::FloodStderr) => {
            std::thread::spawn(flood_stderr);
        }
        Some(Fault::Daemonize) => run_self(
            &["echo", "--fault", "daemon-launcher"],
            true,
            options.unmarked,
        ),
        Some(Fault::DeafGrandchild) => {
            run_self(&["echo", "--fault", "daemon"], false, options.unmarked)
        }
        Some(Fault::DaemonLauncher) => {
            launch_daemon();
            return false;
        }
        Some(Fault::Daemon) => {
            be_daemon().await;
            return false;
        }
        Some(Fault::Linger) => {
            ignore_sigterm();
            let mut sink = Vec::new();
            let _ = tokio::io::stdin().read_to_end(&mut sink).await;
            return false;
        }
        Some(Fault::HangInitialize) => {
            eprintln!("example-server: never answering initialize (--fault hang-initialize)");
            let mut buf = vec![0u8; 8192];
            let mut stdin = tokio::io::stdin();
            while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
            std::future::pending::<()>().await;
        }
        _ => {}
    }
    true
}

/// What the MCP server writes on: stdout itself, or a pipe through a task that adds the
/// noise (`noise-stdout`), the flood (`flood-stdout`) or the endless line (`endless-line`)
/// between whole messages.
pub fn stdout<W>(options: &FaultOptions, mut out: W) -> Box<dyn AsyncWrite + Send + Unpin>
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    let noisy = options.is(Fault::NoiseStdout);
    let endless = options.is(Fault::EndlessLine);
    let flood = options.is(Fault::FloodStdout);
    if !noisy && !endless && !flood {
        return Box::new(out);
    }
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let mut messages = tokio::io::BufReader::new(ours);
        let mut line = Vec::new();
        let mut written = 0u64;
        let flood_lines = flood_lines();
        if noisy {
            let _ = out
                .write_all(b"Example server 1.0 starting (this banner is not JSON)\n")
                .await;
        }
        loop {
            // After the handshake (initialize and tools/list answered), a flood fills every
            // moment the server has nothing to say; its own messages go first.
            let flooding = flood && written >= 2;
            tokio::select! {
                biased;
                read = messages.read_until(b'\n', &mut line) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(_) if line.ends_with(b"\n") => {}
                    Ok(_) => continue,
                },
                () = std::future::ready(()), if flooding => {
                    if out.write_all(&flood_lines).await.is_err() {
                        return;
                    }
                    FLOOD_ROUNDS.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            if noisy && written > 0 {
                let noise = format!("debug: message {written} sent, all fine\n");
                let _ = out.write_all(noise.as_bytes()).await;
            }
            if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
                return;
            }
            line.clear();
            written += 1;
            if endless && written == 2 {
                eprintln!(
                    "example-server: starting a stdout line that never ends (--fault endless-line)"
                );
                let _ = out
                    .write_all(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":""#)
                    .await;
                let chunk = vec![b'x'; 64 * 1024];
                while out.write_all(&chunk).await.is_ok() {}
                return;
            }
            if flood && written == 2 {
                eprintln!("example-server: flooding stdout with valid notifications (--fault flood-stdout)");
            }
        }
    });
    Box::new(theirs)
}

/// One round of the stdout flood: a 1 MiB `notifications/message`, then 64
/// `notifications/tools/list_changed`, each on its own line.
fn flood_lines() -> Vec<u8> {
    let mut lines = serde_json::json!({
        "jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "logger": "flood", "data": "f".repeat(1024 * 1024)}
    })
    .to_string()
    .into_bytes();
    lines.push(b'\n');
    for _ in 0..64 {
        lines.extend_from_slice(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n",
        );
    }
    lines
}

fn ignore_sigterm() {
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::spawn(async move {
            while term.recv().await.is_some() {
                eprintln!("example-server: SIGTERM ignored (--fault ignore-sigterm)");
            }
        });
    }
}

/// The `linger` grandchild, in this process's group, holding a pipe from us as its stdin.
fn start_grandchild() {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let child = std::process::Command::new(exe)
        .args(["echo", "--fault", "linger"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn();
    match child {
        // Leaked on purpose: the pipe stays open (and the grandchild alive) while we live.
        Ok(child) => std::mem::forget(child),
        Err(error) => eprintln!("example-server: cannot start the grandchild: {error}"),
    }
}

/// The variable that marks every process a server of the proxy starts.
const PROXY_MARKER: &str = "AHP_PROXY_OWNER";

/// Start this program with `args`, stdin and stdout empty (without the proxy's marker when
/// `unmarked`); wait for it when `wait` (the launcher exits at once), else leave it running
/// in this process's group.
fn run_self(args: &[&str], wait: bool, unmarked: bool) {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut command = std::process::Command::new(exe);
    if unmarked {
        command.env_remove(PROXY_MARKER);
    }
    let child = command
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    match child {
        Ok(mut child) if wait => {
            let _ = child.wait();
        }
        // Leaked on purpose: it lives on, in this process's group.
        Ok(child) => std::mem::forget(child),
        Err(error) => eprintln!("example-server: cannot start {args:?}: {error}"),
    }
}

/// `daemonize`'s middle process: start the daemon in a session of its own (with the
/// `setsid` program; in a process group of its own when that is missing) and return, so the
/// daemon loses its parent.
fn launch_daemon() {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let args = ["echo", "--fault", "daemon"];
    let null = std::process::Stdio::null;
    let with_setsid = std::process::Command::new("setsid")
        .arg(&exe)
        .args(args)
        .stdin(null())
        .stdout(null())
        .spawn();
    let started = with_setsid.or_else(|_| {
        use std::os::unix::process::CommandExt;
        std::process::Command::new(&exe)
            .args(args)
            .process_group(0)
            .stdin(null())
            .stdout(null())
            .spawn()
    });
    match started {
        Ok(child) => std::mem::forget(child),
        Err(error) => eprintln!("example-server: cannot start the daemon: {error}"),
    }
}

/// The daemon: records its pid, ignores SIGTERM and SIGHUP, never reads stdin, never ends.
async fn be_daemon() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    if let Some(path) = std::env::var_os("AHP_FAULT_PIDS") {
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(file, "{}", std::process::id());
        }
    }
    loop {
        tokio::select! {
            Some(()) = async { term.as_mut()?.recv().await } => {}
            Some(()) = async { hup.as_mut()?.recv().await } => {}
            () = tokio::time::sleep(Duration::from_secs(3600)) => {}
        }
    }
}

fn flood_stderr() {
    let mut stderr = std::io::stderr();
    let long = "e".repeat(64 * 1024);
    for n in 0u64.. {
        let line = if n % 100 == 99 {
            format!("example-server: stderr flood line {n} {long}\n")
        } else {
            format!("example-server: stderr flood line {n}\n")
        };
        if stderr.write_all(line.as_bytes()).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dice_follow_their_seed_and_rate() {
        let throws = |seed| {
            let dice = Dice::new(Some(seed), 0.3);
            (0..1000).map(|_| dice.crash()).collect::<Vec<_>>()
        };
        assert_eq!(throws(7), throws(7));
        assert_ne!(throws(7), throws(8));
        let crashes = throws(7).iter().filter(|c| **c).count();
        assert!((200..400).contains(&crashes), "{crashes}");
        assert!(!Dice::new(Some(1), 0.0).crash());
        assert!(Dice::new(Some(1), 1.0).crash());
    }
}
