//! Fairness under abuse on the MCP front, through the real binary (issue 46): one client's
//! listen streams, sessions, subscriptions or held `input_required` rounds never shut another
//! harness out, and a modern request's `Mcp-Param-*` headers are checked against its body.
//! Each abuse is followed by a legitimate harness that must still be served.

mod common;

use common::raw::RawClient;
use common::{Proxy, PATIENCE};
use serde_json::{json, Value};

/// A 2026-07-28 request's `_meta`, naming the client `name`.
fn envelope(name: &str) -> String {
    format!(
        r#"{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{"form":{{}}}}}},"io.modelcontextprotocol/clientInfo":{{"name":"{name}","version":"1"}}}}"#
    )
}

/// A legacy `initialize`'s params, naming the client `name`.
fn initialize(name: &str) -> String {
    format!(
        r#"{{"protocolVersion":"2025-11-25","capabilities":{{"elicitation":{{}}}},"clientInfo":{{"name":"{name}","version":"1"}}}}"#
    )
}

fn request(id: u64, method: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

/// POST a modern request with its standard headers (and `extra`); a fresh client each
/// time, so each request has a connection of its own.
async fn post_modern(
    url: &str,
    method: &str,
    extra: &[(&str, &str)],
    body: String,
) -> reqwest::Response {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut post = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    for (name, value) in extra {
        post = post.header(*name, *value);
    }
    post.body(body).send().await.expect("POST")
}

/// Open a listen stream for client `name` with `filter`; its response, once acknowledged.
async fn listen(url: &str, name: &str, id: u64, filter: &str) -> reqwest::Response {
    let params = format!(r#"{{"_meta":{},"notifications":{filter}}}"#, envelope(name));
    let mut response = post_modern(
        url,
        "subscriptions/listen",
        &[],
        request(id, "subscriptions/listen", &params),
    )
    .await;
    assert_eq!(response.status().as_u16(), 200, "listen {id}");
    let mut text = String::new();
    while !text.contains("notifications/subscriptions/acknowledged") {
        let chunk = tokio::time::timeout(PATIENCE, response.chunk())
            .await
            .expect("acknowledged in time")
            .expect("the stream")
            .unwrap_or_else(|| panic!("listen {id} ended before its acknowledgement: {text}"));
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    response
}

/// The rest of a stream, to its end (within the test's patience).
async fn to_end(mut response: reqwest::Response) -> String {
    let mut text = String::new();
    while let Some(chunk) = tokio::time::timeout(PATIENCE, response.chunk())
        .await
        .expect("the stream ends in time")
        .expect("the stream")
    {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

/// The first message of a response, JSON or an event stream (within the test's patience).
async fn first_message(mut response: reqwest::Response) -> Value {
    let mut text = String::new();
    loop {
        let json = text.trim_start().starts_with('{');
        let parsed = match json {
            true => serde_json::from_str(&text).ok(),
            false => (text.lines().find_map(|l| l.strip_prefix("data: ")))
                .and_then(|l| serde_json::from_str(l).ok()),
        };
        if let Some(message) = parsed {
            return message;
        }
        let chunk = tokio::time::timeout(PATIENCE, response.chunk())
            .await
            .expect("a message in time")
            .expect("the body");
        let Some(chunk) = chunk else {
            panic!("the body ended without a message: {text}")
        };
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// Whether `text` (an event stream) ends with listen request `id`'s graceful completion.
fn completed(text: &str, id: u64) -> bool {
    let last = text.lines().rev().find_map(|l| l.strip_prefix("data: "));
    let last: Value = last
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    last["id"] == id && last["result"]["resultType"] == "complete"
}

fn none() -> impl FnMut(&str, &str) -> String {
    |_, _| String::new()
}

/// A legitimate harness: `initialize`, `tools/list` and a call on `url` all served.
async fn a_harness_is_served(url: &str, name: &str) -> RawClient {
    let mut harness = RawClient::http(url);
    harness
        .request("initialize", Some(&initialize(name)), &mut none())
        .await;
    harness.notify("notifications/initialized", None).await;
    let listed = harness.request("tools/list", Some("{}"), &mut none()).await;
    assert!(
        listed.response().contains(r#""tools""#),
        "{}",
        listed.response()
    );
    harness
}

/// 256 listen streams (no idle limit) took every connection: now listen streams hold at
/// most half of `max_connections`, and past that the stalest one of the client holding the
/// most ends with its completion, its connection closed.
#[tokio::test]
async fn listen_streams_leave_connections_for_a_new_harness() {
    let config = format!(
        "{}[limits]\nmax_connections = 8\n",
        common::server("echo", "echo", &[])
    );
    let proxy = Proxy::start(&config);
    let filter = r#"{"toolsListChanged":true}"#;
    let mut streams = Vec::new();
    for n in 0..8 {
        streams.push(listen(&proxy.mcp_url, &format!("flood-{n}"), n, filter).await);
    }
    // The four oldest made room for the four newest (half of 8 stay open).
    let newest = streams.split_off(4);
    for (n, stream) in streams.into_iter().enumerate() {
        let text = to_end(stream).await;
        assert!(completed(&text, n as u64), "stream {n}: {text}");
    }
    let mut harness = a_harness_is_served(&proxy.mcp_url, "legit").await;
    let called = harness
        .request(
            "tools/call",
            Some(r#"{"name":"echo","arguments":{"text":"still here"}}"#),
            &mut none(),
        )
        .await;
    assert!(
        called.response().contains("still here"),
        "{}",
        called.response()
    );
    let mine = listen(&proxy.mcp_url, "legit", 99, filter).await;
    drop((mine, newest));
}

/// One client past `max_listen_streams_per_client` (32 by default) loses its own oldest
/// stream, ended with its completion; another client's stream is left alone.
#[tokio::test]
async fn a_client_past_its_listen_limit_loses_its_own_oldest_stream() {
    let proxy = Proxy::start(&common::server("echo", "echo", &[]));
    let filter = r#"{"toolsListChanged":true}"#;
    let other = listen(&proxy.mcp_url, "other", 100, filter).await;
    let mut greedy = Vec::new();
    for n in 0..33 {
        greedy.push(listen(&proxy.mcp_url, "greedy", n, filter).await);
    }
    let oldest = greedy.remove(0);
    let text = to_end(oldest).await;
    assert!(completed(&text, 0), "{text}");
    drop((other, greedy));
}

/// A listen stream that delivered nothing for `listen_idle_ms` ends with its completion.
#[tokio::test]
async fn an_idle_listen_stream_ends_with_its_completion() {
    let config = format!(
        "{}[mcp]\nlisten_idle_ms = 300\n",
        common::server("echo", "echo", &[])
    );
    let proxy = Proxy::start(&config);
    let stream = listen(&proxy.mcp_url, "idle", 5, r#"{"toolsListChanged":true}"#).await;
    let text = to_end(stream).await;
    assert!(completed(&text, 5), "{text}");
}

/// 1,000 sessions of one client made every later `initialize` 503: now the longest idle
/// session is forgotten (its requests get 404) before a new harness is refused; only when
/// every session is busy (its GET stream open) is one refused, with a JSON-RPC error.
#[tokio::test]
async fn an_idle_session_makes_room_for_a_new_harness() {
    let config = format!(
        "{}[mcp]\nmax_sessions = 4\n",
        common::server("echo", "echo", &[])
    );
    let proxy = Proxy::start(&config);
    let mut flood = Vec::new();
    for n in 0..4 {
        flood.push(a_harness_is_served(&proxy.mcp_url, &format!("flood-{n}")).await);
    }
    let mut harness = a_harness_is_served(&proxy.mcp_url, "legit").await;
    // The longest idle session (the first) was forgotten.
    let session = flood[0].session().expect("a session");
    let status = post_session(&proxy.mcp_url, &session).await;
    assert_eq!(status, 404);
    let called = harness
        .request(
            "tools/call",
            Some(r#"{"name":"echo","arguments":{"text":"mine"}}"#),
            &mut none(),
        )
        .await;
    assert!(called.response().contains("mine"), "{}", called.response());

    // Every session busy: a new one is refused, saying why.
    let mut open = Vec::new();
    for client in flood.iter().skip(1).chain([&harness]) {
        open.push(open_get(&proxy.mcp_url, &client.session().expect("a session")).await);
    }
    let refused = post_plain(
        &proxy.mcp_url,
        request(1, "initialize", &initialize("late")),
    )
    .await;
    assert_eq!(refused.0, 503, "{}", refused.1);
    let body: Value = serde_json::from_str(&refused.1).expect("a JSON-RPC error");
    assert_eq!(body["id"], 1, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("none is idle"), "{body}");
    drop(open);
}

/// `max_sessions_per_client`: one client past it loses its own longest idle session; others
/// keep theirs.
#[tokio::test]
async fn a_client_past_its_session_limit_loses_its_own_idle_session() {
    let config = format!(
        "{}[mcp]\nmax_sessions_per_client = 2\n",
        common::server("echo", "echo", &[])
    );
    let proxy = Proxy::start(&config);
    let other = a_harness_is_served(&proxy.mcp_url, "other").await;
    let first = a_harness_is_served(&proxy.mcp_url, "greedy").await;
    let _second = a_harness_is_served(&proxy.mcp_url, "greedy").await;
    let _third = a_harness_is_served(&proxy.mcp_url, "greedy").await;
    let gone = post_session(&proxy.mcp_url, &first.session().expect("a session")).await;
    assert_eq!(gone, 404);
    let kept = post_session(&proxy.mcp_url, &other.session().expect("a session")).await;
    assert_eq!(kept, 200);
}

/// A `ping` on session `session`: its HTTP status.
async fn post_session(url: &str, session: &str) -> u16 {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(request(50, "ping", "{}"))
        .send()
        .await
        .expect("POST")
        .status()
        .as_u16()
}

/// A plain POST: its status and body.
async fn post_plain(url: &str, body: String) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
        .send()
        .await
        .expect("POST");
    let status = response.status().as_u16();
    let text = tokio::time::timeout(PATIENCE, response.text()).await;
    (status, text.expect("the body in time").unwrap_or_default())
}

/// Session `session`'s GET stream, open.
async fn open_get(url: &str, session: &str) -> reqwest::Response {
    let mut response = reqwest::Client::new()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("GET");
    assert_eq!(response.status().as_u16(), 200);
    // Its first bytes: the stream is open at the proxy.
    let first = tokio::time::timeout(PATIENCE, response.chunk()).await;
    assert!(matches!(first, Ok(Ok(Some(_)))), "the GET stream opens");
    response
}

/// Three 4.6 MiB listen requests took the proxy to 1.72 GB: a listen request naming more
/// than `max_subscriptions` (256) resources is refused with `-32602` saying so, before
/// anything is subscribed; a 2025-11-25 session holds at most as many, the next refused.
#[tokio::test]
async fn subscriptions_are_capped_per_request_and_per_session() {
    let proxy = Proxy::start(&common::server("features", "features", &[]));
    let url = format!("{}/features", proxy.mcp_url);
    let uris: Vec<String> = (0..257).map(|n| format!("test://static/{n}")).collect();
    let filter = json!({ "resourceSubscriptions": uris }).to_string();
    let params = format!(
        r#"{{"_meta":{},"notifications":{filter}}}"#,
        envelope("hoarder")
    );
    let response = post_modern(
        &url,
        "subscriptions/listen",
        &[],
        request(7, "subscriptions/listen", &params),
    )
    .await;
    let answer = first_message(response).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("max_subscriptions"), "{answer}");
    // Within the cap: acknowledged.
    let fits = json!({ "resourceSubscriptions": &uris[..2] }).to_string();
    drop(listen(&url, "modest", 8, &fits).await);

    let mut session = a_harness_is_served(&url, "subscriber").await;
    for uri in &uris[..256] {
        let params = json!({ "uri": uri }).to_string();
        let answered = session
            .request("resources/subscribe", Some(&params), &mut none())
            .await;
        assert!(
            answered.response().contains(r#""result""#),
            "{}",
            answered.response()
        );
    }
    let params = json!({ "uri": &uris[256] }).to_string();
    let refused = session
        .request("resources/subscribe", Some(&params), &mut none())
        .await;
    let refused: Value = serde_json::from_str(refused.response()).unwrap_or_default();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        (refused["error"]["message"].as_str().unwrap_or_default()).contains("max_subscriptions"),
        "{refused}"
    );
    // Another harness is still served.
    a_harness_is_served(&url, "legit").await;
}

/// A 2026-07-28 round held for input that is never retried blocked every other harness's
/// elicitation on that stdio server (its requests could be either's): a held round waits on
/// its own answer, so the server's next request goes to the other harness.
#[tokio::test]
async fn a_held_round_does_not_block_another_harness() {
    let proxy = Proxy::start(&common::server("features", "features", &[]));
    let url = format!("{}/features", proxy.mcp_url);
    let call = format!(
        r#"{{"name":"ask_user","arguments":{{"question":"never answered"}},"_meta":{}}}"#,
        envelope("holder")
    );
    let held = post_modern(
        &url,
        "tools/call",
        &[("mcp-name", "ask_user")],
        request(1, "tools/call", &call),
    )
    .await;
    let held = first_message(held).await;
    assert_eq!(held["result"]["resultType"], "input_required", "{held}");

    let mut harness = a_harness_is_served(&url, "legit").await;
    let mut asked = Vec::new();
    let mut answer = |method: &str, _: &str| {
        asked.push(method.to_string());
        r#"{"action":"accept","content":{"answer":"forty-two"}}"#.to_string()
    };
    let called = harness
        .request(
            "tools/call",
            Some(r#"{"name":"ask_user","arguments":{"question":"yours?"}}"#),
            &mut answer,
        )
        .await;
    assert_eq!(asked, ["elicitation/create"], "{}", called.response());
    assert!(
        called.response().contains("forty-two"),
        "{}",
        called.response()
    );
}

/// The front checks a modern `tools/call`'s `Mcp-Param-*` headers against its arguments, as
/// the tool's `x-mcp-header` annotations say (a server would answer `-32020` itself).
#[tokio::test]
async fn mcp_param_headers_must_match_the_body() {
    let proxy = Proxy::start(&common::server("witness", "witness", &[]));
    let url = format!("{}/witness", proxy.mcp_url);
    let call = |arguments: &str| {
        let params = format!(
            r#"{{"name":"routed","arguments":{arguments},"_meta":{}}}"#,
            envelope("h")
        );
        request(3, "tools/call", &params)
    };
    let send = |headers: Vec<(&'static str, &'static str)>, body: String| {
        let url = url.clone();
        async move {
            let mut headers = headers;
            headers.push(("mcp-name", "routed"));
            let response = post_modern(&url, "tools/call", &headers, body).await;
            (response.status().as_u16(), first_message(response).await)
        }
    };
    let args = r#"{"region":"us-west1","count":42}"#;
    let (status, answer) = send(
        vec![("mcp-param-region", "eu-north1"), ("mcp-param-count", "42")],
        call(args),
    )
    .await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (400, &json!(-32020)),
        "{answer}"
    );
    let (status, answer) = send(vec![("mcp-param-count", "42")], call(args)).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (400, &json!(-32020)),
        "missing: {answer}"
    );
    let (status, answer) = send(vec![("mcp-param-region", "us-west1")], call(r#"{}"#)).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (400, &json!(-32020)),
        "no value: {answer}"
    );
    // Matching (the integer as a number, the region base64-encoded) passes.
    let (status, answer) = send(
        vec![
            ("mcp-param-region", "=?base64?dXMtd2VzdDE=?="),
            ("mcp-param-count", "42.0"),
        ],
        call(args),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    // A tool without annotations needs none.
    let plain = format!(
        r#"{{"name":"calls","arguments":{{}},"_meta":{}}}"#,
        envelope("h")
    );
    let response = post_modern(
        &url,
        "tools/call",
        &[("mcp-name", "calls")],
        request(4, "tools/call", &plain),
    )
    .await;
    assert_eq!(response.status().as_u16(), 200);
}

/// Slowloris: peers that send their requests a byte at a time held every connection until
/// `handshake_timeout_ms`, and prompt requests were refused. A connection that has been
/// reading its request (or idle) the longest is shed for a newcomer once it has been at it
/// for a second, so every prompt request is served.
#[tokio::test]
async fn slow_requests_do_not_take_the_places_of_prompt_ones() {
    use tokio::io::AsyncWriteExt;
    let config = format!(
        "{}[limits]\nmax_connections = 16\n",
        common::server("echo", "echo", &[])
    );
    let proxy = Proxy::start(&config);
    let at = proxy
        .mcp_url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let mut slow = Vec::new();
    // As many as there are places, more than there are prompt requests: each of these
    // takes the place of a slow one, never waiting for another to close.
    for _ in 0..16 {
        let mut socket = tokio::net::TcpStream::connect(&at).await.expect("connect");
        socket
            .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .expect("write");
        slow.push(socket);
    }
    // They dribble on: a byte each, every 100 ms.
    let dribbling = tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            for socket in &mut slow {
                let _ = socket.write_all(b"X").await;
            }
        }
    });
    // Longer than a prompt request takes to arrive.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let mut refused = Vec::new();
    for n in 0..10 {
        let (status, body) = post_plain(
            &proxy.mcp_url,
            request(n, "initialize", &initialize("prompt")),
        )
        .await;
        if status != 200 {
            refused.push(format!("{n}: HTTP {status} {body}"));
        }
    }
    dribbling.abort();
    assert!(refused.is_empty(), "refused: {refused:?}");
}

/// A 2025-11-25 session's `GET` stream is as long-lived as a listen stream and is counted
/// with them: sessions that each hold one cannot take every connection either; the stalest
/// ends (its client may open it again) and a new harness is served.
#[tokio::test]
async fn get_streams_count_with_listen_streams() {
    let config = format!(
        "{}[limits]\nmax_connections = 8\n",
        common::server("echo", "echo", &[])
    );
    let proxy = Proxy::start(&config);
    let mut streams = Vec::new();
    for n in 0..8 {
        let harness = a_harness_is_served(&proxy.mcp_url, &format!("flood-{n}")).await;
        let session = harness.session().expect("a session");
        streams.push(open_get(&proxy.mcp_url, &session).await);
    }
    let newest = streams.split_off(4);
    for stream in streams {
        to_end(stream).await;
    }
    a_harness_is_served(&proxy.mcp_url, "legit").await;
    drop(newest);
}
