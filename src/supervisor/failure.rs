//! Why a server is in error: one variant per error type the supervisor reports (the AHP
//! `errorType`, mapped by the host), its text the message users see.

/// A failed start or run. Messages never name the launch spec (its command, args, env or
/// URL may be secrets).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    /// The launch spec cannot be used (a problem in the file that declares the server, or
    /// a header that cannot be sent).
    #[error("{0}")]
    Config(String),
    /// The program could not be started.
    #[error("{0}")]
    Spawn(String),
    /// It started, but the MCP handshake failed (or it exited before finishing it).
    #[error("{0}")]
    StartFailed(String),
    /// It did not finish `initialize` and `tools/list` within the start timeout.
    #[error("{0}")]
    Timeout(String),
    /// It was running, and exited, hung up or stopped answering.
    #[error("{0}")]
    Exited(String),
    /// It broke the stdio framing (a line too long to be read).
    #[error("{0}")]
    Protocol(String),
    /// It failed this many times in a row: not restarted until a start is requested.
    #[error(
        "failed {failures} {} in a row ({}); not restarting until a start is requested. Last failure: {last}",
        if *failures == 1 { "time" } else { "times" },
        last.kind()
    )]
    CrashLoop {
        /// Failures in a row.
        failures: u32,
        /// The last one.
        last: Box<Failure>,
    },
}

impl Failure {
    /// The short machine-readable tag: `config`, `spawn`, `startFailed`, `timeout`,
    /// `exited`, `protocol`, `crashLoop`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config(_) => "config",
            Self::Spawn(_) => "spawn",
            Self::StartFailed(_) => "startFailed",
            Self::Timeout(_) => "timeout",
            Self::Exited(_) => "exited",
            Self::Protocol(_) => "protocol",
            Self::CrashLoop { .. } => "crashLoop",
        }
    }

    /// The same failure with its text (and its last failure's) passed through `f`.
    pub fn map_text(self, f: &dyn Fn(String) -> String) -> Self {
        match self {
            Self::Config(t) => Self::Config(f(t)),
            Self::Spawn(t) => Self::Spawn(f(t)),
            Self::StartFailed(t) => Self::StartFailed(f(t)),
            Self::Timeout(t) => Self::Timeout(f(t)),
            Self::Exited(t) => Self::Exited(f(t)),
            Self::Protocol(t) => Self::Protocol(f(t)),
            Self::CrashLoop { failures, last } => Self::CrashLoop {
                failures,
                last: Box::new(last.map_text(f)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_loop_names_the_last_failure_and_its_kind() {
        let failure = Failure::CrashLoop {
            failures: 3,
            last: Box::new(Failure::Spawn(
                "cannot start the server: command not found".into(),
            )),
        };
        assert_eq!(failure.kind(), "crashLoop");
        assert_eq!(
            failure.to_string(),
            "failed 3 times in a row (spawn); not restarting until a start is requested. Last failure: cannot start the server: command not found"
        );
    }
}
