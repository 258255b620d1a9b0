//! MCP tasks on the wire (SEP-1686): the status a task reports, read from its raw text.
//! Statuses this proxy does not know are kept as written.

/// Where a task stands (`tasks/get`, `notifications/tasks/status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStatus {
    /// `working`.
    Working,
    /// `input_required`.
    InputRequired,
    /// `completed`: its result can be read.
    Completed,
    /// `failed`.
    Failed,
    /// `cancelled`.
    Cancelled,
    /// A status this proxy does not know.
    Other(String),
}

impl TaskStatus {
    /// The status written `text`.
    pub fn parse(text: &str) -> Self {
        match text {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            other => Self::Other(other.to_string()),
        }
    }

    /// Its name on the wire.
    pub fn name(&self) -> &str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Other(other) => other,
        }
    }

    /// Whether the task has ended without a result to read (`failed`, `cancelled`).
    pub fn ended_without_result(&self) -> bool {
        matches!(self, Self::Failed | Self::Cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_unknown_ones_are_kept() {
        for name in [
            "working",
            "input_required",
            "completed",
            "failed",
            "cancelled",
        ] {
            assert_eq!(TaskStatus::parse(name).name(), name);
        }
        assert_eq!(
            TaskStatus::parse("paused"),
            TaskStatus::Other("paused".into())
        );
        assert!(TaskStatus::Failed.ended_without_result());
        assert!(!TaskStatus::Completed.ended_without_result());
    }
}
