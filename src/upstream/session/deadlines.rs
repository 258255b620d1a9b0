//! A session's deadline keeper: the task that fails requests whose time ran out, sleeping
//! until the earliest deadline (woken early when a nearer one comes).

use std::sync::{Arc, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{cancelled, Inner, Session, Unanswered};

/// Fails requests whose deadline passed; sleeps until the earliest one. Holds the session
/// only while it looks, so a dropped session ends it.
pub(super) async fn keep(inner: Weak<Inner>, earlier: Arc<Notify>, ended: CancellationToken) {
    loop {
        let next = {
            let Some(inner) = inner.upgrade() else { return };
            Session { inner }.expire(Instant::now())
        };
        tokio::select! {
            _ = earlier.notified() => {}
            _ = ended.cancelled() => return,
            _ = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

impl Session {
    /// Fail every request whose deadline is before `now`; the next deadline, if any.
    pub(super) fn expire(&self, now: Instant) -> Option<Instant> {
        let mut expired = Vec::new();
        let next = {
            let mut state = self.state();
            while let Some(&(at, id)) = state.deadlines.first() {
                if at > now {
                    break;
                }
                state.deadlines.pop_first();
                expired.push(id);
            }
            let next = state.deadlines.first().map(|(at, _)| *at);
            state.alarm = next;
            next
        };
        for id in expired {
            if let Some(pending) = self.take(id) {
                let _ = self.notify(cancelled(id, "timed out"));
                pending.reply.fail(Unanswered::Timeout(pending.timeout));
            }
        }
        next
    }
}
