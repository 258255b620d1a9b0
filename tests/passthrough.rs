//! The MCP front as a harness sees it through raw JSON (no MCP framework in between): a
//! per-server endpoint is its server (initialize, unknown methods, its own refusals),
//! servers are initialized as the stdio harness, nothing is answered before servers that
//! are starting are up, and an HTTP harness that is gone stops counting at once.

mod common;

use std::time::Duration;

use common::{server, Proxy, Watcher, PATIENCE};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

/// A harness speaking JSON lines to `serve --stdio`.
struct Lined {
    lines: Lines<BufReader<ChildStdout>>,
    stdin: ChildStdin,
    /// Answers read while waiting for another one.
    early: Vec<Value>,
}

impl Lined {
    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    /// The next message that is the answer to `id` (notifications before it are returned
    /// too, in order).
    async fn until_answer(&mut self, id: i64) -> (Value, Vec<Value>) {
        if let Some(at) = self.early.iter().position(|m| m["id"] == id) {
            return (self.early.remove(at), Vec::new());
        }
        let mut before = Vec::new();
        loop {
            let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to {id} in time; before it: {before:?}"))
                .unwrap()
                .expect("the proxy still talks");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("method").is_none() {
                if message["id"] == id {
                    return (message, before);
                }
                self.early.push(message);
                continue;
            }
            before.push(message);
        }
    }

    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.until_answer(id).await.0
    }
}

fn stdio(config: &str) -> (Proxy, Lined) {
    let (proxy, (stdout, stdin)) = Proxy::start_stdio(config);
    let lined = Lined {
        lines: BufReader::new(stdout).lines(),
        stdin,
        early: Vec::new(),
    };
    (proxy, lined)
}

fn initialize(name: &str, capabilities: Value, version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": capabilities,
           "clientInfo": {"name": name, "version": "7.1"}})
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_are_initialized_as_the_stdio_harness_and_nothing_is_answered_too_early() {
    // Both servers take a while to start; the harness asks for everything at once.
    let config = format!(
        "{}{}",
        server("slow", "features", &["--start-delay-ms", "400"]),
        server("other", "notes", &["--start-delay-ms", "300"]),
    );
    let (_proxy, mut h) = stdio(&config);
    let caps = json!({"elicitation": {"url": {}}, "roots": {}, "x-new": {"b": 1, "a": 2}});
    h.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": initialize("claude-code", caps.clone(), "2025-06-18")}))
        .await;
    h.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    h.send(json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
        "params": {"name": "greet", "arguments": {"name": "Ada"}}}))
        .await;
    h.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read",
        "params": {"uri": "features://items/1"}}),
    )
    .await;
    h.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "completion/complete",
        "params": {"ref": {"type": "ref/prompt", "name": "greet"},
                   "argument": {"name": "name", "value": "b"}}}),
    )
    .await;
    let (init, before) = h.until_answer(1).await;
    assert!(
        before.is_empty(),
        "nothing before the initialize answer: {before:?}"
    );
    // The initialize answer did not wait for the servers (issue 46): it promises every list,
    // announced as the servers come; the requests sent before it are answered once they are.
    for list in ["tools", "prompts", "resources"] {
        assert_eq!(
            init["result"]["capabilities"][list]["listChanged"], true,
            "{init}"
        );
    }
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    let (prompt, _) = h.until_answer(2).await;
    assert!(prompt.get("result").is_some(), "{prompt}");
    let (read, _) = h.until_answer(3).await;
    assert!(read.get("result").is_some(), "{read}");
    let (complete, _) = h.until_answer(4).await;
    assert_eq!(
        complete["result"]["completion"]["values"],
        json!(["bob"]),
        "{complete}"
    );

    // The server saw the harness, not the proxy: its capabilities (plus MCP Apps), its
    // name, its protocol version.
    let whoami = h
        .request(5, "tools/call", json!({"name": "whoami", "arguments": {}}))
        .await;
    let seen: Value =
        serde_json::from_str(whoami["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        seen["clientInfo"]["name"], "claude-code via ahp-proxy",
        "{seen}"
    );
    assert_eq!(seen["clientInfo"]["version"], "7.1");
    assert_eq!(seen["protocolVersion"], "2025-06-18");
    assert_eq!(
        seen["capabilities"]["elicitation"],
        json!({"url": {}}),
        "{seen}"
    );
    assert!(seen["capabilities"].get("sampling").is_none(), "{seen}");
    assert!(
        seen["capabilities"]["extensions"]["io.modelcontextprotocol/ui"].is_object(),
        "{seen}"
    );
}

/// A raw streamable HTTP harness.
struct Raw {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
}

impl Raw {
    fn new(url: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.to_string(),
            session: None,
        }
    }

    async fn post(&mut self, message: Value) -> (u16, Value) {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(message.to_string());
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        if let Some(id) = response.headers().get("mcp-session-id") {
            self.session = Some(id.to_str().unwrap().to_string());
        }
        let event_stream = response.headers().get("content-type").is_some_and(|c| {
            c.to_str()
                .unwrap_or_default()
                .starts_with("text/event-stream")
        });
        let body = response.text().await.unwrap();
        if body.is_empty() {
            return (status, Value::Null);
        }
        if !event_stream {
            return (status, serde_json::from_str(&body).unwrap());
        }
        // The last message event is the answer.
        let last = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .rfind(|d| !d.trim().is_empty())
            .unwrap_or_default();
        (status, serde_json::from_str(last).unwrap())
    }

    async fn initialize(&mut self, capabilities: Value, version: &str) -> Value {
        let (_, answer) = self
            .post(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": initialize("raw", capabilities, version)}))
            .await;
        self.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        answer
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_per_server_endpoint_is_its_server() {
    let config = format!(
        "{}{}",
        server("feat", "features", &[]),
        server("clock", "clock", &[])
    );
    let proxy = Proxy::start(&config);
    let base = proxy.mcp_url.clone();
    // initialize: the server's own result; an older version it knows is answered as asked.
    let mut feat = Raw::new(&format!("{base}/feat"));
    let init = feat.initialize(json!({}), "2025-03-26").await;
    assert_eq!(
        init["result"]["serverInfo"]["name"], "ahp-proxy-example-features",
        "{init}"
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(
        init["result"]["instructions"],
        "Features example: every MCP feature in one server."
    );
    // A method the proxy does not know reaches the server, which answers as it would.
    let (_, unknown) = feat
        .post(json!({"jsonrpc": "2.0", "id": 2, "method": "x-vendor/echo", "params": {"z": 1}}))
        .await;
    assert_eq!(unknown["id"], 2);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    // A server without prompts or logging refuses them itself.
    let mut clock = Raw::new(&format!("{base}/clock"));
    let init = clock.initialize(json!({}), "2025-11-25").await;
    assert!(
        init["result"]["capabilities"].get("prompts").is_none(),
        "{init}"
    );
    assert!(
        init["result"]["capabilities"].get("logging").is_none(),
        "{init}"
    );
    let (_, level) = clock
        .post(
            json!({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel",
            "params": {"level": "debug"}}),
        )
        .await;
    assert!(
        level.get("error").is_some(),
        "the server's own refusal: {level}"
    );

    // The aggregated endpoint is the proxy, with the union of what its servers declare.
    let mut all = Raw::new(&base);
    let init = all.initialize(json!({}), "2025-11-25").await;
    assert_eq!(init["result"]["serverInfo"]["name"], "ahp-proxy");
    let caps = &init["result"]["capabilities"];
    assert!(
        caps["prompts"].is_object() && caps["logging"].is_object(),
        "{init}"
    );
    assert_eq!(caps["tools"]["listChanged"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_harness_that_is_gone_no_longer_answers_for_servers() {
    let proxy = Proxy::start(&server("a", "features", &[]));
    let mut apps = Watcher::open_with_apps(&proxy, "view").await;
    let mut seen = Vec::new();
    apps.until("a", "ready", &mut seen).await;
    let sampling = |w: &Watcher| {
        w.server("a")["mcpApp"]["capabilities"]
            .get("sampling")
            .cloned()
    };
    assert_eq!(sampling(&apps), None);

    // A harness that can sample opens its stream: the View may sample.
    let mut harness = Raw::new(&proxy.mcp_url);
    harness
        .initialize(json!({"sampling": {}}), "2025-11-25")
        .await;
    let stream = harness
        .http
        .get(&harness.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", harness.session.clone().unwrap())
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success());
    tokio::time::timeout(PATIENCE, async {
        while sampling(&apps).is_none() {
            apps.step().await;
        }
    })
    .await
    .expect("sampling offered while a harness can answer");

    // It goes away without DELETE (its stream closes): sampling is withdrawn at once, and a
    // View asking anyway is refused at once instead of waiting.
    drop(stream);
    drop(harness);
    tokio::time::timeout(PATIENCE, async {
        while sampling(&apps).is_some() {
            apps.step().await;
        }
    })
    .await
    .expect("sampling withdrawn when the harness is gone");
    let channel = apps.server("a")["channel"].as_str().unwrap().to_string();
    let started = std::time::Instant::now();
    let refused = apps
        .client
        .request::<Value, Value>(
            "sampling/createMessage",
            json!({"channel": channel, "maxTokens": 5,
                   "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}),
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "refused, not timed out"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_stdio_requests_are_answered_with_their_id_and_logged() {
    let (proxy, mut harness) = stdio(&server("a", "features", &[]));
    harness
        .request(1, "initialize", initialize("raw", json!({}), "2025-11-25"))
        .await;
    harness
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    // A line over 16 MiB: answered -32600 with its id, the next line read as usual.
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{}\"}}}}}}\n",
        "x".repeat(17 << 20)
    );
    harness.stdin.write_all(huge.as_bytes()).await.unwrap();
    let (answer, _) = harness.until_answer(7).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than 16 MiB"),
        "{answer}"
    );
    // Params nested deeper than any reader takes: answered with its id too.
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hi\",\"deep\":{}1{}}}}}}}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    harness.stdin.write_all(deep.as_bytes()).await.unwrap();
    let (answer, _) = harness.until_answer(8).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nests deeper than 128 levels"),
        "{answer}"
    );
    // Not JSON at all: a parse error with a null id.
    harness
        .stdin
        .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": \n")
        .await
        .unwrap();
    let line = tokio::time::timeout(PATIENCE, harness.lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    // And the harness carries on.
    let pong = harness.request(9, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    // The log is read from the proxy's stderr as it comes: wait for the lines, then count.
    proxy.wait_for_log("the harness sent a line longer than 16 MiB");
    proxy.wait_for_log_count("the harness sent a message that cannot be read", 2);
    assert_eq!(
        proxy.log_count("the harness sent a line longer than 16 MiB"),
        1,
        "{}",
        proxy.logs()
    );
}
