//! The `transparency` example server: every message is byte-crafted JSON, so a proxy that
//! re-serializes anything is caught (`tests/transparency.rs` compares bytes).
//!
//! Keys are out of alphabetical order at every level, unknown fields sit at every level
//! (`x-…`, `_meta`, `execution`), numbers are written as `0.7`, `1e3`, `-0`, `1.50` and
//! `12345678901234567890`, strings carry escapes (`\u00e9`, `\/`). The same input gets the
//! same bytes on every run: only ids, progress tokens and what the client sent are echoed.
//! Everything a request causes (progress, logs, requests to the client, status changes) is
//! sent before its reply, so over HTTP it rides that request's stream.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::raw::{lock, quote, Call, Handler, Reply};

/// The protocol versions answered as asked; anything else gets the newest.
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Log levels from least to most severe.
const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];
/// Task timestamps are fixed: the same bytes on every run.
const CREATED: &str = "2025-11-25T00:00:00Z";
const FINISHED: &str = "2025-11-25T00:00:01Z";

const INITIALIZE: &str = r#"{"protocolVersion":"$VERSION","serverInfo":{"version":"1.0.0","name":"ahp-proxy-example-transparency","title":"Transparency \u00e9prouvette","icons":[{"src":"data:image\/svg+xml;base64,PHN2Zy8+","mimeType":"image\/svg+xml","sizes":["any"],"theme":"light"}],"websiteUrl":"https:\/\/example.com\/transparency","x-server-info":{"z":1,"a":[0.7,1e3,-0]}},"instructions":"Bytes matter: caf\u00e9, \/path, 1e3.","capabilities":{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"logging":{},"completions":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}},"experimental":{"x-vendor\/raw":{"level":3,"ratio":0.7}},"x-unknown-capability":{"nested":{"b":true,"a":null}}},"_meta":{"x-vendor\/init":{"z":"last","a":"first"}},"x-initialize-extra":12345678901234567890}"#;

const TOOLS: &str = r#"{"tools":[{"name":"structured","title":"Structured result","description":"Returns ordered structured content and echoes its arguments; may run as a task.","inputSchema":{"type":"object","properties":{"zeta":{"type":"string","description":"caf\u00e9"},"alpha":{"type":"number","default":0.7},"mid":{"type":"integer","default":1e3}},"required":["zeta"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"zulu":{"type":"string"},"alpha":{"type":"number"},"nested":{"type":"object"},"arguments":{"type":"object"}},"required":["zulu","alpha"]},"annotations":{"title":"Structured","readOnlyHint":true,"openWorldHint":false},"execution":{"taskSupport":"optional"},"icons":[{"src":"https:\/\/example.com\/s.png","mimeType":"image\/png"}],"_meta":{"x-vendor\/order":["z","a"],"x-ratio":0.7},"x-tool-extra":{"kept":true,"big":12345678901234567890}},{"name":"progress","description":"Sends progress 0, 50 and 100 of 100 for the request's token, then answers.","inputSchema":{"type":"object","properties":{}},"execution":{"taskSupport":"forbidden"}},{"name":"log","description":"Sends three log messages (filtered by logging\/setLevel), then answers.","inputSchema":{"type":"object","properties":{}}},{"name":"sample","description":"Asks the client to sample (temperature 0.7) and returns its answer verbatim.","inputSchema":{"type":"object","properties":{}}},{"name":"elicit_form","description":"Asks the user to fill a form and returns the answer verbatim.","inputSchema":{"type":"object","properties":{}}},{"name":"elicit_url","description":"Asks the user to visit a URL, then reports the elicitation complete.","inputSchema":{"type":"object","properties":{}}},{"name":"roots","description":"Asks the client for its roots and returns them verbatim.","inputSchema":{"type":"object","properties":{}}},{"name":"fail","description":"Answers with a JSON-RPC error that carries data.","inputSchema":{"type":"object","properties":{}}}],"_meta":{"x-list":{"page":1}},"x-tools-extra":[1e3,0.7,-0,12345678901234567890]}"#;

const STRUCTURED: &str = r#"{"content":[{"type":"text","text":"{\"zulu\":\"last\",\"alpha\":0.7}","annotations":{"priority":0.7,"audience":["user"]},"_meta":{"x-block":{"b":1,"a":2}}}],"structuredContent":{"zulu":"last","alpha":0.7,"nested":{"z":1e3,"neg":-0,"big":12345678901234567890,"s":"caf\u00e9 \/ \t tab"},"arguments":$ARGUMENTS},"isError":false,"_meta":$META,"x-result-extra":1.50}"#;
const STRUCTURED_META: &str = r#"{"x-result":{"z":true,"a":false}}"#;
const TASK_META: &str = r#"{"io.modelcontextprotocol/related-task":{"taskId":"$TASK"}}"#;

const PROGRESS: &str = r#"{"jsonrpc":"2.0","params":{"progressToken":$TOKEN,"progress":$STEP,"total":100,"message":"step $STEP of 100","_meta":{"x-progress":0.7}},"method":"notifications/progress"}"#;
const PROGRESSED: &str =
    r#"{"content":[{"type":"text","text":"progressed"}],"_meta":{"x-steps":[0,50,100]}}"#;

/// The log messages of `log`: (level, message).
const LOGS: [(usize, &str); 3] = [
    (
        1,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"transparency","data":"caf\u00e9 \/ first"}}"#,
    ),
    (
        3,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","data":{"zeta":"z","alpha":[1e3,0.7,-0]},"logger":"transparency","_meta":{"x-log":1}}}"#,
    ),
    (
        4,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":["z","a"],"level":"error"}}"#,
    ),
];

const SAMPLE: &str = r#"{"jsonrpc":"2.0","id":$ASK,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"Say caf\u00e9","_meta":{"x-content":1}}}],"maxTokens":64,"temperature":0.7,"systemPrompt":"Be brief.","modelPreferences":{"speedPriority":0.5,"hints":[{"name":"claude"}],"intelligencePriority":0.75,"costPriority":1e-1},"includeContext":"none","stopSequences":["\n\n"],"metadata":{"z":1,"a":1e3},"x-sampling-extra":{"kept":true}}}"#;
const ELICIT_FORM: &str = r#"{"jsonrpc":"2.0","id":$ASK,"method":"elicitation/create","params":{"mode":"form","message":"Tell us about caf\u00e9","requestedSchema":{"type":"object","properties":{"zeta":{"type":"string","title":"Zeta","default":"z"},"alpha":{"type":"number","minimum":0.7,"maximum":1e3,"default":0.7},"mid":{"type":"boolean","default":true},"choice":{"type":"string","enum":["b","a"],"enumNames":["Bee","Ay"]}},"required":["zeta","alpha"]},"_meta":{"x-elicit":{"z":1,"a":2}}}}"#;
const ELICIT_URL: &str = r#"{"jsonrpc":"2.0","id":$ASK,"method":"elicitation/create","params":{"mode":"url","message":"Open the consent page","elicitationId":"$ELICITATION","url":"https:\/\/example.com\/consent?z=1&a=2"}}"#;
const ELICITATION_COMPLETE: &str = r#"{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"$ELICITATION"}}"#;
const ROOTS: &str = r#"{"jsonrpc":"2.0","id":$ASK,"method":"roots/list","params":{"_meta":{"x-roots":{"z":1,"a":2}}}}"#;
/// A tool's result around what the client answered (`$ANSWER`, its raw `result`).
const ANSWERED: &str = r#"{"content":[{"type":"text","text":"$WHAT"}],"structuredContent":{"answer":$ANSWER},"isError":$FAILED}"#;
const FAIL: &str = r#"{"jsonrpc":"2.0","id":$ID,"error":{"code":-32602,"message":"Failed on purpose: caf\u00e9","data":{"zeta":1,"alpha":0.7,"nested":{"b":[],"a":{}}}}}"#;

const ECHOED: &str = r#"{"jsonrpc":"2.0","method":"notifications/x-vendor/echoed","params":{"zeta":true,"alpha":0.7}}"#;
const ECHO: &str = r#"{"result":$PARAMS,"id":$ID,"jsonrpc":"2.0"}"#;

const TASK: &str = r#"{"taskId":"$TASK","status":"$STATUS","statusMessage":"$MESSAGE","createdAt":"2025-11-25T00:00:00Z","lastUpdatedAt":"$UPDATED","ttl":$TTL,"pollInterval":250}"#;
const TASK_CREATED: &str = r#"{"task":$TASK,"_meta":{"io.modelcontextprotocol/model-immediate-response":"Working on it."},"x-task-extra":1e3}"#;
const TASK_STATUS: &str =
    r#"{"jsonrpc":"2.0","method":"notifications/tasks/status","params":$TASK}"#;

const PROMPTS: &str = r#"{"prompts":[{"name":"greet","title":"Greet","description":"Greets caf\u00e9 style.","arguments":[{"name":"who","description":"Who to greet","required":true},{"name":"style","required":false,"x-argument":0.7}],"icons":[{"src":"https:\/\/example.com\/p.png"}],"_meta":{"x-prompt":[3,1,2]}}],"x-prompts-extra":{"z":0,"a":-0}}"#;
const PROMPT: &str = r#"{"description":"A greeting","messages":[{"role":"user","content":{"type":"text","text":$TEXT,"_meta":{"x-message":1e3}}},{"role":"assistant","content":{"type":"resource","resource":{"uri":"transparency://static/one","mimeType":"text/plain","text":"caf\u00e9"}}}],"_meta":{"x-get":true}}"#;

const RESOURCES: &str = r#"{"resources":[{"uri":"transparency://static/one","name":"one","title":"One","description":"caf\u00e9 text","mimeType":"text/plain","size":12,"annotations":{"priority":0.7,"audience":["assistant","user"],"lastModified":"2025-11-25T00:00:00Z"},"_meta":{"x-resource":{"z":1,"a":2}}},{"uri":"transparency://static/blob","name":"blob","mimeType":"application/octet-stream","x-resource-extra":1e3}],"_meta":{"x-resources":-0}}"#;
const TEMPLATES: &str = r#"{"resourceTemplates":[{"uriTemplate":"transparency://items/{id}","name":"item","title":"Item","mimeType":"application/json","annotations":{"priority":0.7},"_meta":{"x-template":1}}]}"#;
const READ_ONE: &str = r#"{"contents":[{"uri":"transparency://static/one","mimeType":"text/plain","text":"caf\u00e9 \/ one\n","_meta":{"x-content":{"z":1,"a":2}}}],"x-read-extra":-0}"#;
const READ_BLOB: &str = r#"{"contents":[{"uri":"transparency://static/blob","mimeType":"application/octet-stream","blob":"AAEC\/w=="}]}"#;
const READ_ITEM: &str = r#"{"contents":[{"uri":$URI,"mimeType":"application/json","text":$TEXT}]}"#;
const NOT_FOUND: &str = r#"{"jsonrpc":"2.0","id":$ID,"error":{"code":-32002,"message":"Resource not found","data":{"uri":$URI}}}"#;
const UPDATED: &str = r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":$URI,"x-updated":1e3}}"#;
const COMPLETE: &str = r#"{"completion":{"values":["zeta","alpha","caf\u00e9"],"total":3,"hasMore":false},"_meta":{"x-complete":0.7}}"#;

/// `template` with each `(placeholder, value)` put in, in one pass (a value that happens to
/// contain a placeholder stays as it is).
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match values.iter().find(|(key, _)| rest.starts_with(key)) {
            Some((key, value)) => {
                out.push_str(value);
                rest = &rest[key.len()..];
            }
            None => {
                out.push('$');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// One session: the log level, the tasks and the counters behind deterministic ids.
#[derive(Default)]
pub struct Transparency {
    /// Ask the client for its roots (`roots/list`, not waiting for the answer) before
    /// answering `tools/list`, as servers that read roots while they start do.
    roots_when_listed: bool,
    min_level: AtomicUsize,
    elicitations: AtomicU64,
    tasks: Mutex<Vec<Task>>,
}

impl Transparency {
    /// A session; `roots_when_listed` as the field says.
    pub fn new(roots_when_listed: bool) -> Self {
        Self {
            roots_when_listed,
            ..Self::default()
        }
    }
}

struct Task {
    id: String,
    status: &'static str,
    message: &'static str,
    updated: &'static str,
    /// The requested `ttl`, raw (`null` when none was asked).
    ttl: String,
    /// The tool's result, kept until `tasks/result`.
    result: String,
}

impl Task {
    fn text(&self) -> String {
        fill(
            TASK,
            &[
                ("$TASK", &self.id),
                ("$STATUS", self.status),
                ("$MESSAGE", self.message),
                ("$UPDATED", self.updated),
                ("$TTL", &self.ttl),
            ],
        )
    }
}

impl Handler for Transparency {
    async fn request(&self, call: Call) -> Reply {
        let params = call.params();
        let id = call.id.clone();
        match call.method.as_str() {
            "initialize" => {
                let asked = params["protocolVersion"].as_str().unwrap_or_default();
                let version = VERSIONS
                    .into_iter()
                    .find(|v| *v == asked)
                    .unwrap_or("2025-11-25");
                Reply::Result(INITIALIZE.replace("$VERSION", version))
            }
            "ping" | "resources/unsubscribe" => Reply::Result("{}".into()),
            "logging/setLevel" => {
                let level = params["level"].as_str().unwrap_or_default();
                match LEVELS.iter().position(|l| *l == level) {
                    Some(index) => {
                        self.min_level.store(index, Ordering::SeqCst);
                        Reply::Result("{}".into())
                    }
                    None => Reply::Error(-32602, format!("Unknown log level: {level}")),
                }
            }
            "tools/list" => {
                if self.roots_when_listed {
                    call.send(ROOTS.replace("$ASK", r#""roots-when-listed""#));
                }
                Reply::Result(TOOLS.into())
            }
            "tools/call" => self.call_tool(&call, &params).await,
            "tasks/get" | "tasks/result" | "tasks/cancel" => self.task(&call, &params),
            "tasks/list" => {
                let tasks: Vec<String> = lock(&self.tasks).iter().map(Task::text).collect();
                Reply::Result(format!(
                    r#"{{"tasks":[{}],"_meta":{{"x-listed":{{"z":0.7,"a":1e3}}}}}}"#,
                    tasks.join(",")
                ))
            }
            "prompts/list" => Reply::Result(PROMPTS.into()),
            "prompts/get" => match params["name"].as_str() {
                Some("greet") => {
                    let who = params["arguments"]["who"].as_str().unwrap_or("nobody");
                    let text = quote(&format!("Hello, {who}!"));
                    Reply::Result(PROMPT.replace("$TEXT", &text))
                }
                name => Reply::Error(-32602, format!("Unknown prompt: {}", name.unwrap_or(""))),
            },
            "resources/list" => Reply::Result(RESOURCES.into()),
            "resources/templates/list" => Reply::Result(TEMPLATES.into()),
            "resources/read" => read(&id, params["uri"].as_str().unwrap_or_default()),
            "resources/subscribe" => {
                let uri = quote(params["uri"].as_str().unwrap_or_default());
                call.send(UPDATED.replace("$URI", &uri));
                Reply::Result("{}".into())
            }
            "completion/complete" => Reply::Result(COMPLETE.into()),
            "x-vendor/echo" => {
                call.send(ECHOED.into());
                let params = call.params_raw().unwrap_or("{}");
                Reply::Message(fill(ECHO, &[("$PARAMS", params), ("$ID", &id)]))
            }
            method => Reply::Error(-32601, format!("Method not found: {method}")),
        }
    }
}

impl Transparency {
    async fn call_tool(&self, call: &Call, params: &Value) -> Reply {
        let name = params["name"].as_str().unwrap_or_default();
        let task_ttl = call.param_raw(&["task"]).map(|_| {
            call.param_raw(&["task", "ttl"])
                .unwrap_or_else(|| "null".into())
        });
        if let Some(ttl) = task_ttl {
            if name != "structured" {
                return Reply::Error(-32602, format!("Tool {name} does not run as a task"));
            }
            return self.create_task(call, ttl);
        }
        match name {
            "structured" => Reply::Result(structured(call, STRUCTURED_META)),
            "progress" => {
                if let Some(token) = call.param_raw(&["_meta", "progressToken"]) {
                    for step in ["0", "50", "100"] {
                        call.send(fill(PROGRESS, &[("$TOKEN", &token), ("$STEP", step)]));
                    }
                }
                Reply::Result(PROGRESSED.into())
            }
            "log" => {
                let min = self.min_level.load(Ordering::SeqCst);
                let mut sent = 0;
                for (level, message) in LOGS {
                    if level >= min {
                        call.send(message.into());
                        sent += 1;
                    }
                }
                let text = format!(r#"{{"content":[{{"type":"text","text":"logged {sent}"}}]}}"#);
                Reply::Result(text)
            }
            "sample" => answered(call, "sampled", SAMPLE).await,
            "elicit_form" => answered(call, "elicited", ELICIT_FORM).await,
            "elicit_url" => {
                let n = self.elicitations.fetch_add(1, Ordering::Relaxed) + 1;
                let elicitation = format!("consent-{n}");
                let request = ELICIT_URL.replace("$ELICITATION", &elicitation);
                let reply = answered(call, "visited", &request).await;
                call.send(ELICITATION_COMPLETE.replace("$ELICITATION", &elicitation));
                reply
            }
            "roots" => answered(call, "roots", ROOTS).await,
            "fail" => Reply::Message(FAIL.replace("$ID", &call.id)),
            name => Reply::Error(-32602, format!("Unknown tool: {name}")),
        }
    }

    fn create_task(&self, call: &Call, ttl: String) -> Reply {
        let mut tasks = lock(&self.tasks);
        let id = format!("task-{}", tasks.len() + 1);
        let task = Task {
            result: structured(call, &TASK_META.replace("$TASK", &id)),
            id,
            status: "working",
            message: "queued",
            updated: CREATED,
            ttl,
        };
        let reply = TASK_CREATED.replace("$TASK", &task.text());
        tasks.push(task);
        Reply::Result(reply)
    }

    /// `tasks/get`, `tasks/result` (which completes a working task) and `tasks/cancel`.
    fn task(&self, call: &Call, params: &Value) -> Reply {
        let wanted = params["taskId"].as_str().unwrap_or_default();
        let mut tasks = lock(&self.tasks);
        let Some(task) = tasks.iter_mut().find(|t| t.id == wanted) else {
            return Reply::Error(-32602, format!("Unknown task: {wanted}"));
        };
        let working = task.status == "working";
        match call.method.as_str() {
            "tasks/result" => {
                if working {
                    (task.status, task.message, task.updated) = ("completed", "done", FINISHED);
                    call.send(TASK_STATUS.replace("$TASK", &task.text()));
                }
                match task.status {
                    "completed" => Reply::Result(task.result.clone()),
                    _ => Reply::Error(-32602, format!("Task {wanted} was {}", task.status)),
                }
            }
            "tasks/cancel" if working => {
                (task.status, task.message, task.updated) =
                    ("cancelled", "cancelled on request", FINISHED);
                call.send(TASK_STATUS.replace("$TASK", &task.text()));
                Reply::Result(task.text())
            }
            "tasks/cancel" => Reply::Error(
                -32602,
                format!("Cannot cancel task {wanted}: it is {}", task.status),
            ),
            _ => Reply::Result(task.text()),
        }
    }
}

/// `structured`'s result: its arguments echoed raw, with this `_meta`.
fn structured(call: &Call, meta: &str) -> String {
    let arguments = call
        .param_raw(&["arguments"])
        .unwrap_or_else(|| "{}".into());
    fill(STRUCTURED, &[("$ARGUMENTS", &arguments), ("$META", meta)])
}

/// Send `request` (a template around `$ASK`) to the client, and answer with its raw result
/// (or its raw error, as a failed tool result).
async fn answered(call: &Call, what: &str, request: &str) -> Reply {
    let Some(response) = call.ask(|ask| request.replace("$ASK", ask)).await else {
        return Reply::Error(
            -32603,
            "The session ended before the client answered".into(),
        );
    };
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<Box<RawValue>>,
        error: Option<Box<RawValue>>,
    }
    let answer: Answer = match serde_json::from_str(&response) {
        Ok(answer) => answer,
        Err(error) => return Reply::Error(-32603, format!("Unreadable answer: {error}")),
    };
    let (answer, failed) = match (&answer.result, &answer.error) {
        (Some(result), _) => (result.get(), "false"),
        (None, Some(error)) => (error.get(), "true"),
        (None, None) => ("null", "true"),
    };
    Reply::Result(fill(
        ANSWERED,
        &[("$WHAT", what), ("$FAILED", failed), ("$ANSWER", answer)],
    ))
}

fn read(id: &str, uri: &str) -> Reply {
    match uri {
        "transparency://static/one" => Reply::Result(READ_ONE.into()),
        "transparency://static/blob" => Reply::Result(READ_BLOB.into()),
        _ => match uri.strip_prefix("transparency://items/") {
            Some(item) if !item.is_empty() && !item.contains('/') => {
                let text = quote(&format!(r#"{{"id":{},"z":0.7,"a":1e3}}"#, quote(item)));
                Reply::Result(fill(READ_ITEM, &[("$URI", &quote(uri)), ("$TEXT", &text)]))
            }
            _ => Reply::Message(fill(NOT_FOUND, &[("$ID", id), ("$URI", &quote(uri))])),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_puts_values_in_once() {
        let text = fill(
            r#"{"a":$ARGUMENTS,"m":$META,"x":"$UNKNOWN"}"#,
            &[("$ARGUMENTS", r#"{"s":"$META"}"#), ("$META", "{}")],
        );
        assert_eq!(text, r#"{"a":{"s":"$META"},"m":{},"x":"$UNKNOWN"}"#);
    }

    #[test]
    fn every_template_is_json_once_filled() {
        let values = [
            ("$VERSION", "2025-11-25"),
            ("$ARGUMENTS", "{}"),
            ("$META", "{}"),
            ("$TASK", "task-1"),
            ("$TOKEN", "1"),
            ("$STEP", "0"),
            ("$ASK", "0"),
            ("$ELICITATION", "e"),
            ("$WHAT", "w"),
            ("$ANSWER", "{}"),
            ("$FAILED", "false"),
            ("$ID", "1"),
            ("$PARAMS", "{}"),
            ("$STATUS", "working"),
            ("$MESSAGE", "m"),
            ("$UPDATED", CREATED),
            ("$TTL", "null"),
            ("$TEXT", "\"t\""),
            ("$URI", "\"u\""),
        ];
        let templates = [
            INITIALIZE,
            TOOLS,
            STRUCTURED,
            STRUCTURED_META,
            TASK_META,
            PROGRESS,
            PROGRESSED,
            SAMPLE,
            ELICIT_FORM,
            ELICIT_URL,
            ELICITATION_COMPLETE,
            ROOTS,
            ANSWERED,
            FAIL,
            ECHOED,
            ECHO,
            TASK,
            PROMPTS,
            PROMPT,
            RESOURCES,
            TEMPLATES,
            READ_ONE,
            READ_BLOB,
            READ_ITEM,
            NOT_FOUND,
            UPDATED,
            COMPLETE,
        ];
        for template in templates.into_iter().chain(LOGS.map(|(_, log)| log)) {
            let text = fill(template, &values);
            assert!(
                serde_json::from_str::<Value>(&text).is_ok(),
                "not JSON: {text}"
            );
        }
        let task = fill(TASK_CREATED, &[("$TASK", &fill(TASK, &values))]);
        assert!(serde_json::from_str::<Value>(&task).is_ok(), "{task}");
    }
}
