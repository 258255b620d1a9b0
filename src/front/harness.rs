//! A harness session as its handlers hold it: its state (kept by the hub too) and the hub.
//! When the last handle goes (the transport closed, no request of its left), the hub hears
//! that the harness is gone.

use std::ops::Deref;
use std::sync::Arc;

use super::harness_state::HarnessState;
use super::hub::Hub;
use super::registry::Scope;

/// One harness session, for the code that serves it.
pub struct Harness {
    state: Arc<HarnessState>,
    /// What every session shares.
    pub hub: Arc<Hub>,
}

impl Harness {
    /// A new session over `hub`, seeing `scope`.
    pub fn new(hub: Arc<Hub>, scope: Scope, stands_for: bool) -> Arc<Self> {
        let state = HarnessState::new(hub.next_harness(), scope, stands_for);
        Arc::new(Self { state, hub })
    }

    /// Its state, as the hub keeps it.
    pub fn state(&self) -> &Arc<HarnessState> {
        &self.state
    }
}

impl Deref for Harness {
    type Target = HarnessState;

    fn deref(&self) -> &HarnessState {
        &self.state
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.hub.harness_gone(&self.state);
    }
}
