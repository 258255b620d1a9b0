//! `subscriptions/listen` on the modern face: acknowledged with the filter the proxy honours
//! once the resources it names are subscribed at their servers, then fed the list changes the
//! harness opted into (the servers' own legacy `list_changed` on `/mcp/<server>`, the proxy's
//! on `/mcp` and stdio, servers added, removed or toggled included) and updates of the
//! resources it named, each tagged with the listen request's id. Ends when the harness
//! closes the stream (HTTP) or cancels it (stdio), or with its completion when the proxy stops.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::super::harness::Harness;
use super::super::hub::Hub;
use super::super::outbox::Stream;
use super::super::registry::Scope;
use super::{initialize_params, Cancel};
use crate::mcp::era::{meta, Envelope};
use crate::mcp::message::{self, Message};

/// The notification each filter flag opts into.
const LISTS: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
    (
        "resourcesListChanged",
        "notifications/resources/list_changed",
    ),
];

/// How long the acknowledgement waits for the servers to confirm the resource subscriptions.
const SUBSCRIBE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Start serving a listen request on `out`.
pub fn start(
    hub: &Arc<Hub>,
    scope: Scope,
    envelope: &Envelope,
    message: Message,
    out: Stream,
    cancel: Cancel,
) {
    let id = message.id().unwrap_or("null").to_string();
    let filter: Value = message
        .find(&["notifications"])
        .and_then(|span| serde_json::from_str(message.slice(span)).ok())
        .unwrap_or_else(|| json!({}));
    let mut honoured = Map::new();
    let mut wanted = Vec::new();
    for (flag, method) in LISTS {
        if filter.get(flag) == Some(&Value::Bool(true)) {
            honoured.insert(flag.into(), Value::Bool(true));
            wanted.push(method);
        }
    }
    let uris: Vec<String> = filter
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if !uris.is_empty() {
        honoured.insert("resourceSubscriptions".into(), json!(uris));
    }
    let tag = format!(r#"{{"{}":{id}}}"#, meta::SUBSCRIPTION_ID);
    let ack = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"_meta":{tag},"notifications":{}}}}}"#,
        Value::Object(honoured)
    );
    // A harness of its own hears what the front announces: the changes of its scope, and
    // the updates of the resources it subscribes to (through the usual subscription path).
    let listener = Harness::new(hub.clone(), scope, false);
    listener
        .stand_in
        .store(true, std::sync::atomic::Ordering::Relaxed);
    listener.initialized(initialize_params(envelope, false));
    listener.speaks_modern(envelope.clone());
    hub.join(listener.state());
    let (general, mut frames) = Stream::channel();
    listener.set_general(Some(general));
    listener.go_live();
    listener.complete_handshake();
    let mut subscribed = Vec::new();
    for (n, uri) in uris.iter().enumerate() {
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":"listen-{n}","method":"resources/subscribe","params":{{"uri":{}}}}}"#,
            message::quote(uri)
        );
        if let Ok(subscribe) = Message::parse(text) {
            let (answer, answered) = Stream::channel();
            listener.handle(subscribe, answer);
            subscribed.push(answered);
        }
    }
    let updates = !uris.is_empty();
    let stopping = hub.stopping.clone();
    tokio::spawn(async move {
        // The acknowledgement promises the updates: it waits (within SUBSCRIBE_WAIT) until
        // every resource named is subscribed at its server, so none right after it is lost.
        let _ = tokio::time::timeout(SUBSCRIBE_WAIT, async {
            for mut answered in subscribed {
                while let Some(frame) = answered.recv().await {
                    if frame.last {
                        break;
                    }
                }
            }
        })
        .await;
        out.send(ack);
        loop {
            let frame = tokio::select! {
                frame = frames.recv() => frame,
                _ = out.closed() => break,
                _ = cancel.cancelled() => break,
                _ = stopping.cancelled() => {
                    out.finish(completion(&id, &tag));
                    break;
                }
            };
            let Some(frame) = frame else { break };
            let Ok(notification) = Message::parse(frame.text) else {
                continue;
            };
            let method = notification.method().unwrap_or_default();
            let opted = wanted.contains(&method)
                || (updates && method == "notifications/resources/updated");
            if opted {
                out.send(tagged(notification, &tag));
            }
        }
        // Unsubscribed, and forgotten by the hub, as it goes.
        drop(listener);
    });
}

/// The listen request `id`'s graceful end (`tag`: its `_meta`).
fn completion(id: &str, tag: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","_meta":{tag}}}}}"#)
}

/// `notification` with the subscription's id in its `_meta` (`tag`: the `_meta` members).
fn tagged(notification: Message, tag: &str) -> String {
    let text = notification.text();
    let inner = &tag[1..tag.len() - 1];
    match (notification.body(), notification.find(&["_meta"])) {
        (_, Some(meta)) if text[meta.clone()].starts_with('{') => {
            let at = meta.start + 1;
            let empty = text[at..meta.end - 1].trim().is_empty();
            let insert = if empty {
                inner.to_string()
            } else {
                format!("{inner},")
            };
            message::splice(text, &mut [(at..at, insert.as_str())])
        }
        (Some(body), _) if text[body.clone()].starts_with('{') => {
            let at = body.start + 1;
            let empty = text[at..body.end - 1].trim().is_empty();
            let insert = format!(r#""_meta":{tag}{}"#, if empty { "" } else { "," });
            message::splice(text, &mut [(at..at, insert.as_str())])
        }
        _ => {
            let method = notification.method().unwrap_or_default();
            format!(
                r#"{{"jsonrpc":"2.0","method":{},"params":{{"_meta":{tag}}}}}"#,
                message::quote(method)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Message {
        Message::parse(text.into()).unwrap()
    }

    #[test]
    fn every_delivery_carries_the_subscription_id() {
        let tag = r#"{"io.modelcontextprotocol/subscriptionId":"l-1"}"#;
        let bare = tagged(
            parse(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            tag,
        );
        let with_params = tagged(
            parse(
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u"}}"#,
            ),
            tag,
        );
        let with_meta = tagged(
            parse(
                r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"x":1}}}"#,
            ),
            tag,
        );
        for text in [bare, with_params, with_meta] {
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["params"]["_meta"][meta::SUBSCRIPTION_ID], "l-1", "{text}");
        }
    }
}
