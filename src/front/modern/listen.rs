//! `subscriptions/listen` on the modern face: acknowledged with the filter the proxy honours
//! once the resources it names are subscribed at their servers, then fed the list changes the
//! harness opted into (the servers' own legacy `list_changed` on `/mcp/<server>`, the proxy's
//! on `/mcp` and stdio, servers added, removed or toggled included) and updates of the
//! resources it named, each tagged with the listen request's id. Ends when the harness
//! closes the stream (HTTP) or cancels it (stdio), or with its completion when the proxy stops.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::super::fairness::Client;
use super::super::harness::Harness;
use super::super::hub::Hub;
use super::super::outbox::Stream;
use super::super::registry::Scope;
use super::{initialize_params, Cancel};
use crate::mcp::era::{self, meta, Envelope};
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

/// The longest resource URI a listen request may name (bytes).
pub const MAX_URI_BYTES: usize = 4096;

/// Where a listen request came from and where its stream goes.
pub struct Listener {
    /// The endpoint's scope.
    pub scope: Scope,
    /// Who asked (its streams are counted against it).
    pub client: Client,
    /// The stream.
    pub out: Stream,
    /// Ends it when the harness cancels (stdio).
    pub cancel: Cancel,
}

/// The resources listen request `message` names, or why they are refused: more than `max`
/// of them (counted before any is read), or one that is not a string or longer than
/// [`MAX_URI_BYTES`].
fn resources(message: &Message, max: usize) -> Result<Vec<String>, String> {
    let Some(span) = message.find(&["notifications", "resourceSubscriptions"]) else {
        return Ok(Vec::new());
    };
    let not_uris = || "resourceSubscriptions is not an array of URIs".to_string();
    let named: Vec<&RawValue> =
        serde_json::from_str(message.slice(span)).map_err(|_| not_uris())?;
    if named.len() > max {
        return Err(format!(
            "subscriptions/listen names {} resources; at most {max} per request ([mcp] max_subscriptions)",
            named.len()
        ));
    }
    let mut uris = Vec::with_capacity(named.len());
    for uri in named {
        match serde_json::from_str::<String>(uri.get()) {
            Ok(uri) if uri.len() <= MAX_URI_BYTES => uris.push(uri),
            Ok(uri) => {
                return Err(format!(
                    "a resource URI of {} bytes; at most {MAX_URI_BYTES}",
                    uri.len()
                ))
            }
            Err(_) => return Err(not_uris()),
        }
    }
    Ok(uris)
}

/// Start serving a listen request for `to`.
pub fn start(hub: &Arc<Hub>, envelope: &Envelope, message: Message, to: Listener) {
    let Listener {
        scope,
        client,
        out,
        cancel,
    } = to;
    let id = message.id().unwrap_or("null").to_string();
    let limits = hub.settings.fairness;
    let uris = match resources(&message, limits.max_subscriptions) {
        Ok(uris) => uris,
        Err(why) => {
            tracing::info!(
                client = client.describe(),
                "subscriptions/listen refused: {why}"
            );
            let why = format!("Invalid params: {why}");
            out.finish(era::error_answer(&id, era::INVALID_PARAMS, &why, None));
            return;
        }
    };
    let mut honoured = Map::new();
    let mut wanted = Vec::new();
    for (flag, method) in LISTS {
        let set = message.find(&["notifications", flag]);
        if set.is_some_and(|span| message.slice(span) == "true") {
            honoured.insert(flag.into(), Value::Bool(true));
            wanted.push(method);
        }
    }
    if !uris.is_empty() {
        honoured.insert("resourceSubscriptions".into(), json!(uris));
    }
    let tag = format!(r#"{{"{}":{id}}}"#, meta::SUBSCRIPTION_ID);
    let ack = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"_meta":{tag},"notifications":{}}}}}"#,
        Value::Object(honoured)
    );
    // Its place among the open streams: it may end the longest idle one of a client past
    // its limit, and be ended so.
    let total = limits.max_listen_streams;
    let ticket = (hub.listens).admit(client, limits.max_listen_streams_per_client, total);
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
        let mut idle_until = tokio::time::Instant::now() + limits.listen_idle;
        loop {
            let frame = tokio::select! {
                frame = frames.recv() => frame,
                _ = out.closed() => break,
                _ = cancel.cancelled() => break,
                // Ended gracefully (the spec's completion): past a limit, idle, stopping.
                _ = ticket.end.cancelled() => {
                    out.finish(completion(&id, &tag));
                    break;
                }
                _ = tokio::time::sleep_until(idle_until) => {
                    tracing::debug!("an idle listen stream was ended ([mcp] listen_idle_ms)");
                    out.finish(completion(&id, &tag));
                    break;
                }
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
                ticket.delivered();
                idle_until = tokio::time::Instant::now() + limits.listen_idle;
            }
        }
        // Unsubscribed, and forgotten by the hub, as it goes; its place freed.
        drop(listener);
        drop(ticket);
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
    fn a_listen_request_names_at_most_max_resources_of_bounded_length() {
        let listen = |filter: &str| {
            parse(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{{"notifications":{filter}}}}}"#
            ))
        };
        let named = listen(r#"{"resourceSubscriptions":["a://1", "a://2"]}"#);
        assert_eq!(
            resources(&named, 2),
            Ok(vec!["a://1".into(), "a://2".into()])
        );
        let why = resources(&named, 1).unwrap_err();
        assert!(why.contains("names 2 resources; at most 1"), "{why}");
        let long = format!(r#"{{"resourceSubscriptions":["{}"]}}"#, "u".repeat(5000));
        assert!(resources(&listen(&long), 9).is_err());
        assert!(resources(&listen(r#"{"resourceSubscriptions":[1]}"#), 9).is_err());
        assert_eq!(
            resources(&listen(r#"{"toolsListChanged":true}"#), 9),
            Ok(vec![])
        );
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
