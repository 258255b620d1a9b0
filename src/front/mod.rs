//! The MCP front: the harness's MCP server. One aggregated endpoint over every ready server
//! (names per [`naming`]) and one transparent endpoint per server, over stdio or streamable
//! HTTP; requests go to the live upstream connections, list changes are announced as they
//! happen, and every tool call is mirrored into AHP.

// Logging, sampling and roots are deprecated by SEP-2577 but still forwarded faithfully.
#![allow(deprecated)]

pub mod forward;
pub mod http;
pub mod hub;
pub mod mirror;
pub mod naming;
pub mod registry;
pub mod relay;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, CompleteRequestParams,
    CompleteResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    Reference, Request, RequestOptionalParam, ServerCapabilities, ServerConfig, ServerResult,
    SetLevelRequestParams, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

pub use hub::{Hub, Settings};
use mirror::{CallStart, Outcome};
use naming::Route;
use registry::{HarnessId, Scope};

/// One harness session's MCP server (a stdio front, or one streamable HTTP session).
pub struct Front {
    hub: Arc<Hub>,
    scope: Scope,
    id: HarnessId,
    joined: AtomicBool,
    listed: AtomicBool,
}

impl Front {
    /// A session over `hub` showing `scope`.
    pub fn new(hub: Arc<Hub>, scope: Scope) -> Self {
        let id = hub.next_harness();
        Self {
            hub,
            scope,
            id,
            joined: AtomicBool::new(false),
            listed: AtomicBool::new(false),
        }
    }

    fn aggregated(&self) -> bool {
        self.scope == Scope::All
    }

    /// Register the harness on first contact and note its activity.
    fn seen(&self, peer: &rmcp::Peer<RoleServer>) {
        if !self.joined.swap(true, Ordering::AcqRel) {
            self.hub.join(self.id, &self.scope, peer);
        }
        self.hub.registry().touch(self.id);
    }

    /// Before the first listing: let servers that are about to be ready get there.
    async fn first_listing(&self) {
        if !self.listed.swap(true, Ordering::AcqRel) {
            self.hub
                .connections
                .settled(self.hub.settings.first_list_wait)
                .await;
        }
    }

    /// The one server of a per-server endpoint.
    fn own_server(&self) -> Option<&str> {
        match &self.scope {
            Scope::All => None,
            Scope::Server(id) => Some(id),
        }
    }

    fn shows_app_only(&self, peer: &rmcp::Peer<RoleServer>) -> bool {
        hub::abilities_of(peer).apps
    }

    async fn send(
        &self,
        server: &str,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        Ok(self.try_send(server, request, context).await?)
    }

    /// [`Self::send`], telling a refusal for want of scope apart from other failures.
    async fn try_send(
        &self,
        server: &str,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, forward::Failure> {
        let connected = self.hub.ready(server)?;
        forward::forward(
            &self.hub,
            self.id,
            forward::Target {
                server,
                name: &connected.name,
                peer: &connected.peer,
            },
            request,
            context,
        )
        .await
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

    /// Rewrite a result from `server` to the URIs this endpoint shows.
    fn rewrite<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        server: &str,
        value: T,
    ) -> T {
        if !self.aggregated() {
            return value;
        }
        let catalog = self.hub.catalog();
        if !catalog.renames_uris_of(server) {
            return value;
        }
        let Ok(mut json) = serde_json::to_value(&value) else {
            return value;
        };
        catalog.rewrite_uris(server, &mut json);
        serde_json::from_value(json).unwrap_or(value)
    }

    /// Where a resource URI from the harness goes: `(server, uri)` candidates in order.
    fn resource_targets(&self, uri: &str) -> Vec<(String, String)> {
        match self.own_server() {
            Some(id) => vec![(id.to_string(), uri.to_string())],
            None => match self.hub.catalog().route_uri(uri) {
                Route::To { server, uri } => vec![(server, uri)],
                Route::Ask(servers) => servers
                    .into_iter()
                    .filter(|id| {
                        self.hub
                            .connections
                            .get(id)
                            .is_some_and(|c| c.capabilities.resources.is_some())
                    })
                    .map(|id| (id, uri.to_string()))
                    .collect(),
            },
        }
    }

    /// The tool the harness called `name`: `(server, the server's name for it, the tool)`.
    fn find_tool(&self, name: &str) -> Result<(String, Tool), ErrorData> {
        let unknown = || ErrorData::invalid_params(format!("unknown tool {name:?}"), None);
        match self.own_server() {
            None => {
                let catalog = self.hub.catalog();
                let entry = catalog.tool(name).ok_or_else(unknown)?;
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

    async fn list_own<T>(
        &self,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
        empty: T,
        pick: impl FnOnce(ServerResult) -> Option<T>,
    ) -> Result<T, ErrorData> {
        let Some(id) = self.own_server() else {
            return Ok(empty);
        };
        if self.hub.connections.get(id).is_none() {
            return Ok(empty);
        }
        let result = self.send(id, request, context).await?;
        pick(result).ok_or_else(|| unexpected("a list"))
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.hub.leave(self.id);
    }
}

fn unexpected(what: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("the MCP server answered {what} request with an unexpected result"),
        None,
    )
}

fn paginated(request: Option<PaginatedRequestParams>) -> Option<PaginatedRequestParams> {
    request
}

impl ServerHandler for Front {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(serde_json::json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "logging": {},
            "completions": {},
        }))
        .unwrap_or_default();
        let version = env!("CARGO_PKG_VERSION");
        let (name, instructions) = match &self.scope {
            Scope::All => {
                let mut parts = Vec::new();
                for (id, server) in self.hub.connections.snapshot() {
                    if let Some(text) = server.instructions.filter(|t| !t.trim().is_empty()) {
                        parts.push(format!("## {}\n{}", self.hub.qualifier(&id), text.trim()));
                    }
                }
                (
                    "ahp-proxy".to_string(),
                    (!parts.is_empty()).then(|| parts.join("\n\n")),
                )
            }
            Scope::Server(id) => {
                let connected = self.hub.connections.get(id);
                let name = format!("ahp-proxy/{}", self.hub.qualifier(id));
                (name, connected.and_then(|c| c.instructions))
            }
        };
        let mut info =
            ServerConfig::new(capabilities).with_server_info(Implementation::new(name, version));
        info.instructions = instructions;
        info
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        // Session semantics (subscriptions, server requests) need a handshake version.
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.seen(&context.peer);
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.seen(&context.peer);
        self.hub.roots_changed(&self.scope);
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.seen(&context.peer);
        self.first_listing().await;
        let apps = self.shows_app_only(&context.peer);
        let visible = |t: &Tool| apps || !naming::app_only(t.meta.as_ref().map(|m| &m.0));
        if self.aggregated() {
            let tools = self
                .hub
                .catalog()
                .tools
                .iter()
                .map(|e| e.item.clone())
                .filter(|t| visible(t))
                .collect();
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let request = ClientRequest::ListToolsRequest(RequestOptionalParam {
            params: paginated(request),
            ..Default::default()
        });
        let mut result = self
            .list_own(
                request,
                &context,
                ListToolsResult::with_all_items(vec![]),
                |r| match r {
                    ServerResult::ListToolsResult(r) => Some(r),
                    _ => None,
                },
            )
            .await?;
        result.tools.retain(|t| visible(t));
        Ok(result)
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.seen(&context.peer);
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
        let server_name = self
            .hub
            .connections
            .get(&server)
            .map(|c| c.name)
            .unwrap_or_default();
        let ticket = self.hub.mirror.begin(|call| CallStart {
            call,
            server: server.clone(),
            server_name: server_name.clone(),
            tool: called.clone(),
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
        });
        request.name = tool.name.clone();
        // A 403 for more scope on this very call pauses it until the server has a better
        // token, then it is sent once more.
        let answer = match self
            .try_send(
                &server,
                ClientRequest::CallToolRequest(Request::new(request.clone())),
                &context,
            )
            .await
        {
            Err(failure) if failure.wants_scope => {
                match self
                    .await_authorization(&server, ticket.as_ref(), &context)
                    .await
                {
                    Ok(()) => {
                        self.send(
                            &server,
                            ClientRequest::CallToolRequest(Request::new(request)),
                            &context,
                        )
                        .await
                    }
                    Err(error) => Err(error),
                }
            }
            answer => answer.map_err(ErrorData::from),
        };
        let response = answer.and_then(|result| match result {
            ServerResult::CallToolResult(r) => {
                Ok(CallToolResponse::Complete(self.rewrite(&server, r)))
            }
            ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
            ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
            ServerResult::EmptyResult(_) => {
                Ok(CallToolResponse::Complete(CallToolResult::default()))
            }
            _ => Err(unexpected("a tools/call")),
        });
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

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.seen(&context.peer);
        self.first_listing().await;
        if self.aggregated() {
            let prompts = self
                .hub
                .catalog()
                .prompts
                .iter()
                .map(|e| e.item.clone())
                .collect();
            return Ok(ListPromptsResult::with_all_items(prompts));
        }
        let request = ClientRequest::ListPromptsRequest(RequestOptionalParam {
            params: paginated(request),
            ..Default::default()
        });
        self.list_own(
            request,
            &context,
            ListPromptsResult::with_all_items(vec![]),
            |r| match r {
                ServerResult::ListPromptsResult(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.seen(&context.peer);
        let server = match self.own_server() {
            Some(id) => id.to_string(),
            None => {
                let catalog = self.hub.catalog();
                let entry = catalog.prompt(&request.name).ok_or_else(|| {
                    ErrorData::invalid_params(format!("unknown prompt {:?}", request.name), None)
                })?;
                request.name = entry.original.clone();
                entry.server.clone()
            }
        };
        let result = self
            .send(
                &server,
                ClientRequest::GetPromptRequest(Request::new(request)),
                &context,
            )
            .await?;
        match result {
            ServerResult::GetPromptResult(r) => {
                Ok(GetPromptResponse::Complete(self.rewrite(&server, r)))
            }
            ServerResult::InputRequiredResult(r) => Ok(GetPromptResponse::InputRequired(r)),
            _ => Err(unexpected("a prompts/get")),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.seen(&context.peer);
        self.first_listing().await;
        if self.aggregated() {
            self.refresh_unannounced_resources().await;
            let resources = self
                .hub
                .catalog()
                .resources
                .iter()
                .map(|e| e.item.clone())
                .collect();
            return Ok(ListResourcesResult::with_all_items(resources));
        }
        let request = ClientRequest::ListResourcesRequest(RequestOptionalParam {
            params: paginated(request),
            ..Default::default()
        });
        self.list_own(
            request,
            &context,
            ListResourcesResult::with_all_items(vec![]),
            |r| match r {
                ServerResult::ListResourcesResult(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.seen(&context.peer);
        self.first_listing().await;
        if self.aggregated() {
            let templates = self
                .hub
                .catalog()
                .templates
                .iter()
                .map(|e| e.item.clone())
                .collect();
            return Ok(ListResourceTemplatesResult::with_all_items(templates));
        }
        let request = ClientRequest::ListResourceTemplatesRequest(RequestOptionalParam {
            params: paginated(request),
            ..Default::default()
        });
        self.list_own(
            request,
            &context,
            ListResourceTemplatesResult::with_all_items(vec![]),
            |r| match r {
                ServerResult::ListResourceTemplatesResult(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.seen(&context.peer);
        let mut last = ErrorData::resource_not_found(
            format!("no ready MCP server has resource {:?}", request.uri),
            None,
        );
        for (server, uri) in self.resource_targets(&request.uri) {
            let mut params = request.clone();
            params.uri = uri;
            match self
                .send(
                    &server,
                    ClientRequest::ReadResourceRequest(Request::new(params)),
                    &context,
                )
                .await
            {
                Ok(ServerResult::ReadResourceResult(r)) => {
                    return Ok(ReadResourceResponse::Complete(self.rewrite(&server, r)))
                }
                Ok(ServerResult::InputRequiredResult(r)) => {
                    return Ok(ReadResourceResponse::InputRequired(r))
                }
                Ok(_) => last = unexpected("a resources/read"),
                // Not this server's: ask the next one.
                Err(error)
                    if error.code == ErrorCode::RESOURCE_NOT_FOUND
                        || error.code == ErrorCode::INVALID_PARAMS =>
                {
                    last = error
                }
                Err(error) => return Err(error),
            }
            if context.ct.is_cancelled() {
                break;
            }
        }
        Err(last)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.seen(&context.peer);
        let (server, uri) = self
            .resource_targets(&request.uri)
            .into_iter()
            .next()
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("no ready MCP server offers {:?}", request.uri),
                    None,
                )
            })?;
        let first = self.hub.registry().subscribe(self.id, &server, &uri);
        if first {
            let mut params = request.clone();
            params.uri = uri.clone();
            if let Err(error) = self
                .send(
                    &server,
                    ClientRequest::SubscribeRequest(Request::new(params)),
                    &context,
                )
                .await
            {
                self.hub.registry().unsubscribe(self.id, &server, &uri);
                return Err(error);
            }
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.seen(&context.peer);
        let Some((server, uri)) = self.resource_targets(&request.uri).into_iter().next() else {
            return Ok(());
        };
        let last = self.hub.registry().unsubscribe(self.id, &server, &uri);
        if last && self.hub.connections.get(&server).is_some() {
            let mut params = request.clone();
            params.uri = uri;
            self.send(
                &server,
                ClientRequest::UnsubscribeRequest(Request::new(params)),
                &context,
            )
            .await?;
        }
        Ok(())
    }

    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.seen(&context.peer);
        let server = match (self.own_server(), &mut request.r#ref) {
            (Some(id), _) => id.to_string(),
            (None, Reference::Prompt(prompt)) => {
                let catalog = self.hub.catalog();
                let entry = catalog.prompt(&prompt.name).ok_or_else(|| {
                    ErrorData::invalid_params(format!("unknown prompt {:?}", prompt.name), None)
                })?;
                prompt.name = entry.original.clone();
                entry.server.clone()
            }
            (None, Reference::Resource(resource)) => {
                let (server, uri) = self
                    .resource_targets(&resource.uri)
                    .into_iter()
                    .next()
                    .ok_or_else(|| {
                        ErrorData::invalid_params(
                            format!("unknown resource template {:?}", resource.uri),
                            None,
                        )
                    })?;
                resource.uri = uri;
                server
            }
            (None, _) => {
                return Err(ErrorData::invalid_params(
                    "unsupported completion reference",
                    None,
                ))
            }
        };
        if self
            .hub
            .connections
            .get(&server)
            .is_some_and(|c| c.capabilities.completions.is_none())
        {
            return Ok(CompleteResult::default());
        }
        match self
            .send(
                &server,
                ClientRequest::CompleteRequest(Request::new(request)),
                &context,
            )
            .await?
        {
            ServerResult::CompleteResult(r) => Ok(r),
            _ => Err(unexpected("a completion/complete")),
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.seen(&context.peer);
        self.hub.registry().set_log_level(self.id, request.level);
        for (id, _) in self.hub.connections.snapshot() {
            if self.scope.includes(&id) {
                self.hub.apply_log_level(&id).await;
            }
        }
        Ok(())
    }
}

impl Front {
    /// Servers that do not announce resource list changes are asked again on each listing
    /// (all at once, briefly); a real difference updates the catalog and is announced like
    /// any change.
    async fn refresh_unannounced_resources(&self) {
        let patience = self
            .hub
            .settings
            .request_timeout
            .min(std::time::Duration::from_secs(5));
        let asks = self
            .hub
            .connections
            .snapshot()
            .into_iter()
            .filter(|(_, c)| {
                c.capabilities
                    .resources
                    .as_ref()
                    .is_some_and(|r| r.list_changed != Some(true))
            })
            .map(|(id, connected)| async move {
                let fresh =
                    tokio::time::timeout(patience, connected.peer.list_all_resources()).await;
                (id, connected, fresh)
            });
        for (id, connected, fresh) in futures_util::future::join_all(asks).await {
            let Ok(Ok(fresh)) = fresh else { continue };
            let changed = {
                let mut offer = connected.offer.write().unwrap_or_else(|p| p.into_inner());
                let changed = offer.resources != fresh;
                if changed {
                    offer.resources = fresh;
                }
                changed
            };
            if changed {
                self.hub.connections.changed(
                    &id,
                    crate::supervisor::connections::Lists {
                        resources: true,
                        ..Default::default()
                    },
                );
            }
        }
    }
}
