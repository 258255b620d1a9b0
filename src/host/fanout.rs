//! Who is subscribed to what, and the bounded outbound queue of every connection.
//! Sending never waits: a connection whose queue is full is kicked, so one slow client never
//! holds up the others (it can `reconnect` and catch up from the replay log).

use std::collections::{BTreeSet, HashMap, HashSet};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::Frame;

/// Host-wide connection number.
pub type ConnId = u64;

struct Peer {
    outbox: mpsc::Sender<Frame>,
    kick: CancellationToken,
    subscriptions: HashSet<String>,
    client_id: Option<String>,
    /// Declared `mcpApps`: sees channels and `mcpApp`s.
    mcp_apps: bool,
}

/// The subscription table plus every live connection's queue.
#[derive(Default)]
pub struct Fanout {
    peers: HashMap<ConnId, Peer>,
    channels: HashMap<String, BTreeSet<ConnId>>,
}

impl Fanout {
    /// Register a connection's queue and its kick switch.
    pub fn insert(&mut self, id: ConnId, outbox: mpsc::Sender<Frame>, kick: CancellationToken) {
        self.peers.insert(
            id,
            Peer {
                outbox,
                kick,
                subscriptions: HashSet::new(),
                client_id: None,
                mcp_apps: false,
            },
        );
    }

    /// Forget a connection and all its subscriptions.
    pub fn remove(&mut self, id: ConnId) {
        if let Some(peer) = self.peers.remove(&id) {
            for uri in peer.subscriptions {
                self.drop_subscriber(&uri, id);
            }
        }
    }

    /// Record which client a connection belongs to (after `initialize`/`reconnect`) and
    /// whether it declared `mcpApps`.
    pub fn set_client(&mut self, id: ConnId, client_id: &str, mcp_apps: bool) {
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.client_id = Some(client_id.to_string());
            peer.mcp_apps = mcp_apps;
        }
    }

    /// Whether connection `id` declared `mcpApps`.
    pub fn mcp_apps(&self, id: ConnId) -> bool {
        self.peers.get(&id).is_some_and(|p| p.mcp_apps)
    }

    /// Whether any live connection belongs to `client_id`.
    pub fn has_client(&self, client_id: &str) -> bool {
        self.peers
            .values()
            .any(|p| p.client_id.as_deref() == Some(client_id))
    }

    /// Subscribe a connection to `uri` (idempotent: never doubles deliveries).
    pub fn subscribe(&mut self, id: ConnId, uri: &str) {
        if let Some(peer) = self.peers.get_mut(&id) {
            if peer.subscriptions.insert(uri.to_string()) {
                self.channels.entry(uri.to_string()).or_default().insert(id);
            }
        }
    }

    /// Unsubscribe a connection from `uri`; returns whether it was subscribed.
    pub fn unsubscribe(&mut self, id: ConnId, uri: &str) -> bool {
        let was = self
            .peers
            .get_mut(&id)
            .is_some_and(|peer| peer.subscriptions.remove(uri));
        if was {
            self.drop_subscriber(uri, id);
        }
        was
    }

    /// Drop every subscription to `uri` (its state is gone).
    pub fn forget_channel(&mut self, uri: &str) {
        for id in self.channels.remove(uri).unwrap_or_default() {
            if let Some(peer) = self.peers.get_mut(&id) {
                peer.subscriptions.remove(uri);
            }
        }
    }

    fn drop_subscriber(&mut self, uri: &str, id: ConnId) {
        if let Some(set) = self.channels.get_mut(uri) {
            set.remove(&id);
            if set.is_empty() {
                self.channels.remove(uri);
            }
        }
    }

    /// Queue `frame` for one connection; a full queue kicks it. Returns whether it was queued.
    pub fn send(&mut self, id: ConnId, frame: Frame) -> bool {
        let Some(peer) = self.peers.get(&id) else {
            return false;
        };
        match peer.outbox.try_send(frame) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(conn = id, "outbound queue full: disconnecting slow client");
                peer.kick.cancel();
                self.remove(id);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.remove(id);
                false
            }
        }
    }

    /// Whether any connection is subscribed to `uri`.
    pub fn has_subscribers(&self, uri: &str) -> bool {
        self.channels.contains_key(uri)
    }

    /// Queue `frame` for every subscriber of `uri`.
    pub fn broadcast(&mut self, uri: &str, frame: &Frame) {
        self.broadcast_views(uri, frame, None);
    }

    /// Queue `frame` for every subscriber of `uri`, except that subscribers without
    /// `mcpApps` get `plain` when there is one.
    pub fn broadcast_views(&mut self, uri: &str, frame: &Frame, plain: Option<&Frame>) {
        let Some(ids) = self.channels.get(uri) else {
            return;
        };
        let ids: Vec<ConnId> = ids.iter().copied().collect();
        for id in ids {
            let view = match plain {
                Some(plain) if !self.mcp_apps(id) => plain,
                _ => frame,
            };
            self.send(id, view.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(
        fanout: &mut Fanout,
        id: ConnId,
        capacity: usize,
    ) -> (mpsc::Receiver<Frame>, CancellationToken) {
        let (tx, rx) = mpsc::channel(capacity);
        let kick = CancellationToken::new();
        fanout.insert(id, tx, kick.clone());
        (rx, kick)
    }

    #[test]
    fn broadcast_reaches_subscribers_once() {
        let mut fanout = Fanout::default();
        let (mut a, _) = peer(&mut fanout, 1, 8);
        let (mut b, _) = peer(&mut fanout, 2, 8);
        fanout.subscribe(1, "x");
        fanout.subscribe(1, "x");
        fanout.subscribe(2, "y");
        fanout.broadcast("x", &Frame::from("f"));
        assert_eq!(a.try_recv().ok(), Some(Frame::from("f")));
        assert!(a.try_recv().is_err());
        assert!(b.try_recv().is_err());
    }

    #[test]
    fn a_full_queue_kicks_only_that_peer() {
        let mut fanout = Fanout::default();
        let (_slow, slow_kick) = peer(&mut fanout, 1, 1);
        let (mut fast, fast_kick) = peer(&mut fanout, 2, 8);
        fanout.subscribe(1, "x");
        fanout.subscribe(2, "x");
        for _ in 0..3 {
            fanout.broadcast("x", &Frame::from("f"));
        }
        assert!(slow_kick.is_cancelled());
        assert!(!fast_kick.is_cancelled());
        let mut received = 0;
        while fast.try_recv().is_ok() {
            received += 1;
        }
        assert_eq!(received, 3);
        assert!(!fanout.send(1, Frame::from("late")));
    }

    #[test]
    fn forgetting_a_channel_unsubscribes_everyone() {
        let mut fanout = Fanout::default();
        let (mut a, _) = peer(&mut fanout, 1, 8);
        fanout.subscribe(1, "x");
        fanout.forget_channel("x");
        fanout.broadcast("x", &Frame::from("f"));
        assert!(a.try_recv().is_err());
        assert!(!fanout.unsubscribe(1, "x"));
    }
}
