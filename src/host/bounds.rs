//! How big what a client may put into host state can be: its `clientId`, titles, session
//! URIs, working directories and every action it dispatches. Pure: each check returns why
//! a value is refused ([`OutOfBounds`]); callers turn that into `-32602` or a
//! `rejectionReason`.

use std::fmt;

use ahp_types::actions::StateAction;
use ahp_types::commands::CreateSessionParams;

use crate::jsonrpc::encoded_len;

/// Longest `clientId` (`initialize`, `reconnect`), in bytes. Ids are remembered for
/// `reconnect`, logged, and repeated in every action the client dispatches.
pub const MAX_CLIENT_ID_BYTES: usize = 256;
/// Longest session or chat title a client may set, in bytes (`session/titleChanged`,
/// `createSession`'s `config.title`).
pub const MAX_TITLE_BYTES: usize = 1024;
/// Longest URI a client may name for a new session, in bytes.
pub const MAX_SESSION_URI_BYTES: usize = 1024;
/// Longest working directory a client may give a new session, in bytes.
pub const MAX_WORKING_DIRECTORY_BYTES: usize = 4096;
/// Most plugins one client may publish in one session (`activeClient.customizations`): each
/// is a folder the host reads and watches.
pub const MAX_CLIENT_PLUGINS: usize = 64;
/// Largest action a client may dispatch, encoded as JSON (an active client's tool
/// definitions, a give-up's result); every dispatched action is kept in state and the
/// replay log.
pub const MAX_ACTION_BYTES: usize = 256 * 1024;

/// Why a value a client sent is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutOfBounds {
    /// `what` is empty.
    Empty(&'static str),
    /// Text `what` takes `bytes` bytes, more than `max`.
    TooLong {
        /// The field.
        what: &'static str,
        /// Its length.
        bytes: usize,
        /// The most allowed.
        max: usize,
    },
    /// `what` takes `bytes` bytes as JSON, more than `max`.
    TooLarge {
        /// The value.
        what: &'static str,
        /// Its encoded length.
        bytes: usize,
        /// The most allowed.
        max: usize,
    },
    /// One client publishes `count` plugins in a session, more than `max`.
    TooManyPlugins {
        /// How many.
        count: usize,
        /// The most allowed.
        max: usize,
    },
}

impl fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty(what) => write!(f, "{what} must not be empty"),
            Self::TooLong { what, bytes, max } => {
                write!(f, "{what} of {bytes} bytes is longer than {max}")
            }
            Self::TooLarge { what, bytes, max } => {
                write!(f, "{what} takes {bytes} bytes as JSON; at most {max}")
            }
            Self::TooManyPlugins { count, max } => write!(
                f,
                "activeClient.customizations has {count} plugins; a client may publish at most {max} in a session"
            ),
        }
    }
}

impl From<OutOfBounds> for String {
    fn from(refusal: OutOfBounds) -> Self {
        refusal.to_string()
    }
}

/// A `clientId` the host will remember: not empty and at most [`MAX_CLIENT_ID_BYTES`].
pub fn client_id(id: &str) -> Result<(), OutOfBounds> {
    if id.is_empty() {
        Err(OutOfBounds::Empty("clientId"))
    } else {
        text("clientId", id, MAX_CLIENT_ID_BYTES)
    }
}

/// A client-dispatched action small enough to keep: titles and display names within
/// [`MAX_TITLE_BYTES`], the whole action within [`MAX_ACTION_BYTES`].
pub fn action(action: &StateAction) -> Result<(), OutOfBounds> {
    match action {
        StateAction::SessionTitleChanged(a) => title(&a.title)?,
        StateAction::SessionActiveClientSet(a) => active_client(&a.active_client)?,
        _ => {}
    }
    let size = encoded_len(action);
    if size > MAX_ACTION_BYTES {
        return Err(OutOfBounds::TooLarge {
            what: "this action",
            bytes: size,
            max: MAX_ACTION_BYTES,
        });
    }
    Ok(())
}

/// A title within [`MAX_TITLE_BYTES`].
pub fn title(title: &str) -> Result<(), OutOfBounds> {
    text("title", title, MAX_TITLE_BYTES)
}

/// `createSession` parameters small enough to keep: the URI, title, first working directory
/// and active client.
pub fn new_session(params: &CreateSessionParams) -> Result<(), OutOfBounds> {
    text("channel", &params.channel, MAX_SESSION_URI_BYTES)?;
    if let Some(title) = params
        .config
        .as_ref()
        .and_then(|c| c.get("title"))
        .and_then(|t| t.as_str())
    {
        text("config.title", title, MAX_TITLE_BYTES)?;
    }
    if let Some(first) = params.working_directories.iter().flatten().next() {
        text("workingDirectories[0]", first, MAX_WORKING_DIRECTORY_BYTES)?;
    }
    if let Some(client) = &params.active_client {
        active_client(client)?;
        let size = encoded_len(client);
        if size > MAX_ACTION_BYTES {
            return Err(OutOfBounds::TooLarge {
                what: "activeClient",
                bytes: size,
                max: MAX_ACTION_BYTES,
            });
        }
    }
    Ok(())
}

/// An active client record within bounds: its display name within [`MAX_TITLE_BYTES`], at
/// most [`MAX_CLIENT_PLUGINS`] plugins.
fn active_client(client: &ahp_types::state::SessionActiveClient) -> Result<(), OutOfBounds> {
    if let Some(name) = &client.display_name {
        text("activeClient.displayName", name, MAX_TITLE_BYTES)?;
    }
    let plugins = client.customizations.as_ref().map_or(0, Vec::len);
    if plugins > MAX_CLIENT_PLUGINS {
        return Err(OutOfBounds::TooManyPlugins {
            count: plugins,
            max: MAX_CLIENT_PLUGINS,
        });
    }
    Ok(())
}

fn text(what: &'static str, value: &str, max: usize) -> Result<(), OutOfBounds> {
    if value.len() > max {
        Err(OutOfBounds::TooLong {
            what,
            bytes: value.len(),
            max,
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn action_of(value: serde_json::Value) -> StateAction {
        serde_json::from_value(value).expect("valid action")
    }

    #[test]
    fn client_ids_are_non_empty_and_short() {
        assert!(client_id("3f6c-1").is_ok());
        assert!(client_id(&"x".repeat(MAX_CLIENT_ID_BYTES)).is_ok());
        assert!(client_id("").is_err());
        let long = client_id(&"x".repeat(MAX_CLIENT_ID_BYTES + 1))
            .unwrap_err()
            .to_string();
        assert!(long.contains("longer than 256"), "{long}");
    }

    #[test]
    fn titles_and_actions_have_a_size() {
        let title =
            |n: usize| action_of(json!({"type": "session/titleChanged", "title": "t".repeat(n)}));
        assert!(action(&title(MAX_TITLE_BYTES)).is_ok());
        assert!(action(&title(MAX_TITLE_BYTES + 1))
            .unwrap_err()
            .to_string()
            .contains("title of 1025 bytes"));
        let tools = |n: usize| {
            action_of(json!({"type": "session/activeClientSet", "activeClient": {
                "clientId": "c", "tools": [{"name": "t", "description": "d".repeat(n),
                "inputSchema": {"type": "object"}}]}}))
        };
        assert!(action(&tools(1000)).is_ok());
        assert!(action(&tools(MAX_ACTION_BYTES))
            .unwrap_err()
            .to_string()
            .contains("at most 262144"));
        let named = action_of(json!({"type": "session/activeClientSet", "activeClient": {
            "clientId": "c", "displayName": "n".repeat(MAX_TITLE_BYTES + 1), "tools": []}}));
        assert!(action(&named)
            .unwrap_err()
            .to_string()
            .contains("displayName"));
        let plugins = |n: usize| {
            let list: Vec<_> = (0..n)
                .map(|i| json!({"type": "plugin", "id": format!("p{i}"), "uri": "file:///p", "name": "p"}))
                .collect();
            action_of(json!({"type": "session/activeClientSet", "activeClient": {
                "clientId": "c", "tools": [], "customizations": list}}))
        };
        assert!(action(&plugins(MAX_CLIENT_PLUGINS)).is_ok());
        assert!(action(&plugins(MAX_CLIENT_PLUGINS + 1))
            .unwrap_err()
            .to_string()
            .contains("at most 64"));
    }

    #[test]
    fn new_sessions_have_short_uris_titles_and_directories() {
        let params = |extra: serde_json::Value| -> CreateSessionParams {
            let mut base = json!({"channel": "ahp-proxy:/s"});
            base.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value(base).unwrap()
        };
        assert!(new_session(&params(json!({}))).is_ok());
        let long_uri = format!("ahp-proxy:/{}", "s".repeat(MAX_SESSION_URI_BYTES));
        assert!(new_session(&params(json!({"channel": long_uri})))
            .unwrap_err()
            .to_string()
            .contains("channel"));
        let title = "t".repeat(MAX_TITLE_BYTES + 1);
        assert!(new_session(&params(json!({"config": {"title": title}})))
            .unwrap_err()
            .to_string()
            .contains("config.title"));
        let dir = format!("file:///{}", "d".repeat(MAX_WORKING_DIRECTORY_BYTES));
        assert!(new_session(&params(json!({"workingDirectories": [dir]})))
            .unwrap_err()
            .to_string()
            .contains("workingDirectories"));
    }
}
