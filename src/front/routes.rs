//! Which server a request is for: by the tool, prompt, resource URI or task it names (renamed
//! names and URIs mapped back on the aggregated endpoint), waiting for servers still
//! starting when the name is not known yet; a per-server endpoint sends everything, known
//! method or not, to its server.

use std::sync::Arc;

use super::answers::{
    error_answer, result_answer, INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND,
};
use super::exchange::{Exchange, Steps};
use super::harness::Harness;
use super::naming::Route;
use super::outbox::Stream;
use super::registry::Scope;
use super::steps::fallback::Fallback;
use super::steps::shape::RewriteUris;
use super::steps::subscription::UndoSubscription;
use super::steps::tasks::{with_task_id, TaskCreation, TaskHandle, TaskResult, TaskStatusRead};
use super::steps::{self};
use crate::mcp::era::Era;
use crate::mcp::message::{self, Message};
use crate::upstream::offer::Item;

/// A tool found for a call.
pub struct FoundTool {
    /// The server that has it.
    pub server: String,
    /// The server's own name for it.
    pub original: String,
    /// The tool as the harness sees it, when listed.
    pub tool: Option<Item>,
}

/// The tool the harness calls `name`; `None` while it is unknown and servers are starting.
pub fn find_tool(harness: &Harness, name: &str) -> Option<FoundTool> {
    let hub = &harness.hub;
    match &harness.scope {
        Scope::Server(id) => match hub.connections.get(id) {
            // A tool this proxy has not listed still goes to the server: it decides.
            Some(server) => Some(FoundTool {
                server: id.clone(),
                original: name.to_string(),
                tool: server.offer().tool(name).cloned(),
            }),
            None if hub.connections.starting() => None,
            None => Some(FoundTool {
                server: id.clone(),
                original: name.to_string(),
                tool: None,
            }),
        },
        Scope::All => match hub.namespace().tool(name) {
            Some(entry) => Some(FoundTool {
                server: entry.server.clone(),
                original: entry.original.clone(),
                tool: Some(entry.item.clone()),
            }),
            // One server and nothing renamed: an unknown name is that server's to refuse.
            None => only_server(harness).map(|server| FoundTool {
                server,
                original: name.to_string(),
                tool: None,
            }),
        },
    }
}

/// The one ready server behind the aggregated endpoint when nothing is renamed (one server,
/// names prefixed only on collision, none other starting): what is not known goes to it as
/// to its own endpoint.
pub fn only_server(harness: &Harness) -> Option<String> {
    let hub = &harness.hub;
    if harness.scope != Scope::All
        || hub.settings.policy.prefix == crate::spec::NamePrefix::Always
        || hub.offers_client_tools()
        || hub.connections.starting()
    {
        return None;
    }
    let ready = hub.connections.snapshot();
    match (ready.len(), ready.into_keys().next()) {
        (1, Some(server)) => Some(server),
        _ => None,
    }
}

/// A request routed by what it names (or, on a per-server endpoint, sent as it is).
pub fn by_target(harness: Arc<Harness>, message: Message, stream: Stream) {
    if let Scope::Server(server) = &harness.scope {
        let server = server.clone();
        // Tasks are their creator's here too: another harness's is unknown, and a list
        // shows only the harness's own.
        let (message, handle) = match message.method().unwrap_or_default() {
            "tasks/list" => return merge_lists(harness, message, stream, "tasks"),
            "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/update" => {
                match task_route(&harness, &message, Some(&server)) {
                    TaskRoute::Owned(to, renamed, handle) if to == server => (renamed, handle),
                    // A task the proxy never saw made: the server answers as it would.
                    TaskRoute::Unknown => (message, None),
                    TaskRoute::Owned(..) | TaskRoute::Foreign => {
                        stream.finish(unknown_task(&message));
                        return;
                    }
                }
            }
            _ => (message, None),
        };
        let steps = steps_for(&harness, &message).with_some(handle);
        return Exchange::start(&harness, &server, message, stream, None, steps);
    }
    let resolved = resolve(&harness, &message);
    carry_out(harness, message, stream, resolved, true);
}

/// Do what resolving said; a name not known yet is resolved again once servers that are
/// starting are up (when `may_wait`).
fn carry_out(
    harness: Arc<Harness>,
    message: Message,
    stream: Stream,
    resolved: Resolved,
    may_wait: bool,
) {
    match resolved {
        Resolved::Send {
            server,
            message,
            steps,
        } => Exchange::start(&harness, &server, message, stream, None, steps),
        Resolved::Answer(text) => {
            stream.finish(text);
        }
        Resolved::Merge(field) => merge_lists(harness, message, stream, field),
        Resolved::NotYet(refusal) if !may_wait || !harness.hub.connections.starting() => {
            stream.finish(refusal);
        }
        Resolved::NotYet(_) => {
            // Resolved again once the servers that are starting are up (a URI nobody claims
            // yet may be claimed by one of them).
            tokio::spawn(async move {
                harness.hub.settle().await;
                let resolved = resolve(&harness, &message);
                carry_out(harness, message, stream, resolved, false);
            });
        }
    }
}

/// Where a request goes on the aggregated endpoint.
enum Resolved {
    /// To this server, rewritten, with these steps.
    Send {
        server: String,
        message: Message,
        steps: Steps,
    },
    /// Answered here.
    Answer(String),
    /// Asked of every server that has the list, answers joined.
    Merge(&'static str),
    /// Not known now: this refusal, unless servers still starting know it.
    NotYet(String),
}

/// The steps of a request routed by what it names: URIs rewritten on the aggregated
/// endpoint; a task it creates recorded; a task's status and result read.
fn steps_for(harness: &Harness, message: &Message) -> Steps {
    let result_of = match message.method() {
        Some("tasks/result") => message.string(&["taskId"]).map(|t| t.into_owned()),
        _ => None,
    };
    steps::base()
        .with_if(harness.scope == Scope::All, || RewriteUris)
        .with_if(message.find(&["task"]).is_some(), || TaskCreation {
            modern: false,
        })
        .with_if(message.method() == Some("tasks/get"), || TaskStatusRead)
        .with_if(result_of.is_some(), || {
            TaskResult(result_of.unwrap_or_default())
        })
}

fn resolve(harness: &Harness, message: &Message) -> Resolved {
    let id = message.id().unwrap_or("null");
    let hub = &harness.hub;
    let names = hub.namespace();
    let steps = || steps_for(harness, message);
    let renamed = |path: &[&str], to: &str| match message.find(path) {
        Some(span) if message.slice(span.clone()) != message::quote(to) => message
            .clone()
            .rewrite(None, vec![(span, message::quote(to))]),
        _ => message.clone(),
    };
    match message.method().unwrap_or_default() {
        "prompts/get" => {
            let name = message.string(&["name"]).unwrap_or_default();
            match names.prompt(&name) {
                Some(entry) => Resolved::Send {
                    server: entry.server.clone(),
                    message: renamed(&["name"], &entry.original),
                    steps: steps(),
                },
                None => match only_server(harness) {
                    Some(server) => Resolved::Send {
                        server,
                        message: message.clone(),
                        steps: steps(),
                    },
                    None => Resolved::NotYet(error_answer(
                        id,
                        INVALID_PARAMS,
                        &format!("unknown prompt {name:?}"),
                    )),
                },
            }
        }
        "resources/read" => {
            let uri = message.string(&["uri"]).unwrap_or_default();
            let mut targets = resource_targets(harness, &uri);
            if targets.is_empty() {
                return Resolved::NotYet(error_answer(
                    id,
                    RESOURCE_NOT_FOUND,
                    &format!("no ready MCP server has resource {uri:?}"),
                ));
            }
            let (server, own_uri) = targets.remove(0);
            Resolved::Send {
                server,
                message: renamed(&["uri"], &own_uri),
                steps: steps().with_if(!targets.is_empty(), || Fallback::to(targets)),
            }
        }
        "completion/complete" => complete(harness, message, &names),
        "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/update" => {
            match task_route(harness, message, None) {
                TaskRoute::Owned(server, message, handle) => Resolved::Send {
                    server,
                    steps: steps_for(harness, &message).with_some(handle),
                    message,
                },
                TaskRoute::Foreign | TaskRoute::Unknown => Resolved::Answer(unknown_task(message)),
            }
        }
        "tasks/list" => Resolved::Merge("tasks"),
        method => {
            // A method the proxy does not know: routable only when one server is ready.
            if let Some(server) = only_server(harness) {
                return Resolved::Send {
                    server,
                    message: message.clone(),
                    steps: steps(),
                };
            }
            Resolved::Answer(error_answer(
                id,
                METHOD_NOT_FOUND,
                &format!(
                    "method not found: {method} (the aggregated endpoint cannot tell which server it is for; use /mcp/<server>)"
                ),
            ))
        }
    }
}

/// `completion/complete` on the aggregated endpoint: by the prompt or resource template its
/// `ref` names. A server without completions completes nothing.
fn complete(harness: &Harness, message: &Message, names: &super::naming::Namespace) -> Resolved {
    let id = message.id().unwrap_or("null");
    let kind = message.string(&["ref", "type"]).unwrap_or_default();
    let (server, field, own) = match kind.as_ref() {
        "ref/prompt" => {
            let name = message.string(&["ref", "name"]).unwrap_or_default();
            match names.prompt(&name) {
                Some(entry) => (entry.server.clone(), "name", entry.original.clone()),
                None => {
                    return Resolved::NotYet(error_answer(
                        id,
                        INVALID_PARAMS,
                        &format!("unknown prompt {name:?}"),
                    ))
                }
            }
        }
        "ref/resource" => {
            let uri = message.string(&["ref", "uri"]).unwrap_or_default();
            match resource_targets(harness, &uri).into_iter().next() {
                Some((server, own)) => (server, "uri", own),
                None => {
                    return Resolved::NotYet(error_answer(
                        id,
                        INVALID_PARAMS,
                        &format!("unknown resource template {uri:?}"),
                    ))
                }
            }
        }
        _ => {
            return Resolved::Answer(error_answer(
                id,
                INVALID_PARAMS,
                "unsupported completion reference",
            ))
        }
    };
    if harness
        .hub
        .connections
        .get(&server)
        .is_some_and(|c| !c.has("completions"))
    {
        return Resolved::Answer(result_answer(
            id,
            r#"{"completion":{"values":[],"hasMore":false}}"#,
        ));
    }
    let steps = steps_for(harness, message);
    let message = match message.find(&["ref", field]) {
        Some(span) => message
            .clone()
            .rewrite(None, vec![(span, message::quote(&own))]),
        None => message.clone(),
    };
    Resolved::Send {
        server,
        message,
        steps,
    }
}

/// Where a resource URI from the harness goes: `(server, the server's URI)` in order.
pub fn resource_targets(harness: &Harness, uri: &str) -> Vec<(String, String)> {
    let hub = &harness.hub;
    match &harness.scope {
        Scope::Server(id) => vec![(id.clone(), uri.to_string())],
        Scope::All => match hub.namespace().route_uri(uri) {
            Route::To { server, uri } => vec![(server, uri)],
            Route::Ask(servers) => servers
                .into_iter()
                .filter(|id| hub.connections.get(id).is_some_and(|c| c.has("resources")))
                .map(|id| (id, uri.to_string()))
                .collect(),
        },
    }
}

/// `resources/subscribe` and `resources/unsubscribe`: shared by every harness that holds a
/// subscription; the server hears the first subscribe and the last unsubscribe.
pub fn subscription(harness: Arc<Harness>, message: Message, stream: Stream) {
    let id = message.id().unwrap_or("null").to_string();
    let subscribe = message.method() == Some("resources/subscribe");
    let uri = message.string(&["uri"]).unwrap_or_default().into_owned();
    let Some((server, own)) = resource_targets(&harness, &uri).into_iter().next() else {
        stream.finish(error_answer(
            &id,
            INVALID_PARAMS,
            &format!("no ready MCP server offers {uri:?}"),
        ));
        return;
    };
    let max = harness.hub.settings.fairness.max_subscriptions;
    let tell_server = {
        let mut tables = harness.hub.tables();
        let registry = &tables.registry;
        let new = !registry.subscribers(&server, &own).contains(&harness.id);
        if subscribe && new && registry.subscriptions_of(harness.id) >= max {
            drop(tables);
            let why = format!("this session already holds {max} resource subscriptions ([mcp] max_subscriptions); unsubscribe from one first");
            stream.finish(error_answer(&id, INVALID_PARAMS, &why));
            return;
        }
        if subscribe {
            tables.registry.subscribe(harness.id, &server, &own)
        } else {
            tables.registry.unsubscribe(harness.id, &server, &own)
        }
    };
    if !tell_server {
        stream.finish(result_answer(&id, "{}"));
        return;
    }
    let message = match message.find(&["uri"]) {
        Some(span) if own != uri => message.rewrite(None, vec![(span, message::quote(&own))]),
        _ => message,
    };
    let steps = steps::base().with_if(subscribe, || UndoSubscription {
        server: server.clone(),
        uri: own,
    });
    Exchange::start(&harness, &server, message, stream, None, steps);
}

/// Whose the task a `tasks/*` request names is, as this harness sees it.
enum TaskRoute {
    /// This harness's: its server, the request as the server is to read it (a modern task's
    /// handle replaced by the server's id), and the step putting the handle back.
    Owned(String, Message, Option<TaskHandle>),
    /// Made through the proxy, and not this harness's (another harness's, or a modern task
    /// named by the server's id rather than its handle).
    Foreign,
    /// Never handed out by the proxy.
    Unknown,
}

/// Whose the task a `tasks/*` request names is: a legacy harness's tasks are its session's;
/// a modern request reaches a modern task by the handle it was handed out under, and only so.
/// `at`: the server of a per-server endpoint, where a task is told foreign from unknown.
fn task_route(harness: &Harness, message: &Message, at: Option<&str>) -> TaskRoute {
    let task = message.string(&["taskId"]).unwrap_or_default();
    let registry = &harness.hub.tables().registry;
    if harness.era() == Era::Modern {
        if let Some((server, raw)) = registry.modern_task(&task) {
            let renamed = with_task_id(message.clone(), &task, &raw);
            let handle = TaskHandle {
                raw,
                handle: task.into_owned(),
            };
            return TaskRoute::Owned(server, renamed, Some(handle));
        }
    } else if let Some(server) = registry.task_server(harness.id, &task) {
        return TaskRoute::Owned(server, message.clone(), None);
    }
    let made_here = at.is_some_and(|server| {
        registry.task_owner(server, &task).is_some()
            || registry.modern_task_handle(server, &task).is_some()
    });
    match made_here {
        true => TaskRoute::Foreign,
        false => TaskRoute::Unknown,
    }
}

/// The answer to a `tasks/*` request naming a task this harness does not have.
fn unknown_task(message: &Message) -> String {
    let task = message.string(&["taskId"]).unwrap_or_default();
    error_answer(
        message.id().unwrap_or("null"),
        INVALID_PARAMS,
        &format!("unknown task {task:?}"),
    )
}

/// A list asked of every server that has it (`tasks/list` on the aggregated endpoint): the
/// items of each first page this harness owns, joined in server order. With one server that
/// has the list, its answer as it wrote it (its `_meta`, `nextCursor` and any other member)
/// with the items of other harnesses taken out; with several, the joined items and the
/// first server's `_meta`.
fn merge_lists(harness: Arc<Harness>, message: Message, stream: Stream, field: &'static str) {
    let id = message.id().unwrap_or("null").to_string();
    let method = message.method().unwrap_or_default().to_string();
    let params = message.body().map(|span| message.slice(span).to_string());
    tokio::spawn(async move {
        let hub = &harness.hub;
        let mut items: Vec<String> = Vec::new();
        let mut answers: Vec<(Message, bool)> = Vec::new();
        for (server, connected) in hub.connections.snapshot() {
            if !connected.has(field) || !harness.scope.includes(&server) {
                continue;
            }
            let answer = connected
                .session
                .call(&method, params.as_deref(), hub.settings.request_timeout)
                .await;
            let Ok(answer) = answer else { continue };
            let Ok((page, _)) = crate::upstream::offer::page(&answer, field, "taskId") else {
                continue;
            };
            let listed = page.len();
            let owned: Vec<String> = {
                let tables = hub.tables();
                page.into_iter()
                    .filter(|item| {
                        tables.registry.task_owner(&server, &item.key) == Some(harness.id)
                    })
                    .map(|item| item.raw)
                    .collect()
            };
            answers.push((answer, owned.len() == listed));
            items.extend(owned);
        }
        let joined = format!("[{}]", items.join(","));
        let result = match answers.as_slice() {
            [(answer, all_kept)] => own_answer(answer, field, (!all_kept).then_some(&joined)),
            several => {
                let meta = several
                    .first()
                    .and_then(|(answer, _)| answer.find(&["_meta"]).map(|s| answer.slice(s)));
                match meta {
                    Some(meta) => format!(r#"{{"{field}":{joined},"_meta":{meta}}}"#),
                    None => format!(r#"{{"{field}":{joined}}}"#),
                }
            }
        };
        stream.finish(result_answer(&id, &result));
    });
}

/// The `result` of `answer` as the server wrote it, its `field` replaced by `items` (raw)
/// when given.
fn own_answer(answer: &Message, field: &str, items: Option<&String>) -> String {
    let (Some(body), Some(list)) = (answer.body(), answer.find(&[field])) else {
        return format!(r#"{{"{field}":[]}}"#);
    };
    let result = answer.slice(body.clone());
    match items {
        None => result.to_string(),
        Some(items) => {
            let local = list.start - body.start..list.end - body.start;
            message::splice(result, &mut [(local, items.as_str())])
        }
    }
}
