//! Servers as the host shows them: supervisor events and harness sampling laid over every
//! session, rescans committed with live facts kept, `mcp://` lookups.

use ahp_types::actions::StateAction;

use super::fanout::ConnId;
use super::{apps, live, Core, Host};
use crate::jsonrpc::{Frame, RpcError};
use crate::untrusted::Untrusted;

impl Host {
    /// A supervised server changed state: remember it and tell every session that shows it.
    pub fn server_event(&self, event: crate::supervisor::ServerEvent) {
        let mut core = self.core();
        core.token_trials.observe(&event.id, event.status.as_ref());
        let Some(status) = event.status else {
            core.live.forget_state(&event.id);
            core.refresh_protected_resources();
            return;
        };
        if let crate::supervisor::Status::Ready { served, icons, .. } = &status {
            core.live.set_ready(&event.id, *served, icons.as_ref());
        }
        let slow = matches!(status, crate::supervisor::Status::Starting { slow: true });
        core.live.set_slow(&event.id, slow);
        core.live.set_state(&event.id, live::server_state(&status));
        core.refresh_server(&event.id);
        core.refresh_protected_resources();
    }

    /// Whether a harness that answers sampling is connected: channels advertise `sampling`
    /// only then, so every `mcpApp` follows it.
    pub fn set_harness_sampling(&self, sampling: bool) {
        let mut core = self.core();
        if core.live.set_sampling(sampling) {
            core.refresh_apps();
        }
    }

    /// Commit a host-originated session action to every session (customization changes
    /// apply to all of them, with live server states and client toggles laid over them).
    /// Returns how many sessions took it.
    pub fn emit_to_sessions(&self, action: &StateAction) -> usize {
        let mut core = self.core();
        let uris: Vec<String> = core.store.session_uris().map(str::to_string).collect();
        uris.iter()
            .filter(|uri| core.commit_patched(uri, action))
            .count()
    }

    /// Commit a host-originated action to session `uri` alone (a client plugin's container,
    /// shown only where it was published), with live server states and toggles laid over it.
    /// A session that is gone by now takes nothing.
    pub fn emit_to_session(&self, uri: &str, action: &StateAction) {
        let mut core = self.core();
        if core.store.session(uri).is_some() {
            core.commit_patched(uri, action);
        }
    }

    /// The server behind `mcp://` channel `uri` and what its channel serves, for connection
    /// `conn`. Only connections that declared `mcpApps` see channels; a channel exists while
    /// its server is ready.
    pub fn resolve_channel(
        &self,
        conn: ConnId,
        uri: &str,
    ) -> Result<(String, apps::ChannelOffer), RpcError> {
        let core = self.core();
        let unknown = || {
            RpcError::invalid_params(format!(
                "{uri} is not an open mcp:// channel (the server is not ready, or the channel is unknown)"
            ))
        };
        if !core.fanout.audience(conn).mcp_apps {
            return Err(RpcError::invalid_params(format!(
                "{uri}: mcp:// channels are only served to clients that declared capabilities.mcpApps at initialize"
            )));
        }
        core.channel_server(uri).ok_or_else(unknown)
    }

    /// Server `id` changed its `list` (`tools`, `resources` or `prompts`): queue `frame_for(channel)` to
    /// the subscribers of each of its channels that advertise `listChanged` for it.
    pub fn announce_list_changed(&self, id: &str, list: &str, frame_for: impl Fn(&str) -> Frame) {
        let mut core = self.core();
        let core = &mut *core;
        let channels: Vec<String> = core
            .store
            .session_uris()
            .filter_map(|session| core.store.session(session))
            .flat_map(|s| s.customizations.iter().flatten())
            .filter_map(|c| live::server_of(c, id))
            .filter(|m| apps::ChannelOffer::of(m).is_some_and(|o| apps::announces(&o, list)))
            .filter_map(|m| m.channel.clone())
            .collect();
        for channel in channels {
            let frame = frame_for(&channel);
            core.broadcast_each(&channel, move |_, _| Some(frame.clone()));
        }
    }
}

impl Core {
    /// Commit host action `action` to session `uri` with the live facts laid over it;
    /// whether it was applied.
    fn commit_patched(&mut self, uri: &str, action: &StateAction) -> bool {
        let mut action = action.clone();
        self.live.patch_action(uri, &mut action);
        match self.commit_and_publish(uri, action, None) {
            Ok(_) => true,
            Err(error) => {
                tracing::warn!(session = %Untrusted(uri), ?error, "host action not applied");
                false
            }
        }
    }

    /// Bring every session's view of server `id` up to its live facts: anything besides its
    /// state and channel (its `mcpApp`) first, as `session/customizationUpdated` of the
    /// container it lives in; then the state and channel as `session/mcpServerStateChanged`,
    /// so clients always see state transitions as such. Only the server is copied and
    /// compared; its container only when more than its state changed, so a state change
    /// costs the same in a container of ten servers or of a hundred thousand.
    fn refresh_server(&mut self, id: &str) {
        let uris: Vec<String> = self.store.session_uris().map(str::to_string).collect();
        for uri in uris {
            let Some(was) = self.store.session(&uri).and_then(|s| {
                s.customizations
                    .iter()
                    .flatten()
                    .find_map(|c| live::server_of(c, id))
                    .cloned()
            }) else {
                continue;
            };
            let mut now = was.clone();
            self.live.patch_one(&uri, &mut now);
            let mut staged = now.clone();
            staged.state = was.state.clone();
            staged.channel = was.channel.clone();
            let mut actions = Vec::new();
            if staged != was {
                let container = self.store.session(&uri).and_then(|s| {
                    s.customizations
                        .iter()
                        .flatten()
                        .find(|c| live::server_in(c, id))
                        .cloned()
                });
                if let Some(mut container) = container {
                    if let Some(m) = live::server_mut(&mut container, id) {
                        *m = staged;
                    }
                    actions.push(StateAction::SessionCustomizationUpdated(Box::new(
                        ahp_types::actions::SessionCustomizationUpdatedAction {
                            customization: container,
                        },
                    )));
                }
            }
            if now.state != was.state || now.channel != was.channel {
                actions.push(StateAction::SessionMcpServerStateChanged(Box::new(
                    ahp_types::actions::SessionMcpServerStateChangedAction {
                        id: id.to_string(),
                        state: now.state,
                        channel: now.channel,
                    },
                )));
            }
            for action in actions {
                if let Err(error) = self.commit_and_publish(&uri, action, None) {
                    tracing::warn!(session = %Untrusted(&uri), ?error, "server state not applied")
                }
            }
        }
    }

    /// Show the resources of the servers asking for authorization in the agent's
    /// `protectedResources`, as long as they ask (the MCP servers guide's advice: clients
    /// check `authenticate`'s resource against the agent's).
    fn refresh_protected_resources(&mut self) {
        let asked = self.live.protected_resources();
        let mut agents = self.store.root().agents.clone();
        let Some(agent) = agents.first_mut() else {
            return;
        };
        let shown = (!asked.is_empty()).then_some(asked);
        if agent.protected_resources == shown {
            return;
        }
        agent.protected_resources = shown;
        let action =
            StateAction::RootAgentsChanged(ahp_types::actions::RootAgentsChangedAction { agents });
        if let Err(error) = self.commit_and_publish(ahp_types::ROOT_RESOURCE_URI, action, None) {
            tracing::warn!(?error, "protected resources not shown");
        }
    }

    /// Re-derive every server's `mcpApp` in every session (sampling came or went).
    fn refresh_apps(&mut self) {
        let uris: Vec<String> = self.store.session_uris().map(str::to_string).collect();
        for uri in uris {
            let list = self
                .store
                .session(&uri)
                .and_then(|s| s.customizations.clone())
                .unwrap_or_default();
            for current in list {
                let mut patched = current.clone();
                self.live.patch_apps(&mut patched);
                if patched == current {
                    continue;
                }
                let action = StateAction::SessionCustomizationUpdated(Box::new(
                    ahp_types::actions::SessionCustomizationUpdatedAction {
                        customization: patched,
                    },
                ));
                if let Err(error) = self.commit_and_publish(&uri, action, None) {
                    tracing::warn!(session = %Untrusted(&uri), ?error, "mcpApp not applied")
                }
            }
        }
    }

    /// The server behind open `mcp://` channel `uri`, and what the channel serves.
    pub(super) fn channel_server(&self, uri: &str) -> Option<(String, apps::ChannelOffer)> {
        self.store
            .session_uris()
            .filter_map(|session| self.store.session(session))
            .flat_map(|s| s.customizations.iter().flatten())
            .find_map(|c| live::server_with_channel(c, uri))
            .and_then(|m| Some((m.id.clone(), apps::ChannelOffer::of(m)?)))
    }
}
