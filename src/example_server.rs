//! The small real MCP servers the bundled examples launch (`ahp-proxy example-server <kind>`):
//! notes, clock, an MCP App, an echo for benchmarks, and two that fail on purpose; any of
//! them can also misbehave on demand (`--fault`, see `example_faults`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use crate::example_faults::{Dice, Fault};

/// Which example to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Notes: add, list and read short notes (kept in `NOTES_DIR` when set).
    Notes,
    /// Clock: the current time, and a `sleep` tool.
    Clock,
    /// An MCP App: a `ui://` page and a tool whose `_meta.ui.resourceUri` points at it.
    App,
    /// Echo: returns its input; the benchmark baseline.
    Echo,
    /// Comes up, then crashes on demand: its `crash` tool exits the process.
    Crash,
    /// Fails to start: prints an error on stderr and exits 1 before the MCP handshake.
    Fail,
    /// Every MCP feature a proxy must forward, for end-to-end tests (see `features_server`).
    Features,
}

/// How to run it.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Which example server.
    #[arg(value_enum)]
    pub kind: Kind,
    /// Serve streamable HTTP on this address (`/mcp`) instead of stdio.
    #[arg(long)]
    pub http: Option<std::net::SocketAddr>,
    /// With `--http`: answer 401 unless this header (`name=value`) is present.
    #[arg(long)]
    pub require_header: Option<String>,
    /// Exit this many milliseconds after start-up (a crash for tests and demos).
    #[arg(long)]
    pub exit_after_ms: Option<u64>,
    /// Exit status for `--exit-after-ms` and the `crash` tool.
    #[arg(long, default_value_t = 3)]
    pub exit_code: i32,
    /// With `--exit-after-ms`: only crash if this file does not exist yet (then create it),
    /// so the server crashes once and comes up normally after a restart.
    #[arg(long)]
    pub once: Option<std::path::PathBuf>,
    /// Misbehaviour for fault tests.
    #[command(flatten)]
    pub faults: crate::example_faults::FaultOptions,
}

/// Run the example until its client goes away. Returns the process exit status.
pub fn run(options: Options) -> i32 {
    if options.kind == Kind::Fail {
        eprintln!("example-server: refusing to start: this server fails on purpose");
        eprintln!("example-server: (it shows how a server that cannot start looks in AHP)");
        return 1;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("example-server: cannot start the runtime: {error}");
            return 1;
        }
    };
    runtime.block_on(serve(options))
}

async fn serve(options: Options) -> i32 {
    if let Some(ms) = options.exit_after_ms {
        let crash = match &options.once {
            Some(marker) if marker.exists() => false,
            Some(marker) => std::fs::write(marker, b"crashed once\n").is_ok(),
            None => true,
        };
        if crash {
            let code = options.exit_code;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                eprintln!("example-server: exiting with status {code} as asked (--exit-after-ms)");
                std::process::exit(code);
            });
        }
    }
    if !crate::example_faults::prepare(&options.faults, options.exit_code).await {
        return 0;
    }
    match options.kind {
        Kind::Features => serve_with(crate::features_server::Features::default(), options).await,
        kind => {
            let mut example = Example::new(kind, options.exit_code);
            example.faulty = options.faults.fault.is_some();
            if options.faults.is(Fault::CrashRandom) {
                example.dice = Some(Dice::new(options.faults.seed, options.faults.fault_rate));
            }
            serve_with(example, options).await
        }
    }
}

async fn serve_with<S: ServerHandler + Clone>(server: S, options: Options) -> i32 {
    match options.http {
        Some(addr) => serve_http(server, addr, options.require_header).await,
        None => {
            let (stdin, stdout) = rmcp::transport::stdio_pipes();
            let stdout = crate::example_faults::stdout(&options.faults, stdout);
            match server.serve((stdin, stdout)).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                    0
                }
                Err(error) => {
                    eprintln!("example-server: MCP handshake failed: {error}");
                    1
                }
            }
        }
    }
}

async fn serve_http<S: ServerHandler + Clone>(
    server: S,
    addr: std::net::SocketAddr,
    required: Option<String>,
) -> i32 {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("example-server: cannot listen on {addr}: {error}");
            return 1;
        }
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let required = required.and_then(|r| {
        r.split_once('=')
            .map(|(name, value)| (name.to_ascii_lowercase(), value.to_string()))
    });
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let service = service.clone();
        let required = required.clone();
        tokio::spawn(async move {
            let gate = tower_gate(service, required);
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), TowerToHyperService::new(gate))
                .await;
        });
    }
}

type HttpResponse =
    http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>>;

/// Answer 401 unless the required header is present; otherwise hand over to rmcp.
fn tower_gate<S>(
    inner: S,
    required: Option<(String, String)>,
) -> tower::util::BoxCloneService<
    http::Request<hyper::body::Incoming>,
    HttpResponse,
    std::convert::Infallible,
>
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = HttpResponse,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    use http_body_util::BodyExt;
    tower::util::BoxCloneService::new(tower::service_fn(
        move |request: http::Request<hyper::body::Incoming>| {
            let inner = inner.clone();
            let required = required.clone();
            async move {
                if let Some((name, value)) = &required {
                    let ok = request
                        .headers()
                        .get(name.as_str())
                        .is_some_and(|v| v.as_bytes() == value.as_bytes());
                    if !ok {
                        let body =
                            http_body_util::Full::new(bytes::Bytes::from_static(b"unauthorized"))
                                .map_err(|never| match never {})
                                .boxed();
                        let mut response = http::Response::new(body);
                        *response.status_mut() = http::StatusCode::UNAUTHORIZED;
                        return Ok(response);
                    }
                }
                tower::ServiceExt::oneshot(inner, request).await
            }
        },
    ))
}

const APP_URI: &str = "ui://release-dashboard/view.html";
const APP_MIME: &str = "text/html;profile=mcp-app";
const APP_HTML: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Release dashboard</title></head>
<body><h1>Release dashboard</h1><p id="status">Waiting for the tool result…</p>
<script>
window.addEventListener("message", (event) => {
  const data = event.data || {};
  if (data.method === "ui/notifications/tool-result") {
    document.getElementById("status").textContent = JSON.stringify(data.params);
  }
});
</script></body></html>
"#;

#[derive(Clone)]
struct Example {
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
    fn new(kind: Kind, exit_code: i32) -> Self {
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
            dice: None,
            faulty: false,
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
                 "inputSchema": {"type": "object", "properties": {}}},
                {"name": "read_note", "description": "The text of one note.",
                 "inputSchema": text_arg("title", "the note's title")},
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
            Kind::Fail | Kind::Features => json!([]),
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
            (Kind::App, "show_dashboard" | "refresh_dashboard") => {
                Ok("Release 1.4.0: 12 merged, 2 open, CI green.".into())
            }
            (Kind::Echo, "echo") => arg("text"),
            (_, "fault_stats") if self.faulty => Ok(crate::example_faults::stats()),
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
        let capabilities: ServerCapabilities =
            serde_json::from_value(capabilities).unwrap_or_default();
        let name = format!("ahp-proxy-example-{:?}", self.kind).to_lowercase();
        ServerConfig::new(capabilities).with_server_info(rmcp::model::Implementation::new(
            name,
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        crate::example_faults::TOOLS_LISTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
