//! The other direction: tools AHP clients publish, offered to the harness on the aggregated
//! endpoint, and a harness call of one run as the AHP client-tool flow — shown in the harness
//! chat with the client as contributor, run and completed by that client, its result (or its
//! refusal, its absence, the harness giving up) turned into the harness's MCP answer.

use std::sync::Arc;

use ahp_types::state::{ToolCallResult, ToolResultContent};
use serde_json::{json, Map, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::answers::{error_answer, result_answer, INTERNAL_ERROR, REQUEST_TIMEOUT};
use super::client_offers::CLIENT_PREFIX;
use super::exchange::Tracked;
use super::harness::Harness;
use super::outbox::Stream;
use crate::host::client_tools::{ClientCallEvent, ClientTool};
use crate::mcp::message::{self, Message};
use crate::mirror::{CallStart, Outcome, Runner};

/// Run the harness's `tools/call` of tool `original` of client `client` (the namespace's
/// `client:<id>`) as the client-tool flow; the answer goes to `stream`.
pub fn call(harness: Arc<Harness>, message: Message, stream: Stream, client: &str, original: &str) {
    let id = message.id().unwrap_or("null").to_string();
    let client_id = client.trim_start_matches(CLIENT_PREFIX).to_string();
    let Some(tool) = harness.hub.client_tool(&client_id, original) else {
        stream.finish(error_answer(
            &id,
            INTERNAL_ERROR,
            &format!("client {client_id} no longer offers {original:?}"),
        ));
        return;
    };
    let called = message.string(&["name"]).unwrap_or_default().into_owned();
    let input = message
        .find(&["arguments"])
        .map(|span| message.slice(span).to_string())
        .unwrap_or_else(|| "{}".into());
    let token = message
        .find(&["_meta", "progressToken"])
        .map(|span| message.slice(span).to_string());
    let cancelled = CancellationToken::new();
    // In flight until the run ends, whatever ends it.
    let tracked = Tracked::new(
        harness.hub.clone(),
        harness.id,
        id.as_str().into(),
        format!("{CLIENT_PREFIX}{client_id}").into(),
        stream.clone(),
        cancelled.clone(),
    );
    tokio::spawn(async move {
        let run = Run {
            id,
            called,
            input,
            token,
            tool,
        };
        run.go(&harness, &stream, &cancelled).await;
        drop(tracked);
    });
}

/// One harness call of a client tool.
struct Run {
    id: String,
    called: String,
    input: String,
    token: Option<String>,
    tool: ClientTool,
}

impl Run {
    async fn go(self, harness: &Harness, stream: &Stream, cancelled: &CancellationToken) {
        let hub = &harness.hub;
        // Listening before the call is shown: its completion cannot be missed.
        let Some(mut events) = hub.client_call_events() else {
            stream.finish(error_answer(
                &self.id,
                INTERNAL_ERROR,
                "AHP clients are not served",
            ));
            return;
        };
        let ui = self
            .tool
            .tool
            .meta
            .as_ref()
            .and_then(|m| m.get("ui"))
            .cloned();
        let display_name = self
            .tool
            .tool
            .title
            .clone()
            .unwrap_or_else(|| self.tool.tool.name.clone());
        let ticket = hub
            .mirror
            .begin_client(|call| CallStart {
                call,
                runner: Runner::Client {
                    id: self.tool.client_id.clone(),
                    name: self.tool.client_name.clone(),
                },
                tool: self.called.clone(),
                display_name,
                input: self.input.clone(),
                ui,
                confirmation: None,
                era: Some(harness.era()),
            })
            .await;
        let Some(ticket) = ticket else {
            stream.finish(error_answer(
                &self.id,
                INTERNAL_ERROR,
                "the proxy is shutting down",
            ));
            return;
        };
        let call = ticket.call_id();
        let client = &self.tool.client_name;
        let timeout = tokio::time::sleep(hub.settings.request_timeout);
        tokio::pin!(timeout);
        let mut progress = 0u64;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                _ = cancelled.cancelled() => {
                    // The client sees the call end; the harness expects no answer.
                    ticket.finish(Outcome::Cancelled);
                    return;
                }
                _ = &mut timeout => {
                    let text = format!(
                        "client {client} did not complete {} within {} ms",
                        self.called,
                        hub.settings.request_timeout.as_millis()
                    );
                    ticket.finish(Outcome::Failed(text.clone()));
                    stream.finish(error_answer(&self.id, REQUEST_TIMEOUT, &text));
                    return;
                }
            };
            match event {
                Ok(ClientCallEvent::Completed { call: done, result }) if done == call => {
                    ticket.ended_elsewhere();
                    stream.finish(result_answer(&self.id, &mcp_result(&result)));
                    return;
                }
                Ok(ClientCallEvent::Declined { call: done, reason }) if done == call => {
                    ticket.ended_elsewhere();
                    let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
                    let text = format!("client {client} declined to run {}{why}", self.called);
                    stream.finish(error_answer(&self.id, INTERNAL_ERROR, &text));
                    return;
                }
                Ok(ClientCallEvent::ClientGone { client: gone }) if gone == self.tool.client_id => {
                    let text = format!(
                        "client {client} went away before completing {}",
                        self.called
                    );
                    ticket.finish(Outcome::Failed(text.clone()));
                    stream.finish(error_answer(&self.id, INTERNAL_ERROR, &text));
                    return;
                }
                Ok(ClientCallEvent::Content {
                    call: shown,
                    content,
                }) if shown == call => {
                    if let Some(token) = &self.token {
                        progress += 1;
                        stream.send(progress_notification(token, progress, &content));
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => {
                    ticket.finish(Outcome::Failed("the proxy is shutting down".into()));
                    stream.finish(error_answer(
                        &self.id,
                        INTERNAL_ERROR,
                        "the proxy is shutting down",
                    ));
                    return;
                }
            }
        }
    }
}

/// A client's partial content as MCP progress (`token` raw, as the harness wrote it).
fn progress_notification(token: &str, progress: u64, content: &[ToolResultContent]) -> String {
    let text: Vec<String> = content
        .iter()
        .filter_map(|c| match c {
            ToolResultContent::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    let mut params = format!(r#"{{"progressToken":{token},"progress":{progress}"#);
    if !text.is_empty() {
        params.push_str(&format!(
            r#","message":{}"#,
            message::quote(&text.join("\n"))
        ));
    }
    params.push('}');
    format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{params}}}"#)
}

/// A client's tool call result as an MCP `CallToolResult`: text stays text, embedded images
/// and audio become MCP images and audio, other embedded data an embedded resource, resource
/// references resource links; `structuredContent` kept; `isError` when it did not succeed
/// (its error's message shown when there is no content).
pub fn mcp_result(result: &ToolCallResult) -> String {
    let mut content: Vec<Value> = result
        .content
        .iter()
        .flatten()
        .enumerate()
        .map(|(n, block)| match block {
            ToolResultContent::Text(t) => json!({"type": "text", "text": t.text}),
            ToolResultContent::EmbeddedResource(e) => {
                let kind = e.content_type.split('/').next().unwrap_or_default();
                match kind {
                    "image" | "audio" => {
                        json!({"type": kind, "data": e.data, "mimeType": e.content_type})
                    }
                    _ => json!({"type": "resource", "resource": {
                        "uri": format!("ahp-client-result:{n}"),
                        "mimeType": e.content_type, "blob": e.data}}),
                }
            }
            ToolResultContent::Resource(r) => {
                let mut link = json!({"type": "resource_link", "uri": r.uri, "name": r.uri});
                if let Some(mime) = &r.content_type {
                    link["mimeType"] = json!(mime);
                }
                link
            }
            other => {
                json!({"type": "text", "text": serde_json::to_string(other).unwrap_or_default()})
            }
        })
        .collect();
    if !result.success && content.is_empty() {
        let message = result
            .error
            .as_ref()
            .and_then(|e| e.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| match &result.past_tense_message {
                ahp_types::common::StringOrMarkdown::Plain(text) => text.clone(),
                ahp_types::common::StringOrMarkdown::Markdown { markdown } => markdown.clone(),
            });
        content.push(json!({"type": "text", "text": message}));
    }
    let mut out = Map::new();
    out.insert("content".into(), Value::Array(content));
    if let Some(structured) = &result.structured_content {
        out.insert(
            "structuredContent".into(),
            Value::Object(structured.clone()),
        );
    }
    out.insert("isError".into(), Value::Bool(!result.success));
    Value::Object(out).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_results_become_mcp_results() {
        let result: ToolCallResult = serde_json::from_value(json!({
            "success": true, "pastTenseMessage": "Ran tests",
            "content": [
                {"type": "text", "text": "12 passed"},
                {"type": "embeddedResource", "data": "iVBOR", "contentType": "image/png"},
                {"type": "embeddedResource", "data": "AAEC", "contentType": "application/zip"},
                {"type": "resource", "uri": "file:///r.txt", "contentType": "text/plain"}
            ],
            "structuredContent": {"passed": 12}
        }))
        .unwrap();
        let mcp: Value = serde_json::from_str(&mcp_result(&result)).unwrap();
        assert_eq!(
            mcp["content"][0],
            json!({"type": "text", "text": "12 passed"})
        );
        assert_eq!(
            mcp["content"][1],
            json!({"type": "image", "data": "iVBOR", "mimeType": "image/png"})
        );
        assert_eq!(mcp["content"][2]["resource"]["blob"], "AAEC");
        assert_eq!(mcp["content"][3]["type"], "resource_link");
        assert_eq!(mcp["structuredContent"], json!({"passed": 12}));
        assert_eq!(mcp["isError"], false);
        let failed: ToolCallResult = serde_json::from_value(json!({
            "success": false, "pastTenseMessage": "Failed", "error": {"message": "no tests"}
        }))
        .unwrap();
        let mcp: Value = serde_json::from_str(&mcp_result(&failed)).unwrap();
        assert_eq!(mcp["isError"], true);
        assert_eq!(mcp["content"][0]["text"], "no tests");
    }

    #[test]
    fn partial_content_is_progress_under_the_harness_token() {
        let content = vec![ToolResultContent::Text(
            ahp_types::state::ToolResultTextContent {
                text: "3 of 12".into(),
            },
        )];
        assert_eq!(
            progress_notification(r#""t-1""#, 2, &content),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-1","progress":2,"message":"3 of 12"}}"#
        );
    }
}
