//! What the host sends its connections, in the order its critical sections decided it:
//! described under the host lock (a committed envelope and who gets it, a snapshot to
//! render), rendered for each audience and queued after the lock is let go.
//!
//! Order holds because the host takes this part's lock before it lets go of its own (see
//! `host::Locked`): every batch is queued in the order the host lock was held, so each
//! connection gets actions in `serverSeq` order and a snapshot before the actions after it.
//! Queuing never waits: a connection whose queue is full is kicked (its switch flipped, its
//! queue dropped); the host forgets it when its socket detaches.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;

use super::audience::Audience;
use super::fanout::{ConnId, Targets};
use super::queue::{Queue, Refused};
use super::store::Commit;
use crate::jsonrpc::Frame;

/// A frame for one connection, rendered for what it is shown.
pub type Render = Box<dyn FnOnce(Audience) -> Frame + Send>;

/// A frame per audience and name of the channel (`None`: that audience gets nothing).
pub type RenderEach = Box<dyn FnMut(Audience, &str) -> Option<Frame> + Send>;

/// One thing to send, as the host decided it under its lock.
pub enum Delivery {
    /// A committed envelope for its channel's subscribers, and the summary change it caused
    /// (if any) for the root's; each as its audience is shown it, on the channel by the name
    /// it subscribed under.
    Commit {
        /// What was committed.
        commit: Box<Commit>,
        /// The channel's subscribers when it was committed.
        to: Targets,
        /// The root's subscribers when it was committed (empty without a summary change).
        summary_to: Targets,
    },
    /// A frame made already, for one connection.
    Frame(ConnId, Frame),
    /// A frame rendered for one connection's audience (a reply with snapshots).
    Reply(ConnId, Audience, Render),
    /// A frame per audience and channel name for these connections.
    Each(Targets, RenderEach),
}

/// Every connection's outbound queue, by connection.
#[derive(Default)]
pub struct Sockets {
    queues: HashMap<ConnId, (Queue, CancellationToken)>,
}

impl Sockets {
    /// Register a connection's queue and its kick switch.
    pub fn insert(&mut self, id: ConnId, queue: Queue, kick: CancellationToken) {
        self.queues.insert(id, (queue, kick));
    }

    /// Drop a connection's queue (its socket ends once it has read what is queued).
    pub fn remove(&mut self, id: ConnId) {
        self.queues.remove(&id);
    }

    /// Render and queue a batch, in order.
    pub fn deliver(&mut self, batch: Vec<Delivery>) {
        for delivery in batch {
            match delivery {
                Delivery::Commit {
                    commit,
                    to,
                    summary_to,
                } => {
                    let envelope = &commit.envelope;
                    let encoded = commit.json.as_deref();
                    self.each(&to, |audience, name| {
                        audience.action(envelope, encoded, name)
                    });
                    if let Some(changes) = &commit.summary_changes {
                        self.each(&summary_to, |audience, _| {
                            Some(audience.summary_changed(&envelope.channel, changes))
                        });
                    }
                }
                Delivery::Frame(id, frame) => self.push(id, frame),
                Delivery::Reply(id, audience, render) => {
                    if self.queues.contains_key(&id) {
                        self.push(id, render(audience));
                    }
                }
                Delivery::Each(to, render) => self.each(&to, render),
            }
        }
    }

    /// Queue to each target what `render` makes for its audience and the name it knows the
    /// channel by (once per group).
    fn each(&mut self, to: &Targets, mut render: impl FnMut(Audience, &str) -> Option<Frame>) {
        for group in to {
            // Nobody left to render for: the common case of a kicked or gone connection.
            if !group.ids.iter().any(|id| self.queues.contains_key(id)) {
                continue;
            }
            let Some(frame) = render(group.audience, &group.name) else {
                continue;
            };
            for id in &group.ids {
                self.push(*id, frame.clone());
            }
        }
    }

    /// Queue `frame` for one connection; a full queue kicks it.
    fn push(&mut self, id: ConnId, frame: Frame) {
        let Some((queue, kick)) = self.queues.get(&id) else {
            return;
        };
        match queue.push(frame) {
            Ok(()) => {}
            Err(Refused::Full) => {
                tracing::warn!(conn = id, "outbound queue full: disconnecting slow client");
                kick.cancel();
                self.queues.remove(&id);
            }
            Err(Refused::Closed) => {
                self.queues.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fanout::{Fanout, Group};
    use super::super::queue::{queue, Outbox};
    use super::*;

    fn peer(sockets: &mut Sockets, id: ConnId, capacity: usize) -> (Outbox, CancellationToken) {
        let (tx, rx) = queue(capacity, usize::MAX);
        let kick = CancellationToken::new();
        sockets.insert(id, tx, kick.clone());
        (rx, kick)
    }

    fn to(ids: &[ConnId]) -> Targets {
        vec![Group {
            audience: Audience::default(),
            name: "x".to_string(),
            ids: ids.to_vec(),
        }]
    }

    fn each(frame: &'static str) -> RenderEach {
        Box::new(move |_, _| Some(Frame::from(frame)))
    }

    #[test]
    fn a_full_queue_kicks_only_that_connection_and_the_others_get_everything_in_order() {
        let mut sockets = Sockets::default();
        let (_slow, slow_kick) = peer(&mut sockets, 1, 1);
        let (mut fast, fast_kick) = peer(&mut sockets, 2, 8);
        sockets.deliver(vec![
            Delivery::Each(to(&[1, 2]), each("a")),
            Delivery::Frame(2, Frame::from("b")),
            Delivery::Each(to(&[1, 2]), each("c")),
            Delivery::Reply(2, Audience::default(), Box::new(|_| Frame::from("d"))),
        ]);
        assert!(slow_kick.is_cancelled());
        assert!(!fast_kick.is_cancelled());
        let mut received = Vec::new();
        while let Ok(frame) = fast.try_recv() {
            received.push(frame.to_string());
        }
        assert_eq!(received, ["a", "b", "c", "d"]);
        // Gone: nothing more is rendered for it.
        sockets.deliver(vec![Delivery::Reply(
            1,
            Audience::default(),
            Box::new(|_| unreachable!("rendered for a kicked connection")),
        )]);
    }

    #[test]
    fn each_audience_is_rendered_once() {
        let mut sockets = Sockets::default();
        let (mut a, _) = peer(&mut sockets, 1, 8);
        let (mut b, _) = peer(&mut sockets, 2, 8);
        let mut renders = 0;
        sockets.each(&to(&[1, 2]), |_, _| {
            renders += 1;
            Some(Frame::from("f"))
        });
        assert_eq!(renders, 1);
        assert_eq!(a.try_recv().ok(), Some(Frame::from("f")));
        assert_eq!(b.try_recv().ok(), Some(Frame::from("f")));
    }

    #[test]
    fn a_subscriber_is_sent_a_channel_by_the_name_it_subscribed_under() {
        let mut fanout = Fanout::default();
        let mut sockets = Sockets::default();
        let (mut own, own_kick) = peer(&mut sockets, 1, 8);
        let (mut other, other_kick) = peer(&mut sockets, 2, 8);
        fanout.insert(1, own_kick, false);
        fanout.insert(2, other_kick, false);
        fanout.subscribe(1, "x");
        fanout.subscribe_as(2, "x", "alias-of-x");
        assert_eq!(fanout.name_of(2, "x"), "alias-of-x");
        sockets.deliver(vec![Delivery::Each(
            fanout.subscribers("x"),
            Box::new(|_, name| Some(Frame::from(name))),
        )]);
        assert_eq!(own.try_recv().ok(), Some(Frame::from("x")));
        assert_eq!(other.try_recv().ok(), Some(Frame::from("alias-of-x")));
        // Subscribing by the host's own name again: that name from now on.
        fanout.subscribe(2, "x");
        assert_eq!(fanout.name_of(2, "x"), "x");
        fanout.subscribe_as(2, "x", "alias-of-x");
        assert!(fanout.unsubscribe(2, "x"));
        assert_eq!(fanout.name_of(2, "x"), "x");
    }
}
