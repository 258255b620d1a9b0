//! The small example servers `plugins-examples/` launches: notes (with a tool whose schema
//! nests objects and uses `$ref`, a prompt, a template and an image, for the console's
//! workbench), clock, an MCP App, the echo benchmarks use, and one that crashes on demand.
//! One handler, switched on the kind.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

use crate::faults::{Dice, Fault, FaultOptions};
use crate::Kind;

const APP_URI: &str = "ui://release-dashboard/view.html";
const APP_MIME: &str = "text/html;profile=mcp-app";
/// The notes server's icon: a small note, as an SVG `data:` URI.
const NOTES_ICON: &str = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAxNiAxNiI+PHJlY3QgeD0iMiIgeT0iMSIgd2lkdGg9IjEyIiBoZWlnaHQ9IjE0IiByeD0iMiIgZmlsbD0iI2Y1ZDc2ZSIvPjxwYXRoIGQ9Ik01IDVoNk01IDhoNk01IDExaDQiIHN0cm9rZT0iIzU1NSIvPjwvc3ZnPg==";
/// The same icon as a resource (`image/svg+xml`, read as a blob).
const NOTES_ICON_URI: &str = "notes://icon.svg";
const DASHBOARD: &str = "Release 1.4.0: 12 merged, 2 open, CI green.";
/// The dashboard View: a real MCP App without an SDK (the spec's `ui/initialize` handshake
/// by hand), showing the tool result, with a Refresh button that calls the app-only
/// `refresh_dashboard` tool through the host and shows its answer.
const APP_HTML: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Release dashboard</title>
<style>
:root { color-scheme: light dark; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 12px; }
body.dark { background: #1e2125; color: #e8e8e8; }
h1 { font-size: 16px; margin: 0 0 8px; }
button { font: inherit; padding: 2px 10px; }
</style></head>
<body><h1>Release dashboard</h1><p id="status">Waiting for the tool result…</p>
<p><button id="refresh" type="button" disabled>Refresh</button> <span id="refreshed"></span></p>
<script>
let nextId = 1;
const pending = new Map();
const host = window.parent;
function request(method, params) {
  const id = nextId++;
  host.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}
function notify(method, params) { host.postMessage({ jsonrpc: "2.0", method, params }, "*"); }
function text(result) { return ((result && result.content) || []).filter((c) => c.type === "text").map((c) => c.text).join("\n"); }
function theme(name) { document.body.classList.toggle("dark", name === "dark"); }
window.addEventListener("message", (event) => {
  if (event.source !== host) return;
  const m = event.data || {};
  if (m.id !== undefined && !m.method) {
    const waiter = pending.get(m.id);
    if (waiter) { pending.delete(m.id); m.error ? waiter.reject(new Error(m.error.message)) : waiter.resolve(m.result); }
  } else if (m.method === "ui/notifications/tool-result") {
    document.getElementById("status").textContent = text(m.params);
  } else if (m.method === "ui/notifications/host-context-changed") {
    if (m.params && m.params.theme) theme(m.params.theme);
  } else if (m.method === "ui/resource-teardown" || m.method === "ping") {
    host.postMessage({ jsonrpc: "2.0", id: m.id, result: {} }, "*");
  }
});
(async () => {
  const init = await request("ui/initialize", { appInfo: { name: "release-dashboard", version: "1.0.0" }, appCapabilities: {}, protocolVersion: "2026-01-26" });
  theme(init.hostContext && init.hostContext.theme);
  notify("ui/notifications/initialized", {});
  const size = () => {
    const box = document.documentElement.getBoundingClientRect();
    notify("ui/notifications/size-changed", { width: Math.ceil(box.width), height: Math.ceil(box.height) });
  };
  new ResizeObserver(size).observe(document.body);
  const button = document.getElementById("refresh");
  button.disabled = false;
  button.onclick = async () => {
    notify("notifications/message", { level: "info", logger: "release-dashboard", data: "refresh clicked" });
    try {
      document.getElementById("refreshed").textContent = text(await request("tools/call", { name: "refresh_dashboard", arguments: {} }));
    } catch (error) {
      document.getElementById("refreshed").textContent = "Refresh failed: " + error.message;
    }
  };
})();
</script></body></html>
"#;

/// One of the small servers.
#[derive(Clone)]
pub struct Example {
    kind: Kind,
    exit_code: i32,
    notes: Arc<Mutex<BTreeMap<String, String>>>,
    notes_dir: Option<std::path::PathBuf>,
    /// With `--fault crash-random`: thrown at every tool call.
    dice: Option<Dice>,
    /// With any `--fault`: also offers `fault_stats`.
    faulty: bool,
}

impl Example {
    /// The `kind` server; `faults` may add `fault_stats` and the random crash.
    pub fn new(kind: Kind, exit_code: i32, faults: &FaultOptions) -> Self {
        let notes_dir = std::env::var_os("NOTES_DIR").map(std::path::PathBuf::from);
        let mut notes = BTreeMap::new();
        if let Some(dir) = &notes_dir {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for entry in entries.flatten() {
                    let path = entry.path();
                    if path.extension().is_some_and(|e| e == "txt") {
                        if let (Some(stem), Ok(text)) =
                            (path.file_stem(), std::fs::read_to_string(&path))
                        {
                            notes.insert(stem.to_string_lossy().into_owned(), text);
                        }
                    }
                }
            }
        }
        Self {
            kind,
            exit_code,
            notes: Arc::new(Mutex::new(notes)),
            notes_dir,
            dice: faults
                .is(Fault::CrashRandom)
                .then(|| Dice::new(faults.seed, faults.fault_rate)),
            faulty: faults.fault.is_some(),
        }
    }

    fn tools(&self) -> Value {
        let mut tools = self.own_tools();
        if let (true, Some(list)) = (self.faulty, tools.as_array_mut()) {
            list.push(json!({"name": "fault_stats",
                "description": "How many tools/list requests this process answered and flood rounds it wrote.",
                "inputSchema": {"type": "object", "properties": {}}}));
        }
        tools
    }

    fn own_tools(&self) -> Value {
        let text_arg = |name: &str, about: &str| json!({"type": "object", "properties": {name: {"type": "string", "description": about}}, "required": [name]});
        match self.kind {
            Kind::Notes => json!([
                {"name": "add_note", "description": "Save a short note under a title.",
                 "inputSchema": {"type": "object", "properties": {
                     "title": {"type": "string"}, "text": {"type": "string"}}, "required": ["title", "text"]}},
                {"name": "list_notes", "description": "Titles of every saved note.",
                 "inputSchema": {"type": "object", "properties": {}},
                 "annotations": {"readOnlyHint": true}},
                {"name": "read_note", "description": "The text of one note.",
                 "inputSchema": text_arg("title", "the note's title"),
                 "annotations": {"readOnlyHint": true}},
                file_note_tool(),
            ]),
            Kind::Clock => json!([
                {"name": "now", "description": "The current time (UTC, RFC 3339).",
                 "inputSchema": {"type": "object", "properties": {}}},
                {"name": "sleep", "description": "Wait this many milliseconds, then answer.",
                 "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"]}},
            ]),
            Kind::App => json!([
                {"name": "show_dashboard", "description": "Show the release dashboard (an MCP App).",
                 "inputSchema": {"type": "object", "properties": {}},
                 "_meta": {"ui": {"resourceUri": APP_URI}, "ui/resourceUri": APP_URI}},
                {"name": "refresh_dashboard", "description": "Called by the dashboard view only.",
                 "inputSchema": {"type": "object", "properties": {}},
                 "_meta": {"ui": {"resourceUri": APP_URI, "visibility": ["app"]}}},
            ]),
            Kind::Echo => json!([
                {"name": "echo", "description": "Return the text unchanged.",
                 "inputSchema": text_arg("text", "what to return")},
            ]),
            Kind::Crash => json!([
                {"name": "crash", "description": "Exit the server process at once (to see the error state and the restart).",
                 "inputSchema": {"type": "object", "properties": {}}},
            ]),
            Kind::Fail
            | Kind::Features
            | Kind::Conformance
            | Kind::Transparency
            | Kind::TransparencyModern
            | Kind::Witness => json!([]),
        }
    }

    fn call(&self, name: &str, args: &serde_json::Map<String, Value>) -> Result<String, String> {
        let arg = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("missing string argument {key:?}"))
        };
        match (self.kind, name) {
            (Kind::Notes, "add_note") => {
                let (title, text) = (arg("title")?, arg("text")?);
                if title.is_empty() || title.contains(['/', '\\', '\0']) || title.starts_with('.') {
                    return Err("a title must be a plain name (no slashes, not hidden)".into());
                }
                if let Some(dir) = &self.notes_dir {
                    std::fs::create_dir_all(dir)
                        .and_then(|()| std::fs::write(dir.join(format!("{title}.txt")), &text))
                        .map_err(|e| format!("cannot save the note: {e}"))?;
                }
                self.lock_notes().insert(title.clone(), text);
                Ok(format!("saved {title:?}"))
            }
            (Kind::Notes, "list_notes") => {
                let titles: Vec<String> = self.lock_notes().keys().cloned().collect();
                Ok(if titles.is_empty() {
                    "no notes yet".into()
                } else {
                    titles.join("\n")
                })
            }
            (Kind::Notes, "read_note") => {
                let title = arg("title")?;
                self.lock_notes()
                    .get(&title)
                    .cloned()
                    .ok_or_else(|| format!("no note titled {title:?}"))
            }
            (Kind::Clock, "now") => Ok(jiff::Timestamp::now().to_string()),
            (Kind::App, "show_dashboard") => Ok(DASHBOARD.into()),
            (Kind::App, "refresh_dashboard") => {
                static REFRESHES: std::sync::atomic::AtomicU64 =
                    std::sync::atomic::AtomicU64::new(0);
                let n = REFRESHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                Ok(format!("{DASHBOARD} (refresh #{n})"))
            }
            (Kind::Echo, "echo") => arg("text"),
            (_, "fault_stats") if self.faulty => Ok(crate::faults::stats()),
            (Kind::Crash, "crash") => {
                eprintln!(
                    "example-server: crash tool called; exiting with status {}",
                    self.exit_code
                );
                std::process::exit(self.exit_code);
            }
            _ => Err(format!("unknown tool {name:?}")),
        }
    }

    fn lock_notes(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.notes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `file_note`: an input schema with nested objects, arrays, an enum with a default and
/// `$ref`s to `$defs`, and an output schema its structured result follows.
fn file_note_tool() -> Value {
    json!({"name": "file_note", "title": "File a note",
     "description": "Save a note with tags, a priority, its author and reviewers.",
     "inputSchema": {"type": "object",
        "$defs": {"person": {"type": "object", "properties": {
            "name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
            "required": ["name"]}},
        "properties": {
            "title": {"type": "string", "description": "A plain name (no slashes)."},
            "text": {"type": "string"},
            "meta": {"type": "object", "properties": {
                "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "author": {"$ref": "#/$defs/person"},
                "reviewers": {"type": "array", "items": {"$ref": "#/$defs/person"}}}}},
        "required": ["title", "text"]},
     "outputSchema": {"type": "object", "properties": {
        "title": {"type": "string"}, "words": {"type": "integer"},
        "priority": {"type": "string"}, "people": {"type": "integer"}},
        "required": ["title", "words", "priority", "people"]},
     "annotations": {"destructiveHint": false, "idempotentHint": true}})
}

impl Example {
    /// `file_note`: saved like `add_note`, answered as text and as structured content.
    fn file_note(&self, args: &serde_json::Map<String, Value>) -> CallToolResult {
        let meta = args.get("meta").cloned().unwrap_or_default();
        let saved = self.call("add_note", args);
        let Ok(_) = saved else {
            return text_result(saved);
        };
        let title = args
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let words = args
            .get("text")
            .and_then(Value::as_str)
            .map_or(0, |t| t.split_whitespace().count());
        let priority = meta["priority"].as_str().unwrap_or("normal");
        let people = usize::from(meta["author"].is_object())
            + meta["reviewers"].as_array().map_or(0, Vec::len);
        let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
            "filed {title:?}: {words} words, {priority} priority, {people} people"
        ))]);
        result.structured_content =
            Some(json!({"title": title, "words": words, "priority": priority, "people": people}));
        result
    }

    /// `summarize_note`'s messages: the note's text with what to do with it.
    fn summarize_note(&self, args: &serde_json::Map<String, Value>) -> Result<Value, String> {
        let title = args
            .get("title")
            .and_then(Value::as_str)
            .ok_or("missing argument \"title\"")?;
        let text = self
            .lock_notes()
            .get(title)
            .cloned()
            .ok_or_else(|| format!("no note titled {title:?}"))?;
        let style = args.get("style").and_then(Value::as_str).unwrap_or("prose");
        let ask = format!("Summarize the note {title:?} in {style}:\n\n{text}");
        Ok(json!([{"role": "user", "content": {"type": "text", "text": ask}}]))
    }
}

fn text_result(result: Result<String, String>) -> CallToolResult {
    match result {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
    }
}

impl ServerHandler for Example {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = json!({"tools": {"listChanged": false}});
        if matches!(self.kind, Kind::Notes | Kind::App) {
            capabilities["resources"] = json!({"listChanged": false});
        }
        if self.kind == Kind::Notes {
            capabilities["prompts"] = json!({"listChanged": false});
        }
        let capabilities: ServerCapabilities =
            serde_json::from_value(capabilities).unwrap_or_default();
        let name = format!("ahp-proxy-example-{:?}", self.kind).to_lowercase();
        let mut info = rmcp::model::Implementation::new(name, env!("CARGO_PKG_VERSION"));
        if self.kind == Kind::Notes {
            // An icon in `serverInfo`, for clients that show one (the proxy passes it on).
            info.icons = serde_json::from_value(json!([{
                "src": NOTES_ICON, "mimeType": "image/svg+xml", "sizes": ["any"]
            }]))
            .ok();
        }
        ServerConfig::new(capabilities).with_server_info(info)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        crate::faults::TOOLS_LISTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        serde_json::from_value(json!({"tools": self.tools()}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        if let Some(dice) = &self.dice {
            dice.maybe_crash(self.exit_code);
        }
        if self.kind == Kind::Notes && request.name == "file_note" {
            return Ok(self.file_note(&args).into());
        }
        if self.kind == Kind::Clock && request.name == "sleep" {
            let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms.min(600_000))) => {}
                _ = context.ct.cancelled() => {
                    return Err(ErrorData::internal_error("cancelled", None));
                }
            }
            return Ok(text_result(Ok(format!("slept {ms} ms"))).into());
        }
        if !self
            .tools()
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == request.name.as_ref()))
        {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}", request.name),
                None,
            ));
        }
        Ok(text_result(self.call(&request.name, &args)).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        if self.kind != Kind::Notes {
            return Err(ErrorData::method_not_found::<
                rmcp::model::ListPromptsRequestMethod,
            >());
        }
        serde_json::from_value(json!({"prompts": [{"name": "summarize_note",
            "description": "Ask for a summary of one note.",
            "arguments": [{"name": "title", "description": "The note's title.", "required": true},
                          {"name": "style", "description": "bullets or prose (default prose)."}]}]}))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if self.kind != Kind::Notes || request.name != "summarize_note" {
            let message = format!("unknown prompt {:?}", request.name);
            return Err(ErrorData::invalid_params(message, None));
        }
        let messages = self
            .summarize_note(&request.arguments.unwrap_or_default())
            .map_err(|e| ErrorData::invalid_params(e, None))?;
        let result: GetPromptResult = serde_json::from_value(json!({ "messages": messages }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(result.into())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = match self.kind {
            Kind::Notes => json!([{"uriTemplate": "notes:///{title}", "name": "note",
                "description": "One note, by its title.", "mimeType": "text/plain"}]),
            _ => json!([]),
        };
        serde_json::from_value(json!({ "resourceTemplates": templates }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = match self.kind {
            Kind::App => json!([{"uri": APP_URI, "name": "release-dashboard", "mimeType": APP_MIME}]),
            Kind::Notes => Value::Array(
                self.lock_notes()
                    .keys()
                    .map(|t| json!({"uri": format!("notes:///{t}"), "name": t, "mimeType": "text/plain"}))
                    .chain([json!({"uri": NOTES_ICON_URI, "name": "icon.svg", "mimeType": "image/svg+xml"})])
                    .collect(),
            ),
            _ => json!([]),
        };
        serde_json::from_value(json!({ "resources": resources }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = match self.kind {
            Kind::App if request.uri == APP_URI => json!([{
                "uri": APP_URI, "mimeType": APP_MIME, "text": APP_HTML,
                "_meta": {"ui": {"prefersBorder": true}}
            }]),
            Kind::Notes if request.uri == NOTES_ICON_URI => json!([{
                "uri": NOTES_ICON_URI, "mimeType": "image/svg+xml",
                "blob": NOTES_ICON.rsplit(',').next().unwrap_or_default()
            }]),
            Kind::Notes => {
                let title = request.uri.strip_prefix("notes:///").unwrap_or_default();
                match self.lock_notes().get(title) {
                    Some(text) => {
                        json!([{"uri": request.uri, "mimeType": "text/plain", "text": text}])
                    }
                    None => {
                        return Err(ErrorData::resource_not_found(
                            format!("no resource {:?}", request.uri),
                            None,
                        ))
                    }
                }
            }
            _ => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {:?}", request.uri),
                    None,
                ))
            }
        };
        let result: rmcp::model::ReadResourceResult =
            serde_json::from_value(json!({ "contents": contents }))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(result.into())
    }
}
