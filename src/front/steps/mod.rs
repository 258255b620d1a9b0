//! The behaviours of the front's raw path, one [`Step`](crate::front::exchange::Step) each,
//! chosen per request by the code that routes it: holding a call for approval, shaping answers for the aggregated
//! endpoint, asking the next server, retrying once a token with more scope came, following
//! tasks, undoing a refused subscription, and each harness's log level.

pub mod approval;
pub mod fallback;
pub mod logs;
pub mod review;
pub mod scope;
pub mod shape;
pub mod subscription;
pub mod tasks;

use crate::front::exchange::Steps;

/// The steps every forwarded request has (the harness's log level), with room for more.
pub fn base() -> Steps {
    Steps::with_capacity(4).with(logs::LogLevel)
}
