//! The front's modern face (MCP 2026-07-28): a request whose `_meta` claims a protocol
//! version (or, over HTTP, whose `MCP-Protocol-Version` names a modern revision) is served
//! statelessly, beside the legacy sessions of the same endpoint. The spec's checks come first
//! (headers `-32020`, envelope `-32602`, version `-32022`, removed methods `-32601`); then
//! `server/discover` and `subscriptions/listen` are answered here and the rest goes to the
//! servers through a stand-in harness per request ([`call`]).

pub mod call;
pub mod discover;
pub mod listen;
pub mod param_headers;
pub mod state;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::fairness::Client;
use super::harness::Harness;
use super::hub::Hub;
use super::in_flight::HarnessId;
use super::outbox::Stream;
use super::registry::Scope;
use crate::mcp::era::{self, CacheHint, Envelope, Era, Headers, Problem};
use crate::mcp::message::{Kind, Message};
use crate::upstream::handshake::Identity;

/// What the front knows of where a modern message came from.
#[derive(Debug, Clone)]
pub struct Arrival<'a> {
    /// The endpoint's scope.
    pub scope: Scope,
    /// Over HTTP: its standard headers (checked against the body).
    pub headers: Option<Headers<'a>>,
    /// Over stdio: the stdio harness (its `notifications/cancelled` end requests).
    pub stdio: Option<HarnessId>,
    /// Who sent it (its listen streams are counted against it).
    pub client: Client,
}

/// What became of a modern message that passed the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// A notification, taken.
    Accepted,
    /// A request: its answer (and what comes before it) goes to its stream.
    Answering,
}

/// The era the upstream speaks to server `server` in (legacy while it is not running): a
/// modern server's results, `input_required` and `requestState` pass through untouched
/// (`call`, `discover`).
pub fn server_era(hub: &Hub, server: &str) -> Era {
    match hub.connections.get(server).map(|c| c.era()) {
        Some(crate::upstream::era::Era::Modern) => Era::Modern,
        _ => Era::Legacy,
    }
}

/// The cache hints server `server`'s results are given: a modern server's own (those of its
/// discover answer), [`CacheHint::LEGACY`] for a legacy one.
pub fn server_hint(hub: &Hub, server: &str) -> CacheHint {
    let discovered =
        (hub.connections.get(server)).and_then(|c| c.session.discovered().map(str::to_string));
    discovered
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|result| CacheHint::of(&result))
        .unwrap_or(CacheHint::LEGACY)
}

/// The cache hints of a result joined from every server of `scope`: the strictest of theirs.
pub fn scope_hint(hub: &Hub, scope: &Scope) -> CacheHint {
    (hub.connections.snapshot().into_keys())
        .filter(|server| scope.includes(server))
        .map(|server| server_hint(hub, &server))
        .reduce(CacheHint::merge)
        .unwrap_or(CacheHint::LEGACY)
}

/// Serve one modern message from a harness; its answer goes to `out`. `Err` when the spec's
/// checks refuse it (its error answer and HTTP status).
pub fn serve(
    hub: &Arc<Hub>,
    arrival: Arrival<'_>,
    message: Message,
    out: Stream,
) -> Result<Served, Problem> {
    if let Some(headers) = arrival.headers {
        era::check_headers(&message, headers)?;
    }
    let method = message.method().unwrap_or_default().to_string();
    if hub.is_stopping() && message.kind() == Kind::Request {
        return Err(era::shutting_down());
    }
    if message.kind() == Kind::Notification {
        if method == "notifications/cancelled" {
            if let (Some(harness), Some(id)) = (arrival.stdio, message.find(&["requestId"])) {
                cancel(harness, message.slice(id));
            }
        }
        return Ok(Served::Accepted);
    }
    let envelope = era::envelope(&message)?;
    if era::removed(&method) {
        return Err(era::not_found(&method));
    }
    let cancel = match (arrival.stdio, message.id()) {
        (Some(harness), Some(id)) => Cancel::register(harness, id),
        _ => Cancel::none(),
    };
    match method.as_str() {
        "server/discover" => discover::answer(hub.clone(), arrival.scope, message, out),
        "subscriptions/listen" => {
            let to = listen::Listener {
                scope: arrival.scope,
                client: arrival.client,
                out,
                cancel,
            };
            listen::start(hub, &envelope, message, to)
        }
        _ if message.find(&["requestState"]).is_some() => call::resume(
            hub,
            &arrival.scope,
            arrival.stdio,
            &envelope,
            message,
            out,
            cancel,
        )?,
        _ => call::forward(
            hub,
            arrival.scope,
            arrival.stdio,
            envelope,
            message,
            out,
            cancel,
        ),
    }
    Ok(Served::Answering)
}

/// A modern message on the stdio front: the first one gives servers the harness's identity
/// (as an `initialize` would); refusals are answered on stdout.
pub fn from_stdio(harness: &Arc<Harness>, message: Message, stream: Stream) {
    if harness.stands_for && !harness.spoke_modern.swap(true, Ordering::AcqRel) {
        if let Ok(envelope) = era::envelope(&message) {
            harness
                .hub
                .connections
                .set_identity(Some(Identity::of_harness(&initialize_params(
                    &envelope, true,
                ))));
        }
    }
    let id = message.id().unwrap_or("null").to_string();
    let name = (message.string(&["_meta", era::meta::CLIENT_INFO, "name"])).map(|n| n.into_owned());
    let arrival = Arrival {
        scope: harness.scope.clone(),
        headers: None,
        stdio: Some(harness.id),
        client: Client::new(None, name.as_deref()),
    };
    if let Err(problem) = serve(&harness.hub, arrival, message, stream.clone()) {
        if id != "null" {
            stream.finish(problem.answer(&id));
        }
    }
}

/// The `initialize` params a modern request's envelope amounts to (what a stand-in harness
/// and the servers' identity are made of); without `roots` unless `roots` (a stand-in that
/// joins with roots would tell every server its roots changed).
pub fn initialize_params(envelope: &Envelope, roots: bool) -> serde_json::Value {
    let mut capabilities = envelope.capabilities.clone();
    if let (false, Some(object)) = (roots, capabilities.as_object_mut()) {
        object.remove("roots");
    }
    let mut params = serde_json::json!({ "capabilities": capabilities });
    if let Some(info) = &envelope.client_info {
        params["clientInfo"] = info.clone();
    }
    params
}

/// The modern requests of stdio harnesses that `notifications/cancelled` can end.
fn cancels() -> &'static Mutex<HashMap<(HarnessId, String), CancellationToken>> {
    static CANCELS: std::sync::OnceLock<Mutex<HashMap<(HarnessId, String), CancellationToken>>> =
        std::sync::OnceLock::new();
    CANCELS.get_or_init(Mutex::default)
}

/// Cancel stdio harness `harness`'s modern request `id` (raw), if it is running. Whether it
/// was.
pub fn cancel(harness: HarnessId, id: &str) -> bool {
    let token = cancels()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&(harness, id.to_string()));
    token.map(|t| t.cancel()).is_some()
}

/// How a modern request learns that its harness cancelled it: the token, registered (over
/// stdio) while the request runs.
pub struct Cancel {
    token: CancellationToken,
    key: Option<(HarnessId, String)>,
}

impl Cancel {
    fn register(harness: HarnessId, id: &str) -> Self {
        let token = CancellationToken::new();
        let key = (harness, id.to_string());
        cancels()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), token.clone());
        Self {
            token,
            key: Some(key),
        }
    }

    /// A request no notification can cancel (over HTTP closing the stream does).
    pub fn none() -> Self {
        Self {
            token: CancellationToken::new(),
            key: None,
        }
    }

    /// Wait until the harness cancels.
    pub async fn cancelled(&self) {
        self.token.cancelled().await
    }
}

impl Drop for Cancel {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            cancels()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
        }
    }
}
