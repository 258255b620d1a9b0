//! Who is subscribed to what, and the bounded outbound queue of every connection (bounded
//! in frames and in bytes). Sending never waits: a connection whose queue is full is kicked,
//! so one slow client never holds up the others (it can `reconnect` and catch up from the
//! replay log).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::audience::Audience;
use crate::jsonrpc::Frame;

/// Host-wide connection number.
pub type ConnId = u64;

/// A connection's outbound queue: at most `capacity` frames and `max_bytes` bytes (a frame
/// of any size fits an empty queue). The host's end; the socket reads the [`Outbox`].
pub fn queue(capacity: usize, max_bytes: usize) -> (Queue, Outbox) {
    let (tx, rx) = mpsc::channel(capacity);
    let bytes = Arc::new(AtomicUsize::new(0));
    (
        Queue {
            tx,
            bytes: bytes.clone(),
            max_bytes,
        },
        Outbox { rx, bytes },
    )
}

/// The host's end of a connection's queue.
pub struct Queue {
    tx: mpsc::Sender<Frame>,
    bytes: Arc<AtomicUsize>,
    max_bytes: usize,
}

/// Why a frame was not queued.
enum Refused {
    /// The queue is full (frames or bytes): the client is too slow.
    Full,
    /// The socket is gone.
    Closed,
}

impl Queue {
    fn push(&self, frame: Frame) -> Result<(), Refused> {
        let len = frame.len();
        let queued = self.bytes.load(Ordering::Relaxed);
        if queued > 0 && queued.saturating_add(len) > self.max_bytes {
            return Err(Refused::Full);
        }
        match self.tx.try_send(frame) {
            Ok(()) => {
                self.bytes.fetch_add(len, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => Err(Refused::Full),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Refused::Closed),
        }
    }
}

/// The socket's end of a connection's queue: frames in order, their bytes given back as
/// they are taken.
pub struct Outbox {
    rx: mpsc::Receiver<Frame>,
    bytes: Arc<AtomicUsize>,
}

impl Outbox {
    /// The next frame; `None` once the host dropped the connection.
    pub async fn recv(&mut self) -> Option<Frame> {
        let frame = self.rx.recv().await?;
        self.taken(&frame);
        Some(frame)
    }

    /// The next frame if one is queued.
    pub fn try_recv(&mut self) -> Result<Frame, mpsc::error::TryRecvError> {
        let frame = self.rx.try_recv()?;
        self.taken(&frame);
        Ok(frame)
    }

    /// Bytes queued and not yet taken.
    pub fn queued_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn taken(&self, frame: &Frame) {
        self.bytes.fetch_sub(frame.len(), Ordering::Relaxed);
    }
}

struct Peer {
    outbox: Queue,
    kick: CancellationToken,
    subscriptions: HashSet<String>,
    /// The names it subscribed under where they are not the host's own (VS Code's other
    /// names of a session or chat): what it is sent on those channels is sent by that name.
    names: HashMap<String, String>,
    client_id: Option<String>,
    /// What it is shown (MCP Apps or not, its protocol version).
    audience: Audience,
}

/// The subscription table plus every live connection's queue.
#[derive(Default)]
pub struct Fanout {
    peers: HashMap<ConnId, Peer>,
    channels: HashMap<String, BTreeSet<ConnId>>,
}

impl Fanout {
    /// Register a connection's queue and its kick switch.
    pub fn insert(&mut self, id: ConnId, outbox: Queue, kick: CancellationToken) {
        self.peers.insert(
            id,
            Peer {
                outbox,
                kick,
                subscriptions: HashSet::new(),
                names: HashMap::new(),
                client_id: None,
                audience: Audience::default(),
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
    /// what it is shown.
    pub fn set_client(&mut self, id: ConnId, client_id: &str, audience: Audience) {
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.client_id = Some(client_id.to_string());
            peer.audience = audience;
        }
    }

    /// What connection `id` is shown.
    pub fn audience(&self, id: ConnId) -> Audience {
        self.peers.get(&id).map(|p| p.audience).unwrap_or_default()
    }

    /// Whether any live connection belongs to `client_id`.
    pub fn has_client(&self, client_id: &str) -> bool {
        self.peers
            .values()
            .any(|p| p.client_id.as_deref() == Some(client_id))
    }

    /// Subscribe a connection to `uri` (idempotent: never doubles deliveries).
    pub fn subscribe(&mut self, id: ConnId, uri: &str) {
        self.subscribe_as(id, uri, uri);
    }

    /// Subscribe a connection to `uri`, which it knows as `name`: what it is sent on `uri`
    /// from now on goes by that name (the last name it subscribed under wins).
    pub fn subscribe_as(&mut self, id: ConnId, uri: &str, name: &str) {
        if let Some(peer) = self.peers.get_mut(&id) {
            if name == uri {
                peer.names.remove(uri);
            } else {
                peer.names.insert(uri.to_string(), name.to_string());
            }
            if peer.subscriptions.insert(uri.to_string()) {
                self.channels.entry(uri.to_string()).or_default().insert(id);
            }
        }
    }

    /// The name connection `id` knows channel `uri` by (`uri` itself unless it subscribed
    /// under another).
    pub fn name_of<'a>(&'a self, id: ConnId, uri: &'a str) -> &'a str {
        self.peers
            .get(&id)
            .and_then(|peer| peer.names.get(uri))
            .map_or(uri, String::as_str)
    }

    /// Unsubscribe a connection from `uri`; returns whether it was subscribed.
    pub fn unsubscribe(&mut self, id: ConnId, uri: &str) -> bool {
        let was = self.peers.get_mut(&id).is_some_and(|peer| {
            peer.names.remove(uri);
            peer.subscriptions.remove(uri)
        });
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
                peer.names.remove(uri);
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
        match peer.outbox.push(frame) {
            Ok(()) => true,
            Err(Refused::Full) => {
                tracing::warn!(conn = id, "outbound queue full: disconnecting slow client");
                peer.kick.cancel();
                self.remove(id);
                false
            }
            Err(Refused::Closed) => {
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
        self.broadcast_each(uri, |_, _| Some(frame.clone()));
    }

    /// Queue for every subscriber of `uri` what `render` makes for its audience and the name
    /// it knows `uri` by (`None`: nothing). Each audience and name is rendered once, however
    /// many subscribers share it.
    pub fn broadcast_each(
        &mut self,
        uri: &str,
        mut render: impl FnMut(Audience, &str) -> Option<Frame>,
    ) {
        let Some(ids) = self.channels.get(uri) else {
            return;
        };
        let ids: Vec<ConnId> = ids.iter().copied().collect();
        let mut rendered: Vec<(Audience, String, Option<Frame>)> = Vec::new();
        for id in ids {
            let audience = self.audience(id);
            let name = self.name_of(id, uri);
            let at = match rendered
                .iter()
                .position(|(a, n, _)| *a == audience && n == name)
            {
                Some(at) => at,
                None => {
                    let frame = render(audience, name);
                    rendered.push((audience, name.to_string(), frame));
                    rendered.len() - 1
                }
            };
            if let Some(frame) = &rendered[at].2 {
                self.send(id, frame.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(fanout: &mut Fanout, id: ConnId, capacity: usize) -> (Outbox, CancellationToken) {
        let (tx, rx) = queue(capacity, usize::MAX);
        let kick = CancellationToken::new();
        fanout.insert(id, tx, kick.clone());
        (rx, kick)
    }

    #[test]
    fn a_queue_full_of_bytes_kicks_but_one_big_frame_always_fits() {
        let mut fanout = Fanout::default();
        let (tx, mut rx) = queue(100, 10);
        let kick = CancellationToken::new();
        fanout.insert(1, tx, kick.clone());
        assert!(fanout.send(1, Frame::from("a frame of 20 bytes.")));
        assert_eq!(rx.queued_bytes(), 20);
        assert_eq!(
            rx.try_recv().ok(),
            Some(Frame::from("a frame of 20 bytes."))
        );
        assert_eq!(rx.queued_bytes(), 0);
        assert!(fanout.send(1, Frame::from("12345")));
        assert!(fanout.send(1, Frame::from("12345")));
        assert!(!kick.is_cancelled());
        assert!(!fanout.send(1, Frame::from("1")));
        assert!(kick.is_cancelled());
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
    fn a_subscriber_is_sent_a_channel_by_the_name_it_subscribed_under() {
        let mut fanout = Fanout::default();
        let (mut own, _) = peer(&mut fanout, 1, 8);
        let (mut other, _) = peer(&mut fanout, 2, 8);
        fanout.subscribe(1, "x");
        fanout.subscribe_as(2, "x", "alias-of-x");
        assert_eq!(fanout.name_of(2, "x"), "alias-of-x");
        fanout.broadcast_each("x", |_, name| Some(Frame::from(name)));
        assert_eq!(own.try_recv().ok(), Some(Frame::from("x")));
        assert_eq!(other.try_recv().ok(), Some(Frame::from("alias-of-x")));
        // Subscribing by the host's own name again: that name from now on.
        fanout.subscribe(2, "x");
        assert_eq!(fanout.name_of(2, "x"), "x");
        fanout.subscribe_as(2, "x", "alias-of-x");
        assert!(fanout.unsubscribe(2, "x"));
        assert_eq!(fanout.name_of(2, "x"), "x");
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
