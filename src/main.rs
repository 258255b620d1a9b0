//! The `ahp-proxy` command line: `serve` (default), `check`, and the AHP client commands
//! `status`, `start`, `stop`, `restart`, `enable`, `disable`. Wiring only.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

use ahp_proxy::catalog::Catalog;
use ahp_proxy::check;
use ahp_proxy::config::Config;
use ahp_proxy::control::{self, steer::Verb, Endpoint};
use ahp_proxy::discovery::Context;
use ahp_proxy::untrusted::json_escaped;

/// mimalloc (`ahp_proxy::heap` says why).
#[global_allocator]
static ALLOCATOR: ahp_proxy::heap::Allocator = ahp_proxy::heap::ALLOCATOR;

#[derive(Parser)]
#[command(
    name = "ahp-proxy",
    version,
    about = "Serve MCP servers to an MCP-only harness and show them to AHP clients"
)]
struct Cli {
    /// The configuration file [default: the nearest proxy.toml in this folder or one above
    /// it (yours), else built-in defaults].
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Also read this MCP manifest: an existing `.mcp.json`, VS Code `mcp.json`, Claude
    /// Desktop config or `plugins.json`, unchanged (repeatable; added to `manifests`).
    #[arg(long = "manifest", global = true, value_name = "FILE")]
    manifests: Vec<PathBuf>,
    /// Log format on stderr. Filter with RUST_LOG (default: info).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy (the default).
    Serve {
        /// Override `ahp.listen` (e.g. 127.0.0.1:0 for any free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Override `mcp.listen`, the MCP HTTP front (127.0.0.1:0 for any free port).
        #[arg(long)]
        mcp_listen: Option<SocketAddr>,
        /// Serve MCP on stdin/stdout: the harness launches ahp-proxy as its one MCP server.
        /// Logs stay on stderr; the proxy exits when stdin closes. The HTTP front is then
        /// off unless `--mcp-listen` is given.
        #[arg(long)]
        stdio: bool,
        /// Threads running the proxy's tasks [default: 1: a call then never hops between
        /// threads; slow work (spawning servers, /proc and cgroup files) runs on threads of
        /// its own. More only for a proxy kept busy on one core: see docs/benchmarks.md].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        worker_threads: Option<u16>,
        /// µs the worker watches its pipes and connections before it parks [default: 50;
        /// 0: off]. See docs/benchmarks.md.
        #[arg(long, value_name = "US", hide = true)]
        park_spin_us: Option<u32>,
    },
    /// Validate the configuration, scan every plugin and manifest, look up every server's
    /// program (nothing is started), and print the tree an AHP client would see with every
    /// problem found. Exit 1 when something is in error (a server whose program is missing
    /// included), 2 when the configuration is invalid.
    Check {
        /// Print JSON (`{customizations, problems}`) instead of text.
        #[arg(long)]
        json: bool,
        /// Also start every enabled server, wait until it is ready or has failed, list its
        /// tools, and stop it again. Exit 1 when one failed.
        #[arg(long)]
        start: bool,
    },
    /// Show a running proxy's plugins and servers (states, errors, tools) as an AHP client.
    /// Exit 1 when something is in error, 2 when the proxy cannot be reached.
    Status {
        #[command(flatten)]
        remote: Remote,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Keep following: print again after every change, until Ctrl-C.
        #[arg(long)]
        watch: bool,
    },
    /// Start a server of a running proxy (a crash-looped one gets fresh attempts).
    Start {
        /// The server's name, `<plugin>/<server>`, or its id.
        server: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Stop a server of a running proxy.
    Stop {
        /// The server's name, `<plugin>/<server>`, or its id.
        server: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Stop a server of a running proxy, then start it again.
    Restart {
        /// The server's name, `<plugin>/<server>`, or its id.
        server: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Turn a server or a whole plugin on (as an AHP client's toggle does).
    Enable {
        /// A server's or a plugin's name, `<plugin>/<server>`, or an id.
        name: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Turn a server or a whole plugin off (its servers stop).
    Disable {
        /// A server's or a plugin's name, `<plugin>/<server>`, or an id.
        name: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// List the harness's tool calls a running proxy holds for approval, and the results it
    /// holds for review.
    Approvals {
        #[command(flatten)]
        remote: Remote,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve a held tool call, or a result held for review (its id, as `approvals` lists it).
    Approve {
        /// The call's id.
        id: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Deny a held tool call, or a result held for review: the harness gets an error result
    /// saying so.
    Deny {
        /// The call's id.
        id: String,
        /// Why (the harness's model reads it; a result's denial carries none).
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        remote: Remote,
    },
    /// Trust servers declared outside proxy.toml (manifests, plugin folders, directories,
    /// client plugins), by name: each runs once trusted, until its definition changes. A
    /// running proxy starts them within a second. Without a name, list what asks for trust
    /// and what it would run.
    Trust {
        /// Servers to trust, by name or id.
        names: Vec<String>,
        /// Trust every server that waits.
        #[arg(long, conflicts_with = "names")]
        all: bool,
    },
    /// Trust a server no more: a running proxy stops it within a second, and asks again.
    Untrust {
        /// Servers, by name or id.
        #[arg(required = true)]
        names: Vec<String>,
    },
}

/// Where the running proxy is.
#[derive(clap::Args)]
struct Remote {
    /// The proxy's AHP endpoint [default: ws:// at `ahp.listen` of the config]. The access
    /// token is `AHP_PROXY_TOKEN`, else `ahp.token`.
    #[arg(long, value_name = "ws://HOST:PORT")]
    url: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        // One event, one line: control characters inside an event are escaped on the way
        // out; colours only on a terminal.
        LogFormat::Text => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder
                .with_ansi(ansi)
                .with_writer(ahp_proxy::log_writer::OneLine { ansi })
                .init()
        }
        // serde_json escapes every control character.
        LogFormat::Json => builder.json().with_writer(std::io::stderr).init(),
    }
}

fn main() -> ExitCode {
    // Before any HTTP client exists (reqwest has no TLS provider of its own here).
    ahp_proxy::supervisor::https::install_provider();
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve {
        listen: None,
        mcp_listen: None,
        stdio: false,
        worker_threads: None,
        park_spin_us: None,
    });
    init_logging(cli.log_format);
    let config_file = cli.config.clone().or_else(nearest_config);
    let loaded = match &config_file {
        Some(path) => Config::load(path),
        // No file: every key at its default (typically with --manifest).
        None => Config::parse(
            "",
            "(defaults)",
            &std::env::current_dir().unwrap_or_default(),
        ),
    };
    let mut config = match loaded {
        Ok(config) => config,
        // A client command told where the proxy is does not need the config.
        Err(_) if remote_of(&command).is_some_and(|r| r.url.is_some()) => {
            Config::parse("", "(defaults)", std::path::Path::new("."))
                .unwrap_or_else(|_| unreachable!("an empty config is valid"))
        }
        Err(error) => {
            if matches!(command, Command::Check { json: true, .. }) {
                print_out(&json_escaped(&check::render_config_error_json(&error)));
            }
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    for manifest in &cli.manifests {
        let absolute = std::path::absolute(manifest).unwrap_or_else(|_| manifest.clone());
        config
            .manifests
            .push(ahp_proxy::config::normalize(&absolute));
    }
    if let Some(remote) = remote_of(&command) {
        let endpoint = endpoint(&config, remote);
        return control(command, endpoint);
    }
    match command {
        Command::Check { json, start } => check(&config, config_file.as_deref(), json, start),
        Command::Trust { names, all } => trust(&config, &names, all, true),
        Command::Untrust { names } => trust(&config, &names, false, false),
        Command::Serve {
            listen,
            mcp_listen,
            stdio,
            worker_threads,
            park_spin_us,
        } => {
            let options = ahp_proxy::serve::Options {
                stdio,
                config_file: config_file.map(|p| std::path::absolute(&p).unwrap_or(p)),
                text_banner: matches!(cli.log_format, LogFormat::Text),
                // Here, where the process still has one thread: a copy of it, forked.
                watchdog: ahp_proxy::supervisor::process::watchdog::Forked::start(),
            };
            serve(
                config,
                listen,
                mcp_listen,
                options,
                worker_threads,
                park_spin_us,
            )
        }
        _ => unreachable!("client commands are run above"),
    }
}

/// `trust` (`grant`) or `untrust` the servers `names` (`all`: every one waiting); no name:
/// list them. Exit 1 when a name matches nothing or the decision cannot be kept.
fn trust(config: &Config, names: &[String], all: bool, grant: bool) -> ExitCode {
    let ctx = Context::from_process(config.data_dir.clone(), &config.inputs.0);
    let catalog = Catalog::scan(ahp_proxy::catalog::Sources::of(config), &ctx);
    let store = ahp_proxy::trust::TrustStore::open(&config.data_dir);
    let asking = ahp_proxy::trusting::asking(&catalog, &store);
    if names.is_empty() && !all {
        print_out(&ahp_proxy::trusting::render(&asking));
        return ExitCode::SUCCESS;
    }
    let picked = match ahp_proxy::trusting::pick(&asking, names, all) {
        Ok(picked) => picked,
        Err(why) => {
            eprintln!("{why}");
            return ExitCode::FAILURE;
        }
    };
    for server in picked {
        let kept = match grant {
            true => store.trust(&server.fingerprint, &server.name),
            false => store.untrust(&server.fingerprint).map(|_| ()),
        };
        if let Err(error) = kept {
            eprintln!("cannot write {}: {error}", store.path().display());
            return ExitCode::FAILURE;
        }
        // Said on stderr: stdout is for the listing (and may be a harness's pipe).
        let said = if grant {
            "trusted"
        } else {
            "no longer trusted"
        };
        eprintln!("{}: {said}", ahp_proxy::untrusted::Escaped(&server.name));
    }
    ExitCode::SUCCESS
}

fn check(config: &Config, file: Option<&Path>, json: bool, start: bool) -> ExitCode {
    let ctx = Context::from_process(config.data_dir.clone(), &config.inputs.0);
    let catalog = Catalog::scan(ahp_proxy::catalog::Sources::of(config), &ctx);
    let missing = check::missing_programs(&catalog);
    let outcomes = match start.then(|| runtime(false)) {
        None => None,
        Some(Ok(runtime)) => {
            let trust = std::sync::Arc::new(ahp_proxy::trust::TrustStore::open(&config.data_dir));
            let outcomes =
                runtime.block_on(check::start::start_all(&config.supervisor, &catalog, trust));
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            Some(outcomes)
        }
        Some(Err(error)) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    if json {
        print_out(&json_escaped(&check::render_json(
            &catalog,
            &missing,
            outcomes.as_deref(),
            &config.approval,
        )));
    } else {
        let file = file.map(|f| std::path::absolute(f).unwrap_or_else(|_| f.to_path_buf()));
        print_out(&check::render_header(config, file.as_deref()));
        print_out(&check::render_text(&catalog, &missing));
        let store = ahp_proxy::trust::TrustStore::open(&config.data_dir);
        let asking = ahp_proxy::trusting::asking(&catalog, &store);
        print_out(&ahp_proxy::trusting::render_awaiting(&asking));
        match &outcomes {
            Some(outcomes) => print_out(&check::start::render_text(outcomes)),
            None => print_out(&check::render_not_started(&catalog)),
        }
    }
    let failed = outcomes
        .as_deref()
        .is_some_and(|o| o.iter().any(|o| o.failed()));
    if check::has_errors(&catalog) || !missing.is_empty() || failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The nearest proxy.toml (`ahp_proxy::config::locate`): named as `proxy.toml` when it is in
/// this folder, by its whole path when it is above. One above that another user owns is
/// not read, and said.
fn nearest_config() -> Option<PathBuf> {
    use ahp_proxy::config::locate::{self, Found};
    let here = std::env::current_dir().ok()?;
    match locate::nearest(&here, locate::current_user()) {
        Found::File(path) => Some(
            path.strip_prefix(&here)
                .map_or_else(|_| path.clone(), Path::to_path_buf),
        ),
        Found::NotOwned(path) => {
            eprintln!(
                "ahp-proxy: {} belongs to another user: not read (`--config` reads it)",
                path.display()
            );
            None
        }
        Found::Nothing => None,
    }
}

/// The `--url` of a client command, if `command` is one.
fn remote_of(command: &Command) -> Option<&Remote> {
    match command {
        Command::Status { remote, .. }
        | Command::Start { remote, .. }
        | Command::Stop { remote, .. }
        | Command::Restart { remote, .. }
        | Command::Enable { remote, .. }
        | Command::Disable { remote, .. }
        | Command::Approvals { remote, .. }
        | Command::Approve { remote, .. }
        | Command::Deny { remote, .. } => Some(remote),
        Command::Serve { .. }
        | Command::Check { .. }
        | Command::Trust { .. }
        | Command::Untrust { .. } => None,
    }
}

/// Where a client command connects: `--url`, else `ws://` at `ahp.listen` (an unspecified
/// address means this machine); the token from `AHP_PROXY_TOKEN`, else `ahp.token`.
fn endpoint(config: &Config, remote: &Remote) -> Endpoint {
    let url = remote.url.clone().unwrap_or_else(|| {
        let mut addr = config.ahp.listen;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("ws://{addr}")
    });
    let token = std::env::var(ahp_proxy::config::TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty())
        .or_else(|| config.ahp.token.as_ref().map(|t| t.0.clone()));
    Endpoint { url, token }
}

/// Run a client command against a running proxy.
fn control(command: Command, endpoint: Endpoint) -> ExitCode {
    let runtime = match runtime(true) {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let verb = |verb, name| runtime.block_on(control::steer::run(&endpoint, verb, name));
    let status = match &command {
        Command::Status { json, watch, .. } => {
            runtime.block_on(control::status(&endpoint, *json, *watch))
        }
        Command::Start { server, .. } => verb(Verb::Start, server),
        Command::Stop { server, .. } => verb(Verb::Stop, server),
        Command::Restart { server, .. } => verb(Verb::Restart, server),
        Command::Enable { name, .. } => verb(Verb::Enable, name),
        Command::Disable { name, .. } => verb(Verb::Disable, name),
        Command::Approvals { json, .. } => {
            runtime.block_on(control::approvals::list(&endpoint, *json))
        }
        Command::Approve { id, .. } => {
            runtime.block_on(control::approvals::decide(&endpoint, id, true, None))
        }
        Command::Deny { id, reason, .. } => runtime.block_on(control::approvals::decide(
            &endpoint,
            id,
            false,
            reason.as_deref(),
        )),
        Command::Serve { .. }
        | Command::Check { .. }
        | Command::Trust { .. }
        | Command::Untrust { .. } => 2,
    };
    ExitCode::from(status)
}

/// A runtime for a short-lived command: one thread (`current`) or one per core.
fn runtime(current: bool) -> Result<tokio::runtime::Runtime, String> {
    let mut builder = if current {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    builder
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))
}

/// Write `text` (plus a newline when it has none) to stdout. A reader that went away
/// (`check | head`) is not an error worth a panic.
fn print_out(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// How long the worker watches its pipes and connections before it parks: on a VM, a request
/// or answer due within it then wakes no idle vCPU (`--stdio`: added p50 +60-90 → +36-41 µs;
/// `/mcp/echo` over HTTP: 136 → 73 µs p50 in one run; docs/benchmarks.md).
const DEFAULT_PARK_SPIN_US: u32 = 50;

fn serve(
    mut config: Config,
    listen: Option<SocketAddr>,
    mcp_listen: Option<SocketAddr>,
    options: ahp_proxy::serve::Options,
    worker_threads: Option<u16>,
    park_spin_us: Option<u32>,
) -> ExitCode {
    let stdio = options.stdio;
    if let Some(listen) = listen {
        config.ahp.listen = listen;
    }
    match mcp_listen {
        Some(mcp_listen) => config.mcp.listen = Some(mcp_listen),
        // A harness that launches the sidecar speaks MCP over stdio; several such sidecars
        // must not fight over one HTTP port.
        None if stdio => config.mcp.listen = None,
        None => {}
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    // One worker unless told otherwise, on every front: a call's request, its upstream
    // exchange and its answer then run on one thread, with no wake-up of another core in
    // between (on a 2-core VM a worker per core added ~+100 µs at one call in flight against
    // ~+27 µs, and carried fewer calls/s at 32 sessions). Blocking work goes to the runtime's
    // blocking threads (spawn_blocking). See docs/benchmarks.md ("One worker by default").
    builder.worker_threads(worker_threads.map_or(1, usize::from));
    let park_spin_us = park_spin_us.unwrap_or(DEFAULT_PARK_SPIN_US);
    if park_spin_us > 0 {
        ahp_proxy::park_spin::set_budget(std::time::Duration::from_micros(u64::from(park_spin_us)));
        builder.on_thread_park(ahp_proxy::park_spin::before_park);
    }
    // The harness's stdin is watched for the whole run (when spinning: set above); so are the
    // HTTP front's connections and the servers' pipes and connections while they live.
    let _stdin_watched = stdio
        .then(|| ahp_proxy::park_spin::Watched::new(std::os::fd::AsFd::as_fd(&std::io::stdin())));
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(ahp_proxy::serve::run(config, options));
    // Timers still pending (client grace periods) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("ahp-proxy: {error}");
            ExitCode::FAILURE
        }
    }
}
