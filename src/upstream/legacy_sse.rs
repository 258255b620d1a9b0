//! The link to a legacy HTTP+SSE server (MCP 2024-11-05, `type: "sse"`): a GET event stream
//! whose first `endpoint` event names where to POST messages, and which then carries
//! everything the server sends. POSTs go one after the other, in order.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::exchange::describe;
use super::http::{authority, refusal, Refusal, Target};
use super::session::{Link, Session, Unanswered, WeakSession};
use super::stdio::MAX_MESSAGE_BYTES;
use crate::mcp::message::Message;
use crate::mcp::sse;

struct Posts {
    queue: mpsc::UnboundedSender<(String, Option<u64>)>,
    closed: CancellationToken,
}

impl Link for Posts {
    fn send(&self, text: String, request: Option<u64>) -> Result<(), Unanswered> {
        self.queue
            .send((text, request))
            .map_err(|_| Unanswered::Stopped)
    }

    fn close(&self) {
        self.closed.cancel();
    }
}

/// Open the event stream at `target`, wait (at most `patience`) for its `endpoint`, and
/// return a session over it.
pub async fn connect(
    client: reqwest::Client,
    target: Target,
    patience: Duration,
) -> Result<Session, Unanswered> {
    let at = authority(&target.url);
    let response = client
        .get(target.url.clone())
        .headers(target.headers.clone())
        .header(ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|e| Unanswered::Undelivered(describe(&e, &at)))?;
    let status = response.status();
    if let Some(refusal) = refusal(status, response.headers()) {
        (target.on_refusal)(refusal.clone());
        return Err(refusal.into());
    }
    if !status.is_success() {
        return Err(Unanswered::Undelivered(format!(
            "{at} answered HTTP {status} to the event stream request"
        )));
    }
    let mut chunks = response.bytes_stream();
    let mut reader = sse::Reader::new(MAX_MESSAGE_BYTES);
    let mut events = Vec::new();
    let endpoint = tokio::time::timeout(patience, async {
        loop {
            if let Some(found) = events
                .iter()
                .position(|e: &sse::Event| e.event == "endpoint")
            {
                let event = events.remove(found);
                events.drain(..found);
                return Ok(event.data);
            }
            match chunks.next().await {
                Some(Ok(chunk)) => reader
                    .feed(&chunk, &mut events)
                    .map_err(|_| Unanswered::Undelivered("an event larger than 16 MiB".into()))?,
                _ => {
                    return Err(Unanswered::Undelivered(format!(
                        "{at} closed the event stream before naming its endpoint"
                    )))
                }
            }
        }
    })
    .await
    .map_err(|_| Unanswered::Undelivered(format!("{at} named no endpoint in time")))??;
    let post_url = target
        .url
        .join(endpoint.trim())
        .ok()
        .filter(|u| u.origin() == target.url.origin())
        .ok_or_else(|| {
            Unanswered::Undelivered(format!("{at} named an endpoint on another origin; refused"))
        })?;
    let (queue, outgoing) = mpsc::unbounded_channel();
    let closed = CancellationToken::new();
    let session = Session::new(Box::new(Posts {
        queue,
        closed: closed.clone(),
    }));
    tokio::spawn(post_all(
        client,
        post_url,
        target.headers,
        target.on_refusal,
        outgoing,
        session.downgrade(),
        closed.clone(),
        at,
    ));
    // The events already read (after the endpoint) come first.
    for event in events {
        deliver(&session, event);
    }
    tokio::spawn(listen(chunks, reader, session.downgrade(), closed));
    Ok(session)
}

fn deliver(session: &Session, event: sse::Event) {
    if !(event.event.is_empty() || event.event == "message") {
        return;
    }
    if let Ok(message) = Message::parse(event.data) {
        session.receive(message, None);
    }
}

/// The rest of the event stream, until it ends (then the session ends).
async fn listen<S>(
    mut chunks: S,
    mut reader: sse::Reader,
    session: WeakSession,
    closed: CancellationToken,
) where
    S: futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
{
    let mut events = Vec::new();
    loop {
        let chunk = tokio::select! {
            chunk = chunks.next() => chunk,
            _ = closed.cancelled() => break,
        };
        let Some(Ok(chunk)) = chunk else { break };
        if reader.feed(&chunk, &mut events).is_err() {
            break;
        }
        let Some(session) = session.upgrade() else {
            return;
        };
        for event in events.drain(..) {
            deliver(&session, event);
        }
    }
    if let Some(session) = session.upgrade() {
        session.end();
    }
}

#[allow(clippy::too_many_arguments)]
async fn post_all(
    client: reqwest::Client,
    url: reqwest::Url,
    headers: http::HeaderMap,
    on_refusal: Arc<dyn Fn(Refusal) + Send + Sync>,
    mut outgoing: mpsc::UnboundedReceiver<(String, Option<u64>)>,
    session: WeakSession,
    closed: CancellationToken,
    at: String,
) {
    loop {
        let next = tokio::select! {
            next = outgoing.recv() => next,
            _ = closed.cancelled() => None,
        };
        let Some((text, request)) = next else { return };
        let sent = client
            .post(url.clone())
            .headers(headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(text)
            .send()
            .await;
        let failure = match sent {
            Ok(response) if response.status().is_success() => None,
            Ok(response) => match refusal(response.status(), response.headers()) {
                Some(refusal) => {
                    on_refusal(refusal.clone());
                    Some(refusal.into())
                }
                None => Some(Unanswered::Undelivered(format!(
                    "{at} answered HTTP {}",
                    response.status()
                ))),
            },
            Err(error) => Some(Unanswered::Undelivered(describe(&error, &at))),
        };
        if let (Some(failure), Some(id), Some(session)) = (failure, request, session.upgrade()) {
            session.failed(id, failure);
        }
    }
}
