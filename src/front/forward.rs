//! One harness request forwarded to one server: the harness's `_meta`, a timeout that
//! progress resets, cancellation passed on to the right upstream request, and every
//! failure turned into an MCP error the harness can show (never a hang).

use std::time::Duration;

use rmcp::model::{ClientRequest, ErrorCode, ServerResult};
use rmcp::service::{PeerRequestOptions, RequestContext};
use rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServiceError};

use super::registry::HarnessId;
use super::Hub;

/// JSON-RPC code for "the server did not answer in time" (as the MCP SDKs use it).
pub const REQUEST_TIMEOUT: i32 = -32001;

/// Everything one forwarded request needs to know.
pub struct Target<'a> {
    /// The server's customization id.
    pub server: &'a str,
    /// Its declared name (for messages).
    pub name: &'a str,
    /// Its connection.
    pub peer: &'a Peer<RoleClient>,
}

/// Why a forwarded request got no result: the error for the harness, and whether the
/// server refused this very request for want of scope (HTTP 403 `insufficient_scope`), so
/// that it is worth sending again once the server has a better token.
pub struct Failure {
    pub error: ErrorData,
    pub wants_scope: bool,
}

impl From<ErrorData> for Failure {
    fn from(error: ErrorData) -> Self {
        Failure {
            error,
            wants_scope: false,
        }
    }
}

impl From<Failure> for ErrorData {
    fn from(failure: Failure) -> Self {
        failure.error
    }
}

/// Send `request` to the server and wait for its answer, on behalf of harness `harness`
/// whose request context is `context`.
pub async fn forward(
    hub: &Hub,
    harness: HarnessId,
    target: Target<'_>,
    request: ClientRequest,
    context: &RequestContext<RoleServer>,
) -> Result<ServerResult, Failure> {
    let method = request.method().to_string();
    let failed = |error: ServiceError| Failure {
        wants_scope: hub.connections.check_failure(target.server, &error),
        error: failure(error, target.name, &method, hub.settings.request_timeout),
    };
    let options = PeerRequestOptions::with_timeout(hub.settings.request_timeout)
        .reset_timeout_on_progress()
        .with_meta(context.meta.clone());
    let handle = target
        .peer
        .send_request_with_option(request, options)
        .await
        .map_err(failed)?;
    let upstream_id = handle.id.clone();
    let upstream_token = handle.progress_token.clone();
    let own_token = context.meta.get_progress_token();
    hub.registry().forwarded(
        target.server,
        upstream_id.clone(),
        harness,
        context.id.clone(),
        own_token.map(|own| (upstream_token.clone(), own)),
    );
    let _done = Finished {
        hub,
        server: target.server,
        id: upstream_id.clone(),
        token: upstream_token,
    };
    tokio::select! {
        answer = handle.await_response() => {
            answer.map_err(failed)
        }
        _ = context.ct.cancelled() => {
            // Tell the server, so it stops working on it; its late answer is dropped.
            let cancel: Result<rmcp::model::CancelledNotificationParam, _> =
                serde_json::from_value(serde_json::json!({
                    "requestId": upstream_id,
                    "reason": "cancelled by the harness",
                }));
            if let Ok(cancel) = cancel {
                let _ = target.peer.notify_cancelled(cancel).await;
            }
            Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("{method} was cancelled by the harness"),
                None,
            )
            .into())
        }
    }
}

/// Removes the bookkeeping of a forwarded request however it ends.
struct Finished<'a> {
    hub: &'a Hub,
    server: &'a str,
    id: rmcp::model::RequestId,
    token: rmcp::model::ProgressToken,
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.hub
            .registry()
            .finished(self.server, &self.id, &self.token);
    }
}

/// An rmcp failure as the harness should see it: the server's own MCP error verbatim;
/// anything else says what happened without quoting transport internals (which may carry
/// a server URL).
pub fn failure(error: ServiceError, server: &str, method: &str, timeout: Duration) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        ServiceError::Timeout { .. } => ErrorData::new(
            ErrorCode(REQUEST_TIMEOUT),
            format!(
                "MCP server {server} did not answer {method} within {} ms",
                timeout.as_millis()
            ),
            None,
        ),
        ServiceError::TransportClosed => ErrorData::internal_error(
            format!("MCP server {server} stopped before answering {method}"),
            None,
        ),
        ServiceError::Cancelled { .. } => ErrorData::internal_error(
            format!("{method} to MCP server {server} was cancelled"),
            None,
        ),
        ServiceError::UnexpectedResponse => ErrorData::internal_error(
            format!("MCP server {server} answered {method} with an unexpected result"),
            None,
        ),
        _ => ErrorData::internal_error(
            format!("{method} could not be delivered to MCP server {server}"),
            None,
        ),
    }
}

/// A "server not available" error.
pub fn not_running(what: &str) -> ErrorData {
    ErrorData::internal_error(format!("{what} is not running"), None)
}
