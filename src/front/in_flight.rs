//! The harnesses' requests being answered, by tag: forwarded to a server, held by a step, or
//! run by an AHP client. Pure bookkeeping; an entry is added when the front takes a request
//! and removed only by the guard that owns it (`exchange::Tracked`), whatever ended it.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::outbox::Stream;

/// A harness session's id (one per stdio front or HTTP MCP session).
pub type HarnessId = u64;

/// One harness request being answered.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The server working on it now (`client:<id>` for an AHP client's tool).
    pub server: Arc<str>,
    /// The harness that sent it.
    pub harness: HarnessId,
    /// Its id, as the harness wrote it.
    pub request: Arc<str>,
    /// Where its answer goes (over HTTP: its POST's stream).
    pub stream: Stream,
    /// Cancelled when the harness cancels it or goes away.
    pub cancelled: CancellationToken,
}

/// Every request being answered, by tag (tags grow: a higher tag started later).
#[derive(Debug, Default)]
pub struct Table {
    entries: HashMap<u64, Entry>,
    /// Harness → its id for the request → tag.
    by_request: HashMap<HarnessId, HashMap<Arc<str>, u64>>,
}

impl Table {
    /// Request `tag` is being answered.
    pub fn insert(&mut self, tag: u64, entry: Entry) {
        self.by_request
            .entry(entry.harness)
            .or_default()
            .insert(entry.request.clone(), tag);
        self.entries.insert(tag, entry);
    }

    /// How many requests are being answered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Request `tag` is over (idempotent).
    pub fn remove(&mut self, tag: u64) -> Option<Entry> {
        let entry = self.entries.remove(&tag)?;
        if let Some(requests) = self.by_request.get_mut(&entry.harness) {
            if requests.get(&entry.request) == Some(&tag) {
                requests.remove(&entry.request);
            }
        }
        Some(entry)
    }

    /// Harness `harness` is gone: its index goes (its entries go with their guards).
    pub fn forget(&mut self, harness: HarnessId) {
        self.by_request.remove(&harness);
    }

    /// Request `tag`, while it is being answered.
    pub fn get(&self, tag: u64) -> Option<&Entry> {
        self.entries.get(&tag)
    }

    /// Harness `harness`'s request `request` (its id as written): its tag and entry.
    pub fn by_request(&self, harness: HarnessId, request: &str) -> Option<(u64, &Entry)> {
        let tag = *self.by_request.get(&harness)?.get(request)?;
        self.entries.get(&tag).map(|entry| (tag, entry))
    }

    /// Request `tag` goes to `server` now (it was sent on to the next one).
    pub fn retarget(&mut self, tag: u64, server: &Arc<str>) {
        if let Some(entry) = self.entries.get_mut(&tag) {
            entry.server = server.clone();
        }
    }

    /// How many requests of harness `harness` are being answered.
    pub fn count(&self, harness: HarnessId) -> usize {
        self.entries
            .values()
            .filter(|e| e.harness == harness)
            .count()
    }

    /// Every request of harness `harness`: tag, server and cancellation.
    pub fn of_harness(&self, harness: HarnessId) -> Vec<(u64, Arc<str>, CancellationToken)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.harness == harness)
            .map(|(tag, e)| (*tag, e.server.clone(), e.cancelled.clone()))
            .collect()
    }

    /// The stream of harness `harness`'s request `tag`, while it is being answered.
    pub fn stream_of(&self, harness: HarnessId, tag: u64) -> Option<Stream> {
        self.entries
            .get(&tag)
            .filter(|e| e.harness == harness)
            .map(|e| e.stream.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(harness: HarnessId, request: &str) -> Entry {
        Entry {
            server: "s".into(),
            harness,
            request: request.into(),
            stream: Stream::channel().0,
            cancelled: CancellationToken::new(),
        }
    }

    #[test]
    fn entries_are_found_by_tag_and_by_the_harness_request_and_removed_once() {
        let mut table = Table::default();
        table.insert(1, entry(7, "\"a\""));
        table.insert(2, entry(8, "\"a\""));
        assert_eq!(table.by_request(7, "\"a\"").map(|(tag, _)| tag), Some(1));
        assert_eq!(table.by_request(8, "\"a\"").map(|(tag, _)| tag), Some(2));
        assert_eq!(table.count(7), 1);
        table.retarget(1, &Arc::from("next"));
        assert_eq!(table.get(1).map(|e| &*e.server), Some("next"));
        assert!(table.stream_of(8, 1).is_none(), "not harness 8's request");
        assert!(table.remove(1).is_some());
        assert!(table.remove(1).is_none(), "idempotent");
        assert!(table.by_request(7, "\"a\"").is_none());
        assert_eq!(table.of_harness(8).len(), 1);
    }

    #[test]
    fn a_reused_request_id_keeps_the_newer_request_findable() {
        let mut table = Table::default();
        table.insert(1, entry(7, "1"));
        // The harness sent another request with the same id before the first ended.
        table.insert(2, entry(7, "1"));
        table.remove(1);
        assert_eq!(table.by_request(7, "1").map(|(tag, _)| tag), Some(2));
        table.remove(2);
        table.forget(7);
        assert!(
            table.by_request.is_empty(),
            "nothing kept for a harness that is gone"
        );
    }
}
