//! Who a forwarded request is sent for: the harness's envelope (its era, capabilities,
//! clientInfo named "via ahp-proxy", log level), as a modern server gets it in `_meta`.

use serde_json::json;

use super::harness_state::HarnessState;
use super::hub::Hub;
use super::in_flight::HarnessId;
use crate::mcp::era as front_era;
use crate::upstream::envelope::{named_via, Envelope};
use crate::upstream::era::Era;

/// Harness `id`'s envelope: a modern stand-in's from its request's `_meta`, a legacy
/// harness's from its `initialize` and `logging/setLevel`; `None` before it said who it is
/// (the upstream then sends for the proxy's own identity).
pub fn of(hub: &Hub, id: HarnessId) -> Option<Envelope> {
    let harness = hub.harness(id)?;
    if let Some(modern) = harness.modern_envelope() {
        return Some(modern_envelope(modern));
    }
    let level = (hub.tables().registry.harness(id)).and_then(|h| h.log_level);
    legacy_envelope(&harness, level.map(|l| l.name().to_string()))
}

/// A modern request's own envelope, for a modern server (its keys win in the request; this
/// fills only what it lacks).
fn modern_envelope(envelope: front_era::Envelope) -> Envelope {
    Envelope {
        era: Era::Modern,
        capabilities: envelope.capabilities,
        client_info: named_via(envelope.client_info.unwrap_or_else(|| json!({}))),
        log_level: envelope.log_level,
    }
}

/// A legacy harness's envelope, from its `initialize` params.
fn legacy_envelope(harness: &HarnessState, log_level: Option<String>) -> Option<Envelope> {
    let params = harness.initialize_params()?;
    let member = |key: &str| params.get(key).cloned().filter(|v| !v.is_null());
    Some(Envelope {
        era: Era::Legacy,
        capabilities: member("capabilities").unwrap_or_else(|| json!({})),
        client_info: named_via(member("clientInfo").unwrap_or_else(|| json!({}))),
        log_level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modern_request_keeps_its_envelope_but_is_named_via_the_proxy() {
        let envelope = modern_envelope(front_era::Envelope {
            version: "2026-07-28".into(),
            capabilities: json!({"elicitation": {}}),
            client_info: Some(json!({"name": "cli", "version": "1"})),
            log_level: Some("info".into()),
        });
        assert_eq!(envelope.era, Era::Modern);
        assert_eq!(envelope.capabilities, json!({"elicitation": {}}));
        assert_eq!(envelope.client_info["name"], "cli via ahp-proxy");
        assert_eq!(envelope.log_level.as_deref(), Some("info"));
    }

    #[test]
    fn a_legacy_harness_is_sent_for_as_it_initialized() {
        let harness = HarnessState::new(7, super::super::registry::Scope::All, false);
        assert!(legacy_envelope(&harness, None).is_none());
        harness.initialized(json!({
            "capabilities": {"sampling": {}},
            "clientInfo": {"name": "h", "version": "2"},
        }));
        let envelope = legacy_envelope(&harness, Some("debug".into())).expect("initialized");
        assert_eq!(envelope.era, Era::Legacy);
        assert_eq!(envelope.capabilities, json!({"sampling": {}}));
        assert_eq!(envelope.client_info["name"], "h via ahp-proxy");
        assert_eq!(envelope.log_level.as_deref(), Some("debug"));
    }
}
