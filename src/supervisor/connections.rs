//! The live MCP connections of ready servers, published by the lifecycle tasks for the MCP
//! front to use: each server's peer, its tools, and a change counter to wait on.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use rmcp::model::Tool;
use rmcp::service::Peer;
use rmcp::RoleClient;
use tokio::sync::watch;

/// One ready server as the front sees it.
#[derive(Clone)]
pub struct Connected {
    /// Its declared name (used for tool-name prefixes and `/mcp/<name>`).
    pub name: String,
    /// Requests go here.
    pub peer: Peer<RoleClient>,
    /// Its current tools (refreshed on `notifications/tools/list_changed`).
    pub tools: Vec<Tool>,
}

/// Ready servers by customization id; every change bumps a counter.
pub struct Connections {
    servers: RwLock<BTreeMap<String, Connected>>,
    changed: watch::Sender<u64>,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            servers: RwLock::default(),
            changed: watch::channel(0).0,
        }
    }
}

impl Connections {
    /// A shared, empty set.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Server `id` is ready with this connection.
    pub fn insert(&self, id: &str, connected: Connected) {
        self.write().insert(id.to_string(), connected);
        self.bump();
    }

    /// Server `id` is no longer usable.
    pub fn remove(&self, id: &str) {
        if self.write().remove(id).is_some() {
            self.bump();
        }
    }

    /// Server `id` announced new tools.
    pub fn set_tools(&self, id: &str, tools: Vec<Tool>) {
        if let Some(server) = self.write().get_mut(id) {
            server.tools = tools;
        } else {
            return;
        }
        self.bump();
    }

    /// Every ready server, by id.
    pub fn snapshot(&self) -> BTreeMap<String, Connected> {
        self.servers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The ready server declared as `name`, if exactly one is.
    pub fn by_name(&self, name: &str) -> Option<(String, Connected)> {
        let servers = self.servers.read().unwrap_or_else(|p| p.into_inner());
        let mut found = servers.iter().filter(|(_, s)| s.name == name);
        let first = found.next()?;
        found.next().is_none().then(|| (first.0.clone(), first.1.clone()))
    }

    /// A receiver that wakes on every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Connected>> {
        self.servers.write().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}
