//! What the AHP face serves every connection with: the host (all AHP state), the host files
//! `resource*` commands may touch, and the `mcp://` channels. Built once, at start-up.

use std::sync::Arc;

use super::mcp_channel::McpChannels;
use super::resources::Files;
use crate::host::Host;

/// Handed down from the listener to each connection.
pub struct Services {
    /// The single writer of AHP state, and every connection's outbound queue.
    pub host: Arc<Host>,
    /// Host files clients may touch with `resource*` commands (writable directories only).
    pub files: Files,
    /// What serves `mcp://` channels.
    pub channels: McpChannels,
}
