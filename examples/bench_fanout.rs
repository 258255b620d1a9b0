//! Fan-out benchmark: prints numbers, baselines side by side in the same run, no assertions.
//!
//! Latency from an action being triggered to each subscribed AHP client receiving it, at 1,
//! 10 and 100 clients, one action in flight:
//!
//! 1. `dispatchAction` (a `session/titleChanged` from one more client) → the echo at every
//!    subscriber. Baselines: a minimal WebSocket broadcast server (tokio-tungstenite, in this
//!    process, on a runtime of its own) relaying one text frame to the same number of
//!    clients; and the proxy's own `ping` round trip (one client, no fan-out).
//! 2. The same with one more subscriber that never reads (a small receive buffer, and
//!    `client_queue = 16`), which also follows a second session where a 32 KiB active-client
//!    record is dispatched after every round (not timed), so that it backs up and is cut off midway:
//!    the others must not notice it. Baseline: the same with that subscriber reading.
//! 3. A file edit (a plugin's `plugin.json` renamed into place, `watch_debounce_ms = 0`) →
//!    `session/customizationUpdated` at every subscriber.
//!
//! Clients are raw WebSocket connections that speak AHP (`initialize` with the default
//! session) and look for the round's marker in each text frame without decoding it, so the
//! numbers are the proxy's and the network's, not a JSON decoder's. "every client" is the
//! time until the last of them has it.
//!
//! Run: `cargo build --release && cargo run --release --example bench_fanout`. Exits 2 when the
//! stalled subscriber was not cut off (the second table would then measure nothing).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;

use common::{percentile, proxy_binary, start_proxy, Proxy};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::{broadcast, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const SIZES: [usize; 3] = [1, 10, 100];
const ROUNDS: usize = 300;
const EDITS: usize = 100;
const WARMUP: usize = 20;
const SESSION: &str = "ahp-proxy:/default";
/// Hang guard for one round; never reached on a working proxy.
const PATIENCE: Duration = Duration::from_secs(20);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

fn main() {
    let binary = proxy_binary();
    let dir = common::scratch_dir("fanout");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("machine: {}", machine());
    println!("\n== dispatchAction → every subscriber ({ROUNDS} actions per row, one in flight) ==");
    header();
    let baseline = BroadcastServer::start();
    let ping = runtime.block_on(ping_round_trip(&binary, &dir));
    row("baseline: ahp-proxy `ping` round trip", 1, &ping, None);
    for n in SIZES {
        let rounds = runtime.block_on(measure_baseline(&baseline, n));
        report("baseline: minimal WebSocket broadcast", n, rounds);
    }
    for n in SIZES {
        let config = dir.join(format!("dispatch-{n}.toml"));
        std::fs::write(&config, "").unwrap();
        let proxy = start_proxy(&binary, &config);
        let rounds = runtime.block_on(measure_dispatch(&proxy, n, Extra::None));
        report("ahp-proxy", n, rounds);
    }

    println!(
        "\n== the same with one more subscriber and a 32 KiB active-client record on its second session after \
         each round (client_queue = 16) =="
    );
    header();
    let mut never_cut_off = false;
    for n in SIZES {
        let config = dir.join(format!("reading-{n}.toml"));
        std::fs::write(&config, "[limits]\nclient_queue = 16\n").unwrap();
        let proxy = start_proxy(&binary, &config);
        let rounds = runtime.block_on(measure_dispatch(&proxy, n, Extra::Reading));
        report("baseline: ahp-proxy + 1 more that reads", n, rounds);
    }
    for n in SIZES {
        let config = dir.join(format!("stalled-{n}.toml"));
        std::fs::write(&config, "[limits]\nclient_queue = 16\n").unwrap();
        let proxy = start_proxy(&binary, &config);
        let rounds = runtime.block_on(measure_dispatch(&proxy, n, Extra::Stalled));
        let kicked = proxy.warned("outbound queue full");
        never_cut_off |= kicked == 0;
        report(
            &format!("ahp-proxy + 1 stalled (cut off: {kicked})"),
            n,
            rounds,
        );
    }

    println!(
        "\n== file edit → customizationUpdated at every subscriber ({EDITS} edits per row, \
         watch_debounce_ms = 0) =="
    );
    header();
    for n in SIZES {
        let root = dir.join(format!("plugins-{n}"));
        write_plugin(&root, "warmup");
        let config = dir.join(format!("edit-{n}.toml"));
        std::fs::write(
            &config,
            format!(
                "plugin_roots = [{:?}]\n[limits]\nwatch_debounce_ms = 0\n[trust]\nmanifests = \"trusted\"\nplugins = \"trusted\"\ndirectories = \"trusted\"\n",
                root.display().to_string()
            ),
        )
        .unwrap();
        let proxy = start_proxy(&binary, &config);
        let rounds = runtime.block_on(measure_edits(&proxy, &root, n));
        report("ahp-proxy", n, rounds);
    }
    let _ = std::fs::remove_dir_all(&dir);
    if never_cut_off {
        println!("\nthe stalled subscriber was not cut off in every row: the test did not happen");
        std::process::exit(2);
    }
}

fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!("{cores} cores, load average {} at start", load.join(" "))
}

fn header() {
    println!(
        "{:<44} {:>7} {:>10} {:>10} {:>12} {:>12}",
        "", "clients", "p50", "p99", "every p50", "every p99"
    );
}

/// Per round: when it was triggered, and when each client received it.
struct Round {
    sent: Instant,
    received: Vec<Instant>,
}

fn report(label: &str, clients: usize, rounds: Vec<Round>) {
    let mut each = Vec::new();
    let mut every = Vec::new();
    for round in rounds.iter().skip(WARMUP) {
        let ms = |t: &Instant| t.duration_since(round.sent).as_secs_f64() * 1000.0;
        each.extend(round.received.iter().map(ms));
        every.push(round.received.iter().map(ms).fold(0.0, f64::max));
    }
    each.sort_by(f64::total_cmp);
    every.sort_by(f64::total_cmp);
    row(label, clients, &each, Some(&every));
}

fn row(label: &str, clients: usize, each: &[f64], every: Option<&[f64]>) {
    let mut each = each.to_vec();
    each.sort_by(f64::total_cmp);
    let every = every
        .map(|e| {
            format!(
                "{:>10.3}ms {:>10.3}ms",
                percentile(e, 50.0),
                percentile(e, 99.0)
            )
        })
        .unwrap_or_default();
    println!(
        "{label:<44} {clients:>7} {:>8.3}ms {:>8.3}ms {every}",
        percentile(&each, 50.0),
        percentile(&each, 99.0),
    );
}

// ---------------------------------------------------------------------------------------
// receivers

/// `n` from the first `bench-<n>"` in a frame.
fn marker(text: &str) -> Option<usize> {
    text.match_indices("bench-").find_map(|(at, tag)| {
        let rest = &text[at + tag.len()..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        (digits > 0 && rest[digits..].starts_with('"'))
            .then(|| rest[..digits].parse().ok())
            .flatten()
    })
}

/// Read `ws` forever, reporting `(receiver, round, when)` for every marked frame.
fn receive(mut ws: Ws, me: usize, out: mpsc::UnboundedSender<(usize, usize, Instant)>) {
    tokio::spawn(async move {
        while let Some(Ok(message)) = ws.next().await {
            if let Message::Text(text) = message {
                if let Some(round) = marker(text.as_str()) {
                    let _ = out.send((me, round, Instant::now()));
                }
            }
        }
    });
}

/// Wait until all `n` receivers have reported `round`.
async fn gather(
    rx: &mut mpsc::UnboundedReceiver<(usize, usize, Instant)>,
    round: usize,
    n: usize,
    sent: Instant,
) -> Round {
    let mut received = vec![None; n];
    let mut left = n;
    while left > 0 {
        let (who, r, at) = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("round {round}: {left} of {n} clients got nothing"))
            .expect("receivers alive");
        if r == round && received[who].is_none() {
            received[who] = Some(at);
            left -= 1;
        }
    }
    Round {
        sent,
        received: received.into_iter().map(Option::unwrap).collect(),
    }
}

async fn connect(url: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("connect");
    ws
}

/// A connection with a receive buffer of about `bytes` that is never read after `initialize`.
async fn stalled(proxy: &Proxy) -> Ws {
    let addr = proxy.url.trim_start_matches("ws://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(&proxy.url, MaybeTlsStream::Plain(stream))
        .await
        .unwrap();
    initialize(&mut ws, "stalled", &[SESSION, STALL_SESSION]).await;
    ws
}

/// `initialize` as `client_id`, waiting for its answer.
async fn initialize(ws: &mut Ws, client_id: &str, subscriptions: &[&str]) {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": client_id,
        "initialSubscriptions": subscriptions}});
    ws.send(Message::Text(request.to_string().into()))
        .await
        .unwrap();
    while let Some(Ok(message)) = ws.next().await {
        if let Message::Text(text) = message {
            if text.as_str().contains("\"id\":1") {
                return;
            }
        }
    }
    panic!("no answer to initialize");
}

/// `n` initialized receivers subscribed to the default session.
async fn subscribers(url: &str, n: usize) -> mpsc::UnboundedReceiver<(usize, usize, Instant)> {
    let (tx, rx) = mpsc::unbounded_channel();
    for i in 0..n {
        let mut ws = connect(url).await;
        initialize(&mut ws, &format!("r{i}"), &[SESSION]).await;
        receive(ws, i, tx.clone());
    }
    rx
}

// ---------------------------------------------------------------------------------------
// the proxy

async fn ping_round_trip(binary: &Path, dir: &Path) -> Vec<f64> {
    let config = dir.join("ping.toml");
    std::fs::write(&config, "").unwrap();
    let proxy = start_proxy(binary, &config);
    let mut ws = connect(&proxy.url).await;
    initialize(&mut ws, "pinger", &[]).await;
    let mut samples = Vec::new();
    for id in 2..(2 + WARMUP + ROUNDS) {
        let ping = json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {"channel": "ahp-root://"}});
        let sent = Instant::now();
        ws.send(Message::Text(ping.to_string().into()))
            .await
            .unwrap();
        let answer = ws.next().await.unwrap().unwrap();
        assert!(answer.to_text().unwrap().contains(&format!("\"id\":{id}")));
        if id >= 2 + WARMUP {
            samples.push(sent.elapsed().as_secs_f64() * 1000.0);
        }
    }
    samples
}

/// A second session only the stalled client follows: a large record dispatched there after
/// every round (not timed) backs it up until the proxy cuts it off, while the measured
/// clients see only the default session.
const STALL_SESSION: &str = "ahp-proxy:/stall";

/// One more subscriber besides the `n` timed ones, following both sessions, while a 32 KiB
/// active-client record is dispatched on the second one after every round.
#[derive(Clone, Copy, PartialEq)]
enum Extra {
    /// No extra subscriber and no large records.
    None,
    /// It reads everything (the baseline for `Stalled`: the same work, nobody stuck).
    Reading,
    /// It never reads, and is cut off once its queue overflows.
    Stalled,
}

async fn measure_dispatch(proxy: &Proxy, n: usize, extra: Extra) -> Vec<Round> {
    let with_stalled = extra != Extra::None;
    let mut sender = connect(&proxy.url).await;
    initialize(&mut sender, "sender", &[]).await;
    let _stalled = if with_stalled {
        let create = json!({"jsonrpc": "2.0", "id": 2, "method": "createSession",
            "params": {"channel": STALL_SESSION}});
        sender
            .send(Message::Text(create.to_string().into()))
            .await
            .unwrap();
        let answer = sender.next().await.unwrap().unwrap();
        assert!(
            answer.to_text().unwrap().contains("\"result\":null"),
            "{answer}"
        );
        if extra == Extra::Stalled {
            Some(stalled(proxy).await)
        } else {
            let mut reader = connect(&proxy.url).await;
            initialize(&mut reader, "reader", &[SESSION, STALL_SESSION]).await;
            tokio::spawn(async move { while let Some(Ok(_)) = reader.next().await {} });
            None
        }
    } else {
        None
    };
    let mut rx = subscribers(&proxy.url, n).await;
    // 32 KiB of padding: an active-client record with a long tool description (titles
    // are capped at 1 KiB).
    let padding = "x".repeat(32 * 1024);
    let mut rounds = Vec::new();
    let mut seq = 0;
    for round in 0..WARMUP + ROUNDS {
        seq += 1;
        let dispatch = json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": {
            "channel": SESSION, "clientSeq": seq,
            "action": {"type": "session/titleChanged", "title": format!("bench-{round}")}}});
        let sent = Instant::now();
        sender
            .send(Message::Text(dispatch.to_string().into()))
            .await
            .unwrap();
        rounds.push(gather(&mut rx, round, n, sent).await);
        if with_stalled {
            seq += 1;
            let flood = json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": {
                "channel": STALL_SESSION, "clientSeq": seq,
                "action": {"type": "session/activeClientSet", "activeClient": {"clientId": "sender",
                    "tools": [{"name": "padding", "description": format!("{round} {padding}"),
                               "inputSchema": {"type": "object"}}]}}}});
            sender
                .send(Message::Text(flood.to_string().into()))
                .await
                .unwrap();
            // Its cost is not the stall's: wait until the proxy has handled it (a ping on the
            // same connection is answered after it) before the next timed round.
            let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping",
                "params": {"channel": "ahp-root://"}});
            sender
                .send(Message::Text(ping.to_string().into()))
                .await
                .unwrap();
            while let Some(Ok(message)) = sender.next().await {
                if message.to_text().is_ok_and(|t| t.contains("\"id\":3")) {
                    break;
                }
            }
        }
    }
    rounds
}

fn write_plugin(root: &Path, version: &str) {
    let plugin = root.join("bench/.plugin");
    std::fs::create_dir_all(&plugin).unwrap();
    let temp = plugin.join(".plugin.json.tmp");
    std::fs::write(
        &temp,
        json!({"name": "bench", "version": version}).to_string(),
    )
    .unwrap();
    std::fs::rename(&temp, plugin.join("plugin.json")).unwrap();
}

async fn measure_edits(proxy: &Proxy, root: &Path, n: usize) -> Vec<Round> {
    let mut rx = subscribers(&proxy.url, n).await;
    let mut rounds = Vec::new();
    for round in 0..WARMUP + EDITS {
        let sent = Instant::now();
        write_plugin(root, &format!("bench-{round}"));
        rounds.push(gather(&mut rx, round, n, sent).await);
    }
    rounds
}

// ---------------------------------------------------------------------------------------
// the baseline: a minimal WebSocket broadcast server

/// Relays every text frame any client sends to every connected client (itself included),
/// on a runtime of its own with as many threads as the proxy's.
struct BroadcastServer {
    url: String,
    _runtime: tokio::runtime::Runtime,
}

impl BroadcastServer {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (relay, _) = broadcast::channel::<Arc<str>>(1024);
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let relay = relay.clone();
                tokio::spawn(async move {
                    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    let (mut sink, mut source) = ws.split();
                    let mut out = relay.subscribe();
                    loop {
                        tokio::select! {
                            frame = out.recv() => match frame {
                                Ok(text) => {
                                    if sink.send(Message::Text((&*text).into())).await.is_err() {
                                        return;
                                    }
                                }
                                Err(_) => return,
                            },
                            message = source.next() => match message {
                                Some(Ok(Message::Text(text))) => {
                                    let _ = relay.send(Arc::from(text.as_str()));
                                }
                                Some(Ok(_)) => {}
                                _ => return,
                            },
                        }
                    }
                });
            }
        });
        Self {
            url,
            _runtime: runtime,
        }
    }
}

async fn measure_baseline(server: &BroadcastServer, n: usize) -> Vec<Round> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    for i in 0..n {
        let ws = connect(&server.url).await;
        receive(ws, i, tx.clone());
    }
    // The sender gets its own frames back: a task drains them so its socket never fills.
    let (mut sender, echoes) = connect(&server.url).await.split();
    tokio::spawn(echoes.for_each(|_| async {}));
    let mut rounds = Vec::new();
    for round in 0..WARMUP + ROUNDS {
        // The same frame the proxy would send: an action envelope with the title.
        let frame = json!({"jsonrpc": "2.0", "method": "action", "params": {
            "channel": SESSION, "serverSeq": round + 1,
            "action": {"type": "session/titleChanged", "title": format!("bench-{round}")},
            "origin": {"clientId": "sender", "clientSeq": round + 1}}});
        let sent = Instant::now();
        sender
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
        rounds.push(gather(&mut rx, round, n, sent).await);
    }
    rounds
}
