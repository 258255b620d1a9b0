//! The sidecar as an MCP client of one server (rmcp): the capabilities it declares (MCP Apps
//! included), the handshake over a child's pipes or streamable HTTP, and failure triage.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientResult, Implementation, ProtocolVersion,
    ServerNotification, ServerRequest,
};
use rmcp::service::{
    ClientInitializeError, NotificationContext, RequestContext, RunningService, Service,
};
use rmcp::{ErrorData, RoleClient, ServiceExt};

use super::connections::{Connections, Lists, Offer};

/// The MCP Apps extension id, declared upstream so App servers keep their UI metadata.
pub const MCP_APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MCP Apps HTML profile.
pub const MCP_APP_MIME: &str = "text/html;profile=mcp-app";

/// The client side of one upstream connection: keeps the server's offer fresh and hands
/// everything else the server sends to the front's [`super::connections::Downstream`].
#[derive(Clone)]
pub struct Upstream {
    server: String,
    id: String,
    connections: Arc<Connections>,
    offer: Arc<RwLock<Offer>>,
    /// Serialises refreshes so the last one stored is the freshest.
    refreshing: Arc<tokio::sync::Mutex<()>>,
    /// Lists announced as changed and not yet re-read (bits of [`list_bits`]): a burst of
    /// `list_changed` costs one re-read, not one each.
    pending: Arc<AtomicU8>,
}

impl Upstream {
    /// A client for server `id` (declared as `server`), announcing its changes in
    /// `connections`.
    pub fn new(id: &str, server: &str, connections: Arc<Connections>) -> Self {
        Self {
            server: server.to_string(),
            id: id.to_string(),
            connections,
            offer: Arc::default(),
            refreshing: Arc::default(),
            pending: Arc::default(),
        }
    }

    /// What the server offers (shared: refreshed in place).
    pub fn offer(&self) -> Arc<RwLock<Offer>> {
        self.offer.clone()
    }

    /// Re-read the lists in `lists` from the server and announce the change. A change that
    /// arrives while an earlier one waits for its turn is left to that one: it reads later.
    async fn refresh(&self, peer: &rmcp::Peer<RoleClient>, lists: Lists) {
        let bits = list_bits(lists);
        if self.pending.fetch_or(bits, Ordering::AcqRel) & bits == bits {
            return;
        }
        let _serial = self.refreshing.lock().await;
        let lists = lists_of(self.pending.swap(0, Ordering::AcqRel));
        if lists == Lists::default() {
            return;
        }
        let capabilities = peer
            .peer_info()
            .map(|info| info.capabilities.clone())
            .unwrap_or_default();
        match read_offer(peer, &capabilities, lists).await {
            Ok(fresh) => {
                let mut offer = self.offer.write().unwrap_or_else(|p| p.into_inner());
                if lists.tools {
                    offer.tools = fresh.tools;
                }
                if lists.prompts {
                    offer.prompts = fresh.prompts;
                }
                if lists.resources {
                    offer.resources = fresh.resources;
                    offer.templates = fresh.templates;
                }
            }
            Err(error) => {
                tracing::debug!(server = %self.server, %error, "re-listing after a change failed");
                return;
            }
        }
        self.connections.changed(&self.id, lists);
    }
}

fn list_bits(lists: Lists) -> u8 {
    u8::from(lists.tools) | u8::from(lists.prompts) << 1 | u8::from(lists.resources) << 2
}

fn lists_of(bits: u8) -> Lists {
    Lists {
        tools: bits & 1 != 0,
        prompts: bits & 2 != 0,
        resources: bits & 4 != 0,
    }
}

/// Read the lists in `lists` that the server's capabilities say it has (every page). Only
/// `tools/list` must succeed; a server whose prompts or resources cannot be listed offers
/// none.
pub async fn read_offer(
    peer: &rmcp::Peer<RoleClient>,
    capabilities: &rmcp::model::ServerCapabilities,
    lists: Lists,
) -> Result<Offer, rmcp::ServiceError> {
    let mut offer = Offer::default();
    if lists.tools && capabilities.tools.is_some() {
        offer.tools = peer.list_all_tools().await?;
    }
    if lists.prompts && capabilities.prompts.is_some() {
        offer.prompts = peer.list_all_prompts().await.unwrap_or_default();
    }
    if lists.resources && capabilities.resources.is_some() {
        offer.resources = peer.list_all_resources().await.unwrap_or_default();
        offer.templates = peer.list_all_resource_templates().await.unwrap_or_default();
    }
    Ok(offer)
}

impl Service<RoleClient> for Upstream {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        if let ServerRequest::PingRequest(_) = request {
            return Ok(ClientResult::empty(()));
        }
        match self.connections.downstream() {
            Some(downstream) => downstream.request(self.id.clone(), request, context).await,
            None => Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("{} is not served here", request_method(&request)),
                None,
            )),
        }
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        let lists = match &notification {
            ServerNotification::ToolListChangedNotification(_) => Some(Lists {
                tools: true,
                ..Lists::default()
            }),
            ServerNotification::PromptListChangedNotification(_) => Some(Lists {
                prompts: true,
                ..Lists::default()
            }),
            ServerNotification::ResourceListChangedNotification(_) => Some(Lists {
                resources: true,
                ..Lists::default()
            }),
            _ => None,
        };
        match lists {
            Some(lists) => {
                tracing::debug!(server = %self.server, ?lists, "upstream lists changed");
                self.refresh(&context.peer, lists).await;
            }
            None => {
                if let Some(downstream) = self.connections.downstream() {
                    downstream.notify(self.id.clone(), notification).await;
                }
            }
        }
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        // Declared upstream so servers offer their UI tools, ask for roots, sample and
        // elicit; the front answers through the harness that caused the request.
        let mut capabilities: ClientCapabilities = serde_json::from_value(serde_json::json!({
            "roots": {"listChanged": true},
            "sampling": {},
            "elicitation": {},
        }))
        .unwrap_or_default();
        let mut ui = serde_json::Map::new();
        ui.insert("mimeTypes".into(), serde_json::json!([MCP_APP_MIME]));
        capabilities.extensions = Some(BTreeMap::from([(MCP_APPS_EXTENSION.to_string(), ui)]));
        ClientConfig::new(
            capabilities,
            Implementation::new("ahp-proxy", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// The JSON-RPC method of a server request.
pub fn request_method(request: &ServerRequest) -> &str {
    match request {
        ServerRequest::PingRequest(_) => "ping",
        ServerRequest::CreateMessageRequest(_) => "sampling/createMessage",
        ServerRequest::ListRootsRequest(_) => "roots/list",
        ServerRequest::ElicitRequest(_) => "elicitation/create",
        ServerRequest::CustomRequest(r) => r.method.as_str(),
        _ => "a server request",
    }
}

/// A live, initialized connection and what it offered at start.
pub struct Connection {
    /// The rmcp service (its peer sends requests; cancel it to hang up).
    pub service: RunningService<RoleClient, Upstream>,
    /// What it declared at `initialize`.
    pub capabilities: rmcp::model::ServerCapabilities,
    /// Its `instructions`.
    pub instructions: Option<String>,
    /// Its `serverInfo`.
    pub server_info: Option<Implementation>,
    /// What it offers, kept fresh by its [`Upstream`].
    pub offer: Arc<RwLock<Offer>>,
}

impl Connection {
    /// How many tools it offers now.
    pub fn tool_count(&self) -> usize {
        self.offer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .tools
            .len()
    }
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The server wants credentials: the raw `WWW-Authenticate` challenge, if one came.
    #[error("the server asked for authorization")]
    AuthRequired {
        /// The challenge header, if the server sent one.
        challenge: Option<String>,
        /// HTTP 403 rather than 401.
        insufficient_scope: bool,
    },
    /// Anything else, as a message safe to show (no launch spec inside).
    #[error("{0}")]
    Failed(String),
}

/// Handshake over `transport`, then list what the server offers (tools, prompts, resources). `hide` is removed from error text (a URL).
pub async fn connect<T, E, A>(
    upstream: Upstream,
    transport: T,
    hide: Option<&str>,
) -> Result<Connection, ConnectError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let offer = upstream.offer();
    let service = match upstream.serve(transport).await {
        Ok(service) => service,
        Err(error) => return Err(triage(&error, hide)),
    };
    // A proxy must see failures, not stale lists.
    service
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    let (capabilities, instructions, server_info) = service
        .peer()
        .peer_info()
        .map(|info| {
            (
                info.capabilities.clone(),
                info.instructions.clone(),
                info.server_info.clone(),
            )
        })
        .unwrap_or_default();
    match read_offer(service.peer(), &capabilities, Lists::ALL).await {
        Ok(read) => {
            *offer.write().unwrap_or_else(|p| p.into_inner()) = read;
            Ok(Connection {
                service,
                capabilities,
                instructions,
                server_info,
                offer,
            })
        }
        Err(error) => {
            let message = scrub(
                &format!("listing what the server offers failed: {error}"),
                hide,
            );
            let _ = service.cancel().await;
            Err(ConnectError::Failed(message))
        }
    }
}

fn triage(error: &ClientInitializeError, hide: Option<&str>) -> ConnectError {
    if let Some(challenge) = error.auth_challenge() {
        return ConnectError::AuthRequired {
            challenge: Some(challenge.to_string()),
            insufficient_scope: !error.is_authorization_required(),
        };
    }
    let text = error.to_string();
    if error.is_authorization_required() || text.contains("HTTP 401") {
        return ConnectError::AuthRequired {
            challenge: None,
            insufficient_scope: false,
        };
    }
    let message = match error {
        ClientInitializeError::ConnectionClosed(_) => {
            "the server closed the connection during the MCP handshake".to_string()
        }
        ClientInitializeError::JsonRpcError(data) => {
            format!("the server refused initialize: {}", data.message)
        }
        _ => format!("MCP handshake failed: {text}"),
    };
    ConnectError::Failed(scrub(&message, hide))
}

/// Remove `hide` (a server URL, which may carry tokens) from a message: the URL as given,
/// and separately its query string and user info, in case a library printed the URL
/// normalised.
pub fn scrub(message: &str, hide: Option<&str>) -> String {
    let Some(url) = hide.filter(|u| !u.is_empty()) else {
        return message.to_string();
    };
    let mut out = message.replace(url, "<server url>");
    if let Some((_, query)) = url.split_once('?') {
        let query = query.split('#').next().unwrap_or_default();
        if !query.is_empty() {
            out = out.replace(query, "<query>");
        }
    }
    if let Some((_, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            if !userinfo.is_empty() {
                out = out.replace(userinfo, "<credentials>");
            }
        }
    }
    out
}

/// A configured header that cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum InvalidHeader {
    /// Its name.
    #[error("header {0:?} is not a valid HTTP header name")]
    Name(String),
    /// Its value (the text names the header, never the value).
    #[error("the value of header {0:?} is not a valid HTTP header value")]
    Value(String),
}

/// The streamable HTTP transport for `url` with `headers`. An `Authorization: Bearer …`
/// header becomes rmcp's bearer token; other headers go as they are. `bearer` (a token an
/// AHP client gave) replaces any configured `Authorization`.
pub fn http_transport(
    url: &str,
    headers: &BTreeMap<String, String>,
    bearer: Option<&str>,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, InvalidHeader> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    let mut custom = HashMap::new();
    if let Some(token) = bearer {
        config = config.auth_header(token.to_string());
    }
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("authorization") {
            if bearer.is_some() {
                continue;
            }
            if let Some(token) = value.strip_prefix("Bearer ") {
                config = config.auth_header(token.to_string());
                continue;
            }
        }
        let header_name = http::HeaderName::try_from(name.as_str())
            .map_err(|_| InvalidHeader::Name(name.clone()))?;
        let header_value = http::HeaderValue::try_from(value.as_str())
            .map_err(|_| InvalidHeader::Value(name.clone()))?;
        custom.insert(header_name, header_value);
    }
    Ok(rmcp::transport::StreamableHttpClientTransport::from_config(
        config.custom_headers(custom),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_bits_round_trip() {
        for bits in 0..8 {
            assert_eq!(list_bits(lists_of(bits)), bits);
        }
        assert_eq!(lists_of(list_bits(Lists::ALL)), Lists::ALL);
    }

    #[test]
    fn scrub_removes_the_url_its_query_and_credentials_even_when_normalised() {
        let url = "HTTP://user:pw@Example.com:80/mcp?key=s3cret";
        let printed = "error sending request for url (http://user:pw@example.com/mcp?key=s3cret)";
        let clean = scrub(printed, Some(url));
        assert!(
            !clean.contains("s3cret") && !clean.contains("pw"),
            "{clean}"
        );
        assert_eq!(scrub(&format!("at {url}"), Some(url)), "at <server url>");
        assert_eq!(scrub("plain", None), "plain");
    }
}
