//! A harness's `tools/call`: find the tool (waiting for servers still starting when it is
//! called before any listing), mirror the call into AHP, forward it, and when the server
//! refuses it for want of scope, hold it until an AHP client provides a better token.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, ErrorCode, Request,
    ServerResult, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::{naming, unexpected, Front};
use crate::mirror::{self, CallStart, Outcome};

impl Front {
    /// Answer `tools/call`.
    pub(super) async fn call(
        &self,
        mut request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let called = request.name.to_string();
        let (server, tool) = match self.find_tool(&called) {
            Ok(found) => found,
            // Called before any listing (right after start-up): servers may be a moment away.
            Err(_) if !self.listed.load(Ordering::Acquire) => {
                self.first_listing().await;
                self.find_tool(&called)?
            }
            Err(error) => return Err(error),
        };
        if !self.shows_app_only(&context.peer) && naming::app_only(tool.meta.as_ref().map(|m| &m.0))
        {
            return Err(ErrorData::invalid_params(
                format!("tool {called:?} is only callable from its MCP App view"),
                None,
            ));
        }
        let ticket = self.mirror_call(&server, &called, &tool, &request);
        request.name = tool.name.clone();
        let response = self
            .send_call(&server, request, ticket.as_ref(), context)
            .await
            .and_then(|result| self.call_response(&server, result));
        if let Some(ticket) = ticket {
            ticket.finish(match &response {
                Ok(CallToolResponse::Complete(r)) => {
                    Outcome::Result(serde_json::to_value(r).unwrap_or(Value::Null))
                }
                Ok(_) => Outcome::Result(serde_json::json!({"content": []})),
                Err(_) if context.ct.is_cancelled() => Outcome::Cancelled,
                Err(error) => Outcome::Failed(error.message.to_string()),
            });
        }
        response
    }

    /// Start mirroring the call of `tool` (called `called`) on `server`; `None` when the
    /// mirror is too busy to show it.
    fn mirror_call(
        &self,
        server: &str,
        called: &str,
        tool: &Tool,
        request: &CallToolRequestParams,
    ) -> Option<mirror::Ticket> {
        let server_name = self
            .hub
            .connections
            .get(server)
            .map(|c| c.name)
            .unwrap_or_default();
        self.hub.mirror.begin(|call| CallStart {
            call,
            server: server.to_string(),
            server_name: server_name.clone(),
            tool: called.to_string(),
            display_name: tool
                .title
                .clone()
                .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
                .unwrap_or_else(|| tool.name.to_string()),
            input: request
                .arguments
                .as_ref()
                .map(|a| Value::Object(a.clone()).to_string())
                .unwrap_or_else(|| "{}".into()),
            ui: tool.meta.as_ref().and_then(|m| m.0.get("ui")).cloned(),
        })
    }

    /// Forward the call. A 403 for more scope on this very call pauses it until the server
    /// has a better token, then it is sent once more.
    async fn send_call(
        &self,
        server: &str,
        request: CallToolRequestParams,
        ticket: Option<&mirror::Ticket>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let call = || ClientRequest::CallToolRequest(Request::new(request.clone()));
        match self.try_send(server, call(), context).await {
            Err(failure) if failure.wants_scope => {
                self.await_authorization(server, ticket, context).await?;
                self.send(server, call(), context).await
            }
            answer => answer.map_err(ErrorData::from),
        }
    }

    /// The server's answer to a call as the harness gets it.
    fn call_response(
        &self,
        server: &str,
        result: ServerResult,
    ) -> Result<CallToolResponse, ErrorData> {
        match result {
            ServerResult::CallToolResult(r) => {
                Ok(CallToolResponse::Complete(self.rewrite(server, r)))
            }
            ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
            ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
            ServerResult::EmptyResult(_) => {
                Ok(CallToolResponse::Complete(CallToolResult::default()))
            }
            _ => Err(unexpected("a tools/call")),
        }
    }

    /// The tool the harness called `name`: `(server, the server's name for it, the tool)`.
    fn find_tool(&self, name: &str) -> Result<(String, Tool), ErrorData> {
        let unknown = || ErrorData::invalid_params(format!("unknown tool {name:?}"), None);
        match self.own_server() {
            None => {
                let names = self.hub.namespace();
                let entry = names.tool(name).ok_or_else(unknown)?;
                let connected = self.hub.ready(&entry.server)?;
                let original = connected.tool(&entry.original).ok_or_else(unknown)?;
                Ok((entry.server.clone(), original))
            }
            Some(id) => {
                let connected = self.hub.ready(id)?;
                let tool = connected.offer().tools.into_iter().find(|t| t.name == name);
                // A tool this proxy has not listed yet still goes to the server: it decides.
                let tool = tool.unwrap_or_else(|| {
                    serde_json::from_value(serde_json::json!({
                        "name": name, "inputSchema": {"type": "object"}
                    }))
                    .unwrap_or_else(|_| Tool::new(name.to_string(), "", Arc::default()))
                });
                Ok((id.to_string(), tool))
            }
        }
    }

    /// A call to `server` was refused for want of scope: wait until the server is back with
    /// a better token (an AHP client's `authenticate`), showing the mirrored call as paused
    /// meanwhile. Gives up after `request_timeout_ms`, or when the harness cancels.
    async fn await_authorization(
        &self,
        server: &str,
        ticket: Option<&mirror::Ticket>,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let connections = &self.hub.connections;
        let mut changes = connections.subscribe();
        let patience = self.hub.settings.request_timeout;
        let name = connections
            .declared()
            .get(server)
            .cloned()
            .unwrap_or_else(|| server.to_string());
        let wait = async {
            // First it goes down (its lifecycle task saw the same refusal) ...
            while connections.get(server).is_some() {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = changes.recv().await
                {
                    return false;
                }
            }
            if let (Some(ticket), Some(status)) = (ticket, connections.auth_status(server)) {
                if let Some(auth) = crate::host::live::auth_requirement(&status) {
                    ticket.hold();
                    ticket.auth_required(auth);
                }
            }
            // ... then it comes back with the new token.
            loop {
                if connections.get(server).is_some() {
                    return true;
                }
                match changes.recv().await {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
                }
            }
        };
        let given_up = async {
            match ticket {
                Some(ticket) => ticket.given_up().await,
                None => std::future::pending().await,
            }
        };
        let declined = || {
            ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                format!("MCP server {name} needs more authorization (insufficient scope); the user declined to provide it"),
                None,
            )
        };
        let back = tokio::select! {
            back = tokio::time::timeout(patience, wait) => back.unwrap_or(false),
            _ = context.ct.cancelled() => false,
            _ = given_up => return Err(declined()),
        };
        // A give-up that got in just before the call resumed still wins.
        if ticket.is_some_and(|ticket| !ticket.release()) {
            return Err(declined());
        }
        if back {
            if let Some(ticket) = ticket {
                ticket.auth_resolved();
            }
            tracing::info!(server = %name, "authorization granted; retrying the tool call");
            Ok(())
        } else {
            Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "MCP server {name} needs more authorization (insufficient scope) and none was provided within {} ms",
                    patience.as_millis()
                ),
                None,
            ))
        }
    }
}
