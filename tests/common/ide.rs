//! An IDE as an AHP client that publishes a tool for the harness (`runUnitTests`) and
//! follows the harness chat, and a harness on the proxy's stdio speaking raw JSON lines.

use ahp::client::Client;
use ahp_types::actions::StateAction;
use ahp_types::state::{ChatState, ResponsePart, SnapshotState, ToolCallState};
use serde_json::{json, Value};

use super::raw::{Exchange, RawClient};
use super::{initialized_client, Proxy, PATIENCE};

/// The session whose active clients' tools the harness sees.
pub const SESSION: &str = "ahp-proxy:/default";
/// The chat where harness calls are shown.
pub const CHAT: &str = "ahp-chat:/harness";

/// An IDE: an official client, active in the default session with `runUnitTests`, that
/// follows the harness chat.
pub struct Ide {
    pub client: Client,
    pub chat: ChatState,
    pub sub: ahp::client::SessionSubscription,
    _session: ahp::client::SessionSubscription,
}

impl Ide {
    pub async fn join(proxy: &Proxy, client_id: &str) -> Self {
        let client = initialized_client(proxy, client_id).await;
        let (_, session) = client.subscribe(SESSION.into()).await.unwrap();
        let (snapshot, sub) = client.subscribe(CHAT.into()).await.unwrap();
        let chat = match snapshot.snapshot.expect("snapshot").state {
            SnapshotState::Chat(chat) => *chat,
            other => panic!("expected a chat, got {other:?}"),
        };
        let ide = Self {
            client,
            chat,
            sub,
            _session: session,
        };
        ide.dispatch(
            SESSION,
            json!({"type": "session/activeClientSet", "activeClient": {
                "clientId": client_id, "displayName": "My IDE",
                "tools": [{"name": "runUnitTests", "title": "Run unit tests",
                           "description": "Run the project's unit tests",
                           "inputSchema": {"type": "object", "properties": {"filter": {"type": "string"}}}}]}}),
        )
        .await;
        ide
    }

    pub async fn dispatch(&self, channel: &str, action: Value) {
        let action: StateAction = serde_json::from_value(action).unwrap();
        self.client.dispatch(channel.into(), action).await.unwrap();
    }

    /// Apply chat actions until `done` holds for a tool call; that call (turn id, state).
    pub async fn until_call(
        &mut self,
        done: impl Fn(&ToolCallState) -> bool,
    ) -> (String, ToolCallState) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let active = self
                .chat
                .active_turn
                .iter()
                .flat_map(|t| t.response_parts.iter().map(move |p| (t.id.clone(), p)));
            let done_turns = self
                .chat
                .turns
                .iter()
                .flat_map(|t| t.response_parts.iter().map(move |p| (t.id.clone(), p)));
            let found = active.chain(done_turns).find_map(|(turn, p)| match p {
                ResponsePart::ToolCall(tc) if done(&tc.tool_call) => {
                    Some((turn, tc.tool_call.clone()))
                }
                _ => None,
            });
            if let Some(found) = found {
                return found;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no such call: {:?}",
                self.chat
            );
            let envelope = super::next_action(&mut self.sub).await;
            let _ = ahp::reducers::apply_action_to_chat(&mut self.chat, &envelope.action);
        }
    }
}

pub fn running(state: &ToolCallState) -> Option<(String, Value)> {
    match state {
        ToolCallState::Running(r) => Some((
            r.tool_call_id.clone(),
            serde_json::to_value(&r.contributor).unwrap(),
        )),
        _ => None,
    }
}

/// Poll the harness's `tools/list` until it offers `tool`; that answer.
pub async fn listed(harness: &mut RawClient, tool: &str) -> String {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let list = harness
                .request("tools/list", None, &mut |_, _| String::new())
                .await;
            if list.response().contains(tool) {
                return list.response().to_string();
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{tool} is never listed"))
}

/// The harness calls `runUnitTests` with `params` (`tools/call` params as JSON text) while
/// `meanwhile` runs (the IDE acting on the call); the call's exchange and what `meanwhile`
/// returned.
pub async fn call_meanwhile<T>(
    harness: &mut RawClient,
    params: &str,
    meanwhile: impl std::future::Future<Output = T>,
) -> (Exchange, T) {
    let mut none = |_: &str, _: &str| String::new();
    tokio::join!(
        harness.request("tools/call", Some(params), &mut none),
        meanwhile
    )
}

/// A harness on the proxy's stdio (`config`), an IDE (`ide-1`) that offers it
/// `runUnitTests`, once the harness lists it.
pub async fn harness_and_ide(config: &str) -> (Proxy, RawClient, Ide) {
    let (proxy, mut harness) = super::stdio_harness(config).await;
    let ide = Ide::join(&proxy, "ide-1").await;
    listed(&mut harness, "runUnitTests").await;
    (proxy, harness, ide)
}
