//! Who is subscribed to what, and what each connection is shown (and whether it may decide
//! held calls): the host's bookkeeping of its connections, kept under its lock. Which connections get a committed action (as which
//! audience, on the channel by which name) is decided here, when it is committed; `delivery`
//! queues it afterwards.

use std::collections::{BTreeSet, HashMap, HashSet};

use tokio_util::sync::CancellationToken;

use super::audience::Audience;

/// Host-wide connection number.
pub type ConnId = u64;

/// Connections shown the same thing: one audience, and one name for the channel (the host's
/// own, or the other name they subscribed under).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// What they are shown.
    pub audience: Audience,
    /// The name they know the channel by.
    pub name: String,
    /// Who they are.
    pub ids: Vec<ConnId>,
}

/// The connections something goes to, grouped by what they are shown (each group's frame
/// is rendered once, however many connections share it).
pub type Targets = Vec<Group>;

struct Peer {
    /// Cancelled when the connection is kicked (its queue overflowed).
    kick: CancellationToken,
    subscriptions: HashSet<String>,
    /// The names it subscribed under where they are not the host's own (VS Code's other
    /// names of a session or chat): what it is sent on those channels is sent by that name.
    names: HashMap<String, String>,
    client_id: Option<String>,
    /// What it is shown (MCP Apps or not, its protocol version).
    audience: Audience,
    /// Whether it presented the approval key at the upgrade (`ahp::gate`).
    may_decide: bool,
}

/// The subscription table, and every live connection's client, audience and standing.
#[derive(Default)]
pub struct Fanout {
    peers: HashMap<ConnId, Peer>,
    channels: HashMap<String, BTreeSet<ConnId>>,
}

impl Fanout {
    /// Register a connection, its kick switch and whether it may decide held calls.
    pub fn insert(&mut self, id: ConnId, kick: CancellationToken, may_decide: bool) {
        self.peers.insert(
            id,
            Peer {
                kick,
                subscriptions: HashSet::new(),
                names: HashMap::new(),
                client_id: None,
                audience: Audience::default(),
                may_decide,
            },
        );
    }

    /// Whether connection `id` presented the approval key (a connection gone decides
    /// nothing).
    pub fn may_decide(&self, id: ConnId) -> bool {
        self.peers.get(&id).is_some_and(|p| p.may_decide)
    }

    /// Forget a connection and all its subscriptions.
    pub fn remove(&mut self, id: ConnId) {
        if let Some(peer) = self.peers.remove(&id) {
            for uri in peer.subscriptions {
                self.drop_subscriber(&uri, id);
            }
        }
    }

    /// Record which client a connection belongs to (after `initialize`/`reconnect`) and
    /// what it is shown.
    pub fn set_client(&mut self, id: ConnId, client_id: &str, audience: Audience) {
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.client_id = Some(client_id.to_string());
            peer.audience = audience;
        }
    }

    /// What connection `id` is shown.
    pub fn audience(&self, id: ConnId) -> Audience {
        self.peers.get(&id).map(|p| p.audience).unwrap_or_default()
    }

    /// Whether any live connection (one not kicked) belongs to `client_id`.
    pub fn has_client(&self, client_id: &str) -> bool {
        self.peers
            .values()
            .any(|p| p.client_id.as_deref() == Some(client_id) && !p.kick.is_cancelled())
    }

    /// Subscribe a connection to `uri` (idempotent: never doubles deliveries).
    pub fn subscribe(&mut self, id: ConnId, uri: &str) {
        self.subscribe_as(id, uri, uri);
    }

    /// Subscribe a connection to `uri`, which it knows as `name`: what it is sent on `uri`
    /// from now on goes by that name (the last name it subscribed under wins).
    pub fn subscribe_as(&mut self, id: ConnId, uri: &str, name: &str) {
        if let Some(peer) = self.peers.get_mut(&id) {
            if name == uri {
                peer.names.remove(uri);
            } else {
                peer.names.insert(uri.to_string(), name.to_string());
            }
            if peer.subscriptions.insert(uri.to_string()) {
                self.channels.entry(uri.to_string()).or_default().insert(id);
            }
        }
    }

    /// The name connection `id` knows channel `uri` by (`uri` itself unless it subscribed
    /// under another).
    pub fn name_of<'a>(&'a self, id: ConnId, uri: &'a str) -> &'a str {
        self.peers
            .get(&id)
            .and_then(|peer| peer.names.get(uri))
            .map_or(uri, String::as_str)
    }

    /// Unsubscribe a connection from `uri`; returns whether it was subscribed.
    pub fn unsubscribe(&mut self, id: ConnId, uri: &str) -> bool {
        let was = self.peers.get_mut(&id).is_some_and(|peer| {
            peer.names.remove(uri);
            peer.subscriptions.remove(uri)
        });
        if was {
            self.drop_subscriber(uri, id);
        }
        was
    }

    /// Drop every subscription to `uri` (its state is gone).
    pub fn forget_channel(&mut self, uri: &str) {
        for id in self.channels.remove(uri).unwrap_or_default() {
            if let Some(peer) = self.peers.get_mut(&id) {
                peer.subscriptions.remove(uri);
                peer.names.remove(uri);
            }
        }
    }

    fn drop_subscriber(&mut self, uri: &str, id: ConnId) {
        if let Some(set) = self.channels.get_mut(uri) {
            set.remove(&id);
            if set.is_empty() {
                self.channels.remove(uri);
            }
        }
    }

    /// Every subscriber of `uri`, grouped by audience and by the name it knows `uri` by
    /// (none kicked).
    pub fn subscribers(&self, uri: &str) -> Targets {
        let mut targets: Targets = Vec::new();
        for id in self.channels.get(uri).into_iter().flatten() {
            let Some(peer) = self.peers.get(id) else {
                continue;
            };
            if peer.kick.is_cancelled() {
                continue;
            }
            let name = peer.names.get(uri).map_or(uri, String::as_str);
            match targets
                .iter_mut()
                .find(|g| g.audience == peer.audience && g.name == name)
            {
                Some(group) => group.ids.push(*id),
                None => targets.push(Group {
                    audience: peer.audience,
                    name: name.to_string(),
                    ids: vec![*id],
                }),
            }
        }
        targets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(targets: &Targets) -> Vec<ConnId> {
        targets.iter().flat_map(|g| g.ids.clone()).collect()
    }

    #[test]
    fn subscribers_are_counted_once_grouped_by_audience_and_kicked_ones_left_out() {
        let mut fanout = Fanout::default();
        let kicks: Vec<CancellationToken> = (0..3).map(|_| CancellationToken::new()).collect();
        for (id, kick) in (1..).zip(&kicks) {
            fanout.insert(id, kick.clone(), false);
            fanout.subscribe(id, "x");
        }
        fanout.subscribe(1, "x");
        let apps = Audience {
            mcp_apps: true,
            ..Audience::default()
        };
        fanout.set_client(2, "c", apps);
        let targets = fanout.subscribers("x");
        assert_eq!(targets.len(), 2, "two audiences");
        assert_eq!(ids(&targets), [1, 3, 2]);
        assert!(fanout.has_client("c"));
        kicks[1].cancel();
        assert_eq!(ids(&fanout.subscribers("x")), [1, 3]);
        assert!(
            !fanout.has_client("c"),
            "a kicked connection speaks for nobody"
        );
        assert!(fanout.subscribers("y").is_empty());
    }

    #[test]
    fn forgetting_a_channel_unsubscribes_everyone() {
        let mut fanout = Fanout::default();
        fanout.insert(1, CancellationToken::new(), false);
        fanout.subscribe(1, "x");
        fanout.forget_channel("x");
        assert!(fanout.subscribers("x").is_empty());
        assert!(!fanout.unsubscribe(1, "x"));
        fanout.subscribe(1, "y");
        fanout.remove(1);
        assert!(fanout.subscribers("y").is_empty());
        assert!(fanout.channels.is_empty());
    }
}
