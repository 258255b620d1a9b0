//! A connection's bounded outbound queue, bounded in frames and in bytes: the host's end
//! never waits (a full queue is refused, and its connection kicked), the socket's end reads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::jsonrpc::Frame;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is full (frames or bytes): the client is too slow.
    Full,
    /// The socket is gone.
    Closed,
}

impl Queue {
    /// Queue `frame` without waiting.
    pub fn push(&self, frame: Frame) -> Result<(), Refused> {
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
    #[cfg(test)]
    pub fn queued_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn taken(&self, frame: &Frame) {
        self.bytes.fetch_sub(frame.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_full_of_bytes_refuses_but_one_big_frame_always_fits() {
        let (tx, mut rx) = queue(100, 10);
        assert_eq!(tx.push(Frame::from("a frame of 20 bytes.")), Ok(()));
        assert_eq!(rx.queued_bytes(), 20);
        assert_eq!(
            rx.try_recv().ok(),
            Some(Frame::from("a frame of 20 bytes."))
        );
        assert_eq!(rx.queued_bytes(), 0);
        assert_eq!(tx.push(Frame::from("12345")), Ok(()));
        assert_eq!(tx.push(Frame::from("12345")), Ok(()));
        assert_eq!(tx.push(Frame::from("1")), Err(Refused::Full));
        let (tx, rx) = queue(100, 10);
        drop(rx);
        assert_eq!(tx.push(Frame::from("1")), Err(Refused::Closed));
    }
}
