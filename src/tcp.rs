//! The accept step every listener shares (AHP WebSocket, MCP HTTP, the View origin): the
//! next connection with Nagle off, a short back-off on accept errors (e.g. EMFILE), `None`
//! on shutdown; and the connection limit, whose refusals go out at once, before the peer's
//! request is read, a bounded number at a time. A listener that tracks what its connections
//! serve (the MCP front) first sheds the one that has been reading a request (or idle
//! between requests) the longest, so slow peers do not take a prompt one's place.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How long a refused peer has to read the refusal (and finish sending its request, which is
/// read and dropped so that closing does not reset the connection under the answer).
const REFUSAL_GRACE: Duration = Duration::from_millis(200);
/// Refusals a listener keeps on their way out at least, however small its limit: a few peers
/// just beyond it are all answered.
pub const MIN_REFUSALS: usize = 16;
/// How long a refused connection's first bytes are waited for before the `503` is sent.
const FIRST_BYTES: Duration = Duration::from_millis(50);
/// A connection that has been reading its request (or idle) for less than this is never
/// shed: a prompt peer sends its request well within it.
pub const SHED_AFTER: Duration = Duration::from_secs(1);
/// How long a new connection waits for the place of the one shed for it.
const SHED_WAIT: Duration = Duration::from_millis(200);

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

/// What one listener may hold: its connections, and refusals on their way out (a quarter
/// as many, at least [`MIN_REFUSALS`]). A listener never holds more descriptors than
/// [`Slots::most`].
#[derive(Clone)]
pub struct Slots {
    connections: Arc<Semaphore>,
    refusals: Arc<Semaphore>,
    /// The connections tracked with [`Slots::track`].
    tracked: Arc<Mutex<Vec<Weak<Conn>>>>,
}

/// A connection of a listener that tracks what it serves: whether a request is being
/// served on it, and since when none is (it reads a request's headers or body, or waits
/// for the next request).
pub struct Conn {
    serving: AtomicUsize,
    since: Mutex<Instant>,
    /// Cancelled when the listener sheds it; its task then closes it.
    pub shed: CancellationToken,
}

/// A request being served on a [`Conn`] (from its whole request read to its response's end).
pub struct Serving(Arc<Conn>);

impl Conn {
    /// A request is served on it until the guard drops.
    pub fn serve(self: &Arc<Self>) -> Serving {
        self.serving.fetch_add(1, Ordering::AcqRel);
        Serving(self.clone())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if self.0.serving.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.0.since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        }
    }
}

impl Slots {
    /// Room for `connections` (at least one).
    pub fn new(connections: usize) -> Self {
        let connections = connections.max(1);
        Self {
            connections: Arc::new(Semaphore::new(connections)),
            refusals: Arc::new(Semaphore::new(Self::refusals(connections))),
            tracked: Arc::default(),
        }
    }

    /// Track a connection just accepted: it may be shed for a newcomer while it serves
    /// nothing (see [`Conn::serve`]).
    pub fn track(&self) -> Arc<Conn> {
        let conn = Arc::new(Conn {
            serving: AtomicUsize::new(0),
            since: Mutex::new(Instant::now()),
            shed: CancellationToken::new(),
        });
        let mut tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
        tracked.retain(|c| c.strong_count() > 0);
        tracked.push(Arc::downgrade(&conn));
        conn
    }

    /// Shed the tracked connection that has served nothing for the longest, if that is at
    /// least [`SHED_AFTER`]; whether one was.
    fn shed_slowest(&self) -> bool {
        let tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
        let quiet =
            |c: &Arc<Conn>| c.serving.load(Ordering::Acquire) == 0 && !c.shed.is_cancelled();
        let since = |c: &Arc<Conn>| *c.since.lock().unwrap_or_else(|p| p.into_inner());
        let slowest = (tracked.iter().filter_map(Weak::upgrade))
            .filter(quiet)
            .map(|c| (since(&c), c))
            .min_by_key(|(since, _)| *since);
        match slowest {
            Some((since, conn)) if since.elapsed() >= SHED_AFTER => {
                conn.shed.cancel();
                true
            }
            _ => false,
        }
    }

    fn refusals(connections: usize) -> usize {
        connections.div_ceil(4).max(MIN_REFUSALS)
    }

    /// The most descriptors a listener with room for `connections` holds at once.
    #[cfg(test)]
    pub fn most(connections: usize) -> usize {
        let connections = connections.max(1);
        connections + Self::refusals(connections)
    }
}

/// The next connection that gets one of `slots`, with its slot. One beyond them is answered
/// `503` with `busy` as its body once its first bytes arrive (or 50 ms pass), without
/// waiting for the rest of its request, and closed within [`REFUSAL_GRACE`]; while as many
/// refusals as [`Slots`] allows are on their way out, one more is closed at once, unanswered.
/// So a flood of peers that send half a request holds at most [`Slots::most`] descriptors,
/// not one each until a handshake deadline. `None` on shutdown.
pub async fn accept_within(
    listener: &TcpListener,
    slots: &Slots,
    shutdown: &CancellationToken,
    what: &str,
    busy: &'static str,
) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    loop {
        let (stream, peer) = accept(listener, shutdown, what).await?;
        let mut slot = slots.connections.clone().try_acquire_owned().ok();
        if slot.is_none() && slots.shed_slowest() {
            let freed = slots.connections.clone().acquire_owned();
            slot = tokio::time::timeout(SHED_WAIT, freed)
                .await
                .ok()
                .and_then(Result::ok);
            tracing::debug!(%peer, shed = slot.is_some(), "{what}: the slowest connection was shed for a new one");
        }
        match slot {
            Some(slot) => return Some((stream, peer, slot)),
            None => {
                // Debug, not warn: a flood of refusals must not flood the log.
                tracing::debug!(%peer, "{what} connection refused: too many open connections");
                if let Ok(refusal) = slots.refusals.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse_busy(stream, busy).await;
                        drop(refusal);
                    });
                }
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
    fn a_listener_holds_its_connections_and_a_quarter_more_refusals() {
        assert_eq!(Slots::most(80), 100);
        assert_eq!(Slots::most(26), 42);
        assert_eq!(Slots::most(0), 17);
        let slots = Slots::new(4);
        assert_eq!(slots.connections.available_permits(), 4);
        assert_eq!(slots.refusals.available_permits(), MIN_REFUSALS);
    }

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
