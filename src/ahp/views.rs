//! The View origin: a second listener, on the AHP address's IP and its own port, that serves
//! only the MCP Apps relay page (`/sandbox`, with the View's declared CSP) and its script.
//! Views run there, never on the console's origin; it speaks no AHP (the AHP gate refuses an
//! upgrade from it) and holds nothing, and its relay may be framed only by the console
//! (`frame-ancestors`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::gate::Gate;
use crate::console::http::{response, view_origin_page};
use crate::console::Page;

/// The body of the `503` a connection beyond the limit gets.
const BUSY: &str = "too many connections to the View origin; try again later";

/// Serve the View origin on `listener` until `shutdown`; `Host` and `Origin` are checked as
/// for the console (DNS rebinding); the relay may be framed by the console, on the same host
/// name and `console_port`. Bounded like the other listeners: at most `connections` at once
/// (`tcp::accept_within`), each closed once `deadline` has passed.
pub async fn serve(
    listener: TcpListener,
    gate: Arc<Gate>,
    console_port: u16,
    connections: usize,
    deadline: Duration,
    shutdown: CancellationToken,
) {
    let tasks = TaskTracker::new();
    let slots = crate::tcp::Slots::new(connections);
    loop {
        let accepted =
            crate::tcp::accept_within(&listener, &slots, &shutdown, "View origin", BUSY).await;
        let Some((stream, _, slot)) = accepted else {
            break;
        };
        let gate = gate.clone();
        tasks.spawn(async move {
            let service = hyper::service::service_fn(move |request: http::Request<_>| {
                let head = request.method() == http::Method::HEAD;
                let page = match gate.check_site(request.headers()) {
                    Err(refusal) => Page::text(refusal.status(), refusal.message()),
                    Ok(()) if request.method() != http::Method::GET && !head => {
                        Page::text(405, "only GET is served here")
                    }
                    Ok(()) => {
                        // The `Host` passed the check: the console was served under that name.
                        let host = request.headers().get(http::header::HOST);
                        let host = host.and_then(|h| h.to_str().ok()).unwrap_or_default();
                        let uri = request.uri();
                        let framers = crate::console::csp::console_origins(host, console_port);
                        view_origin_page(uri.path(), uri.query(), &framers)
                    }
                };
                async move { Ok::<_, Infallible>(response(page, head)) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(deadline, connection).await;
            drop(slot);
        });
    }
    tasks.close();
    tasks.wait().await;
}
