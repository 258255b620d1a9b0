//! The MCP HTTP front's 2025-11-25 sessions, bounded per client and in total: the longest idle
//! one is forgotten before an `initialize` is refused, and any after [`EXPIRE_AFTER`] idle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::fairness::Client;
use super::harness::Harness;
use super::hub::Hub;
use super::registry::Scope;

/// A session with no stream open and nothing in flight for this long is forgotten
/// (requests naming it get 404); it stops counting as a harness that can answer server
/// requests as soon as its GET stream closes.
pub const EXPIRE_AFTER: Duration = Duration::from_secs(300);
/// How often idle sessions are looked at.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// One HTTP session.
pub struct Session {
    /// Its harness.
    pub harness: Arc<Harness>,
    /// Its POSTs answered as event streams, resumable.
    pub streams: super::replay::Streams,
    /// Who opened it.
    pub client: Client,
}

/// Why no session was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `max_sessions` are open and none is idle.
    Full(usize),
    /// The client holds `max_sessions_per_client` and none of them is idle.
    ClientFull(usize),
    /// The system gave no randomness for an id.
    NoId,
}

impl Refused {
    /// What the harness is told.
    pub fn describe(self) -> String {
        match self {
            Refused::Full(limit) => format!("too many MCP sessions (the limit is {limit}) and none is idle; end one with DELETE or retry later"),
            Refused::ClientFull(limit) => format!("this client already holds {limit} MCP sessions ([mcp] max_sessions_per_client) and none is idle; end one with DELETE"),
            Refused::NoId => "the proxy cannot make a session id: the system has no randomness".into(),
        }
    }
}

/// The open sessions.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    hub: Arc<Hub>,
    /// Sessions at once.
    max: usize,
}

impl Sessions {
    /// No session yet; at most `max` at once.
    pub fn new(hub: Arc<Hub>, max: usize) -> Self {
        Self {
            map: Mutex::default(),
            hub,
            max,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Session `id`, if open.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.map().get(id).cloned()
    }

    /// Forget session `id` (its GET stream closed).
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let removed = self.map().remove(id);
        if let Some(session) = &removed {
            session.harness.set_general(None);
        }
        removed
    }

    /// Forget every session.
    pub fn clear(&self) {
        self.map().clear();
    }

    /// Whether `session` has no stream open and nothing in flight.
    fn idle(&self, session: &Session) -> bool {
        let harness = &session.harness;
        !harness.has_general() && (self.hub.tables().registry.in_flight).count(harness.id) == 0
    }

    /// A new session for `client` on `scope`. Past the client's limit its own longest idle
    /// session is forgotten, past the total the longest idle one of the client holding the
    /// most; with none idle, refused.
    pub fn open(&self, scope: Scope, client: Client) -> Result<(String, Arc<Session>), Refused> {
        let per_client = self.hub.settings.fairness.max_sessions_per_client;
        let open: Vec<(String, Arc<Session>)> = (self.map().iter())
            .map(|(id, s)| (id.clone(), s.clone()))
            .collect();
        let mut held: HashMap<&Client, usize> = HashMap::new();
        for (_, session) in &open {
            *held.entry(&session.client).or_default() += 1;
        }
        let own = held.get(&client).copied().unwrap_or_default();
        let idle = || open.iter().filter(|(_, s)| self.idle(s));
        let victim = if own >= per_client {
            let mine = idle().filter(|(_, s)| s.client == client);
            let longest = mine.max_by_key(|(_, s)| s.harness.idle_for());
            Some(longest.ok_or(Refused::ClientFull(per_client))?)
        } else if open.len() >= self.max {
            let by = |s: &Session| (held.get(&s.client).copied(), s.harness.idle_for());
            let longest = idle().max_by_key(|(_, s)| by(s));
            Some(longest.ok_or(Refused::Full(self.max))?)
        } else {
            None
        };
        if let Some((id, evicted)) = victim {
            tracing::info!(
                client = evicted.client.describe(),
                for_client = client.describe(),
                idle_ms = evicted.harness.idle_for().as_millis() as u64,
                "an idle MCP session was forgotten to make room for another ([mcp] max_sessions, max_sessions_per_client)"
            );
            self.remove(id);
        }
        // 128 random bits: one harness's id says nothing of another's.
        let id = crate::unguessable::id().ok_or(Refused::NoId)?;
        let session = Arc::new(Session {
            harness: Harness::new(self.hub.clone(), scope, false),
            streams: Default::default(),
            client,
        });
        let mut map = self.map();
        if map.len() >= self.max {
            return Err(Refused::Full(self.max));
        }
        map.insert(id.clone(), session.clone());
        Ok((id, session))
    }
}

/// Forget sessions that stayed idle too long.
pub async fn sweep(sessions: Weak<Sessions>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SWEEP_EVERY) => {}
            _ = shutdown.cancelled() => return,
        }
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        let open: Vec<(String, Arc<Session>)> = (sessions.map().iter())
            .map(|(id, s)| (id.clone(), s.clone()))
            .collect();
        let mut expired = 0usize;
        for (id, session) in open {
            if !sessions.idle(&session) {
                session.harness.seen();
            } else if session.harness.idle_for() > EXPIRE_AFTER {
                sessions.map().remove(&id);
                expired += 1;
            }
        }
        if expired > 0 {
            tokio::task::spawn_blocking(crate::heap::give_back);
        }
    }
}
