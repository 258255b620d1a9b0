//! The legacy HTTP+SSE transport for the example servers (`--sse ADDR`), as MCP 2024-11-05
//! defined it: `GET /sse` opens an event stream whose first `endpoint` event names
//! `/message?sessionId=…`; each message POSTed there is answered `202 Accepted`, and
//! everything the server sends travels as `message` events on the stream.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use rmcp::{ServerHandler, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

type Body = BoxBody<Bytes, Infallible>;

/// Open sessions: session id → where its POSTed messages go.
type Sessions = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Bytes>>>>;

/// Serve `server` on `http://<addr>/sse` until the process ends; 1 when `addr` cannot be bound.
pub async fn serve_sse<S: ServerHandler + Clone>(server: S, addr: std::net::SocketAddr) -> i32 {
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("example-server: cannot listen on {addr}: {error}");
            return 1;
        }
    };
    let sessions: Sessions = Arc::default();
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let server = server.clone();
        let sessions = sessions.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                handle(request, server.clone(), sessions.clone())
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

async fn handle<S: ServerHandler + Clone>(
    request: http::Request<hyper::body::Incoming>,
    server: S,
    sessions: Sessions,
) -> Result<http::Response<Body>, Infallible> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let path = request.uri().path().to_string();
    Ok(match (request.method().clone(), path.as_str()) {
        (http::Method::GET, "/sse") => {
            let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            open(server, sessions, format!("s{id}"))
        }
        (http::Method::POST, "/message") => {
            let session = request
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("sessionId=")))
                .map(str::to_string);
            let sender = session.and_then(|s| {
                sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&s)
                    .cloned()
            });
            let Some(sender) = sender else {
                return Ok(plain(http::StatusCode::NOT_FOUND, "no such session"));
            };
            let body = match request.into_body().collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(_) => return Ok(plain(http::StatusCode::BAD_REQUEST, "body cut short")),
            };
            if sender.send(body).is_err() {
                return Ok(plain(http::StatusCode::GONE, "session ended"));
            }
            plain(http::StatusCode::ACCEPTED, "")
        }
        _ => plain(
            http::StatusCode::NOT_FOUND,
            "use GET /sse and POST /message",
        ),
    })
}

/// A new session: the MCP server runs on an in-memory pipe; POSTed messages are written into
/// it, its output lines become `message` events after the `endpoint` event.
fn open<S: ServerHandler + Clone>(
    server: S,
    sessions: Sessions,
    session: String,
) -> http::Response<Body> {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (their_read, their_write) = tokio::io::split(theirs);
    let (our_read, mut our_write) = tokio::io::split(ours);
    tokio::spawn(async move {
        if let Ok(running) = server.serve((their_read, their_write)).await {
            let _ = running.waiting().await;
        }
    });
    let (inbound, mut posted) = mpsc::unbounded_channel::<Bytes>();
    sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(session.clone(), inbound);
    tokio::spawn(async move {
        while let Some(body) = posted.recv().await {
            let mut line = body.to_vec();
            line.retain(|b| *b != b'\n' && *b != b'\r');
            line.push(b'\n');
            if our_write.write_all(&line).await.is_err() {
                return;
            }
        }
    });
    let (events, outgoing) = mpsc::unbounded_channel::<Bytes>();
    let _ = events.send(Bytes::from(format!(
        "event: endpoint\ndata: /message?sessionId={session}\n\n"
    )));
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(our_read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if events
                .send(Bytes::from(format!("event: message\ndata: {line}\n\n")))
                .is_err()
            {
                break;
            }
        }
        sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session);
    });
    let stream = futures_util::stream::unfold(outgoing, |mut outgoing| async move {
        let chunk = outgoing.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), outgoing))
    });
    let mut response = http::Response::new(StreamBody::new(stream).boxed());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/event-stream"),
    );
    response
}

fn plain(status: http::StatusCode, text: &'static str) -> http::Response<Body> {
    let mut response = http::Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}
