//! The bodies the MCP HTTP front answers with: plain JSON, a JSON-RPC error, plain text, an
//! empty answer, an event stream (shared by the legacy sessions and the modern face).

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

use super::answers::error_answer;

/// A response body.
pub type Body = BoxBody<Bytes, Infallible>;

/// An event stream response over `body`.
pub fn sse_response(body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    response
}

/// A JSON response.
pub fn json(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A JSON-RPC error (`-32001` for a 404, else `-32600`) to request `id` (raw).
pub fn json_error(status: StatusCode, id: &str, text: &str) -> Response<Body> {
    let code = if status == StatusCode::NOT_FOUND {
        -32001
    } else {
        -32600
    };
    json(status, error_answer(id, code, text))
}

/// A plain-text response.
pub fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response
}

/// An empty response.
pub fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = status;
    response
}
