//! Accepts TCP connections and reads one HTTP request each (hyper) within the handshake
//! timeout: a WebSocket upgrade past the gate (token, Origin, Host) becomes an AHP
//! connection, under the connection limit, with the standing the gate gave it (whether it
//! may decide held calls); any other `GET` is a console page (`Host`/`Origin` checked, no
//! token: pages carry no secret). Every connection task is tracked so shutdown can wait for
//! all of them to close.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::gate::{Gate, Standing};
use super::services::Services;
use crate::config::Limits;
use crate::console::{http::response, Console, Page};

/// The body of the `503` a connection beyond `max_connections` gets.
const BUSY: &str = "too many AHP connections; try again later";

/// Serve AHP (and the console, when given) on `listener` until `shutdown` is cancelled, then
/// wait for connections to close.
pub async fn serve(
    listener: TcpListener,
    services: Arc<Services>,
    gate: Arc<Gate>,
    console: Option<Arc<Console>>,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let slots = crate::tcp::Slots::new(limits.max_connections);
    let tasks = TaskTracker::new();
    loop {
        // One beyond `max_connections` is answered 503 once its first bytes arrive, without the rest.
        let accepted = crate::tcp::accept_within(&listener, &slots, &shutdown, "AHP", BUSY).await;
        let Some((stream, peer, slot)) = accepted else {
            break;
        };
        let services = services.clone();
        let limits = limits.clone();
        let shutdown = shutdown.clone();
        let gate = gate.clone();
        let console = console.clone();
        tasks.spawn(
            async move {
                let (upgrade, upgraded) = oneshot::channel();
                let upgrade = Mutex::new(Some(upgrade));
                let service = hyper::service::service_fn(move |request| {
                    let answer = route(&gate, console.as_deref(), request, &upgrade);
                    async move { Ok::<_, Infallible>(answer) }
                });
                // One request per connection: a page (answered with `Connection: close`),
                // or the upgrade.
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades();
                // A peer that never finishes its request holds no slot for long.
                match tokio::time::timeout(limits.handshake_timeout, connection).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => tracing::debug!(%error, "HTTP request failed"),
                    Err(_) => tracing::debug!("WebSocket upgrade not completed in time"),
                }
                let Ok((pending, standing)) = upgraded.await else {
                    return; // a page, or a refusal
                };
                match pending.await {
                    Ok(io) => {
                        let config = WebSocketConfig::default()
                            .max_message_size(Some(limits.max_frame_bytes))
                            .max_frame_size(Some(limits.max_frame_bytes));
                        let ws = WebSocketStream::from_raw_socket(
                            TokioIo::new(io),
                            Role::Server,
                            Some(config),
                        )
                        .await;
                        super::socket::run(ws, services, standing, &limits, shutdown).await;
                    }
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

/// Where an accepted upgrade is handed, with the connection's standing.
type Upgrade = Mutex<Option<oneshot::Sender<(hyper::upgrade::OnUpgrade, Standing)>>>;

/// The answer to one request: `101` (handing the connection to `upgrade`), a refusal, or a
/// console page.
fn route(
    gate: &Gate,
    console: Option<&Console>,
    mut request: http::Request<Incoming>,
    upgrade: &Upgrade,
) -> http::Response<Full<Bytes>> {
    let headers = request.headers();
    if !is_websocket_upgrade(headers) {
        return console_page(gate, console, &request);
    }
    let key = headers.get("sec-websocket-key").cloned();
    let version_ok = headers
        .get("sec-websocket-version")
        .is_some_and(|v| v.as_bytes() == b"13");
    let standing = match gate.check(headers, request.uri()) {
        Err(refusal) => {
            tracing::info!(status = refusal.status(), reason = %refusal.message(), "AHP connection refused");
            return refused(Page::text(refusal.status(), refusal.message()));
        }
        Ok(standing) => standing,
    };
    if request.method() != http::Method::GET || key.is_none() || !version_ok {
        return refused(Page::text(400, "not a WebSocket upgrade this endpoint accepts (GET, Sec-WebSocket-Version: 13, Sec-WebSocket-Key)"));
    }
    let accept = derive_accept_key(key.as_ref().map_or(&[][..], |k| k.as_bytes()));
    let pending = hyper::upgrade::on(&mut request);
    if let Some(sender) = upgrade.lock().ok().and_then(|mut slot| slot.take()) {
        let _ = sender.send((pending, standing));
    }
    let mut answer = http::Response::new(Full::new(Bytes::new()));
    *answer.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
    let headers = answer.headers_mut();
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("Upgrade"),
    );
    headers.insert(
        http::header::UPGRADE,
        http::HeaderValue::from_static("websocket"),
    );
    if let Ok(accept) = http::HeaderValue::from_str(&accept) {
        headers.insert("sec-websocket-accept", accept);
    }
    answer
}

/// A refused upgrade's answer (a `401` says how to authenticate).
fn refused(page: Page) -> http::Response<Full<Bytes>> {
    let status = page.status;
    let mut answer = response(page, false);
    if status == 401 {
        answer.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"ahp-proxy\""),
        );
    }
    answer
}

/// A plain request: a console page for `GET`/`HEAD` past the `Host`/`Origin` checks.
fn console_page(
    gate: &Gate,
    console: Option<&Console>,
    request: &http::Request<Incoming>,
) -> http::Response<Full<Bytes>> {
    let head = request.method() == http::Method::HEAD;
    let page = match (console, gate.check_site(request.headers())) {
        (_, Err(refusal)) => Page::text(refusal.status(), refusal.message()),
        (None, Ok(())) => Page::text(426, "this is an AHP WebSocket endpoint"),
        (Some(_), Ok(())) if request.method() != http::Method::GET && !head => {
            Page::text(405, "the console only answers GET")
        }
        (Some(console), Ok(())) => console.page(request.uri().path()),
    };
    response(page, head)
}

/// Whether the request asks for a WebSocket (`Connection: upgrade`, `Upgrade: websocket`).
fn is_websocket_upgrade(headers: &http::HeaderMap) -> bool {
    let has = |name: http::header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|value| {
            value.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|part| part.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    has(http::header::CONNECTION, "upgrade") && has(http::header::UPGRADE, "websocket")
}

/// Bind the AHP address, with an error that says which address failed.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}
