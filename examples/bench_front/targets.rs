//! The paths under test and the processes behind them: the echo server direct (stdio and
//! HTTP), `ahp-proxy` (stdio front, `/mcp/echo`, `/mcp`; stdio and HTTP upstream) and the
//! peers (Rust `mcp-proxy` 0.6.0; the Python `mcp-proxy` when asked) and, when asked, an
//! earlier build of `ahp-proxy` ("before"), each ready to call.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::process::Command;

use crate::http_client::HttpSession;
use crate::mcp::{self, Era};
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

/// What a call crosses on a path: its label in the tables, the call's `params`, the proxy
/// in front (none when direct) and the echo server(s) whose CPU counts.
pub struct Route {
    pub label: String,
    pub call: String,
    pub proxy: Option<u32>,
    pub servers: Vec<u32>,
    /// Whether this is one of ours (its failure fails the run; a peer's does not).
    pub ours: bool,
}

/// A path reached over stdio, with its one client.
pub struct StdioPath {
    pub route: Route,
    pub client: StdioClient,
}

/// A path reached over streamable HTTP.
pub struct HttpPath {
    pub route: Route,
    pub url: String,
    /// Whether it answers a `tools/call` as an SSE stream (else plain JSON).
    pub sse: bool,
    /// The era its client speaks ([`MODERN_MARK`] ends a modern path's label).
    pub era: Era,
    /// The echo tool's name on it.
    pub tool: String,
}

/// What ends the label of a path whose client speaks 2026-07-28 (a stateless POST a call).
pub const MODERN_MARK: &str = " (2026-07-28)";

/// The echo tool's name, from `list` (a `tools/list` answer) asked until it names it: a
/// proxy's first listing can come back before its server is ready.
async fn echo_tool(
    mut list: impl AsyncFnMut() -> Result<String, String>,
) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = list().await?;
        if let Some(tool) = mcp::echo_tool(&answer) {
            return Ok(tool);
        }
        if Instant::now() > deadline {
            return Err(format!("no echo tool in {answer}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An echo the proxies stand in front of.
struct Upstream<'a> {
    /// As the labels say it: `stdio echo`, `HTTP echo`.
    name: &'static str,
    /// `ahp-proxy`'s configuration with this echo as its one server.
    config: &'a Path,
    /// The echo's process, when it runs on its own (HTTP); else it is a proxy's child.
    pid: Option<u32>,
    /// The Rust peer's `[[backends]]` fields for it.
    rust_backend: String,
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
/// What marks the path of this build run as it ran by default before issue 34 (a worker
/// per core), beside the default (one worker).
pub const FORMER_DEFAULT: &str = "ahp-proxy (former default)";

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
        bench
            .stdio_front(proxy, &config, "ahp-proxy serve --stdio", &[], true)
            .await;
        // A variant to compare, e.g. `--worker-threads=2`.
        if let Some(extra) = variant_args() {
            let label = format!("ahp-proxy serve --stdio {}", extra.join(" "));
            bench
                .stdio_front(proxy, &config, &label, &extra, true)
                .await;
        }
        if let Some(before) = &peers.before {
            let label = format!("{BEFORE} serve --stdio");
            bench.stdio_front(before, &config, &label, &[], false).await;
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
        // The same echo spoken to at 2026-07-28: a stateless POST per call.
        let label = format!("echo --http direct{MODERN_MARK}");
        let outcome = bench
            .http_path(&label, &echo_url, None, Some(echo_pid), true)
            .await;
        bench.note_failure(&label, outcome, true);

        // ahp-proxy in front of the stdio echo: per-server and aggregated endpoints.
        let config = dir.join("http-stdio.toml");
        let _ = std::fs::write(&config, &echo_stdio);
        let stdio_echo = Upstream {
            name: "stdio echo",
            config: &config,
            pid: None,
            rust_backend: format!(
                "transport = \"stdio\"\ncommand = {:?}\nargs = [\"echo\"]",
                examples.display().to_string()
            ),
        };
        bench
            .in_front_of(&stdio_echo, proxy, &peers, dir, &[("", "/mcp")])
            .await;
        // The default before issue 34, a worker per core, beside the default (one worker).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cores > 1 {
            let workers = format!("--worker-threads={cores}");
            let label = format!("{FORMER_DEFAULT} {workers} /mcp/echo → stdio echo");
            let outcome = bench
                .ahp_proxy(
                    proxy,
                    &config,
                    &[("/echo", &label)],
                    None,
                    &[&workers],
                    true,
                )
                .await;
            bench.note_failure(&label, outcome, true);
        }
        // A variant to compare, e.g. `--worker-threads=1`.
        if let Some(extra) = variant_args() {
            let args: Vec<&str> = extra.iter().map(String::as_str).collect();
            let label = format!("ahp-proxy {} /mcp/echo → stdio echo", args.join(" "));
            // Its modern endpoint too, to compare the variant for both eras of harness.
            let modern = format!("{label}{MODERN_MARK}");
            let endpoints = [("/echo", label.as_str()), ("/echo", modern.as_str())];
            let outcome = bench
                .ahp_proxy(proxy, &config, &endpoints, None, &args, true)
                .await;
            bench.note_failure(&label, outcome, true);
        }
        if let Some(python) = &peers.python {
            let outcome = bench.python_peer(python, examples).await;
            bench.note_failure("Python mcp-proxy → stdio echo", outcome, false);
        }

        // ... and in front of the HTTP echo.
        let config = dir.join("http-http.toml");
        let _ = std::fs::write(&config, format!("[servers.echo]\nurl = {echo_url:?}\n"));
        let http_echo = Upstream {
            name: "HTTP echo",
            config: &config,
            pid: Some(echo_pid),
            rust_backend: format!("transport = \"http\"\nurl = {echo_url:?}"),
        };
        bench.in_front_of(&http_echo, proxy, &peers, dir, &[]).await;
        bench
    }

    /// `ahp-proxy` in front of `upstream` (`/mcp/echo`, and `more` endpoints: (suffix of
    /// `/mcp`, its name)), then the earlier build and the Rust peer, when there are.
    async fn in_front_of(
        &mut self,
        upstream: &Upstream<'_>,
        proxy: &Path,
        peers: &Peers,
        dir: &Path,
        more: &[(&str, &str)],
    ) {
        let name = upstream.name;
        let mut labels: Vec<(&str, String)> = std::iter::once(("/echo", "/mcp/echo"))
            .chain(more.iter().copied())
            .map(|(suffix, endpoint)| (suffix, format!("ahp-proxy {endpoint} → {name}")))
            .collect();
        // The per-server endpoint for a modern harness too, on the same proxy.
        labels.push((
            "/echo",
            format!("ahp-proxy /mcp/echo → {name}{MODERN_MARK}"),
        ));
        let endpoints: Vec<(&str, &str)> = labels.iter().map(|(s, l)| (*s, l.as_str())).collect();
        let outcome = self
            .ahp_proxy(proxy, upstream.config, &endpoints, upstream.pid, &[], true)
            .await;
        self.note_failure(&format!("ahp-proxy → {name}"), outcome, true);
        if let Some(before) = &peers.before {
            let label = format!("{BEFORE} /mcp/echo → {name}");
            let outcome = self
                .ahp_proxy(
                    before,
                    upstream.config,
                    &[("/echo", &label)],
                    upstream.pid,
                    &[],
                    false,
                )
                .await;
            self.note_failure(&label, outcome, false);
        }
        if let Some(rust) = &peers.rust {
            let label = format!("Rust mcp-proxy 0.6.0 → {name}");
            let outcome = self
                .rust_peer(rust, dir, &label, &upstream.rust_backend, upstream.pid)
                .await;
            self.note_failure(&label, outcome, false);
        }
    }

    /// `binary serve --stdio` on `config` (with `extra` arguments) as a stdio path.
    async fn stdio_front(
        &mut self,
        binary: &Path,
        config: &Path,
        label: &str,
        extra: &[String],
        ours: bool,
    ) {
        let mut command = Command::new(binary);
        command
            .arg("--config")
            .arg(config)
            .args(["serve", "--stdio", "--listen", "127.0.0.1:0"])
            .args(extra);
        let outcome = self.stdio_path(label, &mut command, true, ours).await;
        self.note_failure(label, outcome, ours);
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
        let tool = echo_tool(async || client.request("tools/list", "{}").await).await?;
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
            route: Route {
                label: label.to_string(),
                call,
                proxy,
                servers,
                ours,
            },
            client,
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
        let era = match label.ends_with(MODERN_MARK) {
            true => Era::Modern,
            false => Era::Legacy,
        };
        let tool = echo_tool(async || {
            let mut session = HttpSession::open_as(url, era).await?;
            let answer = session.request("tools/list", "{}").await;
            session.close().await;
            answer
        })
        .await?;
        let call = mcp::params_for(era, &mcp::echo_call(&tool));
        let mut session = HttpSession::open_as(url, era).await?;
        session.calls_tool(&tool);
        let answer = session.exchange("tools/call", &call).await;
        let answer =
            answer.map(|range| String::from_utf8_lossy(session.body(range)).into_owned())?;
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
            route: Route {
                label: label.to_string(),
                call,
                proxy,
                servers,
                ours,
            },
            url: url.to_string(),
            sse,
            era,
            tool,
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
                .args(crate::common::SERVE_ON_FREE_PORTS)
                .args(extra),
            false,
        )?;
        let url = process.wait_for_log("MCP endpoint listening", "url").await;
        if let Some(watcher) = std::env::var_os("BENCH_FRONT_AHP_WATCHER") {
            // An AHP client following the default session, as an IDE beside the harness
            // would: the host then keeps the replay log (every mirrored action encoded).
            // `=chats`: it follows the session's chats too, and is sent every mirrored action.
            let ws = process
                .wait_for_log("AHP endpoint listening", "url")
                .await?;
            let paths = endpoints
                .iter()
                .map(|(_, label)| *label)
                .collect::<Vec<_>>()
                .join(", ");
            tokio::spawn(crate::watcher::watch_ahp(ws, watcher == "chats", paths));
        }
        let pid = process.pid();
        self.processes.push(process);
        let url = url?;
        for (suffix, label) in endpoints {
            let url = format!("{url}{suffix}");
            let outcome = self.http_path(label, &url, Some(pid), upstream, ours).await;
            // A modern harness's path that does not work is said, and the run goes on
            // (through a dual-era HTTP server it was refused with -32020 at the time of
            // writing: the harness's _meta version was sent in a legacy session).
            match label.ends_with(MODERN_MARK) {
                true => self.note_failure(label, outcome, false),
                false => outcome?,
            }
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
