//! Byte-for-byte transparency: one script of raw MCP requests against the `transparency`
//! example server (byte-crafted JSON), direct and through every proxy front, compared as
//! transcripts of the raw messages received; and progress-before-response under load.
//!
//! Direct runs are compared with `tests/fixtures/transparency.transcript` (rewrite it with
//! `AHP_TRANSPARENCY_BLESS=1`). The proxied runs must produce the same transcript: only
//! JSON-RPC ids and progress tokens are normalised (`common::raw::normalize`). On the
//! aggregated fronts (`/mcp`, `serve --stdio`) `initialize` is the proxy's own, the renames
//! in `AGGREGATE_RENAMES` are allowed and the front's own list-changed notifications are
//! dropped. With one server behind `/mcp` nothing is renamed, so the aggregated fronts are
//! held to the same bytes. `AHP_TRANSPARENCY_CALLS=1000` sets the number of calls of the
//! progress tests (default 100).

mod common;

use common::raw::{normalize, wait_listening, RawClient};
use common::transcript::{assert_same, check_direct, golden, parse, step, Step};
use common::{examples, server, HttpExampleServer, Proxy, Watcher};

/// The committed transcript of the direct runs.
const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/transparency.transcript"
);

/// What the aggregated fronts may rename, as (direct text, aggregated text) replacements
/// applied to the direct transcript. None so far: with a single server and the default
/// `[mcp] prefix = "on-collision"`, nothing needs a new name.
const AGGREGATE_RENAMES: &[(&str, &str)] = &[];

/// Notifications an aggregated front may send on its own (its lists change as servers come
/// and go); dropped from its transcript before comparing. Nothing else may be added.
const AGGREGATE_OWN: &[&str] = &[
    r#""method":"notifications/tools/list_changed""#,
    r#""method":"notifications/prompts/list_changed""#,
    r#""method":"notifications/resources/list_changed""#,
];

/// The client's answers to the server's requests: fixed raw text with ordered keys, 0.7 and
/// escapes, so the server's verbatim echo of them shows any re-serialization on the way in.
fn answer(method: &str, request: &str) -> String {
    match method {
        "sampling/createMessage" => r#"{"role":"assistant","content":{"type":"text","text":"caf\u00e9 \/ answer"},"model":"test-model","stopReason":"endTurn","x-answer":0.7,"_meta":{"z":1,"a":1e3}}"#.into(),
        "elicitation/create" if request.contains(r#""mode":"url""#) => r#"{"action":"accept","_meta":{"x-url":-0}}"#.into(),
        "elicitation/create" => r#"{"action":"accept","content":{"zeta":"z","alpha":0.7,"mid":true,"choice":"b"},"_meta":{"x-answer":1e3}}"#.into(),
        "roots/list" => r#"{"roots":[{"uri":"file:///tmp/z","name":"z"},{"name":"a","uri":"file:///tmp/a","_meta":{"x-root":0.7}}]}"#.into(),
        other => panic!("unexpected server request {other}: {request}"),
    }
}

/// The script: (step name, method, raw params). `notifications/initialized` follows the first.
const SCRIPT: &[(&str, &str, Option<&str>)] = &[
    (
        "initialize",
        "initialize",
        Some(
            r#"{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},"x-client-capability":{"z":0.7}},"clientInfo":{"name":"transparency-test","version":"1.0.0"}}"#,
        ),
    ),
    (
        "logging/setLevel debug",
        "logging/setLevel",
        Some(r#"{"level":"debug"}"#),
    ),
    ("tools/list", "tools/list", None),
    (
        "tools/call structured",
        "tools/call",
        Some(
            r#"{"name":"structured","arguments":{"zeta":"caf\u00e9","alpha":0.7,"mid":1e3,"x-extra":{"b":1,"a":-0}}}"#,
        ),
    ),
    (
        "tools/call progress",
        "tools/call",
        Some(r#"{"name":"progress","arguments":{},"_meta":{"progressToken":"transparency-1"}}"#),
    ),
    (
        "tools/call log",
        "tools/call",
        Some(r#"{"name":"log","arguments":{}}"#),
    ),
    (
        "logging/setLevel warning",
        "logging/setLevel",
        Some(r#"{"level":"warning"}"#),
    ),
    (
        "tools/call log (filtered)",
        "tools/call",
        Some(r#"{"name":"log","arguments":{}}"#),
    ),
    (
        "tools/call sample",
        "tools/call",
        Some(r#"{"name":"sample","arguments":{}}"#),
    ),
    (
        "tools/call elicit_form",
        "tools/call",
        Some(r#"{"name":"elicit_form","arguments":{}}"#),
    ),
    (
        "tools/call elicit_url",
        "tools/call",
        Some(r#"{"name":"elicit_url","arguments":{}}"#),
    ),
    (
        "tools/call roots",
        "tools/call",
        Some(r#"{"name":"roots","arguments":{}}"#),
    ),
    (
        "tools/call fail",
        "tools/call",
        Some(r#"{"name":"fail","arguments":{}}"#),
    ),
    (
        "tools/call unknown",
        "tools/call",
        Some(r#"{"name":"no_such_tool","arguments":{}}"#),
    ),
    (
        "tools/call structured as task 1",
        "tools/call",
        Some(r#"{"name":"structured","arguments":{"zeta":"task"},"task":{"ttl":60000}}"#),
    ),
    ("tasks/get 1", "tasks/get", Some(r#"{"taskId":"task-1"}"#)),
    ("tasks/list", "tasks/list", None),
    (
        "tasks/result 1",
        "tasks/result",
        Some(r#"{"taskId":"task-1"}"#),
    ),
    (
        "tools/call structured as task 2",
        "tools/call",
        Some(r#"{"name":"structured","arguments":{"zeta":"cancel me"},"task":{"ttl":1e3}}"#),
    ),
    (
        "tasks/cancel 2",
        "tasks/cancel",
        Some(r#"{"taskId":"task-2"}"#),
    ),
    ("tasks/get 2", "tasks/get", Some(r#"{"taskId":"task-2"}"#)),
    (
        "tasks/result 2",
        "tasks/result",
        Some(r#"{"taskId":"task-2"}"#),
    ),
    ("tasks/list again", "tasks/list", Some(r#"{}"#)),
    ("prompts/list", "prompts/list", None),
    (
        "prompts/get greet",
        "prompts/get",
        Some(r#"{"name":"greet","arguments":{"who":"Ada \u00e9"}}"#),
    ),
    ("resources/list", "resources/list", None),
    ("resources/templates/list", "resources/templates/list", None),
    (
        "resources/read one",
        "resources/read",
        Some(r#"{"uri":"transparency://static/one"}"#),
    ),
    (
        "resources/read blob",
        "resources/read",
        Some(r#"{"uri":"transparency://static/blob"}"#),
    ),
    (
        "resources/read item",
        "resources/read",
        Some(r#"{"uri":"transparency://items/42"}"#),
    ),
    (
        "resources/read missing",
        "resources/read",
        Some(r#"{"uri":"transparency://missing"}"#),
    ),
    (
        "resources/subscribe",
        "resources/subscribe",
        Some(r#"{"uri":"transparency://static/one"}"#),
    ),
    (
        "resources/unsubscribe",
        "resources/unsubscribe",
        Some(r#"{"uri":"transparency://static/one"}"#),
    ),
    (
        "completion/complete",
        "completion/complete",
        Some(
            r#"{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"A"}}"#,
        ),
    ),
    (
        "x-vendor/echo",
        "x-vendor/echo",
        Some(r#"{"zeta":[1e3,0.7,-0],"alpha":"caf\u00e9","_meta":{"b":1}}"#),
    ),
    ("ping", "ping", None),
];

async fn run_script(client: &mut RawClient) -> Vec<Step> {
    let mut steps = Vec::new();
    for (i, (name, method, params)) in SCRIPT.iter().enumerate() {
        let exchange = client.request(method, *params, &mut answer).await;
        steps.push(step(name, &exchange));
        if i == 0 {
            client.notify("notifications/initialized", None).await;
        }
    }
    steps
}

#[tokio::test]
async fn direct_stdio_matches_the_golden_transcript() {
    let mut client = RawClient::spawn(examples(), &["transparency"]);
    let steps = run_script(&mut client).await;
    check_direct(GOLDEN, &steps, "direct stdio");
}

#[tokio::test]
async fn direct_http_matches_the_golden_transcript() {
    let server = HttpExampleServer::start("transparency", &[]);
    wait_listening(&server.url).await;
    let mut client = RawClient::http(&server.url);
    let steps = run_script(&mut client).await;
    check_direct(GOLDEN, &steps, "direct HTTP");
}

/// The golden transcript really holds the crafted bytes (a guard against blessing a
/// transcript that lost them): spot checks of what a re-serializing proxy would change.
#[test]
fn the_golden_transcript_keeps_the_crafted_bytes() {
    let text = std::fs::read_to_string(GOLDEN).expect("golden transcript");
    for needle in [
        r#""x-initialize-extra":12345678901234567890"#,
        r#""title":"Transparency \u00e9prouvette""#,
        r#""execution":{"taskSupport":"optional"}"#,
        r#""x-tools-extra":[1e3,0.7,-0,12345678901234567890]"#,
        r#""temperature":0.7"#,
        r#""x-result-extra":1.50"#,
        r#""blob":"AAEC\/w==""#,
        r#"{"result":{"zeta":[1e3,0.7,-0],"alpha":"caf\u00e9","_meta":{"b":1}},"id":"<id>","jsonrpc":"2.0"}"#,
        // The client's answers come back verbatim inside the tool results.
        r#""answer":{"role":"assistant","content":{"type":"text","text":"caf\u00e9 \/ answer"},"model":"test-model","stopReason":"endTurn","x-answer":0.7,"_meta":{"z":1,"a":1e3}}"#,
        r#""arguments":{"zeta":"caf\u00e9","alpha":0.7,"mid":1e3,"x-extra":{"b":1,"a":-0}}"#,
        r#""progressToken":"<progress-token>","progress":50,"total":100"#,
        r#""method":"notifications/tasks/status""#,
        r#""method":"notifications/x-vendor/echoed""#,
        r#""method":"notifications/elicitation/complete""#,
        r#""method":"notifications/resources/updated""#,
    ] {
        assert!(
            text.contains(needle),
            "the golden transcript lacks {needle}"
        );
    }
    let steps = parse(&text);
    assert_eq!(steps.len(), SCRIPT.len());
    let progress = steps
        .iter()
        .find(|s| s.name == "tools/call progress")
        .unwrap();
    assert_eq!(
        progress.lines.len(),
        4,
        "three progress notifications, then the response"
    );
    let filtered = (steps.iter())
        .find(|s| s.name == "tools/call log (filtered)")
        .unwrap();
    assert_eq!(
        filtered.lines.len(),
        3,
        "warning and error pass, info does not"
    );
}

/// The normalisation touches the top-level id and a progress token only, whatever the key
/// order, and leaves look-alikes inside strings and nested objects alone.
#[test]
fn normalisation_renames_only_ids_and_progress_tokens() {
    let response = r#"{"result":{"id":7,"text":"\"id\":8"},"id" : 12,"jsonrpc":"2.0"}"#;
    assert_eq!(
        normalize(response),
        r#"{"result":{"id":7,"text":"\"id\":8"},"id" : "<id>","jsonrpc":"2.0"}"#
    );
    let progress = r#"{"jsonrpc":"2.0","params":{"progressToken":{"a":"}"},"progress":1e3},"method":"notifications/progress"}"#;
    assert_eq!(
        normalize(progress),
        r#"{"jsonrpc":"2.0","params":{"progressToken":"<progress-token>","progress":1e3},"method":"notifications/progress"}"#
    );
    let other =
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"progressToken":1}}"#;
    assert_eq!(normalize(other), other);
    let request = r#"{"jsonrpc":"2.0","id":"s-1","method":"roots/list"}"#;
    assert_eq!(
        normalize(request),
        r#"{"jsonrpc":"2.0","id":"<id>","method":"roots/list"}"#
    );
}

// ---- Through the proxy -------------------------------------------------------------------

/// How the proxy reaches the transparency server.
#[derive(Debug, Clone, Copy)]
enum Upstream {
    Stdio,
    Http,
}

/// Which front the script talks to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Front {
    /// `/mcp/<server>` over HTTP: the server's own endpoint.
    Server,
    /// `/mcp` over HTTP: the aggregate.
    Aggregate,
    /// `ahp-proxy serve --stdio`: the aggregate on stdio.
    Stdio,
}

/// The proxy with the transparency server `t` ready, a raw client on `front`, and what must
/// stay alive meanwhile.
struct Proxied {
    client: RawClient,
    _proxy: Proxy,
    _server: Option<HttpExampleServer>,
}

async fn proxied(front: Front, upstream: Upstream) -> Proxied {
    let (entry, http_server) = match upstream {
        Upstream::Stdio => (server("t", "transparency", &[]), None),
        Upstream::Http => {
            let http = HttpExampleServer::start("transparency", &[]);
            wait_listening(&http.url).await;
            (format!("[servers.t]\nurl = \"{}\"\n", http.url), Some(http))
        }
    };
    let config = format!("[supervisor]\nrestart_delay_ms = 50\n{entry}");
    let (proxy, client) = match front {
        Front::Stdio => {
            let (proxy, (stdout, stdin)) = Proxy::start_stdio(&config);
            (proxy, RawClient::stdio(stdout, stdin))
        }
        Front::Server | Front::Aggregate => {
            let proxy = Proxy::start(&config);
            let url = match front {
                Front::Server => format!("{}/t", proxy.mcp_url),
                _ => proxy.mcp_url.clone(),
            };
            (proxy, RawClient::http(&url))
        }
    };
    // Over stdio the server starts once the harness said who it is (its initialize waits
    // for it); over HTTP the script starts once the server is up.
    if front != Front::Stdio {
        let mut watcher = Watcher::open(&proxy).await;
        watcher.until("t", "ready", &mut Vec::new()).await;
    }
    Proxied {
        client,
        _proxy: proxy,
        _server: http_server,
    }
}

async fn transcript_through(front: Front, upstream: Upstream) {
    let mut proxied = proxied(front, upstream).await;
    let mut steps = run_script(&mut proxied.client).await;
    let what = format!("{front:?} front, {upstream:?} upstream");
    let mut expected = golden(GOLDEN);
    if front != Front::Server {
        for step in &mut steps {
            (step.lines).retain(|line| !AGGREGATE_OWN.iter().any(|own| line.contains(own)));
        }
        // The aggregate's `initialize` is the proxy's own: compare the rest.
        expected[0].lines.clone_from(&steps[0].lines);
        for step in &mut expected {
            for line in &mut step.lines {
                for (from, to) in AGGREGATE_RENAMES {
                    *line = line.replace(from, to);
                }
            }
        }
    }
    assert_same(&expected, &steps, &what);
}

#[tokio::test]
async fn server_endpoint_stdio_upstream_is_byte_transparent() {
    transcript_through(Front::Server, Upstream::Stdio).await;
}

#[tokio::test]
async fn server_endpoint_http_upstream_is_byte_transparent() {
    transcript_through(Front::Server, Upstream::Http).await;
}

#[tokio::test]
async fn aggregate_stdio_upstream_is_byte_transparent() {
    transcript_through(Front::Aggregate, Upstream::Stdio).await;
}

#[tokio::test]
async fn aggregate_http_upstream_is_byte_transparent() {
    transcript_through(Front::Aggregate, Upstream::Http).await;
}

#[tokio::test]
async fn stdio_front_stdio_upstream_is_byte_transparent() {
    transcript_through(Front::Stdio, Upstream::Stdio).await;
}

#[tokio::test]
async fn stdio_front_http_upstream_is_byte_transparent() {
    transcript_through(Front::Stdio, Upstream::Http).await;
}

// ---- Progress before the response --------------------------------------------------------

fn calls() -> usize {
    std::env::var("AHP_TRANSPARENCY_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
}

/// `calls()` calls of `progress`, one after the other, each with its own token: every call
/// must see its progress 0, 50 and 100 (with its token), in order, before its response; a
/// notification in a later call's exchange came after its response.
async fn progress_in_order(client: &mut RawClient, what: &str) {
    let n = calls();
    let (mut lost, mut late, mut misordered) = (0usize, Vec::new(), Vec::new());
    for i in 0..n {
        let token = format!("\"p-{i}\"");
        let params = format!(
            r#"{{"name":"progress","arguments":{{}},"_meta":{{"progressToken":{token}}}}}"#
        );
        let exchange = client
            .request("tools/call", Some(&params), &mut |m, r| {
                panic!("unexpected server request {m}: {r}")
            })
            .await;
        let mut steps = Vec::new();
        for text in exchange.received() {
            let message: serde_json::Value = serde_json::from_str(text).unwrap();
            if message["method"] != "notifications/progress" {
                continue;
            }
            let theirs = message["params"]["progressToken"].to_string();
            if theirs == token {
                // Order and loss only: how the numbers are written is the transcripts' job.
                steps.push(message["params"]["progress"].as_f64().unwrap_or(-1.0));
            } else {
                late.push(format!("call {i} saw {text}"));
            }
        }
        lost += 3usize.saturating_sub(steps.len());
        if steps != [0.0, 50.0, 100.0] {
            misordered.push(format!("call {i}: progress {steps:?}"));
        }
    }
    assert!(
        lost == 0 && late.is_empty() && misordered.is_empty(),
        "{what}: {n} calls; {lost} progress notifications missing before their response, \
         {} seen after it (in a later call), {} calls without exactly 0, 50, 100:\n{}\n{}",
        late.len(),
        misordered.len(),
        late.join("\n"),
        misordered.join("\n")
    );
}

async fn initialized(client: &mut RawClient) {
    let (_, method, params) = SCRIPT[0];
    client.request(method, params, &mut answer).await;
    client.notify("notifications/initialized", None).await;
}

#[tokio::test]
async fn direct_stdio_progress_comes_before_the_response() {
    let mut client = RawClient::spawn(examples(), &["transparency"]);
    initialized(&mut client).await;
    progress_in_order(&mut client, "direct stdio").await;
}

#[tokio::test]
async fn direct_http_progress_comes_before_the_response() {
    let server = HttpExampleServer::start("transparency", &[]);
    wait_listening(&server.url).await;
    let mut client = RawClient::http(&server.url);
    initialized(&mut client).await;
    progress_in_order(&mut client, "direct HTTP").await;
}

async fn progress_through(front: Front, upstream: Upstream) {
    let mut proxied = proxied(front, upstream).await;
    initialized(&mut proxied.client).await;
    let what = format!("{front:?} front, {upstream:?} upstream");
    progress_in_order(&mut proxied.client, &what).await;
}

#[tokio::test]
async fn server_endpoint_stdio_upstream_keeps_progress_before_the_response() {
    progress_through(Front::Server, Upstream::Stdio).await;
}

#[tokio::test]
async fn server_endpoint_http_upstream_keeps_progress_before_the_response() {
    progress_through(Front::Server, Upstream::Http).await;
}

#[tokio::test]
async fn aggregate_stdio_upstream_keeps_progress_before_the_response() {
    progress_through(Front::Aggregate, Upstream::Stdio).await;
}

#[tokio::test]
async fn aggregate_http_upstream_keeps_progress_before_the_response() {
    progress_through(Front::Aggregate, Upstream::Http).await;
}

#[tokio::test]
async fn stdio_front_stdio_upstream_keeps_progress_before_the_response() {
    progress_through(Front::Stdio, Upstream::Stdio).await;
}

#[tokio::test]
async fn stdio_front_http_upstream_keeps_progress_before_the_response() {
    progress_through(Front::Stdio, Upstream::Http).await;
}
