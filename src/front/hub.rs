//! What every harness session of the MCP front shares: the ready servers, the naming
//! namespace, the registry of harnesses and requests in flight, and the way back from a
//! server to the harness (progress, log messages, resource updates, sampling, roots,
//! elicitation). Also the per-harness task that announces list changes.

// Logging, sampling and roots are deprecated by SEP-2577 but still forwarded faithfully.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rmcp::model::{ClientResult, ErrorCode, LoggingLevel, ServerNotification, ServerRequest};
use rmcp::service::{
    InboundStreamOrigin, OriginatingRequestId, PeerRequestOptions, RequestContext,
};
use rmcp::{ErrorData, Peer, RoleClient, RoleServer};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::OwnedSemaphorePermit;

use super::naming::{self, Namespace, Policy};
use super::registry::{Abilities, HarnessId, Need, Registry, Scope};
use super::relay::{self, Relay};
use crate::mirror::Mirror;
use crate::supervisor::connections::{Connected, Connections, Downstream, Lists};
use crate::supervisor::upstream::MCP_APPS_EXTENSION;

/// How the front behaves (`[mcp]` in proxy.toml).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Tool, prompt and URI naming in the aggregated endpoint.
    pub policy: Policy,
    /// How long a server may take to answer (reset by its progress notifications).
    pub request_timeout: Duration,
    /// How long a harness's first listing waits for servers that are still starting.
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

/// Each connected harness's peer, with its budget for notifications in flight.
type Peers = HashMap<HarnessId, (Peer<RoleServer>, Arc<Relay>)>;

/// The front's shared state (one per process).
pub struct Hub {
    /// Ready servers.
    pub connections: Arc<Connections>,
    /// Behaviour.
    pub settings: Settings,
    /// Harness tool calls go here.
    pub mirror: Mirror,
    registry: Mutex<Registry>,
    peers: Mutex<Peers>,
    namespace: Mutex<Option<(u64, Arc<Namespace>)>>,
    /// The log level last sent to each server.
    applied_levels: Mutex<HashMap<String, LoggingLevel>>,
    next_harness: AtomicU64,
    /// Whether some connected harness declared sampling.
    sampling: tokio::sync::watch::Sender<bool>,
}

impl Hub {
    /// A hub over `connections`; installs itself as their downstream and starts the task
    /// that re-applies log levels and subscriptions to servers that (re)start.
    pub fn start(connections: Arc<Connections>, settings: Settings, mirror: Mirror) -> Arc<Self> {
        let hub = Arc::new(Self {
            connections: connections.clone(),
            settings,
            mirror,
            registry: Mutex::default(),
            peers: Mutex::default(),
            namespace: Mutex::default(),
            applied_levels: Mutex::default(),
            next_harness: AtomicU64::new(1),
            sampling: tokio::sync::watch::channel(false).0,
        });
        let downstream: Arc<dyn Downstream> = hub.clone();
        connections.set_downstream(Arc::downgrade(&downstream));
        let weak = Arc::downgrade(&hub);
        let mut changes = connections.subscribe();
        tokio::spawn(async move {
            loop {
                let change = match changes.recv().await {
                    Ok(change) => change,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                let Some(hub) = weak.upgrade() else { return };
                match change.ready {
                    Some(true) => hub.restore(&change.server).await,
                    Some(false) => {
                        hub.lock_levels().remove(&change.server);
                    }
                    None => {}
                }
            }
        });
        hub
    }

    /// A fresh harness id.
    pub fn next_harness(&self) -> HarnessId {
        self.next_harness.fetch_add(1, Ordering::Relaxed)
    }

    /// The bookkeeping (held briefly, never across an await).
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_peers(&self) -> MutexGuard<'_, Peers> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_levels(&self) -> MutexGuard<'_, HashMap<String, LoggingLevel>> {
        self.applied_levels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn peer(&self, id: HarnessId) -> Option<Peer<RoleServer>> {
        self.lock_peers().get(&id).map(|(peer, _)| peer.clone())
    }

    /// Harness `id`'s peer with room for a notification of about `kib` KiB, or `None` when
    /// it is gone or too far behind (see [`Relay`]).
    fn relay(&self, id: HarnessId, kib: u32) -> Option<(Peer<RoleServer>, OwnedSemaphorePermit)> {
        let (peer, relay) = self.lock_peers().get(&id).cloned()?;
        Some((peer, relay.admit(kib)?))
    }

    /// Whether harness `id` uses the aggregated endpoint (renamed URIs, prefixed loggers).
    fn aggregated(&self, id: HarnessId) -> bool {
        self.registry()
            .harness(id)
            .is_some_and(|h| h.scope == Scope::All)
    }

    /// The aggregated naming of every ready server, rebuilt only after a change.
    pub fn namespace(&self) -> Arc<Namespace> {
        let version = self.connections.version();
        let mut cached = self.namespace.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, names)) = cached.as_ref() {
            if *at == version {
                return names.clone();
            }
        }
        let qualifiers = naming::qualifiers(&self.connections.declared());
        let servers: Vec<(String, String, crate::supervisor::connections::Offer)> = self
            .connections
            .snapshot()
            .into_iter()
            .map(|(id, server)| {
                let qualifier = qualifiers
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| server.name.clone());
                let offer = server.offer();
                (id, qualifier, offer)
            })
            .collect();
        let names = Arc::new(Namespace::build(&servers, &self.settings.policy));
        *cached = Some((version, names.clone()));
        names
    }

    /// The qualifier (prefix) of server `id`.
    pub fn qualifier(&self, id: &str) -> String {
        naming::qualifiers(&self.connections.declared())
            .remove(id)
            .unwrap_or_else(|| id.to_string())
    }

    /// A harness session introduced itself (or sent its first request). The first time,
    /// start announcing list changes to it.
    pub fn join(self: &Arc<Self>, id: HarnessId, scope: &Scope, peer: &Peer<RoleServer>) {
        let known = {
            let mut peers = self.lock_peers();
            let relay = peers.get(&id).map(|(_, relay)| relay.clone());
            peers
                .insert(id, (peer.clone(), relay.unwrap_or_default()))
                .is_some()
        };
        let abilities = abilities_of(peer);
        self.registry().join(id, scope.clone(), abilities);
        self.update_sampling();
        if known {
            return;
        }
        tracing::debug!(harness = id, ?scope, ?abilities, "harness joined");
        tokio::spawn(announce_changes(
            self.clone(),
            id,
            scope.clone(),
            peer.clone(),
        ));
        if abilities.roots {
            // Servers may now get roots they could not get before.
            self.roots_changed(scope);
        }
    }

    /// Follows whether some connected harness can answer `sampling/createMessage`.
    pub fn sampling_available(&self) -> tokio::sync::watch::Receiver<bool> {
        self.sampling.subscribe()
    }

    fn update_sampling(&self) {
        let able = self.registry().any_can(Need::Sampling);
        self.sampling
            .send_if_modified(|now| std::mem::replace(now, able) != able);
    }

    /// `sampling/createMessage` from an MCP App of server `server` (over its `mcp://`
    /// channel): answered by a harness that declared sampling, like the server's own.
    pub async fn sample_for_app(
        &self,
        server: &str,
        params: serde_json::Value,
        cancelled: tokio_util::sync::CancellationToken,
    ) -> Result<ClientResult, ErrorData> {
        let request: ServerRequest = serde_json::from_value(serde_json::json!({
            "method": "sampling/createMessage",
            "params": params,
        }))
        .map_err(|e| {
            ErrorData::invalid_params(format!("invalid sampling/createMessage params: {e}"), None)
        })?;
        self.answer_with(server, request, None, cancelled).await
    }

    /// A harness session ended: forget it, release its subscriptions, relax log levels.
    pub fn leave(self: &Arc<Self>, id: HarnessId) {
        if self.lock_peers().remove(&id).is_none() {
            return;
        }
        let orphaned = self.registry().leave(id);
        self.update_sampling();
        tracing::debug!(harness = id, "harness left");
        // Sessions can end while the runtime winds down: then there is nobody to tell.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let hub = self.clone();
        runtime.spawn(async move {
            for (server, uri) in orphaned {
                if let Some(connected) = hub.connections.get(&server) {
                    let params = serde_json::from_value(serde_json::json!({ "uri": uri }));
                    if let Ok(params) = params {
                        let _ = connected.peer.unsubscribe(params).await;
                    }
                }
            }
            for server in hub.connections.snapshot().keys() {
                hub.apply_log_level(server).await;
            }
        });
    }

    /// Tell every ready server in `scope` that the roots changed.
    pub fn roots_changed(&self, scope: &Scope) {
        for (id, connected) in self.connections.snapshot() {
            if scope.includes(&id) {
                tokio::spawn(async move {
                    let _ = connected.peer.notify_roots_list_changed().await;
                });
            }
        }
    }

    /// Send server `server` the most verbose level any harness that sees it asked for,
    /// if that differs from what it has.
    pub async fn apply_log_level(&self, server: &str) {
        let Some(connected) = self.connections.get(server) else {
            return;
        };
        if connected.capabilities.logging.is_none() {
            return;
        }
        let Some(level) = self.registry().log_level_for(server) else {
            return;
        };
        if self.lock_levels().get(server) == Some(&level) {
            return;
        }
        let params: Result<rmcp::model::SetLevelRequestParams, _> =
            serde_json::from_value(serde_json::json!({ "level": level }));
        if let Ok(params) = params {
            match connected.peer.set_level(params).await {
                Ok(()) => {
                    self.lock_levels().insert(server.to_string(), level);
                }
                Err(error) => {
                    tracing::debug!(server = %connected.name, %error, "logging/setLevel failed")
                }
            }
        }
    }

    /// A server (re)started: give it the log level and the subscriptions harnesses hold.
    async fn restore(&self, server: &str) {
        self.apply_log_level(server).await;
        let uris = self.registry().subscribed_uris(server);
        if let Some(connected) = self.connections.get(server) {
            for uri in uris {
                let params = serde_json::from_value(serde_json::json!({ "uri": uri }));
                if let Ok(params) = params {
                    let _ = connected.peer.subscribe(params).await;
                }
            }
        }
    }

    /// Ready server `id`, or an error naming it.
    pub fn ready(&self, id: &str) -> Result<Connected, ErrorData> {
        self.connections.get(id).ok_or_else(|| {
            let name = self
                .connections
                .declared()
                .get(id)
                .cloned()
                .unwrap_or_else(|| id.to_string());
            super::forward::not_running(&format!("MCP server {name}"))
        })
    }

    async fn forward_notification(&self, server: &str, notification: ServerNotification) {
        match notification {
            ServerNotification::ProgressNotification(mut n) => {
                let target = self
                    .registry()
                    .progress_target(server, &n.params.progress_token);
                if let Some((harness, token)) = target {
                    if let Some((peer, _permit)) = self.relay(harness, 1) {
                        n.params.progress_token = token;
                        let _ = peer.notify_progress(n.params).await;
                    }
                }
            }
            ServerNotification::LoggingMessageNotification(n) => {
                let audience = self.registry().log_audience(server, n.params.level);
                let qualifier = self.qualifier(server);
                let kib = relay::approx_kib(&n.params.data);
                for harness in audience {
                    // A harness that stopped reading does not make logs pile up here.
                    let Some((peer, permit)) = self.relay(harness, kib) else {
                        continue;
                    };
                    let mut params = n.params.clone();
                    if self.aggregated(harness) {
                        params.logger = Some(match params.logger.take() {
                            Some(logger) => format!("{qualifier}/{logger}"),
                            None => qualifier.clone(),
                        });
                    }
                    // One slow harness must not hold up the others.
                    tokio::spawn(async move {
                        let _ = peer.notify_logging_message(params).await;
                        drop(permit);
                    });
                }
            }
            ServerNotification::ResourceUpdatedNotification(n) => {
                let subscribers = self.registry().subscribers(server, &n.params.uri);
                if subscribers.is_empty() {
                    return;
                }
                let exposed = self.namespace().expose_uri(server, &n.params.uri);
                for harness in subscribers {
                    let Some((peer, permit)) = self.relay(harness, 1) else {
                        continue;
                    };
                    let mut params = n.params.clone();
                    if self.aggregated(harness) {
                        params.uri = exposed.clone();
                    }
                    tokio::spawn(async move {
                        let _ = peer.notify_resource_updated(params).await;
                        drop(permit);
                    });
                }
            }
            other => {
                tracing::debug!(server, notification = ?std::mem::discriminant(&other), "server notification not forwarded");
            }
        }
    }

    async fn answer(
        &self,
        server: &str,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        let origin = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
            _ => None,
        };
        self.answer_with(server, request, origin, context.ct).await
    }

    /// Route a request only a harness can answer to the right harness and wait for it;
    /// `origin` is the upstream request the server is working on, if known.
    async fn answer_with(
        &self,
        server: &str,
        request: ServerRequest,
        origin: Option<rmcp::model::RequestId>,
        ct: tokio_util::sync::CancellationToken,
    ) -> Result<ClientResult, ErrorData> {
        let method = crate::supervisor::upstream::request_method(&request).to_string();
        let need = match &request {
            ServerRequest::CreateMessageRequest(_) => Need::Sampling,
            ServerRequest::ListRootsRequest(_) => Need::Roots,
            ServerRequest::ElicitRequest(_) => Need::Elicitation,
            _ => {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!("{method} is not supported by ahp-proxy"),
                    None,
                ))
            }
        };
        let route = self.registry().route(server, origin.as_ref(), need);
        let Some((harness, cause)) = route else {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("no connected MCP client (harness) supports {method}"),
                None,
            ));
        };
        let Some(peer) = self.peer(harness) else {
            return Err(ErrorData::internal_error(
                "the MCP client (harness) went away",
                None,
            ));
        };
        tracing::debug!(
            server,
            harness,
            method,
            "server request routed to the harness"
        );
        let mut request = request;
        if let Some(cause) = cause {
            // Over streamable HTTP this rides the SSE stream of the call that caused it.
            use rmcp::model::GetExtensions;
            request.extensions_mut().insert(OriginatingRequestId(cause));
        }
        let timeout = self.settings.request_timeout;
        // A task of its own: the upstream request's task-local origin must not leak into
        // the request to the harness.
        let sent = tokio::spawn(async move {
            let handle = peer
                .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
                .await?;
            let id = handle.id.clone();
            tokio::select! {
                answer = handle.await_response() => answer,
                _ = ct.cancelled() => {
                    let cancel: Result<rmcp::model::CancelledNotificationParam, _> =
                        serde_json::from_value(serde_json::json!({
                            "requestId": id, "reason": "cancelled by the MCP server",
                        }));
                    if let Ok(cancel) = cancel {
                        let _ = peer.notify_cancelled(cancel).await;
                    }
                    Err(rmcp::ServiceError::Cancelled { reason: None })
                }
            }
        });
        match sent.await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(match error {
                rmcp::ServiceError::McpError(error) => error,
                rmcp::ServiceError::Timeout { .. } => ErrorData::new(
                    ErrorCode(super::forward::REQUEST_TIMEOUT),
                    format!(
                        "the MCP client did not answer {method} within {} ms",
                        timeout.as_millis()
                    ),
                    None,
                ),
                _ => ErrorData::internal_error(
                    format!("the MCP client (harness) could not answer {method}"),
                    None,
                ),
            }),
            Err(_) => Err(ErrorData::internal_error(
                format!("{method} was interrupted"),
                None,
            )),
        }
    }
}

impl Downstream for Hub {
    fn notify(
        self: Arc<Self>,
        server: String,
        notification: ServerNotification,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.forward_notification(&server, notification).await })
    }

    fn request(
        self: Arc<Self>,
        server: String,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>> {
        Box::pin(async move { self.answer(&server, request, context).await })
    }
}

/// What a harness declared in `initialize`.
pub fn abilities_of(peer: &Peer<RoleServer>) -> Abilities {
    let Some(info) = peer.peer_info() else {
        return Abilities::default();
    };
    let caps = &info.capabilities;
    Abilities {
        sampling: caps.sampling.is_some(),
        roots: caps.roots.is_some(),
        elicitation: caps.elicitation.is_some(),
        apps: caps
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(MCP_APPS_EXTENSION)),
    }
}

/// Announce list changes to one harness until it goes away. A change of the ready set
/// changes every list; a server's own `list_changed` changes that list. Per-server scopes
/// only hear about their server.
async fn announce_changes(hub: Arc<Hub>, id: HarnessId, scope: Scope, peer: Peer<RoleServer>) {
    let mut changes = hub.connections.subscribe();
    loop {
        let lists = match changes.recv().await {
            Ok(change) if scope.includes(&change.server) => change.lists,
            Ok(_) => continue,
            Err(RecvError::Lagged(_)) => Lists::ALL,
            Err(RecvError::Closed) => return,
        };
        if peer.is_transport_closed() || hub.registry().harness(id).is_none() {
            hub.leave(id);
            return;
        }
        let mut sent = Ok(());
        if lists.tools {
            sent = sent.and(peer.notify_tool_list_changed().await);
        }
        if lists.prompts {
            sent = sent.and(peer.notify_prompt_list_changed().await);
        }
        if lists.resources {
            sent = sent.and(peer.notify_resource_list_changed().await);
        }
        if sent.is_err() {
            hub.leave(id);
            return;
        }
    }
}
