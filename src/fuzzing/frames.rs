//! The AHP frame handler target: text frames decoded and dispatched on a real `Host` in
//! memory (no sockets), on up to three connections, with the outboxes drained and checked.
//!
//! Input: one frame per line. `@N ` before a frame sends it on connection N (0-2, default 0);
//! `@N close` ends connection N as its socket would (a fresh one takes the slot) and
//! `@N binary` is a binary frame; `!event` lines happen on the host's side (see
//! `host_event`), and a token from `authenticate` is tried as a server would (`supervise`).
//! Each input gets a fresh host showing a plugin with a ready `mcpApp` server (so `mcp://`
//! channels resolve), a server asking for authorization, and a harness tool call paused for
//! it; `resource*` commands act inside a scratch folder, whose `file://` URI replaces every
//! `$W` in the input. Every client's mirror of the channels it follows (see `mirror`) must
//! equal the host's state as that client is shown it. `AHP_PROXY_FUZZ_TRACE=1` prints every
//! frame in and out (to read what a crashing input did).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use ahp_types::actions::SessionCustomizationsChangedAction;
use ahp_types::StateAction;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::client_view::ClientView;
use super::scratch::{self, Scratch};
use crate::ahp::commands::{After, ConnectionProtocol};
use crate::ahp::mcp_channel::McpChannels;
use crate::ahp::Services;
use crate::config::Config;
use crate::host::{Attachment, Host, HARNESS_CHAT_URI};
use crate::jsonrpc::{self, Incoming};
use crate::mirror::{CallStart, Turns};
use crate::supervisor::connections::Connections;
use crate::supervisor::{AuthReason, Failure, Request, Requests, Served, ServerEvent, Status};

/// Connections an input can address.
const SLOTS: usize = 3;

/// Id of the plugin's server that is ready and serves an `mcpApp`.
pub const APP_SERVER: &str = "file:///fuzz/plugin/.mcp.json#mcp=app";

/// Id of the plugin's server that waits for authorization.
pub const LOCKED_SERVER: &str = "file:///fuzz/plugin/.mcp.json#mcp=locked";

/// The `mcp://` channel of [`APP_SERVER`] in the default session (the default provider's),
/// as the seed inputs spell it (`tests/fuzz_corpora.rs` checks they still do).
pub fn app_channel() -> String {
    crate::host::apps::channel_uri(&default_session(), APP_SERVER)
}

/// The default session of the fuzzed host, which keeps the default provider.
fn default_session() -> String {
    let defaults = Config::parse("", "proxy.toml", Path::new("/fuzz")).expect("defaults");
    crate::host::default_session_uri(&defaults.agent.provider)
}

/// Resource the locked server asks a token for.
pub const LOCKED_RESOURCE: &str = "https://fuzz.example/mcp";

/// Feed `data`'s frames to a fresh host; panics when the host breaks an invariant.
pub fn ahp_frames(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    RUNTIME.with(|runtime| {
        scratch::with(|scratch| {
            let files = Files::prepare(scratch);
            let writable = crate::discovery::uri::file_uri(&files.writable);
            runtime.block_on(run(&text.replace("$W", &writable), &files.config));
            files.check();
        })
    });
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot build the fuzzing runtime");
    static CONFIG: RefCell<Option<(PathBuf, Config)>> = const { RefCell::new(None) };
}

/// The writable directory `resource*` commands may touch, and a file beside it that they
/// must never reach.
struct Files {
    writable: PathBuf,
    secret: PathBuf,
    config: Config,
}

const SECRET: &[u8] = b"outside the writable directory";

impl Files {
    fn prepare(scratch: &Scratch) -> Self {
        let base = scratch.root().join("frames");
        let writable = base.join("w");
        let secret = base.join("secret.txt");
        // Whatever the last input wrote is wiped (cheaply: only when there is something).
        if std::fs::read_dir(&writable).map_or(true, |mut d| d.next().is_some()) {
            let _ = std::fs::remove_dir_all(&writable);
            std::fs::create_dir_all(&writable).expect("cannot create a scratch folder");
        }
        if std::fs::read(&secret).ok().as_deref() != Some(SECRET) {
            Scratch::write(&secret, SECRET);
        }
        let config = CONFIG.with(|cell| {
            let mut slot = cell.borrow_mut();
            match &*slot {
                Some((dir, config)) if *dir == writable => config.clone(),
                _ => {
                    let config = frames_config(&writable);
                    *slot = Some((writable.clone(), config.clone()));
                    config
                }
            }
        });
        Self {
            writable,
            secret,
            config,
        }
    }

    /// No sibling of the writable directory was changed, added or removed (the secret file
    /// beside it is intact).
    fn check(&self) {
        let base = self.writable.parent().unwrap_or(Path::new("/"));
        let mut names: Vec<String> = std::fs::read_dir(base)
            .expect("the scratch folder is gone")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["secret.txt", "w"],
            "a resource command wrote outside"
        );
        assert_eq!(
            std::fs::read(&self.secret).ok().as_deref(),
            Some(SECRET),
            "a resource command changed a file outside the writable directory"
        );
    }
}

fn frames_config(writable: &Path) -> Config {
    let text = format!(
        "[[directories]]\npath = {:?}\ncontents = \"prompt\"\nwritable = true\n",
        writable.to_string_lossy()
    );
    Config::parse(&text, "proxy.toml", Path::new("/fuzz")).expect("the fuzzing config is valid")
}

/// One connection slot: the protocol state machine, its end of the host, the client's
/// mirror, and how many answers it is owed.
struct Slot {
    connection: ConnectionProtocol,
    attachment: Attachment,
    mirror: ClientView,
    /// Frames that must be answered exactly once (requests and malformed frames).
    owed: usize,
    /// Answers seen.
    answered: usize,
}

/// The request just fed, whose answer may change what its client holds.
struct Asked {
    id: u64,
    method: String,
    params: Value,
}

/// What outlives one connection: each client's last mirror (for `reconnect`) and what it
/// negotiated, `mcpApps` and its protocol version (the host remembers that too).
#[derive(Default)]
struct Clients {
    left: HashMap<String, ClientView>,
    audiences: HashMap<String, crate::host::audience::Audience>,
}

impl Slot {
    fn open(services: &Arc<Services>) -> Self {
        let attachment = services.host.attach(true);
        Self {
            connection: ConnectionProtocol::new(attachment.id, services.clone()),
            attachment,
            mirror: ClientView::default(),
            owed: 0,
            answered: 0,
        }
    }

    /// Take every queued frame, check it, and update the mirror; `asked` is the request
    /// just fed on this connection. Returns the session this frame disposed of, if any.
    fn drain(&mut self, asked: Option<&Asked>, clients: &mut Clients) -> Option<String> {
        let mut disposed = None;
        while let Ok(frame) = self.attachment.outbox.try_recv() {
            if trace() {
                eprintln!("<- {}: {frame}", self.attachment.id);
            }
            let value: Value = serde_json::from_str(frame.as_str())
                .unwrap_or_else(|e| panic!("the host sent invalid JSON ({e}): {frame}"));
            assert_eq!(value["jsonrpc"], "2.0", "not JSON-RPC 2.0: {frame}");
            if value.get("id").is_none() || value.get("method").is_some() {
                assert!(
                    value["method"].is_string(),
                    "neither answer nor notification: {frame}"
                );
                if value["method"] == "action" {
                    self.mirror.on_action(&value["params"]);
                }
                continue;
            }
            assert!(
                value.get("result").is_some() != value.get("error").is_some(),
                "an answer needs exactly one of result and error: {frame}"
            );
            self.answered += 1;
            let (Some(asked), Some(result)) = (asked, value.get("result")) else {
                continue;
            };
            if value["id"].as_u64() != Some(asked.id) {
                continue;
            }
            match asked.method.as_str() {
                "initialize" => {
                    self.mirror.initialized(&asked.params, result);
                    if let Some(client) = &self.mirror.client_id {
                        clients
                            .audiences
                            .insert(client.clone(), self.mirror.audience);
                    }
                }
                "subscribe" => self.mirror.subscribed(result),
                "reconnect" => {
                    let client = asked.params["clientId"].as_str().unwrap_or_default();
                    let audience = clients.audiences.get(client).copied().unwrap_or_default();
                    let before = clients.left.get(client);
                    self.mirror
                        .reconnected(&asked.params, result, before, audience);
                }
                "disposeSession" => {
                    disposed = asked.params["channel"].as_str().map(str::to_string);
                }
                _ => {}
            }
        }
        assert!(
            self.answered <= self.owed,
            "more answers ({}) than requests ({})",
            self.answered,
            self.owed
        );
        disposed
    }

    /// End this connection as its socket task does, and open a fresh one in its place.
    fn reopen(&mut self, services: &Arc<Services>, clients: &mut Clients) {
        let host = &services.host;
        self.drain(None, clients);
        let client = self.connection.client_id().map(str::to_string);
        host.detach(self.attachment.id);
        if let Some(client) = client {
            host.expire_client(&client);
            clients.left.insert(client, self.mirror.clone());
        }
        *self = Slot::open(services);
    }
}

fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("AHP_PROXY_FUZZ_TRACE").is_some_and(|v| v != "0"))
}

async fn run(text: &str, config: &Config) {
    let (services, mut control) = seeded_services(config);
    // The number of the last request the pretend supervisor took.
    let mut seen = 0;
    let host = &services.host;
    let mut clients = Clients::default();
    let mut slots: Vec<Slot> = (0..SLOTS).map(|_| Slot::open(&services)).collect();
    for line in text.split('\n') {
        let (index, frame) = match line.as_bytes() {
            [b'@', d @ b'0'..=b'9', ..] => {
                let rest = &line[2..];
                let rest = rest.strip_prefix(' ').unwrap_or(rest);
                (usize::from(d - b'0') % SLOTS, rest)
            }
            _ => (0, line),
        };
        let slot = &mut slots[index];
        if trace() {
            eprintln!("-> {}: {frame}", slot.attachment.id);
        }
        let mut asked = None;
        match frame {
            _ if line.starts_with('!') => host_event(host, &line[1..]),
            "close" => slot.reopen(&services, &mut clients),
            "binary" => {
                slot.owed += 1;
                slot.connection.on_binary();
            }
            _ => {
                match jsonrpc::decode(frame) {
                    Ok(Incoming::Request { id, method, params }) => {
                        slot.owed += 1;
                        asked = Some(Asked { id, method, params });
                    }
                    Ok(Incoming::Notification { method, params }) if method == "unsubscribe" => {
                        if let Some(uri) = params["channel"].as_str() {
                            slot.mirror.forget(uri);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => slot.owed += 1,
                }
                if let After::Close(_) = slot.connection.on_text(frame) {
                    slot.drain(asked.as_ref(), &mut clients);
                    slot.reopen(&services, &mut clients);
                }
            }
        }
        let mut disposed = Vec::new();
        for (i, slot) in slots.iter_mut().enumerate() {
            if slot.attachment.kicked.is_cancelled() {
                slot.reopen(&services, &mut clients);
            }
            let asked = asked.as_ref().filter(|_| i == index);
            disposed.extend(slot.drain(asked, &mut clients));
        }
        for slot in &mut slots {
            for uri in &disposed {
                slot.mirror.forget(uri);
            }
            slot.mirror.check(host);
        }
        let requests = {
            let now = control.borrow_and_update();
            let later = now.since(seen);
            seen = now.asked();
            later
        };
        for request in requests {
            supervise(host, request);
        }
    }
    // `mcp://` requests are answered from tasks of their own: let them finish.
    for _ in 0..64 {
        if slots.iter().all(|s| s.answered == s.owed) {
            break;
        }
        tokio::task::yield_now().await;
        for slot in &mut slots {
            slot.drain(None, &mut clients);
        }
    }
    for slot in &mut slots {
        assert_eq!(slot.answered, slot.owed, "a request was never answered");
        slot.mirror.check(host);
    }
    for uri in [
        ahp_types::ROOT_RESOURCE_URI,
        &host.default_session(),
        HARNESS_CHAT_URI,
    ] {
        if let Some(snapshot) = host.snapshot(uri) {
            serde_json::to_string(&snapshot).expect("a snapshot that does not serialize");
        }
    }
    for slot in slots {
        host.detach(slot.attachment.id);
    }
}

/// The AHP face as a running proxy would have it: a host with customizations from discovery,
/// one server ready with an `mcpApp`, one asking for authorization, a harness call paused
/// for it, a supervisor to take client requests; the writable directory's files, and
/// `mcp://` channels served (no server connected).
fn seeded_services(config: &Config) -> (Arc<Services>, watch::Receiver<Requests>) {
    let host = Arc::new(Host::new(config));
    let services = Arc::new(Services {
        host: host.clone(),
        files: crate::ahp::resources::Files::new(&config.directories),
        channels: McpChannels {
            connections: Connections::new(),
            hub: Weak::new(),
            timeout: Duration::from_secs(1),
        },
    });
    host.emit_to_sessions(&rescan());
    let (tx, control) = watch::channel(Requests::default());
    host.set_control(tx);
    host.set_harness_sampling(true);
    host.server_event(app_event("ready"));
    host.server_event(ServerEvent {
        id: LOCKED_SERVER.into(),
        status: Some(locked_status()),
    });
    let mut turns = Turns::new();
    for call in [1, 2] {
        let start = CallStart {
            call,
            runner: crate::mirror::Runner::Server {
                id: LOCKED_SERVER.into(),
                name: "locked".into(),
            },
            tool: "t".into(),
            display_name: "T".into(),
            input: "{}".into(),
            ui: None,
            confirmation: None,
            era: Some(crate::mcp::era::Era::Legacy),
        };
        for action in turns.start(start, 0, 0, "2026-01-01T00:00:00.000Z") {
            let _ = host.emit(HARNESS_CHAT_URI, action);
        }
    }
    let auth = serde_json::from_value(json!({"reason": "required",
        "resource": {"resource": LOCKED_RESOURCE}}))
    .expect("the fuzzing auth requirement is valid");
    if let Some((_, paused)) = turns.auth_required(1, auth) {
        let _ = host.emit(HARNESS_CHAT_URI, paused);
        host.hold_paused(HARNESS_CHAT_URI, &crate::mirror::call_id(1));
    }
    (services, control)
}

/// The customizations discovery finds, as one `session/customizationsChanged`.
fn rescan() -> StateAction {
    let customizations = serde_json::from_value(json!([
        {"type": "plugin", "id": "file:///fuzz/plugin", "uri": "file:///fuzz/plugin",
         "name": "fuzz-plugin", "load": {"kind": "loaded"}, "children": [
            {"type": "mcpServer", "id": APP_SERVER, "uri": "file:///fuzz/plugin/.mcp.json",
             "name": "app", "state": {"kind": "starting"}},
            {"type": "mcpServer", "id": LOCKED_SERVER, "uri": "file:///fuzz/plugin/.mcp.json",
             "name": "locked", "state": {"kind": "starting"}},
            {"type": "skill", "id": "file:///fuzz/plugin/skills/s/SKILL.md",
             "uri": "file:///fuzz/plugin/skills/s/SKILL.md", "name": "s", "description": "d"}
        ]},
        {"type": "mcpServer", "id": "file:///fuzz/proxy.toml#servers.solo",
         "uri": "file:///fuzz/proxy.toml", "name": "solo", "state": {"kind": "stopped"}}
    ]))
    .expect("the fuzzing customizations are valid");
    StateAction::SessionCustomizationsChanged(SessionCustomizationsChangedAction { customizations })
}

fn locked_status() -> Status {
    Status::AuthRequired {
        resource: LOCKED_RESOURCE.into(),
        challenge: Some(
            "Bearer resource_metadata=\"https://fuzz.example/.well-known/oauth-protected-resource\""
                .into(),
        ),
        reason: AuthReason::Required,
        metadata: Some(json!({"resource": LOCKED_RESOURCE,
            "authorization_servers": ["https://auth.fuzz.example"]})),
    }
}

/// The app server's status `name` (anything unknown: gone for good).
fn app_event(name: &str) -> ServerEvent {
    let status = match name {
        "ready" => Some(Status::Ready {
            tools: 1,
            served: Served {
                tools: Some(true),
                resources: Some(true),
                prompts: Some(false),
                logging: true,
            },
            icons: Some(json!([{"src": "https://fuzz.example/icon.png", "sizes": ["any"]}])),
        }),
        "ready-plain" => Some(Status::Ready {
            tools: 0,
            served: Served::default(),
            icons: None,
        }),
        "starting" => Some(Status::Starting { slow: false }),
        "stopped" => Some(Status::Stopped),
        "error" => Some(Status::Error(Failure::Exited("exit status 1".into()))),
        "auth" => Some(locked_status()),
        _ => None,
    };
    ServerEvent {
        id: APP_SERVER.into(),
        status,
    }
}

/// What the supervisor would do with a client's request, as far as the host sees it: a
/// server given a token reconnects and comes up with it, unless the token is `refused`.
fn supervise(host: &Host, request: Request) {
    let Request::Authenticate {
        id,
        bearer: Some(bearer),
    } = request
    else {
        return;
    };
    host.server_event(ServerEvent {
        id: id.clone(),
        status: Some(Status::Starting { slow: false }),
    });
    let status = if bearer.token == "refused" {
        locked_status()
    } else {
        Status::Ready {
            tools: 0,
            served: Served::default(),
            icons: None,
        }
    };
    host.server_event(ServerEvent {
        id,
        status: Some(status),
    });
}

/// A line `!<event>`: something that happens on the host's side meanwhile. `!app <status>`
/// (ready, ready-plain, starting, stopped, error, auth, gone), `!sampling on|off`,
/// `!rescan` (discovery reports the same customizations again), `!list
/// tools|resources|prompts` (a list the server says changed).
fn host_event(host: &Host, event: &str) {
    let (verb, arg) = event.split_once(' ').unwrap_or((event, ""));
    match verb {
        "app" => host.server_event(app_event(arg)),
        "sampling" => host.set_harness_sampling(arg == "on"),
        "rescan" => {
            host.emit_to_sessions(&rescan());
        }
        "list" => crate::ahp::mcp_channel::announce_list_changed(host, APP_SERVER, arg),
        _ => {}
    }
}
