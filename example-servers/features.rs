//! The `features` example server (`ahp-proxy-example-server features`): every MCP feature a
//! transparent proxy must forward, in one small server that the end-to-end tests drive.

// Sampling, roots, logging and resources/subscribe are deprecated in rmcp 3 (SEP-2577) but
// are still MCP that clients use, so a proxy must forward them.
#![allow(deprecated)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, CompleteRequestParams,
    CompleteResult, CompletionInfo, ContentBlock, CreateMessageRequestParams, ElicitRequest,
    ElicitRequestParams, ElicitationSchema, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Reference, ResourceUpdatedNotificationParam,
    SamplingMessage, SamplingMessageContentBlock, ServerCapabilities, ServerConfig, ServerRequest,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

const HELLO_URI: &str = "features://static/hello.txt";
const DATA_URI: &str = "features://static/data.bin";
const ITEM_TEMPLATE: &str = "features://items/{id}";
const ITEM_PREFIX: &str = "features://items/";
const VIEW_URI: &str = "ui://features/view.html";
const VIEW_HTML: &str = "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Features</title></head>\n<body><h1>Features view</h1></body></html>\n";
const TOOLS_PER_PAGE: usize = 3;
const RESOURCES_PER_PAGE: usize = 1;
/// How often `slow` reports progress.
const TICK: Duration = Duration::from_millis(50);
/// The longest wait `slow` and `die` accept.
const MAX_MS: u64 = 600_000;

/// The server. Clones share one state, so every HTTP session sees the same tools and counters.
#[derive(Clone, Default)]
pub struct Features {
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    /// `slow` calls cancelled so far.
    cancellations: AtomicU64,
    /// The lowest level `log` sends, as `LoggingLevel as usize` (0: debug, so everything).
    min_level: AtomicUsize,
    subscriptions: Mutex<BTreeSet<String>>,
    /// Tools added by `add_tool`, in order.
    dynamic_tools: Mutex<Vec<String>>,
    /// Tool calls being answered now (`ask_llm`'s `wait_for_calls` waits on it).
    calls: tokio::sync::watch::Sender<usize>,
}

/// One tool call being answered, counted in `State::calls` while it lives.
struct Counted<'a>(&'a tokio::sync::watch::Sender<usize>);

impl<'a> Counted<'a> {
    fn new(calls: &'a tokio::sync::watch::Sender<usize>) -> Self {
        calls.send_modify(|n| *n += 1);
        Self(calls)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// A tool's outcome; `Err` becomes a result with `isError: true` and the message as text.
type Outcome = Result<CallToolResult, String>;

fn text(text: impl Into<String>) -> Outcome {
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}

fn str_arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string argument {key:?}"))
}

fn ms_arg(args: &JsonObject) -> Result<u64, String> {
    args.get("ms")
        .and_then(Value::as_u64)
        .filter(|&ms| ms <= MAX_MS)
        .ok_or_else(|| format!("argument \"ms\" must be an integer from 0 to {MAX_MS}"))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Deserialize a result built as JSON (shorter than the builders, and reads like the wire).
fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// One page of `items` and the next page's cursor (`page:<n>`; the first page has none).
fn page(
    items: Vec<Value>,
    per_page: usize,
    request: Option<PaginatedRequestParams>,
) -> Result<(Vec<Value>, Option<String>), ErrorData> {
    let index = match request.and_then(|r| r.cursor) {
        None => 0,
        Some(cursor) => cursor
            .strip_prefix("page:")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n > 0 && n.saturating_mul(per_page) < items.len())
            .ok_or_else(|| ErrorData::invalid_params(format!("unknown cursor {cursor:?}"), None))?,
    };
    let start = index * per_page;
    let next = (start + per_page < items.len()).then(|| format!("page:{}", index + 1));
    Ok((items.into_iter().skip(start).take(per_page).collect(), next))
}

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn static_tools() -> Vec<Value> {
    let none = || object_schema(json!({}), &[]);
    let string = |name: &str| object_schema(json!({name: {"type": "string"}}), &[name]);
    let ms = json!({"ms": {"type": "integer", "minimum": 0, "maximum": MAX_MS}});
    let ms = || object_schema(ms.clone(), &["ms"]);
    vec![
        json!({"name": "echo", "description": "Return the text unchanged.", "inputSchema": string("text")}),
        json!({"name": "add", "description": "Add two numbers (also as structured content).",
               "inputSchema": object_schema(json!({"a": {"type": "number"}, "b": {"type": "number"}}), &["a", "b"]),
               "outputSchema": object_schema(json!({"sum": {"type": "number"}}), &["sum"])}),
        json!({"name": "slow", "description": "Wait ms milliseconds, with progress every 50 ms; cancellable.", "inputSchema": ms()}),
        json!({"name": "cancellations", "description": "How many slow calls were cancelled.", "inputSchema": none()}),
        json!({"name": "die", "description": "Exit the server (status 7) after ms milliseconds, without answering.", "inputSchema": ms()}),
        json!({"name": "ask_llm", "description": "Ask the client's model (sampling/createMessage), optionally after delay_ms, or once wait_for_calls tool calls (this one included) are being answered.",
               "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}, "delay_ms": {"type": "integer", "minimum": 0},
                   "wait_for_calls": {"type": "integer", "minimum": 1}}, "required": ["prompt"]}}),
        json!({"name": "roots", "description": "The client's roots (roots/list), one URI a line.", "inputSchema": none()}),
        json!({"name": "ask_user", "description": "Ask the user a question (elicitation/create).", "inputSchema": string("question")}),
        json!({"name": "log", "description": "Send a log message (notifications/message) unless the level is filtered.",
               "inputSchema": object_schema(json!({"message": {"type": "string"}, "level": {"type": "string",
                   "enum": ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]}}), &["level", "message"])}),
        json!({"name": "touch", "description": "Send notifications/resources/updated if the URI is subscribed.", "inputSchema": string("uri")}),
        json!({"name": "add_tool", "description": "Add a tool with this name and send notifications/tools/list_changed.", "inputSchema": string("name")}),
        json!({"name": "whoami", "description": "The client's clientInfo, capabilities and protocol version as this server saw them at initialize.", "inputSchema": none()}),
        json!({"name": "show_view", "description": "Show the features view (an MCP App).", "inputSchema": none(),
               "_meta": {"ui": {"resourceUri": VIEW_URI}, "ui/resourceUri": VIEW_URI}}),
    ]
}

/// The contents of a readable resource (listed or not), or `None`.
fn contents(uri: &str) -> Option<Value> {
    Some(match uri {
        HELLO_URI => json!({"uri": uri, "mimeType": "text/plain", "text": "hello from features"}),
        DATA_URI => json!({"uri": uri, "mimeType": "application/octet-stream",
                           "blob": base64::engine::general_purpose::STANDARD.encode([0u8, 1, 2, 3, 255])}),
        VIEW_URI => json!({"uri": uri, "mimeType": "text/html;profile=mcp-app", "text": VIEW_HTML,
                           "_meta": {"ui": {"prefersBorder": true}}}),
        _ => {
            let id = uri
                .strip_prefix(ITEM_PREFIX)
                .filter(|id| !id.is_empty() && !id.contains('/'))?;
            json!({"uri": uri, "mimeType": "text/plain", "text": format!("item {id}")})
        }
    })
}

impl Features {
    fn tools(&self) -> Vec<Value> {
        let mut tools = static_tools();
        for name in lock(&self.state.dynamic_tools).iter() {
            tools.push(json!({"name": name, "description": "Added by add_tool.",
                              "inputSchema": object_schema(json!({}), &[])}));
        }
        tools
    }

    fn is_dynamic(&self, name: &str) -> bool {
        lock(&self.state.dynamic_tools).iter().any(|t| t == name)
    }

    fn is_subscribed(&self, uri: &str) -> bool {
        lock(&self.state.subscriptions).contains(uri)
    }

    async fn slow(&self, args: &JsonObject, context: &RequestContext<RoleServer>) -> Outcome {
        let ms = ms_arg(args)?;
        let token = context.meta.get_progress_token();
        let start = tokio::time::Instant::now();
        let done = tokio::time::sleep(Duration::from_millis(ms));
        tokio::pin!(done);
        let mut ticks = tokio::time::interval_at(start + TICK, TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = context.ct.cancelled() => {
                    self.state.cancellations.fetch_add(1, Ordering::SeqCst);
                    return Err("cancelled".into());
                }
                () = &mut done => return text(format!("slept {ms} ms")),
                _ = ticks.tick(), if token.is_some() => {
                    let elapsed = u64::try_from(start.elapsed().as_millis()).unwrap_or(ms).min(ms);
                    if let Some(token) = &token {
                        let progress = ProgressNotificationParam::new(token.clone(), elapsed as f64)
                            .with_total(ms as f64)
                            .with_message("working");
                        let _ = context.peer.notify_progress(progress).await;
                    }
                }
            }
        }
    }

    async fn log(&self, args: &JsonObject, peer: &Peer<RoleServer>) -> Outcome {
        let name = str_arg(args, "level")?;
        let level: LoggingLevel = serde_json::from_value(json!(name))
            .map_err(|_| format!("unknown level {name:?} (debug, info, notice, warning, error, critical, alert or emergency)"))?;
        let message = str_arg(args, "message")?;
        if (level as usize) < self.state.min_level.load(Ordering::SeqCst) {
            return text("filtered");
        }
        let param =
            LoggingMessageNotificationParam::new(level, json!(message)).with_logger("features");
        peer.notify_logging_message(param)
            .await
            .map_err(|e| format!("cannot send the log message: {e}"))?;
        text("logged")
    }

    async fn touch(&self, args: &JsonObject, peer: &Peer<RoleServer>) -> Outcome {
        let uri = str_arg(args, "uri")?;
        if !self.is_subscribed(uri) {
            return text("not subscribed");
        }
        peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
            .await
            .map_err(|e| format!("cannot send the update: {e}"))?;
        text("notified")
    }

    async fn add_tool(&self, args: &JsonObject, peer: &Peer<RoleServer>) -> Outcome {
        let name = str_arg(args, "name")?;
        if name.is_empty() {
            return Err("a tool name cannot be empty".into());
        }
        let taken = static_tools().iter().any(|t| t["name"] == name);
        {
            let mut dynamic = lock(&self.state.dynamic_tools);
            if taken || dynamic.iter().any(|t| t == name) {
                return Err(format!("there is already a tool named {name:?}"));
            }
            dynamic.push(name.to_string());
        }
        peer.notify_tool_list_changed()
            .await
            .map_err(|e| format!("cannot send tools/list_changed: {e}"))?;
        text("added")
    }
}

fn add(args: &JsonObject) -> Outcome {
    let number = |key: &str| {
        args.get(key)
            .filter(|v| v.is_number())
            .ok_or_else(|| format!("missing number argument {key:?}"))
    };
    let (a, b) = (number("a")?, number("b")?);
    // Integers stay integers (3 + 4 is "7", not "7.0"); anything else adds as floats.
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) if a.checked_add(b).is_some() => json!(a + b),
        _ => json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
    };
    if sum.is_null() {
        return Err("the sum is not a finite number".into());
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(sum.to_string())]);
    result.structured_content = Some(json!({ "sum": sum }));
    Ok(result)
}

async fn die(args: &JsonObject) -> Outcome {
    let ms = ms_arg(args)?;
    tokio::time::sleep(Duration::from_millis(ms)).await;
    eprintln!("example-server: dying mid-call as asked");
    std::process::exit(7);
}

async fn ask_llm(
    args: &JsonObject,
    peer: &Peer<RoleServer>,
    calls: &tokio::sync::watch::Sender<usize>,
) -> Outcome {
    let prompt = str_arg(args, "prompt")?;
    // Optional: think a while before asking (lets tests overlap other calls).
    if let Some(ms) = args.get("delay_ms").and_then(Value::as_u64) {
        tokio::time::sleep(Duration::from_millis(ms.min(60_000))).await;
    }
    // Optional: ask only once other calls are in flight too (a test's overlap, by event).
    if let Some(wanted) = args.get("wait_for_calls").and_then(Value::as_u64) {
        let wanted = usize::try_from(wanted).unwrap_or(usize::MAX);
        let mut calls = calls.subscribe();
        let _ = calls.wait_for(|n| *n >= wanted).await;
    }
    let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 100);
    let result = peer
        .create_message(params)
        .await
        .map_err(|e| format!("sampling/createMessage failed: {e}"))?;
    let texts: Vec<String> = (result.message.content.into_vec().into_iter())
        .filter_map(|block| match block {
            SamplingMessageContentBlock::Text(t) => Some(t.text),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        return Err(format!(
            "the sampled message (model {}) has no text",
            result.model
        ));
    }
    text(texts.join("\n"))
}

async fn roots(peer: &Peer<RoleServer>) -> Outcome {
    let result = peer
        .list_roots()
        .await
        .map_err(|e| format!("roots/list failed: {e}"))?;
    let uris: Vec<&str> = result.roots.iter().map(|r| r.uri.as_str()).collect();
    text(uris.join("\n"))
}

async fn ask_user(args: &JsonObject, peer: &Peer<RoleServer>) -> Outcome {
    let question = str_arg(args, "question")?;
    let schema = ElicitationSchema::builder()
        .required_string("answer")
        .build()
        .map_err(str::to_string)?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.to_string(),
        requested_schema: schema,
    };
    // `Peer::create_elicitation` needs rmcp's `elicitation` feature; the request is the same.
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    let response = peer
        .send_request(request)
        .await
        .map_err(|e| format!("elicitation/create failed: {e}"))?;
    let ClientResult::ElicitResult(result) = response else {
        return Err("the client did not answer with an elicitation result".into());
    };
    let action = json!(result.action);
    let content = result.content.map(|c| c.to_string()).unwrap_or_default();
    text(format!(
        "{}: {content}",
        action.as_str().unwrap_or_default()
    ))
}

impl ServerHandler for Features {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "logging": {},
            "completions": {},
        }))
        .unwrap_or_default();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "ahp-proxy-example-features",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Features example: every MCP feature in one server.")
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (tools, next) = page(self.tools(), TOOLS_PER_PAGE, request)?;
        from_json(json!({"tools": tools, "nextCursor": next}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let peer = &context.peer;
        let _counted = Counted::new(&self.state.calls);
        let outcome = match request.name.as_ref() {
            "echo" => str_arg(&args, "text").and_then(text),
            "add" => add(&args),
            "slow" => self.slow(&args, &context).await,
            "cancellations" => text(self.state.cancellations.load(Ordering::SeqCst).to_string()),
            "die" => die(&args).await,
            "ask_llm" => ask_llm(&args, peer, &self.state.calls).await,
            "roots" => roots(peer).await,
            "ask_user" => ask_user(&args, peer).await,
            "log" => self.log(&args, peer).await,
            "touch" => self.touch(&args, peer).await,
            "add_tool" => self.add_tool(&args, peer).await,
            "show_view" => text("view shown"),
            "whoami" => text(
                peer.peer_info()
                    .map(|info| {
                        json!({"clientInfo": info.client_info, "capabilities": info.capabilities,
                               "protocolVersion": info.protocol_version})
                        .to_string()
                    })
                    .unwrap_or_default(),
            ),
            name if self.is_dynamic(name) => text(format!("dynamic {name}")),
            name => {
                let message = format!("unknown tool {name:?}");
                return Err(ErrorData::invalid_params(message, None));
            }
        };
        let result = outcome.unwrap_or_else(|e| CallToolResult::error(vec![ContentBlock::text(e)]));
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        from_json(json!({"prompts": [
            {"name": "greet", "description": "Greet someone by name.",
             "arguments": [{"name": "name", "description": "Who to greet.", "required": true}]},
            {"name": "summary", "description": "Ask for a summary of this example."},
        ]}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = match request.name.as_str() {
            "greet" => {
                let name =
                    str_arg(&args, "name").map_err(|e| ErrorData::invalid_params(e, None))?;
                format!("Hello, {name}!")
            }
            "summary" => "Summarize the features example.".to_string(),
            name => {
                let message = format!("unknown prompt {name:?}");
                return Err(ErrorData::invalid_params(message, None));
            }
        };
        let message = json!({"role": "user", "content": {"type": "text", "text": text}});
        let result: GetPromptResult = from_json(json!({ "messages": [message] }))?;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = vec![
            json!({"uri": HELLO_URI, "name": "hello.txt", "mimeType": "text/plain"}),
            json!({"uri": DATA_URI, "name": "data.bin", "mimeType": "application/octet-stream"}),
        ];
        let (resources, next) = page(resources, RESOURCES_PER_PAGE, request)?;
        from_json(json!({"resources": resources, "nextCursor": next}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        from_json(json!({"resourceTemplates": [
            {"uriTemplate": ITEM_TEMPLATE, "name": "item", "mimeType": "text/plain"},
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(contents) = contents(&request.uri) else {
            let message = format!("no resource {:?}", request.uri);
            return Err(ErrorData::resource_not_found(message, None));
        };
        let result: ReadResourceResult = from_json(json!({ "contents": [contents] }))?;
        Ok(result.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        lock(&self.state.subscriptions).insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        lock(&self.state.subscriptions).remove(&request.uri);
        Ok(())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Declared from least to most severe, so the discriminant orders levels.
        self.state
            .min_level
            .store(request.level as usize, Ordering::SeqCst);
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let argument = request.argument.name.as_str();
        let candidates: &[&str] = match &request.r#ref {
            Reference::Prompt(prompt) if prompt.name == "greet" && argument == "name" => {
                &["alice", "bob", "carol"]
            }
            Reference::Resource(resource) if resource.uri == ITEM_TEMPLATE && argument == "id" => {
                &["1", "2", "3"]
            }
            _ => &[],
        };
        let values = (candidates.iter())
            .filter(|c| c.starts_with(request.argument.value.as_str()))
            .map(|c| c.to_string())
            .collect();
        Ok(CompleteResult::new(
            CompletionInfo::new(values).unwrap_or_default(),
        ))
    }
}
