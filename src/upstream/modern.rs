//! What a session with a modern (2026-07-28) server keeps and does to each request on its
//! way: the server's discover answer, the default envelope (who the proxy stands for when
//! the front names nobody), and the legacy requests that have no modern counterpart,
//! answered here (`resources/subscribe` folds into the listen stream's filter), and a legacy
//! harness's calls put behind the [`Bridge`].

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;

use super::bridge::{self, Bridge};
use super::envelope::Envelope;
use super::era::{Discovered, Era};
use super::session::{Modernity, Options, Reply, Session};
use crate::mcp::message::Message;

/// A modern server's session state.
pub struct Modern {
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
    /// The state of a server that answered `discovered`, spoken to as `envelope`.
    pub fn new(envelope: Envelope, discovered: Discovered) -> Self {
        Self {
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
                // Answered once the listen stream covers it (or after the request's time).
                let mut acknowledged = self.acknowledged.subscribe();
                tokio::spawn(async move {
                    let covered = acknowledged.wait_for(|set| set.contains(&uri));
                    let _ = tokio::time::timeout(options.timeout, covered).await;
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
