//! The other names VS Code gives the host's sessions and chats, resolved to the published
//! ones at the connection's edge (the host's store knows only its own names). Pure.
//!
//! VS Code names a session `<provider>:/<id>` (`AgentSession.uri`, its
//! `common/agentHostSessionIdentity.ts`) where the host published `ahp-session:/<id>`, and
//! a session's default chat `ahp-chat://default/<base64url(session URI)>` (`buildDefaultChatUri`,
//! its `common/state/sessionState.ts`) whatever the session's `defaultChat` says.

use base64::Engine as _;

/// The scheme of the host's own session URIs.
const SESSION_SCHEME: &str = "ahp-session";

/// The authority of a derived default-chat URI (`DEFAULT_CHAT_ID`).
const DERIVED_CHAT_PREFIX: &str = "ahp-chat://default/";

/// What resolving a name needs to know of the host.
pub trait Facts {
    /// The agent provider id (the scheme VS Code names sessions by).
    fn provider(&self) -> String;
    /// Whether `uri` is one of the host's sessions.
    fn is_session(&self, uri: &str) -> bool;
    /// The default chat of session `session`, if it has one.
    fn default_chat(&self, session: &str) -> Option<String>;
}

/// The host's own URI for `uri` when `uri` is another name of one of its sessions or chats;
/// `None` when it is not (it may still be a published name, or nothing at all).
pub fn published(uri: &str, facts: &impl Facts) -> Option<String> {
    if let Some(session) = derived_chat_session(uri) {
        let session = if facts.is_session(&session) {
            session
        } else {
            other_session_name(&session, facts)?
        };
        return facts.default_chat(&session);
    }
    if facts.is_session(uri) {
        return None;
    }
    other_session_name(uri, facts)
}

/// `uri` itself, or the published URI it is another name of.
pub fn resolve(uri: &str, facts: &impl Facts) -> String {
    published(uri, facts).unwrap_or_else(|| uri.to_string())
}

/// A session's other form: `<provider>:<rest>` for `ahp-session:<rest>` and back, when that
/// names a session.
fn other_session_name(uri: &str, facts: &impl Facts) -> Option<String> {
    let (scheme, rest) = uri.split_once(':')?;
    let provider = facts.provider();
    let other = if scheme == provider {
        SESSION_SCHEME
    } else if scheme == SESSION_SCHEME {
        provider.as_str()
    } else {
        return None;
    };
    let candidate = format!("{other}:{rest}");
    facts.is_session(&candidate).then_some(candidate)
}

/// The session URI inside a derived default-chat URI (unpadded base64url, as VS Code's
/// `encodeBase64(…, false, true)` writes it; padding tolerated).
fn derived_chat_session(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix(DERIVED_CHAT_PREFIX)?.trim_end_matches('=');
    if encoded.is_empty() || encoded.contains('/') {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host with sessions `ahp-session:/default` (chat `ahp-chat:/harness`) and
    /// `ahp-proxy:/mine` (no chat), provider `ahp-proxy`.
    struct Host;

    impl Facts for Host {
        fn provider(&self) -> String {
            "ahp-proxy".into()
        }
        fn is_session(&self, uri: &str) -> bool {
            matches!(uri, "ahp-session:/default" | "ahp-proxy:/mine")
        }
        fn default_chat(&self, session: &str) -> Option<String> {
            (session == "ahp-session:/default").then(|| "ahp-chat:/harness".into())
        }
    }

    fn derived(session: &str) -> String {
        format!(
            "{DERIVED_CHAT_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(session)
        )
    }

    #[test]
    fn a_session_is_known_by_either_scheme() {
        assert_eq!(
            published("ahp-proxy:/default", &Host).as_deref(),
            Some("ahp-session:/default")
        );
        assert_eq!(
            published("ahp-session:/mine", &Host).as_deref(),
            Some("ahp-proxy:/mine")
        );
        // Published names, and names of nothing, are not aliases.
        for uri in [
            "ahp-session:/default",
            "ahp-proxy:/mine",
            "ahp-proxy:/other",
            "other:/default",
            "ahp-root://",
            "mcp://default/1",
            "nocolon",
        ] {
            assert_eq!(published(uri, &Host), None, "{uri}");
            assert_eq!(resolve(uri, &Host), uri);
        }
    }

    #[test]
    fn the_derived_chat_is_the_sessions_default_chat_under_either_session_name() {
        for session in ["ahp-session:/default", "ahp-proxy:/default"] {
            assert_eq!(
                published(&derived(session), &Host).as_deref(),
                Some("ahp-chat:/harness"),
                "{session}"
            );
        }
        let padded = format!(
            "{DERIVED_CHAT_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE.encode("ahp-proxy:/default")
        );
        assert_eq!(
            published(&padded, &Host).as_deref(),
            Some("ahp-chat:/harness")
        );
        // No default chat, no session, not base64, another chat id: not an alias.
        for uri in [
            derived("ahp-proxy:/mine"),
            derived("ahp-session:/nowhere"),
            format!("{DERIVED_CHAT_PREFIX}%%%"),
            DERIVED_CHAT_PREFIX.to_string(),
            format!("ahp-chat://peer/{}", &derived("ahp-session:/default")[19..]),
            format!("{}/x", derived("ahp-session:/default")),
        ] {
            assert_eq!(published(&uri, &Host), None, "{uri}");
        }
    }
}
