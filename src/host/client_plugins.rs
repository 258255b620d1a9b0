//! Plugins AHP clients publish (`activeClients[].customizations` of every session), handed
//! to the catalog as one set whenever it changes; the catalog reads them and says what to show.

use std::sync::Arc;

use ahp_types::actions::StateAction;
use tokio::sync::watch;

use super::{Core, Host};
use crate::spec::PublishedPlugin;

/// Every plugin AHP clients publish now, in session and client order.
pub type Published = Arc<Vec<PublishedPlugin>>;

/// The host's side of client plugins: whether they are taken at all, and the latest set.
pub struct ClientPluginFeed {
    enabled: bool,
    set: watch::Sender<Published>,
}

impl ClientPluginFeed {
    /// A feed that stays empty unless `enabled` (`[clients] plugins`).
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            set: watch::channel(Arc::new(Vec::new())).0,
        }
    }
}

impl Host {
    /// The plugins AHP clients publish now, and every later change of them (always empty
    /// with `[clients] plugins = false`).
    pub fn client_plugins(&self) -> watch::Receiver<Published> {
        self.core().client_plugins.set.subscribe()
    }
}

impl Core {
    /// After a committed action: when it changed who is active where, publish the set again.
    pub(super) fn follow_client_plugins(&mut self, action: &StateAction) {
        if matches!(
            action,
            StateAction::SessionActiveClientSet(_) | StateAction::SessionActiveClientRemoved(_)
        ) {
            self.refresh_client_plugins();
        }
    }

    /// Collect every session's published plugins; hand them on if they changed.
    pub(super) fn refresh_client_plugins(&mut self) {
        if !self.client_plugins.enabled {
            return;
        }
        let store = &self.store;
        let set: Vec<PublishedPlugin> = store
            .session_uris()
            .filter_map(|uri| Some((uri, store.session(uri)?)))
            .flat_map(|(uri, session)| {
                session.active_clients.iter().flat_map(move |client| {
                    client
                        .customizations
                        .iter()
                        .flatten()
                        .map(move |plugin| PublishedPlugin {
                            session: uri.to_string(),
                            client: client.client_id.clone(),
                            plugin: plugin.clone(),
                        })
                })
            })
            .collect();
        self.client_plugins.set.send_if_modified(|now| {
            if **now == set {
                return false;
            }
            *now = Arc::new(set);
            true
        });
    }
}
