//! The raw path driven directly: a real hub over in-memory server sessions (a link that
//! records what goes up; the test answers as the server), exchanges with their steps, the
//! in-flight table checked after every way a request can end, and where a server's own
//! request goes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use super::steps::base;
use super::steps::fallback::Fallback;
use super::steps::scope::RetryOnScope;
use super::steps::subscription::UndoSubscription;
use crate::front::exchange::Exchange;
use crate::front::harness::Harness;
use crate::front::hub::{Hub, Settings};
use crate::front::outbox::{Outgoing, Stream};
use crate::front::registry::Scope;
use crate::mcp::message::Message;
use crate::supervisor::connections::{Connected, Connections, Downstream};
use crate::upstream::handshake::Initialized;
use crate::upstream::session::recorder::Recorder;
use crate::upstream::session::{Cause, Session, Unanswered, Unsolicited};

struct Server {
    session: Session,
    link: Recorder,
    _traffic: Arc<dyn Unsolicited>,
}

/// What the server sends on its own goes to the hub, as the supervisor's traffic handler
/// hands it.
struct ToHub {
    hub: std::sync::Weak<Hub>,
    server: String,
}

impl Unsolicited for ToHub {
    fn notify(&self, message: Message, origin: Option<u64>) {
        if let Some(hub) = self.hub.upgrade() {
            hub.notify(&self.server, message, origin);
        }
    }
    fn request(&self, session: &Session, message: Message, cause: Cause) {
        if let Some(hub) = self.hub.upgrade() {
            Downstream::request(&*hub, &self.server, session, message, cause);
        }
    }
}

impl Server {
    fn answer(&self, id: &str, body: &str) {
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},{body}}}"#);
        self.session.receive(Message::parse(text).unwrap(), None);
    }
}

async fn hub(timeout: Duration) -> Arc<Hub> {
    let config = crate::config::Config::parse("", "proxy.toml", std::path::Path::new(".")).unwrap();
    let host = Arc::new(crate::host::Host::new(&config));
    let (mirror, _task) = crate::mirror::Mirror::spawn(host, "ahp-chat:/harness".into(), 64);
    let connections = Connections::new();
    connections.mark_synced();
    let settings = Settings {
        request_timeout: timeout,
        ..Settings::default()
    };
    Hub::start(connections, settings, mirror)
}

fn serve(hub: &Arc<Hub>, id: &str) -> Server {
    serve_with(hub, id, serde_json::json!({"resources": {}}))
}

fn serve_with(hub: &Arc<Hub>, id: &str, capabilities: serde_json::Value) -> Server {
    let link = Recorder::default();
    let session = Session::new(Box::new(link.clone()));
    let traffic: Arc<dyn Unsolicited> = Arc::new(ToHub {
        hub: Arc::downgrade(hub),
        server: id.to_string(),
    });
    session.set_unsolicited(Arc::downgrade(&traffic));
    let initialized = Initialized {
        result: "{}".into(),
        protocol_version: "2025-11-25".into(),
        capabilities,
        instructions: None,
        server_info: None,
        server_info_json: None,
    };
    hub.connections.insert(
        id,
        Connected {
            name: id.to_string(),
            session: session.clone(),
            initialized: Arc::new(initialized),
            offer: Arc::default(),
        },
    );
    Server {
        session,
        link,
        _traffic: traffic,
    }
}

fn request(id: u64, method: &str, params: &str) -> Message {
    Message::parse(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
    ))
    .unwrap()
}

fn in_flight(hub: &Hub, harness: &Harness) -> usize {
    hub.tables().registry.in_flight.count(harness.id)
}

fn next(frames: &mut UnboundedReceiver<Outgoing>) -> String {
    frames.try_recv().expect("a message for the harness").text
}

#[tokio::test]
async fn every_way_a_request_ends_takes_it_out_of_the_in_flight_table() {
    let hub = hub(Duration::from_secs(60)).await;
    let server = serve(&hub, "s");
    let harness = Harness::new(hub.clone(), Scope::All, false);
    let (stream, mut frames) = Stream::channel();

    // Answered.
    let read = request(1, "resources/read", r#"{"uri":"x://1"}"#);
    Exchange::start(&harness, "s", read, stream.clone(), None, base());
    assert_eq!(in_flight(&hub, &harness), 1);
    server.answer(&server.link.last_id(), r#""result":{"contents":[]}"#);
    assert_eq!(
        next(&mut frames),
        r#"{"jsonrpc":"2.0","id":1,"result":{"contents":[]}}"#
    );
    assert_eq!(in_flight(&hub, &harness), 0);

    // Cancelled by the harness: the server hears it, the harness gets no answer.
    Exchange::start(
        &harness,
        "s",
        request(2, "tools/call", "{}"),
        stream.clone(),
        None,
        base(),
    );
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#;
    harness.handle(Message::parse(cancel.into()).unwrap(), stream.clone());
    assert_eq!(in_flight(&hub, &harness), 0);
    assert!(server
        .link
        .sent()
        .last()
        .unwrap()
        .contains("notifications/cancelled"));
    assert!(frames.try_recv().is_err());

    // The server stops before answering.
    Exchange::start(
        &harness,
        "s",
        request(3, "tools/call", "{}"),
        stream.clone(),
        None,
        base(),
    );
    server.session.end();
    assert!(next(&mut frames).contains("stopped before answering tools/call"));
    assert_eq!(in_flight(&hub, &harness), 0);

    // Sent to a server that is not running.
    Exchange::start(
        &harness,
        "gone",
        request(4, "tools/call", "{}"),
        stream.clone(),
        None,
        base(),
    );
    assert!(next(&mut frames).contains("MCP server gone is not running"));
    assert_eq!(in_flight(&hub, &harness), 0);
}

#[tokio::test]
async fn a_harness_that_goes_away_leaves_nothing_in_flight() {
    let hub = hub(Duration::from_secs(60)).await;
    let server = serve(&hub, "s");
    let harness = Harness::new(hub.clone(), Scope::All, false);
    let id = harness.id;
    let (stream, _frames) = Stream::channel();
    for n in 1..=3 {
        Exchange::start(
            &harness,
            "s",
            request(n, "tools/call", "{}"),
            stream.clone(),
            None,
            base(),
        );
    }
    assert_eq!(hub.tables().registry.in_flight.count(id), 3);
    drop(harness);
    assert_eq!(hub.tables().registry.in_flight.count(id), 0);
    let cancelled = server
        .link
        .sent()
        .iter()
        .filter(|m| m.contains("notifications/cancelled"))
        .count();
    assert_eq!(cancelled, 3);
}

#[tokio::test]
async fn a_harness_that_asked_for_a_log_level_leaves_and_servers_follow_those_left() {
    use crate::front::registry::{Abilities, Level};
    let hub = hub(Duration::from_secs(60)).await;
    let level = |name| Level::parse(name).unwrap();
    let quieter = Harness::new(hub.clone(), Scope::All, false);
    hub.tables()
        .registry
        .join(quieter.id, Scope::All, Abilities::default(), true);
    hub.tables()
        .registry
        .set_log_level(quieter.id, level("info"));
    let server = serve_with(&hub, "s", serde_json::json!({"logging": {}}));
    let set_levels = |server: &Server| {
        (server.link.sent().iter())
            .filter(|m| m.contains("logging/setLevel"))
            .cloned()
            .collect::<Vec<_>>()
    };
    // Sent `n` setLevel requests by now (within the patience window), the last answered.
    let until_sent = |n: usize| {
        let server = &server;
        async move {
            for _ in 0..400 {
                if set_levels(server).len() >= n {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let sent = set_levels(server);
            assert_eq!(sent.len(), n, "{sent:?}");
            server.answer(&server.link.last_id(), r#""result":{}"#);
            sent[n - 1].clone()
        }
    };
    let until_applied = |name: &'static str| {
        let hub = &hub;
        async move {
            for _ in 0..400 {
                if hub.tables().applied_levels.get("s") == Some(&level(name)) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(hub.tables().applied_levels.get("s"), Some(&level(name)));
        }
    };
    // The server is ready: the hub sets it to what the harnesses asked.
    assert!(until_sent(1).await.contains(r#""level":"info""#));
    until_applied("info").await;

    // A more verbose harness came and was applied; it leaves: the server follows those left.
    let verbose = Harness::new(hub.clone(), Scope::All, false);
    let silent = Harness::new(hub.clone(), Scope::All, false);
    {
        let mut tables = hub.tables();
        for harness in [&verbose, &silent] {
            tables
                .registry
                .join(harness.id, Scope::All, Abilities::default(), true);
        }
        tables.registry.set_log_level(verbose.id, level("debug"));
        tables.applied_levels.insert("s".into(), level("debug"));
    }
    drop(verbose);
    assert!(until_sent(2).await.contains(r#""level":"info""#));
    until_applied("info").await;

    // One that asked for nothing leaves: nothing changes, nothing is sent.
    drop(silent);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(set_levels(&server).len(), 2);
    drop(quieter);
}

#[tokio::test]
async fn a_server_that_does_not_answer_in_time_times_out_and_nothing_is_left() {
    let hub = hub(Duration::from_millis(1)).await;
    let _server = serve(&hub, "s");
    let harness = Harness::new(hub.clone(), Scope::All, false);
    let (stream, mut frames) = Stream::channel();
    Exchange::start(
        &harness,
        "s",
        request(1, "tools/call", "{}"),
        stream,
        None,
        base(),
    );
    let answer = tokio::time::timeout(Duration::from_secs(20), frames.recv())
        .await
        .expect("an answer in time")
        .expect("an answer");
    assert!(
        answer
            .text
            .contains("did not answer tools/call within 1 ms"),
        "{}",
        answer.text
    );
    assert_eq!(in_flight(&hub, &harness), 0);
}

#[tokio::test]
async fn fallback_asks_the_next_server_under_its_own_uri() {
    let hub = hub(Duration::from_secs(60)).await;
    let first = serve(&hub, "a");
    let second = serve(&hub, "b");
    let harness = Harness::new(hub.clone(), Scope::All, false);
    let (stream, mut frames) = Stream::channel();
    let read = request(9, "resources/read", r#"{"uri":"ui://a__v"}"#);
    let steps = base().with(Fallback::to(vec![("b".into(), "ui://v".into())]));
    Exchange::start(&harness, "a", read, stream, None, steps);
    first.answer(
        &first.link.last_id(),
        r#""error":{"code":-32002,"message":"no"}"#,
    );
    // Asked of b now, under b's URI; a's refusal never reached the harness.
    assert!(frames.try_recv().is_err());
    let asked = second.link.sent().last().cloned().unwrap();
    assert!(asked.contains(r#""uri":"ui://v""#), "{asked}");
    let tag = (hub.tables().registry.in_flight)
        .by_request(harness.id, "9")
        .map(|(t, e)| (t, e.server.clone()));
    assert_eq!(tag.map(|(_, server)| server).as_deref(), Some("b"));
    second.answer(&second.link.last_id(), r#""result":{"contents":[]}"#);
    assert_eq!(
        next(&mut frames),
        r#"{"jsonrpc":"2.0","id":9,"result":{"contents":[]}}"#
    );
    assert_eq!(in_flight(&hub, &harness), 0);
}

#[tokio::test]
async fn a_refused_subscription_is_undone() {
    let hub = hub(Duration::from_secs(60)).await;
    let server = serve(&hub, "s");
    let harness = Harness::new(hub.clone(), Scope::All, false);
    let (stream, mut frames) = Stream::channel();
    assert!(hub.tables().registry.subscribe(harness.id, "s", "x://1"));
    let steps = base().with(UndoSubscription {
        server: "s".into(),
        uri: "x://1".into(),
    });
    let subscribe = request(5, "resources/subscribe", r#"{"uri":"x://1"}"#);
    Exchange::start(&harness, "s", subscribe, stream, None, steps);
    server.answer(
        &server.link.last_id(),
        r#""error":{"code":-32601,"message":"no"}"#,
    );
    assert!(next(&mut frames).contains("-32601"));
    assert!(hub.tables().registry.subscribers("s", "x://1").is_empty());
}

#[tokio::test]
async fn a_call_waiting_for_scope_stays_in_flight_until_the_harness_cancels_it() {
    let hub = hub(Duration::from_secs(60)).await;
    let server = serve(&hub, "s");
    let harness = Harness::new(hub.clone(), Scope::All, false);
    let (stream, mut frames) = Stream::channel();
    let steps = base().with(RetryOnScope::default());
    Exchange::start(
        &harness,
        "s",
        request(7, "tools/call", "{}"),
        stream.clone(),
        None,
        steps,
    );
    let upstream: u64 = server.link.last_id().parse().unwrap();
    server.session.failed(
        upstream,
        Unanswered::Unauthorized {
            status: 403,
            challenge: None,
            insufficient_scope: true,
        },
    );
    // Waiting for a better token: still the harness's request in flight.
    assert_eq!(in_flight(&hub, &harness), 1);
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;
    harness.handle(Message::parse(cancel.into()).unwrap(), stream);
    let gone = async {
        while in_flight(&hub, &harness) > 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), gone)
        .await
        .expect("the wait ends when the harness cancels");
    assert!(
        frames.try_recv().is_err(),
        "a cancelled request is not answered"
    );
}

/// A harness on `hub` that declared sampling, its handshake done, its general stream open.
fn able_harness(hub: &Arc<Hub>) -> (Arc<Harness>, UnboundedReceiver<Outgoing>) {
    let harness = Harness::new(hub.clone(), Scope::All, false);
    harness.initialized(serde_json::json!({"capabilities": {"sampling": {}}}));
    let (general, frames) = Stream::channel();
    harness.set_general(Some(general));
    hub.join(harness.state());
    harness.go_live();
    harness.complete_handshake();
    (harness, frames)
}

#[tokio::test]
async fn a_server_request_goes_to_the_harness_it_names_and_to_nobody_when_it_could_be_anyones() {
    let hub = hub(Duration::from_secs(60)).await;
    let server = serve(&hub, "s");
    let (a, mut heard_a) = able_harness(&hub);
    let (b, mut heard_b) = able_harness(&hub);
    let (calls, _answers) = Stream::channel();
    Exchange::start(
        &a,
        "s",
        request(1, "tools/call", "{}"),
        calls.clone(),
        None,
        base(),
    );
    Exchange::start(&b, "s", request(1, "tools/call", "{}"), calls, None, base());
    hub.tables().registry.task_created("s", "t-1", a.id);

    // It names A's task: A is asked, B hears nothing.
    let about_task = r#"{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-1"}},"messages":[]}}"#;
    server
        .session
        .receive(Message::parse(about_task.into()).unwrap(), None);
    assert!(next(&mut heard_a).contains("sampling/createMessage"));
    assert!(heard_b.try_recv().is_err());

    // Nothing names a call, and both have calls in flight: the server is refused at once.
    let unnamed = r#"{"jsonrpc":"2.0","id":"s-2","method":"sampling/createMessage","params":{"messages":[]}}"#;
    server
        .session
        .receive(Message::parse(unnamed.into()).unwrap(), None);
    let refused = server.link.sent().last().cloned().unwrap();
    assert!(
        refused.contains(r#""id":"s-2""#) && refused.contains("cannot tell which MCP client"),
        "{refused}"
    );
    assert!(heard_a.try_recv().is_err() && heard_b.try_recv().is_err());
}
