//! The proxy's `subscriptions/listen` stream to one modern server: list changes and the
//! resource URIs harnesses subscribed to, its deliveries handed to the session's owner.
//!
//! One standing request per server (stdio: a long-lived request; HTTP: a POST whose event
//! stream stays open). It is no call in flight ([`Session::stand`]), re-opened when it ends
//! or the subscribed URIs change, and gone with the session.

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

/// Keep a listen stream open on `session` for `envelope`, following `subscriptions`,
/// until the session ends; `acknowledged` follows the URIs the open stream was
/// acknowledged for.
pub fn keep(
    session: &Session,
    envelope: Envelope,
    subscriptions: watch::Receiver<BTreeSet<String>>,
    acknowledged: Arc<watch::Sender<BTreeSet<String>>>,
) {
    let weak = session.downgrade();
    tokio::spawn(async move {
        let mut subscriptions = subscriptions;
        let mut retry = FIRST_RETRY;
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
                _ = rx => {
                    // The server ended it (or the session did): again, after a pause.
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

/// Tells the keeper the stream ended, however it did, and says what it was acknowledged for.
struct Ended {
    ended: oneshot::Sender<()>,
    uris: BTreeSet<String>,
    acknowledged: Arc<watch::Sender<BTreeSet<String>>>,
}

impl Reply for Ended {
    /// Only the acknowledgement comes here (the deliveries go to the owner).
    fn related(&mut self, _: Message) {
        self.acknowledged.send_replace(self.uris.clone());
    }
    fn respond(self: Box<Self>, _: Message) {
        let _ = self.ended.send(());
    }
    fn fail(self: Box<Self>, _: Unanswered) {
        let _ = self.ended.send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
