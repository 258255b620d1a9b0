//! `ahp-proxy approvals`, `approve ID` and `deny ID [--reason …]`: the harness tool calls
//! held for approval or whose results wait for review, as the default session's
//! `inputNeeded` lists them, and a decision on one dispatched as any AHP client's
//! `chat/toolCallConfirmed` (a call) or `chat/toolCallResultConfirmed` (a result); the first
//! decision counts.

use ahp::SubscriptionEvent;
use ahp_types::actions::{ChatToolCallConfirmedAction, ChatToolCallResultConfirmedAction};
use ahp_types::common::StringOrMarkdown;
use ahp_types::state::{
    SessionInputRequest, ToolCallCancellationReason, ToolCallConfirmationReason,
    ToolCallConfirmationState, ToolInput,
};
use ahp_types::StateAction;
use serde_json::json;

use super::error::{within, ControlError, Step, STEP_DEADLINE};
use super::{Connection, Endpoint};
use crate::untrusted::{json_escaped, Escaped};

/// The actions, by their wire type.
const CONFIRMED: &str = "chat/toolCallConfirmed";
const RESULT_CONFIRMED: &str = "chat/toolCallResultConfirmed";

/// What waits for a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waits {
    /// The call itself, before it reaches its server.
    Call,
    /// Its result, before it reaches the harness.
    Result,
}

impl Waits {
    /// How the listing names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Call => "call",
            Self::Result => "result",
        }
    }
}

/// One call held for approval, or whose result waits for review.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// Its tool call id (what `approve` and `deny` take).
    pub id: String,
    /// Whether the call or its result waits.
    pub waits: Waits,
    /// The chat it is in, and its turn.
    pub chat: String,
    /// Its turn.
    pub turn: String,
    /// The tool's name.
    pub tool: String,
    /// The title clients show.
    pub title: String,
    /// Its arguments (JSON text).
    pub input: String,
    /// The result waiting for review (its content, JSON text), when it is the result.
    pub result: Option<String>,
}

/// The calls (and results) the session lists as waiting for a decision (pure).
pub fn pending(requests: &[SessionInputRequest]) -> Vec<Pending> {
    requests
        .iter()
        .filter_map(|request| {
            let SessionInputRequest::ToolConfirmation(r) = request else {
                return None;
            };
            let inline = |input: &Option<ToolInput>| match input {
                Some(ToolInput::Inline(text)) => text.clone(),
                _ => String::new(),
            };
            let (id, waits, tool, title, input, result) = match &r.tool_call {
                ToolCallConfirmationState::PendingConfirmation(call) => (
                    &call.tool_call_id,
                    Waits::Call,
                    &call.tool_name,
                    (call.confirmation_title.as_ref()).map_or_else(String::new, text),
                    inline(&call.tool_input),
                    None,
                ),
                ToolCallConfirmationState::PendingResultConfirmation(call) => (
                    &call.tool_call_id,
                    Waits::Result,
                    &call.tool_name,
                    text(&call.past_tense_message),
                    inline(&call.tool_input),
                    Some(serde_json::to_string(&call.content).unwrap_or_default()),
                ),
                ToolCallConfirmationState::Unknown(_) => return None,
            };
            Some(Pending {
                id: id.clone(),
                waits,
                chat: r.chat.clone(),
                turn: r.turn_id.clone(),
                tool: tool.clone(),
                title,
                input,
                result,
            })
        })
        .collect()
}

/// What `status` adds about the servers the session asks the user to trust (pure): each
/// with the question's id and how to answer it; nothing when none is asked about.
pub fn awaiting_trust(requests: &[SessionInputRequest]) -> String {
    let mut out = String::new();
    for call in pending(requests) {
        if call.tool != crate::ask_trust::TRUST_TOOL || call.waits != Waits::Call {
            continue;
        }
        let input: serde_json::Value = serde_json::from_str(&call.input).unwrap_or_default();
        let name = input["server"].as_str().unwrap_or_default();
        out.push_str(&format!(
            "awaiting trust: {}  (ahp-proxy trust {}, or ahp-proxy approve {})\n",
            Escaped(name),
            Escaped(name),
            Escaped(&call.id)
        ));
    }
    out
}

fn text(value: &StringOrMarkdown) -> String {
    match value {
        StringOrMarkdown::Plain(text) => text.clone(),
        StringOrMarkdown::Markdown { markdown } => markdown.clone(),
    }
}

/// `ahp-proxy approvals`: list them (text or JSON). Exit 0, or 2 when the proxy cannot be
/// reached.
pub async fn list(endpoint: &Endpoint, as_json: bool) -> u8 {
    let connection = match Connection::open(endpoint).await {
        Ok(connection) => connection,
        Err(error) => {
            eprintln!("ahp-proxy: {error}");
            return error.exit_status();
        }
    };
    let calls = pending(connection.state.input_needed.as_deref().unwrap_or(&[]));
    connection.close().await;
    if as_json {
        let value: Vec<_> = (calls.iter())
            .map(|c| json!({"id": c.id, "waits": c.waits.as_str(), "tool": c.tool, "title": c.title, "input": c.input, "result": c.result, "chat": c.chat}))
            .collect();
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        println!("{}", json_escaped(&text));
        return 0;
    }
    if calls.is_empty() {
        println!("no tool call waits for approval, and no result for review");
    }
    for call in &calls {
        // A call shows its arguments; a result, what it would tell the harness.
        let shown = call.result.as_deref().unwrap_or(&call.input);
        println!(
            "{}  {:<6}  {}  {}",
            Escaped(&call.id),
            call.waits.as_str(),
            Escaped(&call.title),
            Escaped(&crate::mirror::cut(shown, 200))
        );
    }
    0
}

/// `ahp-proxy approve ID` / `deny ID [--reason …]`: decide call `id` (or its result, when
/// that is what waits; a result's denial carries no reason, AHP's action having none). Exit
/// 0 when the decision counted, 1 when the proxy refused it (another came first), 2 when
/// nothing waits under that id or the proxy cannot be reached.
pub async fn decide(endpoint: &Endpoint, id: &str, approved: bool, reason: Option<&str>) -> u8 {
    let outcome = match Connection::open(endpoint).await {
        Ok(connection) => {
            let outcome = decide_on(&connection, id, approved, reason).await;
            connection.close().await;
            outcome
        }
        Err(error) => Err(error),
    };
    match outcome {
        Ok(()) => {
            println!(
                "{} {}",
                if approved { "approved" } else { "denied" },
                Escaped(id)
            );
            0
        }
        Err(error) => {
            eprintln!("ahp-proxy: {error}");
            error.exit_status()
        }
    }
}

async fn decide_on(
    connection: &Connection,
    id: &str,
    approved: bool,
    reason: Option<&str>,
) -> Result<(), ControlError> {
    let calls = pending(connection.state.input_needed.as_deref().unwrap_or(&[]));
    let Some(call) = calls.iter().find(|c| c.id == id) else {
        return Err(ControlError::NotWaiting {
            id: id.to_string(),
            url: connection.url.clone(),
        });
    };
    let url = connection.url.as_str();
    let client = &connection.client;
    // Subscribed to the chat to hear the decision's echo.
    let (_, mut sub) = within(url, Step::Subscribe, client.subscribe(call.chat.clone())).await?;
    let (action, step) = match call.waits {
        Waits::Call => (
            StateAction::ChatToolCallConfirmed(ChatToolCallConfirmedAction {
                turn_id: call.turn.clone(),
                tool_call_id: call.id.clone(),
                meta: None,
                approved,
                confirmed: approved.then_some(ToolCallConfirmationReason::UserAction),
                reason: (!approved).then_some(ToolCallCancellationReason::Denied),
                edited_tool_input: None,
                user_suggestion: None,
                reason_message: reason.map(|r| StringOrMarkdown::Plain(r.to_string())),
                selected_option_id: Some(if approved { "allow-once" } else { "deny" }.into()),
            }),
            Step::Request(CONFIRMED),
        ),
        Waits::Result => (
            StateAction::ChatToolCallResultConfirmed(ChatToolCallResultConfirmedAction {
                turn_id: call.turn.clone(),
                tool_call_id: call.id.clone(),
                meta: None,
                approved,
            }),
            Step::Request(RESULT_CONFIRMED),
        ),
    };
    let seq = within(url, step, client.dispatch(call.chat.clone(), action))
        .await?
        .client_seq;
    let echo = async {
        while let Some(event) = sub.recv().await {
            if let SubscriptionEvent::Action(envelope) = event {
                if let Some(outcome) = connection.echo_of(&envelope, seq) {
                    return outcome;
                }
            }
        }
        Err(ControlError::Closed {
            url: url.to_string(),
        })
    };
    match tokio::time::timeout(STEP_DEADLINE, echo).await {
        Ok(outcome) => outcome,
        Err(_) => Err(ControlError::TimedOut {
            url: url.to_string(),
            step,
            after: STEP_DEADLINE,
        }),
    }
}
