//! The proxy's modern face (MCP 2026-07-28) in front of legacy servers, through the real
//! binary: the official SDK v2 client pinned to 2026-07-28 against the era toolkit's legacy
//! server (SDK v1) behind the stdio front, `/mcp/<server>` and `/mcp` (listing, calling,
//! progress, elicitation, sampling, roots, list changes, resource updates, cancellation), and
//! raw JSON for the spec's validation ladder, `server/discover`, the modern result shape and
//! the `requestState` the proxy mints.

mod common;
#[allow(dead_code)] // the matrix helpers this file does not use
mod era;

use common::{Proxy, ScratchDir};
use era::{in_parallel, Target, Toolkit, Transport, SCENARIOS, V2_MODERN};
use serde_json::{json, Value};

const ENVELOPE: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}"#;

/// A proxy.toml with the toolkit's legacy server (SDK v1) over stdio as `legacy`.
fn legacy_config(kit: &Toolkit) -> String {
    let argv = kit.server("legacy", Transport::Stdio);
    format!(
        "[servers.legacy]\ncommand = {:?}\nargs = {}\n",
        argv[0],
        serde_json::to_string(&argv[1..]).unwrap()
    )
}

#[test]
fn a_pinned_modern_sdk_client_uses_a_legacy_server_through_every_front() {
    let kit = Toolkit::load();
    let config = legacy_config(&kit);
    // A proxy per HTTP front: a stdio server's requests carry no link to the call that caused
    // them, so two harnesses' calls in flight at once would make them ambiguous (refused).
    let (server_front, aggregate) = (Proxy::start(&config), Proxy::start(&config));
    let dir = ScratchDir::new("erafront-stdio");
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, &config).unwrap();
    let stdio = Target::Command(vec![
        env!("CARGO_BIN_EXE_ahp-proxy").to_string(),
        "--config".into(),
        path.display().to_string(),
        "serve".into(),
        "--stdio".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ]);
    let cells = [
        ("stdio front", stdio),
        (
            "/mcp/legacy",
            Target::Url(format!("{}/legacy", server_front.mcp_url)),
        ),
        ("/mcp", Target::Url(aggregate.mcp_url.clone())),
    ];
    let runs = in_parallel(&cells, 3, |(_, target)| kit.drive(V2_MODERN, target));
    let mut wrong = Vec::new();
    for ((front, _), outcomes) in cells.iter().zip(&runs) {
        let passed: Vec<&str> = (outcomes.iter().filter(|o| o.ok))
            .map(|o| o.scenario.as_str())
            .collect();
        eprintln!("v2 modern × legacy via {front}: {}", passed.join(" "));
        for o in outcomes {
            let modern =
                o.era.as_deref() == Some("modern") && o.version.as_deref() == Some("2026-07-28");
            if !o.ok || !modern {
                wrong.push(format!("{front}: {} ({})", o.scenario, o.line));
            }
            let asked = [
                ("elicit", "elicitation/create"),
                ("sample", "sampling/createMessage"),
                ("roots", "roots/list"),
            ];
            if let Some((_, method)) = asked.iter().find(|(s, _)| *s == o.scenario) {
                if !o.wire.contains(&format!("input_required {method}")) {
                    wrong.push(format!(
                        "{front}: {} not asked as input_required ({})",
                        o.scenario, o.line
                    ));
                }
            }
        }
        assert_eq!(outcomes.len(), SCENARIOS.len());
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// POST `body` to `url` with the standard headers `headers`: status, JSON body, headers.
async fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = tokio::time::timeout(common::PATIENCE, request.send())
        .await
        .expect("answered in time")
        .expect("POST");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = tokio::time::timeout(common::PATIENCE, response.text())
        .await
        .unwrap()
        .unwrap();
    // An event stream: its last data line is the answer.
    let json_text = if text.starts_with('{') || text.is_empty() {
        text.clone()
    } else {
        text.lines()
            .rev()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or_default()
            .to_string()
    };
    (
        status,
        serde_json::from_str(&json_text).unwrap_or(Value::Null),
        headers,
    )
}

fn request(id: u64, method: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

const MODERN: [(&str, &str); 1] = [("mcp-protocol-version", "2026-07-28")];

#[tokio::test]
async fn modern_requests_get_the_spec_ladder_and_modern_results_beside_legacy_sessions() {
    let proxy = Proxy::start(&common::server("echo", "echo", &[]));
    let url = proxy.mcp_url.clone();
    let list = request(1, "tools/list", &format!(r#"{{"_meta":{ENVELOPE}}}"#));
    let headers = |method: &'static str| vec![MODERN[0], ("mcp-method", method)];

    // A modern listing: complete, cache hints, the proxy named; no session minted.
    let (status, answer, got) = post(&url, &headers("tools/list"), &list).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(answer["result"]["ttlMs"], 0);
    assert_eq!(answer["result"]["cacheScope"], "private");
    assert_eq!(
        answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "ahp-proxy"
    );
    assert!(answer["result"]["tools"]
        .as_array()
        .is_some_and(|t| !t.is_empty()));
    assert!(
        got.get("mcp-session-id").is_none(),
        "no session for modern traffic"
    );

    // The ladder, the request's id kept on every refusal.
    let (status, answer, _) = post(&url, &[MODERN[0], ("mcp-method", "tools/call")], &list).await;
    assert_eq!(
        (
            status,
            answer["error"]["code"].as_i64(),
            answer["id"].as_i64()
        ),
        (400, Some(-32020), Some(1))
    );
    let (status, answer, _) = post(
        &url,
        &headers("tools/list"),
        &request(2, "tools/list", "{}"),
    )
    .await;
    assert_eq!(
        (
            status,
            answer["error"]["code"].as_i64(),
            answer["id"].as_i64()
        ),
        (400, Some(-32602), Some(2))
    );
    let old = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#;
    let (status, answer, _) = post(
        &url,
        &[
            ("mcp-protocol-version", "2027-01-01"),
            ("mcp-method", "tools/list"),
        ],
        &request(3, "tools/list", old),
    )
    .await;
    assert_eq!(
        (
            status,
            answer["error"]["code"].as_i64(),
            answer["id"].as_i64()
        ),
        (400, Some(-32022), Some(3))
    );
    assert_eq!(
        answer["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2027-01-01"})
    );
    let (status, answer, _) = post(
        &url,
        &headers("ping"),
        &request(4, "ping", &format!(r#"{{"_meta":{ENVELOPE}}}"#)),
    )
    .await;
    assert_eq!(
        (
            status,
            answer["error"]["code"].as_i64(),
            answer["id"].as_i64()
        ),
        (404, Some(-32601), Some(4))
    );
    let forged = format!(
        r#"{{"name":"echo","arguments":{{"text":"x"}},"requestState":"Zm9v.YmFy","inputResponses":{{}},"_meta":{ENVELOPE}}}"#
    );
    let call_headers = [
        MODERN[0],
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    let (status, answer, _) = post(&url, &call_headers, &request(5, "tools/call", &forged)).await;
    assert_eq!(
        (status, answer["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{answer}"
    );
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("requestState"));

    // A call answered in modern shape, no cache hints on a call.
    let call = format!(r#"{{"name":"echo","arguments":{{"text":"hi"}},"_meta":{ENVELOPE}}}"#);
    let (status, answer, _) = post(&url, &call_headers, &request(6, "tools/call", &call)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete");
    assert!(answer["result"].get("ttlMs").is_none());

    // server/discover on a server's own endpoint: its identity; on /mcp the proxy's.
    let discover = request(7, "server/discover", &format!(r#"{{"_meta":{ENVELOPE}}}"#));
    let (status, answer, _) = post(
        &format!("{url}/echo"),
        &headers("server/discover"),
        &discover,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["supportedVersions"], json!(["2026-07-28"]));
    assert!(
        answer["result"]["capabilities"]["tools"].is_object(),
        "{answer}"
    );
    let named = &answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"];
    assert!(named.is_string() && named != "ahp-proxy", "{answer}");
    assert_eq!(
        (
            answer["result"]["ttlMs"].as_i64(),
            answer["result"]["cacheScope"].as_str()
        ),
        (Some(0), Some("private"))
    );
    let (_, answer, _) = post(&url, &headers("server/discover"), &discover).await;
    assert_eq!(
        answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "ahp-proxy"
    );

    // GET and DELETE without a session: 405; a legacy session on the same endpoint as before.
    let client = reqwest::Client::new();
    let get = client
        .get(&url)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 405);
    let delete = client.delete(&url).send().await.unwrap();
    assert_eq!(delete.status().as_u16(), 405);
    let init = r#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}"#;
    let (status, answer, got) = post(&url, &[], init).await;
    assert_eq!(status, 200);
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
    assert!(got.get("mcp-session-id").is_some());
}

#[tokio::test]
async fn the_stdio_front_serves_modern_lines_beside_legacy_ones() {
    let (_proxy, (stdout, stdin)) = Proxy::start_stdio(&common::server("echo", "echo", &[]));
    let mut harness = common::raw::RawClient::stdio(stdout, stdin);
    let answer = |text: &str| -> Value { serde_json::from_str(text).unwrap() };
    let listed = harness
        .request(
            "tools/list",
            Some(&format!(r#"{{"_meta":{ENVELOPE}}}"#)),
            &mut |_, _| String::new(),
        )
        .await;
    let listed = answer(listed.response());
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
    assert_eq!(listed["result"]["cacheScope"], "private");
    let refused = harness
        .request(
            "ping",
            Some(&format!(r#"{{"_meta":{ENVELOPE}}}"#)),
            &mut |_, _| String::new(),
        )
        .await;
    assert_eq!(answer(refused.response())["error"]["code"], -32601);
    let bare = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#;
    let refused = harness
        .request("tools/list", Some(bare), &mut |_, _| String::new())
        .await;
    let refused = answer(refused.response());
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["id"].is_number(), "the id is kept: {refused}");
}

/// The `elicit` tool of the toolkit's legacy server over raw modern HTTP: the round's
/// `requestState` answers once; used again, altered, at another endpoint or with other
/// arguments, it is refused.
#[tokio::test]
async fn a_request_state_answers_its_held_call_once() {
    let kit = Toolkit::load();
    let proxy = Proxy::start(&legacy_config(&kit));
    let url = format!("{}/legacy", proxy.mcp_url);
    let headers = [
        MODERN[0],
        ("mcp-method", "tools/call"),
        ("mcp-name", "elicit"),
    ];
    let first = format!(r#"{{"name":"elicit","arguments":{{}},"_meta":{ENVELOPE}}}"#);
    let (status, asked, _) = post(&url, &headers, &request(1, "tools/call", &first)).await;
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let inputs = asked["result"]["inputRequests"]
        .as_object()
        .expect("inputRequests");
    let (key, input) = inputs.iter().next().expect("one input request");
    assert_eq!(input["method"], "elicitation/create");
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();

    let altered = format!("{}A", state);
    let retry = |id: u64, state: &str| {
        let params = json!({
            "name": "elicit", "arguments": {}, "requestState": state,
            "inputResponses": { key.clone(): {"action": "accept", "content": {"answer": "forty-two"}} },
            "_meta": serde_json::from_str::<Value>(ENVELOPE).unwrap(),
        });
        request(id, "tools/call", &params.to_string())
    };
    let (status, refused, _) = post(&url, &headers, &retry(2, &altered)).await;
    assert_eq!(
        (status, refused["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{refused}"
    );
    // Bound to where and for what it was minted: at the aggregated endpoint, or with other
    // arguments, the same state is refused (and the held call still waits for its own).
    let (status, elsewhere, _) = post(&proxy.mcp_url, &headers, &retry(5, &state)).await;
    assert_eq!(
        (status, elsewhere["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{elsewhere}"
    );
    let mut other = serde_json::from_str::<Value>(&retry(6, &state)).unwrap();
    other["params"]["arguments"] = json!({"answer": "other"});
    let (status, changed, _) = post(&url, &headers, &other.to_string()).await;
    assert_eq!(
        (status, changed["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{changed}"
    );
    let (status, done, _) = post(&url, &headers, &retry(3, &state)).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["id"], 3);
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(done.to_string().contains("forty-two"), "{done}");
    let (status, replayed, _) = post(&url, &headers, &retry(4, &state)).await;
    assert_eq!(
        (status, replayed["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{replayed}"
    );
}

/// Each harness call in the harness chat says which MCP era the harness spoke for it
/// (`_meta["ahp-proxy/call"].era`): `modern` for a 2026-07-28 request, `legacy` for a call in
/// an `initialize`d session.
#[tokio::test]
async fn the_harness_chat_says_which_era_each_call_was_made_in() {
    let proxy = Proxy::start(&common::server("echo", "echo", &[]));
    let mut ahp = common::Raw::connect(&proxy).await;
    let init = ahp
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "clientId": "era-watcher", "protocolVersions": ["1.0.0"],
                   "initialSubscriptions": ["ahp-chat:/harness"]}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    let started = |n: &Value| n["params"]["action"]["type"] == "chat/toolCallStart";

    let call = format!(r#"{{"name":"echo","arguments":{{"text":"modern"}},"_meta":{ENVELOPE}}}"#);
    let headers = [
        MODERN[0],
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    let (status, answer, _) =
        post(&proxy.mcp_url, &headers, &request(1, "tools/call", &call)).await;
    assert_eq!(status, 200, "{answer}");
    let modern = ahp.notification(started).await;
    assert_eq!(
        modern["params"]["action"]["_meta"]["ahp-proxy/call"]["era"], "modern",
        "{modern}"
    );

    let mut legacy = common::raw::RawClient::http(&proxy.mcp_url);
    legacy
        .request(
            "initialize",
            Some(r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}"#),
            &mut |_, _| String::new(),
        )
        .await;
    legacy.notify("notifications/initialized", None).await;
    legacy
        .request(
            "tools/call",
            Some(r#"{"name":"echo","arguments":{"text":"legacy"}}"#),
            &mut |_, _| String::new(),
        )
        .await;
    let old = ahp.notification(started).await;
    assert_eq!(
        old["params"]["action"]["_meta"]["ahp-proxy/call"]["era"], "legacy",
        "{old}"
    );
}

/// A modern harness's listen stream gets its graceful completion (the listen request's
/// result, `resultType: "complete"`, tagged with its id) when the proxy stops.
#[tokio::test]
async fn a_listen_stream_completes_when_the_proxy_stops() {
    let proxy = Proxy::start(&common::server("echo", "echo", &[]));
    let params = format!(r#"{{"_meta":{ENVELOPE},"notifications":{{"toolsListChanged":true}}}}"#);
    let mut response = reqwest::Client::new()
        .post(&proxy.mcp_url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header(MODERN[0].0, MODERN[0].1)
        .header("mcp-method", "subscriptions/listen")
        .body(request(7, "subscriptions/listen", &params))
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status().as_u16(), 200);
    let mut text = String::new();
    while !text.contains("notifications/subscriptions/acknowledged") {
        let chunk = tokio::time::timeout(common::PATIENCE, response.chunk())
            .await
            .expect("acknowledged in time")
            .expect("the stream")
            .expect("acknowledged before the stream ended");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let stopped = tokio::task::spawn_blocking(move || proxy.terminate());
    // To its end: the stream ends once the proxy stops.
    while let Ok(Some(chunk)) = tokio::time::timeout(common::PATIENCE, response.chunk())
        .await
        .expect("the stream ends in time")
    {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    stopped.await.unwrap();
    let last = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_default();
    let last: Value = serde_json::from_str(last).unwrap_or(Value::Null);
    assert_eq!(
        last,
        json!({"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete",
            "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}),
        "{text}"
    );
}

/// A modern harness's call reaches a server the proxy speaks to in legacy over HTTP (the rmcp
/// example echo) without the harness's 2026-07-28 envelope, which that server refuses beside
/// its session's `MCP-Protocol-Version` header (`-32020`, before the envelope was taken out).
#[tokio::test]
async fn a_modern_harness_calls_a_legacy_http_server_through_its_endpoint() {
    let echo = common::HttpExampleServer::start("echo", &[]);
    let proxy = Proxy::start(&format!("[servers.echo]\nurl = \"{}\"\n", echo.url));
    let call =
        format!(r#"{{"name":"echo","arguments":{{"text":"across eras"}},"_meta":{ENVELOPE}}}"#);
    let headers = [
        MODERN[0],
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    let url = format!("{}/echo", proxy.mcp_url);
    let (status, answer, _) = post(&url, &headers, &request(1, "tools/call", &call)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("across eras"), "{answer}");
}
