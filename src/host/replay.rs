//! The bounded log of committed action envelopes that `reconnect` replays from.
//! It answers "everything after seq N on these channels", or says the gap is too old.

use std::collections::{HashSet, VecDeque};

use ahp_types::actions::ActionEnvelope;

/// Last `capacity` committed envelopes, in `serverSeq` order.
#[derive(Debug)]
pub struct ReplayLog {
    entries: VecDeque<ActionEnvelope>,
    capacity: usize,
}

impl ReplayLog {
    /// A log that keeps at most `capacity` envelopes (0 disables replay).
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity.min(1024)),
            capacity,
        }
    }

    /// Append a committed envelope, dropping the oldest when full.
    pub fn push(&mut self, envelope: ActionEnvelope) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(envelope);
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
        Some(
            self.entries
                .iter()
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
        let mut log = ReplayLog::new(10);
        for seq in 1..=4 {
            log.push(envelope(seq, if seq % 2 == 0 { "a" } else { "b" }));
        }
        let replay = log.since(1, 4, &channels(&["a"])).expect("within the log");
        let seqs: Vec<u64> = replay.iter().map(|e| e.server_seq).collect();
        assert_eq!(seqs, vec![2, 4]);
    }

    #[test]
    fn gap_older_than_the_log_needs_snapshots() {
        let mut log = ReplayLog::new(2);
        for seq in 1..=4 {
            log.push(envelope(seq, "a"));
        }
        assert!(log.since(1, 4, &channels(&["a"])).is_none());
        assert_eq!(log.since(2, 4, &channels(&["a"])).map(|r| r.len()), Some(2));
    }

    #[test]
    fn nothing_missed_is_an_empty_replay_even_with_an_empty_log() {
        let log = ReplayLog::new(0);
        assert_eq!(log.since(7, 7, &channels(&["a"])).map(|r| r.len()), Some(0));
        assert!(log.since(6, 7, &channels(&["a"])).is_none());
    }
}
