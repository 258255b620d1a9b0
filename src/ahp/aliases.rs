//! The other names VS Code gives the host's sessions and chats, resolved to the published
//! ones at the connection's edge (the host's store knows only its own names). Pure.
//!
//! The host publishes its sessions as `<provider>:/<id>`, as VS Code names them
//! (`AgentSession.uri`, its `common/agentHostSessionIdentity.ts`; VS Code 1.139 reads a
//! listed session's provider from the scheme). A client may still name one by the old
//! `ahp-session:/<id>`, and a session's default chat `ahp-chat://default/<base64url(session
//! URI)>` (`buildDefaultChatUri`, its `common/state/sessionState.ts`) whatever the session's
//! `defaultChat` says.

use base64::Engine as _;

use crate::host::OLD_SESSION_SCHEME;

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

/// A session's other form, when that names a session: `<provider>:<rest>` for the old
/// `ahp-session:<rest>` (how published sessions are reached by their old name), and back
/// (a session a client created under the old scheme).
fn other_session_name(uri: &str, facts: &impl Facts) -> Option<String> {
    let (scheme, rest) = uri.split_once(':')?;
    let provider = facts.provider();
    let other = if scheme == OLD_SESSION_SCHEME {
        provider.as_str()
    } else if scheme == provider {
        OLD_SESSION_SCHEME
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

    /// A host with provider `ahp-proxy` and sessions `ahp-proxy:/default` (the published
    /// default session, chat `ahp-chat:/harness`) and `ahp-session:/mine` (one a client
    /// created under the old scheme, no chat).
    struct Host;

    impl Facts for Host {
        fn provider(&self) -> String {
            "ahp-proxy".into()
        }
        fn is_session(&self, uri: &str) -> bool {
            matches!(uri, "ahp-proxy:/default" | "ahp-session:/mine")
        }
        fn default_chat(&self, session: &str) -> Option<String> {
            (session == "ahp-proxy:/default").then(|| "ahp-chat:/harness".into())
        }
    }

    fn derived(session: &str) -> String {
        format!(
            "{DERIVED_CHAT_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(session)
        )
    }

    #[test]
    fn the_old_session_name_resolves_to_the_published_one() {
        assert_eq!(
            published("ahp-session:/default", &Host).as_deref(),
            Some("ahp-proxy:/default")
        );
        assert_eq!(resolve("ahp-session:/default", &Host), "ahp-proxy:/default");
    }

    #[test]
    fn a_session_created_under_the_old_scheme_is_known_by_the_providers_too() {
        assert_eq!(
            published("ahp-proxy:/mine", &Host).as_deref(),
            Some("ahp-session:/mine")
        );
    }

    #[test]
    fn published_names_and_names_of_nothing_are_not_aliases() {
        for uri in [
            "ahp-proxy:/default",
            "ahp-session:/mine",
            "ahp-session:/other",
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

    /// Under another provider, the old name resolves to that provider's session, and the
    /// default provider's name is nothing.
    #[test]
    fn the_old_name_follows_the_configured_provider() {
        struct Other;
        impl Facts for Other {
            fn provider(&self) -> String {
                "my.agent+2-x".into()
            }
            fn is_session(&self, uri: &str) -> bool {
                uri == "my.agent+2-x:/default"
            }
            fn default_chat(&self, _: &str) -> Option<String> {
                Some("ahp-chat:/harness".into())
            }
        }
        assert_eq!(
            published("ahp-session:/default", &Other).as_deref(),
            Some("my.agent+2-x:/default")
        );
        assert_eq!(published("ahp-proxy:/default", &Other), None);
        assert_eq!(
            published(&derived("ahp-session:/default"), &Other).as_deref(),
            Some("ahp-chat:/harness")
        );
        assert_eq!(published(&derived("ahp-proxy:/default"), &Other), None);
    }

    #[test]
    fn the_derived_chat_is_the_sessions_default_chat_under_either_session_name() {
        for session in ["ahp-proxy:/default", "ahp-session:/default"] {
            assert_eq!(
                published(&derived(session), &Host).as_deref(),
                Some("ahp-chat:/harness"),
                "{session}"
            );
        }
        let padded = format!(
            "{DERIVED_CHAT_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE.encode("ahp-session:/default")
        );
        assert_eq!(
            published(&padded, &Host).as_deref(),
            Some("ahp-chat:/harness")
        );
        // No default chat, no session, not base64, another chat id: not an alias.
        for uri in [
            derived("ahp-session:/mine"),
            derived("ahp-proxy:/mine"),
            derived("ahp-proxy:/nowhere"),
            format!("{DERIVED_CHAT_PREFIX}%%%"),
            DERIVED_CHAT_PREFIX.to_string(),
            format!("ahp-chat://peer/{}", &derived("ahp-proxy:/default")[19..]),
            format!("{}/x", derived("ahp-proxy:/default")),
        ] {
            assert_eq!(published(&uri, &Host), None, "{uri}");
        }
    }
}
