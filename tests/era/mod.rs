//! The era toolkit (`scripts/era.sh`) as Rust tests use it: the official TypeScript SDKs of both
//! MCP eras, their test servers (started here, on OS-chosen ports) and the client driver (one
//! run per cell, one JSON outcome per scenario), plus what the spec promises for each cell direct.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::Value;

/// The driver's scenarios, in its order.
pub const SCENARIOS: [&str; 9] = [
    "list",
    "call",
    "progress",
    "elicit",
    "sample",
    "roots",
    "list_changed",
    "resource_updated",
    "cancel",
];

/// Hang guard for a server to listen, and for one driver run (whose own waits for
/// notifications are bounded by `--wait-ms`, 10 s); a guard, not a measurement.
const PATIENCE: Duration = Duration::from_secs(120);

/// One client of the matrix: an SDK and its version-negotiation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Client {
    pub sdk: &'static str,
    pub mode: &'static str,
}

/// SDK v1 1.32.2: 2025-11-25 only.
pub const V1: Client = Client {
    sdk: "v1",
    mode: "legacy",
};
/// SDK v2 2.4.0 in its default mode: `initialize` at 2025-11-25.
pub const V2_LEGACY: Client = Client {
    sdk: "v2",
    mode: "legacy",
};
/// SDK v2 pinned to 2026-07-28, no fallback.
pub const V2_MODERN: Client = Client {
    sdk: "v2",
    mode: "modern",
};
/// SDK v2 probing with `server/discover`, falling back to `initialize`.
pub const V2_AUTO: Client = Client {
    sdk: "v2",
    mode: "auto",
};
pub const CLIENTS: [Client; 4] = [V1, V2_LEGACY, V2_MODERN, V2_AUTO];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

/// The server kinds of `scripts/era.sh server`: SDK v1 legacy, SDK v2 dual-era (HTTP legacy on
/// sessions), SDK v2 dual-era with the SDK's stateless legacy HTTP, SDK v2 modern-only.
pub const SERVERS: [&str; 4] = ["legacy", "dual", "dual-stateless", "modern"];

/// What the client reached: a URL or a stdio command.
#[derive(Clone, Debug)]
pub enum Target {
    Url(String),
    Command(Vec<String>),
}

/// One scenario's line from the driver.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub scenario: String,
    pub ok: bool,
    pub era: Option<String>,
    pub version: Option<String>,
    pub error: Option<String>,
    /// How the server asked for input: `request <method>` or `input_required <method>…`.
    pub wire: Vec<String>,
    pub line: Value,
}

/// The command lines of `scripts/era.sh commands --json` (installing the toolkit when missing).
pub struct Toolkit {
    driver: Vec<String>,
    servers: Value,
}

impl Toolkit {
    pub fn load() -> Toolkit {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/era.sh");
        let output = Command::new(&script)
            .args(["commands", "--json"])
            .output()
            .expect("run scripts/era.sh");
        assert!(
            output.status.success(),
            "scripts/era.sh commands --json: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let commands: Value = serde_json::from_slice(&output.stdout).expect("JSON commands");
        Toolkit {
            driver: strings(&commands["driver"]),
            servers: commands["servers"].clone(),
        }
    }

    /// A server's command line (HTTP: the port as `<port>`).
    pub fn server(&self, kind: &str, transport: Transport) -> Vec<String> {
        let argv = strings(&self.servers[kind][transport.name()]);
        assert!(!argv.is_empty(), "no {kind} server over {transport:?}");
        argv
    }

    /// A server over streamable HTTP on a port the OS picks; stopped when dropped.
    pub fn start_http(&self, kind: &str) -> HttpServer {
        let argv: Vec<String> = self
            .server(kind, Transport::Http)
            .into_iter()
            .map(|a| if a == "<port>" { "0".into() } else { a })
            .collect();
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start an era server");
        let stdout = child.stdout.take().expect("the server's stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("AHP-ERA-LISTENING ") {
                    let _ = tx.send(url.to_string());
                }
            }
        });
        // Killed when dropped, also when the panic below unwinds.
        let mut server = HttpServer {
            child,
            url: String::new(),
        };
        match rx.recv_timeout(PATIENCE) {
            Ok(url) => server.url = url,
            Err(_) => panic!("the {kind} server did not say where it listens"),
        }
        server
    }

    /// One driver run: `client` against `target`, every scenario; one outcome per scenario.
    pub fn drive(&self, client: Client, target: &Target) -> Vec<Outcome> {
        let mut command = Command::new(&self.driver[0]);
        command.args(&self.driver[1..]).args([
            "--sdk",
            client.sdk,
            "--mode",
            client.mode,
            "--scenario",
            "all",
        ]);
        match target {
            Target::Url(url) => command.args(["--url", url]),
            Target::Command(argv) => command.arg("--command").args(argv),
        };
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the era driver");
        let (stdout, stderr) = (
            child.stdout.take().expect("stdout"),
            child.stderr.take().expect("stderr"),
        );
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let (mut out, mut err) = (String::new(), String::new());
            let err_reader = thread::spawn(move || {
                let _ = BufReader::new(stderr).read_to_string(&mut err);
                err
            });
            let _ = BufReader::new(stdout).read_to_string(&mut out);
            let _ = tx.send((out, err_reader.join().unwrap_or_default()));
        });
        let (out, err) = match rx.recv_timeout(PATIENCE) {
            Ok(done) => done,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the driver ({client:?} against {target:?}) did not finish");
            }
        };
        let _ = child.wait();
        let outcomes: Vec<Outcome> = out
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|line| Outcome {
                scenario: text(&line["scenario"]).unwrap_or_default(),
                ok: line["ok"] == true,
                era: text(&line["era"]),
                version: text(&line["version"]),
                error: text(&line["error"]),
                wire: strings(&line["wire"]),
                line,
            })
            .collect();
        let names: Vec<&str> = outcomes.iter().map(|o| o.scenario.as_str()).collect();
        assert_eq!(
            names, SCENARIOS,
            "the driver ({client:?} against {target:?}) said:\n{out}\n{err}"
        );
        outcomes
    }
}

/// Runs `job` over `items` on `workers` threads; the results in the items' order.
pub fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    job: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let queue = Mutex::new((0..items.len()).collect::<VecDeque<_>>());
    let results = Mutex::new((0..items.len()).map(|_| None).collect::<Vec<Option<R>>>());
    thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let next = queue.lock().map(|mut q| q.pop_front()).ok().flatten();
                let Some(i) = next else { break };
                let result = job(&items[i]);
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("results")
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

/// A server over HTTP; killed when dropped.
pub struct HttpServer {
    child: Child,
    pub url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a cell should show, direct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The client connects in `era` and exactly the scenarios `passing` pass.
    Connects {
        era: &'static str,
        passing: Vec<&'static str>,
    },
    /// The connection is refused; every scenario fails with an error naming `error`.
    Refused { error: &'static str },
}

/// The spec's compatibility matrix, direct (client × server; the transport matters only for
/// the SDK's stateless legacy HTTP, where a request has no session for server→client requests
/// or unsolicited notifications, and a cancellation reaches no running call).
pub fn direct(client: Client, server: &str, transport: Transport) -> Expect {
    let legacy_client = client == V1 || client == V2_LEGACY;
    let all = SCENARIOS.to_vec();
    match server {
        "legacy" if client == V2_MODERN => Expect::Refused {
            error: "ERA_NEGOTIATION_FAILED",
        },
        "legacy" => Expect::Connects {
            era: "legacy",
            passing: all,
        },
        "modern" if legacy_client => Expect::Refused { error: "-32022" },
        "dual-stateless" if legacy_client && transport == Transport::Http => Expect::Connects {
            era: "legacy",
            passing: vec!["list", "call", "progress"],
        },
        _ if legacy_client => Expect::Connects {
            era: "legacy",
            passing: all,
        },
        _ => Expect::Connects {
            era: "modern",
            passing: all,
        },
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(text).collect())
        .unwrap_or_default()
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_string)
}
