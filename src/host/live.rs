//! Facts that outlast a rescan: each supervised server's live state, its `mcp://` channel,
//! what the channel serves (`mcpApp`, `_meta`) and icons, and every client enablement decision,
//! laid over scanned customizations beside the decision their manifest (or publisher) made.

use std::collections::HashMap;

use ahp_types::actions::StateAction;
use ahp_types::state::{
    ChildCustomization, Customization, CustomizationEnablement, ErrorInfo, Icon,
    McpServerAuthRequiredState, McpServerCustomization, McpServerErrorState, McpServerReadyState,
    McpServerStartingState, McpServerState, McpServerStoppedState,
};

use super::apps;
use crate::supervisor::{AuthReason, Served, Status};

/// Live server states and client enablement decisions, by customization id.
#[derive(Debug, Default)]
pub struct Live {
    states: HashMap<String, McpServerState>,
    /// What each server served when it was last ready (kept while it restarts).
    served: HashMap<String, Served>,
    /// The icons each server named in its `serverInfo` when it was last ready.
    icons: HashMap<String, Vec<Icon>>,
    /// Whether some harness declared sampling (channels then forward it).
    sampling: bool,
    /// Client enablement decisions, as the client sent them.
    enablement: HashMap<String, Vec<CustomizationEnablement>>,
    /// The `global` decision the latest scan showed for a server or plugin (a manifest's
    /// `disabled`, a publishing client's own), by id.
    declared: HashMap<String, CustomizationEnablement>,
    /// Servers whose start outlived the start timeout and still goes on ("starting (slow)").
    slow: std::collections::HashSet<String>,
}

/// The server customization's `_meta` key saying a start is slow: `{"slow": true}` while a
/// start goes on past the start timeout (AHP's `starting` state has no words for it).
pub const START_META: &str = "ahp-proxy/start";

impl Live {
    /// Remember what server `id` serves and the icons it names (it became ready).
    pub fn set_ready(&mut self, id: &str, served: Served, icons: Option<&serde_json::Value>) {
        self.served.insert(id.to_string(), served);
        match icons.and_then(server_icons) {
            Some(icons) => self.icons.insert(id.to_string(), icons),
            None => self.icons.remove(id),
        };
    }

    /// Whether a harness that can answer sampling is connected; returns whether it changed.
    pub fn set_sampling(&mut self, sampling: bool) -> bool {
        std::mem::replace(&mut self.sampling, sampling) != sampling
    }

    /// Server `id`'s channel in `session` while it is ready.
    pub fn channel(&self, session: &str, id: &str) -> Option<String> {
        matches!(self.states.get(id), Some(McpServerState::Ready(_)))
            .then(|| apps::channel_uri(session, id))
    }

    /// Lay live facts (state, channel, what it serves, enablement) over one server as `session`
    /// shows it.
    pub fn patch_one(&self, session: &str, server: &mut McpServerCustomization) {
        self.lay_over_server(session, server);
    }

    /// Refresh what the channel of every server inside `customization` serves (sampling came
    /// or went).
    pub fn patch_apps(&self, customization: &mut Customization) {
        let apply = |m: &mut ahp_types::state::McpServerCustomization| {
            apps::advertise(m, self.served.get(&m.id), self.sampling);
        };
        match customization {
            Customization::McpServer(m) => apply(m),
            Customization::Plugin(p) => p.children.iter_mut().flatten().for_each(|c| {
                if let ChildCustomization::McpServer(m) = c {
                    apply(m)
                }
            }),
            Customization::Directory(d) => d.children.iter_mut().flatten().for_each(|c| {
                if let ChildCustomization::McpServer(m) = c {
                    apply(m)
                }
            }),
            Customization::Unknown(_) => {}
        }
    }

    fn lay_over_server(&self, session: &str, m: &mut ahp_types::state::McpServerCustomization) {
        if let Some(e) = self.enablement.get(&m.id) {
            m.enablement = Some(resolved(e, global_of(m.enablement.as_deref())));
        }
        if let Some(state) = self.states.get(&m.id) {
            m.state = state.clone();
        }
        if let Some(icons) = self.icons.get(&m.id) {
            m.icons = Some(icons.clone());
        }
        m.channel = self.channel(session, &m.id);
        apps::advertise(m, self.served.get(&m.id), self.sampling);
        let mut meta = m.meta.take().unwrap_or_default();
        match self.slow.contains(&m.id) {
            true => meta.insert(START_META.into(), serde_json::json!({"slow": true})),
            false => meta.remove(START_META),
        };
        m.meta = (!meta.is_empty()).then_some(meta);
    }

    /// The protected resources of the servers asking for authorization, one per resource,
    /// ordered by it.
    pub fn protected_resources(&self) -> Vec<ahp_types::state::ProtectedResourceMetadata> {
        let mut resources: Vec<_> = self
            .states
            .values()
            .filter_map(|state| match state {
                McpServerState::AuthRequired(auth) => Some(auth.resource.clone()),
                _ => None,
            })
            .collect();
        resources.sort_by(|a, b| a.resource.cmp(&b.resource));
        resources.dedup_by(|a, b| a.resource == b.resource);
        resources
    }

    /// Server `id`'s state, once the supervisor reported one.
    pub fn state(&self, id: &str) -> Option<&McpServerState> {
        self.states.get(id)
    }

    /// Remember server `id`'s state.
    pub fn set_state(&mut self, id: &str, state: McpServerState) {
        self.states.insert(id.to_string(), state);
    }

    /// Remember whether server `id`'s start is slow (see [`START_META`]).
    pub fn set_slow(&mut self, id: &str, slow: bool) {
        match slow {
            true => self.slow.insert(id.to_string()),
            false => self.slow.remove(id),
        };
    }

    /// Forget server `id`'s state (it was removed).
    pub fn forget_state(&mut self, id: &str) {
        self.slow.remove(id);
        self.states.remove(id);
        self.served.remove(id);
        self.icons.remove(id);
    }

    /// The enablement array the host shows for `id` when a client sends `client`: the
    /// client's decisions, then the `global` one the scan showed, unless the client made a
    /// `global` decision itself (the same scope; the client's is the newer).
    pub fn resolve(
        &self,
        id: &str,
        client: &[CustomizationEnablement],
    ) -> Vec<CustomizationEnablement> {
        resolved(client, self.declared.get(id))
    }

    /// Remember a client's enablement array for `id` (as the client sent it, not resolved);
    /// an empty array clears the decision.
    pub fn record_toggle(&mut self, id: &str, enablement: &[CustomizationEnablement]) {
        if enablement.is_empty() {
            self.enablement.remove(id);
        } else {
            self.enablement.insert(id.to_string(), enablement.to_vec());
        }
    }

    /// Lay live facts over the customizations a host-originated action for `session`
    /// carries (a scan's), noting the decisions the scan shows first.
    pub fn patch_action(&mut self, session: &str, action: &mut StateAction) {
        match action {
            StateAction::SessionCustomizationsChanged(a) => {
                a.customizations.iter().for_each(|c| self.note_declared(c));
                a.customizations
                    .iter_mut()
                    .for_each(|c| self.patch(session, c));
            }
            StateAction::SessionCustomizationUpdated(a) => {
                self.note_declared(&a.customization);
                self.patch(session, &mut a.customization)
            }
            _ => {}
        }
    }

    /// Remember the `global` decision a scanned customization (a plugin) and its servers show.
    fn note_declared(&mut self, customization: &Customization) {
        let mut note = |id: &str, enablement: Option<&[CustomizationEnablement]>| {
            match global_of(enablement) {
                Some(global) => self.declared.insert(id.to_string(), global.clone()),
                None => self.declared.remove(id),
            };
        };
        if let Customization::Plugin(p) = customization {
            note(&p.id, p.enablement.as_deref());
        }
        for m in servers(customization) {
            note(&m.id, m.enablement.as_deref());
        }
    }

    /// Lay live facts over one top-level customization and its children, as `session`
    /// shows them.
    pub fn patch(&self, session: &str, customization: &mut Customization) {
        match customization {
            Customization::Plugin(p) => {
                if let Some(e) = self.enablement.get(&p.id) {
                    p.enablement = Some(resolved(e, global_of(p.enablement.as_deref())));
                }
                p.children
                    .iter_mut()
                    .flatten()
                    .for_each(|c| self.patch_child(session, c));
            }
            Customization::Directory(d) => {
                if let Some(e) = self.enablement.get(&d.id) {
                    d.enabled = effective(e).unwrap_or(true);
                }
                d.children
                    .iter_mut()
                    .flatten()
                    .for_each(|c| self.patch_child(session, c));
            }
            Customization::McpServer(m) => self.lay_over_server(session, m),
            Customization::Unknown(_) => {}
        }
    }

    fn patch_child(&self, session: &str, child: &mut ChildCustomization) {
        let (id, enabled) = match child {
            ChildCustomization::McpServer(m) => {
                self.lay_over_server(session, m);
                return;
            }
            ChildCustomization::Agent(c) => (&c.id, &mut c.enabled),
            ChildCustomization::Skill(c) => (&c.id, &mut c.enabled),
            ChildCustomization::Prompt(c) => (&c.id, &mut c.enabled),
            ChildCustomization::Rule(c) => (&c.id, &mut c.enabled),
            ChildCustomization::Hook(c) => (&c.id, &mut c.enabled),
            ChildCustomization::Unknown(_) => return,
        };
        if let Some(e) = self.enablement.get(id) {
            *enabled = Some(effective(e).unwrap_or(true));
        }
    }
}

/// The `global` entry of an enablement array, if it has one.
fn global_of(enablement: Option<&[CustomizationEnablement]>) -> Option<&CustomizationEnablement> {
    enablement
        .unwrap_or_default()
        .iter()
        .find(|e| matches!(e, CustomizationEnablement::Global { .. }))
}

/// `client`'s decisions, followed by `declared` (a `global` one) unless `client` has a
/// `global` decision of its own. Entries stay ordered session → workspace → global.
fn resolved(
    client: &[CustomizationEnablement],
    declared: Option<&CustomizationEnablement>,
) -> Vec<CustomizationEnablement> {
    let mut all = client.to_vec();
    if global_of(Some(client)).is_none() {
        all.extend(declared.cloned());
    }
    all
}

/// Whether MCP server `id` is `customization` or one of its children.
pub fn server_in(customization: &Customization, id: &str) -> bool {
    match customization {
        Customization::McpServer(m) => m.id == id,
        Customization::Plugin(p) => children_have(p.children.as_deref(), id),
        Customization::Directory(d) => children_have(d.children.as_deref(), id),
        Customization::Unknown(_) => false,
    }
}

fn children_have(children: Option<&[ChildCustomization]>, id: &str) -> bool {
    children
        .unwrap_or_default()
        .iter()
        .any(|c| matches!(c, ChildCustomization::McpServer(m) if m.id == id))
}

/// The MCP server inside `customization` (itself or a child) whose channel is `channel`.
pub fn server_with_channel<'a>(
    customization: &'a Customization,
    channel: &str,
) -> Option<&'a McpServerCustomization> {
    servers(customization).find(|m| m.channel.as_deref() == Some(channel))
}

/// MCP server `id` inside `customization` (itself or a child).
pub fn server_of<'a>(
    customization: &'a Customization,
    id: &str,
) -> Option<&'a McpServerCustomization> {
    servers(customization).find(|m| m.id == id)
}

/// Every MCP server of `customization`: itself, or its children.
pub fn servers(customization: &Customization) -> impl Iterator<Item = &McpServerCustomization> {
    let (itself, children) = match customization {
        Customization::McpServer(m) => (Some(&**m), None),
        Customization::Plugin(p) => (None, p.children.as_deref()),
        Customization::Directory(d) => (None, d.children.as_deref()),
        Customization::Unknown(_) => (None, None),
    };
    itself
        .into_iter()
        .chain(children.unwrap_or_default().iter().filter_map(|c| match c {
            ChildCustomization::McpServer(m) => Some(&**m),
            _ => None,
        }))
}

/// MCP server `id` inside `customization` (itself or one of its children).
pub fn server_mut<'a>(
    customization: &'a mut Customization,
    id: &str,
) -> Option<&'a mut ahp_types::state::McpServerCustomization> {
    let children = match customization {
        Customization::McpServer(m) => return (m.id == id).then_some(&mut **m),
        Customization::Plugin(p) => p.children.as_mut()?,
        Customization::Directory(d) => d.children.as_mut()?,
        Customization::Unknown(_) => return None,
    };
    children.iter_mut().find_map(|c| match c {
        ChildCustomization::McpServer(m) if m.id == id => Some(&mut **m),
        _ => None,
    })
}

/// Icons shown per server, at most.
const MAX_ICONS: usize = 8;
/// Longest icon `src` shown (a `data:` URI holds the image).
const MAX_ICON_SRC: usize = 64 * 1024;

/// A server's `serverInfo.icons` as AHP icons: those whose `src` is an http(s) or
/// `data:image/` URL of reasonable size, at most [`MAX_ICONS`]; `None` when none is.
pub fn server_icons(raw: &serde_json::Value) -> Option<Vec<Icon>> {
    let text = |icon: &serde_json::Value, key: &str| {
        icon.get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let icons: Vec<Icon> = raw
        .as_array()?
        .iter()
        .filter_map(|icon| {
            let src = text(icon, "src")?;
            let usable = src.len() <= MAX_ICON_SRC
                && ["https://", "http://", "data:image/"]
                    .iter()
                    .any(|scheme| src.starts_with(scheme));
            usable.then(|| Icon {
                src,
                content_type: text(icon, "mimeType"),
                sizes: icon.get("sizes").and_then(|sizes| {
                    sizes
                        .as_array()?
                        .iter()
                        .map(|size| size.as_str().map(str::to_string))
                        .collect()
                }),
                theme: text(icon, "theme"),
            })
        })
        .take(MAX_ICONS)
        .collect();
    (!icons.is_empty()).then_some(icons)
}

/// The effective value of an enablement array (its first entry), `None` when empty.
pub use crate::spec::effective_enablement as effective;

/// What a tool call paused by `status` (an `authRequired` one) is waiting for.
pub fn auth_requirement(status: &Status) -> Option<ahp_types::state::McpAuthRequirement> {
    let McpServerState::AuthRequired(state) = server_state(status) else {
        return None;
    };
    auth_requirement_of(&state)
}

/// The requirement an `authRequired` server state carries (the same fields, no `kind`).
pub fn auth_requirement_of(
    state: &McpServerAuthRequiredState,
) -> Option<ahp_types::state::McpAuthRequirement> {
    let mut value = serde_json::to_value(state).ok()?;
    if let Some(object) = value.as_object_mut() {
        object.remove("kind");
    }
    serde_json::from_value(value).ok()
}

/// The AHP state for a supervisor status.
pub fn server_state(status: &Status) -> McpServerState {
    match status {
        Status::Starting { .. } => {
            McpServerState::Starting(McpServerStartingState { blocking: None })
        }
        Status::Ready { .. } => McpServerState::Ready(McpServerReadyState {}),
        Status::Stopped => McpServerState::Stopped(McpServerStoppedState {}),
        Status::Error(failure) => McpServerState::Error(McpServerErrorState {
            error: ErrorInfo {
                error_type: failure.kind().to_string(),
                message: failure.to_string(),
                stack: None,
                meta: None,
            },
        }),
        Status::AuthRequired {
            resource,
            challenge,
            reason,
            metadata,
        } => {
            let params = challenge
                .as_deref()
                .map(crate::supervisor::auth::challenge_params)
                .unwrap_or_default();
            let scopes: Option<Vec<String>> = params
                .get("scope")
                .map(|s| s.split_whitespace().map(str::to_string).collect());
            // The fetched RFC 9728 metadata when it parses, else just the resource.
            let fetched = metadata
                .clone()
                .and_then(|m| serde_json::from_value(m).ok());
            let parsed = match fetched {
                Some(resource) => Ok(resource),
                None => serde_json::from_value(serde_json::json!({ "resource": resource })),
            };
            match parsed {
                Ok(resource) => {
                    McpServerState::AuthRequired(Box::new(McpServerAuthRequiredState {
                        reason: match reason {
                            AuthReason::Required => {
                                ahp_types::state::McpAuthRequiredReason::Required
                            }
                            AuthReason::Expired => ahp_types::state::McpAuthRequiredReason::Expired,
                            AuthReason::InsufficientScope => {
                                ahp_types::state::McpAuthRequiredReason::InsufficientScope
                            }
                        },
                        oauth_client: None,
                        resource,
                        required_scopes: scopes,
                        description: params.get("error_description").cloned(),
                    }))
                }
                Err(error) => McpServerState::Error(McpServerErrorState {
                    error: ErrorInfo {
                        error_type: "authRequired".into(),
                        message: format!("the server requires authorization ({error})"),
                        stack: None,
                        meta: None,
                    },
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::Failure;
    use serde_json::json;

    fn customization(value: serde_json::Value) -> Customization {
        serde_json::from_value(value).expect("valid customization")
    }

    #[test]
    fn rescanned_containers_keep_live_states_and_toggles() {
        let mut live = Live::default();
        live.set_state(
            "m",
            server_state(&Status::Ready {
                tools: 2,
                served: Served::default(),
                icons: None,
            }),
        );
        let off = vec![CustomizationEnablement::Session { enabled: false }];
        live.record_toggle("p", &off);
        live.record_toggle("s", &off);
        let mut plugin = customization(json!({
        "type": "plugin", "id": "p", "uri": "file:///p", "name": "p", "children": [
            {"type": "skill", "id": "s", "uri": "file:///p/s", "name": "s"},
            {"type": "mcpServer", "id": "m", "uri": "file:///p/.mcp.json", "name": "m", "state": {"kind": "starting"}}
        ]}));
        live.patch("ahp-proxy:/s", &mut plugin);
        let value = serde_json::to_value(&plugin).unwrap();
        assert_eq!(
            value["enablement"],
            json!([{"kind": "session", "enabled": false}])
        );
        assert_eq!(value["children"][0]["enabled"], json!(false));
        assert_eq!(value["children"][1]["state"], json!({"kind": "ready"}));
        live.record_toggle("p", &[]);
        live.forget_state("m");
        let mut fresh = customization(json!({
        "type": "plugin", "id": "p", "uri": "file:///p", "name": "p", "children": [
            {"type": "mcpServer", "id": "m", "uri": "file:///p/.mcp.json", "name": "m", "state": {"kind": "starting"}}
        ]}));
        live.patch("ahp-proxy:/s", &mut fresh);
        let value = serde_json::to_value(&fresh).unwrap();
        assert!(value.get("enablement").is_none());
        assert_eq!(value["children"][0]["state"], json!({"kind": "starting"}));
    }

    #[test]
    fn a_declared_global_decision_stays_after_the_clients_own_unless_it_sends_one() {
        let mut live = Live::default();
        let off = CustomizationEnablement::Global { enabled: false };
        let scanned = customization(json!({"type": "mcpServer", "id": "m", "uri": "file:///m",
            "name": "m", "state": {"kind": "stopped"}, "enablement": [{"kind": "global", "enabled": false}]}));
        let mut action = StateAction::SessionCustomizationsChanged(
            ahp_types::actions::SessionCustomizationsChangedAction {
                customizations: vec![scanned],
            },
        );
        live.patch_action("ahp-proxy:/s", &mut action);
        let here = CustomizationEnablement::Session { enabled: true };
        let everywhere = CustomizationEnablement::Global { enabled: true };
        let resolved = |id: &str, client: &[CustomizationEnablement]| live.resolve(id, client);
        assert_eq!(
            resolved("m", std::slice::from_ref(&here)),
            [here.clone(), off.clone()]
        );
        assert_eq!(resolved("m", &[]), std::slice::from_ref(&off));
        assert_eq!(
            resolved("m", std::slice::from_ref(&everywhere)),
            [everywhere]
        );
        assert_eq!(
            resolved("other", std::slice::from_ref(&here)),
            std::slice::from_ref(&here)
        );
        // Laid over a rescan: the client's decision first, the scan's after it.
        live.record_toggle("m", std::slice::from_ref(&here));
        live.patch_action("ahp-proxy:/s", &mut action);
        let StateAction::SessionCustomizationsChanged(a) = &action else {
            unreachable!()
        };
        let Customization::McpServer(m) = &a.customizations[0] else {
            unreachable!()
        };
        assert_eq!(m.enablement.as_deref(), Some(&[here, off][..]));
    }

    #[test]
    fn statuses_map_to_wire_states() {
        let error = serde_json::to_value(server_state(&Status::Error(Failure::Exited(
            "exited with status 3".into(),
        ))))
        .unwrap();
        assert_eq!(
            error,
            json!({"kind": "error", "error": {"errorType": "exited", "message": "exited with status 3"}})
        );
        let auth = serde_json::to_value(server_state(&Status::AuthRequired {
            resource: "https://mcp.example.com/mcp".into(),
            challenge: Some(r#"Bearer error="insufficient_scope", scope="read write", error_description="more, please""#.into()),
            reason: AuthReason::InsufficientScope,
            metadata: None,
        }))
        .unwrap();
        assert_eq!(auth["kind"], "authRequired");
        assert_eq!(auth["reason"], "insufficientScope");
        assert_eq!(
            auth["resource"],
            json!({"resource": "https://mcp.example.com/mcp"})
        );
        assert_eq!(auth["requiredScopes"], json!(["read", "write"]));
        assert_eq!(auth["description"], "more, please");
        // Fetched metadata is shown as it came; unusable metadata falls back to the URL.
        let metadata = json!({"resource": "https://mcp.example.com/mcp",
            "authorization_servers": ["https://auth.example.com"], "scopes_supported": ["read"]});
        let expired = |metadata: Option<serde_json::Value>| {
            serde_json::to_value(server_state(&Status::AuthRequired {
                resource: "https://mcp.example.com/mcp".into(),
                challenge: None,
                reason: AuthReason::Expired,
                metadata,
            }))
            .unwrap()
        };
        let with = expired(Some(metadata.clone()));
        assert_eq!(with["reason"], "expired");
        assert_eq!(with["resource"], metadata);
        assert_eq!(
            expired(Some(json!({"no": "resource"})))["resource"],
            json!({"resource": "https://mcp.example.com/mcp"})
        );
    }

    #[test]
    fn server_icons_keep_usable_sources_only() {
        let icons = server_icons(&json!([
            {"src": "https://example.com/a.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"},
            {"src": "javascript:alert(1)"},
            {"src": "file:///etc/passwd"},
            {"src": "data:image/svg+xml;base64,PHN2Zy8+"},
            {"no": "src"}
        ]))
        .expect("two usable icons");
        let value = serde_json::to_value(&icons).unwrap();
        assert_eq!(
            value,
            json!([{"src": "https://example.com/a.png", "contentType": "image/png",
                    "sizes": ["48x48"], "theme": "dark"},
                   {"src": "data:image/svg+xml;base64,PHN2Zy8+"}])
        );
        assert!(server_icons(&json!([{"src": "ftp://x/y.png"}])).is_none());
        assert!(server_icons(&json!("not a list")).is_none());
    }

    #[test]
    fn effective_enablement_is_the_first_entry() {
        assert_eq!(effective(&[]), None);
        let entries = vec![
            CustomizationEnablement::Session { enabled: false },
            CustomizationEnablement::Global { enabled: true },
        ];
        assert_eq!(effective(&entries), Some(false));
    }
}
