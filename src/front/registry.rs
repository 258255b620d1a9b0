//! Who is connected to the MCP front and what is in flight, pure: harness sessions with
//! their scope and capabilities, forwarded requests, progress tokens and resource
//! subscriptions, and the rule that picks which harness answers a server's request.

// Logging, sampling and roots are deprecated by SEP-2577 but still forwarded faithfully.
#![allow(deprecated)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rmcp::model::{LoggingLevel, ProgressToken, RequestId};

/// A harness session's id (one per stdio front or HTTP MCP session).
pub type HarnessId = u64;

/// Which servers a harness session sees.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every ready server (`/mcp`, stdio).
    All,
    /// One server (`/mcp/<server>`), by customization id.
    Server(String),
}

impl Scope {
    /// Whether server `id` is visible in this scope.
    pub fn includes(&self, id: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Server(own) => own == id,
        }
    }
}

/// What a harness declared it can do for servers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Abilities {
    /// `sampling`.
    pub sampling: bool,
    /// `roots`.
    pub roots: bool,
    /// `elicitation`.
    pub elicitation: bool,
    /// The MCP Apps extension: it renders views and hides app-only tools itself.
    pub apps: bool,
}

/// A capability a server request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `sampling/createMessage`.
    Sampling,
    /// `roots/list`.
    Roots,
    /// `elicitation/create`.
    Elicitation,
}

impl Abilities {
    fn has(&self, need: Need) -> bool {
        match need {
            Need::Sampling => self.sampling,
            Need::Roots => self.roots,
            Need::Elicitation => self.elicitation,
        }
    }
}

/// One harness session.
#[derive(Debug, Clone, PartialEq)]
pub struct Harness {
    /// What it sees.
    pub scope: Scope,
    /// What it can do.
    pub abilities: Abilities,
    /// The level it asked for with `logging/setLevel`, if any.
    pub log_level: Option<LoggingLevel>,
    /// When it last sent a request (a logical clock).
    pub last_active: u64,
}

/// A request forwarded to a server on a harness's behalf.
#[derive(Debug, Clone, PartialEq)]
pub struct Forwarded {
    /// Who asked.
    pub harness: HarnessId,
    /// Its request id (server requests it causes are tied to it over HTTP).
    pub request: RequestId,
    /// When it started (a logical clock).
    pub started: u64,
}

/// The bookkeeping.
#[derive(Debug, Default)]
pub struct Registry {
    clock: u64,
    harnesses: BTreeMap<HarnessId, Harness>,
    /// (server, upstream request id) → the harness request it serves.
    forwarded: HashMap<(String, RequestId), Forwarded>,
    /// (server, upstream progress token) → (harness, the harness's token).
    progress: HashMap<(String, ProgressToken), (HarnessId, ProgressToken)>,
    /// (server, the server's URI) → subscribed harnesses.
    subscriptions: BTreeMap<(String, String), BTreeSet<HarnessId>>,
}

impl Registry {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Register (or update) a harness.
    pub fn join(&mut self, id: HarnessId, scope: Scope, abilities: Abilities) {
        let now = self.tick();
        let entry = self.harnesses.entry(id).or_insert(Harness {
            scope: scope.clone(),
            abilities,
            log_level: None,
            last_active: now,
        });
        entry.scope = scope;
        entry.abilities = abilities;
    }

    /// Forget a harness. Returns the `(server, uri)` subscriptions nobody holds any more.
    pub fn leave(&mut self, id: HarnessId) -> Vec<(String, String)> {
        self.harnesses.remove(&id);
        self.forwarded.retain(|_, f| f.harness != id);
        self.progress.retain(|_, (h, _)| *h != id);
        let mut orphaned = Vec::new();
        self.subscriptions.retain(|key, holders| {
            if holders.remove(&id) && holders.is_empty() {
                orphaned.push(key.clone());
                return false;
            }
            !holders.is_empty()
        });
        orphaned
    }

    /// A harness's record.
    pub fn harness(&self, id: HarnessId) -> Option<&Harness> {
        self.harnesses.get(&id)
    }

    /// Every harness whose scope includes server `server`.
    pub fn harnesses_of(&self, server: &str) -> Vec<HarnessId> {
        self.harnesses
            .iter()
            .filter(|(_, h)| h.scope.includes(server))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether some harness declared `need`.
    pub fn any_can(&self, need: Need) -> bool {
        self.harnesses.values().any(|h| h.abilities.has(need))
    }

    /// Every harness.
    pub fn all(&self) -> Vec<HarnessId> {
        self.harnesses.keys().copied().collect()
    }

    /// A harness sent a request.
    pub fn touch(&mut self, id: HarnessId) {
        let now = self.tick();
        if let Some(h) = self.harnesses.get_mut(&id) {
            h.last_active = now;
        }
    }

    /// A request went to server `server` as `upstream` for harness request `request`;
    /// `progress` maps the upstream progress token to the harness's, if it asked for
    /// progress.
    pub fn forwarded(
        &mut self,
        server: &str,
        upstream: RequestId,
        harness: HarnessId,
        request: RequestId,
        progress: Option<(ProgressToken, ProgressToken)>,
    ) {
        let started = self.tick();
        self.forwarded.insert(
            (server.to_string(), upstream),
            Forwarded {
                harness,
                request,
                started,
            },
        );
        if let Some((upstream, own)) = progress {
            self.progress
                .insert((server.to_string(), upstream), (harness, own));
        }
    }

    /// The forwarded request is over.
    pub fn finished(&mut self, server: &str, upstream: &RequestId, progress: &ProgressToken) {
        self.forwarded
            .remove(&(server.to_string(), upstream.clone()));
        self.progress
            .remove(&(server.to_string(), progress.clone()));
    }

    /// Where server `server`'s progress notification with `token` goes.
    pub fn progress_target(
        &self,
        server: &str,
        token: &ProgressToken,
    ) -> Option<(HarnessId, ProgressToken)> {
        self.progress
            .get(&(server.to_string(), token.clone()))
            .cloned()
    }

    /// Which harness answers a request from server `server` that needs `need`: the one
    /// whose request it was sent for (`origin`, known over streamable HTTP); else, while
    /// requests are in flight at that server, the harness with the latest of them (the
    /// server is working for one of them); else (a request of the server's own, e.g.
    /// `roots/list` after start-up) the most recently active harness that sees the server.
    /// Only harnesses that declared `need` qualify. Returns the harness and the request of
    /// its that the server is working on, if known.
    pub fn route(
        &self,
        server: &str,
        origin: Option<&RequestId>,
        need: Need,
    ) -> Option<(HarnessId, Option<RequestId>)> {
        let able = |id: HarnessId| {
            self.harnesses
                .get(&id)
                .is_some_and(|h| h.abilities.has(need) && h.scope.includes(server))
        };
        if let Some(origin) = origin {
            if let Some(f) = self.forwarded.get(&(server.to_string(), origin.clone())) {
                return able(f.harness).then(|| (f.harness, Some(f.request.clone())));
            }
        }
        let in_flight: Vec<&Forwarded> = self
            .forwarded
            .iter()
            .filter(|((s, _), _)| s == server)
            .map(|(_, f)| f)
            .collect();
        if !in_flight.is_empty() {
            return in_flight
                .into_iter()
                .filter(|f| able(f.harness))
                .max_by_key(|f| f.started)
                .map(|f| (f.harness, Some(f.request.clone())));
        }
        self.harnesses
            .iter()
            .filter(|(id, _)| able(**id))
            .max_by_key(|(_, h)| h.last_active)
            .map(|(id, _)| (*id, None))
    }

    /// Record a harness's log level.
    pub fn set_log_level(&mut self, id: HarnessId, level: LoggingLevel) {
        if let Some(h) = self.harnesses.get_mut(&id) {
            h.log_level = Some(level);
        }
    }

    /// The most verbose level any harness that sees server `server` asked for: what the
    /// server itself should be set to. `None` when nobody asked.
    pub fn log_level_for(&self, server: &str) -> Option<LoggingLevel> {
        self.harnesses
            .values()
            .filter(|h| h.scope.includes(server))
            .filter_map(|h| h.log_level)
            .min_by_key(|level| severity(*level))
    }

    /// Harnesses that should get a log message of `level` from server `server`.
    pub fn log_audience(&self, server: &str, level: LoggingLevel) -> Vec<HarnessId> {
        self.harnesses
            .iter()
            .filter(|(_, h)| h.scope.includes(server))
            .filter(|(_, h)| {
                h.log_level
                    .is_none_or(|min| severity(level) >= severity(min))
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Harness `id` subscribes to server `server`'s `uri`. Returns true when it is the first
    /// subscriber (the server must be asked).
    pub fn subscribe(&mut self, id: HarnessId, server: &str, uri: &str) -> bool {
        let holders = self
            .subscriptions
            .entry((server.to_string(), uri.to_string()))
            .or_default();
        let first = holders.is_empty();
        holders.insert(id);
        first
    }

    /// Harness `id` unsubscribes. Returns true when nobody else holds it (the server must
    /// be told).
    pub fn unsubscribe(&mut self, id: HarnessId, server: &str, uri: &str) -> bool {
        let key = (server.to_string(), uri.to_string());
        let Some(holders) = self.subscriptions.get_mut(&key) else {
            return false;
        };
        let was = holders.remove(&id);
        if holders.is_empty() {
            self.subscriptions.remove(&key);
            return was;
        }
        false
    }

    /// Who subscribed to server `server`'s `uri`.
    pub fn subscribers(&self, server: &str, uri: &str) -> Vec<HarnessId> {
        self.subscriptions
            .get(&(server.to_string(), uri.to_string()))
            .map(|h| h.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Every URI of server `server` somebody subscribed to (re-applied when it restarts).
    pub fn subscribed_uris(&self, server: &str) -> Vec<String> {
        self.subscriptions
            .keys()
            .filter(|(s, _)| s == server)
            .map(|(_, uri)| uri.clone())
            .collect()
    }
}

/// A log level's rank (debug lowest).
pub fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn able(sampling: bool) -> Abilities {
        Abilities {
            sampling,
            ..Abilities::default()
        }
    }

    fn rid(n: i64) -> RequestId {
        RequestId::Number(n)
    }

    fn token(n: i64) -> ProgressToken {
        ProgressToken(rid(n))
    }

    #[test]
    fn a_server_request_goes_to_the_harness_whose_call_caused_it() {
        let mut r = Registry::default();
        r.join(1, Scope::All, able(true));
        r.join(2, Scope::All, able(true));
        r.forwarded("s", rid(10), 1, rid(100), None);
        r.forwarded("s", rid(11), 2, rid(200), None);
        // Over HTTP the origin is known.
        assert_eq!(
            r.route("s", Some(&rid(10)), Need::Sampling),
            Some((1, Some(rid(100))))
        );
        // Otherwise the latest call in flight at that server.
        assert_eq!(
            r.route("s", None, Need::Sampling),
            Some((2, Some(rid(200))))
        );
        r.finished("s", &rid(11), &token(0));
        assert_eq!(
            r.route("s", None, Need::Sampling),
            Some((1, Some(rid(100))))
        );
        // Nothing in flight: the most recently active able harness.
        r.finished("s", &rid(10), &token(0));
        r.touch(1);
        assert_eq!(r.route("s", None, Need::Sampling), Some((1, None)));
    }

    #[test]
    fn only_able_harnesses_in_scope_are_asked() {
        let mut r = Registry::default();
        r.join(1, Scope::All, able(false));
        r.join(2, Scope::Server("other".into()), able(true));
        r.join(3, Scope::All, able(true));
        r.forwarded("s", rid(1), 1, rid(5), None);
        // The caller cannot sample: nobody else answers for it.
        assert_eq!(r.route("s", Some(&rid(1)), Need::Sampling), None);
        assert_eq!(r.route("s", None, Need::Sampling), None);
        assert_eq!(r.route("other", None, Need::Sampling), Some((3, None)));
        r.touch(2);
        assert_eq!(r.route("other", None, Need::Sampling), Some((2, None)));
        assert_eq!(r.route("other", None, Need::Roots), None);
    }

    #[test]
    fn progress_tokens_map_back_and_are_dropped_with_the_call() {
        let mut r = Registry::default();
        r.join(1, Scope::All, able(false));
        r.forwarded("s", rid(3), 1, rid(9), Some((token(3), token(77))));
        assert_eq!(r.progress_target("s", &token(3)), Some((1, token(77))));
        assert_eq!(r.progress_target("t", &token(3)), None);
        r.finished("s", &rid(3), &token(3));
        assert_eq!(r.progress_target("s", &token(3)), None);
    }

    #[test]
    fn log_levels_take_the_most_verbose_request_and_filter_per_harness() {
        let mut r = Registry::default();
        r.join(1, Scope::All, able(false));
        r.join(2, Scope::All, able(false));
        r.join(3, Scope::Server("x".into()), able(false));
        assert_eq!(r.log_level_for("s"), None);
        r.set_log_level(1, LoggingLevel::Error);
        r.set_log_level(2, LoggingLevel::Info);
        r.set_log_level(3, LoggingLevel::Debug);
        assert_eq!(r.log_level_for("s"), Some(LoggingLevel::Info));
        assert_eq!(r.log_level_for("x"), Some(LoggingLevel::Debug));
        assert_eq!(r.log_audience("s", LoggingLevel::Warning), vec![2]);
        assert_eq!(r.log_audience("s", LoggingLevel::Error), vec![1, 2]);
    }

    #[test]
    fn subscriptions_are_shared_and_released_by_the_last_holder() {
        let mut r = Registry::default();
        r.join(1, Scope::All, able(false));
        r.join(2, Scope::All, able(false));
        assert!(r.subscribe(1, "s", "u"));
        assert!(!r.subscribe(2, "s", "u"));
        assert_eq!(r.subscribers("s", "u"), vec![1, 2]);
        assert!(!r.unsubscribe(1, "s", "u"));
        assert_eq!(r.leave(2), vec![("s".to_string(), "u".to_string())]);
        assert!(r.subscribed_uris("s").is_empty());
    }
}
