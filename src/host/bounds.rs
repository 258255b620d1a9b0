//! How big what a client may put into host state can be: its `clientId`, titles, session
//! URIs, working directories and every action it dispatches. Pure: each check returns why
//! a value is refused; callers turn that into `-32602` or a `rejectionReason`.

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

/// A `clientId` the host will remember: not empty and at most [`MAX_CLIENT_ID_BYTES`].
pub fn client_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        Err("clientId must not be empty".into())
    } else if id.len() > MAX_CLIENT_ID_BYTES {
        Err(format!(
            "clientId of {} bytes is longer than {MAX_CLIENT_ID_BYTES}",
            id.len()
        ))
    } else {
        Ok(())
    }
}

/// A client-dispatched action small enough to keep: titles and display names within
/// [`MAX_TITLE_BYTES`], the whole action within [`MAX_ACTION_BYTES`].
pub fn action(action: &StateAction) -> Result<(), String> {
    match action {
        StateAction::SessionTitleChanged(a) => title(&a.title)?,
        StateAction::SessionActiveClientSet(a) => active_client(&a.active_client)?,
        _ => {}
    }
    let size = encoded_len(action);
    if size > MAX_ACTION_BYTES {
        return Err(format!(
            "this action takes {size} bytes as JSON; a client action may take at most {MAX_ACTION_BYTES}"
        ));
    }
    Ok(())
}

/// A title within [`MAX_TITLE_BYTES`].
pub fn title(title: &str) -> Result<(), String> {
    text("title", title, MAX_TITLE_BYTES)
}

/// `createSession` parameters small enough to keep: the URI, title, first working directory
/// and active client.
pub fn new_session(params: &CreateSessionParams) -> Result<(), String> {
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
            return Err(format!(
                "activeClient takes {size} bytes as JSON; at most {MAX_ACTION_BYTES}"
            ));
        }
    }
    Ok(())
}

/// An active client record within bounds: its display name within [`MAX_TITLE_BYTES`], at
/// most [`MAX_CLIENT_PLUGINS`] plugins.
fn active_client(client: &ahp_types::state::SessionActiveClient) -> Result<(), String> {
    if let Some(name) = &client.display_name {
        text("activeClient.displayName", name, MAX_TITLE_BYTES)?;
    }
    let plugins = client.customizations.as_ref().map_or(0, Vec::len);
    if plugins > MAX_CLIENT_PLUGINS {
        return Err(format!(
            "activeClient.customizations has {plugins} plugins; a client may publish at most {MAX_CLIENT_PLUGINS} in a session"
        ));
    }
    Ok(())
}

fn text(what: &str, value: &str, max: usize) -> Result<(), String> {
    if value.len() > max {
        Err(format!(
            "{what} of {} bytes is longer than {max}",
            value.len()
        ))
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
        let long = client_id(&"x".repeat(MAX_CLIENT_ID_BYTES + 1)).unwrap_err();
        assert!(long.contains("longer than 256"), "{long}");
    }

    #[test]
    fn titles_and_actions_have_a_size() {
        let title =
            |n: usize| action_of(json!({"type": "session/titleChanged", "title": "t".repeat(n)}));
        assert!(action(&title(MAX_TITLE_BYTES)).is_ok());
        assert!(action(&title(MAX_TITLE_BYTES + 1))
            .unwrap_err()
            .contains("title of 1025 bytes"));
        let tools = |n: usize| {
            action_of(json!({"type": "session/activeClientSet", "activeClient": {
                "clientId": "c", "tools": [{"name": "t", "description": "d".repeat(n),
                "inputSchema": {"type": "object"}}]}}))
        };
        assert!(action(&tools(1000)).is_ok());
        assert!(action(&tools(MAX_ACTION_BYTES))
            .unwrap_err()
            .contains("at most 262144"));
        let named = action_of(json!({"type": "session/activeClientSet", "activeClient": {
            "clientId": "c", "displayName": "n".repeat(MAX_TITLE_BYTES + 1), "tools": []}}));
        assert!(action(&named).unwrap_err().contains("displayName"));
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
            .contains("at most 64"));
    }

    #[test]
    fn new_sessions_have_short_uris_titles_and_directories() {
        let params = |extra: serde_json::Value| -> CreateSessionParams {
            let mut base = json!({"channel": "ahp-session:/s"});
            base.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::from_value(base).unwrap()
        };
        assert!(new_session(&params(json!({}))).is_ok());
        let long_uri = format!("ahp-session:/{}", "s".repeat(MAX_SESSION_URI_BYTES));
        assert!(new_session(&params(json!({"channel": long_uri})))
            .unwrap_err()
            .contains("channel"));
        let title = "t".repeat(MAX_TITLE_BYTES + 1);
        assert!(new_session(&params(json!({"config": {"title": title}})))
            .unwrap_err()
            .contains("config.title"));
        let dir = format!("file:///{}", "d".repeat(MAX_WORKING_DIRECTORY_BYTES));
        assert!(new_session(&params(json!({"workingDirectories": [dir]})))
            .unwrap_err()
            .contains("workingDirectories"));
    }
}
