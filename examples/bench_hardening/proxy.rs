//! The proxy under attack, started by hand on any config (text or JSON log, optionally the
//! MCP HTTP front or `--stdio`): its addresses, its log, its memory and CPU, its shutdown.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How much of the log is kept as text (the rest is only counted).
const KEPT_LOG_BYTES: usize = 4 * 1024 * 1024;

/// How to start the proxy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// `--log-format text` (else JSON).
    pub text_log: bool,
    /// Serve the MCP HTTP front on a free port.
    pub mcp_http: bool,
    /// Serve MCP on stdin/stdout (`--stdio`).
    pub stdio: bool,
}

/// What the proxy wrote to stderr: every byte counted, the first few MiB kept.
#[derive(Debug, Default)]
pub struct Log {
    pub bytes: u64,
    pub text: Vec<u8>,
}

/// A running `ahp-proxy serve`; killed on drop.
pub struct Running {
    child: Child,
    /// `ws://…` of the AHP endpoint.
    pub url: String,
    /// `host:port` of the MCP HTTP front, when asked for.
    pub mcp: Option<String>,
    pub log: Arc<Mutex<Log>>,
    /// With `stdio`: the harness's end (its stdin, and its stdout as lines).
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<mpsc::Receiver<String>>,
}

impl Running {
    /// Start `binary` on `config`; `Err` with what it logged when it did not come up.
    pub fn start(binary: &Path, config: &Path, options: Options) -> Result<Self, String> {
        let mut command = Command::new(binary);
        command
            .args([
                "--log-format",
                if options.text_log { "text" } else { "json" },
                "--config",
            ])
            .arg(config)
            .args(["serve", "--listen", "127.0.0.1:0"]);
        if options.mcp_http {
            command.args(["--mcp-listen", "127.0.0.1:0"]);
        }
        if options.stdio {
            command.arg("--stdio");
        }
        let mut child = command
            .env("RUST_LOG", "info")
            .stdin(if options.stdio {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(if options.stdio {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let (mut addr, mut mcp) = (None, None);
        // What it logs before it listens is part of its log too.
        let mut seen = String::new();
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap_or(0) > 0 {
            seen.push_str(&line);
            if line.contains("MCP endpoint listening") {
                mcp = address_in(&line);
            }
            if line.contains("AHP endpoint listening") {
                addr = address_in(&line);
                break;
            }
            line.clear();
        }
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            let shown: String = seen.chars().take(4096).collect();
            return Err(format!("the proxy did not start: {}", shown.trim()));
        };
        let log = Arc::new(Mutex::new(Log {
            bytes: seen.len() as u64,
            text: seen.into_bytes(),
        }));
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut chunk = vec![0u8; 64 * 1024];
            while let Ok(n) = stderr.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut log = sink.lock().unwrap();
                log.bytes += n as u64;
                let room = KEPT_LOG_BYTES.saturating_sub(log.text.len()).min(n);
                log.text.extend_from_slice(&chunk[..room]);
            }
        });
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(|out| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        });
        Ok(Self {
            child,
            url: format!("ws://{addr}"),
            mcp: mcp.filter(|_| options.mcp_http),
            log,
            stdin,
            stdout,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory in MiB.
    pub fn rss_mib(&self) -> f64 {
        status_kib(self.pid(), "VmRSS:") as f64 / 1024.0
    }

    /// How many file descriptors it has open.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }

    /// Bytes the log has grown by so far.
    pub fn log_bytes(&self) -> u64 {
        self.log.lock().unwrap().bytes
    }

    /// The kept part of the log, as text.
    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap().text).into_owned()
    }

    /// Write one line to the proxy's stdin (`--stdio`).
    pub fn send_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().expect("started with stdio");
        stdin.write_all(line)?;
        stdin.write_all(b"\n")?;
        stdin.flush()
    }

    /// The next line the proxy writes on stdout within `patience` (`--stdio`).
    pub fn read_line(&self, patience: Duration) -> Option<String> {
        self.stdout.as_ref()?.recv_timeout(patience).ok()
    }

    /// Wait until the proxy has used no CPU for half a second (at most `limit`); how long
    /// that took from `since`, or `None` when it was still busy.
    pub fn settle(&self, since: Instant, limit: Duration) -> Option<Duration> {
        let mut last = cpu_ticks(self.pid());
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = cpu_ticks(self.pid());
            if now == last {
                return Some(since.elapsed().saturating_sub(Duration::from_millis(500)));
            }
            if since.elapsed() > limit {
                return None;
            }
            last = now;
        }
    }

    /// SIGTERM, and how long until it exited.
    pub fn stop(mut self) -> Duration {
        let started = Instant::now();
        // SAFETY: signalling our own child, which has not been reaped yet.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        started.elapsed()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `127.0.0.1:port` in a log line (text or JSON).
fn address_in(line: &str) -> Option<String> {
    let start = line.find("127.0.0.1:")?;
    let port: String = line[start + 10..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some(format!("127.0.0.1:{port}"))
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

/// `dir/name` holding `text` plus `mcp` under `[mcp]` (by default `http = false`: the MCP
/// HTTP front is off).
pub fn config(dir: &Path, name: &str, text: &str, mcp: &str) -> PathBuf {
    let path = dir.join(name);
    let mcp = if mcp.is_empty() {
        "http = false\n"
    } else {
        mcp
    };
    std::fs::write(&path, format!("{text}\n[mcp]\n{mcp}")).unwrap();
    path
}
