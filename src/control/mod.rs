//! `ahp-proxy status`, `start`, `stop`, `restart`, `enable` and `disable`: the terminal as an
//! AHP client of a running proxy, with the official `ahp` client over `ahp-ws`. It follows
//! the default session (the same tree every AHP client sees), counts each ready server's
//! tools on its `mcp://` channel, and steers with the actions any AHP client may dispatch.
//! Every step of reaching the proxy has a deadline (`error`). `approvals` lists and decides
//! the harness tool calls held for approval. Without a token, the approval key the proxy
//! wrote for its port (`approvers`) is presented instead, so the terminal may decide.

pub mod approvals;
pub mod error;
pub mod steer;
pub mod tree;

use ahp::{Client, ClientConfig, SessionSubscription, SubscriptionEvent};
use ahp_types::actions::ActionEnvelope;
use ahp_types::state::{Customization, McpServerState, SessionState, SnapshotState};
use ahp_types::StateAction;
use serde_json::{json, Value};

use crate::untrusted::json_escaped;
use error::{within, ControlError, Step, STEP_DEADLINE};
use tree::Tools;

/// At most this many pages of `tools/list` per server.
const MAX_PAGES: usize = 100;

/// Where the running proxy is: its AHP URL and the access token, if it needs one.
#[derive(Clone)]
pub struct Endpoint {
    /// `ws://host:port`.
    pub url: String,
    /// `AHP_PROXY_TOKEN` or `ahp.token`.
    pub token: Option<String>,
}

impl Endpoint {
    /// What this terminal presents: the token, else the approval key the proxy on the URL's
    /// port wrote for its user (`None`: it connects as an observer).
    pub fn secret(&self) -> Option<String> {
        if self.token.is_some() {
            return self.token.clone();
        }
        let port = reqwest::Url::parse(&self.url)
            .ok()?
            .port_or_known_default()?;
        crate::approvers::read(port).map(|key| key.as_str().to_string())
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({}, token: {})", self.url, self.token.is_some())
    }
}

/// A connection to the proxy, following the default session.
pub struct Connection {
    client: Client,
    /// The session every proxy starts with, `<provider>:/default` (servers are shared by
    /// all sessions).
    session: String,
    sub: SessionSubscription,
    state: SessionState,
    client_id: String,
    /// The URL, for messages (never with the token).
    pub url: String,
}

impl Connection {
    /// Connect, `initialize` (declaring `mcpApps`, for the channels) and subscribe to the
    /// default session; each step within [`STEP_DEADLINE`], and named when it fails.
    pub async fn open(endpoint: &Endpoint) -> Result<Self, ControlError> {
        let shown = endpoint.url.as_str();
        let bad_url = |reason: String| ControlError::BadUrl {
            url: shown.to_string(),
            reason,
        };
        let mut url = reqwest::Url::parse(shown).map_err(|e| bad_url(e.to_string()))?;
        if url.scheme() != "ws" {
            return Err(bad_url(format!("the scheme is {:?}", url.scheme())));
        }
        let authority = match (url.host_str(), url.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            _ => return Err(bad_url("no host".into())),
        };
        if let Some(secret) = endpoint.secret() {
            url.query_pairs_mut().append_pair("token", &secret);
        }
        let tcp = within(
            shown,
            Step::Connect,
            tokio::net::TcpStream::connect(authority),
        )
        .await?;
        let _ = tcp.set_nodelay(true);
        let stream = tokio_tungstenite::MaybeTlsStream::Plain(tcp);
        // 401: the gate refused the token (none, or another): said as such, not as a
        // failure that might mean no proxy listens there.
        let upgraded = within(shown, Step::Upgrade, async {
            match tokio_tungstenite::client_async(url.as_str(), stream).await {
                Err(tokio_tungstenite::tungstenite::Error::Http(refusal))
                    if refusal.status() == http::StatusCode::UNAUTHORIZED =>
                {
                    Ok(None)
                }
                other => other.map(Some),
            }
        })
        .await?;
        let Some((ws, _)) = upgraded else {
            return Err(ControlError::Unauthorized {
                url: shown.to_string(),
            });
        };
        let transport = ahp_ws::WebSocketTransport::from_stream(ws);
        let client = within(
            shown,
            Step::Upgrade,
            Client::connect(transport, ClientConfig::default()),
        )
        .await?;
        let client_id = format!("ahp-proxy-cli-{}", std::process::id());
        let initialized: Value = within(
            shown,
            Step::Initialize,
            client.request(
                "initialize",
                json!({"channel": "ahp-root://", "clientId": client_id,
                       "protocolVersions": ["1.0.0"], "capabilities": {"mcpApps": {}},
                       "clientInfo": {"name": "ahp-proxy", "version": env!("CARGO_PKG_VERSION")},
                       "initialSubscriptions": [ahp_types::ROOT_RESOURCE_URI]}),
            ),
        )
        .await?;
        // The root names the agent, whose provider names the default session.
        let provider = initialized["snapshots"][0]["state"]["agents"][0]["provider"]
            .as_str()
            .ok_or_else(|| ControlError::NoAgent {
                url: shown.to_string(),
            })?;
        let session = crate::host::default_session_uri(provider);
        // Only the session is followed from here on.
        within(
            shown,
            Step::Subscribe,
            client.unsubscribe(ahp_types::ROOT_RESOURCE_URI.into()),
        )
        .await?;
        let (result, sub) =
            within(shown, Step::Subscribe, client.subscribe(session.clone())).await?;
        let state = match result.snapshot.map(|s| s.state) {
            Some(SnapshotState::Session(state)) => *state,
            _ => {
                return Err(ControlError::NoSnapshot {
                    url: shown.to_string(),
                })
            }
        };
        Ok(Self {
            client,
            session,
            sub,
            state,
            client_id,
            url: endpoint.url.clone(),
        })
    }

    /// The session's customizations as the proxy shows them now.
    pub fn customizations(&self) -> &[Customization] {
        self.state.customizations.as_deref().unwrap_or(&[])
    }

    /// Wait for the next action on the session and apply it (with the official reducers);
    /// `None` once the proxy hung up.
    pub async fn next(&mut self) -> Option<ActionEnvelope> {
        loop {
            match self.sub.recv().await? {
                SubscriptionEvent::Action(envelope) => {
                    let _ =
                        ahp::reducers::apply_action_to_session(&mut self.state, &envelope.action);
                    return Some(envelope);
                }
                _ => continue,
            }
        }
    }

    /// Dispatch `action` on the default session; returns its `clientSeq`.
    pub async fn dispatch(&self, action: StateAction, step: Step) -> Result<i64, ControlError> {
        within(
            &self.url,
            step,
            self.client.dispatch(self.session.clone(), action),
        )
        .await
        .map(|handle| handle.client_seq)
    }

    /// Whether `envelope` is the echo of this connection's action `seq`; `Err` with the
    /// reason when the proxy refused it.
    pub fn echo_of(&self, envelope: &ActionEnvelope, seq: i64) -> Option<Result<(), ControlError>> {
        let origin = envelope.origin.as_ref()?;
        if origin.client_id != self.client_id || origin.client_seq != seq {
            return None;
        }
        Some(match &envelope.rejection_reason {
            Some(reason) => Err(ControlError::Refused(reason.clone())),
            None => Ok(()),
        })
    }

    /// Refresh `tools` for every ready server (listed on its `mcp://` channel); servers no
    /// longer ready are forgotten.
    pub async fn count_tools(&self, tools: &mut Tools, counted: &mut Vec<(String, String)>) {
        let ready: Vec<(String, String)> = tree::servers(self.customizations())
            .iter()
            .filter(|row| matches!(row.server.state, McpServerState::Ready(_)))
            .filter_map(|row| Some((row.server.id.clone(), row.server.channel.clone()?)))
            .collect();
        tools.retain(|id, _| ready.iter().any(|(r, _)| r == id));
        counted.retain(|entry| ready.contains(entry));
        for (id, channel) in ready {
            if counted.iter().any(|(c, ch)| *c == id && *ch == channel) {
                continue;
            }
            if let Some(n) = self.list_tools(&channel).await {
                tools.insert(id.clone(), n);
                counted.push((id, channel));
            }
        }
    }

    /// The number of tools on `channel`, every page within one [`STEP_DEADLINE`]; `None`
    /// when they could not be listed in time.
    async fn list_tools(&self, channel: &str) -> Option<usize> {
        let pages = async {
            let mut count = 0;
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let mut params = json!({"channel": channel});
                if let Some(cursor) = &cursor {
                    params["cursor"] = json!(cursor);
                }
                let page: Value = self.client.request("tools/list", params).await.ok()?;
                count += page["tools"].as_array().map_or(0, Vec::len);
                cursor = page["nextCursor"].as_str().map(str::to_string);
                if cursor.is_none() {
                    break;
                }
            }
            Some(count)
        };
        tokio::time::timeout(STEP_DEADLINE, pages).await.ok()?
    }

    /// Say goodbye (without waiting more than a step's deadline for a proxy that does not
    /// read).
    pub async fn close(self) {
        let _ = tokio::time::timeout(STEP_DEADLINE, self.client.shutdown()).await;
    }
}

/// `ahp-proxy status`: print the tree once (or, with `watch`, after every change until
/// Ctrl-C). Exit status 1 when something is in error, 2 when the proxy cannot be reached.
pub async fn status(endpoint: &Endpoint, json: bool, watch: bool) -> u8 {
    let mut connection = match Connection::open(endpoint).await {
        Ok(connection) => connection,
        Err(error) => {
            eprintln!("ahp-proxy: {error}");
            return error.exit_status();
        }
    };
    let mut tools = Tools::new();
    let mut counted = Vec::new();
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut shown = String::new();
    loop {
        connection.count_tools(&mut tools, &mut counted).await;
        let text = if json {
            let value = tree::render_json(&connection.url, connection.customizations(), &tools);
            let text = if watch {
                value.to_string()
            } else {
                serde_json::to_string_pretty(&value).unwrap_or_default()
            };
            format!("{}\n", json_escaped(&text))
        } else {
            let mut text = tree::render_text(&connection.url, connection.customizations(), &tools);
            let asked = connection.state.input_needed.as_deref().unwrap_or(&[]);
            text.push_str(&approvals::awaiting_trust(asked));
            text.push_str(&urls(&connection.url, endpoint.secret().as_deref()));
            text
        };
        if text != shown {
            let clear = if watch && terminal && !json {
                "\x1b[2J\x1b[H"
            } else {
                ""
            };
            let gap = if watch && !terminal && !json && !shown.is_empty() {
                "\n"
            } else {
                ""
            };
            if !write_out(&format!("{clear}{gap}{text}")) {
                break;
            }
            shown = text;
        }
        if !watch {
            break;
        }
        tokio::select! {
            next = connection.next() => if next.is_none() {
                eprintln!("ahp-proxy: {} closed the connection", connection.url);
                return 2;
            },
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    let failed = tree::in_error(connection.customizations());
    connection.close().await;
    u8::from(failed)
}

/// Where to open the console and what to paste into VS Code, for the endpoint at `ws_url`,
/// with the token or approval key (`secret`) that lets them decide held calls (pure).
fn urls(ws_url: &str, secret: Option<&str>) -> String {
    let console = match (ws_url.strip_prefix("ws://"), secret) {
        (Some(authority), Some(secret)) => {
            let escaped: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
            let authority = authority.trim_end_matches('/');
            format!("console: open http://{authority}/?token={escaped}\n")
        }
        _ => String::new(),
    };
    format!(
        "{console}VS Code: paste {} into Agents: Add Remote Agent Host…\n",
        crate::ahp::presented::vscode_url(ws_url, secret)
    )
}

/// Write to stdout; `false` once the reader is gone (`status --watch | head`).
fn write_out(text: &str) -> bool {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).is_ok() && out.flush().is_ok()
}
