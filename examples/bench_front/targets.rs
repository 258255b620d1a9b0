//! The paths under test and the processes behind them: the echo server direct (stdio and
//! HTTP), `ahp-proxy` (stdio front, `/mcp/echo`, `/mcp`; stdio and HTTP upstream) and the
//! peers (Rust `mcp-proxy` 0.6.0; the Python `mcp-proxy` when asked) and, when asked, an
//! earlier build of `ahp-proxy` ("before"), each ready to call.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::process::Command;

use crate::http_client::HttpSession;
use crate::mcp;
use crate::process::{descendant_pids, free_port, Reaped};
use crate::stdio_client::StdioClient;

/// `$BENCH_FRONT_AHP_ARGS`: arguments to `serve` of one more `ahp-proxy` path of each
/// front (stdio and `/mcp/echo`), to compare a variant.
fn variant_args() -> Option<Vec<String>> {
    let args = std::env::var("BENCH_FRONT_AHP_ARGS").ok()?;
    let args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    (!args.is_empty()).then_some(args)
}

/// Where the Rust peer is installed when `$MCP_PROXY_RS_BIN` does not say.
const RUST_PEER_DEFAULT: &str = "/work/tools/mcp-proxy/bin/mcp-proxy";

/// A path reached over stdio, with its one client.
pub struct StdioPath {
    pub label: String,
    pub client: StdioClient,
    pub call: String,
    /// The proxy in front (none when direct) and the echo server(s).
    pub proxy: Option<u32>,
    pub servers: Vec<u32>,
    /// Whether this is one of ours (its failure fails the run).
    pub ours: bool,
}

/// A path reached over streamable HTTP.
pub struct HttpPath {
    pub label: String,
    pub url: String,
    pub call: String,
    pub proxy: Option<u32>,
    pub servers: Vec<u32>,
    /// Whether this is one of ours (its failure fails the run; a peer's does not).
    pub ours: bool,
    /// Whether it answers a `tools/call` as an SSE stream (else plain JSON).
    pub sse: bool,
}

/// Every path, the processes behind them (stopped by `finish`), and what was left out.
pub struct Bench {
    pub stdio: Vec<StdioPath>,
    pub http: Vec<HttpPath>,
    pub processes: Vec<Reaped>,
    pub notes: Vec<String>,
    /// Setup failures of our own paths.
    pub failures: Vec<String>,
}

/// Which peers to start.
pub struct Peers {
    pub rust: Option<PathBuf>,
    pub python: Option<PathBuf>,
    /// An earlier `ahp-proxy` binary to measure beside this one.
    pub before: Option<PathBuf>,
}

/// What marks the paths of the earlier `ahp-proxy` in their labels.
pub const BEFORE: &str = "ahp-proxy (before)";

impl Peers {
    /// `$MCP_PROXY_RS_BIN`, else the default install path; `$MCP_PROXY_PY_BIN` (Python).
    pub fn find() -> (Peers, Vec<String>) {
        let mut notes = Vec::new();
        let from_env = |name: &str| std::env::var_os(name).filter(|p| !p.is_empty());
        let rust = from_env("MCP_PROXY_RS_BIN")
            .map(PathBuf::from)
            .or_else(|| Some(PathBuf::from(RUST_PEER_DEFAULT)))
            .filter(|p| p.is_file());
        if rust.is_none() {
            notes.push(format!(
                "Rust mcp-proxy 0.6.0: skipped, not found at $MCP_PROXY_RS_BIN or {RUST_PEER_DEFAULT} \
                 (install: cargo install mcp-proxy --version 0.6.0 --no-default-features --root /work/tools/mcp-proxy)"
            ));
        }
        let python = from_env("MCP_PROXY_PY_BIN").map(PathBuf::from);
        let before = from_env("BENCH_FRONT_BEFORE_BIN").map(PathBuf::from);
        if let Some(before) = before.as_ref().filter(|b| !b.is_file()) {
            notes.push(format!(
                "{BEFORE}: skipped, $BENCH_FRONT_BEFORE_BIN ({}) is not a file",
                before.display()
            ));
        }
        let before = before.filter(|b| b.is_file());
        (
            Peers {
                rust,
                python,
                before,
            },
            notes,
        )
    }

    pub fn none() -> Peers {
        Peers {
            rust: None,
            python: None,
            before: None,
        }
    }
}

impl Bench {
    /// Start everything and make sure every path answers an echo call.
    pub async fn start(proxy: &Path, examples: &Path, dir: &Path, peers: Peers) -> Bench {
        let mut bench = Bench {
            stdio: Vec::new(),
            http: Vec::new(),
            processes: Vec::new(),
            notes: Vec::new(),
            failures: Vec::new(),
        };
        let echo_stdio = format!(
            "[servers.echo]\ncommand = {:?}\nargs = [\"echo\"]\n",
            examples.display().to_string()
        );

        // stdio: the echo direct, then behind `ahp-proxy serve --stdio`.
        let outcome = bench
            .stdio_path(
                "direct stdio echo",
                Command::new(examples).arg("echo"),
                false,
                true,
            )
            .await;
        bench.note_failure("direct stdio echo", outcome, true);
        let config = dir.join("stdio.toml");
        let _ = std::fs::write(&config, format!("[mcp]\nhttp = false\n{echo_stdio}"));
        let outcome = bench
            .stdio_path(
                "ahp-proxy serve --stdio",
                Command::new(proxy).arg("--config").arg(&config).args([
                    "serve",
                    "--stdio",
                    "--listen",
                    "127.0.0.1:0",
                ]),
                true,
                true,
            )
            .await;
        bench.note_failure("ahp-proxy serve --stdio", outcome, true);
        // A variant to compare, e.g. `--worker-threads=2`.
        if let Some(extra) = variant_args() {
            let label = format!("ahp-proxy serve --stdio {}", extra.join(" "));
            let outcome = bench
                .stdio_path(
                    &label,
                    Command::new(proxy)
                        .arg("--config")
                        .arg(&config)
                        .args(["serve", "--stdio", "--listen", "127.0.0.1:0"])
                        .args(&extra),
                    true,
                    true,
                )
                .await;
            bench.note_failure(&label, outcome, true);
        }
        if let Some(before) = &peers.before {
            let label = format!("{BEFORE} serve --stdio");
            let outcome = bench
                .stdio_path(
                    &label,
                    Command::new(before).arg("--config").arg(&config).args([
                        "serve",
                        "--stdio",
                        "--listen",
                        "127.0.0.1:0",
                    ]),
                    true,
                    false,
                )
                .await;
            bench.note_failure(&label, outcome, false);
        }

        // HTTP: the echo's own HTTP server, direct; also the upstream of the HTTP rows.
        let port = free_port();
        let echo_url = format!("http://127.0.0.1:{port}/mcp");
        let mut echo_http = match Reaped::spawn(
            "example-server echo --http",
            Command::new(examples).args(["echo", "--http", &format!("127.0.0.1:{port}")]),
            false,
        ) {
            Ok(echo) => echo,
            Err(error) => {
                bench.failures.push(error);
                return bench;
            }
        };
        let ready = echo_http.wait_for_port(port).await;
        let echo_pid = echo_http.pid();
        bench.processes.push(echo_http);
        if let Err(error) = ready {
            bench.failures.push(error);
            return bench;
        }
        let outcome = bench
            .http_path("echo --http direct", &echo_url, None, Some(echo_pid), true)
            .await;
        bench.note_failure("echo --http direct", outcome, true);

        // ahp-proxy in front of the stdio echo: per-server and aggregated endpoints.
        let config = dir.join("http-stdio.toml");
        let _ = std::fs::write(&config, &echo_stdio);
        let outcome = bench
            .ahp_proxy(
                proxy,
                &config,
                &[
                    ("/echo", "ahp-proxy /mcp/echo → stdio echo"),
                    ("", "ahp-proxy /mcp → stdio echo"),
                ],
                None,
                &[],
                true,
            )
            .await;
        bench.note_failure("ahp-proxy → stdio echo", outcome, true);
        if let Some(before) = &peers.before {
            let label = format!("{BEFORE} /mcp/echo → stdio echo");
            let outcome = bench
                .ahp_proxy(before, &config, &[("/echo", &label)], None, &[], false)
                .await;
            bench.note_failure(&label, outcome, false);
        }
        // A variant to compare, e.g. `--worker-threads=1`.
        if let Some(extra) = variant_args() {
            let args: Vec<&str> = extra.iter().map(String::as_str).collect();
            let label = format!("ahp-proxy {} /mcp/echo → stdio echo", args.join(" "));
            let outcome = bench
                .ahp_proxy(proxy, &config, &[("/echo", &label)], None, &args, true)
                .await;
            bench.note_failure(&label, outcome, true);
        }
        if let Some(rust) = &peers.rust {
            let outcome = bench
                .rust_peer(
                    rust,
                    dir,
                    "Rust mcp-proxy 0.6.0 → stdio echo",
                    &format!(
                        "transport = \"stdio\"\ncommand = {:?}\nargs = [\"echo\"]",
                        examples.display().to_string()
                    ),
                    None,
                )
                .await;
            bench.note_failure("Rust mcp-proxy → stdio echo", outcome, false);
        }
        if let Some(python) = &peers.python {
            let outcome = bench.python_peer(python, examples).await;
            bench.note_failure("Python mcp-proxy → stdio echo", outcome, false);
        }

        // ... and in front of the HTTP echo.
        let config = dir.join("http-http.toml");
        let _ = std::fs::write(&config, format!("[servers.echo]\nurl = {echo_url:?}\n"));
        let outcome = bench
            .ahp_proxy(
                proxy,
                &config,
                &[("/echo", "ahp-proxy /mcp/echo → HTTP echo")],
                Some(echo_pid),
                &[],
                true,
            )
            .await;
        bench.note_failure("ahp-proxy → HTTP echo", outcome, true);
        if let Some(before) = &peers.before {
            let label = format!("{BEFORE} /mcp/echo → HTTP echo");
            let outcome = bench
                .ahp_proxy(
                    before,
                    &config,
                    &[("/echo", &label)],
                    Some(echo_pid),
                    &[],
                    false,
                )
                .await;
            bench.note_failure(&label, outcome, false);
        }
        if let Some(rust) = &peers.rust {
            let outcome = bench
                .rust_peer(
                    rust,
                    dir,
                    "Rust mcp-proxy 0.6.0 → HTTP echo",
                    &format!("transport = \"http\"\nurl = {echo_url:?}"),
                    Some(echo_pid),
                )
                .await;
            bench.note_failure("Rust mcp-proxy → HTTP echo", outcome, false);
        }
        bench
    }

    fn note_failure(&mut self, what: &str, outcome: Result<(), String>, ours: bool) {
        if let Err(error) = outcome {
            let line = format!("{what}: left out, it failed: {error}");
            if ours {
                self.failures.push(line);
            } else {
                self.notes.push(line);
            }
        }
    }

    /// A stdio path: `command` speaks MCP on its stdio (a proxy when `proxied`).
    async fn stdio_path(
        &mut self,
        label: &str,
        command: &mut Command,
        proxied: bool,
        ours: bool,
    ) -> Result<(), String> {
        let mut process = Reaped::spawn(label, command, true)?;
        let stdio = process.take_stdio().ok_or("no stdio")?;
        let pid = process.pid();
        self.processes.push(process);
        let mut client = StdioClient::connect(stdio).await?;
        // A proxy's first listing can come back before its server is ready.
        let deadline = Instant::now() + Duration::from_secs(30);
        let tool = loop {
            let answer = client.request("tools/list", "{}").await?;
            if let Some(tool) = mcp::echo_tool(&answer) {
                break tool;
            }
            if Instant::now() > deadline {
                return Err(format!("no echo tool in {answer}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let call = mcp::echo_call(&tool);
        let answer = client.request("tools/call", &call).await?;
        if !mcp::echoed(&answer) {
            return Err(format!("unexpected echo answer {answer}"));
        }
        let (proxy, servers) = if proxied {
            (Some(pid), descendant_pids(pid))
        } else {
            (None, vec![pid])
        };
        self.stdio.push(StdioPath {
            label: label.to_string(),
            client,
            call,
            proxy,
            servers,
            ours,
        });
        Ok(())
    }

    /// An HTTP path, once a session on it has seen the echo tool and called it.
    async fn http_path(
        &mut self,
        label: &str,
        url: &str,
        proxy: Option<u32>,
        upstream: Option<u32>,
        ours: bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let tool = loop {
            let mut session = HttpSession::open(url).await?;
            let answer = session.request("tools/list", "{}").await?;
            session.close().await;
            if let Some(tool) = mcp::echo_tool(&answer) {
                break tool;
            }
            if Instant::now() > deadline {
                return Err(format!("no echo tool in {answer}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let call = mcp::echo_call(&tool);
        let mut session = HttpSession::open(url).await?;
        let answer = session.request("tools/call", &call).await?;
        let sse = session.answered_sse;
        session.close().await;
        if !mcp::echoed(&answer) {
            return Err(format!("unexpected echo answer {answer}"));
        }
        // The echo: `upstream`, else the proxy's children (started by now: it answered).
        let servers = match (upstream, proxy) {
            (Some(upstream), _) => vec![upstream],
            (None, Some(proxy)) => descendant_pids(proxy),
            (None, None) => Vec::new(),
        };
        self.http.push(HttpPath {
            sse,
            label: label.to_string(),
            url: url.to_string(),
            call,
            proxy,
            servers,
            ours,
        });
        Ok(())
    }

    /// `ahp-proxy serve` on `config` (with `extra` arguments to `serve`), one path per
    /// (suffix of `/mcp`, label). The echo is its child (stdio) or `upstream`.
    async fn ahp_proxy(
        &mut self,
        binary: &Path,
        config: &Path,
        endpoints: &[(&str, &str)],
        upstream: Option<u32>,
        extra: &[&str],
        ours: bool,
    ) -> Result<(), String> {
        let mut process = Reaped::spawn(
            "ahp-proxy serve",
            Command::new(binary)
                .args(["--log-format", "json", "--config"])
                .arg(config)
                .args([
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--mcp-listen",
                    "127.0.0.1:0",
                ])
                .args(extra),
            false,
        )?;
        let url = process.wait_for_log("MCP endpoint listening", "url").await;
        let pid = process.pid();
        self.processes.push(process);
        let url = url?;
        for (suffix, label) in endpoints {
            let url = format!("{url}{suffix}");
            self.http_path(label, &url, Some(pid), upstream, ours)
                .await?;
        }
        Ok(())
    }

    /// The Rust `mcp-proxy` with one backend named `echo` (`backend`: its TOML fields).
    async fn rust_peer(
        &mut self,
        binary: &Path,
        dir: &Path,
        label: &str,
        backend: &str,
        upstream: Option<u32>,
    ) -> Result<(), String> {
        let port = free_port();
        let config = dir.join(format!("mcp-proxy-{port}.toml"));
        let text = format!(
            "[proxy]\nname = \"bench\"\n[proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\n\
             [[backends]]\nname = \"echo\"\n{backend}\n"
        );
        std::fs::write(&config, text).map_err(|e| format!("write {}: {e}", config.display()))?;
        let mut process = Reaped::spawn(
            "mcp-proxy (Rust)",
            Command::new(binary).arg("--config").arg(&config),
            false,
        )?;
        let ready = process.wait_for_port(port).await;
        let pid = process.pid();
        self.processes.push(process);
        ready?;
        let url = format!("http://127.0.0.1:{port}/");
        self.http_path(label, &url, Some(pid), upstream, false)
            .await
    }

    /// The Python `mcp-proxy` (PyPI) in front of the stdio echo, serving `/mcp`.
    async fn python_peer(&mut self, binary: &Path, examples: &Path) -> Result<(), String> {
        let port = free_port();
        let process = Reaped::spawn(
            "mcp-proxy (Python)",
            Command::new(binary)
                .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--"])
                .arg(examples)
                .arg("echo"),
            false,
        )?;
        // On SIGTERM it exits without reaping its stdio server; SIGINT is clean.
        let mut process = process.stop_with(libc::SIGINT);
        let ready = process.wait_for_port(port).await;
        let pid = process.pid();
        self.processes.push(process);
        ready?;
        let url = format!("http://127.0.0.1:{port}/mcp");
        self.http_path(
            "Python mcp-proxy → stdio echo",
            &url,
            Some(pid),
            None,
            false,
        )
        .await
    }

    /// Stop every process (stdio clients first, so stdio servers see their stdin close).
    pub async fn finish(self) {
        drop(self.stdio);
        for process in self.processes {
            process.finish(Duration::from_secs(1)).await;
        }
    }
}
