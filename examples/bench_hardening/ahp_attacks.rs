//! Attacks on the AHP face: huge and many legal actions against the replay log, titles,
//! sessions, the default session's disposal, the text log, and a secret in a server's URL.

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::ahp::{self, SESSION};
use crate::proxy::{config, Options, Running};
use crate::verdict;

/// The growth of resident memory an attack may cause, in MiB.
const GROWTH_BOUND: f64 = 64.0;

fn start(binary: &Path, dir: &Path, name: &str, text: &str, options: Options) -> Running {
    let config = config(dir, &format!("{name}.toml"), text, "");
    Running::start(binary, &config, options).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// 150 `session/titleChanged` of 4 MiB from one client.
pub async fn titles(binary: &Path, dir: &Path) -> bool {
    let proxy = start(binary, dir, "titles", "", Options::default());
    let mut ws = ahp::connect(&proxy.url).await;
    ahp::initialize(&mut ws, "titles", &[]).await;
    let before = proxy.rss_mib();
    let title = "t".repeat(4 * 1024 * 1024);
    for seq in 0..150 {
        let action = json!({"type": "session/titleChanged", "title": format!("{seq}{title}")});
        ahp::dispatch(&mut ws, seq, action).await;
    }
    let after = proxy.rss_mib();
    proxy.stop();
    verdict(
        after - before <= GROWTH_BOUND,
        format!("titles: 150 × 4 MiB session/titleChanged: RSS {before:.1} → {after:.1} MiB"),
    )
}

/// 1,000 legal 100 KB actions (the client's tool list as active client); then what the
/// replay log holds, found by reconnecting from ever older sequence numbers.
pub async fn replay(binary: &Path, dir: &Path) -> bool {
    let proxy = start(binary, dir, "replay", "", Options::default());
    let mut probe = ahp::connect(&proxy.url).await;
    let first = ahp::initialize(&mut probe, "probe", &[SESSION]).await;
    drop(probe);
    let from = first["result"]["serverSeq"].as_u64().unwrap_or(0);
    let mut ws = ahp::connect(&proxy.url).await;
    ahp::initialize(&mut ws, "replayer", &[]).await;
    let before = proxy.rss_mib();
    let description = "d".repeat(100_000);
    let mut size = 0;
    for seq in 0..1000u64 {
        let action = json!({"type": "session/activeClientSet", "activeClient": {
            "clientId": "replayer",
            "tools": [{"name": "t", "description": format!("{seq}{description}"),
                       "inputSchema": {"type": "object"}}]}});
        size = action.to_string().len();
        ahp::dispatch(&mut ws, seq, action).await;
    }
    let after = proxy.rss_mib();
    let mut last = ahp::connect(&proxy.url).await;
    let to = ahp::initialize(&mut last, "last", &[]).await["result"]["serverSeq"]
        .as_u64()
        .unwrap_or(0);
    drop(last);
    let held = held_by_replay_log(&proxy.url, from, to).await;
    proxy.stop();
    let held_line = match held {
        Some((oldest, actions, bytes)) => format!(
            "; the replay log holds {actions} of them ({:.1} MiB as sent; a reconnect from \
             serverSeq {oldest} or later is replayed, an older one gets snapshots)",
            bytes as f64 / 1048576.0
        ),
        None => "; no gap is replayed".to_string(),
    };
    verdict(
        after - before <= GROWTH_BOUND,
        format!(
            "replay: 1,000 legal actions of {size} bytes: RSS {before:.1} → {after:.1} MiB{held_line}"
        ),
    )
}

/// The oldest `lastSeenServerSeq` in `from..to` that `reconnect` still answers with a replay,
/// with how many actions and bytes that replay carries.
async fn held_by_replay_log(url: &str, from: u64, to: u64) -> Option<(u64, usize, usize)> {
    let reconnect = |seq: u64| async move {
        let mut ws = ahp::connect(url).await;
        let mut bytes = 0;
        let answer = ahp::request_seeing(
            &mut ws,
            2,
            "reconnect",
            json!({"channel": "ahp-root://", "clientId": "probe",
                   "lastSeenServerSeq": seq, "subscriptions": [SESSION]}),
            &mut |text| bytes = text.len(),
        )
        .await;
        let result = &answer["result"];
        (result["type"] == "replay").then(|| {
            let actions = result["actions"].as_array().map_or(0, Vec::len);
            (actions, bytes)
        })
    };
    let (mut lo, mut hi) = (from, to);
    reconnect(hi).await?;
    if let Some((actions, bytes)) = reconnect(lo).await {
        return Some((lo, actions, bytes));
    }
    // reconnect(lo) gets snapshots, reconnect(hi) a replay.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reconnect(mid).await.is_some() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    reconnect(hi)
        .await
        .map(|(actions, bytes)| (hi, actions, bytes))
}

/// 5,000 `createSession` from one client.
pub async fn sessions(binary: &Path, dir: &Path) -> bool {
    let proxy = start(binary, dir, "sessions", "", Options::default());
    let mut ws = ahp::connect(&proxy.url).await;
    ahp::initialize(&mut ws, "maker", &[]).await;
    let before = proxy.rss_mib();
    let mut made = 0;
    for n in 0..5000u64 {
        let answer = ahp::request(
            &mut ws,
            10 + n,
            "createSession",
            json!({"channel": format!("ahp-proxy:/s{n}")}),
        )
        .await;
        if answer.get("result").is_some() {
            made += 1;
        }
    }
    let after = proxy.rss_mib();
    proxy.stop();
    verdict(
        made < 100,
        format!("sessions: 5,000 createSession, {made} made: RSS {before:.1} → {after:.1} MiB"),
    )
}

/// `disposeSession` of the default session; then whether a new client still finds it.
pub async fn dispose(binary: &Path, dir: &Path) -> bool {
    let proxy = start(binary, dir, "dispose", "", Options::default());
    let mut ws = ahp::connect(&proxy.url).await;
    ahp::initialize(&mut ws, "disposer", &[]).await;
    let answer = ahp::request(&mut ws, 2, "disposeSession", json!({"channel": SESSION})).await;
    let code = ahp::error_code(&answer);
    let mut late = ahp::connect(&proxy.url).await;
    let init = ahp::initialize(&mut late, "late", &[SESSION]).await;
    let kept = init["result"]["snapshots"][0]["state"].is_object();
    proxy.stop();
    verdict(
        code != 0 && kept,
        format!(
            "dispose: disposeSession of {SESSION}: {}; a new client {} it",
            if code == 0 {
                "accepted".to_string()
            } else {
                format!("refused with {code}")
            },
            if kept {
                "still finds"
            } else {
                "no longer finds"
            }
        ),
    )
}

/// Client ids against the text log: 20 connections with a 1 MiB one, then one that forges
/// a log line and clears the reader's screen.
pub async fn log(binary: &Path, dir: &Path) -> bool {
    let text_log = Options {
        text_log: true,
        ..Options::default()
    };
    let proxy = start(binary, dir, "log", "", text_log);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = proxy.log_bytes();
    let id = "x".repeat(1024 * 1024);
    for _ in 0..20 {
        let mut ws = ahp::connect(&proxy.url).await;
        ahp::initialize(&mut ws, &id, &[]).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown = proxy.log_bytes() - before;
    proxy.stop();
    let long = verdict(
        grown <= 64 * 1024,
        format!(
            "log: 20 connections with a 1 MiB clientId: the text log grew by {:.1} KiB",
            grown as f64 / 1024.0
        ),
    );

    let proxy = start(binary, dir, "injection", "", text_log);
    let forged = "2026-01-01T00:00:00.000000Z  INFO ahp_proxy: forged";
    for n in 0..10 {
        let mut ws = ahp::connect(&proxy.url).await;
        let id = format!("evil-{n}\n{forged}\x1b[2J\r\u{85}");
        ahp::initialize(&mut ws, &id, &[]).await;
        ahp::request(&mut ws, 2, "ping", json!({"channel": "ahp-root://"})).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = proxy.log_text();
    proxy.stop();
    let forged_lines = text.lines().filter(|l| l.starts_with(forged)).count();
    let escapes = text.matches(['\x1b', '\r', '\u{85}']).count();
    let mentioned = text.matches("evil-").count();
    let clean = verdict(
        forged_lines == 0 && escapes == 0,
        format!(
            "log: 10 clientIds carrying a forged line, ESC, CR and NEL: {forged_lines} forged \
             lines and {escapes} raw control characters in the text log ({mentioned} mentions \
             of those clients)"
        ),
    );
    long && clean
}

/// A server whose URL carries secrets in its path, query and fragment, and cannot be
/// reached: what AHP clients and the log are told about it.
pub async fn url(binary: &Path, dir: &Path) -> bool {
    let secrets = ["KEY-4f2a9c", "SECRET-4f2a9c", "FRAG-4f2a9c"];
    let servers = format!(
        "[supervisor]\nrestart_delay_ms = 50\nrestart_delay_max_ms = 200\n\
         [servers.leaky]\nurl = \"http://127.0.0.1:1/{}/mcp?k={}'x#{}\"\n",
        secrets[0], secrets[1], secrets[2]
    );
    let proxy = start(binary, dir, "url", &servers, Options::default());
    let mut ws = ahp::connect(&proxy.url).await;
    let (mut frames, mut quoting) = (0usize, 0usize);
    let mut count = |text: &str| {
        frames += 1;
        if secrets.iter().any(|s| text.contains(s)) {
            quoting += 1;
        }
    };
    let init = ahp::request_seeing(
        &mut ws,
        1,
        "initialize",
        json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"],
               "clientId": "url", "initialSubscriptions": [SESSION]}),
        &mut count,
    )
    .await;
    let mut message = error_message(&init.to_string());
    // Three seconds of its retries.
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(until, ws.next()).await {
        if let Message::Text(text) = frame {
            count(text.as_str());
            message = error_message(text.as_str()).or(message);
        }
    }
    let log = proxy.log_text();
    proxy.stop();
    let lines = log.lines().count();
    let log_quoting = log
        .lines()
        .filter(|l| secrets.iter().any(|s| l.contains(s)))
        .count();
    verdict(
        quoting == 0 && log_quoting == 0,
        format!(
            "url: a server at http://127.0.0.1:1/KEY/mcp?k=SECRET'x#FRAG: {quoting} of {frames} \
             AHP frames and {log_quoting} of {lines} log lines quote its path, query or \
             fragment; clients read {:?}",
            message.unwrap_or_default()
        ),
    )
}

/// The first server error message in an AHP frame.
fn error_message(text: &str) -> Option<String> {
    let start = text.find("\"errorType\"")?;
    let rest = &text[start..];
    let at = rest.find("\"message\":\"")? + 11;
    let end = rest[at..].find('"')?;
    Some(rest[at..at + end].to_string())
}
