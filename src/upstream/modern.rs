//! What a session with a modern (2026-07-28) server keeps and does to each request on its
//! way: the server's discover answer, the default envelope (who the proxy stands for when
//! the front names nobody), and the legacy requests that have no modern counterpart,
//! answered here (`resources/subscribe` folds into the listen stream's filter), and a legacy
//! harness's calls put behind the [`Bridge`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::bridge::{self, Bridge};
use super::envelope::Envelope;
use super::era::{Discovered, Era};
use super::session::{Modernity, Options, Reply, Session};
use crate::mcp::message::Message;

/// How long a harness's `resources/subscribe` waits for the listen stream to cover its URI
/// (at most its request's time): then it is answered anyway, and the wait is logged.
const COVER_WAIT: Duration = Duration::from_secs(10);

/// A modern server's session state.
pub struct Modern {
    /// The server's declared name (for log lines).
    name: String,
    /// Who requests are sent for when the front names nobody.
    pub envelope: Envelope,
    /// What the server answered to `server/discover`.
    pub discovered: Discovered,
    /// Resource URIs harnesses subscribed to (the listen stream's filter).
    subscriptions: watch::Sender<BTreeSet<String>>,
    /// The URIs the open listen stream was acknowledged for: a subscription is answered
    /// once its URI is among them, so no update after the answer is missed.
    acknowledged: Arc<watch::Sender<BTreeSet<String>>>,
}

impl Modern {
    /// The state of server `name`, which answered `discovered`, spoken to as `envelope`.
    pub fn new(name: &str, envelope: Envelope, discovered: Discovered) -> Self {
        Self {
            name: name.to_string(),
            envelope,
            discovered,
            subscriptions: watch::channel(BTreeSet::new()).0,
            acknowledged: Arc::new(watch::channel(BTreeSet::new()).0),
        }
    }

    /// Follows the resource URIs harnesses subscribed to.
    pub fn subscriptions(&self) -> watch::Receiver<BTreeSet<String>> {
        self.subscriptions.subscribe()
    }

    /// Where the listen stream says what it was acknowledged for.
    pub fn acknowledged(&self) -> Arc<watch::Sender<BTreeSet<String>>> {
        self.acknowledged.clone()
    }
}

impl Modernity for Modern {
    /// Only a cancellation has a modern counterpart (`initialized`, roots changes and the
    /// like have none).
    fn forwards(&self, notification: &str) -> bool {
        Message::parse(notification.to_string())
            .is_ok_and(|n| n.method() == Some("notifications/cancelled"))
    }

    fn discovered(&self) -> &str {
        &self.discovered.result
    }

    fn outgoing(
        &self,
        session: &Session,
        request: Message,
        reply: Box<dyn Reply>,
        options: Options,
        envelope: Option<&Envelope>,
    ) -> Option<(Message, Box<dyn Reply>)> {
        let envelope = envelope.unwrap_or(&self.envelope);
        match request.method() {
            Some(method @ ("resources/subscribe" | "resources/unsubscribe")) => {
                let subscribe = method == "resources/subscribe";
                let Some(uri) = request.string(&["uri"]).map(|u| u.into_owned()) else {
                    answer_here(&request, reply);
                    return None;
                };
                self.subscriptions.send_if_modified(|set| {
                    if subscribe {
                        set.insert(uri.clone())
                    } else {
                        set.remove(&uri)
                    }
                });
                if !subscribe {
                    answer_here(&request, reply);
                    return None;
                }
                // Answered once the listen stream covers it, or after a bounded wait (said
                // in the log: updates to it are heard once the stream covers it).
                let mut acknowledged = self.acknowledged.subscribe();
                let server = self.name.clone();
                let wait = options.timeout.min(COVER_WAIT);
                tokio::spawn(async move {
                    let covered = acknowledged.wait_for(|set| set.contains(&uri));
                    if tokio::time::timeout(wait, covered).await.is_err() {
                        tracing::warn!(
                            server = %server,
                            uri = %crate::untrusted::Untrusted(&uri),
                            "resources/subscribe answered after {} ms without the server's listen stream covering it: its updates are heard once the stream does",
                            wait.as_millis()
                        );
                    }
                    answer_here(&request, reply);
                });
                None
            }
            // No modern counterpart: the level travels per request, pings are the proxy's.
            Some("logging/setLevel" | "ping") => {
                answer_here(&request, reply);
                None
            }
            // A legacy harness cannot take `input_required`: the bridge asks it instead.
            method if envelope.era == Era::Legacy && bridge::may_ask(method) => {
                let wrapped = envelope.wrap(request.clone());
                let bridge = Bridge::new(session, request, envelope.clone(), options, reply);
                Some((wrapped, Box::new(bridge)))
            }
            _ => Some((envelope.wrap(request), reply)),
        }
    }
}

/// Answer `request` with an empty result, here.
fn answer_here(request: &Message, reply: Box<dyn Reply>) {
    let id = request.id().unwrap_or("null");
    let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
    if let Ok(message) = Message::parse(text) {
        reply.respond(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::session::{Link, Unanswered};
    use std::sync::Mutex;

    struct Silent;

    impl Link for Silent {
        fn send(&self, _: String, _: Option<u64>) -> Result<(), Unanswered> {
            Ok(())
        }
        fn close(&self) {}
    }

    #[derive(Clone, Default)]
    struct Got(Arc<Mutex<Vec<String>>>);

    impl Reply for Got {
        fn related(&mut self, _: Message) {}
        fn respond(self: Box<Self>, message: Message) {
            self.0.lock().unwrap().push(message.into_text());
        }
        fn fail(self: Box<Self>, failure: Unanswered) {
            self.0.lock().unwrap().push(format!("failed: {failure}"));
        }
    }

    /// Issue 46: a subscription the listen stream never covers is answered after
    /// [`COVER_WAIT`], not after the request's whole time (five minutes by default).
    #[tokio::test(start_paused = true)]
    async fn a_subscription_the_stream_never_covers_is_answered_after_a_bounded_wait() {
        let envelope = Envelope {
            era: Era::Legacy,
            capabilities: serde_json::json!({}),
            client_info: serde_json::json!({"name": "h"}),
            log_level: None,
        };
        let discovered = Discovered::read(
            r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"resources":{"subscribe":true}}}"#,
        )
        .expect("a discover result");
        let modern = Modern::new("m", envelope, discovered);
        let session = Session::new(Box::new(Silent));
        let got = Got::default();
        let request = Message::parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"file:///r"}}"#
                .to_string(),
        )
        .unwrap();
        let options = Options {
            timeout: Duration::from_secs(300),
            reset_on_progress: false,
            tag: None,
        };
        let sent = modern.outgoing(&session, request, Box::new(got.clone()), options, None);
        assert!(sent.is_none(), "answered here, not sent");
        assert_eq!(
            *modern.subscriptions().borrow(),
            ["file:///r".to_string()].into()
        );
        tokio::time::sleep(COVER_WAIT - Duration::from_millis(1)).await;
        assert!(got.0.lock().unwrap().is_empty(), "answered before the wait");
        tokio::time::sleep(Duration::from_millis(2)).await;
        tokio::task::yield_now().await;
        assert_eq!(
            *got.0.lock().unwrap(),
            [r#"{"jsonrpc":"2.0","id":7,"result":{}}"#.to_string()]
        );
    }
}
