//! ahp-proxy: serves the MCP servers of plugin folders and manifests to an MCP-only harness,
//! and projects them to Agent Host Protocol (AHP) clients as live customizations.
//!
//! Map, from the bottom up: `spec` (plain data the layers share), `approval` (the approval
//! policy, pure), `approvers` (the approval key: who may decide held calls), `line_index` (byte offsets
//! → positions), `jsonrpc` (AHP framing), `config` (proxy.toml), `discovery` (plugin folders,
//! manifests and directories → customizations and launch specs), `catalog` (every source
//! scanned, diffed into actions), `check` (the `check` report), `control` (the `status`,
//! `start`, `stop`… commands: an AHP client of a running proxy), `watch` (live rescans),
//! `supervisor` (one lifecycle task per MCP server), `host` (AHP state, single writer), `ahp`
//! (the WebSocket face), `console` (the web console's pages, served by `ahp`), `front` (the
//! harness's MCP server), `tcp` (the accept step the listeners share), `authority` (a `Host`
//! header's name and port), `bearer` (an access token presented and compared; which
//! listeners need one), `descriptors` (the descriptor budget the listeners share),
//! `file_read` (files someone named: regular, non-blocking, bounded), `guess` ("did you
//! mean"), `untrusted` and `log_writer` (outside text made safe for log lines and the
//! terminal), `heap` (freed memory given back), `park_spin` (the stdio worker watches its
//! pipes before it parks), `banner` (what start-up prints),
//! `health` (`GET /healthz`), `serve` (the wiring and the shutdown order); `fuzzing` (fuzz
//! targets, with the `fuzzing` feature only). The example MCP servers are a separate program
//! (`example-servers/`, `ahp-proxy-example-server`). Modules only the crate itself uses are
//! `pub(crate)`. See ARCHITECTURE.md.

#![deny(unsafe_code)]

pub(crate) mod ahp;
pub(crate) mod approval;
pub(crate) mod approvers;
pub(crate) mod ask_trust;
pub(crate) mod authority;
pub(crate) mod banner;
pub(crate) mod bearer;
pub mod catalog;
pub mod check;
pub mod config;
pub(crate) mod console;
pub mod control;
pub(crate) mod descriptors;
pub mod discovery;
pub(crate) mod file_read;
pub(crate) mod front;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod guess;
pub(crate) mod health;
pub mod heap;
pub(crate) mod host;
pub(crate) mod jsonrpc;
pub(crate) mod line_index;
pub mod log_writer;
pub(crate) mod mcp;
pub(crate) mod mirror;
pub mod park_spin;
pub mod serve;
pub mod spec;
pub mod supervisor;
pub(crate) mod tcp;
pub mod trust;
pub mod trusting;
pub(crate) mod unguessable;
pub mod untrusted;
pub(crate) mod upstream;
pub(crate) mod watch;
