//! The MCP front: the harness's MCP server. One aggregated endpoint over every ready server
//! (names per [`naming`]) and one transparent endpoint per server, over stdio or streamable
//! HTTP; requests go to the live upstream connections, list changes are announced as they
//! happen, and every tool call is mirrored into AHP.

// Logging, sampling and roots are deprecated by SEP-2577 but still forwarded faithfully.
#![allow(deprecated)]

pub mod forward;
pub mod http;
pub mod hub;
mod listing;
pub mod naming;
pub mod registry;
pub mod relay;
mod tool_call;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientRequest, CompleteRequestParams, CompleteResult,
    ErrorCode, GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, Reference, Request,
    ServerCapabilities, ServerConfig, ServerResult, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

pub use hub::{Hub, Settings};
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

    /// Rewrite a result from `server` to the URIs this endpoint shows.
    fn rewrite<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        server: &str,
        value: T,
    ) -> T {
        if !self.aggregated() {
            return value;
        }
        let names = self.hub.namespace();
        if !names.renames_uris_of(server) {
            return value;
        }
        let Ok(mut json) = serde_json::to_value(&value) else {
            return value;
        };
        names.rewrite_uris(server, &mut json);
        serde_json::from_value(json).unwrap_or(value)
    }

    /// Where a resource URI from the harness goes: `(server, uri)` candidates in order.
    fn resource_targets(&self, uri: &str) -> Vec<(String, String)> {
        match self.own_server() {
            Some(id) => vec![(id.to_string(), uri.to_string())],
            None => match self.hub.namespace().route_uri(uri) {
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
        let apps = self.shows_app_only(&context.peer);
        let mut result: ListToolsResult = self.list(request, &context).await?;
        result
            .tools
            .retain(|t| apps || !naming::app_only(t.meta.as_ref().map(|m| &m.0)));
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.seen(&context.peer);
        self.call(request, &context).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.list(request, &context).await
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
                let names = self.hub.namespace();
                let entry = names.prompt(&request.name).ok_or_else(|| {
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
        if self.aggregated() {
            self.seen(&context.peer);
            self.first_listing().await;
            self.refresh_unannounced_resources().await;
        }
        self.list(request, &context).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.list(request, &context).await
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
                let names = self.hub.namespace();
                let entry = names.prompt(&prompt.name).ok_or_else(|| {
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
    /// (all at once, briefly); a real difference updates the names and is announced like
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
