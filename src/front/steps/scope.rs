//! A tool call an HTTP server refused for want of scope (403 `insufficient_scope`) waits
//! until the server is back with a better token (an AHP client's `authenticate`), its
//! mirrored call shown paused meanwhile, then is sent once more. It gives up after
//! `request_timeout_ms`, or when a client gives up on it; a harness that cancels ends it.

use std::sync::Arc;

use crate::front::answers::INVALID_REQUEST;
use crate::front::exchange::{Context, Course, Step};
use crate::front::hub::Hub;
use crate::mcp::message::Message;
use crate::mirror::Ticket;
use crate::upstream::session::Unanswered;

/// Sends the request once more after a better token came (once).
#[derive(Default)]
pub struct RetryOnScope {
    /// The request as it was last sent to its server (as a step before the sending left
    /// it: with the arguments an approval edited), until it is sent again.
    original: Option<Message>,
    /// Whether it was sent again already.
    retried: bool,
}

impl Step for RetryOnScope {
    fn sent(&mut self, message: &Message) {
        if !self.retried {
            self.original = Some(message.clone());
        }
    }

    fn failed(&mut self, x: &mut Context, why: &Unanswered) -> Option<Course> {
        if !needs_scope(why) {
            return None;
        }
        let original = self.original.take()?;
        self.retried = true;
        let waiting = retry(
            x.hub().clone(),
            x.server.to_string(),
            x.ticket.take(),
            original,
        );
        Some(Course::Wait(Box::pin(waiting)))
    }
}

/// Whether `why` is a refusal for want of scope.
pub fn needs_scope(why: &Unanswered) -> bool {
    matches!(
        why,
        Unanswered::Unauthorized {
            insufficient_scope: true,
            ..
        }
    )
}

/// Wait for the server to come back authorized, then send `original` to it again.
async fn retry(
    hub: Arc<Hub>,
    server: String,
    ticket: Option<Ticket>,
    original: Message,
) -> (Course, Option<Ticket>) {
    let back = wait_for_authorization(&hub, &server, ticket.as_ref()).await;
    let name = hub.connections.name_of(&server);
    // A give-up that got in just before the call resumed still wins.
    let released = ticket.as_ref().is_none_or(|t| t.release());
    let refused = |message: String| Course::Refuse {
        code: INVALID_REQUEST,
        message,
    };
    let declined = || {
        refused(format!(
        "MCP server {name} needs more authorization (insufficient scope); the user declined to provide it"
    ))
    };
    let course = match back {
        _ if !released => declined(),
        Authorization::GivenUp => declined(),
        Authorization::TimedOut => refused(format!(
            "MCP server {name} needs more authorization (insufficient scope) and none was provided within {} ms",
            hub.settings.request_timeout.as_millis()
        )),
        Authorization::Granted => {
            if let Some(ticket) = &ticket {
                ticket.auth_resolved();
            }
            tracing::info!(server = %name, "authorization granted; retrying the tool call");
            Course::Send {
                server,
                message: original,
            }
        }
    };
    (course, ticket)
}

enum Authorization {
    Granted,
    GivenUp,
    TimedOut,
}

async fn wait_for_authorization(hub: &Hub, server: &str, ticket: Option<&Ticket>) -> Authorization {
    let connections = &hub.connections;
    let mut changes = connections.subscribe();
    let wait = async {
        // First it goes down (its lifecycle task saw the same refusal) ...
        while connections.get(server).is_some() {
            changes.next().await?;
        }
        if let (Some(ticket), Some(status)) = (ticket, connections.auth_status(server)) {
            if let Some(auth) = crate::host::live::auth_requirement(&status) {
                ticket.hold();
                ticket.auth_required(auth);
            }
        }
        // ... then it comes back with the new token.
        while connections.get(server).is_none() {
            changes.next().await?;
        }
        Some(())
    };
    let given_up = async {
        match ticket {
            Some(ticket) => ticket.given_up().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        back = tokio::time::timeout(hub.settings.request_timeout, wait) => match back {
            Ok(Some(())) => Authorization::Granted,
            _ => Authorization::TimedOut,
        },
        _ = given_up => Authorization::GivenUp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refusal_for_scope_is_retried() {
        let refusal = |insufficient_scope| Unanswered::Unauthorized {
            status: 403,
            challenge: None,
            insufficient_scope,
        };
        assert!(needs_scope(&refusal(true)));
        assert!(!needs_scope(&refusal(false)));
        assert!(!needs_scope(&Unanswered::Stopped));
    }
}
