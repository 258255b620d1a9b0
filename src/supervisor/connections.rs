//! The live MCP sessions of ready servers, published by the lifecycle tasks for the MCP
//! front and the `mcp://` channel: each server's raw session, its handshake answer, what it
//! offers (kept fresh on `list_changed`), and change announcements.
//!
//! Also the hand-off in the other direction: the [`Downstream`] that takes what a server
//! sends on its own, the start-up gate the front waits on, and who the proxy says it is to
//! servers (its own identity, or the one stdio harness it stands for).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};

use tokio::sync::{broadcast, watch};

use crate::discovery::DeclaredServer;
use crate::mcp::message::Message;
use crate::upstream::era::Era;
use crate::upstream::handshake::{Identity, Initialized};
use crate::upstream::offer::{Lists, Offer};
use crate::upstream::session::{Cause, Session};

/// One ready server as the front sees it.
#[derive(Clone)]
pub struct Connected {
    /// Its declared name (tool-name prefixes, `/mcp/<name>`).
    pub name: String,
    /// Requests go here.
    pub session: Session,
    /// What it answered to `initialize`.
    pub initialized: Arc<Initialized>,
    /// What it offers now (replaced whole when it changes).
    pub offer: Arc<RwLock<Arc<Offer>>>,
}

impl Connected {
    /// What it offers now.
    pub fn offer(&self) -> Arc<Offer> {
        self.offer.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The era the proxy speaks to it in (a modern server has no legacy session: the
    /// front's `initialized` was built from its `server/discover` answer).
    pub fn era(&self) -> Era {
        self.session.era()
    }

    /// Whether it declared capability `name` (`tools`, `logging`, …).
    pub fn has(&self, name: &str) -> bool {
        self.initialized
            .capabilities
            .get(name)
            .is_some_and(|c| !c.is_null())
    }

    /// Its capability `name`'s member `flag` (`resources.subscribe`, …) is `true`.
    pub fn flag(&self, name: &str, flag: &str) -> bool {
        self.initialized
            .capabilities
            .get(name)
            .and_then(|c| c.get(flag))
            .and_then(serde_json::Value::as_bool)
            == Some(true)
    }
}

/// What a follower of the ready servers hears next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeEvent {
    /// One server changed.
    Server(Change),
    /// The follower fell behind and missed some: take it that every list of every server
    /// changed.
    Lagged,
}

/// Follows the changes of the ready servers (from [`Connections::subscribe`]).
pub struct Changes(broadcast::Receiver<Change>);

impl Changes {
    /// The next change; `None` once the connections are gone.
    pub async fn next(&mut self) -> Option<ChangeEvent> {
        match self.0.recv().await {
            Ok(change) => Some(ChangeEvent::Server(change)),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(ChangeEvent::Lagged),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
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

/// Where what a server sends on its own goes (the MCP front implements it). Called in
/// arrival order by the task that read it: must not wait.
pub trait Downstream: Send + Sync {
    /// A notification from server `server` (its customization id); `origin` is the tag of
    /// the request it is about, when known.
    fn notify(&self, server: &str, message: Message, origin: Option<u64>);
    /// A request from server `server` that only a harness can answer; answer it on
    /// `session`. `cause` is what ties it to a request in flight.
    fn request(&self, server: &str, session: &Session, message: Message, cause: Cause);
}

/// An HTTP 401/403 that a request to server `server` got: its lifecycle task turns it into
/// `authRequired`.
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
    auth_statuses: RwLock<HashMap<String, super::Status>>,
    servers: RwLock<BTreeMap<String, Connected>>,
    /// Declared servers, by id (for `/mcp/<name>`, whether ready or not): the supervisor's
    /// shared declarations, not copies of their ids and names.
    declared: RwLock<Vec<Arc<DeclaredServer>>>,
    changes: broadcast::Sender<Change>,
    /// Bumped by every change of the ready set, of a server's lists or of the declared set.
    version: AtomicU64,
    downstream: OnceLock<Weak<dyn Downstream>>,
    /// Servers that were asked to run and have not yet reported how their start went;
    /// `None` until the first set of declared servers arrived.
    pending: watch::Sender<Option<HashSet<String>>>,
    /// Who the proxy is to its servers; `None` until known (a stdio harness's own identity
    /// comes with its `initialize`).
    identity: watch::Sender<Option<Arc<Identity>>>,
    /// The HTTP client every HTTP upstream shares (connection pools).
    http: OnceLock<reqwest::Client>,
    /// What each server answered to its latest `initialize` (kept while it restarts).
    last_initialized: RwLock<HashMap<String, Arc<Initialized>>>,
    /// The era each launch spec / endpoint turned out to speak (by a hash of it): a start
    /// that knows it skips the probe; a start that fails forgets it.
    eras: RwLock<HashMap<u64, Era>>,
    /// The era probes in flight, shared by starts of the same spec.
    probes: super::era_probes::Probes,
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
            identity: watch::channel(Some(Arc::new(Identity::proxy()))).0,
            http: OnceLock::new(),
            last_initialized: RwLock::default(),
            eras: RwLock::default(),
            probes: super::era_probes::Probes::default(),
        }
    }
}

impl Connections {
    /// A shared, empty set; servers are told the proxy's own identity.
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

    /// The era the server launched as `key` last spoke, if known.
    pub fn era_of(&self, key: u64) -> Option<Era> {
        self.eras
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .copied()
    }

    /// A start's part in probing the era of launch spec `key`: it leads, or it follows a
    /// start of the same spec probing now.
    pub(super) fn join_era_probe(&self, key: u64) -> super::era_probes::Part {
        self.probes.join(key)
    }

    /// Remember (`Some`) or forget (`None`) the era of the server launched as `key`.
    pub fn set_era(&self, key: u64, era: Option<Era>) {
        let mut eras = self.eras.write().unwrap_or_else(|p| p.into_inner());
        match era {
            Some(era) => eras.insert(key, era),
            None => eras.remove(&key),
        };
    }

    /// The identity servers are initialized with from now on (`None`: wait for one).
    pub fn set_identity(&self, identity: Option<Identity>) {
        self.identity.send_replace(identity.map(Arc::new));
    }

    /// The identity to initialize a server with, once there is one.
    pub async fn identity(&self) -> Arc<Identity> {
        let mut identity = self.identity.subscribe();
        loop {
            if let Some(identity) = identity.borrow_and_update().clone() {
                return identity;
            }
            if identity.changed().await.is_err() {
                return Arc::new(Identity::proxy());
            }
        }
    }

    /// The shared HTTP client.
    pub fn http_client(&self) -> reqwest::Client {
        self.http
            .get_or_init(|| {
                super::https::client_builder()
                    .tcp_nodelay(true)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .unwrap_or_default()
            })
            .clone()
    }

    /// A number that changes whenever what the front shows may have changed.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Server `id` is ready with this session.
    pub fn insert(&self, id: &str, connected: Connected) {
        self.clear_auth_status(id);
        self.last_initialized
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), connected.initialized.clone());
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

    /// A request to server `id` was refused for its authorization: its lifecycle task hears.
    pub fn auth_lost(&self, lost: AuthLost) {
        let _ = self.auth_losses.send(lost);
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

    /// What server `id` answered to its latest `initialize`, ready or not.
    pub fn last_initialized(&self, id: &str) -> Option<Arc<Initialized>> {
        self.last_initialized
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// Every ready server, by id.
    pub fn snapshot(&self) -> BTreeMap<String, Connected> {
        self.read().clone()
    }

    /// Ready server `id`.
    pub fn get(&self, id: &str) -> Option<Connected> {
        self.read().get(id).cloned()
    }

    /// The set of declared servers (one per id), replacing the previous one.
    pub fn set_declared(&self, mut declared: Vec<Arc<DeclaredServer>>) {
        declared.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        declared.dedup_by(|a, b| a.id == b.id);
        declared.shrink_to_fit();
        *self.declared.write().unwrap_or_else(|p| p.into_inner()) = declared;
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Every declared server: id → name.
    pub fn declared(&self) -> BTreeMap<String, String> {
        self.declared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|s| (s.id.clone(), s.name.clone()))
            .collect()
    }

    /// The declared name of server `id` (its id when it is not declared).
    pub fn name_of(&self, id: &str) -> String {
        let declared = self.declared.read().unwrap_or_else(|p| p.into_inner());
        match declared.binary_search_by(|s| s.id.as_str().cmp(id)) {
            Ok(found) => declared[found].name.clone(),
            Err(_) => id.to_string(),
        }
    }

    /// The tool filters server `id` was declared with (none when it is not declared).
    pub fn tool_filters(&self, id: &str) -> Option<crate::spec::ToolFilters> {
        let declared = self.declared.read().unwrap_or_else(|p| p.into_inner());
        let found = declared.binary_search_by(|s| s.id.as_str().cmp(id)).ok()?;
        let tools = &declared[found].tools;
        (!tools.is_empty()).then(|| tools.clone())
    }

    /// Every later change, in order (or word that some were missed).
    pub fn subscribe(&self) -> Changes {
        Changes(self.changes.subscribe())
    }

    /// Server `id` was asked to run (`true`) or reported how its start went (`false`).
    pub fn set_pending(&self, id: &str, pending: bool) {
        self.pending.send_if_modified(|set| {
            let set = set.get_or_insert_with(HashSet::new);
            if pending {
                set.insert(id.to_string())
            } else {
                set.remove(id)
            }
        });
    }

    /// The first set of declared servers was handed to the supervisor.
    pub fn mark_synced(&self) {
        self.pending.send_modify(|set| {
            set.get_or_insert_with(HashSet::new);
        });
    }

    /// Wait until the first set of declared servers was handed to the supervisor.
    pub async fn synced(&self) {
        let mut pending = self.pending.subscribe();
        let _ = pending.wait_for(Option::is_some).await;
    }

    /// Whether some server that was asked to run has not come up or failed yet.
    pub fn starting(&self) -> bool {
        self.pending
            .borrow()
            .as_ref()
            .is_none_or(|set| !set.is_empty())
    }

    /// Wait until every server that was asked to run has come up or failed (at most
    /// `patience`): a harness should not miss a server that is a moment away from ready.
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
