//! The proxy's `subscriptions/listen` stream to one modern server: list changes and the
//! resource URIs harnesses subscribed to, its deliveries handed to the session's owner.
//!
//! One standing request per server (stdio: a long-lived request; HTTP: a POST whose event
//! stream stays open). It is no call in flight ([`Session::stand`]), re-opened when it ends
//! or the subscribed URIs change, and gone with the session. A server that refuses it
//! [`REFUSALS`] times in a row is asked again only when the subscribed URIs change.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, watch};

use super::envelope::Envelope;
use super::session::{Options, Reply, Session, Unanswered};
use crate::mcp::message::{self, Message};

/// How long one listen request may stand before it is opened afresh.
const STANDING: Duration = Duration::from_secs(24 * 60 * 60);
/// The first and the longest wait before re-opening a stream the server ended.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_RETRY: Duration = Duration::from_secs(60);
/// How many listen requests in a row may end unacknowledged (refused, or failed on their
/// way) before the server is no longer asked until the subscribed URIs change.
pub const REFUSALS: u32 = 5;

/// Keep a listen stream open on `session` (server `server`) for `envelope`, following
/// `subscriptions`, until the session ends; `acknowledged` follows the URIs the open stream
/// was acknowledged for.
pub fn keep(
    session: &Session,
    server: &str,
    envelope: Envelope,
    subscriptions: watch::Receiver<BTreeSet<String>>,
    acknowledged: Arc<watch::Sender<BTreeSet<String>>>,
) {
    let weak = session.downgrade();
    let server = server.to_string();
    tokio::spawn(async move {
        let mut subscriptions = subscriptions;
        let mut retry = FIRST_RETRY;
        let mut refusals = 0;
        loop {
            let uris = subscriptions.borrow_and_update().clone();
            let (tx, rx) = oneshot::channel();
            let id = {
                let Some(session) = weak.upgrade().filter(|s| !s.is_ended()) else {
                    return;
                };
                let Ok(request) = Message::parse(request_text(&uris)) else {
                    return;
                };
                let options = Options {
                    timeout: STANDING,
                    reset_on_progress: false,
                    tag: None,
                };
                match session.send_prepared(
                    envelope.wrap(request),
                    Box::new(Ended {
                        ended: tx,
                        uris,
                        acknowledged: acknowledged.clone(),
                        heard: false,
                    }),
                    options,
                ) {
                    Ok(id) => {
                        session.stand(id);
                        id
                    }
                    Err(_) => return,
                }
            };
            tokio::select! {
                heard = rx => {
                    // The server ended it (or the session did): again, after a pause.
                    if heard == Ok(true) {
                        (refusals, retry) = (0, FIRST_RETRY);
                    } else {
                        refusals += 1;
                    }
                    if refusals >= REFUSALS {
                        tracing::warn!(server = %server, "the server refused subscriptions/listen {REFUSALS} times in a row: it is asked again only when the resource subscriptions change; until then its list changes and resource updates are not heard");
                        if subscriptions.changed().await.is_err() {
                            return;
                        }
                        (refusals, retry) = (REFUSALS - 1, FIRST_RETRY);
                        continue;
                    }
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(LAST_RETRY);
                }
                changed = subscriptions.changed() => {
                    let Some(session) = weak.upgrade() else { return };
                    session.cancel(id, "the subscriptions changed");
                    if changed.is_err() {
                        return;
                    }
                    retry = FIRST_RETRY;
                }
            }
        }
    });
}

/// A `subscriptions/listen` request for every list change and `uris`.
fn request_text(uris: &BTreeSet<String>) -> String {
    let uris: Vec<String> = uris.iter().map(|u| message::quote(u)).collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":[{}]}}}}}}"#,
        uris.join(",")
    )
}

/// Tells the keeper the stream ended, however it did, and whether it was acknowledged; says
/// what it was acknowledged for.
struct Ended {
    ended: oneshot::Sender<bool>,
    uris: BTreeSet<String>,
    acknowledged: Arc<watch::Sender<BTreeSet<String>>>,
    heard: bool,
}

impl Reply for Ended {
    /// Only the acknowledgement comes here (the deliveries go to the owner).
    fn related(&mut self, _: Message) {
        self.heard = true;
        self.acknowledged.send_replace(self.uris.clone());
    }
    fn respond(self: Box<Self>, _: Message) {
        let _ = self.ended.send(self.heard);
    }
    fn fail(self: Box<Self>, _: Unanswered) {
        let _ = self.ended.send(self.heard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::era::Era;
    use crate::upstream::session::Link;
    use tokio::sync::mpsc;

    /// A link that hands each message sent to the test.
    struct Wire(mpsc::UnboundedSender<String>);

    impl Link for Wire {
        fn send(&self, text: String, _: Option<u64>) -> Result<(), Unanswered> {
            let _ = self.0.send(text);
            Ok(())
        }
        fn close(&self) {}
    }

    /// A server that refuses every listen request is asked [`REFUSALS`] times, then no more
    /// until the subscriptions change, which buys it one more request.
    #[tokio::test(start_paused = true)]
    async fn a_server_that_refuses_to_listen_is_not_asked_forever() {
        let (wire, mut sent) = mpsc::unbounded_channel();
        let session = Session::new(Box::new(Wire(wire)));
        let envelope = Envelope {
            era: Era::Modern,
            capabilities: serde_json::json!({}),
            client_info: serde_json::json!({"name": "ahp-proxy"}),
            log_level: None,
        };
        let (subscriptions, follow) = watch::channel(BTreeSet::new());
        let acknowledged = Arc::new(watch::channel(BTreeSet::new()).0);
        keep(&session, "refuser", envelope, follow, acknowledged);
        let refuse = async |sent: &mut mpsc::UnboundedReceiver<String>| {
            let text = sent.recv().await.expect("a listen request");
            let request = Message::parse(text).unwrap();
            assert_eq!(request.method(), Some("subscriptions/listen"));
            let id = request.id().unwrap().to_string();
            session.receive(
                Message::parse(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no"}}}}"#
                ))
                .unwrap(),
                None,
            );
        };
        for _ in 0..REFUSALS {
            refuse(&mut sent).await;
        }
        // Hours of (paused, auto-advanced) time: no sixth request.
        tokio::time::sleep(Duration::from_secs(4 * 60 * 60)).await;
        assert!(
            sent.try_recv().is_err(),
            "asked again after {REFUSALS} refusals"
        );
        subscriptions.send_replace(["era://r".to_string()].into());
        refuse(&mut sent).await;
        tokio::time::sleep(Duration::from_secs(4 * 60 * 60)).await;
        assert!(sent.try_recv().is_err(), "one more request per change");
    }

    #[test]
    fn the_request_asks_for_every_list_and_the_subscribed_uris() {
        let uris: BTreeSet<String> = ["era://a".to_string(), "x\"y".into()].into();
        let text = request_text(&uris);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let filter = &value["params"]["notifications"];
        assert_eq!(filter["toolsListChanged"], true);
        assert_eq!(
            filter["resourceSubscriptions"],
            serde_json::json!(["era://a", "x\"y"])
        );
    }
}
