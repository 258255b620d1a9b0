//! `ahp-proxy-example-server <kind>`: the small real MCP servers the bundled examples, the
//! tests and the benchmarks launch. Not part of the proxy: a crate of its own in the workspace,
//! built next to the proxy by `cargo build` at the root.
//!
//! The kinds: notes, clock, an MCP App, an echo for benchmarks and two that fail on purpose
//! (`small`), every MCP feature a proxy must forward (`features`); any of them can also
//! misbehave on demand (`--fault`, see `faults`). `--http` serves streamable HTTP (`http`),
//! `--sse` the legacy HTTP+SSE transport (`sse`). Two fixtures write raw JSON-RPC instead of
//! going through rmcp (`raw`): the conformance suite's reference server (`conformance`) and
//! byte-crafted messages (`transparency`, and its modern-only twin `transparency-modern`); the
//! `witness` reports what reached it.

mod conformance;
mod faults;
mod features;
mod http;
mod raw;
mod small;
mod sse;
mod transparency;
mod transparency_modern;
mod witness;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rmcp::{ServerHandler, ServiceExt};

/// Which example to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Notes: add, list and read short notes (kept in `NOTES_DIR` when set).
    Notes,
    /// Clock: the current time, and a `sleep` tool.
    Clock,
    /// An MCP App: a `ui://` page and a tool whose `_meta.ui.resourceUri` points at it.
    App,
    /// Echo: returns its input; the benchmark baseline.
    Echo,
    /// Comes up, then crashes on demand: its `crash` tool exits the process.
    Crash,
    /// Fails to start: prints an error on stderr and exits 1 before the MCP handshake.
    Fail,
    /// Every MCP feature a proxy must forward, for end-to-end tests.
    Features,
    /// The MCP conformance suite's reference server (its tools, resources and prompts).
    Conformance,
    /// Byte-crafted raw JSON-RPC (odd key order, unknown fields, exotic numbers), for
    /// byte-for-byte transparency tests.
    Transparency,
    /// The same for MCP 2026-07-28: modern-only, stateless (over HTTP too), byte-crafted.
    TransparencyModern,
    /// Reports what reached it: `record` answers the exact params it got, `calls` how many
    /// `record` calls came (raw JSON-RPC).
    Witness,
}

/// Run one of the bundled example MCP servers (on stdio unless `--http`).
#[derive(Debug, Clone, Parser)]
#[command(name = "ahp-proxy-example-server", version)]
struct Options {
    /// Which example server.
    #[arg(value_enum)]
    kind: Kind,
    /// Further arguments, ignored (a launch report shows them: tests check how a proxy
    /// expanded a manifest's `args`).
    #[arg(value_name = "ARG", allow_hyphen_values = false)]
    extra: Vec<String>,
    /// Serve streamable HTTP on this address (`/mcp`) instead of stdio.
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
    /// Serve the legacy HTTP+SSE transport on this address (`GET /sse`, `POST /message`)
    /// instead of stdio.
    #[arg(long, conflicts_with = "http")]
    sse: Option<std::net::SocketAddr>,
    /// With `--http`: answer 401 unless this header (`name=value`) is present.
    #[arg(long)]
    require_header: Option<String>,
    /// Exit this many milliseconds after start-up (a crash for tests and demos).
    #[arg(long)]
    exit_after_ms: Option<u64>,
    /// Exit status for `--exit-after-ms` and the `crash` tool.
    #[arg(long, default_value_t = 3)]
    exit_code: i32,
    /// With `--exit-after-ms`: only crash if this file does not exist yet (then create it),
    /// so the server crashes once and comes up normally after a restart.
    #[arg(long)]
    once: Option<std::path::PathBuf>,
    /// Wait this many milliseconds before serving (a server slow to start).
    #[arg(long)]
    start_delay_ms: Option<u64>,
    /// Write how this process was launched (`{"argv", "cwd", "env"}` as JSON) to this file
    /// at start-up, so a test can see the launch spec a proxy used.
    #[arg(long, value_name = "FILE")]
    report: Option<std::path::PathBuf>,
    /// (transparency) Ask the client for its roots before answering `tools/list`.
    #[arg(long)]
    roots_when_listed: bool,
    /// (transparency-modern) Start every task id with this.
    #[arg(long)]
    task_prefix: Option<String>,
    /// Misbehaviour for fault tests.
    #[command(flatten)]
    faults: faults::FaultOptions,
}

fn main() -> ExitCode {
    // No logging: stdout belongs to MCP, stderr to the server's own lines.
    let status = run(Options::parse());
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}

/// Run the example until its client goes away. Returns the process exit status.
fn run(options: Options) -> i32 {
    if options.kind == Kind::Fail {
        eprintln!("example-server: refusing to start: this server fails on purpose");
        eprintln!("example-server: (it shows how a server that cannot start looks in AHP)");
        return 1;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("example-server: cannot start the runtime: {error}");
            return 1;
        }
    };
    runtime.block_on(serve(options))
}

async fn serve(options: Options) -> i32 {
    if let Some(file) = &options.report {
        if let Err(error) = report_launch(file) {
            eprintln!("example-server: cannot write the launch report: {error}");
            return 1;
        }
    }
    if let Some(ms) = options.start_delay_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(ms) = options.exit_after_ms {
        let crash = match &options.once {
            Some(marker) if marker.exists() => false,
            Some(marker) => std::fs::write(marker, b"crashed once\n").is_ok(),
            None => true,
        };
        if crash {
            let code = options.exit_code;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                eprintln!("example-server: exiting with status {code} as asked (--exit-after-ms)");
                std::process::exit(code);
            });
        }
    }
    if !faults::prepare(&options.faults, options.exit_code).await {
        return 0;
    }
    match options.kind {
        Kind::Conformance => {
            // Like the suite's own fixture: SSE streams with a 5 s retry for every request.
            let http = raw::http::Options {
                retry_ms: Some(5000),
                always_sse: true,
                stateless: false,
            };
            serve_raw(conformance::Conformance::default, options.http, http).await
        }
        Kind::Transparency => {
            let http = raw::http::Options::default();
            let roots_when_listed = options.roots_when_listed;
            let new_session = move || transparency::Transparency::new(roots_when_listed);
            serve_raw(new_session, options.http, http).await
        }
        Kind::TransparencyModern => {
            let http = raw::http::Options {
                stateless: true,
                ..raw::http::Options::default()
            };
            let prefix = options.task_prefix.clone().unwrap_or_default();
            let new_session = move || transparency_modern::TransparencyModern::new(prefix.clone());
            serve_raw(new_session, options.http, http).await
        }
        Kind::Witness => {
            let http = raw::http::Options::default();
            serve_raw(witness::Witness::default, options.http, http).await
        }
        Kind::Features => serve_with(features::Features::default(), options).await,
        kind => {
            let example = small::Example::new(kind, options.exit_code, &options.faults);
            serve_with(example, options).await
        }
    }
}

/// A raw fixture on stdio, or on streamable HTTP with `--http`.
async fn serve_raw<H, F>(
    new_session: F,
    addr: Option<std::net::SocketAddr>,
    http: raw::http::Options,
) -> i32
where
    H: raw::Handler,
    F: Fn() -> H + Send + Sync + 'static,
{
    match addr {
        Some(addr) => raw::http::serve(new_session, addr, http).await,
        None => raw::stdio::serve(new_session()).await,
    }
}

/// Write argv, cwd and the environment as JSON, atomically (a reader never sees half).
fn report_launch(file: &std::path::Path) -> std::io::Result<()> {
    let env: serde_json::Map<String, serde_json::Value> = std::env::vars()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    let report = serde_json::json!({
        "argv": std::env::args().collect::<Vec<_>>(),
        "cwd": std::env::current_dir()?.to_string_lossy(),
        "env": env,
    });
    let partial = file.with_extension("partial");
    std::fs::write(&partial, report.to_string())?;
    std::fs::rename(partial, file)
}

async fn serve_with<S: ServerHandler + Clone>(server: S, options: Options) -> i32 {
    if let Some(addr) = options.sse {
        return sse::serve_sse(server, addr).await;
    }
    match options.http {
        Some(addr) => http::serve_http(server, addr, options.require_header).await,
        None => {
            let (stdin, stdout) = rmcp::transport::stdio_pipes();
            let stdout = faults::stdout(&options.faults, stdout);
            match server.serve((stdin, stdout)).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                    0
                }
                Err(error) => {
                    eprintln!("example-server: MCP handshake failed: {error}");
                    1
                }
            }
        }
    }
}
