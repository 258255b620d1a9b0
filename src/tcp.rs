//! The accept step both listeners share (AHP WebSocket, MCP HTTP): the next connection with
//! Nagle off, a short back-off on accept errors (e.g. EMFILE), `None` on shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The next accepted connection, or `None` once `shutdown` is cancelled.
pub async fn accept(
    listener: &TcpListener,
    shutdown: &CancellationToken,
    what: &str,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    return Some((stream, peer));
                }
                Err(error) => {
                    // Typically EMFILE: back off briefly instead of spinning.
                    tracing::warn!(%error, "{what} accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}
