//! The MCP front over streamable HTTP (rmcp's session service on hyper): `/mcp` is the
//! aggregated endpoint, `/mcp/<server>` one server's transparent endpoint; loopback by default.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::registry::Scope;
use super::{Front, Hub};

type Body = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<Front, LocalSessionManager>;

/// Endpoints by scope, created on first use: `/mcp`, and `/mcp/<server>` for each declared
/// server (by its qualifier, the same prefix the aggregated endpoint uses).
struct Router {
    hub: Arc<Hub>,
    /// Accepted `Host` headers.
    hosts: Vec<String>,
    shutdown: CancellationToken,
    endpoints: Mutex<HashMap<Scope, Service>>,
}

impl Router {
    fn scope(&self, path: &str) -> Option<Scope> {
        match path.trim_end_matches('/') {
            "/mcp" => Some(Scope::All),
            other => {
                let key = other.strip_prefix("/mcp/")?;
                let qualifiers = super::naming::qualifiers(&self.hub.connections.declared());
                qualifiers
                    .into_iter()
                    .find(|(_, q)| q == key)
                    .map(|(id, _)| Scope::Server(id))
            }
        }
    }

    fn endpoint(&self, path: &str) -> Option<Service> {
        let scope = self.scope(path)?;
        let mut endpoints = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(service) = endpoints.get(&scope) {
            return Some(service.clone());
        }
        let hub = self.hub.clone();
        let key = scope.clone();
        let service = StreamableHttpService::new(
            move || Ok(Front::new(hub.clone(), scope.clone())),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default()
                .with_allowed_hosts(self.hosts.clone())
                .with_cancellation_token(self.shutdown.child_token()),
        );
        endpoints.insert(key, service.clone());
        Some(service)
    }
}

fn not_found(path: &str) -> http::Response<Body> {
    let text = format!(
        "no MCP endpoint at {path}: use /mcp (every server) or /mcp/<server> (one declared server)\n"
    );
    let mut response = http::Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = http::StatusCode::NOT_FOUND;
    response
}

/// Bind the MCP HTTP front.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen for MCP on {addr}: {e}"))
}

/// Serve until `shutdown`, then wait for open connections to finish. Requests must name
/// a loopback host, the listen address, or one of `allowed_hosts` in `Host`.
pub async fn serve(
    listener: TcpListener,
    hub: Arc<Hub>,
    allowed_hosts: Vec<String>,
    shutdown: CancellationToken,
) {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if let Ok(addr) = listener.local_addr() {
        if !addr.ip().is_loopback() && !addr.ip().is_unspecified() {
            hosts.push(addr.ip().to_string());
        }
    }
    hosts.extend(allowed_hosts);
    let router = Arc::new(Router {
        hub,
        hosts,
        shutdown: shutdown.clone(),
        endpoints: Mutex::new(HashMap::new()),
    });
    let tasks = TaskTracker::new();
    loop {
        let Some((stream, peer)) = crate::tcp::accept(&listener, &shutdown, "MCP").await else {
            break;
        };
        let router = router.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
                let router = router.clone();
                async move {
                    let path = request.uri().path().to_string();
                    match router.endpoint(&path) {
                        Some(endpoint) => {
                            let response = tower::ServiceExt::oneshot(endpoint, request).await;
                            Ok::<_, Infallible>(match response {
                                Ok(response) => response,
                                Err(never) => match never {},
                            })
                        }
                        None => Ok(not_found(&path)),
                    }
                }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), connection).await;
                }
            }
            tracing::debug!(%peer, "MCP HTTP connection closed");
        });
    }
    tasks.close();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), tasks.wait()).await;
}
