//! MCP front benchmark: prints numbers, baselines side by side in the same run, no assertions.
//!
//! Every target serves the same fast server, `ahp-proxy-example-server echo` (one tool,
//! `echo {text}`, returns the text):
//!
//! 1. `tools/call` latency with one call in flight, over stdio: an rmcp client talking to
//!    the echo directly vs. the same client talking to `ahp-proxy serve --stdio` whose one
//!    server is that echo. Both clients stay up and are measured in alternating blocks, so
//!    a hiccup of the machine hits both. Target (the issue's): the proxy adds no more than
//!    one direct round trip plus 25 µs at p50. Also printed, over the same blocks: CPU time
//!    and context switches per call of this process (the client), the proxy and the echo
//!    (all threads, from /proc), to show where a call's time goes.
//! 2. `tools/call` throughput over streamable HTTP at 1, 8 and 32 concurrent sessions (each
//!    its own rmcp client and MCP session, calls back to back): the echo's own HTTP server
//!    (`--http`) vs. `ahp-proxy`'s `/mcp` in front of the stdio echo vs., when it is
//!    installed, the Python `mcp-proxy` (PyPI, sparfenyuk/mcp-proxy) in front of the same
//!    stdio echo. `mcp-proxy` is looked up as `$MCP_PROXY_BIN`, else on `PATH`.
//!
//! Every call through `ahp-proxy` is also mirrored into AHP state; that cost is included.
//!
//! Run: `cargo build --release && cargo run --release --example bench_front` (with
//! `MCP_PROXY_BIN=/path/to/mcp-proxy` if `mcp-proxy` is not on `PATH`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;

use common::{examples_binary, percentile, proxy_binary};

use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

const LATENCY_WARMUP: usize = 500;
const LATENCY_CALLS: usize = 5000;
/// Calls per alternating block (direct, then proxied, then direct, ...).
const LATENCY_BLOCK: usize = 500;
const SESSIONS: [usize; 3] = [1, 8, 32];
const THROUGHPUT_WARMUP: Duration = Duration::from_millis(500);
const THROUGHPUT_MEASURE: Duration = Duration::from_secs(3);
/// What the issue allows the proxy to add at p50, besides one direct round trip.
const ALLOWANCE_US: f64 = 25.0;

type Client = RunningService<RoleClient, ()>;

fn main() {
    // reqwest (rmcp's client) needs the TLS provider the proxy uses.
    ahp_proxy::supervisor::https::install_provider();
    let binary = proxy_binary();
    let dir = std::env::temp_dir().join(format!("ahp-proxy-bench-front-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("machine: {}", machine());
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            latency(&binary, &dir).await;
            throughput(&binary, &dir).await;
        })
    }));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(panic) = outcome {
        // Every child was reaped while the panic unwound (see `Reaped`).
        std::panic::resume_unwind(panic);
    }
}

fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "{cores} cores ({model}), load average {} at start",
        load.join(" ")
    )
}

// ---------------------------------------------------------------------------------------
// 1. latency over stdio

async fn latency(binary: &Path, dir: &Path) {
    let config = dir.join("stdio.toml");
    std::fs::write(&config, echo_config("[mcp]\nhttp = false\n")).unwrap();

    let mut direct_child = Reaped::spawn(
        "example-server echo (stdio)",
        Command::new(examples_binary()).arg("echo"),
        true,
    );
    let direct = stdio_client(&mut direct_child).await;
    let mut proxy_child = Reaped::spawn(
        "ahp-proxy serve --stdio",
        Command::new(binary).arg("--config").arg(&config).args([
            "serve",
            "--stdio",
            "--listen",
            "127.0.0.1:0",
        ]),
        true,
    );
    let proxied = stdio_client(&mut proxy_child).await;
    // The proxy's first listing waits until its server is ready.
    wait_for_echo(&proxied, &proxy_child).await;

    let call = echo_call();
    for client in [&direct, &proxied] {
        check_echo(client.peer(), &call).await;
        for _ in 0..LATENCY_WARMUP {
            client.peer().call_tool(call.clone()).await.unwrap();
        }
    }
    // CPU time of [this process (the client), the proxy, the echo server(s)] during each
    // kind of block, to see where a call's time goes.
    let direct_pid = direct_child.child.id().unwrap();
    let proxy_pid = proxy_child.child.id().unwrap();
    let behind_proxy: Vec<u32> = descendants(proxy_pid).iter().map(|(p, _)| *p).collect();
    // [CPU ns, context switches] of each.
    let cpu_now = |target: usize| -> [[u64; 2]; 3] {
        let servers = if target == 0 {
            usage(direct_pid)
        } else {
            behind_proxy
                .iter()
                .map(|p| usage(*p))
                .fold([0, 0], |a, b| [a[0] + b[0], a[1] + b[1]])
        };
        [usage(std::process::id()), usage(proxy_pid), servers]
    };
    let mut cpu = [[[0u64; 2]; 3]; 2];
    let mut direct_us = Vec::with_capacity(LATENCY_CALLS);
    let mut proxied_us = Vec::with_capacity(LATENCY_CALLS);
    while direct_us.len() < LATENCY_CALLS {
        for (target, client, samples) in
            [(0, &direct, &mut direct_us), (1, &proxied, &mut proxied_us)]
        {
            let before = cpu_now(target);
            for _ in 0..LATENCY_BLOCK {
                let started = Instant::now();
                client.peer().call_tool(call.clone()).await.unwrap();
                samples.push(started.elapsed().as_secs_f64() * 1e6);
            }
            let after = cpu_now(target);
            for k in 0..3 {
                for m in 0..2 {
                    cpu[target][k][m] += after[k][m].saturating_sub(before[k][m]);
                }
            }
        }
    }

    println!(
        "\n== tools/call latency over stdio, 1 call in flight ({LATENCY_CALLS} calls each after {LATENCY_WARMUP} warm-up, alternating blocks of {LATENCY_BLOCK}) =="
    );
    println!("{:<52} {:>10} {:>10} {:>10}", "", "p50", "p99", "mean");
    let mut p50 = Vec::new();
    for (label, samples) in [
        (
            "baseline: rmcp client ↔ example-server echo",
            &mut direct_us,
        ),
        (
            "rmcp client ↔ ahp-proxy serve --stdio ↔ echo",
            &mut proxied_us,
        ),
    ] {
        samples.sort_by(f64::total_cmp);
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        p50.push(percentile(samples, 50.0));
        println!(
            "{:<52} {:>8.1}µs {:>8.1}µs {:>8.1}µs",
            label,
            percentile(samples, 50.0),
            percentile(samples, 99.0),
            mean
        );
    }
    println!(
        "\n{:<52} {:>16} {:>16} {:>16}",
        "CPU time / context switches per call (all threads)", "client", "proxy", "server"
    );
    for (label, target) in [("baseline", 0), ("through ahp-proxy --stdio", 1)] {
        let per_call = |k: usize| {
            let [ns, switches] = cpu[target][k];
            let calls = LATENCY_CALLS as f64;
            format!(
                "{:.1}µs / {:.1}",
                ns as f64 / 1e3 / calls,
                switches as f64 / calls
            )
        };
        let proxy = if target == 0 { "-".into() } else { per_call(1) };
        println!(
            "{:<52} {:>16} {:>16} {:>16}",
            label,
            per_call(0),
            proxy,
            per_call(2)
        );
    }
    let (direct_p50, proxied_p50) = (p50[0], p50[1]);
    let limit = 2.0 * direct_p50 + ALLOWANCE_US;
    println!(
        "target: proxied p50 <= 2 × direct p50 + {ALLOWANCE_US} µs: {proxied_p50:.1} µs vs {limit:.1} µs (= 2 × {direct_p50:.1} + {ALLOWANCE_US}) → {} (proxy adds {:.1} µs = {:.2} direct round trips)",
        if proxied_p50 <= limit { "met" } else { "not met" },
        proxied_p50 - direct_p50,
        (proxied_p50 - direct_p50) / direct_p50
    );

    close(direct).await;
    direct_child.finish(Duration::from_secs(3)).await;
    close(proxied).await;
    proxy_child.finish(Duration::from_secs(5)).await;
}

/// An rmcp client over the child's stdout/stdin.
async fn stdio_client(child: &mut Reaped) -> Client {
    let io = (
        child.child.stdout.take().unwrap(),
        child.child.stdin.take().unwrap(),
    );
    match ().serve(io).await {
        Ok(client) => client,
        Err(error) => panic!(
            "MCP handshake with {} failed: {error}\n{}",
            child.name,
            child.log_tail()
        ),
    }
}

// ---------------------------------------------------------------------------------------
// 2. throughput over streamable HTTP

struct Target {
    label: String,
    url: String,
    process: Reaped,
}

async fn throughput(binary: &Path, dir: &Path) {
    let mut targets = Vec::new();

    let port = free_port();
    let mut echo = Reaped::spawn(
        "example-server echo --http",
        Command::new(examples_binary()).args(["echo", "--http", &format!("127.0.0.1:{port}")]),
        false,
    );
    wait_for_port(port, &mut echo).await;
    targets.push(Target {
        label: "baseline: example-server echo --http".into(),
        url: format!("http://127.0.0.1:{port}/mcp"),
        process: echo,
    });

    let config = dir.join("http.toml");
    std::fs::write(&config, echo_config("")).unwrap();
    // The default runtime (a worker per core), then one worker (what `--stdio` uses).
    for (label, extra) in [
        ("ahp-proxy /mcp → stdio echo", None),
        (
            "ahp-proxy --worker-threads 1 /mcp → stdio echo",
            Some("--worker-threads=1"),
        ),
    ] {
        let ours = Reaped::spawn(
            "ahp-proxy serve (HTTP)",
            Command::new(binary)
                .args(["--log-format", "json", "--config"])
                .arg(&config)
                .args([
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--mcp-listen",
                    "127.0.0.1:0",
                ])
                .args(extra),
            false,
        );
        let url = ours.wait_for_log("MCP endpoint listening", "url").await;
        targets.push(Target {
            label: label.into(),
            url,
            process: ours,
        });
    }

    let mut skipped = None;
    match mcp_proxy_binary() {
        Some(peer) => {
            let version = std::process::Command::new(&peer)
                .arg("--version")
                .output()
                .map(|o| {
                    let text = format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    );
                    text.split_whitespace().last().unwrap_or("?").to_string()
                })
                .unwrap_or_else(|_| "?".into());
            let port = free_port();
            let mut command = Command::new(&peer);
            command
                .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--"])
                .arg(examples_binary())
                .arg("echo");
            println!(
                "\npeer proxy: mcp-proxy {version}: {} --host 127.0.0.1 --port {port} -- {} echo",
                peer.display(),
                examples_binary().display()
            );
            let mut theirs = Reaped::spawn("mcp-proxy", &mut command, false)
                // On SIGTERM it exits without reaping its stdio server; SIGINT is clean.
                .stop_with(libc::SIGINT);
            wait_for_port(port, &mut theirs).await;
            targets.push(Target {
                label: format!("mcp-proxy {version} /mcp → stdio echo"),
                url: format!("http://127.0.0.1:{port}/mcp"),
                process: theirs,
            });
        }
        None => {
            skipped = Some(
                "mcp-proxy (Python, PyPI `mcp-proxy`): skipped, not found on PATH or in $MCP_PROXY_BIN \
                 (install: `pip install mcp-proxy`, or `python3 -m venv /tmp/mcp-proxy-venv && \
                 /tmp/mcp-proxy-venv/bin/pip install mcp-proxy` and set \
                 MCP_PROXY_BIN=/tmp/mcp-proxy-venv/bin/mcp-proxy)",
            );
        }
    }

    // The proxies' first listing waits until their server is ready; list once per target.
    for target in &targets {
        let client = http_client(&target.url).await;
        wait_for_echo(&client, &target.process).await;
        check_echo(client.peer(), &echo_call()).await;
        close(client).await;
    }

    // rates[target][sessions], measured target by target at each concurrency level.
    let mut rates = vec![Vec::new(); targets.len()];
    for sessions in SESSIONS {
        for (i, target) in targets.iter().enumerate() {
            rates[i].push(run_sessions(&target.url, sessions).await);
        }
    }

    println!(
        "\n== tools/call throughput over streamable HTTP, calls/s in total ({} s per cell after {} ms warm-up; one rmcp client + MCP session per concurrent session) ==",
        THROUGHPUT_MEASURE.as_secs_f64(),
        THROUGHPUT_WARMUP.as_millis()
    );
    print!("{:<52}", "");
    for sessions in SESSIONS {
        print!(
            " {:>12}",
            format!("{sessions} session{}", if sessions == 1 { "" } else { "s" })
        );
    }
    println!();
    for (target, row) in targets.iter().zip(&rates) {
        print!("{:<52}", target.label);
        for rate in row {
            print!(" {:>12.0}", rate);
        }
        println!();
    }
    print_ratio("ratio ahp-proxy / direct", &rates[1], &rates[0]);
    print_ratio("ratio ahp-proxy (1 worker) / direct", &rates[2], &rates[0]);
    if rates.len() > 3 {
        print_ratio("ratio ahp-proxy / mcp-proxy", &rates[1], &rates[3]);
        print_ratio(
            "ratio ahp-proxy (1 worker) / mcp-proxy",
            &rates[2],
            &rates[3],
        );
    }
    if let Some(skipped) = skipped {
        println!("{skipped}");
    }

    for target in targets {
        target.process.finish(Duration::ZERO).await;
    }
}

fn print_ratio(label: &str, ours: &[f64], theirs: &[f64]) {
    print!("{label:<52}");
    for (a, b) in ours.iter().zip(theirs) {
        print!(" {:>11.2}×", a / b);
    }
    println!();
}

async fn http_client(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url.to_string()))
        .await
        .unwrap_or_else(|e| panic!("MCP handshake with {url} failed: {e}"))
}

/// `sessions` clients calling back to back; calls completed inside the measured window / s.
async fn run_sessions(url: &str, sessions: usize) -> f64 {
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(http_client(url).await);
    }
    let start = Instant::now();
    let measure_from = start + THROUGHPUT_WARMUP;
    let until = measure_from + THROUGHPUT_MEASURE;
    let workers: Vec<_> = clients
        .iter()
        .map(|client| {
            let peer: Peer<RoleClient> = client.peer().clone();
            tokio::spawn(async move {
                let call = echo_call();
                let mut done = 0u64;
                loop {
                    peer.call_tool(call.clone()).await.unwrap();
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    if now >= measure_from {
                        done += 1;
                    }
                }
                done
            })
        })
        .collect();
    let mut total = 0;
    for worker in workers {
        total += worker.await.unwrap();
    }
    for client in clients {
        close(client).await;
    }
    total as f64 / THROUGHPUT_MEASURE.as_secs_f64()
}

fn mcp_proxy_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MCP_PROXY_BIN").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("mcp-proxy"))
        .find(|p| p.is_file())
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_for_port(port: u16, process: &mut Reaped) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if let Ok(Some(status)) = process.child.try_wait() {
            tokio::time::sleep(Duration::from_millis(100)).await; // the rest of its stderr
            panic!("{} exited ({status})\n{}", process.name, process.log_tail());
        }
        assert!(
            Instant::now() < deadline,
            "{} did not listen on port {port}\n{}",
            process.name,
            process.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------
// shared

fn echo_config(extra: &str) -> String {
    format!(
        "{extra}[servers.echo]\ncommand = {:?}\nargs = [\"echo\"]\n",
        examples_binary().display().to_string()
    )
}

fn echo_call() -> CallToolRequestParams {
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), "hello".into());
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

async fn check_echo(peer: &Peer<RoleClient>, call: &CallToolRequestParams) {
    let result = peer.call_tool(call.clone()).await.unwrap();
    let text = serde_json::to_value(&result).unwrap()["content"][0]["text"].clone();
    assert_eq!(text, "hello", "unexpected echo result: {result:?}");
}

/// List tools until `echo` shows up (a proxy's listing can come back before its server).
async fn wait_for_echo(client: &Client, process: &Reaped) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let tools = client.peer().list_all_tools().await.unwrap();
        if tools.iter().any(|t| t.name == "echo") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no `echo` tool from {}: {:?}\n{}",
            process.name,
            tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>(),
            process.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn close(client: Client) {
    let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
}

/// A child process whose stderr is drained (last lines kept for error messages), and which
/// is terminated with everything it started: by `finish`, or on drop (e.g. while a panic
/// unwinds). With `stdio`, stdin and stdout are piped (for MCP over stdio).
struct Reaped {
    name: &'static str,
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    watch: tokio::sync::watch::Receiver<usize>,
    /// The polite stop (SIGTERM unless `stop_with` says otherwise).
    stop: libc::c_int,
}

const LOG_TAIL: usize = 200;

impl Reaped {
    fn spawn(name: &'static str, command: &mut Command, stdio: bool) -> Reaped {
        let pipe = || if stdio { Stdio::piped() } else { Stdio::null() };
        let mut child = command
            .env("RUST_LOG", "info")
            .stdin(pipe())
            .stdout(pipe())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, watch) = tokio::sync::watch::channel(0usize);
        let stderr = child.stderr.take().unwrap();
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
        Reaped {
            name,
            child,
            log,
            watch,
            stop: libc::SIGTERM,
        }
    }

    /// Stop it with this signal instead of SIGTERM.
    fn stop_with(mut self, signal: libc::c_int) -> Self {
        self.stop = signal;
        self
    }

    fn log_tail(&self) -> String {
        let log = self.log.lock().unwrap();
        format!(
            "--- last stderr lines of {} ---\n{}",
            self.name,
            log.join("\n")
        )
    }

    /// Wait for a JSON log line with this message; returns its `field`.
    async fn wait_for_log(&self, message: &str, field: &str) -> String {
        let mut watch = self.watch.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.log.lock().unwrap().iter().find_map(|line| {
                let v = serde_json::from_str::<serde_json::Value>(line).ok()?;
                (v["fields"]["message"] == message)
                    .then(|| v["fields"][field].as_str().map(str::to_string))?
            });
            if let Some(found) = found {
                return found;
            }
            match tokio::time::timeout_at(deadline, watch.changed()).await {
                Ok(Ok(())) => {}
                _ => panic!(
                    "{} never logged {message:?}\n{}",
                    self.name,
                    self.log_tail()
                ),
            }
        }
    }

    /// Give the process `grace` to exit by itself (its client closed stdin), then its stop
    /// signal, then SIGKILL; then SIGKILL whatever it started that is still alive.
    async fn finish(mut self, grace: Duration) {
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

/// [CPU time in ns, context switches (voluntary + involuntary)] of a process's threads
/// ([0, 0] if it is gone).
fn usage(pid: u32) -> [u64; 2] {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return [0, 0];
    };
    let mut total = [0, 0];
    for task in tasks.flatten() {
        let read = |file: &str| std::fs::read_to_string(task.path().join(file)).unwrap_or_default();
        total[0] += read("schedstat")
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
        total[1] += read("status")
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
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
