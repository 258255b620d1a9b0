//! Who is connected to the MCP front and what is in flight, pure: harness sessions with
//! their scope and capabilities, their requests being answered (`in_flight`), resource
//! subscriptions, log levels, tasks, and the rule that picks which harness answers a
//! server's request.

use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use super::in_flight::HarnessId;
use super::in_flight::Table;
use super::parked::Parked;

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
    /// `elicitation` in form mode (`elicitation: {}` or `{form: …}`).
    pub elicit_form: bool,
    /// `elicitation.url`.
    pub elicit_url: bool,
    /// The MCP Apps extension: it renders views and hides app-only tools itself.
    pub apps: bool,
}

impl Abilities {
    /// From the `capabilities` of a harness's `initialize`.
    pub fn of(capabilities: &serde_json::Value) -> Self {
        let has = |name: &str| capabilities.get(name).is_some_and(|c| !c.is_null());
        let elicitation = capabilities.get("elicitation").filter(|c| !c.is_null());
        let form = elicitation.is_some_and(|e| {
            e.get("form").is_some() || e.as_object().is_some_and(|o| !o.contains_key("url"))
        });
        Self {
            sampling: has("sampling"),
            roots: has("roots"),
            elicit_form: form,
            elicit_url: elicitation.is_some_and(|e| e.get("url").is_some()),
            apps: capabilities
                .get("extensions")
                .and_then(|e| e.get(crate::upstream::handshake::MCP_APPS_EXTENSION))
                .is_some(),
        }
    }

    fn has(&self, need: Need) -> bool {
        match need {
            Need::Sampling => self.sampling,
            Need::Roots => self.roots,
            Need::ElicitForm => self.elicit_form,
            Need::ElicitUrl => self.elicit_url,
            Need::Any => true,
        }
    }
}

/// What a server request needs of the harness that answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `sampling/createMessage`.
    Sampling,
    /// `roots/list`.
    Roots,
    /// `elicitation/create` in form mode.
    ElicitForm,
    /// `elicitation/create` in URL mode.
    ElicitUrl,
    /// A method the proxy does not know: any harness may answer (or refuse) it.
    Any,
}

impl Need {
    /// The need of request `method` with `mode` (`params.mode` of an elicitation).
    pub fn of(method: &str, mode: Option<&str>) -> Self {
        match method {
            "sampling/createMessage" => Need::Sampling,
            "roots/list" => Need::Roots,
            "elicitation/create" if mode == Some("url") => Need::ElicitUrl,
            "elicitation/create" => Need::ElicitForm,
            _ => Need::Any,
        }
    }

    /// The capability's name, for messages.
    pub fn capability(&self) -> &'static str {
        match self {
            Need::Sampling => "sampling",
            Need::Roots => "roots",
            Need::ElicitForm => "elicitation (form mode)",
            Need::ElicitUrl => "elicitation (URL mode)",
            Need::Any => "anything",
        }
    }
}

/// A log level, by rank (RFC 5424 names, debug lowest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Level(u8);

impl Level {
    const NAMES: [&'static str; 8] = crate::mcp::era::LOG_LEVELS;

    /// The level called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Level(i as u8))
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        Self::NAMES[usize::from(self.0)]
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
    pub log_level: Option<Level>,
    /// When it last sent a request (a logical clock).
    pub last_active: u64,
    /// Whether a request of the proxy's own can reach it now (stdio, or an open GET
    /// stream); one tied to its own call travels on that call's stream regardless.
    pub reachable: bool,
}

/// What ties a server's request to the harnesses' requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link<'a> {
    /// It is about this request (by tag): it came on that request's stream.
    Request(u64),
    /// It is about a task this harness created (its `related-task`).
    Task(HarnessId),
    /// Nothing says: these requests (tags) are in flight at its server.
    InFlight(&'a [u64]),
}

/// Why no harness is asked a server's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No harness that may be asked (or the one that caused it) declared what it needs.
    NotDeclared,
    /// This many harnesses have requests in flight at the server, and none is named.
    Ambiguous(usize),
    /// The request it is about is over.
    Over,
}

/// The bookkeeping.
#[derive(Debug, Default)]
pub struct Registry {
    clock: u64,
    harnesses: BTreeMap<HarnessId, Harness>,
    /// The harnesses' requests being answered.
    pub in_flight: Table,
    /// (server, the server's URI) → subscribed harnesses.
    subscriptions: BTreeMap<(String, String), BTreeSet<HarnessId>>,
    /// (server, task id) → the harness that created the task.
    tasks: HashMap<(String, String), HarnessId>,
    /// Tasks created for modern requests: task id → server.
    modern_tasks: ModernTasks,
}

/// How many tasks created for modern requests are remembered (the oldest forgotten first).
const MAX_MODERN_TASKS: usize = 4096;

/// Tasks created for modern requests (2026-07-28, the Tasks extension). A modern request
/// carries no session, so nothing tells one sessionless harness from another: the task is
/// handed out under a handle the proxy mints (128 random bits), and the handle alone reaches
/// it; the server's own id, which may be guessable, is never one a harness may use.
#[derive(Debug)]
struct ModernTasks {
    /// Handle → (server, the server's task id).
    by_handle: Parked<String, (String, String)>,
    /// (server, the server's task id) → handle.
    by_raw: HashMap<(String, String), String>,
}

impl Default for ModernTasks {
    fn default() -> Self {
        Self {
            by_handle: Parked::new(MAX_MODERN_TASKS),
            by_raw: HashMap::new(),
        }
    }
}

impl Registry {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Register (or update) a harness.
    pub fn join(&mut self, id: HarnessId, scope: Scope, abilities: Abilities, reachable: bool) {
        let now = self.tick();
        let entry = self.harnesses.entry(id).or_insert(Harness {
            scope: scope.clone(),
            abilities,
            log_level: None,
            last_active: now,
            reachable,
        });
        entry.scope = scope;
        entry.abilities = abilities;
        entry.reachable = reachable;
    }

    /// Whether harness `id` can be reached by requests of the proxy's own from now on.
    pub fn set_reachable(&mut self, id: HarnessId, reachable: bool) {
        if let Some(h) = self.harnesses.get_mut(&id) {
            h.reachable = reachable;
        }
    }

    /// Forget a harness. Returns the `(server, uri)` subscriptions nobody holds any more.
    pub fn leave(&mut self, id: HarnessId) -> Vec<(String, String)> {
        self.harnesses.remove(&id);
        self.in_flight.forget(id);
        self.tasks.retain(|_, h| *h != id);
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

    /// How many harnesses are connected.
    pub fn count(&self) -> usize {
        self.harnesses.len()
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

    /// Whether some harness that can be reached declared `need`.
    pub fn any_can(&self, need: Need) -> bool {
        self.harnesses
            .values()
            .any(|h| h.reachable && h.abilities.has(need))
    }

    /// A harness sent a request.
    pub fn touch(&mut self, id: HarnessId) {
        let now = self.tick();
        if let Some(h) = self.harnesses.get_mut(&id) {
            h.last_active = now;
        }
    }

    /// Which harness answers a request from server `server` that needs `need`, given what
    /// ties it to the harnesses' requests (`link`): the harness whose request (or task) it
    /// is about; else, among the requests in flight at that server, the one harness they
    /// are all of; else, when none is in flight (a request of the server's own, e.g.
    /// `roots/list` after start-up), the most recently active harness that sees the server
    /// and can be reached. Only a harness that declared `need` is asked, and the one a
    /// request is about never hands it to another. Returns the harness and the tag of its
    /// request the server is working on, if known.
    pub fn route(
        &self,
        server: &str,
        link: Link<'_>,
        need: Need,
    ) -> Result<(HarnessId, Option<u64>), Refusal> {
        let able = |id: HarnessId| {
            self.harnesses
                .get(&id)
                .is_some_and(|h| h.abilities.has(need) && h.scope.includes(server))
        };
        let only = |id: HarnessId, tag: Option<u64>| {
            if able(id) {
                Ok((id, tag))
            } else {
                Err(Refusal::NotDeclared)
            }
        };
        let in_flight: Vec<(u64, HarnessId)> = match link {
            Link::Request(tag) => {
                return match self.in_flight.get(tag) {
                    Some(entry) => only(entry.harness, Some(tag)),
                    None => Err(Refusal::Over),
                }
            }
            Link::Task(owner) => return only(owner, None),
            Link::InFlight(tags) => tags
                .iter()
                .filter_map(|tag| self.in_flight.get(*tag).map(|e| (*tag, e.harness)))
                .collect(),
        };
        let mut callers: Vec<HarnessId> = in_flight.iter().map(|(_, h)| *h).collect();
        callers.sort_unstable();
        callers.dedup();
        match callers.as_slice() {
            [] => self
                .harnesses
                .iter()
                .filter(|(id, h)| h.reachable && able(**id))
                .max_by_key(|(_, h)| h.last_active)
                .map(|(id, _)| (*id, None))
                .ok_or(Refusal::NotDeclared),
            [one] => {
                let latest = in_flight.iter().map(|(tag, _)| *tag).max();
                only(*one, latest)
            }
            several => Err(Refusal::Ambiguous(several.len())),
        }
    }

    /// Record a harness's log level.
    pub fn set_log_level(&mut self, id: HarnessId, level: Level) {
        if let Some(h) = self.harnesses.get_mut(&id) {
            h.log_level = Some(level);
        }
    }

    /// The log level harness `id` asked for, if any.
    pub fn log_level_of(&self, id: HarnessId) -> Option<Level> {
        self.harnesses.get(&id).and_then(|h| h.log_level)
    }

    /// The most verbose level any harness that sees server `server` asked for: what the
    /// server itself should be set to. `None` when nobody asked.
    pub fn log_level_for(&self, server: &str) -> Option<Level> {
        self.harnesses
            .values()
            .filter(|h| h.scope.includes(server))
            .filter_map(|h| h.log_level)
            .min()
    }

    /// Harnesses that should get a log message of `level` from server `server`.
    pub fn log_audience(&self, server: &str, level: Option<Level>) -> Vec<HarnessId> {
        self.harnesses
            .iter()
            .filter(|(_, h)| h.scope.includes(server))
            .filter(|(_, h)| match (h.log_level, level) {
                (Some(min), Some(level)) => level >= min,
                _ => true,
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

    /// How many subscriptions harness `id` holds.
    pub fn subscriptions_of(&self, id: HarnessId) -> usize {
        let held = |h: &&BTreeSet<HarnessId>| h.contains(&id);
        self.subscriptions.values().filter(held).count()
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

    /// Harness `id` created task `task` on server `server`.
    pub fn task_created(&mut self, server: &str, task: &str, id: HarnessId) {
        self.tasks
            .insert((server.to_string(), task.to_string()), id);
    }

    /// The harness that created task `task` on server `server`.
    pub fn task_owner(&self, server: &str, task: &str) -> Option<HarnessId> {
        self.tasks
            .get(&(server.to_string(), task.to_string()))
            .copied()
    }

    /// Server `server` created task `raw` for a modern request; it is handed out as `handle`.
    pub fn modern_task_created(&mut self, server: &str, raw: &str, handle: &str) {
        let tasks = &mut self.modern_tasks;
        let key = (server.to_string(), raw.to_string());
        if let Some(old) = tasks.by_raw.insert(key.clone(), handle.to_string()) {
            tasks.by_handle.take(&old);
        }
        if let Some((_, evicted)) = tasks.by_handle.park(handle.to_string(), key) {
            tasks.by_raw.remove(&evicted);
        }
    }

    /// The server and the server's id of the modern task handed out as `handle`.
    pub fn modern_task(&self, handle: &str) -> Option<(String, String)> {
        self.modern_tasks
            .by_handle
            .get(&handle.to_string())
            .cloned()
    }

    /// The handle task `raw` of server `server` was handed out under, when a modern
    /// request created it.
    pub fn modern_task_handle(&self, server: &str, raw: &str) -> Option<&str> {
        let key = (server.to_string(), raw.to_string());
        self.modern_tasks.by_raw.get(&key).map(String::as_str)
    }

    /// The server of task `task` created by harness `id`, if it made one.
    pub fn task_server(&self, id: HarnessId, task: &str) -> Option<String> {
        self.tasks
            .iter()
            .find(|((_, t), h)| t == task && **h == id)
            .map(|((server, _), _)| server.clone())
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

    fn call(r: &mut Registry, tag: u64, server: &str, harness: HarnessId) {
        r.in_flight.insert(
            tag,
            super::super::in_flight::Entry {
                server: server.into(),
                harness,
                request: tag.to_string().into(),
                stream: super::super::outbox::Stream::channel().0,
                cancelled: Default::default(),
            },
        );
    }

    #[test]
    fn a_server_request_goes_to_the_harness_whose_call_caused_it_or_to_nobody() {
        let mut r = Registry::default();
        r.join(1, Scope::All, able(true), true);
        r.join(2, Scope::All, able(true), true);
        call(&mut r, 10, "s", 1);
        call(&mut r, 11, "s", 2);
        call(&mut r, 12, "s", 1);
        // Its stream says whose it is.
        assert_eq!(
            r.route("s", Link::Request(10), Need::Sampling),
            Ok((1, Some(10)))
        );
        assert_eq!(r.route("s", Link::Task(2), Need::Sampling), Ok((2, None)));
        // Nothing says, and two harnesses have calls in flight: nobody is guessed at.
        assert_eq!(
            r.route("s", Link::InFlight(&[10, 11, 12]), Need::Sampling),
            Err(Refusal::Ambiguous(2))
        );
        // One harness's calls only: that harness, on its latest call's stream.
        r.in_flight.remove(11);
        assert_eq!(
            r.route("s", Link::InFlight(&[10, 12]), Need::Sampling),
            Ok((1, Some(12)))
        );
        // A request about a call that is over goes to nobody.
        assert_eq!(
            r.route("s", Link::Request(11), Need::Sampling),
            Err(Refusal::Over)
        );
        // Nothing in flight: the most recently active able harness.
        r.touch(1);
        assert_eq!(
            r.route("s", Link::InFlight(&[]), Need::Sampling),
            Ok((1, None))
        );
    }

    #[test]
    fn only_able_harnesses_in_scope_are_asked() {
        let mut r = Registry::default();
        r.join(1, Scope::All, able(false), true);
        r.join(2, Scope::Server("other".into()), able(true), true);
        r.join(3, Scope::All, able(true), true);
        call(&mut r, 1, "s", 1);
        let none = Link::InFlight(&[]);
        // The caller cannot sample: nobody else answers for it.
        assert_eq!(
            r.route("s", Link::Request(1), Need::Sampling),
            Err(Refusal::NotDeclared)
        );
        assert_eq!(
            r.route("s", Link::InFlight(&[1]), Need::Sampling),
            Err(Refusal::NotDeclared)
        );
        assert_eq!(r.route("other", none, Need::Sampling), Ok((3, None)));
        r.touch(2);
        assert_eq!(r.route("other", none, Need::Sampling), Ok((2, None)));
        assert_eq!(
            r.route("other", none, Need::Roots),
            Err(Refusal::NotDeclared)
        );
        assert_eq!(r.route("other", none, Need::Any), Ok((2, None)));
        // One that cannot be reached (no stream open) is not asked, nor counted.
        r.set_reachable(2, false);
        r.set_reachable(3, false);
        assert_eq!(
            r.route("other", none, Need::Sampling),
            Err(Refusal::NotDeclared)
        );
        assert!(!r.any_can(Need::Sampling));
    }

    #[test]
    fn abilities_follow_the_declared_capabilities() {
        let caps = serde_json::json!({"elicitation": {"url": {}}, "roots": {},
            "extensions": {"io.modelcontextprotocol/ui": {}}});
        let a = Abilities::of(&caps);
        assert!(a.elicit_url && !a.elicit_form && a.roots && a.apps && !a.sampling);
        let plain = Abilities::of(&serde_json::json!({"elicitation": {}}));
        assert!(plain.elicit_form && !plain.elicit_url);
        assert_eq!(Need::of("elicitation/create", Some("url")), Need::ElicitUrl);
        assert_eq!(Need::of("x/unknown", None), Need::Any);
    }

    #[test]
    fn log_levels_take_the_most_verbose_request_and_filter_per_harness() {
        let level = |n| Level::parse(n).unwrap();
        let mut r = Registry::default();
        r.join(1, Scope::All, able(false), true);
        r.join(2, Scope::All, able(false), true);
        r.join(3, Scope::Server("x".into()), able(false), true);
        assert_eq!(r.log_level_for("s"), None);
        r.set_log_level(1, level("error"));
        r.set_log_level(2, level("info"));
        r.set_log_level(3, level("debug"));
        assert_eq!(r.log_level_for("s"), Some(level("info")));
        assert_eq!(r.log_level_for("x"), Some(level("debug")));
        assert_eq!(r.log_audience("s", Some(level("warning"))), vec![2]);
        assert_eq!(r.log_audience("s", Some(level("error"))), vec![1, 2]);
        assert_eq!(level("warning").name(), "warning");
        assert_eq!(Level::parse("loud"), None);
    }

    #[test]
    fn subscriptions_are_shared_and_released_by_the_last_holder() {
        let mut r = Registry::default();
        assert!(r.subscribe(1, "s", "u") && !r.subscribe(2, "s", "u"));
        assert_eq!((r.subscribe(1, "t", "v"), r.subscriptions_of(1)), (true, 2));
        assert_eq!(r.subscribers("s", "u"), vec![1, 2]);
        assert!(!r.unsubscribe(1, "s", "u"));
        assert_eq!(r.leave(2), vec![("s".to_string(), "u".to_string())]);
        assert!(r.subscribed_uris("s").is_empty());
    }

    #[test]
    fn modern_tasks_outlive_the_request_that_made_them() {
        let mut r = Registry::default();
        r.modern_task_created("a", "t-1", "h1");
        r.modern_task_created("b", "t-1", "h2");
        assert_eq!(r.modern_task("h1"), Some(("a".into(), "t-1".into())));
        assert_eq!(r.modern_task("h2"), Some(("b".into(), "t-1".into())));
        assert_eq!(r.modern_task("t-1"), None, "the server's id is no handle");
        assert_eq!(r.modern_task_handle("a", "t-1"), Some("h1"));
        assert_eq!(r.task_server(9, "t-1"), None, "not a legacy harness's task");
        // The same task handed out again: the old handle no longer reaches it.
        r.modern_task_created("a", "t-1", "h3");
        assert_eq!(r.modern_task("h1"), None);
        assert_eq!(r.modern_task_handle("a", "t-1"), Some("h3"));
    }

    #[test]
    fn tasks_belong_to_their_creator() {
        let mut r = Registry::default();
        r.join(1, Scope::All, able(false), true);
        r.task_created("s", "t-1", 1);
        assert_eq!(r.task_owner("s", "t-1"), Some(1));
        assert_eq!(r.task_server(1, "t-1").as_deref(), Some("s"));
        assert_eq!(r.task_server(2, "t-1"), None);
        r.leave(1);
        assert_eq!(r.task_owner("s", "t-1"), None);
    }
}
