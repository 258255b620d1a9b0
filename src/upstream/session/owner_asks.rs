//! The proxy's own requests to a session's owner (an MRTR input request, asked of the
//! harness as if the server had sent it), and their answers, caught before the server.

use tokio::sync::oneshot;

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
}
