//! ahp-proxy: serves the MCP servers of plugin folders and manifests to an MCP-only harness,
//! and projects them to Agent Host Protocol (AHP) clients as live customizations.
//!
//! Map: `config` (proxy.toml), `host` (AHP state, single writer), `ahp` (WebSocket face),
//! `jsonrpc` (framing), `line_index` (byte offsets → positions). See ARCHITECTURE.md.

#![deny(unsafe_code)]

pub mod ahp;
pub mod catalog;
pub mod check;
pub mod config;
pub mod discovery;
pub mod front;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod jsonrpc;
pub mod line_index;
pub mod serve;
pub mod spec;
pub mod supervisor;
pub mod tcp;
pub mod watch;
