//! Tools AHP clients publish (`activeClients[].tools` of the default session), offered to
//! the harness, and what becomes of the calls the harness makes of them: the owning client's
//! content, completion or refusal, and the client leaving. The host announces; the MCP front
//! listens.

use std::sync::Arc;

use ahp_types::actions::StateAction;
use ahp_types::state::{
    ChatState, ResponsePart, SessionState, ToolCallContributor, ToolCallResult, ToolCallState,
    ToolDefinition, ToolResultContent,
};
use tokio::sync::{broadcast, watch};

use super::{Core, Host, HARNESS_CHAT_URI};

/// One tool an AHP client offers.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientTool {
    /// The owning client's `clientId`.
    pub client_id: String,
    /// Its display name (else its id).
    pub client_name: String,
    /// The tool as the client declared it.
    pub tool: ToolDefinition,
}

/// Something that happened to a harness call of a client tool (by its tool call id in the
/// harness chat), or to the clients.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientCallEvent {
    /// The client showed partial content.
    Content {
        /// The tool call id.
        call: String,
        /// What it shows now.
        content: Vec<ToolResultContent>,
    },
    /// The client completed the call.
    Completed {
        /// The tool call id.
        call: String,
        /// Its result.
        result: Box<ToolCallResult>,
    },
    /// The client refused to run it (`chat/toolCallConfirmed` with `approved: false`).
    Declined {
        /// The tool call id.
        call: String,
        /// Why, as the client said, if it did.
        reason: Option<String>,
    },
    /// Client `client` is no longer an active client of the default session.
    ClientGone {
        /// Its `clientId`.
        client: String,
    },
}

/// The host's side of client tools: the published list and the event stream.
pub struct ClientTools {
    list: watch::Sender<Arc<Vec<ClientTool>>>,
    events: broadcast::Sender<ClientCallEvent>,
}

impl Default for ClientTools {
    fn default() -> Self {
        Self {
            list: watch::channel(Arc::new(Vec::new())).0,
            events: broadcast::channel(1024).0,
        }
    }
}

impl ClientTools {
    /// Publish the tools of the default session's active clients, if they changed.
    fn refresh(&self, session: &SessionState) {
        let tools: Vec<ClientTool> = session
            .active_clients
            .iter()
            .flat_map(|client| {
                let name = client
                    .display_name
                    .clone()
                    .filter(|n| !n.trim().is_empty())
                    .unwrap_or_else(|| client.client_id.clone());
                client.tools.iter().map(move |tool| ClientTool {
                    client_id: client.client_id.clone(),
                    client_name: name.clone(),
                    tool: tool.clone(),
                })
            })
            .collect();
        self.list.send_if_modified(|now| {
            if **now == tools {
                return false;
            }
            *now = Arc::new(tools);
            true
        });
    }

    fn announce(&self, event: ClientCallEvent) {
        let _ = self.events.send(event);
    }
}

impl Host {
    /// The tools AHP clients offer now, and every later change.
    pub fn client_tools(&self) -> watch::Receiver<Arc<Vec<ClientTool>>> {
        self.core().client_tools.list.subscribe()
    }

    /// What happens to harness calls of client tools from now on.
    pub fn client_call_events(&self) -> broadcast::Receiver<ClientCallEvent> {
        self.core().client_tools.events.subscribe()
    }
}

impl Core {
    /// After a committed action on `channel`: keep the published client tools and the
    /// calls of them up to date (the host's own actions on calls concern no client).
    pub(super) fn follow_client_tools(
        &mut self,
        channel: &str,
        action: &StateAction,
        by_client: bool,
    ) {
        match action {
            StateAction::SessionActiveClientSet(_) if channel == self.default_session => {
                self.refresh_client_tools();
            }
            StateAction::SessionActiveClientRemoved(a) if channel == self.default_session => {
                self.refresh_client_tools();
                self.client_tools.announce(ClientCallEvent::ClientGone {
                    client: a.client_id.clone(),
                });
            }
            _ if !by_client => {}
            StateAction::ChatToolCallComplete(a) if channel == HARNESS_CHAT_URI => {
                self.client_tools.announce(ClientCallEvent::Completed {
                    call: a.tool_call_id.clone(),
                    result: Box::new(a.result.clone()),
                });
            }
            StateAction::ChatToolCallContentChanged(a) if channel == HARNESS_CHAT_URI => {
                self.client_tools.announce(ClientCallEvent::Content {
                    call: a.tool_call_id.clone(),
                    content: a.content.clone(),
                });
            }
            StateAction::ChatToolCallConfirmed(a) if channel == HARNESS_CHAT_URI && !a.approved => {
                let reason = a.reason_message.as_ref().map(|m| match m {
                    ahp_types::common::StringOrMarkdown::Plain(text) => text.clone(),
                    ahp_types::common::StringOrMarkdown::Markdown { markdown } => markdown.clone(),
                });
                self.client_tools.announce(ClientCallEvent::Declined {
                    call: a.tool_call_id.clone(),
                    reason,
                });
            }
            _ => {}
        }
    }

    fn refresh_client_tools(&mut self) {
        if let Some(session) = self.store.session(&self.default_session) {
            self.client_tools.refresh(session);
        }
    }
}

/// The client that runs tool call `call` of `chat`'s active turn `turn`, if a client does.
pub fn runner_of(chat: &ChatState, turn: &str, call: &str) -> Option<String> {
    let active = chat.active_turn.as_ref().filter(|t| t.id == turn)?;
    active.response_parts.iter().find_map(|part| {
        let ResponsePart::ToolCall(part) = part else {
            return None;
        };
        let (id, contributor) = match &part.tool_call {
            ToolCallState::Streaming(s) => (&s.tool_call_id, &s.contributor),
            ToolCallState::PendingConfirmation(s) => (&s.tool_call_id, &s.contributor),
            ToolCallState::Running(s) => (&s.tool_call_id, &s.contributor),
            _ => return None,
        };
        match contributor {
            Some(ToolCallContributor::Client(client)) if id == call => {
                Some(client.client_id.clone())
            }
            _ => None,
        }
    })
}
