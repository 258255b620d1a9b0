//! `ahp-proxy serve`: wires discovery, supervisor, host, AHP listener and MCP fronts, runs
//! until a signal (or, with `--stdio`, until stdin closes), then stops each task in its turn.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use ahp_types::actions::SessionCustomizationsChangedAction;
use ahp_types::StateAction;

use crate::ahp::listener;
use crate::approvers::{ApprovalKey, KeyFile};
use crate::banner::Banner;
use crate::catalog::{Catalog, Sources};
use crate::config::Config;
use crate::discovery::Context;
use crate::front::naming::Policy;
use crate::front::{Hub, Settings};
use crate::host::Host;
use crate::mirror::Mirror;
use crate::supervisor::Supervisor;
use crate::watch;

/// How `serve` was asked to run, besides the config.
#[derive(Debug, Default)]
pub struct Options {
    /// Serve MCP on stdin/stdout (a harness launched us).
    pub stdio: bool,
    /// The config file that was read (`None`: none was found, defaults apply).
    pub config_file: Option<std::path::PathBuf>,
    /// Print the start-up banner as text on stderr (else it is one `info` log event).
    pub text_banner: bool,
    /// The watchdog `main` forked (`None`: the proxy runs without one, and logs so).
    pub watchdog: Option<crate::supervisor::process::watchdog::Forked>,
}

/// How long the start-up's memory is kept, at most, while servers are still starting.
const GIVE_BACK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Run the proxy on `config` until Ctrl-C / SIGTERM (or, with `stdio`, until the harness
/// closes our stdin). Errors are start-up failures.
pub async fn run(mut config: Config, mut options: Options) -> Result<(), String> {
    let stdio = options.stdio;
    // Checked before anything starts: no server is launched for a proxy that will not run.
    let (token, mcp_token) = access_tokens(&config)?;
    // Who may decide held calls: the token's holders, else those given a key drawn now.
    let key = match token {
        Some(_) => None,
        None => Some(ApprovalKey::draw(&ring::rand::SystemRandom::new())?),
    };
    config.limits.max_connections = descriptor_budget(config.limits.max_connections);
    let mut signals = Signals::listen();
    let host = Arc::new(Host::new(&config));
    let ctx = Context::from_process(config.data_dir.clone(), &config.inputs.0);
    let catalog = Catalog::scan(Sources::of(&config), &ctx);
    tracing::info!(
        shown = config.clients.plugins,
        servers_launched = config.clients.launches_servers(config.ahp.listen),
        "plugins AHP clients publish ([clients])"
    );
    let customizations = catalog.customizations();
    let mut banner = found(&catalog, &customizations);
    let trust = Arc::new(crate::trust::TrustStore::open(&config.data_dir));
    banner.awaiting_trust = crate::trusting::waiting(&catalog, &trust);
    banner.config = options.config_file.clone();
    banner.stdio = stdio;
    tracing::info!(
        customizations = customizations.len(),
        servers = banner.servers,
        servers_in_error = banner.servers_in_error,
        problems = banner.problems,
        "discovery finished"
    );
    for problem in catalog.problems() {
        tracing::warn!(%problem, "discovery problem");
    }
    host.emit_to_sessions(&StateAction::SessionCustomizationsChanged(
        SessionCustomizationsChangedAction { customizations },
    ));
    let connections = crate::supervisor::connections::Connections::new();
    if stdio {
        // Servers are initialized as the stdio harness, once it said who it is.
        connections.set_identity(None);
    }
    let (mirror, mirror_task) = Mirror::spawn(
        host.clone(),
        crate::host::HARNESS_CHAT_URI.to_string(),
        config.mcp.mirror_queue,
    );
    let hub = Hub::start(
        connections.clone(),
        Settings {
            policy: Policy {
                prefix: config.mcp.prefix,
                separator: config.mcp.separator.clone(),
            },
            request_timeout: config.mcp.request_timeout,
            first_list_wait: config.mcp.first_list_wait,
            approval: config.approval.clone(),
            metrics: Default::default(),
            fairness: (config.mcp.fairness).within(config.limits.max_connections),
        },
        mirror,
    );
    hub.serve_client_tools(&host);
    // What AHP connections are served with: the host, writable host files, and MCP Apps'
    // `mcp://` channels served on the same connections, sampling answered by the harness
    // (advertised only while one that can is connected), list changes relayed.
    let services = Arc::new(crate::ahp::Services {
        host: host.clone(),
        files: crate::ahp::resources::Files::new(&config.directories),
        channels: crate::ahp::mcp_channel::McpChannels {
            connections: connections.clone(),
            hub: Arc::downgrade(&hub),
            timeout: config.mcp.request_timeout,
        },
    });
    let relaying = CancellationToken::new();
    let list_changes = spawn_until(
        &relaying,
        crate::ahp::mcp_channel::relay_list_changes(connections.clone(), Arc::downgrade(&host)),
    );
    let sampling = {
        let mut sampling = hub.sampling_available();
        let host = Arc::downgrade(&host);
        spawn_until(&relaying, async move {
            while sampling.changed().await.is_ok() {
                let Some(host) = host.upgrade() else { return };
                let able = *sampling.borrow_and_update();
                host.set_harness_sampling(able);
            }
        })
    };
    // Before any server starts: the proxy owns every process they will start.
    let owned = crate::supervisor::process::Ownership::establish(
        config.supervisor.cgroups,
        options.watchdog.take(),
    );
    let (supervisor, mut events) = Supervisor::spawn(
        config.supervisor.clone(),
        connections.clone(),
        trust.clone(),
    );
    host.set_control(supervisor.requests());
    let (awaiting, mirror) = (supervisor.awaiting(), hub.mirror.clone());
    let asking_trust = crate::ask_trust::start(awaiting, trust, mirror, &relaying);
    let bridge = {
        let host = host.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                host.server_event(event);
            }
        })
    };
    // Nothing else has a sender yet: this cannot be full.
    let _ = supervisor.commands().send(catalog.supervision()).await;
    // Let the supervisor hand the servers to the spawning threads before the listeners and
    // the banner: their start is most of the proxy's start-up, the rest can wait for it.
    tokio::task::yield_now().await;
    // The start-up scan's transient copies (file texts, parse trees, the first list) are
    // free once the supervisor has taken the declared set: give them back once the servers
    // are up (or failed), not while they start, when the collection and the faults after
    // it would compete with them for the cores.
    {
        let connections = connections.clone();
        tokio::spawn(async move {
            connections.synced().await;
            connections.settled(GIVE_BACK_PATIENCE).await;
            let _ = tokio::task::spawn_blocking(crate::heap::give_back).await;
        });
    }
    let (tcp, fallback) = bind_ahp(config.ahp.listen, stdio, Port::Ahp).await?;
    let addr = tcp
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    banner.ahp_url = format!("ws://{addr}");
    banner.ahp_note = fallback;
    let _key_file = key.as_ref().and_then(|key| write_key(addr.port(), key));
    let secret = token.as_deref().or(key.as_ref().map(ApprovalKey::as_str));
    // The key or token in the URLs only on a terminal, and never to a harness (`--stdio`:
    // it reads the proxy's stderr).
    let shown = !stdio && std::io::IsTerminal::is_terminal(&std::io::stderr());
    banner.urls(addr, secret, shown);
    let mcp_tcp = match config.mcp.listen {
        Some(mcp_addr) => Some(crate::front::http::bind(mcp_addr).await?),
        None => None,
    };
    // The MCP line comes first: whoever waits for the AHP line has both.
    if let Some(mcp_tcp) = &mcp_tcp {
        let mcp_addr = mcp_tcp
            .local_addr()
            .map_err(|e| format!("cannot read the bound address: {e}"))?;
        tracing::info!(addr = %mcp_addr, url = %format!("http://{mcp_addr}/mcp"), token = mcp_token.is_some(), "MCP endpoint listening");
        banner.mcp_url = Some(format!("http://{mcp_addr}/mcp"));
        banner.mcp_token = mcp_token.is_some();
    }
    // MCP Apps' Views run on an origin of their own: the same IP, another port.
    let views_want = std::net::SocketAddr::new(addr.ip(), config.ahp.views_port);
    let (views_tcp, _) = bind_ahp(views_want, stdio, Port::Views).await?;
    let views_addr = views_tcp
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    let mut gate = crate::ahp::gate::Gate::new(&config.ahp, token.clone(), addr)
        .with_view_port(views_addr.port());
    if let Some(key) = &key {
        gate = gate.with_approval_key(key.as_str());
    }
    let gate = Arc::new(gate);
    let console = Arc::new(crate::console::Console {
        view_port: views_addr.port(),
        token_required: token.is_some(),
        session: crate::host::default_session_uri(&config.agent.provider),
    });
    tracing::info!(url = %format!("http://{addr}/"), views = %format!("http://{views_addr}"), "console: open this URL in a browser");
    tracing::info!(addr = %addr, url = %format!("ws://{addr}"), token = token.is_some(), "AHP endpoint listening");
    show(&banner, options.text_banner);

    let shutdown = CancellationToken::new();
    let watcher = watch::spawn(
        catalog,
        ctx,
        host.clone(),
        supervisor.commands(),
        config.limits.watch_debounce,
        shutdown.clone(),
    )?;
    let mcp_http = mcp_tcp.map(|tcp| {
        tokio::spawn(crate::front::http::serve(
            tcp,
            hub.clone(),
            health(&host, &hub),
            crate::front::http::Access {
                allowed_hosts: config.mcp.allowed_hosts.clone(),
                token: mcp_token,
            },
            crate::front::http::Bounds {
                max_connections: config.limits.max_connections,
                max_sessions: config.mcp.max_sessions,
                read_timeout: config.limits.handshake_timeout,
            },
            shutdown.clone(),
        ))
    });
    let listening = CancellationToken::new();
    let ahp = {
        let page_deadline = config.limits.handshake_timeout;
        let ahp = listener::serve(
            tcp,
            services,
            gate.clone(),
            Some(console),
            config.limits.clone(),
            listening.clone(),
        );
        let views = crate::ahp::views::serve(
            views_tcp,
            gate,
            addr.port(),
            config.limits.max_connections,
            page_deadline,
            listening.clone(),
        );
        tokio::spawn(async move {
            tokio::join!(ahp, views);
        })
    };
    // Kept while it runs (a finished task is not awaited again).
    let mut harness = None;
    if stdio {
        let mut front = tokio::spawn(serve_stdio(hub.clone(), shutdown.clone()));
        tokio::select! {
            _ = signals.wait() => harness = Some(front),
            _ = &mut front => {}
        }
    } else {
        signals.wait().await;
    }
    tracing::info!("shutting down");
    if !stdio || harness.is_some() {
        hub.drain(config.mcp.drain).await; // a signal: requests in flight finish first
    }
    let tasks = Tasks {
        watcher,
        harness,
        mcp_http,
        bridge,
        ahp,
        list_changes,
        sampling,
        asking_trust,
        mirror: mirror_task,
    };
    let stops = Stops {
        shutdown,
        listening,
        relaying,
    };
    tasks
        .stop(
            stops,
            supervisor,
            owned,
            &host,
            hub,
            config.supervisor.stop_grace,
        )
        .await;
    tracing::info!("stopped");
    Ok(())
}

/// The tasks [`run`] starts (the supervisor keeps its own), kept so that shutdown ends each
/// one in its turn.
struct Tasks {
    /// File changes → rescans; ends on `shutdown`.
    watcher: JoinHandle<()>,
    /// The MCP front on stdin/stdout (`--stdio`); ends on `shutdown` or when stdin closes.
    harness: Option<JoinHandle<()>>,
    /// The MCP front over HTTP; ends on `shutdown`.
    mcp_http: Option<JoinHandle<()>>,
    /// Supervisor events → host; ends once the supervisor is gone.
    bridge: JoinHandle<()>,
    /// The AHP listener (with the console) and its connections, and the MCP Apps View
    /// origin; ends on `listening`.
    ahp: JoinHandle<()>,
    /// Servers' list changes → `mcp://` channel subscribers; ends on `relaying`.
    list_changes: JoinHandle<()>,
    /// Whether a harness can answer sampling → host; ends on `relaying`.
    sampling: JoinHandle<()>,
    /// Servers awaiting trust → questions in the harness chat; ends on `relaying`.
    asking_trust: JoinHandle<()>,
    /// Harness tool calls → the AHP chat; ends once every front session is gone.
    mirror: JoinHandle<()>,
}

/// What shutdown cancels, in turn.
struct Stops {
    shutdown: CancellationToken,
    listening: CancellationToken,
    relaying: CancellationToken,
}

impl Tasks {
    /// Stop everything in order: the watcher and the MCP fronts stop taking work; every
    /// server stops while clients are still connected, so they see each one `stopped`, and
    /// whatever they left behind is killed; the AHP listener closes its connections and the
    /// fronts finish; the relays end; the mirror completes its last turn. Each step is bounded (but the watcher's, which
    /// waits for nobody): a wedged server or client cannot hold the exit.
    async fn stop(
        self,
        stops: Stops,
        supervisor: Supervisor,
        owned: crate::supervisor::process::Owned,
        host: &Host,
        hub: Arc<Hub>,
        stop_grace: Duration,
    ) {
        hub.stop_listening();
        stops.shutdown.cancel();
        let _ = self.watcher.await;
        host.set_control_closed();
        let patience = stop_grace + Duration::from_secs(5);
        if tokio::time::timeout(patience, supervisor.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("some servers did not stop in time; exiting anyway");
        }
        within(Duration::from_secs(5), owned.release()).await;
        within(Duration::from_secs(1), self.bridge).await;
        stops.listening.cancel();
        within(Duration::from_secs(5), self.ahp).await;
        for front in [self.mcp_http, self.harness].into_iter().flatten() {
            within(Duration::from_secs(5), front).await;
        }
        stops.relaying.cancel();
        within(Duration::from_secs(1), self.list_changes).await;
        within(Duration::from_secs(1), self.sampling).await;
        within(Duration::from_secs(1), self.asking_trust).await;
        // Every session is gone: the mirror's queue closes and its last turn completes.
        drop(hub);
        within(Duration::from_secs(1), self.mirror).await;
    }
}

/// Spawn `task`, ended early when `stop` is cancelled.
fn spawn_until<F>(stop: &CancellationToken, task: F) -> JoinHandle<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let stop = stop.clone();
    tokio::spawn(async move {
        stop.run_until_cancelled(task).await;
    })
}

/// Wait for `work` (a task, or any step) to end, at most `limit`.
async fn within<F: std::future::Future>(limit: Duration, work: F) {
    let _ = tokio::time::timeout(limit, work).await;
}

/// Raise the descriptor limit to the hard one and derive each listener's connection limit
/// from it (at most `configured`); says both.
fn descriptor_budget(configured: usize) -> usize {
    let limit = crate::descriptors::raise();
    let each = crate::descriptors::connections_per_listener(limit.now, configured);
    tracing::info!(
        was = limit.was,
        max_connections = configured,
        "descriptor limit {}: each listener (AHP, MCP, the View origin) takes at most {each} connections",
        limit.now
    );
    each
}

/// The listeners whose port the config names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Port {
    /// `[ahp] listen`.
    Ahp,
    /// `[ahp] views_port`.
    Views,
}

/// Bind the AHP endpoint or the View origin. A harness that launched us (`stdio`) must keep
/// working when another copy already holds the port (a second harness on the same
/// proxy.toml, or the proxy started by hand): then any free port on the same address is
/// taken, and said. Returns the listener and, after such a fallback, why it is not where
/// the config said.
async fn bind_ahp(
    want: std::net::SocketAddr,
    stdio: bool,
    which: Port,
) -> Result<(tokio::net::TcpListener, Option<String>), String> {
    let (what, any_port) = match which {
        Port::Ahp => ("AHP", "`--listen 127.0.0.1:0`"),
        Port::Views => ("the View origin", "`[ahp] views_port = 0`"),
    };
    match listener::bind(want).await {
        Ok(tcp) => Ok((tcp, None)),
        Err(error) if stdio && want.port() != 0 => {
            let any = std::net::SocketAddr::new(want.ip(), 0);
            let tcp = listener::bind(any).await?;
            let port = tcp.local_addr().map(|a| a.port()).unwrap_or_default();
            let note = format!("{want} was not free; serving {what} on port {port} instead");
            if which == Port::Ahp {
                tracing::warn!(%error, port, "{note}: AHP clients of this harness's proxy connect there (`ahp-proxy status --url ws://{}:{port}`)", want.ip());
            } else {
                tracing::warn!(%error, port, "{note}");
            }
            Ok((tcp, Some(note)))
        }
        Err(error) => Err(format!(
            "{error} (is another ahp-proxy running? {any_port} takes any free port)"
        )),
    }
}

/// `GET /healthz`'s summary: the default session's servers and containers as the host holds
/// them now, and the harnesses connected. Holds neither alive.
fn health(host: &Arc<Host>, hub: &Arc<Hub>) -> crate::front::http::Health {
    let host = Arc::downgrade(host);
    let hub = Arc::downgrade(hub);
    Arc::new(move || {
        let customizations = host
            .upgrade()
            .and_then(|h| h.snapshot(&h.default_session()))
            .and_then(|snapshot| match snapshot.state {
                ahp_types::state::SnapshotState::Session(s) => s.customizations,
                _ => None,
            })
            .unwrap_or_default();
        let harnesses = hub.upgrade().map_or(0, |h| h.tables().registry.count());
        crate::health::summary(&customizations, harnesses).to_string()
    })
}

/// The banner's counts of what discovery found.
fn found(catalog: &Catalog, customizations: &[ahp_types::state::Customization]) -> Banner {
    use ahp_types::state::Customization;
    let count = |f: fn(&Customization) -> bool| customizations.iter().filter(|c| f(c)).count();
    Banner {
        plugins: count(|c| matches!(c, Customization::Plugin(_))),
        directories: count(|c| matches!(c, Customization::Directory(_))),
        servers: catalog.servers().count(),
        servers_in_error: catalog.servers().filter(|s| s.launch.is_err()).count(),
        problems: catalog.problems().count(),
        ..Banner::default()
    }
}

/// Write the approval key's file for the terminal's commands (said, never with the key); a
/// proxy that cannot still runs, decided from the console and VS Code only.
fn write_key(port: u16, key: &ApprovalKey) -> Option<KeyFile> {
    match KeyFile::write(port, key) {
        Ok(file) => {
            tracing::info!(file = %file.path().display(), "approval key written for `ahp-proxy approve`");
            Some(file)
        }
        Err(error) => {
            tracing::warn!(%error, "approval key not written: `ahp-proxy approve` and `deny` cannot decide");
            None
        }
    }
}

/// Print the banner on stderr (text logs), or log it as one event (JSON logs).
fn show(banner: &Banner, text: bool) {
    if text {
        let mut out = banner.lines().join("\n");
        out.push('\n');
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(out.as_bytes());
    } else {
        tracing::info!(
            config = %banner.config.as_ref().map_or_else(|| "(defaults)".into(), |p| p.display().to_string()),
            ahp = %banner.ahp_url,
            mcp = %banner.mcp_url.as_deref().unwrap_or(if banner.stdio { "stdio" } else { "off" }),
            plugins = banner.plugins,
            servers = banner.servers,
            "ahp-proxy started"
        );
    }
}

/// Serve MCP on stdin/stdout until the harness closes stdin (or `shutdown`).
async fn serve_stdio(hub: std::sync::Arc<Hub>, shutdown: CancellationToken) {
    match pipes::open() {
        Some((input, output)) => {
            crate::front::stdio::serve(hub, input, output, shutdown).await;
            pipes::restore();
        }
        None => {
            crate::front::stdio::serve(hub, tokio::io::stdin(), tokio::io::stdout(), shutdown).await
        }
    }
}

/// Stdin and stdout as non-blocking pipes, when both are pipes (as when a harness launches
/// the proxy). Tokio's `stdin()`/`stdout()` run every read and write on a blocking thread:
/// a hand-off between threads for each message each way (measured with
/// `examples/bench_front`: ~90 µs more CPU and 7 more context switches per call). On other
/// kinds of files they are the fallback.
#[cfg(unix)]
mod pipes {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe::{Receiver, Sender};

    pub fn open() -> Option<(Receiver, Sender)> {
        let input = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
        let output = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
        // Each checks that its descriptor is a pipe before making it non-blocking.
        let input = Receiver::from_owned_fd(input).ok()?;
        match Sender::from_owned_fd(output) {
            Ok(output) => Some((input, output)),
            Err(_) => {
                // Stdin is a pipe, stdout is not: stdin goes back to blocking for the fallback.
                let _ = input.into_blocking_fd();
                None
            }
        }
    }

    /// Stdin and stdout back to blocking (the mode is shared with whoever else holds them,
    /// e.g. the harness, and `println!`).
    pub fn restore() {
        if let Some((input, output)) = open() {
            let _ = input.into_blocking_fd();
            let _ = output.into_blocking_fd();
        }
    }
}

#[cfg(not(unix))]
mod pipes {
    pub fn open() -> Option<(tokio::io::Stdin, tokio::io::Stdout)> {
        None
    }

    pub fn restore() {}
}

/// Ctrl-C or SIGTERM, listened for from the moment it is made: a signal that comes once the
/// endpoints are announced (a test or a service manager stopping the proxy at once) is
/// never missed.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Self {
                term: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    async fn wait(&mut self) {
        #[cfg(unix)]
        if let Some(term) = &mut self.term {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The AHP access token in effect: `AHP_PROXY_TOKEN`, else `ahp.token`; and the MCP front's:
/// `AHP_PROXY_MCP_TOKEN`, else `mcp.token`. Listening on anything but loopback without one
/// is refused.
fn access_tokens(config: &Config) -> Result<(Option<String>, Option<String>), String> {
    use crate::bearer::{in_effect, Source};
    use crate::config::{MCP_TOKEN_ENV, TOKEN_ENV};
    let ahp = Source {
        face: "AHP",
        env: TOKEN_ENV,
        key: "ahp.token",
    };
    let mcp = Source {
        face: "MCP over HTTP",
        env: MCP_TOKEN_ENV,
        key: "mcp.token",
    };
    let token = |t: &Option<crate::config::AccessToken>| t.as_ref().map(|t| t.0.clone());
    Ok((
        in_effect(
            ahp,
            std::env::var(TOKEN_ENV).ok(),
            token(&config.ahp.token).as_deref(),
            Some(config.ahp.listen),
        )?,
        in_effect(
            mcp,
            std::env::var(MCP_TOKEN_ENV).ok(),
            token(&config.mcp.token).as_deref(),
            config.mcp.listen,
        )?,
    ))
}
