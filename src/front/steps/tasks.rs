//! Tasks through the front (SEP-1686 of 2025-11-25, and the 2026-07-28 Tasks extension): a
//! call answered with a task records who owns it and parks its mirrored call with the task;
//! `tasks/get` and `tasks/result` answers end that mirrored call when the task ended. A task
//! made for a modern request is handed out under a handle the proxy mints (`TaskHandle`).

use crate::front::answers::INTERNAL_ERROR;
use crate::front::exchange::{Context, Course, Flow, Step};
use crate::mcp::message::{self, Kind, Message};
use crate::mcp::task::TaskStatus;

/// The answer may create a task: its owner is recorded, and the call's mirror waits for the
/// task's end. `modern`: the request was a 2026-07-28 one, whose answer may also be the Tasks
/// extension's `CreateTaskResult` (looked for only then: this runs on every call's answer).
pub struct TaskCreation {
    pub modern: bool,
}

impl Step for TaskCreation {
    fn answer(&mut self, x: &mut Context, message: Message) -> Flow {
        let legacy = created_task(&message);
        let modern = match (&legacy, self.modern) {
            (None, true) => created_modern_task(&message),
            _ => None,
        };
        let Some(task) = legacy.as_ref().or(modern.as_ref()) else {
            return Flow::Next(message);
        };
        let handed_out = match &modern {
            None => {
                let registry = &mut x.hub().tables().registry;
                registry.task_created(&x.server, task, x.harness);
                message
            }
            Some(raw) => {
                // Handed out under a handle only the proxy mints: no randomness, no task.
                let Some(handle) = crate::unguessable::id() else {
                    return Flow::Divert(Course::Refuse {
                        code: INTERNAL_ERROR,
                        message: "the proxy could not mint a task handle (no randomness)".into(),
                    });
                };
                let registry = &mut x.hub().tables().registry;
                registry.modern_task_created(&x.server, raw, &handle);
                with_task_id(message, raw, &handle)
            }
        };
        // The call goes on as a task: its mirror ends with the task's result.
        if let Some(ticket) = x.ticket.take() {
            x.hub().park_task_ticket(&x.server, task, ticket);
        }
        Flow::Next(handed_out)
    }
}

/// A modern task's answers and the messages about it, its server's id replaced by the
/// handle the harness holds (`taskId` members at any depth, `related-task` included).
pub struct TaskHandle {
    /// The server's id of the task.
    pub raw: String,
    /// The handle the harness named it by.
    pub handle: String,
}

impl Step for TaskHandle {
    fn related(&mut self, _x: &Context, message: Message) -> Option<Message> {
        Some(with_task_id(message, &self.raw, &self.handle))
    }

    fn answer(&mut self, _x: &mut Context, message: Message) -> Flow {
        Flow::Next(with_task_id(message, &self.raw, &self.handle))
    }
}

/// `message` with every string `taskId` member that is `from` made `to`.
pub fn with_task_id(message: Message, from: &str, to: &str) -> Message {
    let renamed = message::rename_members(message.text(), &["taskId"], |id| {
        (id == from).then(|| to.to_string())
    });
    match renamed.map(Message::parse) {
        Some(Ok(renamed)) => renamed,
        _ => message,
    }
}

/// A `tasks/get` answer: its status may end the task's mirrored call.
pub struct TaskStatusRead;

impl Step for TaskStatusRead {
    fn answer(&mut self, x: &mut Context, message: Message) -> Flow {
        if let Some((task, status)) = reported_status(&message) {
            match inline_result(&message) {
                // 2026-07-28: a completed task carries its result.
                Some(result) if status == TaskStatus::Completed => {
                    let answer = format!(r#"{{"jsonrpc":"2.0","id":0,"result":{result}}}"#);
                    x.hub().finish_task_ticket(&x.server, &task, &answer);
                }
                _ => x.hub().task_status(&x.server, &task, status),
            }
        }
        Flow::Next(message)
    }
}

/// The `result` a 2026-07-28 `tasks/get` answer inlines (raw).
fn inline_result(answer: &Message) -> Option<&str> {
    let span = answer.find(&["result"])?;
    Some(answer.slice(span)).filter(|raw| raw.starts_with('{'))
}

/// A `tasks/result` answer for task `0`: the task's mirrored call ends with it.
pub struct TaskResult(pub String);

impl Step for TaskResult {
    fn answer(&mut self, x: &mut Context, message: Message) -> Flow {
        x.hub()
            .finish_task_ticket(&x.server, &self.0, message.text());
        Flow::Next(message)
    }
}

/// The task a result created (`result.task.taskId`).
pub fn created_task(answer: &Message) -> Option<String> {
    (answer.kind() == Kind::Result)
        .then(|| answer.string(&["task", "taskId"]))
        .flatten()
        .map(|task| task.into_owned())
}

/// The task a 2026-07-28 result created (`resultType: "task"`, its `taskId`).
pub fn created_modern_task(answer: &Message) -> Option<String> {
    let is_task = answer.kind() == Kind::Result
        && answer.string(&["resultType"]).is_some_and(|t| t == "task");
    is_task
        .then(|| answer.string(&["taskId"]))
        .flatten()
        .map(|task| task.into_owned())
}

/// The task and status a `tasks/get` result reports.
pub fn reported_status(answer: &Message) -> Option<(String, TaskStatus)> {
    if answer.kind() != Kind::Result {
        return None;
    }
    let task = answer.string(&["taskId"])?.into_owned();
    let status = TaskStatus::parse(&answer.string(&["status"])?);
    Some((task, status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> Message {
        Message::parse(text.to_string()).unwrap()
    }

    #[test]
    fn created_tasks_and_reported_statuses_are_read_from_the_raw_answer() {
        let created = msg(
            r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-1","status":"working"}}}"#,
        );
        assert_eq!(created_task(&created).as_deref(), Some("t-1"));
        assert_eq!(
            created_task(&msg(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#)),
            None
        );
        let got = msg(r#"{"jsonrpc":"2.0","id":2,"result":{"taskId":"t-1","status":"failed"}}"#);
        assert_eq!(
            reported_status(&got),
            Some(("t-1".to_string(), TaskStatus::Failed))
        );
        let refused =
            msg(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"no task"}}"#);
        assert_eq!(reported_status(&refused), None);
        assert_eq!(created_task(&refused), None);
        let modern = msg(
            r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","taskId":"m-1","status":"working"}}"#,
        );
        assert_eq!(created_modern_task(&modern).as_deref(), Some("m-1"));
        assert_eq!(created_task(&modern), None);
        let complete = msg(
            r#"{"jsonrpc":"2.0","id":4,"result":{"resultType":"complete","taskId":"m-1","status":"completed","result":{"content":[]}}}"#,
        );
        assert_eq!(created_modern_task(&complete), None);
        assert_eq!(inline_result(&complete), Some(r#"{"content":[]}"#));
    }
}
