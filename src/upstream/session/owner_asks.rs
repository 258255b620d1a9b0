//! The proxy's own requests to a session's owner (an MRTR input request, asked of the
//! harness as if the server had sent it), their answers, caught before the server, and the
//! cancellation of a call that waits for them.

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{Cause, Session, NO_CLIENT};
use crate::mcp::message::{Kind, Message};

impl Session {
    /// Hand `request` (its id one the server never uses) to the session's owner as if the
    /// server had sent it about `cause`; its answer comes back here instead of going to the
    /// server.
    pub(crate) fn ask_owner(&self, request: Message, cause: Cause) -> oneshot::Receiver<Message> {
        let (tx, rx) = oneshot::channel();
        let Some(id) = request.id().map(str::to_string) else {
            return rx;
        };
        self.inner
            .local
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
        match self.unsolicited() {
            Some(unsolicited) => unsolicited.request(self, request, cause),
            None => {
                let _ = self.answer(&id, NO_CLIENT);
            }
        }
        rx
    }

    /// `text`, when it answers one of [`Session::ask_owner`]'s requests, to its asker.
    pub(super) fn answered_here(&self, text: String) -> Result<(), String> {
        let mut local = self.inner.local.lock().unwrap_or_else(|p| p.into_inner());
        if local.is_empty() {
            return Err(text);
        }
        let Ok(message) = Message::parse(text.clone()) else {
            return Err(text);
        };
        if !matches!(message.kind(), Kind::Result | Kind::Error) {
            return Err(text);
        }
        match message.id().and_then(|id| local.remove(id)) {
            Some(asker) => {
                let _ = asker.send(message);
                Ok(())
            }
            None => Err(text),
        }
    }

    /// The call tagged `tag` waits between rounds of input (no request of it in flight):
    /// [`Session::cancel_tagged`] cancels the token it gets, for as long as `Between` lives.
    pub(crate) fn between_rounds(&self, tag: u64) -> Between {
        let token = CancellationToken::new();
        let mut between = self.inner.between.lock().unwrap_or_else(|p| p.into_inner());
        between.insert(tag, token.clone());
        Between {
            session: self.downgrade(),
            tag,
            token,
        }
    }

    /// Cancel the calls of `tags` that wait between rounds.
    pub(super) fn stop_between(&self, tags: &[u64]) {
        let between = self.inner.between.lock().unwrap_or_else(|p| p.into_inner());
        for tag in tags {
            if let Some(token) = between.get(tag) {
                token.cancel();
            }
        }
    }
}

/// A call waiting between rounds of input; cancelled with its tag.
pub(crate) struct Between {
    session: super::WeakSession,
    tag: u64,
    /// Cancelled when the call is.
    pub token: CancellationToken,
}

impl Drop for Between {
    fn drop(&mut self) {
        if let Some(session) = self.session.upgrade() {
            // One call per tag, its rounds one after another.
            let mut between = (session.inner.between.lock()).unwrap_or_else(|p| p.into_inner());
            between.remove(&self.tag);
        }
    }
}
