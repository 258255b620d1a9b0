//! The bounded log of committed action envelopes that `reconnect` replays from, capped by
//! count and by bytes. It answers "everything after seq N on these channels", or says the
//! gap is too old.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use ahp_types::actions::ActionEnvelope;

use crate::jsonrpc::encoded_len;

/// The last committed envelopes, in `serverSeq` order: at most `capacity` of them, taking at
/// most `max_bytes` as JSON together.
#[derive(Debug)]
pub struct ReplayLog {
    /// Each envelope with its size as JSON.
    entries: VecDeque<(Arc<ActionEnvelope>, usize)>,
    capacity: usize,
    max_bytes: usize,
    bytes: usize,
}

impl ReplayLog {
    /// A log that keeps at most `capacity` envelopes and `max_bytes` bytes of them (either 0
    /// disables replay).
    pub fn new(capacity: usize, max_bytes: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity.min(1024)),
            capacity,
            max_bytes,
            bytes: 0,
        }
    }

    /// Append a committed envelope, dropping the oldest ones until both caps hold. An
    /// envelope bigger than the whole byte cap is not kept, and neither is anything before
    /// it: a gap that includes it can only be answered with snapshots. Shared with the
    /// commit that made it: kept without a copy.
    pub fn push(&mut self, envelope: Arc<ActionEnvelope>) {
        if self.capacity == 0 || self.max_bytes == 0 {
            return;
        }
        let size = encoded_len(&*envelope);
        if size > self.max_bytes {
            self.entries.clear();
            self.bytes = 0;
            return;
        }
        while self.entries.len() >= self.capacity || self.bytes + size > self.max_bytes {
            match self.entries.pop_front() {
                Some((_, dropped)) => self.bytes -= dropped,
                None => break,
            }
        }
        self.bytes += size;
        self.entries.push_back((envelope, size));
    }

    /// How many bytes (as JSON) the kept envelopes take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Envelopes with `serverSeq > after` on `channels`, or `None` when some of the
    /// envelopes after `after` were already dropped (the caller must fall back to snapshots).
    /// `current` is the host's latest `serverSeq`.
    pub fn since(
        &self,
        after: u64,
        current: u64,
        channels: &HashSet<&str>,
    ) -> Option<Vec<Arc<ActionEnvelope>>> {
        if after >= current {
            return Some(Vec::new());
        }
        let oldest = self.entries.front()?.0.server_seq;
        if oldest > after + 1 {
            return None;
        }
        Some(
            self.entries
                .iter()
                .map(|(e, _)| e)
                .filter(|e| e.server_seq > after && channels.contains(e.channel.as_str()))
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_types::actions::{SessionTitleChangedAction, StateAction};

    fn envelope(seq: u64, channel: &str) -> ActionEnvelope {
        ActionEnvelope {
            channel: channel.into(),
            action: StateAction::SessionTitleChanged(SessionTitleChangedAction {
                title: format!("t{seq}"),
            }),
            server_seq: seq,
            origin: None,
            rejection_reason: None,
        }
    }

    fn channels<'a>(list: &[&'a str]) -> HashSet<&'a str> {
        list.iter().copied().collect()
    }

    #[test]
    fn replays_only_later_actions_on_requested_channels() {
        let mut log = ReplayLog::new(10, usize::MAX);
        for seq in 1..=4 {
            log.push(Arc::new(envelope(
                seq,
                if seq % 2 == 0 { "a" } else { "b" },
            )));
        }
        let replay = log.since(1, 4, &channels(&["a"])).expect("within the log");
        let seqs: Vec<u64> = replay.iter().map(|e| e.server_seq).collect();
        assert_eq!(seqs, vec![2, 4]);
    }

    #[test]
    fn gap_older_than_the_log_needs_snapshots() {
        let mut log = ReplayLog::new(2, usize::MAX);
        for seq in 1..=4 {
            log.push(Arc::new(envelope(seq, "a")));
        }
        assert!(log.since(1, 4, &channels(&["a"])).is_none());
        assert_eq!(log.since(2, 4, &channels(&["a"])).map(|r| r.len()), Some(2));
    }

    #[test]
    fn the_byte_cap_drops_the_oldest_and_an_oversized_envelope_breaks_the_chain() {
        let size = encoded_len(&envelope(1, "a"));
        let mut log = ReplayLog::new(100, size * 3);
        for seq in 1..=5 {
            log.push(Arc::new(envelope(seq, "a")));
        }
        assert!(log.bytes() <= size * 3, "{} > {}", log.bytes(), size * 3);
        assert_eq!(log.since(2, 5, &channels(&["a"])).map(|r| r.len()), Some(3));
        assert!(log.since(1, 5, &channels(&["a"])).is_none());
        // One envelope bigger than the whole cap: nothing before it can be replayed, and
        // it is not kept either; later ones are.
        let mut big = envelope(6, "a");
        big.action = StateAction::SessionTitleChanged(SessionTitleChangedAction {
            title: "x".repeat(size * 4),
        });
        log.push(Arc::new(big));
        assert_eq!(log.bytes(), 0);
        assert!(log.since(5, 6, &channels(&["a"])).is_none());
        log.push(Arc::new(envelope(7, "a")));
        assert!(log.since(5, 7, &channels(&["a"])).is_none());
        assert_eq!(log.since(6, 7, &channels(&["a"])).map(|r| r.len()), Some(1));
    }

    #[test]
    fn nothing_missed_is_an_empty_replay_even_with_an_empty_log() {
        let log = ReplayLog::new(0, usize::MAX);
        assert_eq!(log.since(7, 7, &channels(&["a"])).map(|r| r.len()), Some(0));
        assert!(log.since(6, 7, &channels(&["a"])).is_none());
    }
}
