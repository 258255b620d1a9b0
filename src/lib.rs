//! ahp-proxy: serves the MCP servers of plugin folders and manifests to an MCP-only harness,
//! and projects them to Agent Host Protocol (AHP) clients as live customizations.
//!
//! Map, from the bottom up: `spec` (plain data the layers share), `approval` (the approval
//! policy, pure), `line_index` (byte offsets
//! → positions), `jsonrpc` (AHP framing), `config` (proxy.toml), `discovery` (plugin folders,
//! manifests and directories → customizations and launch specs), `catalog` (every source
//! scanned, diffed into actions), `check` (the `check` report), `control` (the `status`,
//! `start`, `stop`… commands: an AHP client of a running proxy), `watch` (live rescans),
//! `supervisor` (one lifecycle task per MCP server), `host` (AHP state, single writer), `ahp`
//! (the WebSocket face), `console` (the web console's pages, served by `ahp`), `front` (the
//! harness's MCP server), `tcp` (the accept step the listeners share), `authority` (a `Host`
//! header's name and port), `descriptors` (the descriptor budget the listeners share),
//! `file_read` (files someone named: regular, non-blocking, bounded), `guess` ("did you
//! mean"), `untrusted` and `log_writer` (outside text made safe for log lines and the
//! terminal), `heap` (freed memory given back), `park_spin` (the stdio worker watches its
//! pipes before it parks), `banner` (what start-up prints),
//! `health` (`GET /healthz`), `serve` (the wiring and the shutdown order); `fuzzing` (fuzz
//! targets, with the `fuzzing` feature only). The example MCP servers are a separate program
//! (`example-servers/`, `ahp-proxy-example-server`). See ARCHITECTURE.md.

#![deny(unsafe_code)]

pub mod ahp;
pub mod approval;
pub mod authority;
pub mod banner;
pub mod catalog;
pub mod check;
pub mod config;
pub mod console;
pub mod control;
pub mod descriptors;
pub mod discovery;
pub mod file_read;
pub mod front;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod guess;
pub mod health;
pub mod heap;
pub mod host;
pub mod jsonrpc;
pub mod line_index;
pub mod log_writer;
pub mod mcp;
pub mod mirror;
pub mod park_spin;
pub mod serve;
pub mod spec;
pub mod supervisor;
pub mod tcp;
pub mod untrusted;
pub mod upstream;
pub mod watch;
