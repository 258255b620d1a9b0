//! Accepts TCP connections, upgrades them to WebSocket past the gate (token, Origin, Host)
//! within the handshake timeout, and enforces the connection limit. Every connection task
//! is tracked so shutdown can wait for all of them to close.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::gate::Gate;
use super::services::Services;
use crate::config::Limits;

/// The body of the `503` a connection beyond `max_connections` gets.
const BUSY: &str = "too many AHP connections; try again later";

/// Serve AHP on `listener` until `shutdown` is cancelled, then wait for connections to close.
#[allow(clippy::result_large_err)] // the upgrade callback's error type is tungstenite's
pub async fn serve(
    listener: TcpListener,
    services: Arc<Services>,
    gate: Gate,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let gate = Arc::new(gate);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let tasks = TaskTracker::new();
    loop {
        let Some((stream, peer, slot)) =
            crate::tcp::accept_within(&listener, &slots, &shutdown, "AHP", BUSY).await
        else {
            break;
        };
        let services = services.clone();
        let limits = limits.clone();
        let shutdown = shutdown.clone();
        let gate = gate.clone();
        tasks.spawn(
            async move {
                let config = WebSocketConfig::default()
                    .max_message_size(Some(limits.max_frame_bytes))
                    .max_frame_size(Some(limits.max_frame_bytes));
                let upgrade = tokio_tungstenite::accept_hdr_async_with_config(
                    stream,
                    move |request: &Request, response: Response| admit(&gate, request, response),
                    Some(config),
                );
                // A peer that never finishes the upgrade holds no slot for long.
                match tokio::time::timeout(limits.handshake_timeout, upgrade).await {
                    Ok(Ok(ws)) => super::socket::run(ws, services, &limits, shutdown).await,
                    Ok(Err(error)) => tracing::debug!(%error, "WebSocket upgrade failed"),
                    Err(_) => tracing::debug!("WebSocket upgrade not completed in time"),
                }
                drop(slot);
            }
            .instrument(tracing::info_span!("ahp", peer = %peer)),
        );
    }
    tasks.close();
    tasks.wait().await;
}

/// Let the upgrade through the gate, or refuse it with a status and a plain reason.
#[allow(clippy::result_large_err)] // tungstenite's upgrade callback signature
fn admit(gate: &Gate, request: &Request, response: Response) -> Result<Response, ErrorResponse> {
    let (status, message) = match gate.check(request.headers(), request.uri()) {
        Err(refusal) => {
            tracing::info!(status = refusal.status(), reason = %refusal.message(), "AHP connection refused");
            (
                StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN),
                refusal.message(),
            )
        }
        Ok(()) => return Ok(response),
    };
    let mut refusal = ErrorResponse::new(Some(message));
    *refusal.status_mut() = status;
    if status == StatusCode::UNAUTHORIZED {
        refusal.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"ahp-proxy\""),
        );
    }
    Err(refusal)
}

/// Bind the AHP address, with an error that says which address failed.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}
