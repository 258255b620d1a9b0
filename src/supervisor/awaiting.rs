//! Which declared servers wait for the user's trust: a server that asks for it runs only
//! once its fingerprint is trusted; those that would run otherwise are published, with what
//! they would run, for whoever asks the user.

use std::collections::BTreeMap;

use super::{Entry, Owner};
use crate::trust::fingerprint::{described, fingerprint};

/// A declared server that would run, but waits for the user to trust its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwaitingTrust {
    /// Its declared name.
    pub name: String,
    /// Where it was declared (`file:line:col`).
    pub declared_at: String,
    /// The fingerprint of what it would run (`trust::fingerprint`).
    pub fingerprint: String,
    /// What it would run, as people are shown it (`trust::fingerprint::described`).
    pub described: String,
}

/// Every server awaiting trust, by customization id.
pub type Awaiting = BTreeMap<String, AwaitingTrust>;

impl Owner {
    /// Whether server `entry` is one the user trusted (or one that never asks). A server
    /// whose launch spec cannot be used runs nothing: its task only reports why, as for any
    /// server, so it needs no trust.
    pub(super) fn trusted(&self, entry: &Entry) -> bool {
        if !self.asks_trust.contains(&entry.server.id) {
            return true;
        }
        match &entry.server.launch {
            Ok(launch) => self.trust.is_trusted(&fingerprint(launch)),
            Err(_) => true,
        }
    }

    /// Tell whoever asks the user which servers wait for trust now (only a change wakes them).
    pub(super) fn publish_awaiting(&self) {
        let mut awaiting = Awaiting::new();
        for id in &self.asks_trust {
            let Some(entry) = self.servers.get(id.as_str()) else {
                continue;
            };
            let Ok(launch) = &entry.server.launch else {
                continue;
            };
            if !self.wanted(entry) || self.trusted(entry) {
                continue;
            }
            awaiting.insert(
                id.clone(),
                AwaitingTrust {
                    name: entry.server.name.clone(),
                    declared_at: entry.server.declared_at.clone(),
                    fingerprint: fingerprint(launch),
                    described: described(launch),
                },
            );
        }
        self.awaiting.send_if_modified(|now| {
            let changed = *now != awaiting;
            if changed {
                *now = awaiting;
            }
            changed
        });
    }
}
