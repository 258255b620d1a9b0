//! Event streams a client can resume: a POST answered as an event stream is kept, event by
//! event, under ids `<stream>-<n>`, so a client whose connection dropped can GET it again
//! with `Last-Event-ID` and read on from there, the answer included. Finished streams are
//! kept for a while, a bounded number per session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, Notify};

use super::outbox::Outgoing;
use crate::mcp::sse;

/// How long a finished stream can still be resumed.
pub const KEEP_FINISHED: Duration = Duration::from_secs(60);
/// Streams kept per session at the most (the oldest finished ones go first).
pub const MAX_STREAMS: usize = 64;
/// How long a client should wait before resuming a dropped stream, in milliseconds (unless
/// the server behind `/mcp/<server>` asks for another wait).
pub const RETRY_MS: u64 = 1000;

/// One session's resumable streams.
#[derive(Default)]
pub struct Streams {
    next: AtomicU64,
    logs: Mutex<HashMap<u64, Arc<Log>>>,
}

/// One stream's events so far.
#[derive(Default)]
pub struct Log {
    state: Mutex<LogState>,
    changed: Notify,
}

#[derive(Default)]
struct LogState {
    /// Encoded events, in order; event `n` is at index `n`.
    events: Vec<Bytes>,
    finished: Option<Instant>,
}

impl Streams {
    /// A new stream fed by `frames`, starting with a priming event (its id, and how long
    /// to wait before resuming: `retry` ms) and then `first`, if a frame already came.
    pub fn start(
        &self,
        retry: u64,
        first: Option<Outgoing>,
        frames: mpsc::UnboundedReceiver<Outgoing>,
    ) -> Arc<Log> {
        self.prune();
        let stream = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let log = Arc::new(Log::default());
        {
            let mut state = log.state();
            let priming = format!("id: {stream}-0\nretry: {retry}\ndata: \n\n");
            state.events.push(Bytes::from(priming));
        }
        if let Some(first) = first {
            log.push(stream, first);
        }
        self.logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(stream, log.clone());
        tokio::spawn(pump(stream, log.clone(), frames));
        log
    }

    /// The stream an event id belongs to, and the index to read on from.
    pub fn find(&self, last_event_id: &str) -> Option<(Arc<Log>, usize)> {
        let (stream, n) = last_event_id.trim().split_once('-')?;
        let stream: u64 = stream.parse().ok()?;
        let n: usize = n.parse().ok()?;
        let log = self
            .logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&stream)
            .cloned()?;
        Some((log, n + 1))
    }

    fn prune(&self) {
        let mut logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        logs.retain(|_, log| {
            log.state()
                .finished
                .is_none_or(|at| at.elapsed() < KEEP_FINISHED)
        });
        while logs.len() >= MAX_STREAMS {
            let oldest = logs
                .iter()
                .filter(|(_, log)| log.state().finished.is_some())
                .map(|(id, _)| *id)
                .min()
                .or_else(|| logs.keys().copied().min());
            match oldest {
                Some(id) => {
                    logs.remove(&id);
                }
                None => break,
            }
        }
    }
}

impl Log {
    fn state(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, stream: u64, frame: Outgoing) {
        {
            let mut state = self.state();
            let n = state.events.len();
            let id = format!("{stream}-{n}");
            let text = sse::encode(Some("message"), Some(&id), &frame.text);
            state.events.push(Bytes::from(text));
            if frame.last {
                state.finished = Some(Instant::now());
            }
        }
        drop(frame.permit);
        self.changed.notify_waiters();
    }

    /// The events from index `from` on, as they come, until the stream's answer.
    pub fn read_from(self: Arc<Self>, from: usize) -> impl futures_util::Stream<Item = Bytes> {
        futures_util::stream::unfold((self, from), |(log, next)| async move {
            loop {
                let notified = log.changed.notified();
                {
                    let state = log.state();
                    if let Some(event) = state.events.get(next) {
                        return Some((event.clone(), (log.clone(), next + 1)));
                    }
                    if state.finished.is_some() {
                        return None;
                    }
                }
                notified.await;
            }
        })
    }
}

/// Move frames into the log until the stream's answer (or its end).
async fn pump(stream: u64, log: Arc<Log>, mut frames: mpsc::UnboundedReceiver<Outgoing>) {
    if log.state().finished.is_some() {
        return;
    }
    while let Some(frame) = frames.recv().await {
        let last = frame.last;
        log.push(stream, frame);
        if last {
            return;
        }
    }
    log.state().finished = Some(Instant::now());
    log.changed.notify_waiters();
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;
    use crate::front::outbox::Stream;

    #[tokio::test]
    async fn a_stream_can_be_read_again_from_any_event_to_its_answer() {
        let streams = Streams::default();
        let (tx, rx) = Stream::channel();
        tx.send("note".into());
        let (first, rest) = {
            let mut rx = rx;
            (rx.recv().await.unwrap(), rx)
        };
        let log = streams.start(RETRY_MS, Some(first), rest);
        tx.finish("answer".into());
        let all: Vec<Bytes> = log.clone().read_from(0).collect().await;
        let text: Vec<String> = all
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect();
        assert_eq!(text[0], "id: 1-0\nretry: 1000\ndata: \n\n");
        assert_eq!(text[1], "event: message\nid: 1-1\ndata: note\n\n");
        assert_eq!(text[2], "event: message\nid: 1-2\ndata: answer\n\n");
        let (again, from) = streams.find("1-1").unwrap();
        let resumed: Vec<Bytes> = again.read_from(from).collect().await;
        assert_eq!(resumed, vec![all[2].clone()]);
        assert!(streams.find("9-0").is_none());
        assert!(streams.find("nonsense").is_none());
    }
}
