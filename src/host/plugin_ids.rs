//! Which ids the plugins a client publishes may take in a session: only ids of their own,
//! since every action that targets a customization names it by id. Pure.
//!
//! Taken are the session's own URI and its chats' URIs, every customization it shows and
//! every child of one (a host plugin's skills and servers, a manifest's servers), and the
//! plugins other active clients publish there; a client republishing its own plugin keeps
//! its id.

use std::collections::{HashMap, HashSet};
use std::fmt;

use ahp_types::state::{
    ChatSummary, ChildCustomization, ClientPluginCustomization, Customization, CustomizationType,
    SessionActiveClient,
};

/// A session, as far as the ids it uses go.
pub struct Session<'a> {
    /// Its URI.
    pub uri: &'a str,
    /// Its chats.
    pub chats: &'a [ChatSummary],
    /// The customizations it shows.
    pub shown: &'a [Customization],
}

/// What already uses an id in a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// The session's own URI.
    Session,
    /// One of its chats' URIs.
    Chat,
    /// A customization of the host's (or a child of one).
    Host,
    /// A plugin (or a child of one) this client publishes.
    Client(String),
}

/// Why a client's plugins cannot be shown in a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginRefusal {
    /// Clients publish plugins only; this one has another type (its wire name).
    NotAPlugin {
        /// Its id.
        id: String,
        /// Its `type`, as JSON.
        kind: String,
    },
    /// A plugin without an id.
    NoId,
    /// The same id twice in one publication.
    Twice(String),
    /// An id the session already uses.
    Taken {
        /// The id.
        id: String,
        /// What uses it.
        holder: Holder,
    },
}

impl fmt::Display for PluginRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAPlugin { id, kind } => write!(
                f,
                "customization {id:?} has type {kind}: clients publish only plugins"
            ),
            Self::NoId => write!(f, "a published plugin needs a non-empty id"),
            Self::Twice(id) => write!(
                f,
                "plugin id {id:?} appears twice in activeClient.customizations"
            ),
            Self::Taken { id, holder } => {
                let holder = match holder {
                    Holder::Session => "is this session's URI".to_string(),
                    Holder::Chat => "is the URI of a chat of this session".to_string(),
                    Holder::Host => "is already used in this session by the host".to_string(),
                    Holder::Client(client) => {
                        format!("is already used in this session by client {client:?}")
                    }
                };
                write!(
                    f,
                    "plugin id {id:?} {holder}; customization ids are session-unique"
                )
            }
        }
    }
}

/// Whether the plugins client `client_id` publishes can be shown in `session`, whose other
/// active clients are `others`.
pub fn client_plugins<'a>(
    session: &Session<'_>,
    others: impl Iterator<Item = &'a SessionActiveClient>,
    client_id: &str,
    plugins: &[ClientPluginCustomization],
) -> Result<(), PluginRefusal> {
    if plugins.is_empty() {
        return Ok(());
    }
    let mut taken: HashMap<&str, Holder> = HashMap::new();
    taken.insert(session.uri, Holder::Session);
    for chat in session.chats {
        taken.insert(&chat.resource, Holder::Chat);
    }
    for entry in session.shown {
        let owner = match entry {
            Customization::Plugin(p) => p.client_id.as_deref(),
            Customization::Directory(d) => d.client_id.as_deref(),
            Customization::McpServer(_) | Customization::Unknown(_) => None,
        };
        if owner == Some(client_id) {
            continue;
        }
        let holder = owner.map_or(Holder::Host, |o| Holder::Client(o.to_string()));
        for id in ids(entry) {
            taken.insert(id, holder.clone());
        }
    }
    for other in others {
        for plugin in other.customizations.iter().flatten() {
            taken.insert(&plugin.id, Holder::Client(other.client_id.clone()));
        }
    }
    let mut mine = HashSet::new();
    for plugin in plugins {
        if plugin.r#type != CustomizationType::Plugin {
            return Err(PluginRefusal::NotAPlugin {
                id: plugin.id.clone(),
                kind: serde_json::to_string(&plugin.r#type).unwrap_or_default(),
            });
        }
        if plugin.id.is_empty() {
            return Err(PluginRefusal::NoId);
        }
        if !mine.insert(plugin.id.as_str()) {
            return Err(PluginRefusal::Twice(plugin.id.clone()));
        }
        if let Some(holder) = taken.get(plugin.id.as_str()) {
            return Err(PluginRefusal::Taken {
                id: plugin.id.clone(),
                holder: holder.clone(),
            });
        }
    }
    Ok(())
}

/// The id of a top-level customization and of each of its children.
fn ids(entry: &Customization) -> impl Iterator<Item = &str> {
    let (id, children) = match entry {
        Customization::Plugin(p) => (Some(p.id.as_str()), p.children.as_deref()),
        Customization::Directory(d) => (Some(d.id.as_str()), d.children.as_deref()),
        Customization::McpServer(m) => (Some(m.id.as_str()), None),
        Customization::Unknown(_) => (None, None),
    };
    id.into_iter()
        .chain(children.unwrap_or_default().iter().filter_map(|c| match c {
            ChildCustomization::McpServer(m) => Some(m.id.as_str()),
            ChildCustomization::Agent(c) => Some(c.id.as_str()),
            ChildCustomization::Skill(c) => Some(c.id.as_str()),
            ChildCustomization::Prompt(c) => Some(c.id.as_str()),
            ChildCustomization::Rule(c) => Some(c.id.as_str()),
            ChildCustomization::Hook(c) => Some(c.id.as_str()),
            ChildCustomization::Unknown(_) => None,
        }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown() -> Vec<Customization> {
        serde_json::from_value(json!([
            {"type": "plugin", "id": "p1", "uri": "file:///p", "name": "p", "children": [
                {"type": "skill", "id": "s1", "uri": "file:///p/s", "name": "s"},
                {"type": "mcpServer", "id": "m1", "uri": "file:///p/.mcp.json", "name": "m",
                 "state": {"kind": "starting"}}]},
            {"type": "mcpServer", "id": "top", "uri": "file:///proxy.toml", "name": "t",
             "state": {"kind": "starting"}},
            {"type": "plugin", "id": "shown", "uri": "file:///s", "name": "s", "clientId": "me",
             "children": [{"type": "skill", "id": "shown-skill", "uri": "file:///s/k", "name": "k"}]}
        ]))
        .unwrap()
    }

    fn plugins(ids: &[&str]) -> Vec<ClientPluginCustomization> {
        ids.iter()
            .map(|id| {
                serde_json::from_value(
                    json!({"type": "plugin", "id": id, "uri": "file:///x", "name": "x"}),
                )
                .unwrap()
            })
            .collect()
    }

    fn judge(
        client: &str,
        others: &[SessionActiveClient],
        ids: &[&str],
    ) -> Result<(), PluginRefusal> {
        let shown = shown();
        let chats: Vec<ChatSummary> = serde_json::from_value(json!([{"resource": "ahp-chat:/c",
            "title": "c", "status": 1, "modifiedAt": "2026-01-01T00:00:00.000Z"}]))
        .unwrap();
        let session = Session {
            uri: "ahp-proxy:/s",
            chats: &chats,
            shown: &shown,
        };
        client_plugins(&session, others.iter(), client, &plugins(ids))
    }

    fn taken(id: &str, holder: Holder) -> Result<(), PluginRefusal> {
        Err(PluginRefusal::Taken {
            id: id.into(),
            holder,
        })
    }

    #[test]
    fn ids_the_session_uses_are_taken_and_ones_own_are_not() {
        assert_eq!(judge("me", &[], &["mine", "also-mine"]), Ok(()));
        for id in ["p1", "s1", "m1", "top"] {
            assert_eq!(judge("me", &[], &[id]), taken(id, Holder::Host));
        }
        assert_eq!(
            judge("me", &[], &["ahp-proxy:/s"]),
            taken("ahp-proxy:/s", Holder::Session)
        );
        assert_eq!(
            judge("me", &[], &["ahp-chat:/c"]),
            taken("ahp-chat:/c", Holder::Chat)
        );
        // Its own plugin (and what is in it) is its own; not another client's.
        assert_eq!(judge("me", &[], &["shown", "shown-skill"]), Ok(()));
        assert_eq!(
            judge("you", &[], &["shown-skill"]),
            taken("shown-skill", Holder::Client("me".into()))
        );
        let yours: SessionActiveClient = serde_json::from_value(json!({"clientId": "you",
            "tools": [], "customizations": [{"type": "plugin", "id": "yours",
            "uri": "file:///y", "name": "y"}]}))
        .unwrap();
        let refused = judge("me", &[yours], &["yours"]).unwrap_err();
        assert_eq!(
            refused,
            PluginRefusal::Taken {
                id: "yours".into(),
                holder: Holder::Client("you".into())
            }
        );
        assert_eq!(
            refused.to_string(),
            "plugin id \"yours\" is already used in this session by client \"you\"; customization ids are session-unique"
        );
        assert_eq!(
            judge("me", &[], &["a", "a"]),
            Err(PluginRefusal::Twice("a".into()))
        );
        assert_eq!(judge("me", &[], &[""]), Err(PluginRefusal::NoId));
    }
}
