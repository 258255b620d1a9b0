//! Test harness: runs the real `ahp-proxy` binary on a scratch config and talks to it over
//! real sockets, with the official `ahp` client or a raw WebSocket for malformed input.
#![allow(dead_code)] // each test file uses a different part of the harness

pub mod approver;
pub mod binaries;
pub mod http_session;
pub mod ide;
pub mod raw;
pub mod tagged;
pub mod transcript;

pub use binaries::{examples, proxy};

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use ahp::{Client, ClientConfig, SessionSubscription, SubscriptionEvent};
use ahp_types::actions::ActionEnvelope;
use ahp_types::state::{SessionState, SnapshotState};
use ahp_types::StateAction;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Upper bound for any single wait in a test: a hang guard, not a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The default session every proxy starts with, named by the default provider (`ahp-proxy`).
pub const DEFAULT_SESSION: &str = "ahp-proxy:/default";

/// A scratch folder removed on drop.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    pub fn new(tag: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "ahp-proxy-test-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create scratch dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A stdio front's MCP pipes: read its stdout, write its stdin.
pub type StdioPipes = (tokio::process::ChildStdout, tokio::process::ChildStdin);

/// A running `ahp-proxy serve`, killed on drop.
pub struct Proxy {
    child: Child,
    pub addr: SocketAddr,
    /// `http://…/mcp`, the aggregated MCP endpoint.
    pub mcp_url: String,
    pub url: String,
    logs: Arc<Mutex<Vec<String>>>,
    /// Its scratch folder, also its `XDG_RUNTIME_DIR` (where it writes its approval key).
    dir: ScratchDir,
}

impl Proxy {
    /// Start the binary on `config` (proxy.toml text) with OS-chosen ports for AHP and the
    /// MCP HTTP front.
    pub fn start(config: &str) -> Self {
        Self::launch(config, false).0
    }

    /// Start the binary as a harness would: `serve --stdio`, MCP on its stdin/stdout (as
    /// tokio pipes, for an rmcp client), AHP on an OS-chosen port. Call inside a runtime.
    pub fn start_stdio(config: &str) -> (Self, StdioPipes) {
        let (proxy, pipes) = Self::launch(config, true);
        (proxy, pipes.expect("stdio pipes"))
    }

    /// Like `start_stdio`, with AHP where the config says (no `--listen`): for copies that
    /// share one proxy.toml.
    pub fn start_stdio_as_configured(config: &str) -> (Self, StdioPipes) {
        let (proxy, pipes) = Self::launch_with(config, true, "", &[], LogFormat::Json);
        (proxy, pipes.expect("stdio pipes"))
    }

    /// Start the binary with AHP on `listen` (e.g. `0.0.0.0:0`) and extra environment.
    pub fn start_on(config: &str, listen: &str, env: &[(&str, &str)]) -> Self {
        Self::launch_with(config, false, listen, env, LogFormat::Json).0
    }

    /// Start the binary with the MCP HTTP front on `mcp_listen` (e.g. `0.0.0.0:0`) and extra
    /// environment; `Proxy::mcp_url` is then on loopback.
    pub fn start_mcp_on(config: &str, mcp_listen: &str, env: &[(&str, &str)]) -> Self {
        let (command, dir) = Self::command_mcp(config, "127.0.0.1:0", mcp_listen, env);
        let mut proxy = Self::spawned(command, dir, false).0;
        proxy.mcp_url = proxy.mcp_url.replace("://0.0.0.0:", "://127.0.0.1:");
        proxy
    }

    /// Start the binary with its text log (`--log-format text`, what a person reads) and
    /// `RUST_LOG=debug`.
    pub fn start_with_text_log(config: &str) -> Self {
        Self::launch_with(
            config,
            false,
            "127.0.0.1:0",
            &[("RUST_LOG", "debug")],
            LogFormat::Text,
        )
        .0
    }

    /// Start the binary with its descriptor limit (`RLIMIT_NOFILE`, soft and hard) at
    /// `limit`, as `ulimit -n` would set it.
    pub fn start_with_descriptor_limit(config: &str, limit: u64) -> Self {
        let (mut command, dir) = Self::command(config, false, "127.0.0.1:0", &[], LogFormat::Json);
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe and touches only the child.
        unsafe {
            command.pre_exec(move || {
                let wanted = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Self::spawned(command, dir, false).0
    }

    fn launch(config: &str, stdio: bool) -> (Self, Option<StdioPipes>) {
        Self::launch_with(config, stdio, "127.0.0.1:0", &[], LogFormat::Json)
    }

    fn launch_with(
        config: &str,
        stdio: bool,
        listen: &str,
        env: &[(&str, &str)],
        log_format: LogFormat,
    ) -> (Self, Option<StdioPipes>) {
        let (command, dir) = Self::command(config, stdio, listen, env, log_format);
        Self::spawned(command, dir, stdio)
    }

    /// The command that runs the binary on `config` (written into a scratch folder).
    fn command(
        config: &str,
        stdio: bool,
        listen: &str,
        env: &[(&str, &str)],
        log_format: LogFormat,
    ) -> (Command, ScratchDir) {
        let mcp_listen = if stdio { None } else { Some("127.0.0.1:0") };
        Self::command_with(config, listen, mcp_listen, env, log_format)
    }

    /// The command that runs the binary with MCP over HTTP on `mcp_listen`.
    fn command_mcp(
        config: &str,
        listen: &str,
        mcp_listen: &str,
        env: &[(&str, &str)],
    ) -> (Command, ScratchDir) {
        Self::command_with(config, listen, Some(mcp_listen), env, LogFormat::Json)
    }

    /// `command`'s body: `--stdio` when `mcp_listen` is `None`.
    fn command_with(
        config: &str,
        listen: &str,
        mcp_listen: Option<&str>,
        env: &[(&str, &str)],
        log_format: LogFormat,
    ) -> (Command, ScratchDir) {
        // Tests build HTTP clients (rmcp's, reqwest) once a proxy runs: TLS must be ready.
        ahp_proxy::supervisor::https::install_provider();
        let dir = ScratchDir::new("proxy");
        let config_path = dir.path().join("proxy.toml");
        std::fs::write(&config_path, with_trust(config)).expect("write config");
        let mut command = Command::new(proxy());
        command
            .args(["--log-format", log_format.flag(), "--config"])
            .arg(&config_path)
            .arg("serve")
            .env(
                "RUST_LOG",
                std::env::var("PROXY_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env_remove("AHP_PROXY_TOKEN")
            .env_remove("AHP_PROXY_MCP_TOKEN")
            // Its approval key goes to `<scratch>/ahp-proxy/`, read back by `approval_key`.
            .env("XDG_RUNTIME_DIR", dir.path())
            // Its trust decisions go to `<scratch>/data/ahp-proxy/trusted.json`.
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .envs(env.iter().copied())
            .stderr(Stdio::piped());
        if !listen.is_empty() {
            command.args(["--listen", listen]);
        }
        match mcp_listen {
            None => command
                .arg("--stdio")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped()),
            Some(mcp_listen) => command
                .args(["--mcp-listen", mcp_listen])
                .stdin(Stdio::null())
                .stdout(Stdio::null()),
        };
        (command, dir)
    }

    /// Spawn `command` and wait until the proxy says where it listens.
    fn spawned(mut command: Command, dir: ScratchDir, stdio: bool) -> (Self, Option<StdioPipes>) {
        let mut child = command.spawn().expect("spawn ahp-proxy");
        let pipes = stdio.then(|| {
            let stdout = child.stdout.take().expect("stdout is piped");
            let stdin = child.stdin.take().expect("stdin is piped");
            (
                tokio::process::ChildStdout::from_std(stdout).expect("async stdout"),
                tokio::process::ChildStdin::from_std(stdin).expect("async stdin"),
            )
        });
        let stderr = child.stderr.take().expect("stderr is piped");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        let (mcp_tx, mcp_rx) = mpsc::channel();
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("AHP endpoint listening") && !line.starts_with('{') {
                    if let Some(addr) = text_field(&line, "addr") {
                        let _ = addr_tx.send(addr);
                    }
                }
                if line.contains("MCP endpoint listening") && !line.starts_with('{') {
                    if let Some(url) = text_field(&line, "url") {
                        let _ = mcp_tx.send(url);
                    }
                }
                if let Ok(event) = serde_json::from_str::<Value>(&line) {
                    if event["fields"]["message"] == "AHP endpoint listening" {
                        if let Some(addr) = event["fields"]["addr"].as_str() {
                            let _ = addr_tx.send(addr.to_string());
                        }
                    }
                    if event["fields"]["message"] == "MCP endpoint listening" {
                        if let Some(url) = event["fields"]["url"].as_str() {
                            let _ = mcp_tx.send(url.to_string());
                        }
                    }
                }
                sink.lock().expect("log lock").push(line);
            }
        });
        let addr: SocketAddr = match addr_rx.recv_timeout(PATIENCE) {
            Ok(addr) => {
                let mut addr: SocketAddr = addr.parse().expect("listen address");
                // Bound to every interface: reach it on loopback.
                if addr.ip().is_unspecified() {
                    addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
                }
                addr
            }
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "proxy did not report its address; stderr:\n{}",
                    logs.lock().expect("log lock").join("\n")
                );
            }
        };
        // The MCP front logs its address before the AHP endpoint does (same reader thread).
        let mcp_url = mcp_rx.try_recv().unwrap_or_default();
        (
            Self {
                child,
                mcp_url,
                url: format!("ws://{addr}"),
                addr,
                logs,
                dir,
            },
            pipes,
        )
    }

    /// The folder the proxy writes its approval key to (its `XDG_RUNTIME_DIR`); the terminal's
    /// commands find the key there when run with it.
    pub fn runtime_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The approval key's file, as the proxy writes it for its AHP port.
    pub fn key_file(&self) -> PathBuf {
        self.runtime_dir()
            .join("ahp-proxy")
            .join(format!("approval-{}.key", self.addr.port()))
    }

    /// The approval key the proxy drew (`None` with a token, which is the key then).
    pub fn approval_key(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.key_file()).ok()?;
        Some(text.trim().to_string())
    }

    /// The AHP URL with the approval key: a client connecting there may decide held calls.
    pub fn approver_url(&self) -> String {
        let key = self
            .approval_key()
            .expect("the proxy wrote its approval key");
        format!("{}/?token={key}", self.url)
    }

    /// The console's URL, with the approval key when there is one (as the banner shows it
    /// on a terminal).
    pub fn console_url(&self) -> String {
        match self.approval_key() {
            Some(key) => format!("http://{}/?token={key}", self.addr),
            None => format!("http://{}/", self.addr),
        }
    }

    /// Everything the proxy wrote to stderr so far.
    pub fn logs(&self) -> String {
        self.logs.lock().expect("log lock").join("\n")
    }

    /// How many stderr lines so far contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        let logs = self.logs.lock().expect("log lock");
        logs.iter().filter(|line| line.contains(needle)).count()
    }

    /// Wait (at most [`PATIENCE`]) until a stderr line contains `needle`; returns that line.
    pub fn wait_for_log(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let found = {
                let logs = self.logs.lock().expect("log lock");
                logs.iter().find(|line| line.contains(needle)).cloned()
            };
            if let Some(line) = found {
                return line;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no log line with {needle:?}; stderr:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The stderr lines up to and including the `count`-th line `want` accepts, waiting (at
    /// most [`PATIENCE`]) for it. What comes before a line in the log was written before it,
    /// so this is a fence: what one task logged before that line is all there.
    pub fn log_until(&self, count: usize, want: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            {
                let logs = self.logs.lock().expect("log lock");
                let mut matched = 0;
                if let Some(at) = logs.iter().position(|line| {
                    matched += usize::from(want(line));
                    matched == count
                }) {
                    return logs[..=at].to_vec();
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "fewer than {count} log lines of the kind asked for; stderr:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait (at most [`PATIENCE`]) until `count` stderr lines contain `needle`.
    pub fn wait_for_log_count(&self, needle: &str, count: usize) {
        self.log_until(count, |line| line.contains(needle));
    }

    /// A handle on the captured stderr that outlives `self` (for tests that terminate it).
    pub fn log_sink(&self) -> Arc<Mutex<Vec<String>>> {
        self.logs.clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send SIGTERM and wait for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "proxy did not exit after SIGTERM; stderr:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// How the proxy under test logs.
#[derive(Clone, Copy)]
enum LogFormat {
    Json,
    Text,
}

impl LogFormat {
    fn flag(self) -> &'static str {
        match self {
            LogFormat::Json => "json",
            LogFormat::Text => "text",
        }
    }
}

/// `name=value` in a text log line (the value ends at the next space).
fn text_field(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!(" {name}="))? + name.len() + 2;
    let value = line[start..].split(' ').next()?;
    Some(value.to_string())
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bundled example server serving streamable HTTP on a free loopback port, killed on
/// drop (so a failing test does not leave it running).
pub struct HttpExampleServer {
    child: Child,
    /// `http://127.0.0.1:<port>/mcp` (`/sse` for the legacy transport)
    pub url: String,
}

impl HttpExampleServer {
    /// `ahp-proxy-example-server <kind> --http 127.0.0.1:<free port> <extra…>`.
    pub fn start(kind: &str, extra: &[&str]) -> Self {
        Self::serve(kind, "--http", "/mcp", extra)
    }

    /// `ahp-proxy-example-server <kind> --sse 127.0.0.1:<free port>`: the legacy HTTP+SSE
    /// transport, its event stream at `url` (`…/sse`).
    pub fn start_sse(kind: &str) -> Self {
        Self::serve(kind, "--sse", "/sse", &[])
    }

    fn serve(kind: &str, transport: &str, path: &str, extra: &[&str]) -> Self {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            listener.local_addr().expect("local addr").port()
        };
        let child = Command::new(examples())
            .args([kind, transport, &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn example server");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}{path}"),
        }
    }
}

impl Drop for HttpExampleServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `config` as tests run it: a test that says nothing of `[trust]` is not about trust, so
/// every source's servers run as declared, as they did before trust existed; a test about
/// trust writes its own `[trust]`.
pub fn with_trust(config: &str) -> String {
    if config.contains("[trust]") {
        return config.to_string();
    }
    format!("{config}\n[trust]\nmanifests = \"trusted\"\nplugins = \"trusted\"\ndirectories = \"trusted\"\nclient_plugins = \"trusted\"\n")
}

/// An official `ahp` client connected over the official `ahp-ws` transport.
pub async fn client(proxy: &Proxy) -> Client {
    client_at(&proxy.url).await
}

/// An official `ahp` client connected to `url` over the official `ahp-ws` transport.
pub async fn client_at(url: &str) -> Client {
    let transport = ahp_ws::WebSocketTransport::connect(url)
        .await
        .expect("connect with ahp-ws");
    Client::connect(transport, ClientConfig::default())
        .await
        .expect("ahp client")
}

/// An official client that presented the approval key (it may decide held calls) and has
/// completed `initialize` as `client_id`.
pub async fn deciding_client(proxy: &Proxy, client_id: &str) -> Client {
    let client = client_at(&proxy.approver_url()).await;
    client
        .initialize(client_id.into(), vec!["1.0.0".into()], vec![])
        .await
        .expect("initialize");
    client
}

/// An official client that has completed `initialize` as `client_id` (version 1.0.0, no
/// initial subscriptions), without the approval key: it watches, and decides nothing held.
pub async fn initialized_client(proxy: &Proxy, client_id: &str) -> Client {
    let client = client(proxy).await;
    client
        .initialize(client_id.into(), vec!["1.0.0".into()], vec![])
        .await
        .expect("initialize");
    client
}

/// `serve --stdio` on `config` with a raw MCP harness on its pipes, initialized. Call inside
/// a runtime.
pub async fn stdio_harness(config: &str) -> (Proxy, raw::RawClient) {
    let (proxy, (stdout, stdin)) = Proxy::start_stdio(config);
    let mut harness = raw::RawClient::stdio(stdout, stdin);
    harness
        .request(
            "initialize",
            Some(r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}"#),
            &mut |_, _| String::new(),
        )
        .await;
    harness.notify("notifications/initialized", None).await;
    (proxy, harness)
}

/// Next action envelope on a subscription (skipping other notifications).
pub async fn next_action(sub: &mut SessionSubscription) -> ActionEnvelope {
    loop {
        let event = tokio::time::timeout(PATIENCE, sub.recv())
            .await
            .expect("an event within the patience window")
            .expect("subscription open");
        if let SubscriptionEvent::Action(envelope) = event {
            return envelope;
        }
    }
}

/// The activity bits of a session status (the read and archived flags left out).
pub const ACTIVITY: u64 = 0b1_1111;

/// The activity a `root/sessionSummaryChanged` of the default session announces, if the
/// frame is one and announces a status.
pub fn announced_status(frame: &Value) -> Option<u64> {
    (frame["method"] == "root/sessionSummaryChanged"
        && frame["params"]["session"] == DEFAULT_SESSION)
        .then(|| frame["params"]["changes"]["status"].as_u64())
        .flatten()
        .map(|s| s & ACTIVITY)
}

/// A raw WebSocket client, for frames the official client would never send.
pub struct Raw {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Notifications received while waiting for responses.
    pub notifications: Vec<Value>,
}

/// How a raw connection ended.
#[derive(Debug)]
pub enum Ending {
    Closed(Option<CloseFrame>),
    Dropped,
}

impl Raw {
    pub async fn connect(proxy: &Proxy) -> Self {
        Self::connect_url(&proxy.url).await
    }

    /// Connect to `url` as given (a query, a token parameter).
    pub async fn connect_url(url: &str) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("raw websocket connect");
        Self {
            ws,
            next_id: 1,
            notifications: Vec::new(),
        }
    }

    /// Connect with a kernel receive buffer of about `bytes`, so that a client which stops
    /// reading backs its connection up after little data (a stalled client).
    pub async fn connect_with_recv_buffer(proxy: &Proxy, bytes: u32) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("tcp socket");
        socket.set_recv_buffer_size(bytes).expect("SO_RCVBUF");
        let stream = socket.connect(proxy.addr).await.expect("tcp connect");
        let (ws, _) =
            tokio_tungstenite::client_async(proxy.url.as_str(), MaybeTlsStream::Plain(stream))
                .await
                .expect("websocket handshake");
        Self {
            ws,
            next_id: 1,
            notifications: Vec::new(),
        }
    }

    pub async fn send_text(&mut self, text: impl Into<String>) {
        self.ws
            .send(Message::Text(text.into().into()))
            .await
            .expect("send text frame");
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.ws
            .send(Message::Binary(bytes.into()))
            .await
            .expect("send binary frame");
    }

    /// Next frame of any kind.
    async fn frame(&mut self) -> Message {
        tokio::time::timeout(PATIENCE, self.ws.next())
            .await
            .expect("a frame within the patience window")
            .expect("connection open")
            .expect("valid frame")
    }

    /// Next JSON text frame.
    pub async fn recv(&mut self) -> Value {
        loop {
            match self.frame().await {
                Message::Text(text) => {
                    return serde_json::from_str(text.as_str()).expect("JSON frame")
                }
                Message::Close(frame) => panic!("connection closed: {frame:?}"),
                _ => continue,
            }
        }
    }

    /// Skip frames until one whose text contains `needle`.
    pub async fn until_text(&mut self, needle: &str) {
        while !self.recv().await.to_string().contains(needle) {}
    }

    /// Read until the host has pinged this connection `count` times (each after an idle
    /// period without a frame from it), answering each ping; other frames are dropped.
    pub async fn until_pinged(&mut self, count: usize) {
        let mut pings = 0;
        while pings < count {
            match self.frame().await {
                // tungstenite queues the pong; the next read sends it.
                Message::Ping(_) => pings += 1,
                Message::Close(frame) => panic!("connection closed: {frame:?}"),
                _ => {}
            }
        }
    }

    /// Next frame that is a response (has an `id` and no `method`).
    pub async fn response(&mut self) -> Value {
        loop {
            let frame = self.recv().await;
            if frame.get("method").is_none() {
                return frame;
            }
            self.notifications.push(frame);
        }
    }

    /// Send a request with the next integer id and wait for its response.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send_text(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )
        .await;
        let response = self.response().await;
        assert_eq!(
            response["id"],
            json!(id),
            "response out of order: {response}"
        );
        response
    }

    /// `ping`, asserting the spec's `"result": null` answer.
    pub async fn ping(&mut self) {
        let pong = self
            .request("ping", json!({"channel": "ahp-root://"}))
            .await;
        assert_eq!(
            pong.get("result"),
            Some(&Value::Null),
            "ping answers null: {pong}"
        );
    }

    /// The first notification, queued or still to come, that `want` accepts; the ones
    /// before it are dropped.
    pub async fn notification(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.notifications.iter().position(&want) {
            let found = self.notifications.remove(at);
            self.notifications.drain(..at);
            return found;
        }
        self.notifications.clear();
        loop {
            let frame = self.recv().await;
            if frame.get("method").is_some() && want(&frame) {
                return frame;
            }
        }
    }

    /// The activity bits of the status `listSessions` reports for the default session.
    pub async fn listed_status(&mut self) -> u64 {
        let list = self
            .request("listSessions", json!({"channel": "ahp-root://"}))
            .await;
        let item = list["result"]["items"]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["resource"] == DEFAULT_SESSION))
            .unwrap_or_else(|| panic!("no default session in {list}"))
            .clone();
        item["status"].as_u64().expect("a status") & ACTIVITY
    }

    /// The activity bits of the default session's own `status`, as a fresh `subscribe`
    /// snapshot shows it.
    pub async fn snapshot_status(&mut self) -> u64 {
        let subscribed = self
            .request("subscribe", json!({"channel": DEFAULT_SESSION}))
            .await;
        subscribed["result"]["snapshot"]["state"]["status"]
            .as_u64()
            .unwrap_or_else(|| panic!("a session snapshot: {subscribed}"))
            & ACTIVITY
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send_text(json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string())
            .await;
    }

    /// `initialize` as `client_id` with the given subscriptions; returns the result.
    pub async fn initialize(&mut self, client_id: &str, subscriptions: &[&str]) -> Value {
        let response = self
            .request(
                "initialize",
                json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": client_id, "initialSubscriptions": subscriptions}),
            )
            .await;
        assert!(
            response.get("result").is_some(),
            "initialize failed: {response}"
        );
        response["result"].clone()
    }

    /// Read until the server closes the connection (skipping data frames).
    pub async fn ending(&mut self) -> Ending {
        loop {
            match tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("the connection ends within the patience window")
            {
                Some(Ok(Message::Close(frame))) => return Ending::Closed(frame),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Ending::Dropped,
            }
        }
    }

    /// Count text frames until the connection ends.
    pub async fn drain_until_end(&mut self) -> (usize, Ending) {
        let mut frames = 0;
        loop {
            match tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("the connection ends within the patience window")
            {
                Some(Ok(Message::Text(_))) => frames += 1,
                Some(Ok(Message::Close(frame))) => return (frames, Ending::Closed(frame)),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return (frames, Ending::Dropped),
            }
        }
    }
}

/// A legal client action that takes about `bytes` bytes, starting with `marker`: an active
/// client record whose one tool has a long description (titles are capped at 1 KiB, so
/// tests that need big frames use this).
pub fn padded_action(client_id: &str, marker: &str, bytes: usize) -> StateAction {
    serde_json::from_value(json!({"type": "session/activeClientSet", "activeClient": {
        "clientId": client_id,
        "tools": [{"name": "padding", "description": format!("{marker} {}", "x".repeat(bytes)),
                   "inputSchema": {"type": "object"}}]}}))
    .expect("a valid action")
}

/// The marker of a [`padded_action`], if `action` is one.
pub fn padding_marker(action: &StateAction) -> Option<&str> {
    match action {
        StateAction::SessionActiveClientSet(a) => a
            .active_client
            .tools
            .first()
            .and_then(|t| t.description.as_deref())
            .and_then(|d| d.split(' ').next()),
        _ => None,
    }
}

/// Error code of a JSON-RPC error response.
pub fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error response, got {response}"))
}

/// A `[servers.<name>]` table running an example server with extra arguments.
pub fn server(name: &str, kind: &str, extra: &[&str]) -> String {
    let examples = examples();
    let mut args = vec![kind.to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    format!(
        "[servers.{name}]\ncommand = {examples:?}\nargs = {}\n",
        serde_json::to_string(&args).unwrap()
    )
}

/// An official client subscribed to the default session, with a mirror kept by the
/// official reducers.
pub struct Watcher {
    pub client: Client,
    pub sub: SessionSubscription,
    pub mirror: SessionState,
}

impl Watcher {
    pub async fn open(proxy: &Proxy) -> Self {
        Self::open_as(proxy, "supervisor-test").await
    }

    /// An official client initialized as `client_id`, subscribed to the default session.
    pub async fn open_as(proxy: &Proxy, client_id: &str) -> Self {
        let client = initialized_client(proxy, client_id).await;
        Self::subscribed(client).await
    }

    /// Two clients, `a` then `b`, each initialized and subscribed to the default session.
    pub async fn pair(proxy: &Proxy) -> (Self, Self) {
        let a = Self::open_as(proxy, "a").await;
        let b = Self::open_as(proxy, "b").await;
        (a, b)
    }

    /// Like `open`, as `client_id`, declaring `capabilities.mcpApps` (through the official
    /// client's generic request: its `initialize` helper declares no capabilities).
    pub async fn open_with_apps(proxy: &Proxy, client_id: &str) -> Self {
        let client = client(proxy).await;
        let _: Value = client
            .request(
                "initialize",
                json!({
                    "channel": "ahp-root://", "clientId": client_id,
                    "protocolVersions": ["1.0.0"], "capabilities": {"mcpApps": {}}
                }),
            )
            .await
            .expect("initialize with mcpApps");
        Self::subscribed(client).await
    }

    /// `client` (initialized) subscribed to the default session.
    pub async fn subscribed(client: Client) -> Self {
        let (result, sub) = client.subscribe(DEFAULT_SESSION.into()).await.unwrap();
        let mirror = match result.snapshot.expect("snapshot").state {
            SnapshotState::Session(s) => *s,
            other => panic!("expected a session, got {other:?}"),
        };
        Self {
            client,
            sub,
            mirror,
        }
    }

    /// Every mcpServer (top-level or child) in the mirror, as JSON.
    pub fn servers(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for c in self.mirror.customizations.iter().flatten() {
            let c = serde_json::to_value(c).unwrap();
            if c["type"] == "mcpServer" {
                out.push(c.clone());
            }
            for child in c["children"].as_array().into_iter().flatten() {
                if child["type"] == "mcpServer" {
                    out.push(child.clone());
                }
            }
        }
        out
    }

    pub fn server(&self, name: &str) -> Value {
        self.servers()
            .into_iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no server {name} in {:?}", self.servers()))
    }

    pub fn id(&self, name: &str) -> String {
        self.server(name)["id"].as_str().unwrap().to_string()
    }

    pub fn name_of(&self, id: &str) -> String {
        self.servers()
            .into_iter()
            .find(|s| s["id"] == id)
            .map(|s| s["name"].as_str().unwrap().to_string())
            .unwrap_or_default()
    }

    /// Apply the next action to the mirror; returns `(server name, state)` when it changed
    /// a server's state (the host's state changes and echoes of start/stop requests).
    pub async fn step(&mut self) -> Option<(String, Value)> {
        let envelope = next_action(&mut self.sub).await;
        let _ = ahp::reducers::apply_action_to_session(&mut self.mirror, &envelope.action);
        let id = match &envelope.action {
            StateAction::SessionMcpServerStateChanged(a) => &a.id,
            StateAction::SessionMcpServerStartRequested(a) => &a.id,
            StateAction::SessionMcpServerStopRequested(a) => &a.id,
            _ => return None,
        };
        // A server's last state may come just after its container was removed: the reducers
        // ignore it, and so does the watcher.
        let name = self.name_of(id);
        if name.is_empty() {
            return None;
        }
        Some((name.clone(), self.server(&name)["state"].clone()))
    }

    /// Wait until server `name` is in state `kind`; returns that state. Every state change
    /// seen on the way is recorded in `seen` as `name kind`.
    pub async fn until(&mut self, name: &str, kind: &str, seen: &mut Vec<String>) -> Value {
        let current = self.server(name)["state"].clone();
        if current["kind"] == kind {
            return current;
        }
        loop {
            if let Some((who, state)) = self.step().await {
                seen.push(format!("{who} {}", state["kind"].as_str().unwrap()));
                if who == name && state["kind"] == kind {
                    return state;
                }
            }
        }
    }

    pub async fn dispatch(&self, action: Value) {
        let action: StateAction = serde_json::from_value(action).unwrap();
        self.client
            .dispatch(DEFAULT_SESSION.into(), action)
            .await
            .unwrap();
    }
}

/// The fields of `/proc/<pid>/stat` after the command name, or None when it is gone.
pub fn stat(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Whether `pid` runs (a zombie waiting for its reaper does not).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|fields| fields.first().is_some_and(|state| state != "Z"))
}

/// Wait until `pid` has used no CPU for half a second: what it holds then is what it keeps,
/// not what it is busy with. Still busy after [`PATIENCE`] fails the test.
pub async fn until_idle(pid: u32) {
    let ticks = || -> u64 {
        stat(pid).map_or(0, |f| {
            // utime and stime: fields 14 and 15 of /proc/<pid>/stat (12 and 13 after the name).
            f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
                + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        })
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut last = ticks();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = ticks();
        if now == last {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} was never idle for half a second"
        );
        last = now;
    }
}

/// Resident memory of `pid` in KiB (`VmRSS`), 0 when it is gone.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A KiB figure of `/proc/<pid>/status` (`field` with its colon, e.g. `VmHWM:`), 0 when
/// `pid` is gone.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Every process id in `/proc`.
pub fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Every live process below `root` (children, grandchildren, …), by parent links.
pub fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = pids()
        .into_iter()
        .filter(|pid| alive(*pid))
        .filter_map(|pid| Some((pid, stat(pid)?.get(1)?.parse().ok()?)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Live (not zombie) child processes of `parent`.
pub fn child_pids(parent: u32) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|pid| {
            stat(*pid).is_some_and(|fields| {
                fields.first().is_some_and(|state| state != "Z")
                    && fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(parent)
            })
        })
        .collect()
}

/// Inotify watches process `pid` holds (from `/proc/<pid>/fdinfo`).
#[allow(dead_code)]
pub fn inotify_watches(pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("inotify wd:"))
                .count()
        })
        .sum()
}
