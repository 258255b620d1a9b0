//! A bounded map that forgets its oldest entry first, pure: the mirrored calls that went on
//! as tasks wait here for their task's end, and a harness that starts tasks and never reads
//! them cannot grow it.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// At most `limit` entries; inserting one more evicts the one inserted first.
#[derive(Debug)]
pub struct Parked<K, V> {
    limit: usize,
    next: u64,
    /// Key → (insertion number, value).
    entries: HashMap<K, (u64, V)>,
    /// Insertion number → key, oldest first.
    order: BTreeMap<u64, K>,
}

impl<K: Clone + Eq + Hash, V> Parked<K, V> {
    /// An empty map holding at most `limit` entries (at least one).
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            next: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    /// Keep `value` under `key` (replacing an older one); returns what was evicted to make
    /// room, if anything.
    pub fn park(&mut self, key: K, value: V) -> Option<(K, V)> {
        let replaced = self.take(&key).is_some();
        let evicted = if !replaced && self.entries.len() >= self.limit {
            self.order
                .pop_first()
                .and_then(|(_, oldest)| self.entries.remove(&oldest).map(|(_, v)| (oldest, v)))
        } else {
            None
        };
        self.next += 1;
        self.order.insert(self.next, key.clone());
        self.entries.insert(key, (self.next, value));
        evicted
    }

    /// The value under `key`, left in place.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(_, value)| value)
    }

    /// Take the value under `key`.
    pub fn take(&mut self, key: &K) -> Option<V> {
        let (number, value) = self.entries.remove(key)?;
        self.order.remove(&number);
        Some(value)
    }

    /// How many are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_entry_is_evicted_first() {
        let mut parked = Parked::new(3);
        for n in 0..3 {
            assert_eq!(parked.park(format!("task-{n}"), n), None);
        }
        // The oldest goes, whatever the hash order of the keys.
        assert_eq!(parked.park("task-3".into(), 3), Some(("task-0".into(), 0)));
        assert_eq!(parked.park("task-4".into(), 4), Some(("task-1".into(), 1)));
        // Taking one makes room without evicting.
        assert_eq!(parked.take(&"task-3".to_string()), Some(3));
        assert_eq!(parked.park("task-5".into(), 5), None);
        assert_eq!(parked.park("task-6".into(), 6), Some(("task-2".into(), 2)));
        assert_eq!(parked.len(), 3);
        // Parking a key again renews it: it is the newest now.
        assert_eq!(parked.park("task-4".into(), 40), None);
        assert_eq!(parked.park("task-7".into(), 7), Some(("task-5".into(), 5)));
        assert_eq!(parked.take(&"task-4".to_string()), Some(40));
    }

    #[test]
    fn a_thousand_entries_evict_in_insertion_order() {
        let mut parked = Parked::new(1024);
        for n in 0..1024u32 {
            parked.park(n, n);
        }
        for n in 0..1000u32 {
            assert_eq!(parked.park(10_000 + n, n), Some((n, n)));
        }
        assert!(!parked.is_empty());
    }
}
