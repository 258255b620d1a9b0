//! The `mcp://` side-channel: plain MCP requests from AHP clients that declared `mcpApps`,
//! served on the upstream server's live connection (it never sees a second `initialize`).
//!
//! Only the methods the server's customization advertises are served (its `mcpApp`'s
//! capability sets, and prompts in its `_meta`); results and MCP errors pass through as the
//! server sent them. A `tools/call` is mirrored into the activity chat, marked with the
//! client that made it; one the approval policy would hold for the harness is refused to a
//! connection that did not present the approval key (it would be a way around approval).
//! List changes reach the connections subscribed to the channel.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::front::Hub;
use crate::host::fanout::ConnId;
use crate::host::{apps, Host};
use crate::jsonrpc::{self, RpcError};
use crate::mcp::message::{Kind, Message};
use crate::mirror::{self, CallStart, Outcome};
use crate::supervisor::connections::{ChangeEvent, Connected, Connections};

/// What serving channels needs besides the host.
#[derive(Clone)]
pub struct McpChannels {
    /// Ready servers' connections.
    pub connections: Arc<Connections>,
    /// The MCP front, for `sampling/createMessage` and the mirror of tool calls (held
    /// weakly: it outlives no one).
    pub hub: Weak<Hub>,
    /// How long one request may take.
    pub timeout: Duration,
}

/// How many `mcp://` requests one connection may have in flight at once.
pub const MAX_IN_FLIGHT: usize = 64;

/// One connection's `mcp://` requests in flight: bounded, and all cancelled (upstream too)
/// when the connection ends.
pub struct InFlight {
    permits: Arc<tokio::sync::Semaphore>,
    ended: CancellationToken,
}

impl Default for InFlight {
    fn default() -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
            ended: CancellationToken::new(),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

/// Whether a request belongs on the `mcp://` side-channel (its `params.channel` says so).
pub fn is_channel_request(params: &Value) -> bool {
    params
        .get("channel")
        .and_then(Value::as_str)
        .is_some_and(|c| c.starts_with("mcp://"))
}

/// Who asks on a channel: the connection, and the client it initialized as.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a> {
    /// The connection.
    pub conn: ConnId,
    /// Its `clientId`.
    pub client_id: &'a str,
}

/// Serve request `id` (`method`, `params`) from `asker`: checked here, answered later from a
/// task of its own, so a slow server never holds up the connection.
pub fn request(
    host: &Arc<Host>,
    channels: &McpChannels,
    in_flight: &InFlight,
    asker: Asker<'_>,
    id: u64,
    method: &str,
    mut params: Value,
) {
    let conn = asker.conn;
    let outcome = (|| {
        let channel = params
            .get("channel")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let (server, offer) = host.resolve_channel(conn, &channel)?;
        if !apps::serves(&offer, method) {
            return Err(RpcError::method_not_found(format!(
                "{method} is not served on {channel}"
            )));
        }
        let Ok(permit) = in_flight.permits.clone().try_acquire_owned() else {
            return Err(RpcError::new(
                jsonrpc::codes::INTERNAL_ERROR,
                format!("too many mcp:// requests in flight on this connection (at most {MAX_IN_FLIGHT})"),
            ));
        };
        if let Some(object) = params.as_object_mut() {
            object.remove("channel");
        }
        tracing::debug!(conn, server = %server, method, "mcp:// request");
        let host = host.clone();
        let channels = channels.clone();
        let method = method.to_string();
        let ended = in_flight.ended.clone();
        let client_id = asker.client_id.to_string();
        let may_decide = host.may_decide(conn);
        tokio::spawn(async move {
            let _permit = permit;
            let asked = Asked {
                server: &server,
                channel: &channel,
                method: &method,
                client_id: &client_id,
                may_decide,
            };
            let answer = forward(&channels, asked, params, &ended).await;
            if ended.is_cancelled() {
                return;
            }
            let frame = match answer {
                Ok(result) => jsonrpc::success(id, &result),
                Err(error) => jsonrpc::failure(&Value::from(id), &error),
            };
            host.send(conn, frame);
        });
        Ok(())
    })();
    if let Err(error) = outcome {
        host.send(conn, jsonrpc::failure(&Value::from(id), &error));
    }
}

/// A notification on a channel: `notifications/message` from an App is logged (at debug,
/// with its server); anything else is ignored.
pub fn notification(host: &Host, conn: ConnId, method: &str, params: &Value) {
    let channel = params
        .get("channel")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match host.resolve_channel(conn, channel) {
        Ok((server, offer))
            if method == "notifications/message" && offer.apps.logging.is_some() =>
        {
            let level = params
                .get("level")
                .and_then(|l| l.as_str())
                .unwrap_or("info");
            let data = params
                .get("data")
                .map(|d| d.to_string())
                .unwrap_or_default();
            tracing::debug!(conn, server = %server, level, data, "MCP App log message");
        }
        _ => tracing::debug!(conn, method, "mcp:// notification ignored"),
    }
}
/// One `mcp://` request, as asked.
#[derive(Clone, Copy)]
struct Asked<'a> {
    server: &'a str,
    channel: &'a str,
    method: &'a str,
    client_id: &'a str,
    /// Whether the connection presented the approval key.
    may_decide: bool,
}

/// One `mcp://` request answered: by the server's session (its result or MCP error as it
/// was), or, for `sampling/createMessage`, by a harness. Cancelled with the connection,
/// upstream or at the harness too. A `tools/call` is mirrored, marked as the client's.
async fn forward(
    channels: &McpChannels,
    asked: Asked<'_>,
    params: Value,
    ended: &CancellationToken,
) -> Result<Value, RpcError> {
    let Asked {
        server,
        channel,
        method,
        ..
    } = asked;
    if method == "sampling/createMessage" {
        let Some(hub) = channels.hub.upgrade() else {
            return Err(not_ready(channel));
        };
        let answer = hub
            .sample_for_app(server, &params.to_string(), ended.child_token())
            .await
            .map_err(|(code, message)| RpcError::new(code as i32, message))?;
        return result_of(&answer);
    }
    let Some(connected) = channels.connections.get(server) else {
        return Err(not_ready(channel));
    };
    if method == "tools/call" && !asked.may_decide {
        guarded(channels, server, &connected, &params)?;
    }
    let ticket = (method == "tools/call")
        .then(|| mirrored(channels, &connected, asked, &params))
        .flatten();
    let text = json!({"jsonrpc": "2.0", "id": 0, "method": method, "params": params}).to_string();
    let request =
        Message::parse(text).map_err(|invalid| RpcError::invalid_params(invalid.message))?;
    match connected
        .session
        .ask(request, channels.timeout, ended)
        .await
    {
        Ok(answer) => {
            let result = result_of(&answer);
            if let Some(ticket) = ticket {
                ticket.finish(Outcome::Raw(answer.into_text()));
            }
            result
        }
        Err(failure) => {
            let (code, message) =
                crate::front::exchange::describe(&failure, &connected.name, method);
            if let Some(ticket) = ticket.filter(|_| !ended.is_cancelled()) {
                ticket.finish(Outcome::Failed(message.clone()));
            }
            Err(RpcError::new(code as i32, message))
        }
    }
}

/// A `tools/call` from a connection without the approval key, refused when the approval
/// policy would hold the same call of the harness's (judged as the front judges it: the
/// tool's `readOnlyHint`, the declaration's pre-approvals).
fn guarded(
    channels: &McpChannels,
    server: &str,
    connected: &Connected,
    params: &Value,
) -> Result<(), RpcError> {
    let Some(hub) = channels.hub.upgrade() else {
        return Ok(());
    };
    let policy = &hub.settings.approval;
    if policy.is_inert() {
        return Ok(());
    }
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let offer = connected.offer();
    let annotations = offer.tool(name).and_then(|t| t.value(&["annotations"]));
    let read_only = annotations
        .as_ref()
        .and_then(|a| a.get("readOnlyHint")?.as_bool())
        == Some(true);
    let pre_approved = (channels.connections.tool_filters(server))
        .is_some_and(|f| f.pre_approved.iter().any(|t| t == name));
    let facts = crate::approval::Facts {
        read_only,
        pre_approved,
    };
    if policy.judge(&connected.name, name, facts).ask {
        return Err(RpcError::invalid_params(format!(
            "tool {name:?} on MCP server {:?} is held for approval, and {}",
            connected.name,
            crate::host::approvals::NOT_A_DECIDER
        )));
    }
    Ok(())
}

/// Begin mirroring a `tools/call` made on a channel, marked as made by its client (lossy,
/// like a harness's call: `None` when the mirror is busy or gone).
fn mirrored(
    channels: &McpChannels,
    connected: &Connected,
    asked: Asked<'_>,
    params: &Value,
) -> Option<mirror::Ticket> {
    let hub = channels.hub.upgrade()?;
    let name = params.get("name").and_then(Value::as_str)?.to_string();
    let offer = connected.offer();
    let tool = offer.tool(&name);
    hub.mirror.begin_for(asked.client_id, |call| CallStart {
        call,
        runner: mirror::Runner::Server {
            id: asked.server.to_string(),
            name: connected.name.clone(),
        },
        display_name: tool.map(|t| t.title()).unwrap_or_else(|| name.clone()),
        ui: tool.and_then(|t| t.ui()),
        confirmation: None,
        tool: name,
        input: params
            .get("arguments")
            .map(Value::to_string)
            .unwrap_or_else(|| "{}".into()),
        era: None,
    })
}

/// An MCP answer as the AHP answer: its result, or its error as it was.
fn result_of(answer: &Message) -> Result<Value, RpcError> {
    let body: Value = answer
        .body()
        .and_then(|span| serde_json::from_str(answer.slice(span)).ok())
        .unwrap_or(Value::Null);
    if answer.kind() != Kind::Error {
        return Ok(body);
    }
    Err(RpcError {
        code: body
            .get("code")
            .and_then(Value::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(jsonrpc::codes::INTERNAL_ERROR),
        message: body
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the MCP server answered with an error")
            .to_string(),
        data: body.get("data").cloned(),
    })
}

/// Relay the servers' `list_changed` to the connections subscribed to their channels.
pub async fn relay_list_changes(connections: Arc<Connections>, host: Weak<Host>) {
    let mut changes = connections.subscribe();
    while let Some(event) = changes.next().await {
        let ChangeEvent::Server(change) = event else {
            continue;
        };
        let Some(host) = host.upgrade() else { return };
        // Becoming ready or going away is told by the channel's own appearance.
        if change.ready.is_none() {
            if change.lists.tools {
                announce_list_changed(&host, &change.server, "tools");
            }
            if change.lists.resources {
                announce_list_changed(&host, &change.server, "resources");
            }
            if change.lists.prompts {
                announce_list_changed(&host, &change.server, "prompts");
            }
        }
    }
}

/// Server `server` changed its `list` (`tools`, `resources` or `prompts`): send
/// `notifications/<list>/list_changed` on each of its channels that advertise `listChanged`
/// for it, to their subscribers.
pub fn announce_list_changed(host: &Host, server: &str, list: &str) {
    host.announce_list_changed(server, list, |channel| {
        jsonrpc::notification(
            &format!("notifications/{list}/list_changed"),
            &json!({ "channel": channel }),
        )
    });
}

fn not_ready(channel: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "{channel} is not an open mcp:// channel (the server is not ready, or the channel is unknown)"
    ))
}
