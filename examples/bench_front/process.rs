//! The processes a benchmark starts: stderr drained (last lines kept for error messages),
//! stopped with everything they started, and their CPU time read from /proc.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const LOG_TAIL: usize = 200;

/// A child process whose stderr is drained, terminated with everything it started by
/// `finish` or on drop (e.g. while a panic unwinds).
pub struct Reaped {
    pub name: String,
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    watch: tokio::sync::watch::Receiver<usize>,
    /// The polite stop (SIGTERM unless `stop_with` says otherwise).
    stop: libc::c_int,
}

impl Reaped {
    /// Start `command`; with `stdio`, stdin and stdout are piped (for MCP over stdio).
    pub fn spawn(name: &str, command: &mut Command, stdio: bool) -> Result<Reaped, String> {
        let pipe = || if stdio { Stdio::piped() } else { Stdio::null() };
        let mut child = command
            .env("RUST_LOG", "info")
            .stdin(pipe())
            .stdout(pipe())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, watch) = tokio::sync::watch::channel(0usize);
        let stderr = child.stderr.take().expect("stderr is piped");
        let sink = log.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            let mut seen = 0usize;
            while let Ok(Some(line)) = lines.next_line().await {
                let mut log = sink.lock().unwrap();
                log.push(line);
                if log.len() > LOG_TAIL {
                    log.remove(0);
                }
                seen += 1;
                let _ = tx.send(seen);
            }
        });
        Ok(Reaped {
            name: name.to_string(),
            child,
            log,
            watch,
            stop: libc::SIGTERM,
        })
    }

    /// Stop it with this signal instead of SIGTERM.
    pub fn stop_with(mut self, signal: libc::c_int) -> Self {
        self.stop = signal;
        self
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Its stdout and stdin (once; only when spawned with `stdio`).
    pub fn take_stdio(&mut self) -> Option<(ChildStdout, ChildStdin)> {
        Some((self.child.stdout.take()?, self.child.stdin.take()?))
    }

    /// A line saying it exited, if it did.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!("{} exited ({status})", self.name)),
            _ => None,
        }
    }

    pub fn log_tail(&self) -> String {
        let log = self.log.lock().unwrap();
        let from = log.len().saturating_sub(20);
        format!(
            "--- last stderr lines of {} ---\n{}",
            self.name,
            log[from..].join("\n")
        )
    }

    /// Wait for a JSON log line with this message; returns its `field`.
    pub async fn wait_for_log(&mut self, message: &str, field: &str) -> Result<String, String> {
        let mut watch = self.watch.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.log.lock().unwrap().iter().find_map(|line| {
                let v = serde_json::from_str::<serde_json::Value>(line).ok()?;
                (v["fields"]["message"] == message)
                    .then(|| v["fields"][field].as_str().map(str::to_string))?
            });
            if let Some(found) = found {
                return Ok(found);
            }
            match tokio::time::timeout_at(deadline, watch.changed()).await {
                Ok(Ok(())) => {}
                _ => {
                    return Err(format!(
                        "{} never logged {message:?}\n{}",
                        self.name,
                        self.log_tail()
                    ))
                }
            }
        }
    }

    /// Wait until something accepts connections on `port`.
    pub async fn wait_for_port(&mut self, port: u16) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(exited) = self.exited() {
                tokio::time::sleep(Duration::from_millis(100)).await; // the rest of its stderr
                return Err(format!("{exited}\n{}", self.log_tail()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not listen on port {port}\n{}",
                    self.name,
                    self.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Give the process `grace` to exit by itself (its client closed stdin), then its stop
    /// signal, then SIGKILL; then SIGKILL whatever it started that is still alive.
    pub async fn finish(mut self, grace: Duration) {
        let Some(pid) = self.child.id() else {
            return;
        };
        let family = descendants(pid);
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            signal(pid, self.stop);
            if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
                .await
                .is_err()
            {
                let _ = self.child.kill().await;
            }
        }
        kill_survivors(&family);
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let Some(pid) = self.child.id() else {
            return;
        };
        let family = descendants(pid);
        signal(pid, self.stop);
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            match self.child.try_wait() {
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    let _ = self.child.start_kill();
                    let _ = self.child.try_wait();
                    break;
                }
                _ => break,
            }
        }
        kill_survivors(&family);
    }
}

/// CPU time of a process in µs, all its threads, children not included: the sum of its
/// threads' `/proc/<pid>/task/<tid>/schedstat` run time (ns resolution), else `utime +
/// stime` of `/proc/<pid>/stat` (clock ticks); 0 if it is gone. Time of threads that
/// already exited is not in the first; the processes measured keep their threads.
pub fn cpu_us(pid: u32) -> f64 {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            ns += std::fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    if ns > 0 {
        return ns as f64 / 1e3;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    // After the command: state is field 3 of stat, utime 14 and stime 15 (index 11, 12 here).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    // SAFETY: sysconf has no memory effects.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 * 1e6 / per_second
}

/// Context switches (voluntary + involuntary) of all a process's threads so far.
pub fn switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    let mut total = 0;
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// The pids of every live descendant of `root`.
pub fn descendant_pids(root: u32) -> Vec<u32> {
    descendants(root).into_iter().map(|(pid, _)| pid).collect()
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory effects; pid is a child we started.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// (pid, start time) of every live descendant of `root`, from /proc.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut table = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Some((ppid, start)) = parent_and_start(pid) {
                table.push((pid, ppid, start));
            }
        }
    }
    let mut family = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, start) in &table {
            if *ppid == parent {
                family.push((*pid, start.clone()));
                frontier.push(*pid);
            }
        }
    }
    family
}

fn parent_and_start(pid: u32) -> Option<(u32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    // After the command: state, ppid, ... starttime is field 22 of stat (index 19 here).
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.to_string()))
}

/// SIGKILL the processes of `family` that still exist (same pid and start time).
fn kill_survivors(family: &[(u32, String)]) {
    for (pid, start) in family {
        if parent_and_start(*pid).is_some_and(|(_, s)| &s == start) {
            signal(*pid, libc::SIGKILL);
        }
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}
