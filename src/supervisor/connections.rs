//! The live MCP connections of ready servers, published by the lifecycle tasks for the MCP
//! front: each server's peer, what it offers (kept fresh on `list_changed`), and its changes.
//!
//! Also the hand-off in the other direction: the [`Downstream`] that takes what a server
//! sends on its own (notifications, sampling/roots/elicitation requests), and the start-up
//! gate the front waits on before its first listing.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};

use futures_util::future::BoxFuture;
use rmcp::model::{
    ClientResult, Prompt, Resource, ResourceTemplate, ServerCapabilities, ServerNotification,
    ServerRequest, Tool,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleClient};
use tokio::sync::{broadcast, watch};

/// What a ready server offers, refreshed when it announces a change.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    /// `tools/list`, every page.
    pub tools: Vec<Tool>,
    /// `prompts/list`, every page (empty when the server has no prompts).
    pub prompts: Vec<Prompt>,
    /// `resources/list`, every page.
    pub resources: Vec<Resource>,
    /// `resources/templates/list`, every page.
    pub templates: Vec<ResourceTemplate>,
}

/// One ready server as the front sees it.
#[derive(Clone)]
pub struct Connected {
    /// Its declared name (tool-name prefixes, `/mcp/<name>`).
    pub name: String,
    /// Requests go here.
    pub peer: Peer<RoleClient>,
    /// What it declared at `initialize`.
    pub capabilities: ServerCapabilities,
    /// Its `instructions`, if any.
    pub instructions: Option<String>,
    /// Its `serverInfo`, if it sent one.
    pub server_info: Option<rmcp::model::Implementation>,
    /// What it offers (shared with its connection, which refreshes it).
    pub offer: Arc<RwLock<Offer>>,
}

impl Connected {
    /// A copy of what it offers now.
    pub fn offer(&self) -> Offer {
        self.offer.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Its tool `name`, if it offers one.
    pub fn tool(&self, name: &str) -> Option<Tool> {
        self.offer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .tools
            .iter()
            .find(|t| t.name == name)
            .cloned()
    }
}

/// Which of a server's lists changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lists {
    /// `tools/list`.
    pub tools: bool,
    /// `prompts/list`.
    pub prompts: bool,
    /// `resources/list` and `resources/templates/list`.
    pub resources: bool,
}

impl Lists {
    /// Every list.
    pub const ALL: Self = Self {
        tools: true,
        prompts: true,
        resources: true,
    };
}

/// A change of one server: it became ready, went away, or changed some lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The server's customization id.
    pub server: String,
    /// Which lists the harness should re-read.
    pub lists: Lists,
    /// `Some(true)`: it became ready; `Some(false)`: it is no longer ready.
    pub ready: Option<bool>,
}

/// Where what a server sends on its own goes (the MCP front implements it): notifications
/// such as progress and log messages, and requests for the harness (sampling, roots,
/// elicitation).
pub trait Downstream: Send + Sync {
    /// A notification from server `server` (its customization id).
    fn notify(
        self: Arc<Self>,
        server: String,
        notification: ServerNotification,
    ) -> BoxFuture<'static, ()>;
    /// A request from server `server` that only the harness can answer.
    fn request(
        self: Arc<Self>,
        server: String,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>>;
}

/// An HTTP 401/403 that a request forwarded to server `server` got: its lifecycle task
/// turns it into `authRequired`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthLost {
    /// The server's customization id.
    pub server: String,
    /// The `WWW-Authenticate` challenge.
    pub challenge: String,
    /// 403 (more scope needed) rather than 401.
    pub insufficient_scope: bool,
}

/// Ready servers by customization id, the declared names, and change announcements.
pub struct Connections {
    auth_losses: broadcast::Sender<AuthLost>,
    /// The `authRequired` status each server last lost its connection with.
    auth_statuses: RwLock<std::collections::HashMap<String, super::Status>>,
    servers: RwLock<BTreeMap<String, Connected>>,
    /// Declared servers: id → name (for `/mcp/<name>`, whether ready or not).
    declared: RwLock<BTreeMap<String, String>>,
    changes: broadcast::Sender<Change>,
    /// Bumped by every change of the ready set, of a server's lists or of the declared set.
    version: AtomicU64,
    downstream: OnceLock<Weak<dyn Downstream>>,
    /// Servers that were asked to run and have not yet reported how their start went;
    /// `None` until the first set of declared servers arrived.
    pending: watch::Sender<Option<HashSet<String>>>,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            auth_losses: broadcast::channel(64).0,
            auth_statuses: RwLock::default(),
            servers: RwLock::default(),
            declared: RwLock::default(),
            changes: broadcast::channel(1024).0,
            version: AtomicU64::new(0),
            downstream: OnceLock::new(),
            pending: watch::channel(None).0,
        }
    }
}

impl Connections {
    /// A shared, empty set.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Install the receiver of server-originated traffic (once, at start-up; held weakly).
    pub fn set_downstream(&self, downstream: Weak<dyn Downstream>) {
        let _ = self.downstream.set(downstream);
    }

    /// The receiver of server-originated traffic, while there is one.
    pub fn downstream(&self) -> Option<Arc<dyn Downstream>> {
        self.downstream.get().and_then(Weak::upgrade)
    }

    /// A number that changes whenever what the front shows may have changed.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Server `id` is ready with this connection.
    pub fn insert(&self, id: &str, connected: Connected) {
        self.clear_auth_status(id);
        self.write().insert(id.to_string(), connected);
        self.announce(Change {
            server: id.to_string(),
            lists: Lists::ALL,
            ready: Some(true),
        });
    }

    /// Server `id` is no longer usable.
    pub fn remove(&self, id: &str) {
        if self.write().remove(id).is_some() {
            self.announce(Change {
                server: id.to_string(),
                lists: Lists::ALL,
                ready: Some(false),
            });
        }
    }

    /// Server `id` refreshed some of its lists.
    pub fn changed(&self, id: &str, lists: Lists) {
        if self.read().contains_key(id) {
            self.announce(Change {
                server: id.to_string(),
                lists,
                ready: None,
            });
        }
    }

    /// Look at a failed request to server `id`: an HTTP 401/403 is announced to its
    /// lifecycle task. Returns whether it was a 403 for want of scope.
    pub fn check_failure(&self, id: &str, error: &rmcp::ServiceError) -> bool {
        match super::auth::auth_failure(error) {
            Some((challenge, insufficient_scope)) => {
                let _ = self.auth_losses.send(AuthLost {
                    server: id.to_string(),
                    challenge,
                    insufficient_scope,
                });
                insufficient_scope
            }
            None => false,
        }
    }

    /// Server `id` lost its connection for want of authorization, with this status
    /// (recorded before it is removed, so whoever sees it go can ask why).
    pub fn set_auth_status(&self, id: &str, status: super::Status) {
        self.auth_statuses
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), status);
    }

    /// Server `id` no longer waits for authorization (it is back, stopped or removed).
    pub fn clear_auth_status(&self, id: &str) {
        self.auth_statuses
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// Every server waiting for authorization, with the `authRequired` status it shows.
    pub fn auth_waiting(&self) -> Vec<(String, super::Status)> {
        self.auth_statuses
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, status)| (id.clone(), status.clone()))
            .collect()
    }

    /// The `authRequired` status server `id` last went down with, if any.
    pub fn auth_status(&self, id: &str) -> Option<super::Status> {
        self.auth_statuses
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// Receiver of every later [`AuthLost`].
    pub fn auth_losses(&self) -> broadcast::Receiver<AuthLost> {
        self.auth_losses.subscribe()
    }

    /// Every ready server, by id.
    pub fn snapshot(&self) -> BTreeMap<String, Connected> {
        self.read().clone()
    }

    /// Ready server `id`.
    pub fn get(&self, id: &str) -> Option<Connected> {
        self.read().get(id).cloned()
    }

    /// The set of declared servers (id → name), replacing the previous one.
    pub fn set_declared(&self, declared: BTreeMap<String, String>) {
        *self.declared.write().unwrap_or_else(|p| p.into_inner()) = declared;
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Every declared server: id → name.
    pub fn declared(&self) -> BTreeMap<String, String> {
        self.declared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A receiver of every later change. A receiver that lags should treat it as "every
    /// list of every server changed".
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Server `id` was asked to run (`true`) or reported how its start went (`false`).
    pub fn set_pending(&self, id: &str, pending: bool) {
        self.pending.send_modify(|set| {
            let set = set.get_or_insert_with(HashSet::new);
            if pending {
                set.insert(id.to_string());
            } else {
                set.remove(id);
            }
        });
    }

    /// The first set of declared servers was handed to the supervisor.
    pub fn mark_synced(&self) {
        self.pending.send_modify(|set| {
            set.get_or_insert_with(HashSet::new);
        });
    }

    /// Wait until every server that was asked to run has come up or failed (at most
    /// `patience`): the harness's first listing should not miss a server that is a moment
    /// away from ready.
    pub async fn settled(&self, patience: std::time::Duration) {
        let mut pending = self.pending.subscribe();
        let _ = tokio::time::timeout(
            patience,
            pending.wait_for(|set| set.as_ref().is_some_and(HashSet::is_empty)),
        )
        .await;
    }

    fn announce(&self, change: Change) {
        self.version.fetch_add(1, Ordering::AcqRel);
        let _ = self.changes.send(change);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Connected>> {
        self.servers.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Connected>> {
        self.servers.write().unwrap_or_else(|p| p.into_inner())
    }
}
