//! Who may connect to the AHP endpoint, and for how long: the access token, `Origin` and
//! `Host` checks at the upgrade, the connection limit, the handshake deadline and the idle
//! timeout. Each refusal is seen from a real client against the real binary.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{Proxy, PATIENCE};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Error as WsError;

const TOKEN: &str = "correct-horse-battery-staple-42";

/// Open a WebSocket to `url` with extra request headers: the HTTP status of a refusal, or
/// the open socket.
async fn upgrade(
    url: &str,
    headers: &[(&str, &str)],
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    (u16, String),
> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(WsError::Http(response)) => {
            let body = response
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            Err((response.status().as_u16(), body))
        }
        Err(other) => panic!("unexpected upgrade failure: {other}"),
    }
}

/// The HTTP status and body of an upgrade that must be refused.
async fn refused(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    match upgrade(url, headers).await {
        Ok(_) => panic!("{url} {headers:?} was admitted"),
        Err(refusal) => refusal,
    }
}

/// The official client over an already-upgraded socket: initialize and ping.
async fn official_client_works(
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> ahp::Client {
    let transport = ahp_ws::WebSocketTransport::from_stream(ws);
    let client = ahp::Client::connect(transport, ahp::ClientConfig::default())
        .await
        .expect("client");
    client
        .initialize("secure".into(), vec!["1.0.0".into()], vec![])
        .await
        .expect("initialize");
    client
        .request::<_, Value>("ping", json!({"channel": "ahp-root://"}))
        .await
        .expect("ping");
    client
}

#[test]
fn listening_beyond_loopback_without_a_token_is_refused_at_start() {
    let dir = common::ScratchDir::new("no-token");
    let config = dir.path().join("proxy.toml");
    std::fs::write(&config, "[servers.clock]\ncommand = \"/bin/true\"\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .arg("--config")
        .arg(&config)
        .args([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--mcp-listen",
            "127.0.0.1:0",
        ])
        .env_remove("AHP_PROXY_TOKEN")
        .output()
        .expect("run ahp-proxy");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("AHP_PROXY_TOKEN"),
        "{stderr}"
    );
    // A token too short to be one is refused too.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ahp-proxy"))
        .arg("--config")
        .arg(&config)
        .args([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--mcp-listen",
            "127.0.0.1:0",
        ])
        .env("AHP_PROXY_TOKEN", "short")
        .output()
        .expect("run ahp-proxy");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("at least 16 characters"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_is_checked_during_the_upgrade() {
    let proxy = Proxy::start_on("", "0.0.0.0:0", &[("AHP_PROXY_TOKEN", TOKEN)]);
    // Without it, or with a wrong one: 401 before any AHP frame.
    let (status, body) = refused(&proxy.url, &[]).await;
    assert_eq!(status, 401);
    assert!(body.contains("access token"), "{body}");
    let (status, _) = refused(&proxy.url, &[("authorization", "Bearer nope")]).await;
    assert_eq!(status, 401);
    let (status, _) = refused(&format!("{}/?token=nope", proxy.url), &[]).await;
    assert_eq!(status, 401);
    // As a bearer header (the official client, over a socket it was handed) ...
    let bearer = format!("Bearer {TOKEN}");
    let ws = upgrade(&proxy.url, &[("authorization", &bearer)])
        .await
        .expect("admitted with the token");
    let _client = official_client_works(ws).await;
    // ... or as a query parameter (browsers cannot set headers on a WebSocket).
    let ws = upgrade(&format!("{}/?token={TOKEN}", proxy.url), &[])
        .await
        .expect("admitted with the token in the query");
    let _other = official_client_works(ws).await;
    // Listening on every interface, any Host is fine once the token is right.
    let ws = upgrade(
        &proxy.url,
        &[("authorization", &bearer), ("host", "box.lan:8765")],
    )
    .await
    .expect("any host with the token");
    drop(ws);
    let logs = proxy.logs();
    assert!(!logs.contains(TOKEN), "the token is never logged");
    assert!(logs.contains("AHP connection refused"), "{logs}");
}

#[tokio::test(flavor = "multi_thread")]
async fn foreign_origins_and_hosts_are_refused_on_loopback() {
    let proxy = Proxy::start(
        "[ahp]\nallowed_origins = [\"https://app.example\"]\nallowed_hosts = [\"ahp.lan\"]\n",
    );
    // DNS rebinding: a page on evil.example whose name now points at 127.0.0.1.
    let (status, body) = refused(
        &proxy.url,
        &[
            ("origin", "http://evil.example:8765"),
            ("host", "evil.example:8765"),
        ],
    )
    .await;
    assert_eq!(status, 403);
    assert!(body.contains("evil.example"), "{body}");
    let (status, body) = refused(&proxy.url, &[("origin", "http://evil.example")]).await;
    assert_eq!(status, 403);
    assert!(body.contains("allowed_origins"), "{body}");
    let (status, body) = refused(&proxy.url, &[("host", "evil.example")]).await;
    assert_eq!(status, 403);
    assert!(body.contains("allowed_hosts"), "{body}");
    // Loopback and listed origins, listed hosts, and no Origin at all are admitted.
    for headers in [
        vec![("origin", "http://localhost:5173")],
        vec![("origin", "https://app.example")],
        vec![("host", "ahp.lan:1234")],
        vec![],
    ] {
        let ws = upgrade(&proxy.url, &headers).await;
        assert!(ws.is_ok(), "{headers:?}: {:?}", ws.err());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_beyond_the_limit_are_refused_until_one_closes() {
    let proxy = Proxy::start("[limits]\nmax_connections = 2\n");
    let first = upgrade(&proxy.url, &[]).await.expect("first");
    let second = upgrade(&proxy.url, &[]).await.expect("second");
    let (status, body) = refused(&proxy.url, &[]).await;
    assert_eq!(status, 503);
    assert!(body.contains("too many"), "{body}");
    drop(second);
    drop(first);
    // The slots come back once the closed connections are noticed.
    let again = loop {
        match upgrade(&proxy.url, &[]).await {
            Ok(ws) => break ws,
            Err((503, _)) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(other) => panic!("{other:?}"),
        }
    };
    let _client = official_client_works(again).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_beyond_the_limit_is_refused_before_its_request_is_read() {
    // Two peers take the only slots by sending half a request, with the handshake deadline
    // ten minutes away. A third connection is answered 503 at once, though it sends
    // nothing: peers beyond the limit cannot each hold a descriptor until the deadline.
    let proxy = Proxy::start("[limits]\nmax_connections = 2\nhandshake_timeout_ms = 600000\n");
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut holder = std::net::TcpStream::connect(proxy.addr).unwrap();
        holder
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .unwrap();
        holders.push(holder);
    }
    let mut third = std::net::TcpStream::connect(proxy.addr).unwrap();
    third.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut answer = Vec::new();
    let read = third.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "no answer and no close: {read:?} {answer:?}");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("too many AHP connections"), "{answer}");
    // The holders still hold their slots.
    let (status, _) = refused(&proxy.url, &[]).await;
    assert_eq!(status, 503);
    drop(holders);
}

/// A client that speaks WebSocket by hand and never answers a ping.
struct Mute {
    socket: std::net::TcpStream,
}

impl Mute {
    fn connect(proxy: &Proxy) -> Self {
        let socket = std::net::TcpStream::connect(proxy.addr).unwrap();
        socket.set_read_timeout(Some(PATIENCE)).unwrap();
        Self { socket }
    }

    fn upgrade(&mut self, proxy: &Proxy) {
        let head = self.upgrade_with_hosts(&[&proxy.addr.to_string()]);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    }

    /// Send an upgrade request with these `Host` lines (any number, any text); returns
    /// the response head.
    fn upgrade_with_hosts(&mut self, hosts: &[&str]) -> String {
        let host_lines: String = hosts.iter().map(|h| format!("Host: {h}\r\n")).collect();
        let request = format!(
            "GET / HTTP/1.1\r\n{host_lines}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        );
        self.socket.write_all(request.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            self.socket.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    /// Bytes as they are, after the upgrade (a frame that breaks the protocol).
    fn send_raw(&mut self, bytes: &[u8]) {
        self.socket.write_all(bytes).unwrap();
    }

    /// One masked text frame.
    fn send_text(&mut self, text: &str) {
        let payload = text.as_bytes();
        let mut frame = vec![0x81u8];
        assert!(payload.len() < 65536);
        if payload.len() < 126 {
            frame.push(0x80 | payload.len() as u8);
        } else {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        }
        let mask = [0x12u8, 0x34, 0x56, 0x78];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.socket.write_all(&frame).unwrap();
    }

    /// Everything the server sends until it hangs up, as (opcode, payload) frames.
    fn frames_until_hang_up(&mut self) -> Vec<(u8, Vec<u8>)> {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match self.socket.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("the server did not hang up within the patience window: {e}"),
            }
        }
        let mut frames = Vec::new();
        let mut at = 0;
        while at + 2 <= bytes.len() {
            let opcode = bytes[at] & 0x0f;
            let mut len = (bytes[at + 1] & 0x7f) as usize;
            at += 2;
            if len == 126 {
                len = u16::from_be_bytes([bytes[at], bytes[at + 1]]) as usize;
                at += 2;
            } else if len == 127 {
                let mut eight = [0u8; 8];
                eight.copy_from_slice(&bytes[at..at + 8]);
                len = u64::from_be_bytes(eight) as usize;
                at += 8;
            }
            frames.push((opcode, bytes[at..(at + len).min(bytes.len())].to_vec()));
            at += len;
        }
        frames
    }
}

/// The close frame's code and reason.
fn close_of(frames: &[(u8, Vec<u8>)]) -> (u16, String) {
    let (_, payload) = frames
        .iter()
        .find(|(opcode, _)| *opcode == 0x8)
        .unwrap_or_else(|| panic!("no close frame in {frames:?}"));
    (
        u16::from_be_bytes([payload[0], payload[1]]),
        String::from_utf8_lossy(&payload[2..]).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn silent_peers_are_dropped_and_live_ones_kept() {
    let proxy = Proxy::start("[limits]\nidle_timeout_ms = 300\nhandshake_timeout_ms = 300\n");
    // A TCP connection that never upgrades is hung up on.
    let mut idle = Mute::connect(&proxy);
    assert!(idle.frames_until_hang_up().is_empty());
    // An upgrade without initialize is closed (1008) after the handshake timeout.
    let mut lurker = Mute::connect(&proxy);
    lurker.upgrade(&proxy);
    let (code, reason) = close_of(&lurker.frames_until_hang_up());
    assert_eq!(code, 1008);
    assert!(reason.contains("no initialize"), "{reason}");
    // An initialized client that never answers the host's pings is closed (1001).
    let mut mute = Mute::connect(&proxy);
    mute.upgrade(&proxy);
    mute.send_text(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"channel": "ahp-root://", "clientId": "mute", "protocolVersions": ["1.0.0"]}})
        .to_string(),
    );
    let frames = mute.frames_until_hang_up();
    assert!(
        frames.iter().any(|(opcode, _)| *opcode == 0x9),
        "pinged first: {frames:?}"
    );
    let (code, reason) = close_of(&frames);
    assert_eq!(code, 1001);
    assert!(reason.contains("nothing heard"), "{reason}");
    // The official client answers pings: still there after many idle periods.
    let client = official_client_works(upgrade(&proxy.url, &[]).await.unwrap()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    client
        .request::<_, Value>("ping", json!({"channel": "ahp-root://"}))
        .await
        .expect("alive after 5 idle timeouts");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_or_repeated_host_headers_are_refused() {
    let proxy = Proxy::start("");
    let port = proxy.addr.port();
    let own = format!("127.0.0.1:{port}");
    for hosts in [
        vec![own.clone(), own.clone()],
        vec![own.clone(), "evil.example".into()],
        vec![format!("127.0.0.1:{port}:1")],
        vec![format!("localhost:{port}@evil.example")],
        vec![format!("localhost:{port}/x")],
        vec!["localhost:abc".into()],
        vec![format!("[::1]{port}")],
        vec![],
    ] {
        let mut mute = Mute::connect(&proxy);
        let refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let head = mute.upgrade_with_hosts(&refs);
        assert!(head.starts_with("HTTP/1.1 400"), "{hosts:?}: {head}");
    }
    // The well-formed one is still admitted.
    let mut mute = Mute::connect(&proxy);
    let head = mute.upgrade_with_hosts(&[&format!("localhost:{port}")]);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
}

#[tokio::test(flavor = "multi_thread")]
async fn frames_that_break_the_websocket_protocol_get_1002_and_bad_utf8_1007() {
    let proxy = Proxy::start("");
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let masked = |first: u8, payload: &[u8]| {
        let mut frame = vec![first, 0x80 | payload.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        frame
    };
    for (frame, code, what) in [
        (
            vec![0x81u8, 0x02, b'h', b'i'],
            1002,
            "an unmasked client frame",
        ),
        (masked(0xc1, b"hi"), 1002, "a reserved bit set"),
        (masked(0x83, b"hi"), 1002, "a reserved opcode"),
        (masked(0x80, b"hi"), 1002, "a continuation of nothing"),
        (masked(0x09, b"hi"), 1002, "a fragmented ping"),
        (
            masked(0x81, &[0xff, 0xfe, b'x']),
            1007,
            "a text frame that is not UTF-8",
        ),
    ] {
        let mut mute = Mute::connect(&proxy);
        mute.upgrade(&proxy);
        mute.send_raw(&frame);
        let (got, reason) = close_of(&mute.frames_until_hang_up());
        assert_eq!(got, code, "{what}: {reason}");
        assert!(!reason.is_empty(), "{what}");
    }
    // The endpoint is unharmed.
    let _client = official_client_works(upgrade(&proxy.url, &[]).await.unwrap()).await;
}

#[test]
fn a_second_origin_header_is_refused_even_after_a_loopback_one() {
    let proxy = Proxy::start("");
    let upgrade = |origins: &[&str]| {
        let lines: String = origins.iter().map(|o| format!("Origin: {o}\r\n")).collect();
        let mut socket = std::net::TcpStream::connect(proxy.addr).unwrap();
        socket.set_read_timeout(Some(PATIENCE)).unwrap();
        let request = format!(
            "GET / HTTP/1.1\r\nHost: {}\r\n{lines}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            proxy.addr
        );
        socket.write_all(request.as_bytes()).unwrap();
        let mut head = [0u8; 12];
        socket.read_exact(&mut head).unwrap();
        String::from_utf8_lossy(&head).into_owned()
    };
    assert_eq!(
        upgrade(&["http://localhost:5173", "http://evil.example"]),
        "HTTP/1.1 403"
    );
    assert_eq!(
        upgrade(&["http://localhost:5173", "http://localhost:5173"]),
        "HTTP/1.1 403"
    );
    assert_eq!(upgrade(&["http://localhost:5173"]), "HTTP/1.1 101");
}
