//! One server's MCP session as the supervisor makes it: the handshake as the proxy's
//! current identity, the first reading of its offer, and the handling of what it sends on
//! its own (a list change re-reads that list; everything else goes to the front).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use super::connections::Connections;
use crate::mcp::message::Message;
use crate::upstream::era::Discovered;
use crate::upstream::handshake::{self, HandshakeError, Identity, Initialized};
use crate::upstream::listen;
use crate::upstream::modern::Modern;
use crate::upstream::offer::{self, ListError, Lists, Offer};
use crate::upstream::session::{self, Cause, Session, Unanswered};

/// A live, initialized session and what it offered at start.
pub struct Connection {
    /// The session (end it to hang up).
    pub session: Session,
    /// What it answered to `initialize`.
    pub initialized: Arc<Initialized>,
    /// What it offers, kept fresh by its [`Traffic`].
    pub offer: Arc<RwLock<Arc<Offer>>>,
}

impl Connection {
    /// `ready`, as the server is now: its tools, what it serves, its icons.
    pub fn ready(&self) -> super::Status {
        super::Status::Ready {
            tools: self.tool_count(),
            served: super::Served::of(&self.initialized.capabilities),
            icons: self
                .initialized
                .server_info
                .as_ref()
                .and_then(|info| info.get("icons"))
                .cloned(),
        }
    }

    /// How many tools it offers now.
    /// The MCP revision the server is spoken to in: 2026-07-28 for a modern server, else
    /// the version its `initialize` answer named.
    pub fn version(&self) -> &str {
        match self.session.era() {
            crate::upstream::era::Era::Modern => crate::upstream::era::MODERN,
            crate::upstream::era::Era::Legacy => self.initialized.protocol_version.as_str(),
        }
    }

    pub fn tool_count(&self) -> usize {
        self.offer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .tools
            .len()
    }
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The server wants credentials: the `WWW-Authenticate` challenge, if one came.
    #[error("the server asked for authorization")]
    AuthRequired {
        /// The challenge header, if the server sent one.
        challenge: Option<String>,
        /// HTTP 403 rather than 401.
        insufficient_scope: bool,
    },
    /// Anything else, as a message safe to show (no launch spec inside).
    #[error("{0}")]
    Failed(String),
    /// A stdio server exited on (or never answered) the `server/discover` probe: a legacy
    /// server that wants `initialize` first, from a fresh process.
    #[error("the server did not answer server/discover")]
    ProbeUnanswered,
}

impl From<Unanswered> for ConnectError {
    fn from(failure: Unanswered) -> Self {
        match failure {
            Unanswered::Unauthorized {
                challenge,
                insufficient_scope,
                ..
            } => ConnectError::AuthRequired {
                challenge,
                insufficient_scope,
            },
            Unanswered::Stopped => ConnectError::Failed(
                "the server closed the connection during the MCP handshake".into(),
            ),
            // Said as it is: "connection refused at 127.0.0.1:9000" names what to fix.
            Unanswered::Undelivered(why) => ConnectError::Failed(why),
            other => ConnectError::Failed(format!("MCP handshake failed: the server {other}")),
        }
    }
}

/// How a server was opened before the rest of its start: it answered the era probe as a
/// modern server, or it speaks a legacy revision (its `initialize` already answered, when
/// it was sent beside the probe).
pub enum Opening {
    /// Its `server/discover` answer: speak 2026-07-28.
    Modern(Discovered),
    /// Legacy: the handshake done, or still to do (`None`).
    Legacy(Option<Initialized>),
}

/// How long a start's requests may wait (`start`), and later re-reads of its lists.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    pub start: Duration,
    pub refresh: Duration,
}

/// Whose session it is: server `id`, declared `name`, reporting to `connections`.
pub struct Owner<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub connections: &'a Arc<Connections>,
}

/// Initialize `session` as `identity` (a legacy server, unless `opening` did already) or,
/// when it answered the probe (a modern one), speak 2026-07-28 to it; then read what it
/// offers. From then on its own traffic is handled for its `owner`.
pub async fn establish(
    session: Session,
    identity: &Identity,
    opening: Opening,
    owner: Owner<'_>,
    patience: Patience,
) -> Result<Connection, ConnectError> {
    let Owner {
        id,
        name,
        connections,
    } = owner;
    let offer: Arc<RwLock<Arc<Offer>>> = Arc::default();
    let refresher = Arc::new(Refresher {
        id: id.to_string(),
        name: name.to_string(),
        connections: Arc::downgrade(connections),
        offer: offer.clone(),
        session: session.downgrade(),
        capabilities: RwLock::new(serde_json::Value::Null),
        pending: AtomicU8::new(0),
        serial: tokio::sync::Mutex::new(()),
        timeout: patience.refresh,
    });
    let traffic = Arc::new(Traffic {
        id: id.to_string(),
        connections: Arc::downgrade(connections),
        refresher: refresher.clone(),
    });
    let as_unsolicited: Arc<dyn session::Unsolicited> = traffic.clone();
    session.set_unsolicited(Arc::downgrade(&as_unsolicited));
    let initialized = match opening {
        Opening::Modern(discovered) => {
            let initialized = Initialized::discovered(&discovered, name);
            let modern = Modern::new(name, identity.envelope(), discovered);
            listen::keep(
                &session,
                name,
                modern.envelope.clone(),
                modern.subscriptions(),
                modern.acknowledged(),
            );
            session.go_modern(Arc::new(modern));
            initialized
        }
        Opening::Legacy(Some(initialized)) => initialized,
        Opening::Legacy(None) => {
            match handshake::initialize(&session, identity, patience.start).await {
                Ok(initialized) => initialized,
                Err(HandshakeError::Failed(failure)) => return Err(failure.into()),
                Err(refused) => return Err(ConnectError::Failed(refused.to_string())),
            }
        }
    };
    *refresher
        .capabilities
        .write()
        .unwrap_or_else(|p| p.into_inner()) = initialized.capabilities.clone();
    let read = offer::read(
        &session,
        &initialized.capabilities,
        Lists::ALL,
        patience.start,
    )
    .await
    .map_err(|error| match error {
        ListError::Failed(failure) => ConnectError::from(failure),
        refused => {
            ConnectError::Failed(format!("listing what the server offers failed: {refused}"))
        }
    })?;
    *offer.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(read);
    // The session's downstream is held weakly: the traffic handler lives as long as the
    // session does.
    session_keeps(&session, traffic);
    Ok(Connection {
        session,
        initialized: Arc::new(initialized),
        offer,
    })
}

/// Keep `traffic` alive until `session` ends.
fn session_keeps(session: &Session, traffic: Arc<Traffic>) {
    let session = session.clone();
    let held = traffic;
    tokio::spawn(async move {
        session.ended().await;
        drop(held);
    });
}

/// What a server sends on its own: list changes refresh its offer (and go to the front as
/// well, for the harnesses of its own endpoint); everything goes to the front.
struct Traffic {
    id: String,
    connections: Weak<Connections>,
    refresher: Arc<Refresher>,
}

/// Re-reads a server's lists after it announced changes, one refresh at a time.
struct Refresher {
    id: String,
    name: String,
    connections: Weak<Connections>,
    offer: Arc<RwLock<Arc<Offer>>>,
    session: session::WeakSession,
    capabilities: RwLock<serde_json::Value>,
    /// Lists announced as changed and not yet re-read (bits of [`list_bits`]): a burst of
    /// `list_changed` costs one re-read, not one each.
    pending: AtomicU8,
    /// Serialises refreshes so the last one stored is the freshest.
    serial: tokio::sync::Mutex<()>,
    timeout: Duration,
}

impl session::Unsolicited for Traffic {
    fn notify(&self, message: Message, origin: Option<u64>) {
        let lists = match message.method() {
            Some("notifications/tools/list_changed") => Some(Lists {
                tools: true,
                ..Lists::default()
            }),
            Some("notifications/prompts/list_changed") => Some(Lists {
                prompts: true,
                ..Lists::default()
            }),
            Some("notifications/resources/list_changed") => Some(Lists {
                resources: true,
                ..Lists::default()
            }),
            _ => None,
        };
        if let Some(lists) = lists {
            Refresher::start(&self.refresher, lists);
        }
        if let Some(downstream) = self.connections.upgrade().and_then(|c| c.downstream()) {
            downstream.notify(&self.id, message, origin);
        }
    }

    fn request(&self, session: &Session, message: Message, cause: Cause) {
        match self.connections.upgrade().and_then(|c| c.downstream()) {
            Some(downstream) => downstream.request(&self.id, session, message, cause),
            None => {
                if let Some(id) = message.id() {
                    let _ = session.answer(
                        id,
                        r#""error":{"code":-32601,"message":"no MCP client is connected to answer this request"}"#,
                    );
                }
            }
        }
    }
}

impl Refresher {
    /// Re-read `lists` in a task of its own (the session's reader must not wait) and
    /// announce the change. A change that arrives while an earlier one waits for its turn
    /// is left to that one: it reads later.
    fn start(this: &Arc<Self>, lists: Lists) {
        tracing::debug!(server = %this.name, ?lists, "upstream lists changed");
        let bits = list_bits(lists);
        if this.pending.fetch_or(bits, Ordering::AcqRel) & bits == bits {
            return;
        }
        let this = this.clone();
        tokio::spawn(async move { this.run().await });
    }

    async fn run(&self) {
        let _serial = self.serial.lock().await;
        let lists = lists_of(self.pending.swap(0, Ordering::AcqRel));
        if lists == Lists::default() {
            return;
        }
        let Some(session) = self.session.upgrade() else {
            return;
        };
        let capabilities = self
            .capabilities
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let fresh = match offer::read(&session, &capabilities, lists, self.timeout).await {
            Ok(fresh) => fresh,
            Err(error) => {
                tracing::debug!(server = %self.name, %error, "re-listing after a change failed");
                return;
            }
        };
        {
            let mut offer = self.offer.write().unwrap_or_else(|p| p.into_inner());
            let mut next = Offer::clone(&offer);
            if lists.tools {
                next.tools = fresh.tools;
            }
            if lists.prompts {
                next.prompts = fresh.prompts;
            }
            if lists.resources {
                next.resources = fresh.resources;
                next.templates = fresh.templates;
            }
            *offer = Arc::new(next);
        }
        if let Some(connections) = self.connections.upgrade() {
            connections.changed(&self.id, lists);
        }
    }
}

fn list_bits(lists: Lists) -> u8 {
    u8::from(lists.tools) | u8::from(lists.prompts) << 1 | u8::from(lists.resources) << 2
}

fn lists_of(bits: u8) -> Lists {
    Lists {
        tools: bits & 1 != 0,
        prompts: bits & 2 != 0,
        resources: bits & 4 != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_bits_round_trip() {
        for bits in 0..8 {
            assert_eq!(list_bits(lists_of(bits)), bits);
        }
        assert_eq!(lists_of(list_bits(Lists::ALL)), Lists::ALL);
    }
}
