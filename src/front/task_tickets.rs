//! Mirrored tool calls that went on as tasks: parked in the hub (the oldest forgotten first
//! beyond a bound) until their task ends — with its result when the harness reads it through
//! the proxy, else with a note — or fails or is cancelled.

use std::time::Duration;

use super::hub::Hub;
use crate::mcp::task::TaskStatus;
use crate::mirror::{Outcome, Ticket};

/// How long a completed task's mirrored call waits for the harness to read its result.
pub const TASK_RESULT_GRACE: Duration = Duration::from_secs(10);

impl Hub {
    /// A mirrored call went on as task `task` of server `server`: it ends with the task.
    pub fn park_task_ticket(&self, server: &str, task: &str, ticket: Ticket) {
        let evicted = self
            .tables()
            .task_tickets
            .park((server.to_string(), task.to_string()), ticket);
        // Dropped outside the lock: a dropped ticket reports its call cancelled.
        drop(evicted);
    }

    /// Task `task` of server `server` reached `status` (from `tasks/get` or its status
    /// notification). A failed or cancelled task ends its mirrored call at once; a completed
    /// one ends with its result when the harness reads it (`tasks/result`), else after
    /// [`TASK_RESULT_GRACE`] with a note that it completed.
    pub fn task_status(&self, server: &str, task: &str, status: TaskStatus) {
        match status {
            status if status.ended_without_result() => self.end_task_ticket(server, task, &status),
            TaskStatus::Completed => {
                let hub = self.this.clone();
                let (server, task) = (server.to_string(), task.to_string());
                tokio::spawn(async move {
                    tokio::time::sleep(TASK_RESULT_GRACE).await;
                    if let Some(hub) = hub.upgrade() {
                        hub.end_task_ticket(&server, &task, &TaskStatus::Completed);
                    }
                });
            }
            _ => {}
        }
    }

    fn take_task_ticket(&self, server: &str, task: &str) -> Option<Ticket> {
        self.tables()
            .task_tickets
            .take(&(server.to_string(), task.to_string()))
    }

    /// Task `task` of server `server` ended with `answer` (a `tasks/result` answer).
    pub fn finish_task_ticket(&self, server: &str, task: &str, answer: &str) {
        if let Some(ticket) = self.take_task_ticket(server, task) {
            ticket.finish(Outcome::Raw(answer.to_string()));
        }
    }

    /// Task `task` of server `server` ended (`status`) without its result being read
    /// through the proxy: its mirrored call ends so.
    fn end_task_ticket(&self, server: &str, task: &str, status: &TaskStatus) {
        if let Some(ticket) = self.take_task_ticket(server, task) {
            ticket.finish(match status {
                TaskStatus::Cancelled => Outcome::Cancelled,
                TaskStatus::Completed => Outcome::Result(serde_json::json!({"content": [{"type": "text",
                    "text": "The task completed; the harness did not read its result through the proxy."}]})),
                other => Outcome::Failed(format!("the task ended {}", other.name())),
            });
        }
    }
}
