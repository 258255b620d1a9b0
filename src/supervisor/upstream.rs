//! The sidecar as an MCP client of one server (rmcp): the capabilities it declares (MCP Apps
//! included), the handshake over a child's pipes or streamable HTTP, and failure triage.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::connections::Connections;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool};
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};

/// The MCP Apps extension id, declared upstream so App servers keep their UI metadata.
pub const MCP_APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MCP Apps HTML profile.
pub const MCP_APP_MIME: &str = "text/html;profile=mcp-app";

/// The client side of one upstream connection.
#[derive(Clone)]
pub struct Upstream {
    server: String,
    id: String,
    connections: Arc<Connections>,
}

impl Upstream {
    /// A client for server `id` (declared as `server`), publishing tool changes to
    /// `connections`.
    pub fn new(id: &str, server: &str, connections: Arc<Connections>) -> Self {
        Self {
            server: server.to_string(),
            id: id.to_string(),
            connections,
        }
    }
}

impl ClientHandler for Upstream {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        let mut ui = serde_json::Map::new();
        ui.insert("mimeTypes".into(), serde_json::json!([MCP_APP_MIME]));
        capabilities.extensions = Some(BTreeMap::from([(MCP_APPS_EXTENSION.to_string(), ui)]));
        ClientConfig::new(
            capabilities,
            Implementation::new("ahp-proxy", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_tool_list_changed(&self, context: rmcp::service::NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "upstream tools changed");
        match context.peer.list_all_tools().await {
            Ok(tools) => self.connections.set_tools(&self.id, tools),
            Err(error) => {
                tracing::debug!(server = %self.server, %error, "re-listing tools failed")
            }
        }
    }
}

/// A live, initialized connection and what it offered at start.
pub struct Connection {
    /// The rmcp service (its peer sends requests; cancel it to hang up).
    pub service: RunningService<RoleClient, Upstream>,
    /// `tools/list` at start-up.
    pub tools: Vec<Tool>,
}

/// Why a connection could not be made.
#[derive(Debug)]
pub enum ConnectError {
    /// The server wants credentials: the raw `WWW-Authenticate` challenge, if one came.
    AuthRequired {
        /// The challenge header, if the server sent one.
        challenge: Option<String>,
        /// HTTP 403 rather than 401.
        insufficient_scope: bool,
    },
    /// Anything else, as a message safe to show (no launch spec inside).
    Failed(String),
}

/// Handshake over `transport`, then `tools/list`. `hide` is removed from error text (a URL).
pub async fn connect<T, E, A>(
    upstream: Upstream,
    transport: T,
    hide: Option<&str>,
) -> Result<Connection, ConnectError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let service = match upstream.serve(transport).await {
        Ok(service) => service,
        Err(error) => return Err(triage(&error, hide)),
    };
    // A proxy must see failures, not stale lists.
    service
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    match service.peer().list_all_tools().await {
        Ok(tools) => Ok(Connection { service, tools }),
        Err(error) => {
            let message = scrub(&format!("tools/list failed: {error}"), hide);
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

/// The streamable HTTP transport for `url` with `headers`. An `Authorization: Bearer …`
/// header becomes rmcp's bearer token; other headers go as they are.
pub fn http_transport(
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    let mut custom = HashMap::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("authorization") {
            if let Some(token) = value.strip_prefix("Bearer ") {
                config = config.auth_header(token.to_string());
                continue;
            }
        }
        let header_name = http::HeaderName::try_from(name.as_str())
            .map_err(|_| format!("header {name:?} is not a valid HTTP header name"))?;
        let header_value = http::HeaderValue::try_from(value.as_str()).map_err(|_| {
            format!("the value of header {name:?} is not a valid HTTP header value")
        })?;
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
