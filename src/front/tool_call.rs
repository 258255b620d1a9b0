//! The harness's `tools/call`: the tool found (waiting for servers still starting), a
//! client's tool run as the AHP client-tool flow, a server's mirrored and forwarded; one
//! its server's declaration filters out answered as an unknown tool; one the approval
//! policy holds waits for a decision first (`steps::approval`).

use std::sync::Arc;

use super::answers::{error_answer, INVALID_PARAMS};
use super::client_offers::CLIENT_PREFIX;
use super::exchange::Exchange;
use super::harness::Harness;
use super::outbox::Stream;
use super::registry::Scope;
use super::steps::approval::{Held, Hold};
use super::steps::review::Review;
use super::steps::{self, scope::RetryOnScope, shape::RewriteUris, tasks::TaskCreation};
use super::{client_calls, routes};
use crate::approval::Facts;
use crate::mcp::era::Era;
use crate::mcp::message::{self, Message};
use crate::mirror::{self, CallStart, Confirmation};

/// `tools/call`: find the tool (waiting for servers still starting when it is not known
/// yet), refuse an app-only tool to a harness without MCP Apps, mirror the call, forward it
/// under the server's own name for the tool.
pub fn answer(harness: Arc<Harness>, message: Message, stream: Stream) {
    let id = message.id().unwrap_or("null").to_string();
    let Some(called) = message.string(&["name"]).map(|n| n.into_owned()) else {
        stream.finish(error_answer(
            &id,
            INVALID_PARAMS,
            "tools/call needs a tool name",
        ));
        return;
    };
    match routes::find_tool(&harness, &called) {
        Some(found) => call_found(harness, message, stream, called, found),
        None if harness.hub.connections.starting() => {
            // A server that has it may be a moment away: looked for again as servers come up.
            tokio::spawn(async move {
                let found = harness
                    .hub
                    .once_found(|| routes::find_tool(&harness, &called))
                    .await;
                match found {
                    Some(found) => call_found(harness, message, stream, called, found),
                    None => unknown_tool(&stream, &id, &called),
                }
            });
        }
        None => unknown_tool(&stream, &id, &called),
    }
}

fn unknown_tool(stream: &Stream, id: &str, called: &str) {
    stream.finish(error_answer(
        id,
        INVALID_PARAMS,
        &format!("unknown tool {called:?}"),
    ));
}

fn call_found(
    harness: Arc<Harness>,
    message: Message,
    stream: Stream,
    called: String,
    found: routes::FoundTool,
) {
    let id = message.id().unwrap_or("null").to_string();
    let hidden = harness
        .hub
        .connections
        .tool_filters(&found.server)
        .is_some_and(|filters| filters.hides(&found.original));
    if hidden {
        // Filtered out by the server's declaration: as if it did not exist.
        return unknown_tool(&stream, &id, &called);
    }
    if found.server.starts_with(CLIENT_PREFIX) {
        return client_calls::call(harness, message, stream, &found.server, &found.original);
    }
    let apps = harness.abilities().apps;
    if !apps && found.tool.as_ref().is_some_and(|t| t.app_only()) {
        stream.finish(error_answer(
            &id,
            INVALID_PARAMS,
            &format!("tool {called:?} is only callable from its MCP App view"),
        ));
        return;
    }
    let hub = &harness.hub;
    let server_name = hub.connections.name_of(&found.server);
    let (held, review) = held(&harness, &found, &server_name, &message);
    if review && message.find(&["task"]).is_some() {
        // A task's result would come by `tasks/result`, past the review: run it plainly.
        stream.finish(error_answer(
            &id,
            INVALID_PARAMS,
            &format!("the results of tool {called:?} are held for review before they reach the harness, which a task's result would skip: call it without `task`"),
        ));
        return;
    }
    let ticket = hub.mirror.begin(|call| CallStart {
        call,
        runner: mirror::Runner::Server {
            id: found.server.clone(),
            name: server_name.clone(),
        },
        tool: called.clone(),
        display_name: found
            .tool
            .as_ref()
            .map(|t| t.title())
            .unwrap_or_else(|| called.clone()),
        input: message
            .find(&["arguments"])
            .map(|span| message.slice(span).to_string())
            .unwrap_or_else(|| "{}".into()),
        ui: found.tool.as_ref().and_then(|t| t.ui()),
        confirmation: held.clone(),
        era: Some(harness.era()),
    });
    let renamed = (found.original != called)
        .then(|| message.find(&["name"]))
        .flatten();
    let message = match renamed {
        Some(span) => message.rewrite(None, vec![(span, message::quote(&found.original))]),
        None => message,
    };
    let waits = || {
        Held::new(
            harness.state().clone(),
            (found.server.clone(), server_name.clone()),
            found.original.clone(),
            &hub.settings.approval,
        )
    };
    let steps = steps::base()
        .with_if(harness.scope == Scope::All, || RewriteUris)
        .with(RetryOnScope::default())
        // A reviewed call's task is never handed out (`Review` withholds it), nor owned.
        .with_if(!review, || TaskCreation {
            modern: harness.era() == Era::Modern,
        })
        // Last: the steps before it have seen the request when it is held.
        .with_if(held.is_some(), || Hold::new(waits()))
        // Its result is held after every step has seen the answer.
        .with_if(review, || Review::new(waits()));
    Exchange::start(&harness, &found.server, message, stream, ticket, steps);
}

/// Whether the approval policy holds this call, and how it is shown then: `None` when it
/// goes straight on (the policy, a pre-approval or what a client allowed this session);
/// and whether its result is held for review.
fn held(
    harness: &Harness,
    found: &routes::FoundTool,
    server_name: &str,
    message: &Message,
) -> (Option<Confirmation>, bool) {
    let policy = &harness.hub.settings.approval;
    if policy.is_inert() {
        return (None, false);
    }
    let tool = found.tool.as_ref();
    let annotations = tool.and_then(|t| t.value(&["annotations"]));
    let hint = |name: &str| annotations.as_ref().and_then(|a| a.get(name)?.as_bool());
    let pre_approved = (harness.hub.connections.tool_filters(&found.server))
        .is_some_and(|f| f.pre_approved.contains(&found.original));
    let facts = Facts {
        read_only: hint("readOnlyHint") == Some(true),
        pre_approved,
    };
    let verdict = policy.judge(server_name, &found.original, facts);
    if !verdict.ask || harness.allowed(&found.server, &found.original) {
        return (None, verdict.review_result);
    }
    let arguments = message
        .find(&["arguments"])
        .map(|span| message.slice(span).to_string())
        .unwrap_or_else(|| "{}".into());
    let shown = |v: &Option<serde_json::Value>| v.as_ref().map_or("none".into(), |v| v.to_string());
    let (tool_name, server) = (
        mirror::code_span(&found.original),
        mirror::code_span(server_name),
    );
    let text = format!(
        "The MCP harness wants to call tool {tool_name} on MCP server **{server}**.\n\nArguments:\n```json\n{}\n```\n\nAnnotations: {}",
        mirror::cut(&arguments, mirror::MAX_TEXT),
        shown(&annotations),
    );
    let asked = Confirmation {
        title: format!("Allow {tool_name} on {server}?"),
        message: text,
        asks: mirror::Asks::ToolCall,
    };
    (Some(asked), verdict.review_result)
}
