//! The session core driven directly: an in-memory link records what goes up, replies record
//! what comes back, and the order, ids, tokens and deadlines are checked.

use std::sync::{Arc, Mutex};

use super::recorder::Recorder;
use super::*;

/// A reply that records what it got, in order.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Reply for Log {
    fn related(&mut self, message: Message) {
        self.0.lock().unwrap().push(message.into_text());
    }
    fn respond(self: Box<Self>, message: Message) {
        self.0.lock().unwrap().push(message.into_text());
    }
    fn fail(self: Box<Self>, failure: Unanswered) {
        self.0.lock().unwrap().push(format!("failed: {failure}"));
    }
}

impl Log {
    fn got(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn msg(text: &str) -> Message {
    Message::parse(text.to_string()).unwrap()
}

fn options() -> Options {
    Options {
        timeout: Duration::from_secs(60),
        reset_on_progress: true,
        tag: Some(9),
    }
}

#[tokio::test]
async fn ids_are_replaced_going_up_and_put_back_coming_down_with_progress_first() {
    let link = Recorder::default();
    let session = Session::new(Box::new(link.clone()));
    let log = Log::default();
    let id = session
        .request(
            msg(r#"{"jsonrpc":"2.0","id":"h-1","method":"tools/call","params":{"name":"x","_meta":{"progressToken":7},"arguments":{"b":1,"a":0.7}}}"#),
            Box::new(log.clone()),
            options(),
        )
        .map_err(|(_, f)| f)
        .unwrap();
    assert_eq!(
        link.sent(),
        vec![format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"x","_meta":{{"progressToken":7}},"arguments":{{"b":1,"a":0.7}}}}}}"#
        )],
        "only the id changed; the caller's own token went up as it was"
    );
    session.receive(
        msg(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":0}}"#),
        None,
    );
    session.receive(
        msg(&format!(
            r#"{{"result":{{"z":1,"content":[]}},"jsonrpc":"2.0","id":{id}}}"#
        )),
        None,
    );
    // A late progress for a request that is done is dropped.
    session.receive(
        msg(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}"#),
        None,
    );
    assert_eq!(
        log.got(),
        vec![
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":0}}"#.to_string(),
            r#"{"result":{"z":1,"content":[]},"jsonrpc":"2.0","id":"h-1"}"#.to_string(),
        ]
    );
    assert_eq!(session.in_flight(), 0);
}

#[tokio::test]
async fn a_token_already_in_flight_is_remapped_and_restored() {
    let link = Recorder::default();
    let session = Session::new(Box::new(link.clone()));
    let (a, b) = (Log::default(), Log::default());
    let request = |id: &str| {
        msg(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"_meta":{{"progressToken":"t"}}}}}}"#
        ))
    };
    session
        .request(request("1"), Box::new(a.clone()), options())
        .ok()
        .unwrap();
    let second = session
        .request(request("1"), Box::new(b.clone()), options())
        .ok()
        .unwrap();
    let sent = link.sent();
    assert!(
        sent[1].contains(&format!(r#""progressToken":"ahp-proxy-progress-{second}""#)),
        "{}",
        sent[1]
    );
    session.receive(
        msg(&format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"ahp-proxy-progress-{second}","progress":5}}}}"#)),
        None,
    );
    session.receive(
        msg(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#),
        None,
    );
    assert_eq!(
        b.got(),
        vec![
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":5}}"#
        ]
    );
    assert_eq!(a.got().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_times_out_unless_progress_keeps_it_alive_and_the_server_is_told() {
    let link = Recorder::default();
    let session = Session::new(Box::new(link.clone()));
    let log = Log::default();
    let opts = Options {
        timeout: Duration::from_secs(10),
        ..options()
    };
    let id = session
        .request(
            msg(r#"{"jsonrpc":"2.0","id":1,"method":"slow","params":{"_meta":{"progressToken":1}}}"#),
            Box::new(log.clone()),
            opts,
        )
        .ok()
        .unwrap();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(6)).await;
        session.receive(
            msg(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#),
            None,
        );
    }
    assert_eq!(log.got().len(), 3, "still waiting after 18 s of progress");
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(
        log.got().last().unwrap(),
        "failed: did not answer within 10000 ms"
    );
    assert!(link
        .sent()
        .last()
        .unwrap()
        .contains(&format!(r#""requestId":{id},"reason":"timed out""#)));
}

#[tokio::test(start_paused = true)]
async fn answered_requests_leave_no_deadline_behind_and_a_later_one_still_times_out() {
    let link = Recorder::default();
    let session = Session::new(Box::new(link.clone()));
    for n in 1..=1000u64 {
        let id = session
            .request(
                msg(&format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"fast"}}"#)),
                Box::new(Log::default()),
                options(),
            )
            .ok()
            .unwrap();
        session.receive(
            msg(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)),
            None,
        );
    }
    assert_eq!(session.state().deadlines.len(), 0);
    // The keeper may still sleep until a deadline of an answered request: a new request
    // with an earlier deadline wakes it, one with a later deadline is seen when it wakes.
    let late = Log::default();
    session
        .request(
            msg(r#"{"jsonrpc":"2.0","id":"late","method":"slow"}"#),
            Box::new(late.clone()),
            options(),
        )
        .ok()
        .unwrap();
    let early = Log::default();
    let short = Options {
        timeout: Duration::from_secs(5),
        ..options()
    };
    session
        .request(
            msg(r#"{"jsonrpc":"2.0","id":"early","method":"slow"}"#),
            Box::new(early.clone()),
            short,
        )
        .ok()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(early.got(), vec!["failed: did not answer within 5000 ms"]);
    assert!(late.got().is_empty());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(late.got(), vec!["failed: did not answer within 60000 ms"]);
    assert_eq!(session.state().deadlines.len(), 0);
}

#[tokio::test]
async fn cancel_tells_the_server_and_drops_the_reply_and_end_fails_the_rest() {
    let link = Recorder::default();
    let session = Session::new(Box::new(link.clone()));
    let (a, b) = (Log::default(), Log::default());
    let first = session
        .request(
            msg(r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#),
            Box::new(a.clone()),
            options(),
        )
        .ok()
        .unwrap();
    session
        .request(
            msg(r#"{"jsonrpc":"2.0","id":2,"method":"m"}"#),
            Box::new(b.clone()),
            options(),
        )
        .ok()
        .unwrap();
    session.cancel(first, "cancelled by the harness");
    assert!(link.sent()[2].contains(r#""method":"notifications/cancelled""#));
    session.receive(
        msg(&format!(
            r#"{{"jsonrpc":"2.0","id":{first},"result":{{}}}}"#
        )),
        None,
    );
    assert!(a.got().is_empty(), "a cancelled request gets no answer");
    session.end();
    assert_eq!(b.got(), vec!["failed: stopped before answering"]);
    assert!(session.is_ended());
    let late = session.request(
        msg(r#"{"jsonrpc":"2.0","id":3,"method":"m"}"#),
        Box::new(Log::default()),
        options(),
    );
    assert!(matches!(late, Err((_, Unanswered::Stopped))));
}

struct Owner {
    seen: Mutex<Vec<(String, Option<u64>)>>,
}

impl Unsolicited for Owner {
    fn notify(&self, message: Message, origin: Option<u64>) {
        self.seen
            .lock()
            .unwrap()
            .push((message.into_text(), origin));
    }
    fn request(&self, session: &Session, message: Message, cause: Cause) {
        let id = message.id().unwrap().to_string();
        let origin = match cause {
            Cause::Request(tag) => Some(tag),
            Cause::InFlight(tags) => tags.first().map(|t| t + 1000),
        };
        self.seen
            .lock()
            .unwrap()
            .push((message.into_text(), origin));
        session
            .answer(&id, r#""result":{"role":"assistant"}"#)
            .unwrap();
    }
}

#[tokio::test]
async fn server_traffic_goes_to_the_owner_with_the_request_it_is_about() {
    let link = Recorder::default();
    let session = Session::new(Box::new(link.clone()));
    let owner = Arc::new(Owner {
        seen: Mutex::default(),
    });
    let weak: Weak<dyn Unsolicited> = Arc::downgrade(&(owner.clone() as Arc<dyn Unsolicited>));
    session.set_unsolicited(weak);
    session.receive(msg(r#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#), None);
    assert_eq!(
        link.sent(),
        vec![r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#]
    );
    let log = Log::default();
    let id = session
        .request(
            msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            Box::new(log.clone()),
            options(),
        )
        .ok()
        .unwrap();
    // Off any request's stream, a server request only says what is in flight (tag 9,
    // recorded here as 1009); on a request's stream, it is about that request.
    session.receive(
        msg(r#"{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"temperature":0.7}}"#),
        None,
    );
    session.receive(
        msg(r#"{"jsonrpc":"2.0","id":6,"method":"roots/list"}"#),
        Some(id),
    );
    // On the request's own stream, a log message is related to it.
    session.receive(
        msg(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}"#),
        Some(id),
    );
    // A list change is never a request's: it goes to the owner.
    session.receive(
        msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
        Some(id),
    );
    let seen = owner.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (r#"{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"temperature":0.7}}"#.to_string(), Some(1009)),
            (r#"{"jsonrpc":"2.0","id":6,"method":"roots/list"}"#.to_string(), Some(9)),
            (r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.to_string(), Some(9)),
        ]
    );
    assert_eq!(log.got().len(), 1, "the log message went to the request");
    assert_eq!(
        link.sent().last().unwrap(),
        r#"{"jsonrpc":"2.0","id":6,"result":{"role":"assistant"}}"#
    );
}

/// What a listen stream carries is no request's (MCP 2026-07-28): it reaches the owner with no
/// origin, even while one call is in flight (that call's own stream may be ending under it).
#[tokio::test]
async fn traffic_on_a_standing_stream_is_about_no_request() {
    let link = Recorder::default();
    let session = Session::new(Box::new(link.clone()));
    let owner = Arc::new(Owner {
        seen: Mutex::default(),
    });
    let weak: Weak<dyn Unsolicited> = Arc::downgrade(&(owner.clone() as Arc<dyn Unsolicited>));
    session.set_unsolicited(weak);
    let standing = Options {
        timeout: Duration::from_secs(60),
        reset_on_progress: false,
        tag: None,
    };
    let listen = session
        .send_prepared(
            msg(r#"{"jsonrpc":"2.0","id":0,"method":"subscriptions/listen"}"#),
            Box::new(Log::default()),
            standing,
        )
        .ok()
        .unwrap();
    session.stand(listen);
    session
        .request(
            msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            Box::new(Log::default()),
            options(),
        )
        .ok()
        .unwrap();
    session.receive(
        msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
        Some(listen),
    );
    session.receive(
        msg(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
        None,
    );
    let origins: Vec<Option<u64>> = (owner.seen.lock().unwrap().iter())
        .map(|(_, origin)| *origin)
        .collect();
    assert_eq!(
        origins,
        vec![None, Some(9)],
        "the listen stream's is no call's; one off any stream may be the call's"
    );
}
