//! Accepts TCP connections, upgrades them to WebSocket, and enforces the connection limit.
//! Every connection task is tracked so shutdown can wait for all of them to close.

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

use crate::config::Limits;
use crate::host::Host;

/// Serve AHP on `listener` until `shutdown` is cancelled, then wait for connections to close.
#[allow(clippy::result_large_err)] // the upgrade callback's error type is tungstenite's
pub async fn serve(
    listener: TcpListener,
    host: Arc<Host>,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let tasks = TaskTracker::new();
    loop {
        let Some((stream, peer)) = crate::tcp::accept(&listener, &shutdown, "AHP").await else {
            break;
        };
        let host = host.clone();
        let limits = limits.clone();
        let shutdown = shutdown.clone();
        let slot = slots.clone().try_acquire_owned().ok();
        tasks.spawn(
            async move {
                let full = slot.is_none();
                let config = WebSocketConfig::default()
                    .max_message_size(Some(limits.max_frame_bytes))
                    .max_frame_size(Some(limits.max_frame_bytes));
                let upgrade = tokio_tungstenite::accept_hdr_async_with_config(
                    stream,
                    move |_request: &Request, response: Response| refuse_if_full(full, response),
                    Some(config),
                );
                match upgrade.await {
                    Ok(ws) => super::socket::run(ws, host, &limits, shutdown).await,
                    Err(error) => tracing::debug!(%error, "WebSocket upgrade failed"),
                }
                drop(slot);
            }
            .instrument(tracing::info_span!("ahp", peer = %peer)),
        );
    }
    tasks.close();
    tasks.wait().await;
}

#[allow(clippy::result_large_err)] // tungstenite's upgrade callback signature
fn refuse_if_full(full: bool, response: Response) -> Result<Response, ErrorResponse> {
    if !full {
        return Ok(response);
    }
    let mut refusal = ErrorResponse::new(Some(
        "too many AHP connections; try again later".to_string(),
    ));
    *refusal.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    Err(refusal)
}

/// Bind the AHP address, with an error that says which address failed.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}
