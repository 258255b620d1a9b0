//! The roles around a session: where one request's outcome goes ([`Reply`]), who takes
//! what the server sends on its own ([`Unsolicited`]), and what ties a server's request to
//! a request in flight ([`Cause`]), and what a modern server's session does differently
//! ([`Modernity`]).

use super::{Options, Session, Unanswered};
use crate::mcp::message::Message;
use crate::upstream::envelope::Envelope;

/// Where the outcome of one request goes.
pub trait Reply: Send + 'static {
    /// A notification about this request (its progress, or anything the server sent on the
    /// request's own stream), with the caller's progress token put back.
    fn related(&mut self, message: Message);
    /// The response, with the caller's id put back.
    fn respond(self: Box<Self>, message: Message);
    /// No response will come.
    fn fail(self: Box<Self>, failure: Unanswered);
}

/// What the session hands to its owner: what the server sends that no request of the
/// proxy's is waiting for. Called in arrival order, by the reading task: must not wait.
pub trait Unsolicited: Send + Sync + 'static {
    /// A notification from the server. `origin` is the tag of the request it is related to,
    /// when that is known.
    fn notify(&self, message: Message, origin: Option<u64>);
    /// A request from the server (never `ping`, answered here). Answer it with
    /// [`Session::answer`]. `cause` is what ties it to a request in flight.
    fn request(&self, session: &Session, message: Message, cause: Cause);
}

/// What ties a server's request to a request of the proxy's in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The request (by its tag) whose own stream carried it: it is about that one.
    Request(u64),
    /// Nothing on the wire says: the tags of every tagged request in flight, any of which
    /// may have caused it (none: it is the server's own). A progress token in the server's
    /// request is no link: it is the server's own token, in the server's own numbering.
    InFlight(Vec<u64>),
}

/// What a session with a modern (2026-07-28) server does to what it sends.
pub trait Modernity: Send + Sync + 'static {
    /// `request` (for `envelope`, else the default) as it goes to the server, with the
    /// reply it goes with; `None` when it was answered without the server.
    fn outgoing(
        &self,
        session: &Session,
        request: Message,
        reply: Box<dyn Reply>,
        options: Options,
        envelope: Option<&Envelope>,
    ) -> Option<(Message, Box<dyn Reply>)>;
    /// Whether a notification goes on to the server.
    fn forwards(&self, notification: &str) -> bool;
    /// The server's `server/discover` result, as written.
    fn discovered(&self) -> &str;
}
