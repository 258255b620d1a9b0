//! A modern (2026-07-28) POST to the MCP HTTP front: no session, its standard headers checked,
//! refusals with the spec's statuses (400, 404), a notification `202`, a request answered as
//! plain JSON when its answer is the first thing to send, else as an event stream without ids
//! (no resumption in this revision) that ends with the answer; the client closing it cancels
//! the request.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame as BodyFrame;

use super::fairness::Client;
use super::http_reply::{empty, json, sse_response, Body};
use super::hub::Hub;
use super::modern::{self, Arrival, Served};
use super::outbox::{Outgoing, Stream};
use super::registry::Scope;
use crate::mcp::era::{self, Headers};
use crate::mcp::message::Message;
use crate::mcp::sse;

/// Serve modern `message`, POSTed with `headers` to the endpoint of `scope` from `peer`.
pub async fn post(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    scope: Scope,
    peer: IpAddr,
    message: Message,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let standard = Headers {
        version: header("mcp-protocol-version"),
        method: header("mcp-method"),
        name: header("mcp-name"),
    };
    let id = message.id().unwrap_or("null").to_string();
    let name = (message.string(&["_meta", era::meta::CLIENT_INFO, "name"])).map(|n| n.into_owned());
    let client = Client::new(Some(peer), name.as_deref());
    // A listen stream's connection closes when the stream ends (past a limit, idle): its
    // place is another client's at once, not after a keep-alive.
    let listen = message.method() == Some("subscriptions/listen");
    let arrival = Arrival {
        scope,
        headers: Some(standard),
        stdio: None,
        client,
    };
    // The standard headers first (as `serve` checks them), then the tool's `Mcp-Param-*`.
    let checked = match era::check_headers(&message, standard) {
        Ok(()) => modern::param_headers::check(hub, &arrival.scope, headers, &message).await,
        Err(problem) => Err(problem),
    };
    if let Err(problem) = checked {
        let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::BAD_REQUEST);
        return json(status, problem.answer(&id));
    }
    let (out, mut frames) = Stream::channel();
    match modern::serve(hub, arrival, message, out) {
        Err(problem) => {
            let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::BAD_REQUEST);
            json(status, problem.answer(&id))
        }
        Ok(Served::Accepted) => empty(StatusCode::ACCEPTED),
        Ok(Served::Answering) => {
            let mut response = match frames.recv().await {
                Some(frame) if frame.last => json(status_of(&frame.text), frame.text),
                Some(frame) => event_stream(frame, frames),
                None => json(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    era::error_answer(&id, -32603, "the request was dropped", None),
                ),
            };
            if listen {
                let close = http::HeaderValue::from_static("close");
                response
                    .headers_mut()
                    .insert(http::header::CONNECTION, close);
            }
            response
        }
    }
}

type Response = http::Response<Body>;

/// A validation error found once the request ran (a capability it lacked) is a `400`; a
/// method the server does not know (its own `-32601`, passed on) a `404`, as the spec says.
/// Only an answer that can be an error is read again (most are results: not read at all).
fn status_of(text: &str) -> StatusCode {
    if !text.contains("\"error\"") {
        return StatusCode::OK;
    }
    let code = crate::mcp::message::find(text, 0..text.len(), &["error", "code"])
        .and_then(|span| text[span].parse::<i64>().ok());
    let validation = [
        era::HEADER_MISMATCH,
        era::MISSING_CAPABILITY,
        era::UNSUPPORTED_VERSION,
    ];
    match code {
        Some(code) if validation.contains(&code) => StatusCode::BAD_REQUEST,
        Some(era::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// `first`, then the rest of `frames`, as server-sent events, ending after the answer.
fn event_stream(
    first: Outgoing,
    frames: tokio::sync::mpsc::UnboundedReceiver<Outgoing>,
) -> Response {
    let rest = futures_util::stream::unfold((frames, false), |(mut frames, done)| async move {
        if done {
            return None;
        }
        let frame = frames.recv().await?;
        let last = frame.last;
        Some((frame, (frames, last)))
    });
    let ended = first.last;
    let all = futures_util::stream::once(async { first })
        .chain(rest.take_while(move |_| std::future::ready(!ended)))
        .map(|frame: Outgoing| {
            let text = sse::encode(None, None, &frame.text);
            Ok::<_, Infallible>(BodyFrame::data(Bytes::from(text)))
        });
    let mut response = sse_response(BodyExt::boxed(StreamBody::new(all)));
    response
        .headers_mut()
        .insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_error_answer_changes_the_status() {
        let answer = |body: &str| format!(r#"{{"jsonrpc":"2.0","id":1,{body}}}"#);
        let result = answer(r#""result":{"content":[{"type":"text","text":"\"error\""}]}"#);
        assert_eq!(status_of(&result), StatusCode::OK);
        let unknown = answer(r#""error":{"code":-32601,"message":"no such method"}"#);
        assert_eq!(status_of(&unknown), StatusCode::NOT_FOUND);
        let lacking = answer(&format!(
            r#""error":{{"message":"m","code":{}}}"#,
            era::MISSING_CAPABILITY
        ));
        assert_eq!(status_of(&lacking), StatusCode::BAD_REQUEST);
        let other = answer(r#""error":{"code":-32603,"message":"boom"}"#);
        assert_eq!(status_of(&other), StatusCode::OK);
    }
}
