//! A `resources/subscribe` the registry counted before the server was asked: undone when the
//! server refuses it or does not answer, so the harness is not held as a subscriber.

use crate::front::exchange::{Context, Course, Flow, Step};
use crate::mcp::message::{Kind, Message};
use crate::upstream::session::Unanswered;

/// Undoes the harness's subscription to `uri` of `server` unless the server accepts it.
pub struct UndoSubscription {
    /// The server's customization id.
    pub server: String,
    /// The server's own URI.
    pub uri: String,
}

impl UndoSubscription {
    fn undo(&self, x: &Context) {
        x.hub()
            .tables()
            .registry
            .unsubscribe(x.harness, &self.server, &self.uri);
    }
}

impl Step for UndoSubscription {
    fn answer(&mut self, x: &mut Context, message: Message) -> Flow {
        if message.kind() == Kind::Error {
            self.undo(x);
        }
        Flow::Next(message)
    }

    fn failed(&mut self, x: &mut Context, _why: &Unanswered) -> Option<Course> {
        self.undo(x);
        None
    }
}
