//! Pumps one WebSocket: inbound frames to the connection's protocol state machine, the
//! host's ordered outbound queue to the socket, and every way a connection ends.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

use super::commands::{After, ConnectionProtocol};
use super::gate::Standing;
use super::services::Services;
use crate::config::Limits;
use crate::host::fanout::ConnId;
use crate::host::queue::Outbox;
use crate::host::Attachment;

/// How long a closing handshake may take before the socket is simply dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Why the loop stopped.
enum Ending {
    /// The peer closed or the transport failed: nothing more to send.
    PeerGone,
    /// We close, with this code and reason.
    Close(CloseCode, String),
}

/// A client whose outbound queue overflowed is closed with 1008.
fn too_slow() -> Ending {
    Ending::Close(
        CloseCode::Policy,
        "client too slow: outbound queue overflowed; reconnect to resume".into(),
    )
}

/// Send what the host has queued for this connection, for at most [`CLOSE_GRACE`]: what it
/// said last (an error, servers reported `stopped`) goes out ahead of the close frame.
async fn flush_queued<S>(ws: &mut WebSocketStream<S>, outbox: &mut Outbox)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let flush = async {
        while let Ok(frame) = outbox.try_recv() {
            if ws.feed(Message::Text(frame)).await.is_err() {
                return;
            }
        }
        let _ = ws.flush().await;
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, flush).await;
}

/// When the peer was last heard from, and whether it was pinged since.
struct Liveness {
    last_heard: tokio::time::Instant,
    pinged: bool,
}

impl Liveness {
    fn new() -> Self {
        Self {
            last_heard: tokio::time::Instant::now(),
            pinged: false,
        }
    }

    /// The peer sent something (a pong included).
    fn heard(&mut self) {
        self.last_heard = tokio::time::Instant::now();
        self.pinged = false;
    }
}

/// Serve one upgraded connection until it ends; `standing` (from the gate) says whether it
/// may decide held calls, which the host keeps with the connection.
pub async fn run<S>(
    mut ws: WebSocketStream<S>,
    services: Arc<Services>,
    standing: Standing,
    limits: &Limits,
    shutdown: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let host = services.host.clone();
    let mut attachment = host.attach(standing.decides());
    let mut connection = ConnectionProtocol::new(attachment.id, services);
    tracing::debug!(conn = attachment.id, ?standing, "connected");
    // `initialize` (or `reconnect`) must come within the handshake timeout. Its deadline is
    // set first: when both timeouts are equal, a peer that never initializes is closed for
    // that (1008), never by the idle check of the same instant (1001).
    let handshake_deadline = tokio::time::sleep(limits.handshake_timeout);
    tokio::pin!(handshake_deadline);
    // Liveness: pings after a third of the idle timeout of silence; anything the peer sends
    // (a pong included) counts.
    let mut liveness = Liveness::new();
    let mut beat = tokio::time::interval(limits.idle_timeout / 3);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beat.reset();

    let ending = loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => {
                // What the host queued before shutting down (servers reported `stopped`)
                // still goes out, ahead of the close frame; the close grace bounds it.
                flush_queued(&mut ws, &mut attachment.outbox).await;
                break Ending::Close(CloseCode::Away, "host shutting down".into());
            }
            _ = attachment.kicked.cancelled() => break too_slow(),
            _ = &mut handshake_deadline, if connection.client_id().is_none() => {
                break Ending::Close(
                    CloseCode::Policy,
                    format!("no initialize within {} ms", limits.handshake_timeout.as_millis()),
                );
            }
            _ = beat.tick() => {
                if let Some(ending) =
                    on_beat(&mut ws, &mut liveness, limits, &attachment, &shutdown).await
                {
                    break ending;
                }
            }
            frame = attachment.outbox.recv() => {
                let Some(frame) = frame else { break Ending::PeerGone };
                // Shutdown does not abort a send: the frame goes out, then the shutdown
                // branch flushes the rest and closes (serve bounds the whole wait). A kick
                // does: the client is stuck, and the close frame is queued behind what the
                // socket already holds, for a client that reads again within the grace.
                tokio::select! {
                    sent = ws.send(Message::Text(frame)) => if sent.is_err() {
                        break Ending::PeerGone;
                    },
                    _ = attachment.kicked.cancelled() => break too_slow(),
                }
            }
            message = ws.next() => {
                if let Some(Ok(_)) = &message {
                    liveness.heard();
                }
                if let Some(ending) =
                    on_message(&mut ws, message, &mut connection, &mut attachment).await
                {
                    break ending;
                }
            }
        }
    };

    host.detach(attachment.id);
    if let Ending::Close(code, reason) = ending {
        close(&mut ws, attachment.id, code, reason).await;
    }
    tracing::debug!(conn = attachment.id, "disconnected");

    if let Some(client_id) = connection.client_id() {
        let client_id = client_id.to_string();
        let grace = limits.active_client_grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            host.expire_client(&client_id);
        });
    }
}

/// A heartbeat: close a peer silent for the idle timeout, ping one silent for a third of it.
async fn on_beat<S>(
    ws: &mut WebSocketStream<S>,
    liveness: &mut Liveness,
    limits: &Limits,
    attachment: &Attachment,
    shutdown: &CancellationToken,
) -> Option<Ending>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let silent = liveness.last_heard.elapsed();
    if silent >= limits.idle_timeout {
        return Some(Ending::Close(
            CloseCode::Away,
            format!("nothing heard for {} ms", silent.as_millis()),
        ));
    }
    if silent >= limits.idle_timeout / 3 && !liveness.pinged {
        liveness.pinged = true;
        // A peer too stuck to take even a ping is gone; a kick or shutdown still ends it
        // at once.
        let ping = tokio::time::timeout(
            limits.idle_timeout,
            ws.send(Message::Ping(Default::default())),
        );
        tokio::select! {
            sent = ping => if !matches!(sent, Ok(Ok(()))) {
                return Some(Ending::PeerGone);
            },
            _ = attachment.kicked.cancelled() => return Some(too_slow()),
            _ = shutdown.cancelled() => {
                return Some(Ending::Close(CloseCode::Away, "host shutting down".into()));
            }
        }
    }
    None
}

/// What the peer sent (`None`: the stream ended): text to the protocol, the rest handled
/// here. Returns how the connection ends, if it does.
async fn on_message<S>(
    ws: &mut WebSocketStream<S>,
    message: Option<Result<Message, WsError>>,
    connection: &mut ConnectionProtocol,
    attachment: &mut Attachment,
) -> Option<Ending>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match message {
        None => return Some(Ending::PeerGone),
        Some(Ok(Message::Text(text))) => {
            if let After::Close(reason) = connection.on_text(text.as_str()) {
                // Flush what the command queued (its error) before closing, for as long as
                // a closing handshake may take.
                flush_queued(ws, &mut attachment.outbox).await;
                return Some(Ending::Close(CloseCode::Normal, reason.into()));
            }
        }
        Some(Ok(Message::Binary(_))) => connection.on_binary(),
        Some(Ok(Message::Close(_))) => {
            // tungstenite answers the close; keep reading until the stream ends.
        }
        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
        Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
            tracing::info!(
                conn = attachment.id,
                size,
                max_size,
                "inbound message over the size limit"
            );
            return Some(Ending::Close(
                CloseCode::Size,
                format!("message of {size} bytes exceeds the limit of {max_size} bytes"),
            ));
        }
        Some(Err(error)) => return Some(broken(attachment.id, error)),
    }
    None
}

/// How a connection whose peer broke the WebSocket protocol ends: a frame that violates
/// RFC 6455 is answered with close 1002, text that is not UTF-8 with 1007 (the peer learns
/// why); a reset or I/O failure leaves nothing to answer.
fn broken(conn: ConnId, error: WsError) -> Ending {
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    match error {
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => Ending::PeerGone,
        WsError::Protocol(violation) => {
            tracing::info!(conn, %violation, "WebSocket protocol violation");
            Ending::Close(
                CloseCode::Protocol,
                format!("protocol error: {violation}")
                    .chars()
                    .take(MAX_CLOSE_REASON)
                    .collect(),
            )
        }
        WsError::Utf8(_) => {
            tracing::info!(conn, "text frame that is not UTF-8");
            Ending::Close(CloseCode::Invalid, "text frame is not valid UTF-8".into())
        }
        error => {
            tracing::debug!(conn, %error, "transport error");
            Ending::PeerGone
        }
    }
}

/// A close frame's reason is at most 123 bytes (RFC 6455 §5.5); the protocol errors'
/// descriptions are ASCII and shorter than this.
const MAX_CLOSE_REASON: usize = 100;

/// Close with `code` and `reason`, and wait (for at most [`CLOSE_GRACE`]) for the peer's
/// side of the closing handshake.
async fn close<S>(ws: &mut WebSocketStream<S>, conn: ConnId, code: CloseCode, reason: String)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    tracing::debug!(conn, ?code, %reason, "closing");
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        let _ = ws.close(Some(frame)).await;
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
}
