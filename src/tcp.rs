//! The accept step both listeners share (AHP WebSocket, MCP HTTP): the next connection with
//! Nagle off, a short back-off on accept errors (e.g. EMFILE), `None` on shutdown; and the
//! connection limit, whose refusals go out at once, before the peer's request is read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How long a refused peer has to read the refusal (and finish sending its request, which is
/// read and dropped so that closing does not reset the connection under the answer).
const REFUSAL_GRACE: Duration = Duration::from_millis(200);
/// How long a refused connection's first bytes are waited for before the `503` is sent.
const FIRST_BYTES: Duration = Duration::from_millis(50);

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

/// The next connection that gets one of `slots`, with its slot. One beyond them is answered
/// `503` with `busy` as its body once its first bytes arrive (or 50 ms pass), without waiting for the rest of its request, and closed within
/// [`REFUSAL_GRACE`]: a flood of peers that send half a request holds at most the limit's
/// worth of descriptors, not one each until a handshake deadline. `None` on shutdown.
pub async fn accept_within(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
    shutdown: &CancellationToken,
    what: &str,
    busy: &'static str,
) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    loop {
        let (stream, peer) = accept(listener, shutdown, what).await?;
        match slots.clone().try_acquire_owned() {
            Ok(slot) => return Some((stream, peer, slot)),
            Err(_) => {
                // Debug, not warn: a flood of refusals must not flood the log.
                tracing::debug!(%peer, "{what} connection refused: too many open connections");
                tokio::spawn(refuse_busy(stream, busy));
            }
        }
    }
}

/// The whole `503` response for a refused connection.
fn busy_response(busy: &str) -> String {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{busy}",
        busy.len()
    )
}

/// Answer `503` and close, reading (and dropping) what the peer sends meanwhile, for at
/// most [`REFUSAL_GRACE`].
async fn refuse_busy(mut stream: TcpStream, busy: &'static str) {
    let _ = tokio::time::timeout(REFUSAL_GRACE, async {
        let mut sink = [0u8; 4096];
        // An HTTP client sends its request as soon as it is connected, and takes a response
        // that comes before it as a broken connection: wait (briefly) for its first bytes, so
        // the 503 answers its request. A peer that sends nothing is answered all the same.
        let _ = tokio::time::timeout(FIRST_BYTES, stream.read(&mut sink)).await;
        stream.write_all(busy_response(busy).as_bytes()).await?;
        stream.shutdown().await?;
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_response_whose_length_is_its_body() {
        let response = busy_response("too many; try again later");
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        assert_eq!(body, "too many; try again later");
    }
}
