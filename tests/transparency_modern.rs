//! Byte-for-byte transparency of MCP 2026-07-28 traffic: one script of stateless modern
//! requests (each with its own `_meta`) against the `transparency-modern` example server,
//! direct and through `/mcp/<server>`, `/mcp` and `--stdio` (one server behind them; stdio
//! and HTTP upstream), compared as transcripts.
//!
//! Direct runs are compared with `tests/fixtures/transparency-modern.transcript` (rewrite it
//! with `AHP_TRANSPARENCY_BLESS=1`). A proxied run must give the same transcript once ids are
//! normalised and the changes docs/mcp-front.md documents are applied: `PROXY_CHANGES` on
//! every front; on the aggregating ones also their own discover, `PROXY_INFO`,
//! `AGGREGATE_CHANGES` and `UNKNOWN_TASK`.

mod common;

use common::raw::{wait_listening, RawClient, Seen};
use common::transcript::{assert_same, check_direct, golden, parse, step, Step};
use common::{examples, server, HttpExampleServer, Proxy, Watcher};
use serde_json::Value;

/// The committed transcript of the direct runs.
const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/transparency-modern.transcript"
);

/// The harness's envelope, byte-crafted like the server's answers: out-of-order keys, `1e3`,
/// `-0`, escapes, unknown members, in the envelope's objects and beside them.
const ENVELOPE: &str = r#""io.modelcontextprotocol/clientInfo":{"version":"1.0.0","name":"modern-harness","x-info":1e3,"title":"Modern caf\u00e9 \/ h"},"x-request-meta":{"z":1,"a":-0},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"x-capability":{"z":0.7,"a":1e3},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#;

/// What the proxy changes on `/mcp/<server>`, as documented in docs/mcp-front.md ("Byte
/// transparency of modern traffic"): (direct text, proxied text). The `clientInfo` a request
/// carries names the harness "via ahp-proxy" (name and title), nothing else in it changes.
const PROXY_CHANGES: &[(&str, &str)] = &[
    (
        r#""name":"modern-harness""#,
        r#""name":"modern-harness via ahp-proxy""#,
    ),
    (
        r#""title":"Modern caf\u00e9 \/ h""#,
        r#""title":"Modern caf\u00e9 \/ h via ahp-proxy""#,
    ),
];

/// The script: (step name, method, raw params without `_meta`'s envelope, where `$META` is
/// replaced by the envelope members).
const SCRIPT: &[(&str, &str, &str)] = &[
    ("server/discover", "server/discover", r#"{"_meta":{$META}}"#),
    ("tools/list", "tools/list", r#"{"_meta":{$META}}"#),
    (
        "tools/call echo_meta",
        "tools/call",
        r#"{"name":"echo_meta","arguments":{"zeta":"caf\u00e9","alpha":0.7,"x-extra":{"b":1,"a":-0}},"_meta":{$META}}"#,
    ),
    (
        "tools/call progress",
        "tools/call",
        r#"{"_meta":{"progressToken":"modern-1",$META},"name":"progress","arguments":{}}"#,
    ),
    (
        "tools/call fail",
        "tools/call",
        r#"{"name":"fail","arguments":{},"_meta":{$META}}"#,
    ),
    (
        "tools/call unknown",
        "tools/call",
        r#"{"name":"no_such_tool","arguments":{},"_meta":{$META}}"#,
    ),
    ("prompts/list", "prompts/list", r#"{"_meta":{$META}}"#),
    (
        "prompts/get greet",
        "prompts/get",
        r#"{"name":"greet","arguments":{"who":"Ada \u00e9"},"_meta":{$META}}"#,
    ),
    ("resources/list", "resources/list", r#"{"_meta":{$META}}"#),
    (
        "resources/read one",
        "resources/read",
        r#"{"uri":"modern://static/one","_meta":{$META}}"#,
    ),
    (
        "resources/read missing",
        "resources/read",
        r#"{"uri":"modern://missing","_meta":{$META}}"#,
    ),
    (
        "tools/call slow as task 1",
        "tools/call",
        r#"{"name":"slow","arguments":{"zeta":"caf\u00e9 1e3"},"_meta":{$META}}"#,
    ),
    (
        "tasks/get 1 working",
        "tasks/get",
        r#"{"taskId":"task-1","_meta":{$META}}"#,
    ),
    (
        "tasks/get 1 completed",
        "tasks/get",
        r#"{"_meta":{$META},"taskId":"task-1"}"#,
    ),
    (
        "tools/call slow as task 2",
        "tools/call",
        r#"{"name":"slow","arguments":{},"_meta":{$META}}"#,
    ),
    (
        "tasks/update 2",
        "tasks/update",
        r#"{"taskId":"task-2","inputResponses":{"k":{"action":"decline"}},"_meta":{$META}}"#,
    ),
    (
        "tasks/cancel 2",
        "tasks/cancel",
        r#"{"taskId":"task-2","_meta":{$META}}"#,
    ),
    (
        "tasks/get 2 cancelled",
        "tasks/get",
        r#"{"taskId":"task-2","_meta":{$META}}"#,
    ),
    (
        "tasks/get unknown",
        "tasks/get",
        r#"{"taskId":"no-such-task","_meta":{$META}}"#,
    ),
    (
        "x-vendor/echo",
        "x-vendor/echo",
        r#"{"zeta":[1e3,0.7,-0],"alpha":"caf\u00e9","_meta":{$META,"b":1}}"#,
    ),
];

/// Runs the script. A task is named in it by the server's id (`task-1`, `task-2`: the
/// order it was made in); through the proxy a task is handed out under a handle it mints,
/// which the script then names it by, and which reads as the server's id in the steps.
async fn run_script(client: &mut RawClient) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut handles: Vec<(String, String)> = Vec::new();
    for (name, method, params) in SCRIPT {
        let mut params = params.replace("$META", ENVELOPE);
        for (raw, handle) in &handles {
            params = params.replace(&format!("\"{raw}\""), &format!("\"{handle}\""));
        }
        let mut exchange = client
            .request(method, Some(&params), &mut |m, r| {
                panic!("unexpected server request {m}: {r}")
            })
            .await;
        let created: Value = serde_json::from_str(exchange.response()).unwrap_or_default();
        if created["result"]["resultType"] == "task" {
            let given = created["result"]["taskId"].as_str().unwrap_or_default();
            handles.push((format!("task-{}", handles.len() + 1), given.to_string()));
        }
        for seen in &mut exchange.messages {
            let (Seen::Received(text) | Seen::Sent(text)) = seen;
            for (raw, handle) in &handles {
                *text = text.replace(&format!("\"{handle}\""), &format!("\"{raw}\""));
            }
        }
        steps.push(step(name, &exchange));
    }
    steps
}

#[tokio::test]
async fn direct_stdio_matches_the_golden_transcript() {
    let mut client = RawClient::spawn(examples(), &["transparency-modern"]);
    let steps = run_script(&mut client).await;
    check_direct(GOLDEN, &steps, "direct stdio");
}

#[tokio::test]
async fn direct_http_matches_the_golden_transcript() {
    let server = HttpExampleServer::start("transparency-modern", &[]);
    wait_listening(&server.url).await;
    let mut client = RawClient::http_modern(&server.url);
    let steps = run_script(&mut client).await;
    check_direct(GOLDEN, &steps, "direct HTTP");
}

/// The golden transcript holds the crafted bytes (a guard against blessing one that lost
/// them), and the envelope comes back verbatim inside the echoes.
#[test]
fn the_golden_transcript_keeps_the_crafted_bytes() {
    let text = std::fs::read_to_string(GOLDEN).expect("golden transcript");
    for needle in [
        r#""x-discover-extra":12345678901234567890"#,
        r#""extensions":{"x-vendor\/ext":{"z":1e3,"a":0.7},"io.modelcontextprotocol/tasks":{}}"#,
        r#""resultType":"task","taskId":"task-1","status":"working""#,
        r#""status":"completed","statusMessage":"done""#,
        r#""status":"cancelled""#,
        r#""message":"Failed to retrieve task: Task not found""#,
        r#""x-tools-extra":[1e3,0.7,-0,12345678901234567890]"#,
        r#""resultType":"complete","ttlMs":1e3,"cacheScope":"private""#,
        r#""x-result-extra":1.50"#,
        r#""progressToken":"<progress-token>","progress":50,"total":100"#,
        r#""code":-32602,"message":"Resource not found""#,
        r#""message":"Failed on purpose: caf\u00e9""#,
        r#""arguments":{"zeta":"caf\u00e9","alpha":0.7,"x-extra":{"b":1,"a":-0}}"#,
        ENVELOPE,
    ] {
        assert!(
            text.contains(needle),
            "the golden transcript lacks {needle}"
        );
    }
    assert_eq!(parse(&text).len(), SCRIPT.len());
}

/// How the proxy reaches the server.
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
    /// `/mcp` over HTTP, one server behind it (nothing renamed).
    Aggregate,
    /// `ahp-proxy serve --stdio`: the aggregate on stdio.
    Stdio,
}

/// What an aggregating front completes in a result, as (direct text, aggregated text): the
/// one result the server wrote without `resultType` gets `"complete"` (its `serverInfo` is
/// taken out of every result before comparing, `PROXY_INFO`).
const AGGREGATE_CHANGES: &[(&str, &str)] = &[(
    r#"{"result":{"zeta""#,
    r#"{"result":{"resultType":"complete","zeta""#,
)];

/// What an aggregating front answers itself for a task id no server gave through it: the
/// proxy's refusal (a legacy harness's tasks are its own, so it asks no server), where the
/// server's own endpoint passes the server's.
const UNKNOWN_TASK: (&str, &str) = (
    "tasks/get unknown",
    r#"<- {"jsonrpc":"2.0","id":"<id>","error":{"code":-32602,"message":"unknown task \"no-such-task\""}}"#,
);

/// The proxy's own identity, as the aggregate names it in `_meta` where a result names none.
const PROXY_INFO: &str = concat!(
    r#""io.modelcontextprotocol/serverInfo":{"name":"ahp-proxy","title":"ahp-proxy","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

async fn transcript_through(front: Front, upstream: Upstream) {
    let (entry, _http) = match upstream {
        Upstream::Stdio => (server("t", "transparency-modern", &[]), None),
        Upstream::Http => {
            let http = HttpExampleServer::start("transparency-modern", &[]);
            wait_listening(&http.url).await;
            (format!("[servers.t]\nurl = \"{}\"\n", http.url), Some(http))
        }
    };
    let config = format!("[supervisor]\nrestart_delay_ms = 50\n{entry}");
    // Over stdio the servers start once the harness said who it is (its first request waits
    // for them); over HTTP the script starts once the server is up.
    let (_proxy, mut client) = match front {
        Front::Stdio => {
            let (proxy, (stdout, stdin)) = Proxy::start_stdio(&config);
            (proxy, RawClient::stdio(stdout, stdin))
        }
        Front::Server | Front::Aggregate => {
            let proxy = Proxy::start(&config);
            let mut watcher = Watcher::open(&proxy).await;
            watcher.until("t", "ready", &mut Vec::new()).await;
            let url = match front {
                Front::Server => format!("{}/t", proxy.mcp_url),
                _ => proxy.mcp_url.clone(),
            };
            (proxy, RawClient::http_modern(&url))
        }
    };
    let mut steps = run_script(&mut client).await;
    let mut expected = golden(GOLDEN);
    for step in &mut expected {
        for line in &mut step.lines {
            for (from, to) in PROXY_CHANGES {
                *line = line.replace(from, to);
            }
        }
    }
    if front != Front::Server {
        // The aggregate's discover is the proxy's own; its `serverInfo` is named where a
        // result names none: taken out before comparing.
        for step in &mut steps {
            for line in &mut step.lines {
                *line = line
                    .replace(&format!(r#""_meta":{{{PROXY_INFO}}},"#), "")
                    .replace(&format!(r#",{PROXY_INFO}"#), "")
                    .replace(&format!(r#"{PROXY_INFO},"#), "");
            }
        }
        expected[0].lines.clone_from(&steps[0].lines);
        for line in expected.iter_mut().flat_map(|step| step.lines.iter_mut()) {
            for (from, to) in AGGREGATE_CHANGES {
                *line = line.replace(from, to);
            }
        }
        let (name, answer) = UNKNOWN_TASK;
        for step in expected.iter_mut().filter(|step| step.name == name) {
            step.lines = vec![answer.to_string()];
        }
    }
    let what = format!("{front:?} front, {upstream:?} upstream");
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
