//! What AHP clients asked of the servers (enablement decisions, start and stop, tokens): the
//! latest of each kind per id, numbered, one value the host writes and the supervisor follows.
//!
//! The host writes it under its lock as it commits what clients see, through a `watch`: a
//! writer never waits and nothing is dropped, and however far behind the supervisor is, it
//! catches up on the latest value. Pure.

use std::collections::HashMap;

use super::Bearer;

/// One thing asked of the servers.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// A client's enablement decision for a server or a container: its effective value,
    /// `None` when the decision was cleared.
    Toggle {
        /// The customization id.
        id: String,
        /// The effective value, or `None` when cleared.
        enabled: Option<bool>,
    },
    /// `session/mcpServerStartRequested` (`run: true`) or `…StopRequested` (`false`).
    Run {
        /// The server's customization id.
        id: String,
        /// Start (true) or stop (false).
        run: bool,
    },
    /// `authenticate`: use this token for server `id` (`None` revokes it) and reconnect.
    Authenticate {
        /// The server's customization id.
        id: String,
        /// The token, or `None` to drop it.
        bearer: Option<Bearer>,
    },
}

/// What a request replaces: an earlier one of the same kind for the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Toggle,
    Run,
    Authenticate,
}

impl Request {
    fn key(&self) -> (Kind, &str) {
        match self {
            Self::Toggle { id, .. } => (Kind::Toggle, id),
            Self::Run { id, .. } => (Kind::Run, id),
            Self::Authenticate { id, .. } => (Kind::Authenticate, id),
        }
    }
}

/// Every request's latest value by kind and id, each numbered in the order it was asked.
/// Which requests were asked after another is all the supervisor needs: of several of one
/// kind for one id, the last decides (a toggle replaces a toggle, a stop a start).
#[derive(Debug, Default)]
pub struct Requests {
    latest: HashMap<(Kind, String), (u64, Request)>,
    asked: u64,
}

impl Requests {
    /// Record `request`, replacing an earlier one of its kind for its id.
    pub fn ask(&mut self, request: Request) {
        self.asked += 1;
        let (kind, id) = request.key();
        let key = (kind, id.to_string());
        self.latest.insert(key, (self.asked, request));
    }

    /// The number of the latest request (0 before the first).
    pub fn asked(&self) -> u64 {
        self.asked
    }

    /// Every request still standing that was asked after number `seen`, oldest first.
    pub fn since(&self, seen: u64) -> Vec<Request> {
        let mut later: Vec<&(u64, Request)> = self
            .latest
            .values()
            .filter(|(number, _)| *number > seen)
            .collect();
        later.sort_by_key(|(number, _)| *number);
        later.into_iter().map(|(_, r)| r.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toggle(id: &str, enabled: bool) -> Request {
        Request::Toggle {
            id: id.into(),
            enabled: Some(enabled),
        }
    }

    fn run(id: &str, run: bool) -> Request {
        Request::Run { id: id.into(), run }
    }

    #[test]
    fn the_latest_of_each_kind_per_id_stands_in_the_order_asked() {
        let mut requests = Requests::default();
        assert_eq!(requests.asked(), 0);
        assert!(requests.since(0).is_empty());
        requests.ask(toggle("a", false));
        requests.ask(run("a", true));
        requests.ask(toggle("b", true));
        requests.ask(toggle("a", true));
        assert_eq!(requests.asked(), 4);
        assert_eq!(
            requests.since(0),
            [run("a", true), toggle("b", true), toggle("a", true)]
        );
        // Only what came after what was seen.
        assert_eq!(requests.since(3), [toggle("a", true)]);
        assert!(requests.since(4).is_empty());
        requests.ask(run("a", false));
        assert_eq!(requests.since(4), [run("a", false)]);
    }
}
