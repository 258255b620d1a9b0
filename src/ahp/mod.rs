//! The AHP wire face: a WebSocket listener speaking JSON-RPC 2.0, one message per text frame.
//! `gate` admits (and says who may decide held calls; `presented` is how a token or the
//! approval key comes), `listener` accepts and upgrades (or serves a console page), `views`
//! is the MCP Apps View origin, `socket` pumps one connection, `commands` is its protocol
//! (`handshake` its version and MCP Apps rules, `aliases` the other names VS Code gives
//! sessions and chats), `mcp_channel` and `resources` serve `mcp://` and `resource*`
//! requests; `services` is what every connection is handed (the host, host files, `mcp://`
//! channels).

pub mod aliases;
pub mod commands;
pub mod gate;
pub mod handshake;
pub mod listener;
pub mod mcp_channel;
pub mod presented;
pub mod resources;
pub mod services;
pub mod socket;
pub mod views;

pub use services::Services;
