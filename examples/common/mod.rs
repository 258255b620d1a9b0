//! Shared by the benchmark programs and the soak: find the release binary and start it on a
//! config, capturing the addresses it listens on and the warnings it logs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// The `ahp-proxy` binary next to this example (build it first with `cargo build --release`).
pub fn proxy_binary() -> PathBuf {
    built_binary("ahp-proxy")
}

/// The `ahp-proxy-example-server` binary next to this example (`cargo build --release` at the
/// root builds it with the proxy).
pub fn examples_binary() -> PathBuf {
    built_binary("ahp-proxy-example-server")
}

/// An empty scratch folder `ahp-proxy-<name>-<pid>` in the system's temporary folder.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ahp-proxy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn built_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let binary = exe.parent().unwrap().parent().unwrap().join(name);
    assert!(
        binary.exists(),
        "build the proxy first: cargo build --release ({})",
        binary.display()
    );
    binary
}

/// A running `ahp-proxy serve`; SIGTERMed and reaped on drop.
pub struct Proxy {
    pub child: Child,
    pub url: String,
    /// `http://…/mcp`, the aggregated MCP endpoint.
    pub mcp_url: String,
    /// Every warning and error line the proxy logged (JSON), in order.
    pub warnings: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// How many warning or error lines so far contain `needle`.
    pub fn warned(&self, needle: &str) -> usize {
        let lines = self.warnings.lock().unwrap();
        lines.iter().filter(|l| l.contains(needle)).count()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// `serve` on free ports (AHP and the MCP HTTP front), after `--config <file>`.
pub const SERVE_ON_FREE_PORTS: [&str; 5] = [
    "serve",
    "--listen",
    "127.0.0.1:0",
    "--mcp-listen",
    "127.0.0.1:0",
];

/// Start `binary serve` on `config` with a free port; returns once it listens.
pub fn start_proxy(binary: &Path, config: &Path) -> Proxy {
    let mut child = Command::new(binary)
        .args(["--log-format", "json", "--config"])
        .arg(config)
        .args(SERVE_ON_FREE_PORTS)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start proxy");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let (mcp_tx, mcp_rx) = mpsc::channel();
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let sink = warnings.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                if v["fields"]["message"] == "AHP endpoint listening" {
                    let _ = tx.send(v["fields"]["addr"].as_str().unwrap_or_default().to_string());
                }
                if v["fields"]["message"] == "MCP endpoint listening" {
                    let _ =
                        mcp_tx.send(v["fields"]["url"].as_str().unwrap_or_default().to_string());
                }
                if v["level"] == "WARN" || v["level"] == "ERROR" {
                    sink.lock().unwrap().push(line);
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("proxy address");
    // The MCP front logs its address before the AHP endpoint does (same reader thread).
    let mcp_url = mcp_rx.try_recv().unwrap_or_default();
    Proxy {
        child,
        url: format!("ws://{addr}"),
        mcp_url,
        warnings,
    }
}

/// The `p`th percentile of sorted samples (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
