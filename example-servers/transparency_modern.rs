//! The `transparency-modern` example server: a modern-only (MCP 2026-07-28) twin of
//! `transparency`, every message byte-crafted, for the byte-transparency tests of modern traffic.
//!
//! It answers `server/discover` listing only 2026-07-28 (so a dual-era client speaks modern to
//! it), needs no handshake, puts `resultType` and cache hints in its results, and echoes what
//! a request carried in `_meta` raw (`echo_meta`, `x-vendor/echo`), so the envelope a proxy
//! forwards is visible byte for byte. Keys are out of order, numbers written as `0.7`, `1e3`,
//! `-0`, `1.50` and `12345678901234567890`, strings carry escapes (`\u00e9`, `\/`).

use serde_json::Value;

use std::sync::Mutex;

use crate::raw::{lock, quote, Call, Handler, Reply};
use crate::transparency::fill;

/// The only protocol version it speaks.
const MODERN: &str = "2026-07-28";

const DISCOVER: &str = r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"prompts":{},"resources":{},"extensions":{"x-vendor\/ext":{"z":1e3,"a":0.7},"io.modelcontextprotocol/tasks":{}},"x-capability":{"b":true,"a":null}},"instructions":"Modern bytes: caf\u00e9, \/path, 1e3.","resultType":"complete","ttlMs":60000,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"version":"2.0.0","name":"ahp-proxy-example-transparency-modern","title":"Modern \u00e9prouvette"},"x-discover":{"z":1,"a":1e3}},"x-discover-extra":12345678901234567890}"#;

const TOOLS: &str = r#"{"tools":[{"name":"echo_meta","title":"Echo _meta","description":"Echoes its arguments and the request's _meta, raw.","inputSchema":{"type":"object","properties":{"zeta":{"type":"string","description":"caf\u00e9"},"alpha":{"type":"number","default":0.7}}},"annotations":{"readOnlyHint":true},"_meta":{"x-vendor\/order":["z","a"],"x-ratio":0.7},"x-tool-extra":{"kept":true,"big":12345678901234567890}},{"name":"progress","description":"Sends progress 0, 50 and 100 of 100 for the request's token, then answers.","inputSchema":{"type":"object","properties":{}}},{"name":"fail","description":"Answers with a JSON-RPC error that carries data.","inputSchema":{"type":"object","properties":{}}},{"name":"slow","description":"Runs as a task (the tasks extension): working on the first poll, completed with its arguments on the next.","inputSchema":{"type":"object","properties":{"zeta":{"type":"string"}}}}],"resultType":"complete","ttlMs":30000,"cacheScope":"public","_meta":{"x-list":{"page":1,"z":0.7}},"x-tools-extra":[1e3,0.7,-0,12345678901234567890]}"#;

const ECHOED_META: &str = r#"{"content":[{"type":"text","text":"caf\u00e9 \/ echoed","_meta":{"x-block":{"b":1,"a":2}}}],"structuredContent":{"zulu":"last","arguments":$ARGUMENTS,"meta":$META},"isError":false,"resultType":"complete","_meta":{"x-result":{"z":true,"a":false}},"x-result-extra":1.50}"#;

const PROGRESS: &str = r#"{"jsonrpc":"2.0","params":{"progressToken":$TOKEN,"progress":$STEP,"total":100,"message":"step $STEP of 100","_meta":{"x-progress":0.7}},"method":"notifications/progress"}"#;
const PROGRESSED: &str = r#"{"content":[{"type":"text","text":"progressed"}],"resultType":"complete","_meta":{"x-steps":[0,50,100]}}"#;
const FAIL: &str = r#"{"jsonrpc":"2.0","id":$ID,"error":{"code":-32603,"message":"Failed on purpose: caf\u00e9","data":{"zeta":1,"alpha":0.7,"nested":{"b":[],"a":{}}}}}"#;

const PROMPTS: &str = r#"{"prompts":[{"name":"greet","title":"Greet","description":"Greets caf\u00e9 style.","arguments":[{"name":"who","required":true},{"name":"style","required":false,"x-argument":0.7}],"_meta":{"x-prompt":[3,1,2]}}],"resultType":"complete","ttlMs":1e3,"cacheScope":"private","x-prompts-extra":{"z":0,"a":-0}}"#;
const PROMPT: &str = r#"{"description":"A greeting","messages":[{"role":"user","content":{"type":"text","text":$TEXT,"_meta":{"x-message":1e3}}}],"resultType":"complete","_meta":{"x-get":true}}"#;

const RESOURCES: &str = r#"{"resources":[{"uri":"modern://static/one","name":"one","title":"One","mimeType":"text/plain","annotations":{"priority":0.7,"audience":["assistant","user"]},"_meta":{"x-resource":{"z":1,"a":2}}}],"resultType":"complete","ttlMs":0,"cacheScope":"public","_meta":{"x-resources":-0}}"#;
const READ_ONE: &str = r#"{"contents":[{"uri":"modern://static/one","mimeType":"text/plain","text":"caf\u00e9 \/ one\n","_meta":{"x-content":{"z":1,"a":2}}}],"resultType":"complete","ttlMs":1e3,"cacheScope":"private","x-read-extra":-0}"#;
const NOT_FOUND: &str = r#"{"jsonrpc":"2.0","id":$ID,"error":{"code":-32602,"message":"Resource not found","data":{"uri":$URI}}}"#;
const UNSUPPORTED: &str = r#"{"jsonrpc":"2.0","id":$ID,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":$REQUESTED}}}"#;
/// The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28).
const TASKS: &str = "io.modelcontextprotocol/tasks";
const TASK: &str = r#""taskId":"$TASK","status":"$STATUS","statusMessage":"$MESSAGE","createdAt":"2026-07-28T00:00:00Z","lastUpdatedAt":"$UPDATED","ttlMs":60000,"pollIntervalMs":250"#;
const TASK_CREATED: &str = r#"{"resultType":"task",$TASK,"_meta":{"x-task":1e3}}"#;
const TASK_GOT: &str = r#"{"resultType":"complete",$TASK$RESULT}"#;
const TASK_RESULT: &str = r#","result":{"content":[{"type":"text","text":"slow caf\u00e9"}],"structuredContent":{"arguments":$ARGUMENTS},"isError":false}"#;
const ACK: &str = r#"{"resultType":"complete","_meta":{"x-ack":0.7}}"#;
const NO_TASK: &str = r#"{"jsonrpc":"2.0","id":$ID,"error":{"code":-32602,"message":"Failed to retrieve task: Task not found","data":{"taskId":$TASKID}}}"#;
const NEEDS_TASKS: &str = r#"{"jsonrpc":"2.0","id":$ID,"error":{"code":-32021,"message":"Missing required client capability","data":{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#;
const ECHO: &str = r#"{"result":$PARAMS,"id":$ID,"jsonrpc":"2.0"}"#;

/// The modern transparency server: stateless, so one handler serves every request; its
/// tasks are kept for the life of the process.
#[derive(Default)]
pub struct TransparencyModern {
    /// Put before every task id (`--task-prefix`): two of these servers behind one proxy
    /// give distinct ids.
    prefix: String,
    tasks: Mutex<Vec<Task>>,
}

impl TransparencyModern {
    /// A server whose task ids start with `prefix`.
    pub fn new(prefix: String) -> Self {
        Self {
            prefix,
            tasks: Mutex::default(),
        }
    }
}

/// One task of `slow`.
struct Task {
    id: String,
    /// `working`, `completed` or `cancelled`.
    status: &'static str,
    /// `slow`'s arguments, raw: its result.
    arguments: String,
    /// Polls so far: the first says `working`, the next completes it.
    polls: u32,
}

impl Task {
    fn text(&self, template: &str) -> String {
        let (message, updated) = match self.status {
            "working" => ("queued", "2026-07-28T00:00:00Z"),
            "completed" => ("done", "2026-07-28T00:00:01Z"),
            _ => ("cancelled on request", "2026-07-28T00:00:01Z"),
        };
        let result = match self.status {
            "completed" => fill(TASK_RESULT, &[("$ARGUMENTS", &self.arguments)]),
            _ => String::new(),
        };
        let task = fill(
            TASK,
            &[
                ("$TASK", &self.id),
                ("$STATUS", self.status),
                ("$MESSAGE", message),
                ("$UPDATED", updated),
            ],
        );
        fill(template, &[("$TASK", &task), ("$RESULT", &result)])
    }
}

impl Handler for TransparencyModern {
    async fn request(&self, call: Call) -> Reply {
        let params = call.params();
        let id = call.id.clone();
        let asked = &params["_meta"]["io.modelcontextprotocol/protocolVersion"];
        if asked.as_str() != Some(MODERN) {
            let requested = call
                .param_raw(&["_meta", "io.modelcontextprotocol/protocolVersion"])
                .unwrap_or_else(|| "null".into());
            return Reply::Message(fill(
                UNSUPPORTED,
                &[("$ID", &id), ("$REQUESTED", &requested)],
            ));
        }
        match call.method.as_str() {
            "server/discover" => Reply::Result(DISCOVER.into()),
            "tools/list" => Reply::Result(TOOLS.into()),
            "tools/call" if params["name"] == "slow" => self.create_task(&call, &params),
            "tools/call" => call_tool(&call, &params),
            "tasks/get" | "tasks/cancel" | "tasks/update" => self.task(&call, &params),
            "prompts/list" => Reply::Result(PROMPTS.into()),
            "prompts/get" => match params["name"].as_str() {
                Some("greet") => {
                    let who = params["arguments"]["who"].as_str().unwrap_or("nobody");
                    Reply::Result(PROMPT.replace("$TEXT", &quote(&format!("Hello, {who}!"))))
                }
                name => Reply::Error(-32602, format!("Unknown prompt: {}", name.unwrap_or(""))),
            },
            "resources/list" => Reply::Result(RESOURCES.into()),
            "resources/read" => match params["uri"].as_str().unwrap_or_default() {
                "modern://static/one" => Reply::Result(READ_ONE.into()),
                uri => Reply::Message(fill(NOT_FOUND, &[("$ID", &id), ("$URI", &quote(uri))])),
            },
            "x-vendor/echo" => {
                let params = call.params_raw().unwrap_or("{}");
                Reply::Message(fill(ECHO, &[("$PARAMS", params), ("$ID", &id)]))
            }
            method => Reply::Error(-32601, format!("Method not found: {method}")),
        }
    }
}

/// Whether the request declared the tasks extension in its capabilities.
fn declares_tasks(params: &Value) -> bool {
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"][TASKS].is_object()
}

impl TransparencyModern {
    /// `slow`: a task, for a client that declared the extension.
    fn create_task(&self, call: &Call, params: &Value) -> Reply {
        if !declares_tasks(params) {
            return Reply::Message(NEEDS_TASKS.replace("$ID", &call.id));
        }
        let mut tasks = lock(&self.tasks);
        let task = Task {
            id: format!("{}task-{}", self.prefix, tasks.len() + 1),
            status: "working",
            arguments: call
                .param_raw(&["arguments"])
                .unwrap_or_else(|| "{}".into()),
            polls: 0,
        };
        let reply = task.text(TASK_CREATED);
        tasks.push(task);
        Reply::Result(reply)
    }

    /// `tasks/get` (the second poll of a working task completes it), `tasks/cancel` and
    /// `tasks/update` (acknowledged).
    fn task(&self, call: &Call, params: &Value) -> Reply {
        if !declares_tasks(params) {
            return Reply::Message(NEEDS_TASKS.replace("$ID", &call.id));
        }
        let wanted = params["taskId"].as_str().unwrap_or_default();
        let mut tasks = lock(&self.tasks);
        let Some(task) = tasks.iter_mut().find(|t| t.id == wanted) else {
            let asked = call.param_raw(&["taskId"]).unwrap_or_else(|| "null".into());
            return Reply::Message(fill(NO_TASK, &[("$ID", &call.id), ("$TASKID", &asked)]));
        };
        match call.method.as_str() {
            "tasks/get" => {
                if task.status == "working" {
                    task.polls += 1;
                    if task.polls > 1 {
                        task.status = "completed";
                    }
                }
                Reply::Result(task.text(TASK_GOT))
            }
            "tasks/cancel" => {
                if task.status == "working" {
                    task.status = "cancelled";
                }
                Reply::Result(ACK.into())
            }
            _ => Reply::Result(ACK.into()),
        }
    }
}

fn call_tool(call: &Call, params: &Value) -> Reply {
    match params["name"].as_str().unwrap_or_default() {
        "echo_meta" => {
            let arguments = call
                .param_raw(&["arguments"])
                .unwrap_or_else(|| "{}".into());
            let meta = call.param_raw(&["_meta"]).unwrap_or_else(|| "null".into());
            Reply::Result(fill(
                ECHOED_META,
                &[("$ARGUMENTS", &arguments), ("$META", &meta)],
            ))
        }
        "progress" => {
            if let Some(token) = call.param_raw(&["_meta", "progressToken"]) {
                for step in ["0", "50", "100"] {
                    call.send(fill(PROGRESS, &[("$TOKEN", &token), ("$STEP", step)]));
                }
            }
            Reply::Result(PROGRESSED.into())
        }
        "fail" => Reply::Message(FAIL.replace("$ID", &call.id)),
        name => Reply::Error(-32602, format!("Unknown tool: {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_is_json_once_filled() {
        let values = [
            ("$ARGUMENTS", "{}"),
            ("$META", "{}"),
            ("$TOKEN", "1"),
            ("$STEP", "0"),
            ("$ID", "1"),
            ("$TEXT", "\"t\""),
            ("$URI", "\"u\""),
            ("$REQUESTED", "null"),
            ("$PARAMS", "{}"),
            ("$TASKID", "\"t\""),
        ];
        for template in [
            DISCOVER,
            TOOLS,
            ECHOED_META,
            PROGRESS,
            PROGRESSED,
            FAIL,
            PROMPTS,
            PROMPT,
            RESOURCES,
            READ_ONE,
            NOT_FOUND,
            UNSUPPORTED,
            ECHO,
            ACK,
            NO_TASK,
            NEEDS_TASKS,
        ] {
            let text = fill(template, &values);
            assert!(
                serde_json::from_str::<Value>(&text).is_ok(),
                "not JSON: {text}"
            );
        }
        for status in ["working", "completed", "cancelled"] {
            let task = Task {
                id: "t".into(),
                status,
                arguments: "{}".into(),
                polls: 0,
            };
            for template in [TASK_CREATED, TASK_GOT] {
                let text = task.text(template);
                assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
            }
        }
    }
}
