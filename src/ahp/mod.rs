//! The AHP wire face: a WebSocket listener speaking JSON-RPC 2.0, one message per text frame.
//! `listener` accepts and upgrades, `socket` pumps one connection, `commands` is its protocol.

pub mod commands;
pub mod gate;
pub mod listener;
pub mod mcp_channel;
pub mod resources;
pub mod socket;
