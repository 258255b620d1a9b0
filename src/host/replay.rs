//! The bounded log of committed action envelopes that `reconnect` replays from, capped by
//! count and by bytes. Each envelope is kept as the JSON text it encodes to, so the byte cap
//! is what the log really holds. It answers "everything after seq N on these channels", or
//! says the gap is too old.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use ahp_types::actions::ActionEnvelope;

/// What one kept envelope costs besides its text: the entry itself and its channel's name.
/// (The text is behind an `Arc`, shared with the commit that made it: its two reference
/// counts are counted too.)
fn entry_bytes(entry: &Entry) -> usize {
    std::mem::size_of::<Entry>()
        + entry.channel.len()
        + 2 * std::mem::size_of::<usize>()
        + entry.json.len()
}

/// One committed envelope as the log keeps it.
#[derive(Debug)]
struct Entry {
    server_seq: u64,
    channel: Box<str>,
    /// The whole envelope as JSON (channel, action, serverSeq, origin).
    json: Arc<str>,
}

/// The last committed envelopes, in `serverSeq` order: at most `capacity` of them, taking at
/// most `max_bytes` of memory together (their JSON text and their bookkeeping).
#[derive(Debug)]
pub struct ReplayLog {
    entries: VecDeque<Entry>,
    capacity: usize,
    max_bytes: usize,
    bytes: usize,
    /// Where envelopes are encoded (kept: at high rates, one allocation per envelope).
    scratch: Vec<u8>,
}

impl ReplayLog {
    /// A log that keeps at most `capacity` envelopes and `max_bytes` bytes of them (either 0
    /// disables replay).
    pub fn new(capacity: usize, max_bytes: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            capacity,
            max_bytes,
            bytes: 0,
            scratch: Vec::new(),
        }
    }

    /// Append a committed envelope, dropping the oldest ones until both caps hold. An
    /// envelope bigger than the whole byte cap is not kept, and neither is anything before
    /// it: a gap that includes it can only be answered with snapshots.
    ///
    /// Returns the envelope's JSON text, shared with the log: what a subscriber that sees
    /// the envelope unchanged is sent (`None` when the log is off or it was not encodable).
    pub fn push(&mut self, envelope: &ActionEnvelope) -> Option<Arc<str>> {
        if self.capacity == 0 || self.max_bytes == 0 {
            return None;
        }
        self.scratch.clear();
        let encoded = serde_json::to_writer(&mut self.scratch, envelope)
            .ok()
            .and_then(|()| std::str::from_utf8(&self.scratch).ok());
        let Some(json) = encoded.map(Arc::<str>::from) else {
            // Not encodable (cannot happen for committed actions): nothing before it can be
            // replayed either.
            self.clear();
            return None;
        };
        // One huge envelope should not keep its buffer for good.
        if self.scratch.capacity() > 64 * 1024 {
            self.scratch = Vec::new();
        }
        let entry = Entry {
            server_seq: envelope.server_seq,
            channel: envelope.channel.as_str().into(),
            json: json.clone(),
        };
        let size = entry_bytes(&entry);
        if size > self.max_bytes {
            self.clear();
            return Some(json);
        }
        while self.entries.len() >= self.capacity || self.bytes + size > self.max_bytes {
            match self.entries.pop_front() {
                Some(dropped) => self.bytes -= entry_bytes(&dropped),
                None => break,
            }
        }
        self.bytes += size;
        self.entries.push_back(entry);
        // A burst of large envelopes leaves a long ring behind once they are dropped.
        if self.entries.capacity() > 64 && self.entries.capacity() > 4 * self.entries.len() {
            self.entries.shrink_to(2 * self.entries.len());
        }
        Some(json)
    }

    /// Forget every envelope: a gap from before now can only be answered with snapshots.
    pub fn clear(&mut self) {
        self.entries = VecDeque::new();
        self.bytes = 0;
    }

    /// How many bytes the kept envelopes take (their JSON text and bookkeeping).
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
    ) -> Option<Vec<ActionEnvelope>> {
        if after >= current {
            return Some(Vec::new());
        }
        let oldest = self.entries.front()?.server_seq;
        if oldest > after + 1 {
            return None;
        }
        self.entries
            .iter()
            .filter(|e| e.server_seq > after && channels.contains(&*e.channel))
            // What this log encoded decodes: a failure here would be a bug in the types'
            // serde, answered like a gap (snapshots) rather than with a partial replay.
            .map(|e| serde_json::from_str(&e.json).ok())
            .collect()
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
            let sent = envelope(seq, if seq % 2 == 0 { "a" } else { "b" });
            let text = log.push(&sent).expect("kept");
            assert_eq!(*text, serde_json::to_string(&sent).unwrap());
        }
        let replay = log.since(1, 4, &channels(&["a"])).expect("within the log");
        let seqs: Vec<u64> = replay.iter().map(|e| e.server_seq).collect();
        assert_eq!(seqs, vec![2, 4]);
    }

    #[test]
    fn gap_older_than_the_log_needs_snapshots() {
        let mut log = ReplayLog::new(2, usize::MAX);
        for seq in 1..=4 {
            log.push(&envelope(seq, "a"));
        }
        assert!(log.since(1, 4, &channels(&["a"])).is_none());
        assert_eq!(log.since(2, 4, &channels(&["a"])).map(|r| r.len()), Some(2));
    }

    #[test]
    fn the_byte_cap_drops_the_oldest_and_an_oversized_envelope_breaks_the_chain() {
        let size = {
            let mut one = ReplayLog::new(1, usize::MAX);
            one.push(&envelope(1, "a"));
            one.bytes()
        };
        let mut log = ReplayLog::new(100, size * 3);
        for seq in 1..=5 {
            log.push(&envelope(seq, "a"));
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
        log.push(&big);
        assert_eq!(log.bytes(), 0);
        assert!(log.since(5, 6, &channels(&["a"])).is_none());
        log.push(&envelope(7, "a"));
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
