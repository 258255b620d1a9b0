//! Fairness under abuse on the MCP HTTP front (issue 46): three 4.6 MiB listen requests
//! naming resources by the hundred thousand, 256 listen streams, 1,000 sessions of one
//! client, and 150 slow peers dribbling their requests, each followed by a legitimate
//! harness that must be served.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::proxy::{config, Options, Running};
use crate::verdict;

/// How long an answer may take before the bench calls it missing.
const PATIENCE: Duration = Duration::from_secs(20);

const ENVELOPE: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}"#;

/// POST `body` to `/mcp` at `addr` (modern headers when `method` is given) on a connection of
/// its own; the connection, once the status line is read, and the status.
pub async fn post(addr: &str, method: Option<&str>, body: &str) -> Option<(TcpStream, u16)> {
    let modern = method
        .map(|m| format!("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {m}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{modern}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = [0u8; 12];
    tokio::time::timeout(PATIENCE, stream.read_exact(&mut head))
        .await
        .ok()?
        .ok()?;
    let status = std::str::from_utf8(&head[9..12]).ok()?.parse().ok()?;
    Some((stream, status))
}

/// A legacy `initialize` from client `name`: its status.
async fn initialize(addr: &str, name: &str) -> Option<u16> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"{name}","version":"0"}}}}}}"#
    );
    post(addr, None, &body).await.map(|(_, status)| status)
}

/// A listen request naming `uris` resources of about 40 bytes each.
fn listen_body(id: usize, uris: usize) -> String {
    let list: Vec<String> = (0..uris)
        .map(|n| format!("\"test://static/resource/{n:012}\""))
        .collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"_meta":{ENVELOPE},"notifications":{{"toolsListChanged":true,"resourceSubscriptions":[{}]}}}}}}"#,
        list.join(",")
    )
}

fn start(binary: &Path, dir: &Path, name: &str, text: &str) -> Result<Running, String> {
    let examples = crate::common::examples_binary();
    let server = format!(
        "[servers.features]\ncommand = {:?}\nargs = [\"features\"]\n",
        examples.display().to_string()
    );
    let config = config(dir, name, &format!("{server}{text}"), "http = true\n");
    let options = Options {
        mcp_http: true,
        ..Options::default()
    };
    Running::start(binary, &config, options)
}

/// Every attack; false when a legitimate harness was not served after one.
pub async fn fairness(binary: &Path, dir: &Path) -> bool {
    let mut all = true;
    all &= subscriptions(binary, dir).await;
    all &= listens(binary, dir).await;
    all &= sessions(binary, dir).await;
    all &= slowloris(binary, dir).await;
    all
}

/// Three listen requests of 4.6 MiB (125,000 resources each): resident memory after, and
/// whether a harness is served.
async fn subscriptions(binary: &Path, dir: &Path) -> bool {
    let proxy = match start(binary, dir, "subscriptions.toml", "") {
        Ok(proxy) => proxy,
        Err(e) => return verdict(false, format!("subscriptions: {e}")),
    };
    let addr = proxy.mcp.clone().unwrap_or_default();
    let _ = initialize(&addr, "warm-up").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = proxy.rss_mib();
    let mut peak = before;
    let mut held = Vec::new();
    let mut statuses = Vec::new();
    for n in 0..3 {
        let body = listen_body(n, 125_000);
        let size = body.len();
        let answered = post(&addr, Some("subscriptions/listen"), &body).await;
        statuses.push(format!(
            "{:.1} MiB → {}",
            size as f64 / 1048576.0,
            answered.as_ref().map_or(0, |(_, s)| *s)
        ));
        held.extend(answered.map(|(stream, _)| stream));
    }
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_secs(15) {
        peak = peak.max(proxy.rss_mib());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let after = proxy.rss_mib();
    let served = initialize(&addr, "legit").await == Some(200);
    drop(held);
    proxy.stop();
    verdict(
        served && after - before < 64.0,
        format!(
            "subscriptions: 3 listen requests ({}): RSS {before:.1} → {after:.1} MiB (peak {peak:.1}); a new harness served: {served}",
            statuses.join(", ")
        ),
    )
}

/// 256 listen streams (one connection each), then a new harness.
async fn listens(binary: &Path, dir: &Path) -> bool {
    let proxy = match start(binary, dir, "listens.toml", "") {
        Ok(proxy) => proxy,
        Err(e) => return verdict(false, format!("listens: {e}")),
    };
    let addr = proxy.mcp.clone().unwrap_or_default();
    let mut held = Vec::new();
    let mut opened = 0;
    for n in 0..256 {
        let body = listen_body(n, 0).replace(r#","resourceSubscriptions":[]"#, "");
        if let Some((stream, 200)) = post(&addr, Some("subscriptions/listen"), &body).await {
            opened += 1;
            held.push(stream);
        }
    }
    let mut served = 0;
    for n in 0..10 {
        served += usize::from(initialize(&addr, &format!("legit-{n}")).await == Some(200));
    }
    drop(held);
    proxy.stop();
    verdict(
        served == 10,
        format!("listens: 256 listen streams asked, {opened} answered 200; then {served} of 10 new harnesses served"),
    )
}

/// 1,000 sessions of one client, then harnesses of others.
async fn sessions(binary: &Path, dir: &Path) -> bool {
    let proxy = match start(binary, dir, "sessions.toml", "") {
        Ok(proxy) => proxy,
        Err(e) => return verdict(false, format!("sessions: {e}")),
    };
    let addr = proxy.mcp.clone().unwrap_or_default();
    let mut made = 0;
    for _ in 0..1000 {
        made += usize::from(initialize(&addr, "greedy").await == Some(200));
    }
    let mut served = 0;
    for n in 0..10 {
        served += usize::from(initialize(&addr, &format!("legit-{n}")).await == Some(200));
    }
    proxy.stop();
    verdict(
        served == 10,
        format!("sessions: 1,000 initialize of one client, {made} answered 200; then {served} of 10 other harnesses served"),
    )
}

/// 150 slow peers dribbling their headers a byte every 500 ms against `max_connections =
/// 64`, then 10 prompt `initialize`.
async fn slowloris(binary: &Path, dir: &Path) -> bool {
    let limits = "[limits]\nmax_connections = 64\n";
    let proxy = match start(binary, dir, "slowloris.toml", limits) {
        Ok(proxy) => proxy,
        Err(e) => return verdict(false, format!("slowloris: {e}")),
    };
    let addr = proxy.mcp.clone().unwrap_or_default();
    let mut slow = Vec::new();
    for _ in 0..150 {
        if let Ok(mut socket) = TcpStream::connect(&addr).await {
            let _ = socket
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .await;
            slow.push(socket);
        }
    }
    let dribble = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            for socket in &mut slow {
                let _ = socket.write_all(b"X").await;
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut served = 0;
    for n in 0..10 {
        served += usize::from(initialize(&addr, &format!("prompt-{n}")).await == Some(200));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    dribble.abort();
    proxy.stop();
    verdict(
        served == 10,
        format!("slowloris: 150 peers dribbling headers against 64 connections; {served} of 10 prompt requests served"),
    )
}
