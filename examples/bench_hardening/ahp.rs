//! A raw AHP client for the attacks: JSON-RPC frames over a WebSocket with no size limits,
//! answers found by id without decoding the actions in between.

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub const SESSION: &str = "ahp-proxy:/default";

pub async fn connect(url: &str) -> Ws {
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), false)
        .await
        .expect("connect");
    ws
}

/// Send a request with `id` and read until its answer, which is returned parsed (`Null` when
/// the connection ended first). `sink` sees the text of every frame on the way.
pub async fn request_seeing(
    ws: &mut Ws,
    id: u64,
    method: &str,
    params: Value,
    sink: &mut dyn FnMut(&str),
) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    if ws
        .send(Message::Text(frame.to_string().into()))
        .await
        .is_err()
    {
        return Value::Null;
    }
    let marker = format!("\"id\":{id},");
    let marker_end = format!("\"id\":{id}}}");
    while let Some(Ok(message)) = ws.next().await {
        if let Message::Text(text) = message {
            let text = text.as_str();
            sink(text);
            if !text.contains("\"method\"")
                && (text.contains(&marker) || text.contains(&marker_end))
            {
                return serde_json::from_str(text).unwrap_or(Value::Null);
            }
        }
    }
    Value::Null
}

pub async fn request(ws: &mut Ws, id: u64, method: &str, params: Value) -> Value {
    request_seeing(ws, id, method, params, &mut |_| {}).await
}

pub async fn initialize(ws: &mut Ws, client_id: &str, subscriptions: &[&str]) -> Value {
    request(
        ws,
        1,
        "initialize",
        json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"],
               "clientId": client_id, "initialSubscriptions": subscriptions}),
    )
    .await
}

/// Dispatch `action` on the default session, then `ping` (answered after it): returns once
/// the proxy has handled it, whether it was accepted or refused.
pub async fn dispatch(ws: &mut Ws, seq: u64, action: Value) {
    let frame = json!({"jsonrpc": "2.0", "method": "dispatchAction",
        "params": {"channel": SESSION, "clientSeq": seq, "action": action}});
    ws.send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
    request(
        ws,
        1_000_000 + seq,
        "ping",
        json!({"channel": "ahp-root://"}),
    )
    .await;
}

/// Read frames until one contains `needle` (at most two minutes).
pub async fn until_frame_with(ws: &mut Ws, needle: &str) {
    loop {
        let message = tokio::time::timeout(std::time::Duration::from_secs(120), ws.next())
            .await
            .expect("the frame within two minutes")
            .expect("connection open")
            .expect("frame");
        if let Message::Text(text) = message {
            if text.as_str().contains(needle) {
                return;
            }
        }
    }
}

/// The JSON-RPC error code of an answer (0 when it is not an error).
pub fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"].as_i64().unwrap_or(0)
}
