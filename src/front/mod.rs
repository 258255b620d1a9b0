//! The MCP front: the harness's MCP server. One aggregated endpoint over every ready server
//! (names per [`names`]) and one transparent endpoint per server; calls go to the live
//! upstream connections, and list changes are announced as they happen.

pub mod http;
pub mod names;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, Prompt, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceError};

use crate::supervisor::connections::{Connected, Connections};
use names::Exposed;

/// Which servers an endpoint shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every ready server, names per the collision policy.
    All,
    /// One server by declared name, untouched.
    Server(String),
}

/// The harness-facing MCP server for one scope.
#[derive(Clone)]
pub struct Front {
    connections: Arc<Connections>,
    scope: Scope,
}

impl Front {
    /// An endpoint over `connections` showing `scope`.
    pub fn new(connections: Arc<Connections>, scope: Scope) -> Self {
        Self { connections, scope }
    }

    /// The ready servers in scope: `(id, server)` in id order.
    fn servers(&self) -> Vec<(String, Connected)> {
        match &self.scope {
            Scope::All => self.connections.snapshot().into_iter().collect(),
            Scope::Server(name) => self.connections.by_name(name).into_iter().collect(),
        }
    }

    fn tools(&self) -> Vec<Exposed<Tool>> {
        let servers: Vec<(String, String, Vec<Tool>)> = self
            .servers()
            .into_iter()
            .map(|(id, s)| {
                let tools = s
                    .tools
                    .into_iter()
                    .filter(|t| !names::app_only(t.meta.as_ref().map(|m| &m.0)))
                    .collect();
                (id, s.name, tools)
            })
            .collect();
        names::expose(
            &servers,
            |t| t.name.to_string(),
            |t, name| t.name = name.into(),
        )
    }

    fn peer_of(&self, id: &str) -> Result<rmcp::Peer<rmcp::RoleClient>, ErrorData> {
        self.connections
            .snapshot()
            .remove(id)
            .map(|s| s.peer)
            .ok_or_else(|| ErrorData::internal_error("the server is no longer running", None))
    }

    async fn prompts(&self) -> Vec<Exposed<Prompt>> {
        let mut servers = Vec::new();
        for (id, server) in self.servers() {
            // Servers without prompts answer method-not-found: they simply have none.
            let prompts = server.peer.list_all_prompts().await.unwrap_or_default();
            servers.push((id, server.name, prompts));
        }
        names::expose(&servers, |p| p.name.clone(), |p, name| p.name = name)
    }
}

/// An upstream failure as the harness should see it: the server's own error as it was,
/// anything else (it died, it hung up) as an internal error saying so.
fn upstream_error(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        ServiceError::TransportClosed => {
            ErrorData::internal_error("the MCP server stopped during the request", None)
        }
        other => ErrorData::internal_error(format!("the MCP server failed: {other}"), None),
    }
}

impl ServerHandler for Front {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(serde_json::json!({
            "tools": {"listChanged": true},
            "resources": {"listChanged": true},
            "prompts": {"listChanged": true},
        }))
        .unwrap_or_default();
        let name = match &self.scope {
            Scope::All => "ahp-proxy".to_string(),
            Scope::Server(name) => format!("ahp-proxy/{name}"),
        };
        ServerConfig::new(capabilities)
            .with_server_info(rmcp::model::Implementation::new(name, env!("CARGO_PKG_VERSION")))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Announce every change of the ready set (or of a server's tools) to this client
        // until it goes away.
        let mut changed = self.connections.subscribe();
        let peer = context.peer;
        tokio::spawn(async move {
            while changed.changed().await.is_ok() {
                if peer.is_transport_closed() {
                    return;
                }
                let sent = peer.notify_tool_list_changed().await.is_ok()
                    && peer.notify_resource_list_changed().await.is_ok()
                    && peer.notify_prompt_list_changed().await.is_ok();
                if !sent {
                    return;
                }
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools().into_iter().map(|e| e.item).collect(),
        ))
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(target) = self.tools().into_iter().find(|e| e.name == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}", request.name),
                None,
            ));
        };
        let peer = self.peer_of(&target.server)?;
        request.name = target.original.into();
        tokio::select! {
            result = peer.call_tool_once(request) => result.map_err(upstream_error),
            _ = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the client", None)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(
            self.prompts().await.into_iter().map(|e| e.item).collect(),
        ))
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let Some(target) = self.prompts().await.into_iter().find(|e| e.name == request.name)
        else {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt {:?}", request.name),
                None,
            ));
        };
        let peer = self.peer_of(&target.server)?;
        request.name = target.original;
        tokio::select! {
            result = peer.get_prompt_once(request) => result.map_err(upstream_error),
            _ = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the client", None)),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut all = Vec::new();
        for (_, server) in self.servers() {
            all.extend(server.peer.list_all_resources().await.unwrap_or_default());
        }
        Ok(ListResourcesResult::with_all_items(all))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut all = Vec::new();
        for (_, server) in self.servers() {
            all.extend(
                server
                    .peer
                    .list_all_resource_templates()
                    .await
                    .unwrap_or_default(),
            );
        }
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // The server that lists the URI, or whose tool points at it (`ui://` views are often
        // unlisted), answers; otherwise each server is asked in turn.
        let servers = self.servers();
        let mut order: Vec<&Connected> = Vec::new();
        for (_, server) in &servers {
            let points_at = server.tools.iter().any(|t| {
                t.meta
                    .as_ref()
                    .and_then(|m| m.0.get("ui"))
                    .and_then(|ui| ui.get("resourceUri"))
                    .is_some_and(|u| u == request.uri.as_str())
            });
            let listed = !points_at
                && server
                    .peer
                    .list_all_resources()
                    .await
                    .unwrap_or_default()
                    .iter()
                    .any(|r| r.uri == request.uri);
            if points_at || listed {
                order.insert(0, server);
            } else {
                order.push(server);
            }
        }
        let mut last = ErrorData::resource_not_found(
            format!("no ready server has resource {:?}", request.uri),
            None,
        );
        for server in order {
            let read = tokio::select! {
                result = server.peer.read_resource_once(request.clone()) => result,
                _ = context.ct.cancelled() => return Err(ErrorData::internal_error("cancelled by the client", None)),
            };
            match read {
                Ok(response) => return Ok(response),
                Err(error) => last = upstream_error(error),
            }
        }
        Err(last)
    }
}
