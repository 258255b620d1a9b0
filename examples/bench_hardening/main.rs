//! Hardening figures: what hostile or merely large input costs the real binary
//! (docs/hardening.md). Prints numbers, and exits 2 when one passes its stated bound.
//!
//! Sections (all by default, or name some):
//!
//! - `titles`: 150 `session/titleChanged` of 4 MiB from one client; resident memory after
//!   (bound: +64 MiB).
//! - `replay`: 1,000 legal 100 KB actions (an active client's tool list) from one client;
//!   resident memory after (bound: +64 MiB), and what the replay log still holds (found by
//!   reconnecting from ever older sequence numbers; `limits.replay_log_bytes`, 16 MiB).
//! - `sessions`: 5,000 `createSession`; how many were made (bound: `limits.max_sessions`,
//!   100), resident memory after.
//! - `dispose`: `disposeSession` of the default session (bound: refused, and still there).
//! - `log`: 20 connections with a 1 MiB `clientId` (bound: the text log grows by 64 KiB at
//!   most), and 10 whose `clientId` forges a log line and carries ESC, CR and NEL (bound:
//!   no forged line, no raw control character).
//! - `url`: a server whose URL has a secret path, query and fragment and cannot be reached
//!   (bound: no AHP frame and no log line quotes them).
//! - `stdio`: on `--stdio`, a 17 MiB line, params nested 200 deep, a line that is not JSON,
//!   a `ping` (bound: each answered).
//! - `mcp-http`: 300 connections with half-sent headers against `max_connections = 64`,
//!   `handshake_timeout_ms = 3000` (bound: the proxy holds at most 64 of them, the AHP
//!   endpoint answers meanwhile, none is open 4 s later), then 3,000 `initialize` (bound: each answered, +64 MiB at most: past `[mcp] max_sessions` the longest idle session is forgotten).
//! - `manifest`: a manifest of 10,000 disabled servers edited 60 times (a server renamed:
//!   the whole container is updated each time; `AHP_PROXY_BENCH_EDITS` for more); resident
//!   memory before and after every 15 edits, each once the proxy is idle (bound: flat once
//!   the replay log is full, at most +32 MiB over the second half).
//! - `disabled`: one plugin beside a manifest of 0, 1,000, 10,000 and 100,000 disabled
//!   servers: start-up until idle, resident memory (bound: 4 KB per server), the latency of
//!   an edit of that one plugin until a subscribed client has it (`watch_debounce_ms = 0`,
//!   30 edits), and shutdown time.
//!
//! - `fairness`: against the MCP HTTP front (with the `features` example server), three
//!   4.6 MiB listen requests naming 125,000 resources each (bound: +64 MiB, a new harness
//!   served), 256 listen streams, 1,000 sessions of one client, and 150 peers dribbling
//!   their headers against `max_connections = 64` (bound: each time 10 of 10 new harnesses
//!   served).
//!
//! Run: `cargo build --release && cargo run --release --example bench_hardening [-- SECTION…]`.
//! `AHP_PROXY_BIN=/path/to/ahp-proxy` measures another build of the proxy (e.g. the one
//! before a fix); `AHP_PROXY_BENCH_SERVERS=1000,10000` changes the `disabled` sizes.

use std::path::PathBuf;

mod ahp;
mod ahp_attacks;
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;
mod fairness;
mod harness_attacks;
mod large_inputs;
mod proxy;

const SECTIONS: &[&str] = &[
    "titles", "replay", "sessions", "dispose", "log", "url", "stdio", "mcp-http", "manifest",
    "disabled", "fairness",
];

fn main() {
    let binary = std::env::var_os("AHP_PROXY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(common::proxy_binary);
    let asked: Vec<String> = std::env::args().skip(1).collect();
    if let Some(unknown) = asked.iter().find(|s| !SECTIONS.contains(&s.as_str())) {
        eprintln!(
            "unknown section {unknown:?}; sections: {}",
            SECTIONS.join(" ")
        );
        std::process::exit(1);
    }
    let wanted = |name: &str| asked.is_empty() || asked.iter().any(|s| s == name);
    let dir = common::scratch_dir("hardening");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("proxy: {}", binary.display());
    let (b, d) = (binary.as_path(), dir.as_path());
    let mut within = true;
    for &section in SECTIONS.iter().filter(|s| wanted(s)) {
        within &= match section {
            "titles" => runtime.block_on(ahp_attacks::titles(b, d)),
            "replay" => runtime.block_on(ahp_attacks::replay(b, d)),
            "sessions" => runtime.block_on(ahp_attacks::sessions(b, d)),
            "dispose" => runtime.block_on(ahp_attacks::dispose(b, d)),
            "log" => runtime.block_on(ahp_attacks::log(b, d)),
            "url" => runtime.block_on(ahp_attacks::url(b, d)),
            "stdio" => runtime.block_on(harness_attacks::stdio(b, d)),
            "mcp-http" => runtime.block_on(harness_attacks::mcp_http(b, d)),
            "manifest" => runtime.block_on(large_inputs::manifest(b, d)),
            "fairness" => runtime.block_on(fairness::fairness(b, d)),
            _ => {
                let sizes: Vec<usize> = std::env::var("AHP_PROXY_BENCH_SERVERS")
                    .ok()
                    .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
                    .unwrap_or_else(|| vec![1_000, 10_000, 100_000]);
                let (base, _) = runtime.block_on(large_inputs::disabled(b, d, 0, 0.0));
                let mut all = true;
                for n in sizes {
                    all &= runtime.block_on(large_inputs::disabled(b, d, n, base)).1;
                }
                all
            }
        };
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !within {
        println!("BOUND EXCEEDED (see above)");
        std::process::exit(2);
    }
}

/// Print `line`, marked when `ok` is false; returns `ok`.
pub fn verdict(ok: bool, line: String) -> bool {
    if ok {
        println!("{line}");
    } else {
        println!("{line}  <-- over the bound");
    }
    ok
}
