//! What every harness session of the MCP front shares: the ready servers, and behind one lock
//! (`Tables`) the registry with its in-flight table, the harnesses themselves, the log levels
//! sent to servers, the mirrored calls parked with their tasks and the cached namespace of
//! the aggregated endpoint; plus the tasks that announce list changes and re-apply log
//! levels and subscriptions when a server restarts.
//!
//! Lock order: the tables are a leaf (`front::lock`): nothing else is locked, and no server
//! session is called, while they are held.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use super::answers::INTERNAL_ERROR;
use super::harness_state::HarnessState;
use super::lock::{assert_free, lock, Held};
use super::naming::{self, Namespace, Policy};
use super::parked::Parked;
use super::registry::{HarnessId, Level, Need, Registry, Scope};
use crate::mirror::{Mirror, Ticket};
use crate::supervisor::connections::{Change, ChangeEvent, Changes, Connections, Downstream};
use crate::upstream::offer::{Lists, Offer};

/// Mirrored calls that went on as tasks kept waiting for their task at the most.
const MAX_PARKED_TASKS: usize = 1024;

/// How the front behaves (`[mcp]` in proxy.toml).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Tool, prompt and URI naming in the aggregated endpoint.
    pub policy: Policy,
    /// How long a server may take to answer (reset by its progress notifications).
    pub request_timeout: Duration,
    /// How long a request waits for servers that are still starting.
    pub first_list_wait: Duration,
    /// Which tool calls wait for an AHP client's approval.
    pub approval: crate::approval::Policy,
    /// What `GET /metrics` shows.
    pub metrics: super::metrics::Shared,
    /// What one client may hold, and all of them together.
    pub fairness: super::fairness::Limits,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            policy: Policy::default(),
            request_timeout: Duration::from_secs(300),
            first_list_wait: Duration::from_secs(4),
            approval: crate::approval::Policy::default(),
            metrics: Default::default(),
            fairness: super::fairness::Limits::default(),
        }
    }
}

/// Server id → qualifier (its `/mcp/<qualifier>`, its prefix) of every declared server.
pub type Qualifiers = BTreeMap<String, String>;

/// What a cached namespace was built from: the connections' version and the client tools.
type NamespaceVersion = (u64, usize);

type ClientTools = Arc<Vec<crate::host::client_tools::ClientTool>>;

/// The hub's state, behind its one lock.
pub struct Tables {
    /// Harnesses, their requests in flight, subscriptions, log levels, tasks.
    pub registry: Registry,
    /// The harnesses' own state, while they are connected.
    harnesses: HashMap<HarnessId, Weak<HarnessState>>,
    /// The log level last sent to each server.
    pub(super) applied_levels: HashMap<String, Level>,
    /// Mirrored calls that went on as tasks, by (server, task id).
    pub(super) task_tickets: Parked<(String, String), Ticket>,
    namespace: Option<(NamespaceVersion, Arc<Namespace>)>,
    qualifiers: Option<(u64, Arc<Qualifiers>)>,
}

/// The front's shared state (one per process).
pub struct Hub {
    /// Ready servers.
    pub connections: Arc<Connections>,
    /// Behaviour.
    pub settings: Settings,
    /// Harness tool calls go here.
    pub mirror: Mirror,
    tables: Mutex<Tables>,
    next_harness: AtomicU64,
    next_tag: AtomicU64,
    /// Whether some connected harness declared sampling.
    sampling: tokio::sync::watch::Sender<bool>,
    /// The hub itself, for tasks it starts.
    pub(super) this: Weak<Hub>,
    /// The AHP host, whose clients' tools are offered to harnesses (set once, at start-up).
    host: OnceLock<Weak<crate::host::Host>>,
    /// Those tools.
    client_tools: OnceLock<tokio::sync::watch::Receiver<ClientTools>>,
    /// Cancelled when the proxy stops: open listen streams complete.
    pub(super) stopping: tokio_util::sync::CancellationToken,
    /// The open long-lived streams (`subscriptions/listen`, sessions' `GET`), by client.
    pub listens: Arc<super::fairness::Listens>,
}

impl Hub {
    /// A hub over `connections`; installs itself as their downstream and starts the task
    /// that announces changes to harnesses and restores servers that (re)start.
    pub fn start(connections: Arc<Connections>, settings: Settings, mirror: Mirror) -> Arc<Self> {
        let hub = Arc::new_cyclic(|this| Self {
            connections: connections.clone(),
            settings,
            mirror,
            tables: Mutex::new(Tables {
                registry: Registry::default(),
                harnesses: HashMap::new(),
                applied_levels: HashMap::new(),
                task_tickets: Parked::new(MAX_PARKED_TASKS),
                namespace: None,
                qualifiers: None,
            }),
            next_harness: AtomicU64::new(1),
            next_tag: AtomicU64::new(1),
            sampling: tokio::sync::watch::channel(false).0,
            this: this.clone(),
            host: OnceLock::new(),
            client_tools: OnceLock::new(),
            stopping: tokio_util::sync::CancellationToken::new(),
            listens: Arc::default(),
        });
        let downstream: Arc<dyn Downstream> = hub.clone();
        connections.set_downstream(Arc::downgrade(&downstream));
        tokio::spawn(follow_changes(
            Arc::downgrade(&hub),
            connections.subscribe(),
        ));
        hub
    }

    /// The proxy stops: every open `subscriptions/listen` stream of a modern harness ends
    /// with its graceful completion (before the fronts close).
    pub fn stop_listening(&self) {
        self.stopping.cancel();
    }

    /// Whether the proxy is shutting down (no new request is taken).
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// How many harness requests are being answered now.
    pub fn requests_in_flight(&self) -> usize {
        self.tables().registry.in_flight.len()
    }

    /// Offer the tools of `host`'s AHP clients to harnesses on the aggregated endpoint, and
    /// announce their changes (once, at start-up).
    pub fn serve_client_tools(self: &Arc<Self>, host: &Arc<crate::host::Host>) {
        let _ = self.host.set(Arc::downgrade(host));
        let tools = host.client_tools();
        if self.client_tools.set(tools.clone()).is_err() {
            return;
        }
        tokio::spawn(follow_client_tools(Arc::downgrade(self), tools));
    }

    /// The tools AHP clients offer now.
    fn client_tools(&self) -> ClientTools {
        self.client_tools
            .get()
            .map(|tools| tools.borrow().clone())
            .unwrap_or_default()
    }

    /// Client `client`'s tool `name`, while it offers it.
    pub fn client_tool(
        &self,
        client: &str,
        name: &str,
    ) -> Option<crate::host::client_tools::ClientTool> {
        self.client_tools()
            .iter()
            .find(|t| t.client_id == client && t.tool.name == name)
            .cloned()
    }

    /// Whether some AHP client offers tools now.
    pub fn offers_client_tools(&self) -> bool {
        !self.client_tools().is_empty()
    }

    /// What happens to harness calls of client tools from now on (`None` without a host).
    pub fn client_call_events(
        &self,
    ) -> Option<tokio::sync::broadcast::Receiver<crate::host::client_tools::ClientCallEvent>> {
        Some(self.host.get()?.upgrade()?.client_call_events())
    }

    /// A fresh harness id.
    pub fn next_harness(&self) -> HarnessId {
        self.next_harness.fetch_add(1, Ordering::Relaxed)
    }

    /// A fresh tag for a harness request (tags grow: a higher one started later).
    pub fn next_tag(&self) -> u64 {
        self.next_tag.fetch_add(1, Ordering::Relaxed)
    }

    /// The hub's state (held briefly; a leaf: see the module's lock order).
    pub fn tables(&self) -> Held<'_, Tables> {
        lock(&self.tables)
    }

    /// Harness `id`, while it is connected.
    pub fn harness(&self, id: HarnessId) -> Option<Arc<HarnessState>> {
        self.tables().harnesses.get(&id).and_then(Weak::upgrade)
    }

    /// Every connected harness whose scope includes server `server`.
    pub fn harnesses_of(&self, server: &str) -> Vec<Arc<HarnessState>> {
        let tables = self.tables();
        tables
            .registry
            .harnesses_of(server)
            .into_iter()
            .filter_map(|id| tables.harnesses.get(&id).and_then(Weak::upgrade))
            .collect()
    }

    fn all_harnesses(&self) -> Vec<Arc<HarnessState>> {
        self.tables()
            .harnesses
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Wait (at most `first_list_wait`) for servers that are still starting.
    pub async fn settle(&self) {
        if self.connections.starting() {
            self.connections
                .settled(self.settings.first_list_wait)
                .await;
        }
    }

    /// What `find` finds, waiting for it while servers are still starting: it is looked for
    /// again each time one of them is ready, until it is found, none is starting any more,
    /// or `first_list_wait` has passed.
    pub async fn once_found<T>(&self, mut find: impl FnMut() -> Option<T>) -> Option<T> {
        let mut changes = self.connections.subscribe();
        let deadline = tokio::time::Instant::now() + self.settings.first_list_wait;
        loop {
            // Read before looking: a server that came up meanwhile is looked at again.
            let starting = self.connections.starting();
            if let Some(found) = find() {
                return Some(found);
            }
            if !starting {
                return None;
            }
            tokio::select! {
                _ = changes.next() => {}
                _ = self.connections.settled(self.settings.first_list_wait) => {}
                _ = tokio::time::sleep_until(deadline) => return find(),
            }
        }
    }

    /// The aggregated naming of every ready server and AHP client tool, rebuilt only after
    /// a change (outside the lock: two callers may build the same one).
    pub fn namespace(&self) -> Arc<Namespace> {
        let clients = self.client_tools();
        let version = (self.connections.version(), Arc::as_ptr(&clients) as usize);
        if let Some((at, names)) = &self.tables().namespace {
            if *at == version {
                return names.clone();
            }
        }
        let qualifiers = self.qualifiers();
        let offers: Vec<(String, String, Arc<Offer>)> = self
            .connections
            .snapshot()
            .into_iter()
            .map(|(id, server)| {
                let qualifier = qualifiers
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| server.name.clone());
                let offer = self.offered(&id, server.offer());
                (id, qualifier, offer)
            })
            .collect();
        let client_offers = super::client_offers::offers(&clients);
        let mut servers: Vec<(String, String, &Offer)> = offers
            .iter()
            .map(|(id, q, offer)| (id.clone(), q.clone(), offer.as_ref()))
            .collect();
        // The AHP clients' tools, after the servers', each client named like a server.
        let names: BTreeMap<String, String> = client_offers
            .iter()
            .map(|(id, name, _)| (id.clone(), name.clone()))
            .collect();
        let client_qualifiers = naming::qualifiers(&names);
        for (id, _, offer) in &client_offers {
            let qualifier = client_qualifiers
                .get(id)
                .cloned()
                .unwrap_or_else(|| id.clone());
            servers.push((id.clone(), qualifier, offer));
        }
        let names = Arc::new(Namespace::build(&servers, &self.settings.policy));
        self.tables().namespace = Some((version, names.clone()));
        names
    }

    /// What server `id` offers the harness: `offer` without the tools its declaration
    /// filters out.
    fn offered(&self, id: &str, offer: Arc<Offer>) -> Arc<Offer> {
        match self.connections.tool_filters(id) {
            Some(filters) if offer.tools.iter().any(|t| filters.hides(&t.key)) => {
                let mut shown = (*offer).clone();
                shown.tools.retain(|t| !filters.hides(&t.key));
                Arc::new(shown)
            }
            _ => offer,
        }
    }

    /// The qualifier (prefix) of server `id`.
    pub fn qualifier(&self, id: &str) -> String {
        self.qualifiers()
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    /// Server id → qualifier (its `/mcp/<qualifier>` and prefix) of every declared server.
    pub fn qualifiers(&self) -> Arc<Qualifiers> {
        let version = self.connections.version();
        if let Some((at, qualifiers)) = &self.tables().qualifiers {
            if *at == version {
                return qualifiers.clone();
            }
        }
        let qualifiers = Arc::new(naming::qualifiers(&self.connections.declared()));
        self.tables().qualifiers = Some((version, qualifiers.clone()));
        qualifiers
    }

    /// A harness introduced itself (its `initialize`, or `notifications/initialized`).
    pub fn join(&self, harness: &Arc<HarnessState>) {
        let abilities = harness.abilities();
        let reachable = harness.stands_for || harness.has_general();
        let known = {
            let mut tables = self.tables();
            let known = tables
                .harnesses
                .insert(harness.id, Arc::downgrade(harness))
                .is_some();
            tables
                .registry
                .join(harness.id, harness.scope.clone(), abilities, reachable);
            known
        };
        self.update_sampling();
        if !known {
            tracing::debug!(harness = harness.id, scope = ?harness.scope, ?abilities, "harness joined");
            if abilities.roots {
                // Servers may now get roots they could not get before.
                self.roots_changed(&harness.scope);
            }
        }
    }

    /// A harness session ended: its requests are cancelled upstream (their exchanges, when
    /// dropped, take them out of the in-flight table), what it owed is refused, its
    /// subscriptions and log levels released.
    pub fn harness_gone(self: &Arc<Self>, harness: &HarnessState) {
        let (orphaned, requests, had_level) = {
            let mut tables = self.tables();
            tables.harnesses.remove(&harness.id);
            let had_level = tables.registry.log_level_of(harness.id).is_some();
            let orphaned = tables.registry.leave(harness.id);
            let requests = tables.registry.in_flight.of_harness(harness.id);
            (orphaned, requests, had_level)
        };
        self.update_sampling();
        let mut by_server: BTreeMap<Arc<str>, Vec<u64>> = BTreeMap::new();
        for (tag, server, cancelled) in requests {
            cancelled.cancel();
            by_server.entry(server).or_default().push(tag);
        }
        for (server, tags) in by_server {
            if let Some(connected) = self.connections.get(&server) {
                connected
                    .session
                    .cancel_tagged(&tags, "the MCP client (harness) went away");
            }
        }
        for owed in harness.drain() {
            owed.refuse(INTERNAL_ERROR, "the MCP client (harness) went away");
        }
        tracing::debug!(harness = harness.id, "harness left");
        // Subscriptions only it held are ended upstream, and servers' levels follow the
        // harnesses left; a harness that held none and asked for no level (a modern
        // request's stand-in, typically) changes neither.
        if orphaned.is_empty() && !had_level {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let hub = self.clone();
        runtime.spawn(async move {
            let connections = &hub.connections;
            for (server, uri) in orphaned {
                if let Some(connected) = connections.get(&server) {
                    let params = format!(r#"{{"uri":{}}}"#, crate::mcp::message::quote(&uri));
                    let _ = connected
                        .session
                        .call(
                            "resources/unsubscribe",
                            Some(&params),
                            Duration::from_secs(10),
                        )
                        .await;
                }
            }
            for server in connections.snapshot().keys() {
                hub.apply_log_level(server).await;
            }
        });
    }

    /// Harness `id` can (or no longer can) be reached by requests of the proxy's own.
    pub fn set_reachable(&self, id: HarnessId, reachable: bool) {
        self.tables().registry.set_reachable(id, reachable);
        self.update_sampling();
    }

    /// Follows whether some connected harness can answer `sampling/createMessage`.
    pub fn sampling_available(&self) -> tokio::sync::watch::Receiver<bool> {
        self.sampling.subscribe()
    }

    pub(super) fn update_sampling(&self) {
        let able = self.tables().registry.any_can(Need::Sampling);
        self.sampling
            .send_if_modified(|now| std::mem::replace(now, able) != able);
    }

    /// Tell every ready server in `scope` that the roots changed.
    pub fn roots_changed(&self, scope: &Scope) {
        for (id, connected) in self.connections.snapshot() {
            if scope.includes(&id) {
                let _ = connected.session.notify(
                    r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#.to_string(),
                );
            }
        }
    }

    /// Server `server` was sent `level` on a harness's behalf.
    pub fn note_level(&self, server: &str, level: Level) {
        self.tables()
            .applied_levels
            .insert(server.to_string(), level);
    }

    /// Send server `server` the most verbose level any harness that sees it asked for, if
    /// that differs from what it has.
    pub async fn apply_log_level(&self, server: &str) {
        let Some(connected) = self.connections.get(server) else {
            return;
        };
        if !connected.has("logging") {
            return;
        }
        let level = {
            let tables = self.tables();
            match tables.registry.log_level_for(server) {
                Some(level) if tables.applied_levels.get(server) != Some(&level) => level,
                _ => return,
            }
        };
        let params = format!(r#"{{"level":"{}"}}"#, level.name());
        assert_free("a server session called under a front lock");
        match connected
            .session
            .call(
                "logging/setLevel",
                Some(&params),
                self.settings.request_timeout,
            )
            .await
        {
            Ok(_) => self.note_level(server, level),
            Err(error) => {
                tracing::debug!(server = %connected.name, %error, "logging/setLevel failed")
            }
        }
    }

    /// A server (re)started: give it the log level and the subscriptions harnesses hold.
    async fn restore(&self, server: &str) {
        self.apply_log_level(server).await;
        let uris = self.tables().registry.subscribed_uris(server);
        if let Some(connected) = self.connections.get(server) {
            for uri in uris {
                let params = format!(r#"{{"uri":{}}}"#, crate::mcp::message::quote(&uri));
                let _ = connected
                    .session
                    .call(
                        "resources/subscribe",
                        Some(&params),
                        self.settings.request_timeout,
                    )
                    .await;
            }
        }
    }

    /// Announce changes to every harness that sees them: list changes for the aggregated
    /// endpoint (its names may have changed), and a server becoming ready or going away for
    /// a per-server endpoint (a server's own `list_changed` reaches those as it is).
    fn announce(&self, change: &Change) {
        for harness in self.all_harnesses() {
            if !harness.is_live() || !harness.scope.includes(&change.server) {
                continue;
            }
            let lists = match (&harness.scope, change.ready) {
                (Scope::All, _) => change.lists,
                (Scope::Server(_), Some(_)) => Lists::ALL,
                (Scope::Server(_), None) => continue,
            };
            for (changed, list) in [
                (lists.tools, "tools"),
                (lists.prompts, "prompts"),
                (lists.resources, "resources"),
            ] {
                if changed {
                    harness.notify(format!(
                        r#"{{"jsonrpc":"2.0","method":"notifications/{list}/list_changed"}}"#
                    ));
                }
            }
        }
    }
}

/// Announce changes of the AHP clients' tools to the aggregated endpoint's harnesses.
async fn follow_client_tools(hub: Weak<Hub>, mut tools: tokio::sync::watch::Receiver<ClientTools>) {
    while tools.changed().await.is_ok() {
        let Some(hub) = hub.upgrade() else { return };
        for harness in hub.all_harnesses() {
            if harness.is_live() && harness.scope == Scope::All {
                harness.notify(
                    r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.to_string(),
                );
            }
        }
    }
}

/// Announce every change and restore servers that become ready, until the hub is gone.
async fn follow_changes(hub: Weak<Hub>, mut changes: Changes) {
    while let Some(event) = changes.next().await {
        let Some(hub) = hub.upgrade() else { return };
        let change = match event {
            ChangeEvent::Server(change) => change,
            ChangeEvent::Lagged => {
                // Some were missed: tell every harness every list changed.
                for (id, _) in hub.connections.snapshot() {
                    hub.announce(&Change {
                        server: id,
                        lists: Lists::ALL,
                        ready: Some(true),
                    });
                }
                continue;
            }
        };
        hub.announce(&change);
        match change.ready {
            Some(true) => {
                let hub = hub.clone();
                tokio::spawn(async move { hub.restore(&change.server).await });
            }
            Some(false) => {
                hub.tables().applied_levels.remove(&change.server);
            }
            None => {}
        }
    }
}
