//! The `ahp-proxy` command line: `serve` (default) and `check`. Wiring only.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;

use ahp_proxy::catalog::Catalog;
use ahp_proxy::config::Config;
use ahp_proxy::discovery::Context;

#[derive(Parser)]
#[command(
    name = "ahp-proxy",
    version,
    about = "Serve MCP servers to an MCP-only harness and show them to AHP clients"
)]
struct Cli {
    /// The configuration file [default: ./proxy.toml when it exists, else built-in defaults].
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
        /// Threads running the proxy's tasks [default: 1 with --stdio, where one harness
        /// talks to one sidecar and a call should not hop between threads; else one per
        /// core].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        worker_threads: Option<u16>,
    },
    /// Validate the configuration, scan every plugin and manifest, and print the tree an AHP
    /// client would see with every problem found. Exit 1 when something is in error.
    Check {
        /// Print JSON (`{customizations, problems}`) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve {
        listen: None,
        mcp_listen: None,
        stdio: false,
        worker_threads: None,
    });
    init_logging(cli.log_format);
    let loaded = match &cli.config {
        Some(path) => Config::load(path),
        None if std::path::Path::new("proxy.toml").exists() => {
            Config::load(std::path::Path::new("proxy.toml"))
        }
        // No file: every key at its default (typically with --manifest).
        None => Config::parse(
            "",
            "(defaults)",
            &std::env::current_dir().unwrap_or_default(),
        ),
    };
    let mut config = match loaded {
        Ok(config) => config,
        Err(error) => {
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
    match command {
        Command::Check { json } => check(&config, json),
        Command::Serve {
            listen,
            mcp_listen,
            stdio,
            worker_threads,
        } => serve(config, listen, mcp_listen, stdio, worker_threads),
    }
}

fn check(config: &Config, json: bool) -> ExitCode {
    let ctx = Context::from_process(config.data_dir.clone());
    let catalog = Catalog::scan(ahp_proxy::serve::sources(config), &ctx);
    if json {
        println!("{}", ahp_proxy::check::render_json(&catalog));
    } else {
        println!("AHP endpoint   ws://{}", config.ahp.listen);
        match config.mcp.listen {
            Some(addr) => println!("MCP endpoint   http://{addr}/mcp (and /mcp/<server>)"),
            None => println!("MCP endpoint   stdio only (serve --stdio)"),
        }
        println!(
            "agent          {} ({})",
            config.agent.display_name, config.agent.provider
        );
        println!("session        {}", config.session.title);
        for root in &config.plugin_roots {
            println!("plugin root    {}", root.display());
        }
        for manifest in &config.manifests {
            println!("manifest       {}", manifest.display());
        }
        for dir in &config.directories {
            println!("directory      {}", dir.path.display());
        }
        print!("{}", ahp_proxy::check::render_text(&catalog));
    }
    if ahp_proxy::check::has_errors(&catalog) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn serve(
    mut config: Config,
    listen: Option<SocketAddr>,
    mcp_listen: Option<SocketAddr>,
    stdio: bool,
    worker_threads: Option<u16>,
) -> ExitCode {
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
    // One worker with --stdio: one harness, one sidecar, a call stays on one thread (see
    // examples/bench_front and docs/benchmarks.md; with stdin/stdout as non-blocking pipes a
    // worker per core measures about the same there, and is faster for many HTTP sessions).
    match worker_threads {
        Some(n) => {
            builder.worker_threads(usize::from(n));
        }
        None if stdio => {
            builder.worker_threads(1);
        }
        None => {}
    }
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(ahp_proxy::serve::run(config, stdio));
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
