//! Notifications from servers to one harness (logs, progress, resource updates) under a
//! budget: a harness that stops reading holds at most [`BUDGET_KIB`]; the rest are dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How much (roughly, in KiB) may be on its way to one harness at once.
pub const BUDGET_KIB: u32 = 16 * 1024;

/// One harness's budget for notifications in flight.
#[derive(Debug)]
pub struct Relay {
    budget: Arc<Semaphore>,
    dropped: AtomicU64,
}

impl Default for Relay {
    fn default() -> Self {
        Self {
            budget: Arc::new(Semaphore::new(BUDGET_KIB as usize)),
            dropped: AtomicU64::new(0),
        }
    }
}

impl Relay {
    /// Room for a notification of about `kib` KiB, held until the permit is dropped (when it
    /// has been written); `None` when the harness is too far behind (the notification is
    /// then dropped, and the first drop is logged).
    pub fn admit(&self, kib: u32) -> Option<OwnedSemaphorePermit> {
        let cost = kib.clamp(1, BUDGET_KIB);
        match self.budget.clone().try_acquire_many_owned(cost) {
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
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// About how many KiB `value` takes as JSON (at least 1), without serializing it.
pub fn approx_kib(value: &Value) -> u32 {
    fn bytes(value: &Value) -> usize {
        match value {
            Value::Null | Value::Bool(_) | Value::Number(_) => 8,
            Value::String(s) => s.len() + 2,
            Value::Array(items) => items.iter().map(bytes).sum::<usize>() + items.len() + 2,
            Value::Object(map) => {
                map.iter()
                    .map(|(k, v)| k.len() + 4 + bytes(v))
                    .sum::<usize>()
                    + 2
            }
        }
    }
    u32::try_from(bytes(value) / 1024 + 1).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harness_that_does_not_read_gets_no_more_than_the_budget() {
        let relay = Relay::default();
        let held: Vec<_> = (0..16).map_while(|_| relay.admit(1024)).collect();
        assert_eq!(held.len(), 16);
        assert!(relay.admit(1).is_none());
        assert_eq!(relay.dropped(), 1);
        drop(held);
        // A message as large as the whole budget still passes when nothing else waits.
        assert!(relay.admit(u32::MAX).is_some());
    }

    #[test]
    fn sizes_are_estimated_in_kib() {
        assert_eq!(approx_kib(&serde_json::json!({"a": 1})), 1);
        let big = serde_json::json!({"data": "x".repeat(3 * 1024 * 1024)});
        assert_eq!(approx_kib(&big), 3 * 1024 + 1);
    }
}
