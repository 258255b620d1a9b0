//! A lean HTTP/1.1 client for one plain `http://` server: a few keep-alive connections,
//! each driven by the task whose exchange it carries (no connection task to hop to).
//!
//! hyper's low-level client does the HTTP; a connection is polled only while a request or
//! its answer is on it, and checked (closed by the server? ready for another request?)
//! when it goes back to the pool and when it is taken again. A request that a kept
//! connection could not even start is sent again on a fresh one.

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, HOST};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Idle connections kept at the most; more are closed when their exchange ends.
const MAX_IDLE: usize = 64;
/// How long opening a connection may take.
const CONNECT_WAIT: Duration = Duration::from_secs(30);

type Driver = Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// Why an exchange failed.
#[derive(Debug)]
pub enum Error {
    /// The connection could not be opened.
    Connect(std::io::Error),
    /// The HTTP exchange failed.
    Http(hyper::Error),
}

impl Error {
    /// The I/O failure behind this one, if there is one.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        use std::error::Error as _;
        let mut source: Option<&(dyn std::error::Error + 'static)> = match self {
            Error::Connect(io) => return Some(io.kind()),
            Error::Http(error) => error.source(),
        };
        while let Some(cause) = source {
            if let Some(io) = cause.downcast_ref::<std::io::Error>() {
                return Some(io.kind());
            }
            source = cause.source();
        }
        None
    }

    /// Whether the answer broke off (the connection closed in the middle of it).
    pub fn cut_short(&self) -> bool {
        matches!(self, Error::Http(e) if e.is_incomplete_message() || e.is_body_write_aborted() || e.is_closed())
    }
}

/// Where the server is.
enum Address {
    Ip(SocketAddr),
    Name(String, u16),
}

/// The connections to one server.
pub struct Pool {
    address: Address,
    /// The `Host` header every request carries.
    host: HeaderValue,
    /// The request target (`/path?query`).
    target: Uri,
    idle: Mutex<Vec<Link>>,
}

/// One connection: the side that sends requests and the state machine that runs it.
struct Link {
    sender: SendRequest<Full<Bytes>>,
    /// `None` once the connection is over. Boxed: links move in and out of the pool.
    driver: Option<Box<Driver>>,
    /// The socket, watched by the worker before it parks while the link lives
    /// ([`crate::park_spin`]): an answer due soon then finds it awake.
    _watched: crate::park_spin::Watched,
}

impl Pool {
    /// A pool for `url`, if it is a plain `http://` URL this client can reach.
    pub fn new(url: &reqwest::Url) -> Option<Arc<Pool>> {
        if url.scheme() != "http" {
            return None;
        }
        let port = url.port_or_known_default()?;
        let name = url.host_str()?;
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        let address = match bare.parse::<std::net::IpAddr>() {
            Ok(ip) => Address::Ip(SocketAddr::new(ip, port)),
            Err(_) => Address::Name(name.to_string(), port),
        };
        let host = match url.port() {
            Some(port) => format!("{name}:{port}"),
            None => name.to_string(),
        };
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        };
        Some(Arc::new(Pool {
            address,
            host: HeaderValue::try_from(host).ok()?,
            target: Uri::try_from(target).ok()?,
            idle: Mutex::new(Vec::new()),
        }))
    }

    /// Send a request with `headers` (`Host` is added) and `body`; the answer's body is
    /// read from the returned [`Answer`].
    pub async fn send(
        self: &Arc<Self>,
        method: Method,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Result<Answer, Error> {
        headers.insert(HOST, self.host.clone());
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = self.target.clone();
        *request.headers_mut() = headers;
        // Kept connections first; one that cannot take the request gives it back.
        while let Some(mut link) = self.take_idle().await {
            let sent = drive(&mut link.driver, link.sender.try_send_request(request)).await;
            match sent {
                Ok(response) => return Ok(self.answer(response, link)),
                Err(mut error) => match error.take_message() {
                    Some(unsent) => request = unsent,
                    None => return Err(Error::Http(error.into_error())),
                },
            }
        }
        let mut link = self.open().await?;
        let sent = drive(&mut link.driver, link.sender.send_request(request)).await;
        sent.map(|response| self.answer(response, link))
            .map_err(Error::Http)
    }

    fn answer(self: &Arc<Self>, response: hyper::Response<Incoming>, link: Link) -> Answer {
        let (parts, body) = response.into_parts();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body,
            link: Some(link),
            pool: Arc::downgrade(self),
        }
    }

    /// The most recently used idle connection still open and ready.
    async fn take_idle(&self) -> Option<Link> {
        loop {
            let mut link = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
            if poll_fn(|cx| Poll::Ready(link.usable(cx))).await {
                return Some(link);
            }
        }
    }

    fn put(&self, link: Link) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(link);
        }
    }

    async fn open(&self) -> Result<Link, Error> {
        let connecting = async {
            match &self.address {
                Address::Ip(address) => TcpStream::connect(address).await,
                Address::Name(name, port) => TcpStream::connect((name.as_str(), *port)).await,
            }
        };
        let stream = tokio::time::timeout(CONNECT_WAIT, connecting)
            .await
            .map_err(|_| Error::Connect(std::io::ErrorKind::TimedOut.into()))?
            .map_err(Error::Connect)?;
        let _ = stream.set_nodelay(true);
        let watched = crate::park_spin::Watched::new(std::os::fd::AsFd::as_fd(&stream));
        let (sender, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(Error::Http)?;
        Ok(Link {
            sender,
            driver: Some(Box::new(driver)),
            _watched: watched,
        })
    }
}

impl Link {
    /// Let the connection catch up (notice a hang-up, settle after an answer) without
    /// waiting; whether it can take a request now.
    fn usable(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(driver) = self.driver.as_mut() else {
            return false;
        };
        if Pin::new(&mut **driver).poll(cx).is_ready() {
            self.driver = None;
            return false;
        }
        self.sender.is_ready()
    }
}

/// Run `future` (a request or a read of its answer) while driving the connection it
/// needs; once the connection is over, `future` is polled alone and sees it closed.
async fn drive<F: Future>(driver: &mut Option<Box<Driver>>, future: F) -> F::Output {
    let mut future = pin!(future);
    poll_fn(|cx| {
        if let Poll::Ready(out) = future.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        if let Some(running) = driver.as_mut() {
            if Pin::new(&mut **running).poll(cx).is_ready() {
                *driver = None;
                return future.as_mut().poll(cx);
            }
        }
        Poll::Pending
    })
    .await
}

/// A server's answer; its body is read chunk by chunk. Read to its end, the connection
/// goes back to the pool; dropped before, the connection is closed.
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    body: Incoming,
    link: Option<Link>,
    pool: Weak<Pool>,
}

impl Answer {
    /// The next piece of the body; `None` at its end.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, Error>> {
        loop {
            let frame = match self.link.as_mut() {
                Some(link) => drive(&mut link.driver, self.body.frame()).await,
                None => self.body.frame().await,
            };
            match frame {
                None => {
                    self.finish().await;
                    return None;
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => return Some(Ok(data)),
                    _ => continue,
                },
                Some(Err(error)) => {
                    self.link = None;
                    return Some(Err(Error::Http(error)));
                }
            }
        }
    }

    /// The body is read: the connection is kept if it can take another request.
    async fn finish(&mut self) {
        let (Some(mut link), Some(pool)) = (self.link.take(), self.pool.upgrade()) else {
            return;
        };
        if poll_fn(|cx| Poll::Ready(link.usable(cx))).await {
            pool.put(link);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server that answers every request on a connection with `answer`, and closes each
    /// connection after `per_connection` answers. Counts the connections it accepted.
    async fn server(
        answer: &'static str,
        per_connection: usize,
    ) -> (reqwest::Url, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp?x=1", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buffer = [0u8; 4096];
                    for _ in 0..per_connection {
                        // One request: headers, then a Content-Length body.
                        let request = loop {
                            if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&seen[..end]).to_string();
                                let length = head
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length: "))
                                    .map_or(0, |n| n.trim().parse().unwrap());
                                if seen.len() >= end + 4 + length {
                                    seen.drain(..end + 4 + length);
                                    break head;
                                }
                            }
                            let n = socket.read(&mut buffer).await.unwrap();
                            if n == 0 {
                                return;
                            }
                            seen.extend_from_slice(&buffer[..n]);
                        };
                        assert!(request.starts_with("POST /mcp?x=1 HTTP/1.1"), "{request}");
                        assert!(request.contains("\r\nhost: 127.0.0.1:"), "{request}");
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                            answer.len()
                        );
                        socket.write_all(reply.as_bytes()).await.unwrap();
                    }
                });
            }
        });
        (url.parse().unwrap(), accepted)
    }

    async fn body(answer: &mut Answer) -> String {
        let mut text = Vec::new();
        while let Some(chunk) = answer.chunk().await {
            text.extend_from_slice(&chunk.unwrap());
        }
        String::from_utf8(text).unwrap()
    }

    async fn call(pool: &Arc<Pool>) -> String {
        let mut answer = pool
            .send(Method::POST, HeaderMap::new(), Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert_eq!(answer.status, StatusCode::OK);
        body(&mut answer).await
    }

    #[tokio::test]
    async fn a_connection_carries_one_request_after_the_other() {
        let (url, accepted) = server("{\"ok\":1}", usize::MAX).await;
        let pool = Pool::new(&url).unwrap();
        for _ in 0..5 {
            assert_eq!(call(&pool).await, "{\"ok\":1}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_replaced() {
        let (url, accepted) = server("{\"ok\":2}", 1).await;
        let pool = Pool::new(&url).unwrap();
        for _ in 0..3 {
            assert_eq!(call(&pool).await, "{\"ok\":2}");
            // Let the server's close arrive before the next request.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn an_answer_dropped_unread_closes_its_connection() {
        let (url, accepted) = server("{\"ok\":3}", usize::MAX).await;
        let pool = Pool::new(&url).unwrap();
        drop(
            pool.send(Method::POST, HeaderMap::new(), Bytes::from_static(b"{}"))
                .await
                .unwrap(),
        );
        assert_eq!(call(&pool).await, "{\"ok\":3}");
        assert_eq!(call(&pool).await, "{\"ok\":3}");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refused_connection_says_so() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url: reqwest::Url = format!("http://{}/", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        drop(listener);
        let pool = Pool::new(&url).unwrap();
        let error = pool
            .send(Method::POST, HeaderMap::new(), Bytes::new())
            .await
            .err()
            .unwrap();
        assert_eq!(error.io_kind(), Some(std::io::ErrorKind::ConnectionRefused));
    }

    #[test]
    fn only_plain_http_urls() {
        assert!(Pool::new(&"https://example.com/mcp".parse().unwrap()).is_none());
        assert!(Pool::new(&"http://[::1]:8080/mcp".parse().unwrap()).is_some());
        assert!(Pool::new(&"http://example.com/mcp".parse().unwrap()).is_some());
    }
}
