//! MCP front benchmark: prints numbers (no assertions), every path side by side in one run
//! with one light client for all, in interleaved blocks (A, B, C, A, B, C …).
//!
//! Every path ends at the same `ahp-proxy-example-server echo` (one tool, `echo {text}`):
//!
//! - stdio, one call in flight, with a raw JSON-lines client (no MCP framework): the echo
//!   direct, and `ahp-proxy serve --stdio` whose one server is the echo;
//! - streamable HTTP, with a light HTTP/1.1 client (one keep-alive connection per session;
//!   `initialize` + `notifications/initialized`, then `tools/call echo` back to back, JSON
//!   or SSE answers): `echo --http` direct; `ahp-proxy` `/mcp/echo` and `/mcp` in front of
//!   the stdio echo; the Rust `mcp-proxy` 0.6.0 in front of the stdio echo; `ahp-proxy` and
//!   the Rust `mcp-proxy` in front of `echo --http`; each at 1, 8 and 32 sessions;
//! - the same HTTP client speaking 2026-07-28 (no session: a stateless POST per call, with
//!   `_meta` and the standard headers; labels end in "(2026-07-28)"): `echo --http` direct
//!   and `ahp-proxy` `/mcp/echo` in front of each echo, beside the legacy paths;
//! - `ahp-proxy` as it ran by default before issue 34 (`--worker-threads=<cores>`) in front
//!   of the stdio echo, beside the default (one worker);
//! - first, start-up of 50 stdio echo servers: `ahp-proxy serve` spawned until an official
//!   AHP client saw all `ready`, beside the servers spawned and initialized here (rmcp's
//!   client and the raw one), interleaved runs.
//!
//! Printed: the issue-18 table (added p50 over direct stdio, calls/s at 1/8/32 sessions),
//! latency p50/p99, CPU µs per call (proxy, echo, this client, from /proc), and
//! the targets of issues 18, 34 and 30 (the modern paths). Every call through `ahp-proxy` is mirrored into its AHP default
//! chat (committed with the official reducers; at 32 sessions no call waits long enough to
//! be counted as not shown).
//!
//! Run: `cargo build --release --examples --bins && target/release/examples/bench_front`
//! (about 2–3 minutes; `--quick` runs a few seconds, `--no-peers` leaves the peers out).
//! Peers: the Rust `mcp-proxy` is `$MCP_PROXY_RS_BIN`, else /work/tools/mcp-proxy/bin/mcp-proxy
//! (`cargo install mcp-proxy --version 0.6.0 --no-default-features --root /work/tools/mcp-proxy`);
//! the Python `mcp-proxy` (PyPI) runs when `$MCP_PROXY_PY_BIN` names it; an earlier
//! `ahp-proxy` build runs beside this one when `$BENCH_FRONT_BEFORE_BIN` names it (its
//! paths are labelled "ahp-proxy (before)", and a before/after table is printed).
//! Knobs: `BENCH_FRONT_ROUNDS` (3), `BENCH_FRONT_BLOCK_MS` (1500, measured part of an HTTP
//! block), `BENCH_FRONT_WARMUP_MS` (250, the rest), `BENCH_FRONT_STDIO_CALLS` (1000 a block),
//! `BENCH_FRONT_SESSIONS` (1,8,32), `BENCH_FRONT_AHP_ARGS` (e.g. `--worker-threads=2`: one
//! more stdio and one more `/mcp/echo` path (legacy and 2026-07-28 clients), `ahp-proxy serve`
//! with these arguments),
//! `BENCH_FRONT_ONLY` (comma-separated parts of path labels: measure only those, e.g. to
//! profile one proxy by the pid printed for it), `BENCH_FRONT_AHP_WATCHER` (set: an official
//! AHP client, in this process, follows the default session of each `ahp-proxy serve`, as an
//! IDE would; `=chats`: and its chats, so it is sent every mirrored action),
//! `BENCH_FRONT_SERVERS` (50) and `BENCH_FRONT_STARTUP_RUNS` (5; `--quick` 1; 0 leaves the
//! start-up out; `BENCH_FRONT_ONLY=start-up` measures only it).

#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
mod http_client;
mod issue_targets;
mod mcp;
mod measure;
mod process;
mod report;
mod startup;
mod stdio_client;
mod targets;
mod watcher;

use std::process::ExitCode;
use std::time::Duration;

use measure::Tally;
use report::Row;
use targets::{Bench, Peers};

/// HTTP sessions calling at once, by default.
const SESSIONS: [usize; 3] = [1, 8, 32];
/// What `BENCH_FRONT_ONLY` names to measure the start-up of many servers.
const STARTUP: &str = "start-up";
/// Stdio blocks per path in each round (they are short).
const STDIO_BLOCKS_PER_ROUND: usize = 2;

/// How long to measure (environment and arguments).
struct Knobs {
    rounds: usize,
    stdio_calls: usize,
    stdio_warmup: usize,
    http_warmup: Duration,
    http_measure: Duration,
    peers: bool,
    /// HTTP sessions calling at once, one block per level.
    sessions: Vec<usize>,
    /// Label substrings of the paths to measure (all when empty).
    only: Vec<String>,
    /// Start-up: stdio servers declared, and interleaved runs (0: not measured).
    servers: usize,
    startup_runs: usize,
}

impl Knobs {
    fn read() -> Result<Knobs, String> {
        let mut quick = false;
        let mut peers = true;
        for arg in std::env::args().skip(1) {
            match arg.as_str() {
                "--quick" => quick = true,
                "--no-peers" => peers = false,
                other => return Err(format!("unknown argument {other:?} (--quick, --no-peers)")),
            }
        }
        let env = |name: &str, default: u64, quick_default: u64| -> Result<u64, String> {
            match std::env::var(name) {
                Ok(v) => v
                    .parse()
                    .map_err(|_| format!("{name}={v:?} is not a number")),
                Err(_) => Ok(if quick { quick_default } else { default }),
            }
        };
        let stdio_calls = env("BENCH_FRONT_STDIO_CALLS", 1000, 100)? as usize;
        Ok(Knobs {
            rounds: env("BENCH_FRONT_ROUNDS", 3, 1)?.max(1) as usize,
            stdio_calls,
            stdio_warmup: stdio_calls,
            http_warmup: Duration::from_millis(env("BENCH_FRONT_WARMUP_MS", 250, 30)?),
            http_measure: Duration::from_millis(env("BENCH_FRONT_BLOCK_MS", 1500, 150)?.max(1)),
            peers,
            sessions: match std::env::var("BENCH_FRONT_SESSIONS") {
                Ok(list) => list
                    .split(',')
                    .map(|n| n.trim().parse::<usize>().ok().filter(|n| *n > 0))
                    .collect::<Option<Vec<_>>>()
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| format!("BENCH_FRONT_SESSIONS={list:?}: say e.g. 1,8,32"))?,
                Err(_) => SESSIONS.to_vec(),
            },
            servers: env("BENCH_FRONT_SERVERS", 50, 50)?.max(1) as usize,
            startup_runs: env("BENCH_FRONT_STARTUP_RUNS", 5, 1)? as usize,
            only: std::env::var("BENCH_FRONT_ONLY")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        })
    }

    fn measures(&self, label: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| label.contains(s.as_str()))
    }
}

fn main() -> ExitCode {
    let knobs = match Knobs::read() {
        Ok(knobs) => knobs,
        Err(error) => {
            eprintln!("bench_front: {error}");
            return ExitCode::from(2);
        }
    };
    let dir = std::env::temp_dir().join(format!("ahp-proxy-bench-front-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(error) = std::fs::create_dir_all(&dir) {
        eprintln!("bench_front: cannot create {}: {error}", dir.display());
        return ExitCode::FAILURE;
    }
    // One thread for the clients: no hops between threads on the client side.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let ok = runtime.block_on(run(&knobs, &dir));
    let _ = std::fs::remove_dir_all(&dir);
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Start, measure, print; false when one of our paths failed.
async fn run(knobs: &Knobs, dir: &std::path::Path) -> bool {
    println!("machine: {}", machine());
    println!(
        "plan: {} round(s); each round {STDIO_BLOCKS_PER_ROUND} stdio blocks of {} calls per stdio path, then per HTTP path one block at each of {:?} sessions ({} ms warm-up + {} ms measured), paths interleaved",
        knobs.rounds,
        knobs.stdio_calls,
        knobs.sessions,
        knobs.http_warmup.as_millis(),
        knobs.http_measure.as_millis()
    );
    // Start-up first, with nothing else of ours running.
    let mut failures = Vec::new();
    let startup = match knobs.startup_runs > 0 && knobs.measures(STARTUP) {
        true => {
            eprintln!("bench_front: start-up of {} stdio servers", knobs.servers);
            let measured = startup::measure(
                &common::proxy_binary(),
                &common::examples_binary(),
                dir,
                knobs.servers,
                knobs.startup_runs,
            )
            .await;
            measured
                .map_err(|error| failures.push(format!("{STARTUP}: {error}")))
                .ok()
        }
        false => None,
    };
    let (peers, mut notes) = if knobs.peers {
        Peers::find()
    } else {
        (Peers::none(), vec!["peers: left out (--no-peers)".into()])
    };
    let mut bench = Bench::start(
        &common::proxy_binary(),
        &common::examples_binary(),
        dir,
        peers,
    )
    .await;
    notes.append(&mut bench.notes);
    bench.stdio.retain(|p| knobs.measures(&p.route.label));
    bench.http.retain(|p| knobs.measures(&p.route.label));
    for path in &bench.stdio {
        println!(
            "path: {} (proxy pid {})",
            path.route.label,
            path.route.proxy.map_or("—".into(), |p| p.to_string()),
        );
    }
    for path in &bench.http {
        println!(
            "path: {} at {} (proxy pid {}; tools/call answered as {})",
            path.route.label,
            path.url,
            path.route.proxy.map_or("—".into(), |p| p.to_string()),
            if path.sse {
                "an SSE stream"
            } else {
                "plain JSON"
            }
        );
    }
    failures.append(&mut bench.failures);

    let mut stdio_tallies: Vec<Tally> = bench.stdio.iter().map(|_| Tally::default()).collect();
    let mut http_tallies: Vec<Vec<Tally>> = bench
        .http
        .iter()
        .map(|_| knobs.sessions.iter().map(|_| Tally::default()).collect())
        .collect();
    let mut stdio_failed: Vec<Option<String>> = vec![None; bench.stdio.len()];
    let mut http_failed: Vec<Option<String>> = vec![None; bench.http.len()];

    for (path, failed) in bench.stdio.iter_mut().zip(&mut stdio_failed) {
        let mut warmup = Tally::default();
        if let Err(error) = measure::stdio_block(path, knobs.stdio_warmup, &mut warmup).await {
            *failed = Some(error);
        }
    }
    for round in 0..knobs.rounds {
        eprintln!("bench_front: round {} of {}", round + 1, knobs.rounds);
        for _ in 0..STDIO_BLOCKS_PER_ROUND {
            for (i, path) in bench.stdio.iter_mut().enumerate() {
                if stdio_failed[i].is_some() {
                    continue;
                }
                let outcome =
                    measure::stdio_block(path, knobs.stdio_calls, &mut stdio_tallies[i]).await;
                stdio_failed[i] = outcome.err();
            }
        }
        for (level, sessions) in knobs.sessions.iter().enumerate() {
            for (i, path) in bench.http.iter().enumerate() {
                if http_failed[i].is_some() {
                    continue;
                }
                let tally = &mut http_tallies[i][level];
                let outcome = measure::http_block(
                    path,
                    *sessions,
                    knobs.http_warmup,
                    knobs.http_measure,
                    tally,
                )
                .await;
                http_failed[i] = outcome.err();
            }
        }
    }

    let stdio_rows: Vec<Row> = bench
        .stdio
        .iter()
        .zip(&stdio_tallies)
        .zip(&stdio_failed)
        .map(|((path, tally), failed)| path.route.row(std::slice::from_ref(tally), failed))
        .collect();
    let http_rows: Vec<Row> = bench
        .http
        .iter()
        .zip(&http_tallies)
        .zip(&http_failed)
        .map(|((path, tallies), failed)| path.route.row(tallies, failed))
        .collect();
    println!("\n== summary (the issue-18 table; same client, same echo, same run) ==");
    report::summary(&stdio_rows, &http_rows, &knobs.sessions);
    report::latency(&stdio_rows, &http_rows);
    report::cpu(&stdio_rows, &http_rows, &knobs.sessions);
    report::targets(&stdio_rows, &http_rows, &knobs.sessions);
    issue_targets::print(&stdio_rows, &http_rows, &knobs.sessions, startup.as_ref());
    report::before_after(&stdio_rows, &http_rows, &knobs.sessions);
    for (label, failed) in stdio_rows
        .iter()
        .chain(&http_rows)
        .filter(|r| r.ours)
        .filter_map(|r| Some((r.label, r.failed?)))
    {
        failures.push(format!("{label}: failed while measured: {failed}"));
    }
    for row in stdio_rows.iter().chain(&http_rows).filter(|r| !r.ours) {
        if let Some(failed) = row.failed {
            notes.push(format!("{}: failed while measured: {failed}", row.label));
        }
    }
    println!("machine at the end: {}", machine());
    for note in &notes {
        println!("note: {note}");
    }
    for failure in &failures {
        println!("FAILED: {failure}");
    }
    drop(stdio_rows);
    drop(http_rows);
    bench.finish().await;
    failures.is_empty()
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
    format!("{cores} cores ({model}), load average {}", load.join(" "))
}
