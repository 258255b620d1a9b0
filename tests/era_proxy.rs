//! The era matrix through ahp-proxy: the official TypeScript SDK clients of both MCP eras (v1;
//! v2 in its default legacy mode, pinned to 2026-07-28, and auto) against the era test servers
//! (SDK v1 legacy; SDK v2 dual-era, dual-era with stateless legacy HTTP, modern-only) as stdio
//! children and HTTP upstreams, through each front: `--stdio`, `/mcp/<server>` and `/mcp`.
//! Every harness runs in its own era; [`expected`] says which scenarios pass in each cell today
//! (the table in docs/mcp-front.md), and the test holds the proxy to exactly that: an expected
//! scenario that fails is a failure, one that passes unexpectedly is reported as "now passes,
//! update the matrix". `ERA_PROXY_ONLY=<text>` runs only the cells whose label contains it.
mod common;
#[allow(dead_code)] // the toolkit serves several test files
mod era;

use era::{in_parallel, Client, Outcome, Target, Toolkit, Transport, CLIENTS, SCENARIOS, V2_AUTO};
use era::{SERVERS, V2_MODERN};

/// The input a server asks for in each scenario, by method.
const ASKS: [(&str, &str); 3] = [
    ("elicit", "elicitation/create"),
    ("sample", "sampling/createMessage"),
    ("roots", "roots/list"),
];

/// The name the era server has in each proxy's config.
const NAME: &str = "era";

/// A harness's front door.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Front {
    Stdio,
    Server,
    Aggregate,
}

impl Front {
    fn name(self) -> &'static str {
        match self {
            Front::Stdio => "--stdio",
            Front::Server => "/mcp/<server>",
            Front::Aggregate => "/mcp",
        }
    }
}

/// The era a harness speaks through the proxy: its own.
fn harness_era(client: Client) -> &'static str {
    if client == V2_MODERN || client == V2_AUTO {
        "modern"
    } else {
        "legacy"
    }
}

/// The scenarios that pass through the proxy in one cell (harness `client` through `front`,
/// whatever the server's era and transport): the matrix of docs/mcp-front.md ("The era
/// matrix through the proxy"): every scenario, in every cell. A cell that must be excepted
/// (a limit found later) is named here, and the test reports when it passes again.
fn expected(_client: Client, _front: Front) -> Vec<&'static str> {
    SCENARIOS.to_vec()
}

/// What is wrong with one cell's outcomes (`passing` is what should pass): every scenario
/// runs at the harness's own era; those expected pass, asking for input as that era asks.
/// Scenarios that pass beyond the matrix go to `news`.
fn problems(client: Client, passing: &[&str], outcomes: &[Outcome]) -> (Vec<String>, Vec<String>) {
    let era = harness_era(client);
    let version = if era == "modern" {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    let mut wrong = Vec::new();
    let mut news = Vec::new();
    for o in outcomes {
        let say = |what: String| format!("{}: {what} ({})", o.scenario, o.line);
        if o.era.as_deref() != Some(era) || o.version.as_deref() != Some(version) {
            wrong.push(say(format!("should run at {era} {version}")));
        }
        if !passing.contains(&o.scenario.as_str()) {
            if o.ok {
                news.push(format!("{}: now passes, update the matrix", o.scenario));
            }
            continue;
        }
        if !o.ok {
            wrong.push(say("should pass".into()));
            continue;
        }
        if let Some((_, method)) = ASKS.iter().find(|(s, _)| *s == o.scenario) {
            let how = if era == "modern" {
                format!("input_required {method}")
            } else {
                format!("request {method}")
            };
            if !o.wire.iter().any(|w| w.contains(&how)) {
                wrong.push(say(format!("should see `{how}`")));
            }
        }
    }
    (wrong, news)
}

/// A proxy config serving one era server: a stdio child (`command`) or an HTTP upstream.
fn config(upstream: &Target) -> String {
    let entry = match upstream {
        Target::Command(argv) => format!(
            "command = {:?}\nargs = {}\n",
            argv[0],
            serde_json::to_string(&argv[1..]).expect("args as JSON")
        ),
        Target::Url(url) => format!("url = {url:?}\n"),
    };
    format!("[servers.{NAME}]\n{entry}")
}

/// The command line of a proxy serving `config_path` to a harness on its stdio.
fn stdio_front(config_path: &std::path::Path) -> Target {
    Target::Command(vec![
        env!("CARGO_BIN_EXE_ahp-proxy").to_string(),
        "--config".into(),
        config_path.display().to_string(),
        "serve".into(),
        "--stdio".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ])
}

#[test]
fn every_harness_meets_every_server_through_the_proxy_whatever_their_eras() {
    let kit = Toolkit::load();
    let only = std::env::var("ERA_PROXY_ONLY").unwrap_or_default();
    let http: Vec<_> = SERVERS
        .iter()
        .map(|kind| (*kind, kit.start_http(kind)))
        .collect();
    // One upstream per (kind, transport), each behind one HTTP proxy and one config file for
    // the stdio front's proxies.
    let mut upstreams: Vec<(&str, Transport, Target)> = Vec::new();
    for kind in SERVERS.into_iter().filter(|k| *k != "dual-stateless") {
        upstreams.push((
            kind,
            Transport::Stdio,
            Target::Command(kit.server(kind, Transport::Stdio)),
        ));
    }
    for (kind, server) in &http {
        upstreams.push((kind, Transport::Http, Target::Url(server.url.clone())));
    }
    let scratch = common::ScratchDir::new("era-proxy");
    let mut proxies = Vec::new();
    // Cells that share an HTTP proxy run one after another (a stdio server cannot tell whose
    // call its request belongs to when two harnesses call at once, and the proxy then refuses
    // to guess: docs/mcp-front.md); each stdio front is a proxy of its own.
    let mut groups: Vec<Vec<Cell>> = Vec::new();
    for (i, (kind, transport, upstream)) in upstreams.iter().enumerate() {
        let text = config(upstream);
        let path = scratch.path().join(format!("proxy-{i}.toml"));
        std::fs::write(&path, &text).expect("write a proxy config");
        let proxy = common::Proxy::start(&text);
        let mut shared = Vec::new();
        for client in CLIENTS {
            for front in [Front::Stdio, Front::Server, Front::Aggregate] {
                let label = format!(
                    "{} {} → {} → {kind} over {}",
                    client.sdk,
                    client.mode,
                    front.name(),
                    transport.name()
                );
                if !label.contains(&only) {
                    continue;
                }
                let passing = expected(client, front);
                match front {
                    Front::Stdio => groups.push(vec![(label, client, stdio_front(&path), passing)]),
                    Front::Server => {
                        let url = format!("{}/{NAME}", proxy.mcp_url);
                        shared.push((label, client, Target::Url(url), passing));
                    }
                    Front::Aggregate => {
                        shared.push((label, client, Target::Url(proxy.mcp_url.clone()), passing));
                    }
                }
            }
        }
        if !shared.is_empty() {
            groups.push(shared);
        }
        proxies.push(proxy);
    }
    assert!(
        !groups.is_empty(),
        "no cell matches ERA_PROXY_ONLY={only:?}"
    );
    let started = std::time::Instant::now();
    let runs = in_parallel(&groups, 4, |cells| {
        cells
            .iter()
            .map(|(_, client, target, _)| kit.drive(*client, target))
            .collect::<Vec<_>>()
    });

    let mut wrong = Vec::new();
    let mut news = Vec::new();
    let mut count = 0;
    for (cells, outcomes) in groups.iter().zip(&runs) {
        for ((label, client, _, passing), outcomes) in cells.iter().zip(outcomes) {
            count += 1;
            let passed: Vec<&str> = outcomes
                .iter()
                .filter(|o| o.ok)
                .map(|o| o.scenario.as_str())
                .collect();
            eprintln!(
                "{label}: {}/{} ({}; expected {})",
                passed.len(),
                SCENARIOS.len(),
                passed.join(" "),
                passing.len()
            );
            let (problems, new) = problems(*client, passing, outcomes);
            wrong.extend(problems.into_iter().map(|p| format!("{label}: {p}")));
            news.extend(new.into_iter().map(|n| format!("{label}: {n}")));
        }
    }
    eprintln!(
        "era matrix through the proxy: {count} cells in {} ms",
        started.elapsed().as_millis()
    );
    for line in &news {
        eprintln!("{line}");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One cell: its label, the harness, where it connects, the scenarios expected to pass.
type Cell = (String, Client, Target, Vec<&'static str>);
