//! The MCP front end to end: the real binary supervises real child servers, an rmcp client
//! plays the harness over stdio and streamable HTTP, and the official AHP client watches
//! the mirrored tool calls and toggles servers.

#![allow(deprecated)] // logging, sampling and roots are deprecated by SEP-2577 but served

mod common;

use std::time::Duration;

use ahp_types::state::{ChatState, ResponsePart, SnapshotState, ToolCallState};
use common::http_session::RawSession;
use common::{server, HttpExampleServer, Proxy, Watcher, PATIENCE};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, Request,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Four servers: two copies of the features example (every name collides), notes, and the
/// MCP App example (one app-only tool).
fn config(extra: &str) -> String {
    format!(
        "[supervisor]\nrestart_delay_ms = 50\nrestart_delay_max_ms = 200\nstop_grace_ms = 500\n{}{}{}{}{extra}",
        server("a", "features", &[]),
        server("b", "features", &[]),
        server("notes", "notes", &[]),
        server("app", "app", &[]),
    )
}

/// What the harness heard from the front besides answers.
#[derive(Debug, Clone, PartialEq)]
enum Heard {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
    Updated(ResourceUpdatedNotificationParam),
}

/// The test harness: an rmcp client that samples, lists roots and elicits as `tag`.
#[derive(Clone)]
struct Harness {
    tag: String,
    able: bool,
    apps: bool,
    heard: mpsc::UnboundedSender<Heard>,
}

type Session = RunningService<RoleClient, Harness>;

impl ClientHandler for Harness {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = json!({});
        if self.able {
            capabilities =
                json!({"sampling": {}, "roots": {"listChanged": true}, "elicitation": {}});
        }
        if self.apps {
            capabilities["extensions"] = json!({"io.modelcontextprotocol/ui":
                {"mimeTypes": ["text/html;profile=mcp-app"]}});
        }
        let mut info = ClientConfig::default();
        info.capabilities = serde_json::from_value(capabilities).unwrap();
        info.client_info = rmcp::model::Implementation::new(format!("harness-{}", self.tag), "1");
        info.protocol_version = rmcp::model::ProtocolVersion::V_2025_11_25;
        info
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = serde_json::to_value(&params.messages).unwrap();
        let prompt = asked[0]["content"]["text"]
            .as_str()
            .or_else(|| asked[0]["content"][0]["text"].as_str())
            .unwrap_or("?")
            .to_string();
        Ok(serde_json::from_value(json!({
            "role": "assistant", "model": "test-model",
            "content": {"type": "text", "text": format!("{}: {prompt}", self.tag)}
        }))
        .unwrap())
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(
            serde_json::from_value(json!({"roots": [{"uri": format!("file:///{}", self.tag)}]}))
                .unwrap(),
        )
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(
            serde_json::from_value(json!({"action": "accept", "content": {"answer": self.tag}}))
                .unwrap(),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.heard.send(Heard::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.heard.send(Heard::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.heard.send(Heard::ResourcesChanged);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send(Heard::Progress(params));
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send(Heard::Log(params));
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send(Heard::Updated(params));
    }
}

fn harness(tag: &str, able: bool, apps: bool) -> (Harness, mpsc::UnboundedReceiver<Heard>) {
    let (heard, rx) = mpsc::unbounded_channel();
    (
        Harness {
            tag: tag.into(),
            able,
            apps,
            heard,
        },
        rx,
    )
}

/// A harness session over streamable HTTP at `url`.
async fn connect_http(
    url: &str,
    tag: &str,
    able: bool,
    apps: bool,
) -> (Session, mpsc::UnboundedReceiver<Heard>) {
    let (handler, heard) = harness(tag, able, apps);
    serve_http(url, handler, heard).await
}

async fn serve_http(
    url: &str,
    handler: Harness,
    heard: mpsc::UnboundedReceiver<Heard>,
) -> (Session, mpsc::UnboundedReceiver<Heard>) {
    let session = tokio::time::timeout(
        PATIENCE,
        handler.serve(StreamableHttpClientTransport::from_uri(url.to_string())),
    )
    .await
    .expect("handshake in time")
    .expect("MCP handshake over HTTP");
    session
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    (session, heard)
}

/// The proxy as a harness launches it, and a harness session on its stdio.
async fn connect_stdio(
    config: &str,
    tag: &str,
) -> (Proxy, Session, mpsc::UnboundedReceiver<Heard>) {
    let (proxy, pipes) = Proxy::start_stdio(config);
    let (handler, heard) = harness(tag, true, false);
    let session = tokio::time::timeout(PATIENCE, handler.serve(pipes))
        .await
        .expect("handshake in time")
        .expect("MCP handshake over stdio");
    session
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    (proxy, session, heard)
}

async fn call(
    peer: &Peer<RoleClient>,
    name: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": name, "arguments": args})).unwrap();
    tokio::time::timeout(PATIENCE, peer.call_tool(params))
        .await
        .expect("an answer within the patience window")
}

/// The text of a successful call.
async fn text(peer: &Peer<RoleClient>, name: &str, args: Value) -> String {
    let result = call(peer, name, args)
        .await
        .unwrap_or_else(|e| panic!("{name} failed: {e}"));
    assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
    first_text(&result)
}

fn first_text(result: &CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap();
    value["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn mcp_error(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(e) => e,
        other => panic!("expected an MCP error, got {other}"),
    }
}

async fn tool_names(peer: &Peer<RoleClient>) -> Vec<String> {
    let tools = tokio::time::timeout(PATIENCE, peer.list_all_tools())
        .await
        .expect("tools/list in time")
        .expect("tools/list");
    tools.iter().map(|t| t.name.to_string()).collect()
}

/// Wait until the harness hears something matching `want`.
async fn hear(heard: &mut mpsc::UnboundedReceiver<Heard>, want: impl Fn(&Heard) -> bool) -> Heard {
    loop {
        let next = tokio::time::timeout(PATIENCE, heard.recv())
            .await
            .expect("a notification within the patience window")
            .expect("harness still listening");
        if want(&next) {
            return next;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_front_aggregates_every_server_and_renames_only_collisions() {
    let (_proxy, session, _heard) = connect_stdio(&config(""), "stdio").await;
    let peer = session.peer();
    // The first listing waits for the four servers: nothing is missing.
    let names = tool_names(peer).await;
    for expected in [
        "a__echo",
        "b__echo",
        "a__slow",
        "b__show_view",
        "add_note",
        "show_dashboard",
    ] {
        assert!(
            names.contains(&expected.to_string()),
            "{expected} missing from {names:?}"
        );
    }
    assert!(!names.contains(&"echo".to_string()), "{names:?}");
    assert!(
        !names.contains(&"refresh_dashboard".to_string()),
        "app-only tool offered: {names:?}"
    );
    assert_eq!(text(peer, "a__echo", json!({"text": "hi"})).await, "hi");
    assert_eq!(
        text(peer, "add_note", json!({"title": "t", "text": "x"})).await,
        "saved \"t\""
    );
    let sum = call(peer, "b__add", json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})));
    let unknown = mcp_error(call(peer, "nope", json!({})).await.unwrap_err());
    assert_eq!(unknown.code.0, -32602);
    let app_only = mcp_error(
        call(peer, "refresh_dashboard", json!({}))
            .await
            .unwrap_err(),
    );
    assert!(app_only.message.contains("MCP App"), "{app_only:?}");

    // MCP Apps: each copy of the colliding view is renamed consistently.
    let tools = peer.list_all_tools().await.unwrap();
    let view = tools.iter().find(|t| t.name == "a__show_view").unwrap();
    let meta = serde_json::to_value(&view.meta).unwrap();
    assert_eq!(meta["ui"]["resourceUri"], "ui://a__features/view.html");
    assert_eq!(meta["ui/resourceUri"], "ui://a__features/view.html");
    let read = peer
        .read_resource(
            serde_json::from_value(json!({"uri": "ui://a__features/view.html"})).unwrap(),
        )
        .await
        .unwrap();
    let read = serde_json::to_value(read).unwrap();
    assert_eq!(read["contents"][0]["uri"], "ui://a__features/view.html");
    assert_eq!(read["contents"][0]["mimeType"], "text/html;profile=mcp-app");
    assert_eq!(read["contents"][0]["_meta"]["ui"]["prefersBorder"], true);
    // A unique view keeps its URI.
    let dashboard = peer
        .read_resource(
            serde_json::from_value(json!({"uri": "ui://release-dashboard/view.html"})).unwrap(),
        )
        .await
        .unwrap();
    assert!(serde_json::to_string(&dashboard)
        .unwrap()
        .contains("Release dashboard"));

    // Resources and templates, listed (every upstream page) and read through renamed URIs.
    let resources = peer.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    for expected in [
        "features://a__static/hello.txt",
        "features://b__static/data.bin",
        "ui://release-dashboard/view.html",
    ] {
        assert!(uris.contains(&expected), "{expected} missing from {uris:?}");
    }
    let hello = peer
        .read_resource(
            serde_json::from_value(json!({"uri": "features://b__static/hello.txt"})).unwrap(),
        )
        .await
        .unwrap();
    let hello = serde_json::to_value(hello).unwrap();
    assert_eq!(hello["contents"][0]["text"], "hello from features");
    assert_eq!(
        hello["contents"][0]["uri"],
        "features://b__static/hello.txt"
    );
    let templates = peer.list_all_resource_templates().await.unwrap();
    let templates: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert!(
        templates.contains(&"features://a__items/{id}"),
        "{templates:?}"
    );
    let item = peer
        .read_resource(serde_json::from_value(json!({"uri": "features://a__items/42"})).unwrap())
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(item).unwrap()["contents"][0]["text"],
        "item 42"
    );
    let missing = peer
        .read_resource(serde_json::from_value(json!({"uri": "nope://x"})).unwrap())
        .await
        .unwrap_err();
    assert_eq!(mcp_error(missing).code.0, -32002);

    // Prompts and completions follow the same names.
    let prompts = peer.list_all_prompts().await.unwrap();
    let prompts: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert!(
        prompts.contains(&"a__greet") && prompts.contains(&"b__summary"),
        "{prompts:?}"
    );
    let greeting = peer
        .get_prompt(
            serde_json::from_value(json!({"name": "a__greet", "arguments": {"name": "Ada"}}))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(greeting).unwrap()["messages"][0]["content"]["text"],
        "Hello, Ada!"
    );
    let completion = peer
        .complete(
            serde_json::from_value(json!({
                "ref": {"type": "ref/prompt", "name": "b__greet"},
                "argument": {"name": "name", "value": "b"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(completion.completion.values, ["bob"]);
    let completion = peer
        .complete(
            serde_json::from_value(json!({
                "ref": {"type": "ref/resource", "uri": "features://a__items/{id}"},
                "argument": {"name": "id", "value": "2"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(completion.completion.values, ["2"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn sampling_roots_and_elicitation_reach_the_harness_that_called() {
    // Over stdio.
    let (_proxy, session, _heard) = connect_stdio(&config(""), "stdio").await;
    let peer = session.peer();
    tool_names(peer).await;
    assert_eq!(
        text(peer, "a__ask_llm", json!({"prompt": "hello"})).await,
        "stdio: hello"
    );
    assert_eq!(text(peer, "b__roots", json!({})).await, "file:///stdio");
    assert_eq!(
        text(peer, "a__ask_user", json!({"question": "ok?"})).await,
        r#"accept: {"answer":"stdio"}"#
    );
    session.cancel().await.unwrap();

    // Over HTTP: each harness session answers for its own calls; one that cannot sample
    // gets an error, and nobody else answers in its place.
    let proxy = Proxy::start(&config(""));
    let (one, _h1) = connect_http(&proxy.mcp_url, "one", true, false).await;
    let (two, _h2) = connect_http(&proxy.mcp_url, "two", true, false).await;
    let (mute, _h3) = connect_http(&proxy.mcp_url, "mute", false, false).await;
    tool_names(one.peer()).await;
    assert_eq!(
        text(one.peer(), "a__ask_llm", json!({"prompt": "x"})).await,
        "one: x"
    );
    assert_eq!(
        text(two.peer(), "a__ask_llm", json!({"prompt": "y"})).await,
        "two: y"
    );
    assert_eq!(text(two.peer(), "b__roots", json!({})).await, "file:///two");
    let refused = call(mute.peer(), "a__ask_llm", json!({"prompt": "z"}))
        .await
        .unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        first_text(&refused)
            .contains("no connected MCP client (harness) supports sampling/createMessage"),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_reaches_the_caller_and_cancellation_reaches_the_server() {
    let (_proxy, session, mut heard) = connect_stdio(&config(""), "stdio").await;
    let peer = session.peer();
    tool_names(peer).await;
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": "a__slow", "arguments": {"ms": 60000}})).unwrap();
    let handle = peer
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let token = handle.progress_token.clone();
    // Progress comes back under the harness's own token.
    let progress = hear(&mut heard, |h| matches!(h, Heard::Progress(_))).await;
    let Heard::Progress(progress) = progress else {
        unreachable!()
    };
    assert_eq!(progress.progress_token, token);
    assert_eq!(progress.total, Some(60000.0));
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    // The upstream server saw the cancellation of its own request.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if text(peer, "a__cancellations", json!({})).await == "1" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cancellation never reached server a"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(text(peer, "b__cancellations", json!({})).await, "0");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_dying_mid_call_or_too_slow_is_an_error_not_a_hang() {
    let extra = format!(
        "{}[mcp]\nrequest_timeout_ms = 400\n",
        server("clock", "clock", &[])
    );
    let proxy = Proxy::start(&config(&extra));
    let (session, mut heard) = connect_http(&proxy.mcp_url, "h", true, false).await;
    let peer = session.peer();
    tool_names(peer).await;
    let died = mcp_error(call(peer, "a__die", json!({"ms": 50})).await.unwrap_err());
    assert!(
        died.message
            .contains("MCP server a stopped before answering tools/call"),
        "{died:?}"
    );
    // Its tools leave the list at once (and come back after the restart).
    hear(&mut heard, |h| *h == Heard::ToolsChanged).await;
    // A server that does not answer in time: -32001, and the server is told to stop.
    let slow = mcp_error(call(peer, "sleep", json!({"ms": 30000})).await.unwrap_err());
    assert_eq!(slow.code.0, -32001, "{slow:?}");
    assert!(slow.message.contains("within 400 ms"), "{slow:?}");
    // Everything else keeps working.
    assert_eq!(
        text(peer, "b__echo", json!({"text": "still here"})).await,
        "still here"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn toggling_a_server_changes_the_list_at_once_and_says_so() {
    let proxy = Proxy::start(&config(""));
    let mut ahp = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    ahp.until("b", "ready", &mut seen).await;
    let (session, mut heard) = connect_http(&proxy.mcp_url, "h", false, false).await;
    let peer = session.peer();
    let before = tool_names(peer).await;
    assert!(before.contains(&"a__echo".to_string()) && before.contains(&"b__echo".to_string()));

    let b = ahp.id("b");
    ahp.dispatch(json!({"type": "session/customizationToggled", "id": b,
        "enablement": [{"kind": "session", "enabled": false}]}))
        .await;
    hear(&mut heard, |h| *h == Heard::ToolsChanged).await;
    let off = tool_names(peer).await;
    // With b gone nothing collides: a's tools lose their prefix.
    assert!(off.contains(&"echo".to_string()), "{off:?}");
    assert!(
        !off.iter()
            .any(|n| n.starts_with("b__") || n.starts_with("a__")),
        "{off:?}"
    );

    ahp.dispatch(json!({"type": "session/customizationToggled", "id": b,
        "enablement": [{"kind": "session", "enabled": true}]}))
        .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        hear(&mut heard, |h| *h == Heard::ToolsChanged).await;
        if tool_names(peer).await.contains(&"b__echo".to_string()) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn per_server_endpoints_are_transparent() {
    let proxy = Proxy::start(&config(""));
    let url = format!("{}/a", proxy.mcp_url);
    let (session, _heard) = connect_http(&url, "h", true, false).await;
    let peer = session.peer();
    // The server's own pages and cursors.
    let first = tokio::time::timeout(PATIENCE, peer.list_tools(None))
        .await
        .unwrap()
        .unwrap();
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo", "add", "slow"]);
    assert_eq!(first.next_cursor.as_deref(), Some("page:1"));
    let all = peer.list_all_tools().await.unwrap();
    let view = all
        .iter()
        .find(|t| t.name == "show_view")
        .expect("show_view");
    assert_eq!(
        serde_json::to_value(&view.meta).unwrap()["ui"]["resourceUri"],
        "ui://features/view.html"
    );
    assert_eq!(
        text(peer, "echo", json!({"text": "direct"})).await,
        "direct"
    );
    assert_eq!(text(peer, "ask_llm", json!({"prompt": "p"})).await, "h: p");
    let page = peer
        .list_resources(Some(
            serde_json::from_value(json!({"cursor": "page:1"})).unwrap(),
        ))
        .await
        .unwrap();
    assert_eq!(page.resources[0].uri, "features://static/data.bin");
    // An endpoint for a server nobody declared does not exist.
    let status = reqwest::Client::new()
        .post(format!("{}/nope", proxy.mcp_url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 404);

    // A harness that hosts MCP Apps sees (and may call) app-only tools.
    let apps_url = format!("{}/app", proxy.mcp_url);
    let (apps, _h) = connect_http(&apps_url, "apps", false, true).await;
    let names = tool_names(apps.peer()).await;
    assert!(
        names.contains(&"refresh_dashboard".to_string()),
        "{names:?}"
    );
    assert!(text(apps.peer(), "refresh_dashboard", json!({}))
        .await
        .starts_with("Release"));
}

#[tokio::test(flavor = "multi_thread")]
async fn log_levels_and_resource_subscriptions_are_forwarded() {
    let (_proxy, session, mut heard) = connect_stdio(&config(""), "stdio").await;
    let peer = session.peer();
    tool_names(peer).await;
    peer.set_level(serde_json::from_value(json!({"level": "warning"})).unwrap())
        .await
        .unwrap();
    // The server itself now filters below warning.
    assert_eq!(
        text(peer, "a__log", json!({"level": "info", "message": "quiet"})).await,
        "filtered"
    );
    assert_eq!(
        text(peer, "a__log", json!({"level": "error", "message": "loud"})).await,
        "logged"
    );
    let log = hear(&mut heard, |h| matches!(h, Heard::Log(_))).await;
    let Heard::Log(log) = log else { unreachable!() };
    assert_eq!(
        log.logger.as_deref(),
        Some("features"),
        "as the server wrote it"
    );
    assert_eq!(log.data, json!("loud"));

    let uri = "features://a__static/hello.txt";
    peer.subscribe(serde_json::from_value(json!({"uri": uri})).unwrap())
        .await
        .unwrap();
    assert_eq!(
        text(
            peer,
            "a__touch",
            json!({"uri": "features://static/hello.txt"})
        )
        .await,
        "notified"
    );
    let updated = hear(&mut heard, |h| matches!(h, Heard::Updated(_))).await;
    let Heard::Updated(updated) = updated else {
        unreachable!()
    };
    assert_eq!(updated.uri, uri);
    peer.unsubscribe(serde_json::from_value(json!({"uri": uri})).unwrap())
        .await
        .unwrap();
    assert_eq!(
        text(
            peer,
            "a__touch",
            json!({"uri": "features://static/hello.txt"})
        )
        .await,
        "not subscribed"
    );
    // A server's own list change reaches the harness.
    assert_eq!(
        text(peer, "b__add_tool", json!({"name": "zap"})).await,
        "added"
    );
    hear(&mut heard, |h| *h == Heard::ToolsChanged).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !tool_names(peer).await.contains(&"zap".to_string()) {
        assert!(tokio::time::Instant::now() < deadline, "zap never appeared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(text(peer, "zap", json!({})).await, "dynamic zap");
}

#[tokio::test(flavor = "multi_thread")]
async fn harness_tool_calls_are_mirrored_into_the_ahp_session() {
    let proxy = Proxy::start(&config(""));
    let ahp = Watcher::open(&proxy).await;
    let app_id = ahp.id("app");
    let chat_uri = ahp
        .mirror
        .default_chat
        .clone()
        .expect("the default session has a default chat");
    assert!(ahp.mirror.chats.iter().any(|c| c.resource == chat_uri));
    let (snapshot, mut sub) = ahp.client.subscribe(chat_uri.clone()).await.unwrap();
    let mut chat: ChatState = match snapshot.snapshot.expect("snapshot").state {
        SnapshotState::Chat(chat) => *chat,
        other => panic!("expected a chat, got {other:?}"),
    };

    let (session, _heard) = connect_http(&proxy.mcp_url, "h", false, false).await;
    let peer = session.peer();
    tool_names(peer).await;
    assert!(text(peer, "show_dashboard", json!({}))
        .await
        .starts_with("Release 1.4.0"));
    let failed = call(peer, "a__add", json!({"a": 1})).await.unwrap();
    assert_eq!(failed.is_error, Some(true));

    // Apply what the official client receives with the official reducers until the turn
    // with both calls is complete.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while chat.turns.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no turn completed");
        let envelope = common::next_action(&mut sub).await;
        let _ = ahp::reducers::apply_action_to_chat(&mut chat, &envelope.action);
    }
    let turn = &chat.turns[0];
    let calls: Vec<&ToolCallState> = turn
        .response_parts
        .iter()
        .filter_map(|p| match p {
            ResponsePart::ToolCall(tc) => Some(&tc.tool_call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "{turn:?}");
    let ToolCallState::Completed(dashboard) = calls[0] else {
        panic!("expected a completed call, got {:?}", calls[0]);
    };
    assert_eq!(dashboard.tool_name, "show_dashboard");
    assert!(dashboard.success);
    assert_eq!(
        serde_json::to_value(&dashboard.contributor).unwrap(),
        json!({"kind": "mcp", "customizationId": app_id})
    );
    assert_eq!(
        serde_json::to_value(&dashboard.meta).unwrap()["ui"]["resourceUri"],
        "ui://release-dashboard/view.html"
    );
    let content = serde_json::to_value(&dashboard.content).unwrap();
    assert!(content[0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Release 1.4.0"));
    let ToolCallState::Completed(add) = calls[1] else {
        panic!("expected a completed call, got {:?}", calls[1]);
    };
    assert_eq!(add.tool_name, "a__add");
    assert!(!add.success);
    assert_eq!(
        add.tool_input,
        Some(ahp_types::state::ToolInput::Inline(r#"{"a":1}"#.into()))
    );
    // The chat's summary in the session is idle again.
    assert_eq!(chat.status & 0b11111, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn http_sessions_can_be_deleted_and_their_streams_resumed() {
    let proxy = Proxy::start(&config(""));
    let http = reqwest::Client::new();
    let raw = RawSession::open(&http, &proxy.mcp_url).await;
    let session = raw.id.clone();
    let post = |session: Option<&str>, body: Value| {
        common::http_session::post(&http, &proxy.mcp_url, session, body)
    };
    // The first listing waits until the servers are up.
    let listed = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    )
    .await
    .unwrap();
    assert!(listed.text().await.unwrap().contains("a__slow"));

    // A slow call; drop its stream after the first event and resume it by event id.
    let mut stream = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "a__slow", "arguments": {"ms": 300}}}),
    )
    .await
    .unwrap();
    assert!(stream.status().is_success());
    let mut seen = String::new();
    let last_id = loop {
        let chunk = tokio::time::timeout(PATIENCE, stream.chunk())
            .await
            .unwrap()
            .unwrap()
            .expect("an event before the stream ends");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(id) = seen.lines().find_map(|l| l.strip_prefix("id:")) {
            break id.trim().to_string();
        }
    };
    assert!(!seen.contains("\"id\":2"), "answered too early: {seen}");
    drop(stream);
    let resumed = http
        .get(&proxy.mcp_url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", &last_id)
        .send()
        .await
        .unwrap();
    assert!(resumed.status().is_success(), "{}", resumed.status());
    let mut resumed = resumed;
    let mut replayed = String::new();
    while !replayed.contains("slept 300 ms") {
        let chunk = tokio::time::timeout(PATIENCE, resumed.chunk())
            .await
            .expect("the answer arrives on the resumed stream")
            .unwrap()
            .unwrap_or_else(|| panic!("stream ended after {replayed:?}; first stream: {seen:?}"));
        replayed.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(replayed.contains("\"id\":2"), "{replayed}");

    // DELETE ends the session: it is gone afterwards.
    let deleted = http
        .delete(&proxy.mcp_url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let after = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    )
    .await
    .unwrap();
    assert_eq!(after.status().as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_mirror_queue_skips_calls_without_slowing_them_and_says_how_many() {
    let proxy = Proxy::start(&config("[mcp]\nmirror_queue = 2\n"));
    let ahp = Watcher::open(&proxy).await;
    let chat_uri = ahp.mirror.default_chat.clone().expect("default chat");
    let (snapshot, mut sub) = ahp.client.subscribe(chat_uri).await.unwrap();
    let mut chat: ChatState = match snapshot.snapshot.expect("snapshot").state {
        SnapshotState::Chat(chat) => *chat,
        other => panic!("expected a chat, got {other:?}"),
    };
    let (session, _heard) = connect_http(&proxy.mcp_url, "h", false, false).await;
    let peer = session.peer();
    tool_names(peer).await;
    // Room for one call at a time: a burst of 20 concurrent calls all succeed, most unseen.
    let calls = (0..20).map(|n| text(peer, "a__echo", json!({"text": format!("{n}")})));
    let answers = futures_util::future::join_all(calls).await;
    assert_eq!(answers.len(), 20);
    // Apply what the official client receives until the chat is idle again.
    async fn settle(chat: &mut ChatState, sub: &mut ahp::SessionSubscription, turns: usize) {
        while chat.active_turn.is_some() || chat.turns.len() < turns {
            let envelope = common::next_action(sub).await;
            let _ = ahp::reducers::apply_action_to_chat(chat, &envelope.action);
        }
    }
    settle(&mut chat, &mut sub, 1).await;
    let after_burst = chat.turns.len();
    // One more call: its turn opens with a note on what the last burst could not show.
    assert!(!text(peer, "list_notes", json!({})).await.is_empty());
    settle(&mut chat, &mut sub, after_burst + 1).await;
    let mut mirrored = 0;
    let mut skipped = 0;
    for part in chat.turns.iter().flat_map(|t| &t.response_parts) {
        match part {
            ResponsePart::ToolCall(_) => mirrored += 1,
            ResponsePart::Markdown(note) => {
                skipped += note
                    .content
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or_else(|| panic!("no count in {:?}", note.content));
            }
            _ => {}
        }
    }
    assert!(
        skipped > 0,
        "with room for one call, a burst cannot all be mirrored"
    );
    // Every call of the burst is either shown or counted (plus the list_notes call).
    assert_eq!(mirrored + skipped, 21, "{:?}", chat.turns);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_server_requests_over_http_reach_exactly_their_callers() {
    // The upstream serves streamable HTTP: its sampling request arrives on the stream of
    // the call that caused it, so two sessions calling at the same time are told apart.
    let upstream = HttpExampleServer::start("features", &[]);
    let proxy = Proxy::start(&format!(
        "[supervisor]\nrestart_delay_ms = 50\n[servers.remote]\nurl = \"{}\"\n",
        upstream.url
    ));
    let (first, _h1) = connect_http(&proxy.mcp_url, "first", true, false).await;
    let (second, _h2) = connect_http(&proxy.mcp_url, "second", true, false).await;
    tool_names(first.peer()).await;
    // First's call asks for sampling only once second's newer call runs at the same server,
    // and second's call lasts until that sampling is answered (the server orders both): "the
    // latest call in flight" would pick second; the stream says first.
    let asking = text(
        first.peer(),
        "ask_llm",
        json!({"prompt": "mine", "after_slow": true}),
    );
    let busy = text(
        second.peer(),
        "slow",
        json!({"ms": 600_000, "until_sampled": true}),
    );
    let (answer, held) = tokio::join!(asking, busy);
    assert_eq!(answer, "first: mine");
    assert_eq!(held, "held until a sampling answer");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_app_samples_through_the_harness_over_its_channel() {
    // Over HTTP, so the harness can come and go while the proxy stays.
    let proxy = Proxy::start(&format!(
        "[supervisor]\nrestart_delay_ms = 50\n{}",
        server("a", "features", &[])
    ));
    let mut apps = Watcher::open_with_apps(&proxy, "app-view").await;
    let mut seen = Vec::new();
    apps.until("a", "ready", &mut seen).await;
    let sampling = |w: &Watcher| {
        w.server("a")["mcpApp"]["capabilities"]
            .get("sampling")
            .cloned()
    };
    assert_eq!(
        sampling(&apps),
        None,
        "no harness yet: {}",
        apps.server("a")
    );
    let channel = apps.server("a")["channel"].as_str().unwrap().to_string();

    // A harness that declares sampling connects: the server's mcpApp gains `sampling`.
    let (harness, _heard) = connect_http(&proxy.mcp_url, "harness", true, false).await;
    while sampling(&apps).is_none() {
        apps.step().await;
    }
    assert_eq!(sampling(&apps), Some(json!({})));
    let answer: Value = apps
        .client
        .request(
            "sampling/createMessage",
            json!({"channel": channel, "maxTokens": 10,
                   "messages": [{"role": "user", "content": {"type": "text", "text": "from the view"}}]}),
        )
        .await
        .unwrap_or_else(|e| panic!("sampling answered by the harness: {e:?}\n{}", proxy.logs()));
    assert_eq!(
        answer["content"]["text"], "harness: from the view",
        "{answer}"
    );
    assert_eq!(answer["model"], "test-model");

    // It leaves: `sampling` is withdrawn, and the method is no longer served.
    harness.cancel().await.unwrap();
    while sampling(&apps).is_some() {
        apps.step().await;
    }
    let refused = apps
        .client
        .request::<_, Value>(
            "sampling/createMessage",
            json!({"channel": channel, "maxTokens": 10, "messages": []}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ahp::ClientError::Rpc(e) if e.code == -32601),
        "{refused}"
    );
}

/// The MCP front's socket address, out of its URL.
fn mcp_addr(proxy: &Proxy) -> std::net::SocketAddr {
    let authority = proxy.mcp_url.trim_start_matches("http://");
    authority.split('/').next().unwrap().parse().unwrap()
}

/// Everything the peer sends until it closes the connection (or `PATIENCE` passes).
fn read_to_close(socket: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    socket.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match socket.read(&mut chunk) {
            Ok(0) => return String::from_utf8_lossy(&all).into_owned(),
            Ok(n) => all.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return String::from_utf8_lossy(&all).into_owned()
            }
            Err(e) => panic!("the front kept the connection open: {e}; read {all:?}"),
        }
    }
}

async fn initialize_raw(http: &reqwest::Client, url: &str) -> reqwest::Response {
    http.post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_requests_are_cut_off_and_sessions_are_bounded() {
    use std::io::Write;
    let proxy = Proxy::start("[limits]\nhandshake_timeout_ms = 300\n[mcp]\nmax_sessions = 1\n");
    let addr = mcp_addr(&proxy);
    // Headers that never finish: the connection is closed, not held.
    let mut trickle = std::net::TcpStream::connect(addr).unwrap();
    trickle
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: app")
        .unwrap();
    let heard = read_to_close(&mut trickle);
    assert!(
        heard.is_empty() || heard.starts_with("HTTP/1.1 408"),
        "{heard}"
    );
    // A body that never finishes: 408 with a JSON-RPC error, then closed.
    let mut stalled = std::net::TcpStream::connect(addr).unwrap();
    stalled
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":")
        .unwrap();
    let heard = read_to_close(&mut stalled);
    assert!(heard.starts_with("HTTP/1.1 408"), "{heard}");
    assert!(heard.contains("did not arrive within 300 ms"), "{heard}");

    // One session may live: while it is busy (its GET stream open) a second initialize is
    // refused, until the first is deleted (an idle one would be forgotten for it: tests/fairness.rs).
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let first = initialize_raw(&http, &proxy.mcp_url).await;
    assert_eq!(first.status().as_u16(), 200);
    let session = first.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = first.text().await;
    let mut listening = http
        .get(&proxy.mcp_url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(listening.status().as_u16(), 200);
    let _ = listening.chunk().await;
    let second = initialize_raw(&http, &proxy.mcp_url).await;
    assert_eq!(second.status().as_u16(), 503);
    let refusal: Value = second.json().await.unwrap();
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    let message = refusal["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("too many MCP sessions (the limit is 1) and none is idle"),
        "{message}"
    );
    drop(listening);
    let deleted = http
        .delete(&proxy.mcp_url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    let third = initialize_raw(&http, &proxy.mcp_url).await;
    assert_eq!(third.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_beyond_the_limit_are_refused_until_one_closes() {
    let proxy = Proxy::start("[limits]\nmax_connections = 2\n");
    let addr = mcp_addr(&proxy);
    let first = std::net::TcpStream::connect(addr).unwrap();
    let second = std::net::TcpStream::connect(addr).unwrap();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let refused = initialize_raw(&http, &proxy.mcp_url).await;
    assert_eq!(refused.status().as_u16(), 503);
    assert_eq!(refused.headers()["connection"], "close");
    assert!(refused
        .text()
        .await
        .unwrap()
        .contains("too many open connections"));
    drop(first);
    drop(second);
    // The slots come back once the closed connections are noticed.
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let answer = initialize_raw(&http, &proxy.mcp_url).await;
        if answer.status().as_u16() == 200 {
            break;
        }
        assert_eq!(answer.status().as_u16(), 503);
        assert!(
            std::time::Instant::now() < deadline,
            "the slots never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
