//! What one server's lifecycle task holds (its identity, timings, where it reports) and what
//! its desired-state channel can wake it with; the lifecycle itself is in `server`.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::alerts::{Alerts, Secrets};
use super::connections::Connections;
use super::ServerEvent;
use crate::config::SupervisorConfig;

/// Everything one lifecycle task needs besides its desired-state channel.
pub struct Task {
    /// The customization id.
    pub id: String,
    /// The declared name (logs).
    pub name: String,
    /// Timings.
    pub config: SupervisorConfig,
    /// Where transitions go.
    pub events: mpsc::Sender<ServerEvent>,
    /// Cancelled when the sidecar shuts down.
    pub shutdown: CancellationToken,
    /// Where a ready server's connection is published for the MCP front.
    pub connections: Arc<Connections>,
    /// The last `WWW-Authenticate` challenge the server sent (for a timer expiry).
    pub last_challenge: std::sync::Mutex<Option<String>>,
    /// What the terminal was last told about this server.
    pub alerts: std::sync::Mutex<Alerts>,
    /// The current launch spec's secrets, blanked out of every message it reports.
    pub secrets: std::sync::Mutex<Secrets>,
}

/// What the desired-state channel said while we waited.
pub(super) enum Wake {
    Changed,
    /// Asked not to run, and stopped (reported): the task ends; the owner starts a new one
    /// when the server should run again, so a stopped server costs no task.
    Idle,
    Removed,
    Shutdown,
}
