//! An in-memory [`Link`] for tests: it records every text a session sends up, so the test can
//! answer as the server would (the session's own tests and the front's use it).

use std::sync::{Arc, Mutex};

use super::{Link, Unanswered};
use crate::mcp::message::Message;

/// A link that records what was sent.
#[derive(Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<String>>>);

impl Link for Recorder {
    fn send(&self, text: String, _request: Option<u64>) -> Result<(), Unanswered> {
        self.0.lock().unwrap().push(text);
        Ok(())
    }
    fn close(&self) {}
}

impl Recorder {
    /// Everything sent so far, in order.
    pub(crate) fn sent(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The id the server knows the last request sent by.
    pub(crate) fn last_id(&self) -> String {
        let last = self.sent().last().cloned().expect("something was sent");
        Message::parse(last).unwrap().id().unwrap().to_string()
    }
}
