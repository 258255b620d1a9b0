//! What every harness session of the MCP front shares: the ready servers, the namespace of
//! the aggregated endpoint, the registry, the harnesses themselves, and the tasks that
//! announce list changes and re-apply log levels and subscriptions when a server restarts.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;

use super::answers::INTERNAL_ERROR;
use super::harness_state::HarnessState;
use super::naming::{self, Namespace, Policy};
use super::registry::{HarnessId, Level, Need, Registry, Scope};
use crate::mirror::{Mirror, Outcome, Ticket};
use crate::supervisor::connections::{Change, Connections, Downstream};
use crate::upstream::offer::Lists;

/// Mirrored calls that went on as tasks kept waiting for their task at the most.
const MAX_PARKED_TASKS: usize = 1024;
/// How long a completed task's mirrored call waits for the harness to read its result.
pub const TASK_RESULT_GRACE: Duration = Duration::from_secs(10);

/// How the front behaves (`[mcp]` in proxy.toml).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Tool, prompt and URI naming in the aggregated endpoint.
    pub policy: Policy,
    /// How long a server may take to answer (reset by its progress notifications).
    pub request_timeout: Duration,
    /// How long a request waits for servers that are still starting.
    pub first_list_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            policy: Policy::default(),
            request_timeout: Duration::from_secs(300),
            first_list_wait: Duration::from_secs(10),
        }
    }
}

/// Server id → qualifier (its `/mcp/<qualifier>`, its prefix) of every declared server.
pub type Qualifiers = BTreeMap<String, String>;

/// The front's shared state (one per process).
pub struct Hub {
    /// Ready servers.
    pub connections: Arc<Connections>,
    /// Behaviour.
    pub settings: Settings,
    /// Harness tool calls go here.
    pub mirror: Mirror,
    registry: Mutex<Registry>,
    harnesses: Mutex<HashMap<HarnessId, Weak<HarnessState>>>,
    namespace: Mutex<Option<(NamespaceVersion, Arc<Namespace>)>>,
    /// Server id → qualifier of every declared server, rebuilt only after a change.
    qualifiers: Mutex<Option<(u64, Arc<Qualifiers>)>>,
    /// The log level last sent to each server.
    applied_levels: Mutex<HashMap<String, Level>>,
    /// Mirrored calls that went on as tasks, by (server, task id).
    task_tickets: Mutex<HashMap<(String, String), Ticket>>,
    next_harness: AtomicU64,
    next_tag: AtomicU64,
    /// Whether some connected harness declared sampling.
    sampling: tokio::sync::watch::Sender<bool>,
    /// The hub itself, for tasks it starts.
    this: std::sync::OnceLock<Weak<Hub>>,
    /// The AHP host, whose clients' tools are offered to harnesses.
    host: std::sync::OnceLock<Weak<crate::host::Host>>,
    /// Those tools.
    client_tools: std::sync::OnceLock<ClientToolsWatch>,
}

/// What a cached namespace was built from: the connections' version and the client tools.
type NamespaceVersion = (u64, usize);

type ClientToolsWatch =
    tokio::sync::watch::Receiver<Arc<Vec<crate::host::client_tools::ClientTool>>>;

impl Hub {
    /// A hub over `connections`; installs itself as their downstream and starts the task
    /// that announces changes to harnesses and restores servers that (re)start.
    pub fn start(connections: Arc<Connections>, settings: Settings, mirror: Mirror) -> Arc<Self> {
        let hub = Arc::new(Self {
            connections: connections.clone(),
            settings,
            mirror,
            registry: Mutex::default(),
            harnesses: Mutex::default(),
            namespace: Mutex::default(),
            qualifiers: Mutex::default(),
            applied_levels: Mutex::default(),
            task_tickets: Mutex::default(),
            next_harness: AtomicU64::new(1),
            next_tag: AtomicU64::new(1),
            sampling: tokio::sync::watch::channel(false).0,
            this: std::sync::OnceLock::new(),
            host: std::sync::OnceLock::new(),
            client_tools: std::sync::OnceLock::new(),
        });
        let _ = hub.this.set(Arc::downgrade(&hub));
        let downstream: Arc<dyn Downstream> = hub.clone();
        connections.set_downstream(Arc::downgrade(&downstream));
        tokio::spawn(follow_changes(
            Arc::downgrade(&hub),
            connections.subscribe(),
        ));
        hub
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

    /// Client `client`'s tool `name`, while it offers it.
    pub fn client_tool(
        &self,
        client: &str,
        name: &str,
    ) -> Option<crate::host::client_tools::ClientTool> {
        let tools = self.client_tools.get()?.borrow().clone();
        tools
            .iter()
            .find(|t| t.client_id == client && t.tool.name == name)
            .cloned()
    }

    /// Whether some AHP client offers tools now.
    pub fn offers_client_tools(&self) -> bool {
        self.client_tools
            .get()
            .is_some_and(|tools| !tools.borrow().is_empty())
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

    /// A fresh tag for a forwarded request.
    pub fn next_tag(&self) -> u64 {
        self.next_tag.fetch_add(1, Ordering::Relaxed)
    }

    /// The bookkeeping (held briefly, never across an await).
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Harness `id`, while it is connected.
    pub fn harness(&self, id: HarnessId) -> Option<Arc<HarnessState>> {
        self.harnesses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .and_then(Weak::upgrade)
    }

    fn all_harnesses(&self) -> Vec<Arc<HarnessState>> {
        self.harnesses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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

    /// The aggregated naming of every ready server, rebuilt only after a change.
    pub fn namespace(&self) -> Arc<Namespace> {
        let clients = self
            .client_tools
            .get()
            .map(|tools| tools.borrow().clone())
            .unwrap_or_default();
        let version = (self.connections.version(), Arc::as_ptr(&clients) as usize);
        let mut cached = self.namespace.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, names)) = cached.as_ref() {
            if *at == version {
                return names.clone();
            }
        }
        let qualifiers = self.qualifiers();
        let ready = self.connections.snapshot();
        let offers: Vec<(String, String, Arc<crate::upstream::offer::Offer>)> = ready
            .iter()
            .map(|(id, server)| {
                let qualifier = qualifiers
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| server.name.clone());
                (id.clone(), qualifier, server.offer())
            })
            .collect();
        let client_offers = super::client_offers::offers(&clients);
        let mut servers: Vec<(String, String, &crate::upstream::offer::Offer)> = offers
            .iter()
            .map(|(id, q, offer)| (id.clone(), q.clone(), offer.as_ref()))
            .collect();
        // The AHP clients' tools, after the servers', each client named like a server.
        let names: Vec<(String, String)> = client_offers
            .iter()
            .map(|(id, name, _)| (id.clone(), name.clone()))
            .collect();
        let client_qualifiers = naming::qualifiers(&names.into_iter().collect());
        for (id, _, offer) in &client_offers {
            let qualifier = client_qualifiers
                .get(id)
                .cloned()
                .unwrap_or_else(|| id.clone());
            servers.push((id.clone(), qualifier, offer));
        }
        let names = Arc::new(Namespace::build(&servers, &self.settings.policy));
        *cached = Some((version, names.clone()));
        names
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
        let mut cached = self.qualifiers.lock().unwrap_or_else(|p| p.into_inner());
        match cached.as_ref() {
            Some((at, qualifiers)) if *at == version => qualifiers.clone(),
            _ => {
                let qualifiers = Arc::new(naming::qualifiers(&self.connections.declared()));
                *cached = Some((version, qualifiers.clone()));
                qualifiers
            }
        }
    }

    /// A harness introduced itself (its `initialize`, or `notifications/initialized`).
    pub fn join(&self, harness: &Arc<HarnessState>) {
        let abilities = harness.abilities();
        let known = self
            .harnesses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(harness.id, Arc::downgrade(harness))
            .is_some();
        let reachable = harness.stands_for || harness.has_general();
        self.registry()
            .join(harness.id, harness.scope.clone(), abilities, reachable);
        self.update_sampling();
        if !known {
            tracing::debug!(harness = harness.id, scope = ?harness.scope, ?abilities, "harness joined");
            if abilities.roots {
                // Servers may now get roots they could not get before.
                self.roots_changed(&harness.scope);
            }
        }
    }

    /// A harness session ended: its requests are cancelled upstream, what it owed is
    /// refused, its subscriptions and log levels released.
    pub fn harness_gone(self: &Arc<Self>, harness: &HarnessState) {
        self.harnesses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&harness.id);
        let orphaned = self.registry().leave(harness.id);
        self.update_sampling();
        let (in_flight, owed) = harness.drain();
        for (_, request) in in_flight {
            request.cancelled.cancel();
            if let Some(server) = self.connections.get(&request.server) {
                server
                    .session
                    .cancel(request.upstream, "the MCP client (harness) went away");
            }
        }
        for owed in owed {
            owed.refuse(INTERNAL_ERROR, "the MCP client (harness) went away");
        }
        tracing::debug!(harness = harness.id, "harness left");
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
        self.registry().set_reachable(id, reachable);
        self.update_sampling();
    }

    /// Follows whether some connected harness can answer `sampling/createMessage`.
    pub fn sampling_available(&self) -> tokio::sync::watch::Receiver<bool> {
        self.sampling.subscribe()
    }

    pub(super) fn update_sampling(&self) {
        let able = self.registry().any_can(Need::Sampling);
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
        self.levels().insert(server.to_string(), level);
    }

    fn levels(&self) -> MutexGuard<'_, HashMap<String, Level>> {
        self.applied_levels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
        let Some(level) = self.registry().log_level_for(server) else {
            return;
        };
        if self.levels().get(server) == Some(&level) {
            return;
        }
        let params = format!(r#"{{"level":"{}"}}"#, level.name());
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
        let uris = self.registry().subscribed_uris(server);
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

    /// A mirrored call went on as task `task` of server `server`: it ends with the task.
    pub fn park_task_ticket(&self, server: &str, task: &str, ticket: Ticket) {
        let mut tickets = self.task_tickets.lock().unwrap_or_else(|p| p.into_inner());
        // Bounded: a harness that starts tasks and never reads them cannot grow this.
        if tickets.len() >= MAX_PARKED_TASKS {
            let oldest = tickets.keys().next().cloned();
            if let Some(oldest) = oldest {
                tickets.remove(&oldest);
            }
        }
        tickets.insert((server.to_string(), task.to_string()), ticket);
    }

    /// Task `task` of server `server` reached `status` (from `tasks/get` or its status
    /// notification). A failed or cancelled task ends its mirrored call at once; a completed
    /// one ends with its result when the harness reads it (`tasks/result`), else after
    /// [`TASK_RESULT_GRACE`] with a note that it completed.
    pub fn task_status(&self, server: &str, task: &str, status: &str) {
        match status {
            "failed" | "cancelled" => self.end_task_ticket(server, task, status),
            "completed" => {
                let hub = self.this.get().cloned().unwrap_or_default();
                let (server, task) = (server.to_string(), task.to_string());
                tokio::spawn(async move {
                    tokio::time::sleep(TASK_RESULT_GRACE).await;
                    if let Some(hub) = hub.upgrade() {
                        hub.end_task_ticket(&server, &task, "completed");
                    }
                });
            }
            _ => {}
        }
    }

    fn take_task_ticket(&self, server: &str, task: &str) -> Option<Ticket> {
        self.task_tickets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(server.to_string(), task.to_string()))
    }

    /// Task `task` of server `server` ended with `answer` (a `tasks/result` answer).
    pub fn finish_task_ticket(&self, server: &str, task: &str, answer: &str) {
        if let Some(ticket) = self.take_task_ticket(server, task) {
            ticket.finish(Outcome::Raw(answer.to_string()));
        }
    }

    /// Task `task` of server `server` ended without its result being read through the
    /// proxy: its mirrored call ends so.
    pub fn end_task_ticket(&self, server: &str, task: &str, status: &str) {
        if let Some(ticket) = self.take_task_ticket(server, task) {
            ticket.finish(match status {
                "cancelled" => Outcome::Cancelled,
                "completed" => Outcome::Result(serde_json::json!({"content": [{"type": "text",
                    "text": "The task completed; the harness did not read its result through the proxy."}]})),
                other => Outcome::Failed(format!("the task ended {other}")),
            });
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
async fn follow_client_tools(hub: Weak<Hub>, mut tools: ClientToolsWatch) {
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
async fn follow_changes(hub: Weak<Hub>, mut changes: tokio::sync::broadcast::Receiver<Change>) {
    loop {
        let change = match changes.recv().await {
            Ok(change) => change,
            Err(RecvError::Lagged(_)) => Change {
                server: String::new(),
                lists: Lists::ALL,
                ready: None,
            },
            Err(RecvError::Closed) => return,
        };
        let Some(hub) = hub.upgrade() else { return };
        if change.server.is_empty() {
            // Lagged: tell every harness every list changed.
            for (id, _) in hub.connections.snapshot() {
                hub.announce(&Change {
                    server: id,
                    lists: Lists::ALL,
                    ready: Some(true),
                });
            }
            continue;
        }
        hub.announce(&change);
        match change.ready {
            Some(true) => {
                let hub = hub.clone();
                tokio::spawn(async move { hub.restore(&change.server).await });
            }
            Some(false) => {
                hub.levels().remove(&change.server);
            }
            None => {}
        }
    }
}
