//! What can go wrong when a command talks to a running proxy: the step that failed (each has
//! a deadline), a name that means nothing, a refusal; and the exit status each one means.

use std::time::Duration;

use crate::untrusted::Untrusted;

/// How long each step may take: the TCP connection, the upgrade, `initialize`, `subscribe`,
/// the echo of a dispatched action.
pub const STEP_DEADLINE: Duration = Duration::from_secs(10);

/// What reaching a running proxy is made of, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The TCP connection (the name resolved, the connection accepted).
    Connect,
    /// The WebSocket upgrade (the access token is checked here).
    Upgrade,
    /// AHP's `initialize`.
    Initialize,
    /// `subscribe` to the default session, answered with its snapshot.
    Subscribe,
    /// A dispatched action (its wire type), answered by its echo.
    Request(&'static str),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Connect => f.write_str("the TCP connection"),
            Step::Upgrade => f.write_str("the WebSocket upgrade"),
            Step::Initialize => f.write_str("`initialize`"),
            Step::Subscribe => f.write_str("`subscribe`"),
            Step::Request(kind) => write!(f, "the request ({kind})"),
        }
    }
}

/// Why a command could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// `--url` is not a `ws://` URL.
    #[error("{url} is not a ws:// URL: {reason}")]
    BadUrl { url: String, reason: String },
    /// A step got no answer in time.
    #[error("{url}: {step} got no answer within {} s (is ahp-proxy running there? `--url` names another)", .after.as_secs())]
    TimedOut {
        url: String,
        step: Step,
        after: Duration,
    },
    /// A step was answered with a failure (the reason as the proxy or the system said it,
    /// with any token blanked).
    #[error("{url}: {step} failed: {reason} (is ahp-proxy running there? `--url` names another)")]
    Failed {
        url: String,
        step: Step,
        reason: String,
    },
    /// The WebSocket upgrade was refused with 401: no access token was presented, or not the
    /// proxy's.
    #[error("{url}: the access token is missing or wrong (the proxy refused the connection with 401): set AHP_PROXY_TOKEN to the proxy's token (its `ahp.token`, or the AHP_PROXY_TOKEN it was started with)")]
    Unauthorized { url: String },
    /// The proxy hung up.
    #[error("{url} closed the connection")]
    Closed { url: String },
    /// `initialize` was answered without the root's agent (which names the session).
    #[error("{url} named no agent at initialize")]
    NoAgent { url: String },
    /// `subscribe` was answered without the session's state.
    #[error("{url} sent no session snapshot")]
    NoSnapshot { url: String },
    /// The proxy refused the action.
    #[error("the proxy refused: {}", Untrusted(.0))]
    Refused(String),
    /// The name matches nothing; `guess` is the nearest one there is.
    #[error("nothing named {name:?} at {url}{} (`ahp-proxy status` lists every server and plugin)",
        .guess.as_deref().map(|g| format!("; did you mean {:?}?", Untrusted(g))).unwrap_or_default())]
    NotFound {
        name: String,
        url: String,
        guess: Option<String>,
    },
    /// The name matches several things (their ids).
    #[error("{name:?} names {} things; say `<plugin>/<server>` or give an id:\n{}", .ids.len(),
        .ids.iter().map(|id| format!("  {}", Untrusted(id))).collect::<Vec<_>>().join("\n"))]
    Ambiguous { name: String, ids: Vec<String> },
    /// No held tool call has this id (it was decided, or never was).
    #[error("no tool call {} waits for approval or review at {url} (`ahp-proxy approvals` lists those that do)", Untrusted(.id))]
    NotWaiting { id: String, url: String },
    /// A plugin was named where only a server will do.
    #[error("{name:?} is a plugin: start, stop and restart take a server (enable and disable take a plugin too)")]
    NotAServer { name: String },
}

impl ControlError {
    /// The command's exit status: 1 when the proxy answered and refused, 2 for everything
    /// else (nothing reachable, nothing named so).
    pub fn exit_status(&self) -> u8 {
        match self {
            ControlError::Refused(_) => 1,
            _ => 2,
        }
    }
}

/// Run `step` of talking to `url` within [`STEP_DEADLINE`]; its own failure is `Failed`.
pub async fn within<T, E: std::fmt::Display>(
    url: &str,
    step: Step,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, ControlError> {
    match tokio::time::timeout(STEP_DEADLINE, work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(ControlError::Failed {
            url: url.to_string(),
            step,
            reason: without_token(&error.to_string()),
        }),
        Err(_) => Err(ControlError::TimedOut {
            url: url.to_string(),
            step,
            after: STEP_DEADLINE,
        }),
    }
}

/// An error text with any `token=…` query value blanked (a URL in a transport error).
fn without_token(text: &str) -> String {
    match text.find("token=") {
        Some(at) => {
            let end = text[at..]
                .find(['&', ' ', '"', '\''])
                .map_or(text.len(), |e| at + e);
            format!("{}token=[redacted]{}", &text[..at], &text[end..])
        }
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_names_its_step_and_its_exit_status() {
        let timed_out = ControlError::TimedOut {
            url: "ws://127.0.0.1:1".into(),
            step: Step::Request("session/mcpServerStopRequested"),
            after: STEP_DEADLINE,
        };
        assert_eq!(
            timed_out.to_string(),
            "ws://127.0.0.1:1: the request (session/mcpServerStopRequested) got no answer within 10 s (is ahp-proxy running there? `--url` names another)"
        );
        assert_eq!(timed_out.exit_status(), 2);
        assert_eq!(ControlError::Refused("no".into()).exit_status(), 1);
        let not_found = ControlError::NotFound {
            name: "clok".into(),
            url: "ws://x".into(),
            guess: Some("clock".into()),
        };
        assert!(not_found
            .to_string()
            .starts_with("nothing named \"clok\" at ws://x; did you mean \"clock\"? ("));
        assert_eq!(
            without_token("GET ws://h/?token=secret&x=1 failed"),
            "GET ws://h/?token=[redacted]&x=1 failed"
        );
    }
}
