//! One HTTP exchange with an HTTP server, over the client that fits its URL (the lean
//! HTTP/1.1 pool for plain `http://`, reqwest for the rest), and what a failed one means.
//!
//! reqwest stays for `https://` (TLS) and whenever a proxy is configured in the
//! environment (`http_proxy`, `all_proxy`), which only it honours. Failures are told from
//! typed facts (`host:port`, error kinds), never from error text that may quote the URL.

use std::sync::Arc;

use bytes::Bytes;
use http::header::HeaderMap;
use http::{Method, StatusCode};

use super::http1;

/// The client of one server.
pub enum Client {
    /// Plain `http://`, no proxy.
    Plain(Arc<http1::Pool>),
    /// Anything else.
    Reqwest {
        client: reqwest::Client,
        url: reqwest::Url,
    },
}

/// Whether the environment names a proxy for `http://` (reqwest would use it).
fn proxy_configured() -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

impl Client {
    /// The client for `url`: the lean pool when it can serve it, else `shared`.
    pub fn new(shared: reqwest::Client, url: reqwest::Url) -> Client {
        match http1::Pool::new(&url).filter(|_| !proxy_configured()) {
            Some(pool) => Client::Plain(pool),
            None => Client::Reqwest {
                client: shared,
                url,
            },
        }
    }

    /// Send a request with exactly `headers` (and `Host`) and `body` (none: no body).
    pub async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Answer, SendError> {
        match self {
            Client::Plain(pool) => pool
                .send(method, headers, body.unwrap_or_default())
                .await
                .map(Answer::Plain)
                .map_err(SendError::Plain),
            Client::Reqwest { client, url } => {
                let mut request = client.request(method, url.clone()).headers(headers);
                if let Some(body) = body {
                    request = request.body(body);
                }
                request
                    .send()
                    .await
                    .map(Answer::Reqwest)
                    .map_err(SendError::Reqwest)
            }
        }
    }
}

/// A server's answer, its body read chunk by chunk.
pub enum Answer {
    Plain(http1::Answer),
    Reqwest(reqwest::Response),
}

impl Answer {
    /// The status.
    pub fn status(&self) -> StatusCode {
        match self {
            Answer::Plain(answer) => answer.status,
            Answer::Reqwest(response) => response.status(),
        }
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        match self {
            Answer::Plain(answer) => &answer.headers,
            Answer::Reqwest(response) => response.headers(),
        }
    }

    /// The next piece of the body; `None` at its end, `Some(Err)` when it broke off.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, ()>> {
        match self {
            Answer::Plain(answer) => answer.chunk().await.map(|c| c.map_err(|_| ())),
            Answer::Reqwest(response) => response.chunk().await.map_err(|_| ()).transpose(),
        }
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum SendError {
    Plain(http1::Error),
    Reqwest(reqwest::Error),
}

impl SendError {
    /// What went wrong with the server at `at` (`host:port`), from typed facts only.
    pub fn describe(&self, at: &str) -> String {
        match self {
            SendError::Reqwest(error) => describe(error, at),
            SendError::Plain(error) => match error.io_kind() {
                Some(kind) => io_failure(kind, at),
                None if error.cut_short() => format!("the response from {at} was cut short"),
                None => format!("the HTTP exchange with {at} failed"),
            },
        }
    }
}

/// A reqwest failure as a message from typed facts.
pub fn describe(error: &reqwest::Error, at: &str) -> String {
    use std::error::Error as _;
    if let Some(tls) = tls_failure(error) {
        return format!("TLS with {at} failed: {tls}");
    }
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io_failure(io.kind(), at);
        }
        source = cause.source();
    }
    if error.is_timeout() {
        format!("timed out talking to {at}")
    } else if error.is_connect() {
        format!("cannot connect to {at}")
    } else if error.is_body() || error.is_decode() {
        format!("the response from {at} was cut short")
    } else {
        format!("the HTTP exchange with {at} failed")
    }
}

/// An I/O failure talking to `at`, said by its kind.
pub fn io_failure(kind: std::io::ErrorKind, at: &str) -> String {
    match kind {
        std::io::ErrorKind::ConnectionRefused => format!("connection refused at {at}"),
        std::io::ErrorKind::ConnectionReset => format!("connection reset by {at}"),
        std::io::ErrorKind::TimedOut => format!("timed out connecting to {at}"),
        kind => format!("cannot reach {at} ({kind})"),
    }
}

/// The TLS error somewhere in `error`'s causes (rustls's travel inside an `io::Error`).
fn tls_failure<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(inner) = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            if let Some(tls) = tls_failure(inner) {
                return Some(tls);
            }
        }
        next = cause.source();
    }
    None
}
