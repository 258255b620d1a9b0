//! Era probes in flight, one per launch spec: starts of the same spec at once (the same
//! server declared twice, or many alike) share the first one's verdict instead of each
//! sending its own `server/discover`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::watch;

use crate::upstream::era::Era;

/// The probes in flight, by launch-spec key.
#[derive(Default)]
pub struct Probes {
    flying: Mutex<HashMap<u64, Weak<watch::Sender<Option<Era>>>>>,
}

/// A start's part in finding its launch spec's era.
pub enum Part {
    /// It probes; those who follow hear its verdict ([`Lead::settle`]), or that it gave up
    /// (dropped unsettled: they probe for themselves).
    Lead(Lead),
    /// Another start of the same spec is probing: wait for its verdict.
    Follow(Follow),
}

/// The probing start's handle.
pub struct Lead {
    verdict: Arc<watch::Sender<Option<Era>>>,
}

/// A following start's handle.
pub struct Follow {
    verdict: watch::Receiver<Option<Era>>,
}

impl Probes {
    /// Lead the probe of `key`, or follow the one in flight.
    pub fn join(&self, key: u64) -> Part {
        let mut flying = self.lock();
        if let Some(lead) = flying.get(&key).and_then(Weak::upgrade) {
            return Part::Follow(Follow {
                verdict: lead.subscribe(),
            });
        }
        let verdict = Arc::new(watch::channel(None).0);
        flying.insert(key, Arc::downgrade(&verdict));
        // Probes that ended leave dead entries: gone once nothing holds them.
        flying.retain(|_, lead| lead.strong_count() > 0);
        Part::Lead(Lead { verdict })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Weak<watch::Sender<Option<Era>>>>> {
        self.flying.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Lead {
    /// The era this start found: those who follow go on with it.
    pub fn settle(&self, era: Era) {
        self.verdict.send_replace(Some(era));
    }
}

impl Follow {
    /// The leading start's verdict; `None` when it ended without one.
    pub async fn verdict(mut self) -> Option<Era> {
        match self.verdict.wait_for(Option::is_some).await {
            Ok(era) => *era,
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_start_leads_the_others_hear_its_verdict_or_that_it_gave_up() {
        let probes = Probes::default();
        let Part::Lead(lead) = probes.join(7) else {
            panic!("the first start leads")
        };
        let Part::Follow(follow) = probes.join(7) else {
            panic!("a second start of the same spec follows")
        };
        assert!(
            matches!(probes.join(8), Part::Lead(_)),
            "another spec leads"
        );
        lead.settle(Era::Legacy);
        assert_eq!(follow.verdict().await, Some(Era::Legacy));

        drop(lead);
        assert!(matches!(probes.join(7), Part::Lead(_)), "a new probe leads");

        let Part::Lead(lead) = probes.join(9) else {
            panic!("the first start leads")
        };
        let Part::Follow(follow) = probes.join(9) else {
            panic!("a second start of the same spec follows")
        };
        drop(lead);
        assert_eq!(follow.verdict().await, None, "a lead dropped unsettled");
    }
}
