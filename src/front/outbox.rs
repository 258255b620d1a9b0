//! Where messages to a harness go: a stream of frames in order (stdout for a stdio harness;
//! one POST's response or the GET event stream over HTTP). A frame marked final is the
//! answer that ends a POST's stream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// How much (roughly, in KiB) of unsolicited notifications may be on its way to one
/// harness at once; beyond, they are dropped.
pub const BUDGET_KIB: u32 = 16 * 1024;

/// One message on its way.
#[derive(Debug)]
pub struct Outgoing {
    /// The JSON text.
    pub text: String,
    /// The answer that ends its stream (a POST's response).
    pub last: bool,
    /// Budget held until the frame is written.
    pub permit: Option<OwnedSemaphorePermit>,
}

/// A stream of frames to one harness; cheap to clone. Sending never waits.
#[derive(Debug, Clone)]
pub struct Stream {
    tx: mpsc::UnboundedSender<Outgoing>,
}

impl Stream {
    /// A stream and its receiving end.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }

    /// Queue a message; `false` when nobody reads the stream any more.
    pub fn send(&self, text: String) -> bool {
        self.push(text, false, None)
    }

    /// Queue the answer that ends the stream.
    pub fn finish(&self, text: String) -> bool {
        self.push(text, true, None)
    }

    /// Queue a message holding `permit` until it is written.
    pub fn send_with(&self, text: String, permit: OwnedSemaphorePermit) -> bool {
        self.push(text, false, Some(permit))
    }

    fn push(&self, text: String, last: bool, permit: Option<OwnedSemaphorePermit>) -> bool {
        self.tx.send(Outgoing { text, last, permit }).is_ok()
    }

    /// Whether nobody reads the stream any more.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Wait until nobody reads the stream any more (an HTTP client closed its response).
    pub async fn closed(&self) {
        self.tx.closed().await
    }
}

/// One harness's budget for unsolicited notifications in flight.
#[derive(Debug)]
pub struct Budget {
    room: Arc<Semaphore>,
    dropped: AtomicU64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            room: Arc::new(Semaphore::new(BUDGET_KIB as usize)),
            dropped: AtomicU64::new(0),
        }
    }
}

impl Budget {
    /// Room for a message of `bytes`, held until it is written; `None` when the harness is
    /// too far behind (the message is then dropped, and the first drop is logged).
    pub fn admit(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let kib = u32::try_from(bytes / 1024 + 1).unwrap_or(u32::MAX);
        match self
            .room
            .clone()
            .try_acquire_many_owned(kib.clamp(1, BUDGET_KIB))
        {
            Ok(permit) => Some(permit),
            Err(_) => {
                if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!("a harness is not reading its notifications; server notifications to it are dropped until it catches up");
                }
                None
            }
        }
    }

    /// How many notifications were dropped so far.
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harness_that_does_not_read_gets_no_more_than_the_budget() {
        let budget = Budget::default();
        let held: Vec<_> = (0..16)
            .map_while(|_| budget.admit(1024 * 1024 - 1))
            .collect();
        assert_eq!(held.len(), 16);
        assert!(budget.admit(1).is_none());
        assert_eq!(budget.dropped(), 1);
        drop(held);
        // A message as large as the whole budget still passes when nothing else waits.
        assert!(budget.admit(usize::MAX).is_some());
    }

    #[test]
    fn frames_keep_their_order_and_the_last_one_is_marked() {
        let (stream, mut rx) = Stream::channel();
        assert!(stream.send("a".into()));
        assert!(stream.finish("b".into()));
        let a = rx.try_recv().unwrap();
        let b = rx.try_recv().unwrap();
        assert_eq!(
            (a.text.as_str(), a.last, b.text.as_str(), b.last),
            ("a", false, "b", true)
        );
        drop(rx);
        assert!(stream.is_closed());
        assert!(!stream.send("c".into()));
    }
}
