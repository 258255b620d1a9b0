//! How one connection is shown the host's state: with or without MCP Apps (channels and
//! `mcpApp`s), at the protocol version it negotiated, each channel by the name it subscribed
//! under; what the host sends, rendered for it.

use std::borrow::Cow;

use ahp_types::actions::ActionEnvelope;
use ahp_types::notifications::{PartialSessionSummary, SessionSummaryChangedParams};
use ahp_types::state::{SessionSummary, Snapshot, SnapshotState};
use ahp_types::ROOT_RESOURCE_URI;

use super::versions::{self, Version};
use super::{apps, ClientRecord};
use crate::jsonrpc::{self, Frame};

/// A channel a connection asked for: the host's URI for it, and the name it used (another
/// name VS Code gives a session or chat, or the same URI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The host's own URI.
    pub uri: String,
    /// What the connection called it.
    pub name: String,
}

impl Named {
    /// A channel asked for by the host's own name.
    pub fn own(uri: &str) -> Self {
        Self {
            uri: uri.to_string(),
            name: uri.to_string(),
        }
    }
}

/// What one connection is shown. Before its handshake: the current version, no MCP Apps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Audience {
    /// It declared `mcpApps`: it sees `mcp://` channels and `mcpApp`s.
    pub mcp_apps: bool,
    /// The protocol version it negotiated.
    pub version: Version,
}

impl Audience {
    /// A client as the host remembers it from its `initialize`.
    pub fn of(record: &ClientRecord) -> Self {
        Self {
            mcp_apps: record.mcp_apps,
            version: Version::parse(&record.protocol_version).unwrap_or_default(),
        }
    }

    /// `envelope` as this audience gets it; `None` when it does not get it at all.
    pub fn envelope<'a>(&self, envelope: &'a ActionEnvelope) -> Option<Cow<'a, ActionEnvelope>> {
        let plain = if self.mcp_apps {
            None
        } else {
            apps::plain_envelope(envelope)
        };
        match plain {
            Some(plain) => {
                versions::envelope(&plain, self.version).map(|shown| Cow::Owned(shown.into_owned()))
            }
            None => versions::envelope(envelope, self.version),
        }
    }

    /// `envelope` as this audience gets it on the channel it knows as `name`.
    pub fn envelope_as<'a>(
        &self,
        envelope: &'a ActionEnvelope,
        name: &str,
    ) -> Option<Cow<'a, ActionEnvelope>> {
        let shown = self.envelope(envelope)?;
        if shown.channel == name {
            return Some(shown);
        }
        let mut renamed = shown.into_owned();
        renamed.channel = name.to_string();
        Some(Cow::Owned(renamed))
    }

    /// The `action` notification of `envelope` for this audience, on the channel it knows as
    /// `name`, if it gets one. `encoded` is the envelope's JSON text when already made: used
    /// when this audience sees it as is.
    pub fn action(
        &self,
        envelope: &ActionEnvelope,
        encoded: Option<&str>,
        name: &str,
    ) -> Option<Frame> {
        match (self.envelope_as(envelope, name)?, encoded) {
            (Cow::Borrowed(_), Some(json)) => Some(jsonrpc::notification_encoded("action", json)),
            (shown, _) => Some(jsonrpc::notification("action", &*shown)),
        }
    }

    /// A snapshot as this audience gets it, of the channel it knows as `name`.
    pub fn snapshot(&self, snapshot: Snapshot, name: &str) -> Snapshot {
        let snapshot = if self.mcp_apps {
            snapshot
        } else {
            apps::plain_snapshot(snapshot)
        };
        let mut snapshot = versions::snapshot(snapshot, self.version);
        if snapshot.resource != name {
            if let SnapshotState::Chat(chat) = &mut snapshot.state {
                chat.resource = name.to_string();
            }
            snapshot.resource = name.to_string();
        }
        snapshot
    }

    /// A session's catalogue entry as this audience gets it.
    pub fn summary(&self, summary: SessionSummary) -> SessionSummary {
        versions::summary(summary, self.version)
    }

    /// `root/sessionSummaryChanged` for `session` as this audience gets it.
    pub fn summary_changed(&self, session: &str, changes: &PartialSessionSummary) -> Frame {
        let params = SessionSummaryChangedParams {
            channel: ROOT_RESOURCE_URI.to_string(),
            session: session.to_string(),
            changes: versions::summary_changes(changes, self.version).into_owned(),
        };
        jsonrpc::notification("root/sessionSummaryChanged", &params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope_of(action: serde_json::Value) -> ActionEnvelope {
        serde_json::from_value(json!({"channel": "ahp-proxy:/s", "serverSeq": 3, "action": action}))
            .expect("an envelope")
    }

    #[test]
    fn the_encoded_text_goes_only_to_audiences_that_see_the_envelope_unchanged() {
        let with_channel = envelope_of(json!({"type": "session/mcpServerStateChanged", "id": "m",
            "state": {"kind": "starting", "blocking": true}, "channel": "mcp://s/m"}));
        let encoded = serde_json::to_string(&with_channel).unwrap();
        let apps = Audience {
            mcp_apps: true,
            version: Version::default(),
        };
        let plain = Audience {
            mcp_apps: false,
            ..apps
        };
        let old = Audience {
            version: Version::parse("0.9.0").unwrap(),
            ..apps
        };
        let whole = jsonrpc::notification("action", &with_channel);
        let name = with_channel.channel.as_str();
        assert_eq!(
            apps.action(&with_channel, Some(&encoded), name),
            Some(whole.clone())
        );
        for audience in [plain, old] {
            let shown = audience
                .action(&with_channel, Some(&encoded), name)
                .unwrap();
            assert_ne!(shown, whole, "{audience:?}");
            assert_eq!(
                Some(shown),
                audience.action(&with_channel, None, name),
                "{audience:?}"
            );
        }
        assert!(!plain
            .action(&with_channel, Some(&encoded), name)
            .unwrap()
            .contains("mcp://"));
        // By another name: renamed, whoever the audience.
        let renamed = apps
            .action(&with_channel, Some(&encoded), "ahp-proxy:/s")
            .unwrap();
        assert!(renamed.contains(r#""channel":"ahp-proxy:/s""#), "{renamed}");
    }
}
