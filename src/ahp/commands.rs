//! One AHP connection's protocol state machine: handshake, then commands and notifications.
//! Takes decoded JSON-RPC messages, answers through the host's ordered outbound queue.

use std::sync::Arc;

use ahp_types::actions::StateAction;
use ahp_types::commands::{
    CompletionsParams, CompletionsResult, CreateSessionParams, DispatchActionParams,
    DisposeSessionParams, InitializeParams, ListSessionsParams, ReconnectParams,
    ResolveSessionConfigResult, ResourceCopyResult, ResourceDeleteResult, ResourceMkdirResult,
    ResourceMoveResult, ResourceWriteResult, SessionConfigCompletionsResult, SubscribeParams,
    UnsubscribeParams,
};
use ahp_types::errors::UnsupportedProtocolVersionErrorData;
use ahp_types::state::{CustomizationEnablement, SessionConfigSchema};
use ahp_types::ROOT_RESOURCE_URI;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::aliases;
use super::handshake::{self, SUPPORTED_VERSIONS};
use super::services::Services;
use crate::host::audience::Named;
use crate::host::bounds;
use crate::host::fanout::ConnId;
use crate::host::{ClientRecord, Host};
use crate::jsonrpc::{self, ahp_codes, Incoming, Malformed, RpcError};
use crate::untrusted::Untrusted;

/// Commands of AHP 1.0.0 this host does not serve (it has no LLM, chats, terminals,
/// changesets or automations, and advertises none of them).
const UNSUPPORTED: &[&str] = &[
    "createChat",
    "disposeChat",
    "moveChat",
    "fetchTurns",
    "createTerminal",
    "disposeTerminal",
    "invokeChangesetOperation",
    "listAutomationTriggerDefinitions",
    "runAutomation",
    "fetchAutomationRuns",
];

/// What the socket loop should do after a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// Keep reading.
    Continue,
    /// Send what is queued, then close with this reason (e.g. after `-32005`).
    Close(&'static str),
}

enum Phase {
    /// Only `initialize`, `reconnect` and `ping` are served.
    Handshake,
    /// Initialized (or reconnected) as `client_id`; the host keeps its negotiated record.
    Ready { client_id: String },
}

/// One connection's protocol state machine: handshake phase, then commands and
/// notifications, answered through the host's ordered outbound queue.
pub struct ConnectionProtocol {
    id: ConnId,
    services: Arc<Services>,
    phase: Phase,
    /// Its `mcp://` requests in flight (cancelled when the connection is dropped).
    channel_requests: super::mcp_channel::InFlight,
    /// The `clientSeq` of its last dispatched action: each must be greater.
    last_client_seq: Option<i64>,
}

impl ConnectionProtocol {
    /// A connection that has not shaken hands yet.
    pub fn new(id: ConnId, services: Arc<Services>) -> Self {
        Self {
            id,
            services,
            phase: Phase::Handshake,
            channel_requests: Default::default(),
            last_client_seq: None,
        }
    }

    /// The client id, once initialized.
    pub fn client_id(&self) -> Option<&str> {
        match &self.phase {
            Phase::Ready { client_id, .. } => Some(client_id),
            Phase::Handshake => None,
        }
    }

    /// Handle one text frame.
    pub fn on_text(&mut self, text: &str) -> After {
        match jsonrpc::decode(text) {
            Ok(Incoming::Request { id, method, params }) => self.on_request(id, &method, params),
            Ok(Incoming::Notification { method, params }) => {
                self.on_notification(&method, params);
                After::Continue
            }
            Ok(Incoming::Response { id }) => {
                tracing::debug!(conn = self.id, id = %Untrusted(&id.to_string()), "response to no outstanding request ignored");
                After::Continue
            }
            Err(Malformed { id, error }) => {
                tracing::debug!(conn = self.id, code = error.code, message = %Untrusted(&error.message), "malformed frame");
                self.services
                    .host
                    .send(self.id, jsonrpc::failure(&id, &error));
                After::Continue
            }
        }
    }

    /// Handle a binary frame: AHP is text frames only.
    pub fn on_binary(&mut self) {
        let error = RpcError::new(
            jsonrpc::codes::INVALID_REQUEST,
            "binary frames are not supported: send each JSON-RPC message as a text frame",
        );
        self.services
            .host
            .send(self.id, jsonrpc::failure(&Value::Null, &error));
    }

    fn on_request(&mut self, id: u64, method: &str, params: Value) -> After {
        let outcome = match (&self.phase, method) {
            // MCP on an `mcp://` channel (even `ping`: only the advertised methods are served).
            (Phase::Ready { client_id }, m)
                if m != "subscribe" && super::mcp_channel::is_channel_request(&params) =>
            {
                let asker = super::mcp_channel::Asker {
                    conn: self.id,
                    client_id,
                };
                super::mcp_channel::request(
                    &self.services.host,
                    &self.services.channels,
                    &self.channel_requests,
                    asker,
                    id,
                    method,
                    params,
                );
                return After::Continue;
            }
            (_, "ping") => self.reply(id, &()),
            (Phase::Handshake, "initialize") => return self.initialize(id, params),
            (Phase::Handshake, "reconnect") => self.reconnect(id, params),
            (Phase::Ready { .. }, "initialize" | "reconnect") => Err(RpcError::method_not_found(
                format!("{method}: this connection is already initialized"),
            )),
            (Phase::Handshake, _) => Err(RpcError::method_not_found(format!(
                "{method}: send initialize (or reconnect) first"
            ))),
            (Phase::Ready { client_id, .. }, _) => {
                let client_id = client_id.clone();
                self.command(id, &client_id, method, params)
            }
        };
        if let Err(error) = outcome {
            self.services
                .host
                .send(self.id, jsonrpc::failure(&Value::from(id), &error));
        }
        After::Continue
    }

    fn reply(&self, id: u64, result: &impl serde::Serialize) -> Result<(), RpcError> {
        self.services
            .host
            .send(self.id, jsonrpc::success(id, result));
        Ok(())
    }

    fn initialize(&mut self, id: u64, params: Value) -> After {
        let refuse = |host: &Host, error: RpcError| {
            host.send(self.id, jsonrpc::failure(&Value::from(id), &error));
        };
        let params: InitializeParams = match decode_params("initialize", params) {
            Ok(params) => params,
            Err(error) => {
                refuse(&self.services.host, error);
                return After::Continue;
            }
        };
        if let Err(error) =
            on_root(&params.channel).and_then(|()| usable_client_id(&params.client_id))
        {
            refuse(&self.services.host, error);
            return After::Continue;
        }
        let version = match handshake::negotiate(&params.protocol_versions) {
            Ok(Some(version)) => version,
            Ok(None) => {
                let data = UnsupportedProtocolVersionErrorData {
                    supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
                };
                let error = RpcError {
                    code: ahp_codes::UNSUPPORTED_PROTOCOL_VERSION,
                    message: format!(
                        "unsupported protocol version: offered {:?}, this host speaks {}",
                        params.protocol_versions,
                        SUPPORTED_VERSIONS.join(", ")
                    ),
                    data: serde_json::to_value(data).ok(),
                };
                refuse(&self.services.host, error);
                return After::Close("unsupported protocol version");
            }
            Err(message) => {
                refuse(&self.services.host, RpcError::invalid_params(message));
                return After::Continue;
            }
        };
        let record = ClientRecord {
            protocol_version: version,
            mcp_apps: handshake::shown_mcp_apps(&params),
        };
        tracing::info!(conn = self.id, client = %Untrusted(&params.client_id), version = %record.protocol_version, mcp_apps = record.mcp_apps, "client initialized");
        let subscriptions = self.named_all(params.initial_subscriptions.as_deref().unwrap_or(&[]));
        self.services
            .host
            .initialize(self.id, id, &params.client_id, record, &subscriptions);
        self.phase = Phase::Ready {
            client_id: params.client_id,
        };
        After::Continue
    }

    fn reconnect(&mut self, id: u64, params: Value) -> Result<(), RpcError> {
        let params: ReconnectParams =
            decode_params("reconnect", handshake::reconnect_on_root(params))?;
        on_root(&params.channel)?;
        usable_client_id(&params.client_id)?;
        let subscriptions = self.named_all(&params.subscriptions);
        self.services.host.reconnect(
            self.id,
            id,
            &params.client_id,
            params.last_seen_server_seq,
            &subscriptions,
        )?;
        tracing::info!(conn = self.id, client = %Untrusted(&params.client_id), last_seen = params.last_seen_server_seq, "client reconnected");
        self.phase = Phase::Ready {
            client_id: params.client_id,
        };
        Ok(())
    }

    fn command(
        &mut self,
        id: u64,
        client_id: &str,
        method: &str,
        params: Value,
    ) -> Result<(), RpcError> {
        match method {
            "subscribe" => {
                let params: SubscribeParams = decode_params(method, params)?;
                let channel = self.named(&params.channel);
                self.services.host.subscribe(self.id, id, &channel)
            }
            "listSessions" => {
                let params: ListSessionsParams = decode_params(method, params)?;
                on_root(&params.channel)?;
                let result = self
                    .services
                    .host
                    .list_sessions(self.id, params.limit, params.cursor.as_deref())?;
                self.reply(id, &result)
            }
            "createSession" => {
                let params: CreateSessionParams = decode_params(method, params)?;
                // Another name of a session or chat that exists is taken, like its own.
                if let Some(existing) = aliases::published(&params.channel, &*self.services.host)
                {
                    return Err(RpcError::new(
                        ahp_codes::SESSION_ALREADY_EXISTS,
                        format!(
                            "session {:?} already exists (as {existing:?})",
                            params.channel
                        ),
                    ));
                }
                self.services.host.create_session(self.id, id, client_id, params)
            }
            "disposeSession" => {
                let params: DisposeSessionParams = decode_params(method, params)?;
                let channel = self.named(&params.channel);
                self.services.host.dispose_session(self.id, id, &channel.uri)
            }
            "resolveSessionConfig" | "sessionConfigCompletions" => {
                root_command(method, params)?;
                self.empty_answer(id, method)
            }
            "completions" => {
                // On a chat (where the spec puts it), its session (where VS Code aims them)
                // or the root (where this host took it before): there is nothing to complete.
                let params: CompletionsParams = decode_params(method, params)?;
                let host = &self.services.host;
                let channel = self.named(&params.channel).uri;
                if channel != ROOT_RESOURCE_URI && !host.is_chat(&channel) && !host.is_session(&channel)
                {
                    return Err(RpcError::new(
                        ahp_codes::NOT_FOUND,
                        format!(
                            "no chat or session {:?} on this host: completions go on a chat channel",
                            params.channel
                        ),
                    ));
                }
                self.reply(id, &CompletionsResult { items: vec![] })
            }
            m if UNSUPPORTED.contains(&m) => Err(RpcError::method_not_found(format!(
                "{m} is not supported by this host (it serves customizations and MCP servers, not chats, terminals or automations)"
            ))),
            "authenticate" => {
                let params: ahp_types::commands::AuthenticateParams =
                    decode_params(method, params)?;
                on_root(&params.channel)?;
                let waiting = self.services.channels.connections.auth_waiting();
                let Some(tried) = self.services.host.authenticate(params, waiting)? else {
                    return self.reply(id, &ahp_types::commands::AuthenticateResult {});
                };
                // Answered once the servers tried the token (a refusal is -32007).
                let (host, conn) = (self.services.host.clone(), self.id);
                tokio::spawn(async move {
                    let frame = match tried.answer().await {
                        Ok(()) => jsonrpc::success(id, &ahp_types::commands::AuthenticateResult {}),
                        Err(error) => jsonrpc::failure(&Value::from(id), &error),
                    };
                    host.send(conn, frame);
                });
                Ok(())
            }
            m if m.starts_with("resource") || m == "createResourceWatch" => {
                // Host files may sit on a slow disk or a network mount: read and written
                // off the runtime's worker (one by default), which other clients share.
                off_worker(|| self.resource_command(id, m, params))
            }
            m => Err(RpcError::method_not_found(format!("unknown method {m:?}"))),
        }
    }

    /// Root commands this host answers with nothing to offer: no session config.
    fn empty_answer(&self, id: u64, method: &str) -> Result<(), RpcError> {
        match method {
            "resolveSessionConfig" => {
                let result = ResolveSessionConfigResult {
                    schema: SessionConfigSchema {
                        r#type: "object".into(),
                        properties: Default::default(),
                        required: None,
                    },
                    values: Default::default(),
                };
                self.reply(id, &result)
            }
            // "sessionConfigCompletions"
            _ => self.reply(id, &SessionConfigCompletionsResult { items: vec![] }),
        }
    }

    /// `resource*` commands, on the host files of writable directories.
    fn resource_command(&self, id: u64, method: &str, params: Value) -> Result<(), RpcError> {
        let files = &self.services.files;
        match method {
            "resourceRead" => {
                let result = files.read(decode_params(method, params)?)?;
                self.reply(id, &result)
            }
            "resourceWrite" => {
                files.write(decode_params(method, params)?)?;
                self.reply(id, &ResourceWriteResult {})
            }
            "resourceList" => {
                let result = files.list(decode_params(method, params)?)?;
                self.reply(id, &result)
            }
            "resourceDelete" => {
                files.delete(decode_params(method, params)?)?;
                self.reply(id, &ResourceDeleteResult {})
            }
            "resourceMkdir" => {
                files.mkdir(decode_params(method, params)?)?;
                self.reply(id, &ResourceMkdirResult {})
            }
            "resourceResolve" => {
                let result = files.resolve(decode_params(method, params)?)?;
                self.reply(id, &result)
            }
            "resourceCopy" => {
                files.copy(decode_params(method, params)?)?;
                self.reply(id, &ResourceCopyResult {})
            }
            "resourceMove" => {
                files.rename(decode_params(method, params)?)?;
                self.reply(id, &ResourceMoveResult {})
            }
            m => Err(RpcError::method_not_found(format!(
                "{m} is not available yet on this host"
            ))),
        }
    }

    fn on_notification(&mut self, method: &str, params: Value) {
        let Phase::Ready { client_id, .. } = &self.phase else {
            tracing::debug!(
                conn = self.id,
                method = %Untrusted(method),
                "notification before initialize ignored"
            );
            return;
        };
        if method != "unsubscribe" && super::mcp_channel::is_channel_request(&params) {
            super::mcp_channel::notification(&self.services.host, self.id, method, &params);
            return;
        }
        match method {
            "unsubscribe" => match decode_params::<UnsubscribeParams>(method, params) {
                Ok(params) => self.services.host.unsubscribe(
                    self.id,
                    client_id,
                    &self.named(&params.channel).uri,
                ),
                Err(error) => {
                    tracing::debug!(conn = self.id, message = %Untrusted(&error.message), "bad unsubscribe")
                }
            },
            "dispatchAction" => match decode_params::<DispatchActionParams>(method, params) {
                Ok(params) => match self.last_client_seq {
                    Some(last) if params.client_seq <= last => {
                        let reason = format!(
                            "clientSeq {} is not greater than the last one on this connection ({last}): each dispatched action needs a greater clientSeq",
                            params.client_seq
                        );
                        self.services
                            .host
                            .refuse(self.id, client_id, params, reason);
                    }
                    _ => {
                        self.last_client_seq = Some(params.client_seq);
                        log_steering(self.id, client_id, &params.action);
                        let channel = self.action_channel(&params);
                        self.services
                            .host
                            .dispatch(self.id, client_id, params, &channel);
                    }
                },
                Err(error) => {
                    tracing::debug!(conn = self.id, message = %Untrusted(&error.message), "bad dispatchAction")
                }
            },
            other => tracing::debug!(
                conn = self.id,
                method = %Untrusted(other),
                "unknown notification ignored"
            ),
        }
    }

    /// `uri` as the host knows it, with the name the client used (aliases at the edge: the
    /// host's store knows only its own names).
    fn named(&self, uri: &str) -> Named {
        if uri == ROOT_RESOURCE_URI {
            return Named::own(uri);
        }
        Named {
            uri: aliases::resolve(uri, &*self.services.host),
            name: uri.to_string(),
        }
    }

    fn named_all(&self, uris: &[String]) -> Vec<Named> {
        uris.iter().map(|uri| self.named(uri)).collect()
    }

    /// Where a dispatched action goes: its channel as the host knows it, and a rename sent
    /// on a chat goes to the chat's session (VS Code sends it on the chat it shows).
    fn action_channel(&self, params: &DispatchActionParams) -> Named {
        let mut channel = self.named(&params.channel);
        if matches!(params.action, StateAction::SessionTitleChanged(_)) {
            if let Some(session) = self.services.host.session_of_chat(&channel.uri) {
                channel.uri = session;
            }
        }
        channel
    }
}

/// What resolving VS Code's names needs of the host.
impl aliases::Facts for Host {
    fn provider(&self) -> String {
        Host::provider(self)
    }
    fn is_session(&self, uri: &str) -> bool {
        Host::is_session(self, uri)
    }
    fn default_chat(&self, session: &str) -> Option<String> {
        Host::default_chat(self, session)
    }
}

/// Params of commands whose only required field is `channel: "ahp-root://"`.
#[derive(Deserialize)]
struct RootChannel {
    channel: String,
}

/// Check a command whose only required field is `channel: "ahp-root://"`.
fn root_command(method: &str, params: Value) -> Result<(), RpcError> {
    let params: RootChannel = decode_params(method, params)?;
    on_root(&params.channel)
}

fn decode_params<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params
    };
    serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("invalid params for {method}: {e}")))
}

fn on_root(channel: &str) -> Result<(), RpcError> {
    if channel == ROOT_RESOURCE_URI {
        Ok(())
    } else {
        Err(RpcError::invalid_params(format!(
            "this command goes on channel {ROOT_RESOURCE_URI:?}, not {channel:?}"
        )))
    }
}

/// Say on the proxy's terminal when a client asks to start, stop or toggle something (the
/// web console, `ahp-proxy stop`, an IDE): the action and who asked. Other actions are not
/// worth a line.
fn log_steering(conn: ConnId, client_id: &str, action: &StateAction) {
    let (kind, target, enabled) = match action {
        StateAction::SessionMcpServerStartRequested(a) => {
            ("session/mcpServerStartRequested", &a.id, None)
        }
        StateAction::SessionMcpServerStopRequested(a) => {
            ("session/mcpServerStopRequested", &a.id, None)
        }
        StateAction::SessionCustomizationToggled(a) => {
            let enabled = a.enablement.iter().find_map(|e| match e {
                CustomizationEnablement::Session { enabled }
                | CustomizationEnablement::Global { enabled }
                | CustomizationEnablement::Workspace { enabled, .. } => Some(*enabled),
                CustomizationEnablement::Unknown(_) => None,
            });
            ("session/customizationToggled", &a.id, enabled)
        }
        _ => return,
    };
    tracing::info!(
        conn,
        client = %Untrusted(client_id),
        action = kind,
        target = %Untrusted(target),
        enabled,
        "steering requested"
    );
}

/// A `clientId` the host will remember and log: not empty, at most
/// [`bounds::MAX_CLIENT_ID_BYTES`].
fn usable_client_id(client_id: &str) -> Result<(), RpcError> {
    bounds::client_id(client_id).map_err(RpcError::invalid_params)
}

/// Run `work`, which blocks on the file system, without holding up the tasks of the
/// worker it is called on: on a multi-thread runtime the worker hands its other tasks to a
/// fresh one meanwhile (`block_in_place`); elsewhere (a test's one-thread runtime) it runs
/// as it is.
fn off_worker<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}
