//! The per-request `_meta` envelope of 2026-07-28 that every request to a modern server
//! carries: who the proxy stands for (era, capabilities, clientInfo, log level) and how it
//! is written into a request's text without touching the rest of it.

use std::ops::Range;

use serde_json::Value;

use super::era::{Era, META_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_VERSION, MODERN};
use crate::mcp::message::{self, Message};

/// Whom a request to a server is sent for: the seam between the front and the upstream.
/// A legacy harness's comes from its `initialize`; a modern harness's from its request's
/// own `_meta` (then the keys already in the request win, except `clientInfo`, which is
/// always named "via ahp-proxy").
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The harness's era (a modern harness gets `input_required` results as they are).
    pub era: Era,
    /// Its client capabilities: what the server may ask it for.
    pub capabilities: Value,
    /// Its `clientInfo`, named "via ahp-proxy".
    pub client_info: Value,
    /// The log level it asked for, if any.
    pub log_level: Option<String>,
}

impl Envelope {
    /// Whether it declared client capability `name` (`elicitation`, `sampling`, `roots`).
    pub fn declares(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|c| !c.is_null())
    }

    /// `request` with the envelope in its `params._meta`: keys it lacks are added, a
    /// `clientInfo` it has is named "via ahp-proxy"; everything else is kept as written.
    pub fn wrap(&self, request: Message) -> Message {
        let edits = self.edits(&request);
        if edits.is_empty() {
            return request;
        }
        request.rewrite(None, edits)
    }

    fn edits(&self, request: &Message) -> Vec<(Range<usize>, String)> {
        let text = request.text();
        let params = request.body().filter(|s| text[s.clone()].starts_with('{'));
        let Some(params) = params else {
            if request.body().is_some() {
                return Vec::new(); // array params: not ours to change
            }
            // First in the message: an insertion at the end would join the span before it.
            let meta = self.members(&[]).join(",");
            return vec![(1..1, format!(r#""params":{{"_meta":{{{meta}}}}},"#))];
        };
        let meta = request
            .find(&["_meta"])
            .filter(|s| text[s.clone()].starts_with('{'));
        let Some(meta) = meta else {
            let members = self.members(&[]).join(",");
            let comma = if is_empty(text, &params) { "" } else { "," };
            let at = params.start + 1;
            return vec![(at..at, format!(r#""_meta":{{{members}}}{comma}"#))];
        };
        let mut edits = Vec::new();
        let present: Vec<&str> = [META_VERSION, META_CAPABILITIES, META_CLIENT_INFO]
            .into_iter()
            .chain(self.log_level.as_ref().map(|_| META_LOG_LEVEL))
            .filter(|key| message::find(text, meta.clone(), &[key]).is_some())
            .collect();
        if let Some(info) = message::find(text, meta.clone(), &[META_CLIENT_INFO]) {
            edits.extend(named_via_in_place(text, info));
        }
        let members = self.members(&present);
        if !members.is_empty() {
            let comma = if is_empty(text, &meta) { "" } else { "," };
            let at = meta.start + 1;
            edits.push((at..at, format!("{}{comma}", members.join(","))));
        }
        edits
    }

    /// `"key":value` for each envelope key not in `present`.
    fn members(&self, present: &[&str]) -> Vec<String> {
        let mut all = vec![
            (META_VERSION, Value::String(MODERN.into())),
            (META_CAPABILITIES, self.capabilities.clone()),
            (META_CLIENT_INFO, self.client_info.clone()),
        ];
        if let Some(level) = &self.log_level {
            all.push((META_LOG_LEVEL, Value::String(level.clone())));
        }
        all.into_iter()
            .filter(|(key, _)| !present.contains(key))
            .map(|(key, value)| format!("{}:{value}", message::quote(key)))
            .collect()
    }
}

/// What a harness is named by the proxy: its own name and this.
const VIA: &str = " via ahp-proxy";

/// The edits that name the `clientInfo` object at `info` of `text` "via ahp-proxy" where it
/// is written: `VIA` put at the end of its `name` and `title` strings (not twice), a `name`
/// given when it has none; every other byte stays as the harness wrote it.
fn named_via_in_place(text: &str, info: Range<usize>) -> Vec<(Range<usize>, String)> {
    if !text[info.clone()].starts_with('{') {
        return Vec::new();
    }
    let mut edits = Vec::new();
    for key in ["name", "title"] {
        let Some(span) = message::find(text, info.clone(), &[key]) else {
            if key == "name" {
                let comma = if is_empty(text, &info) { "" } else { "," };
                let member = format!(r#""name":"harness{VIA}"{comma}"#);
                edits.push((info.start + 1..info.start + 1, member));
            }
            continue;
        };
        let value: Option<String> = serde_json::from_str(&text[span.clone()]).ok();
        if value.is_some_and(|v| !v.ends_with(VIA)) {
            // Before the closing quote: the string's escapes stay as written.
            edits.push((span.end - 1..span.end - 1, VIA.to_string()));
        }
    }
    edits
}

/// A harness's `clientInfo` naming it (and its title) "via ahp-proxy", once.
pub fn named_via(mut client_info: Value) -> Value {
    if let Some(info) = client_info.as_object_mut() {
        for key in ["name", "title"] {
            let Some(now) = info.get(key).and_then(Value::as_str) else {
                if key == "name" {
                    info.insert(key.into(), Value::String(format!("harness{VIA}")));
                }
                continue;
            };
            if !now.ends_with(VIA) {
                info.insert(key.into(), Value::String(format!("{now}{VIA}")));
            }
        }
    }
    client_info
}

/// The envelope's keys, as a modern harness writes them in a request's `_meta`.
const KEYS: [&str; 4] = [
    META_VERSION,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
];

/// `request` as a server spoken to in legacy is sent it: the 2026-07-28 envelope keys a
/// modern harness wrote in its `_meta` taken out (a dual-era server refuses a request whose
/// `_meta` names another version than its session's: rmcp answers `-32020` over HTTP), the
/// other members kept as written. A request without them is returned untouched.
pub fn unwrapped(request: Message) -> Message {
    let text = request.text();
    let Some(meta) = request
        .find(&["_meta"])
        .filter(|s| text[s.clone()].starts_with('{'))
    else {
        return request;
    };
    // Read in place (spans, no copies): the text was read whole as JSON already.
    let members = message::members(text, meta.clone(), usize::MAX);
    let envelope_key = |key: &Range<usize>| {
        KEYS.iter()
            .any(|name| message::key_is(text, key.clone(), name))
    };
    if !members.iter().any(|(key, _)| envelope_key(key)) {
        return request;
    }
    if members.iter().all(|(key, _)| envelope_key(key)) {
        // Nothing else in it: the server is sent the request as a legacy harness writes it.
        if let Some(cut) = member_cut(&request, &meta) {
            return request.rewrite(None, vec![(cut, String::new())]);
        }
    }
    let mut object = String::with_capacity(meta.len());
    object.push('{');
    for (key, value) in members.iter().filter(|(key, _)| !envelope_key(key)) {
        if object.len() > 1 {
            object.push(',');
        }
        object.push_str(&text[key.clone()]);
        object.push(':');
        object.push_str(&text[value.clone()]);
    }
    object.push('}');
    request.rewrite(None, vec![(meta, object)])
}

/// The span to delete from `request` to take out the member of its params whose value is
/// at `value`, with the comma that joins it to a neighbour.
fn member_cut(request: &Message, value: &Range<usize>) -> Option<Range<usize>> {
    let text = request.text();
    let params = request
        .body()
        .filter(|p| text[p.clone()].starts_with('{'))?;
    let walked;
    let members = match request.body_members() {
        Some(indexed) => indexed,
        None => {
            walked = message::members(text, params, usize::MAX);
            &walked[..]
        }
    };
    let at = members.iter().position(|(_, v)| v == value)?;
    Some(match (at.checked_sub(1), members.get(at + 1)) {
        (Some(before), _) => members[before].1.end..value.end,
        (None, Some((next, _))) => members[at].0.start..next.start,
        (None, None) => members[at].0.start..value.end,
    })
}

/// Whether the object at `span` of `text` has no members.
fn is_empty(text: &str, span: &Range<usize>) -> bool {
    text[span.start + 1..span.end - 1].trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope() -> Envelope {
        Envelope {
            era: Era::Legacy,
            capabilities: serde_json::json!({"elicitation": {}}),
            client_info: serde_json::json!({"name": "h via ahp-proxy", "version": "1"}),
            log_level: None,
        }
    }

    fn wrapped(text: &str) -> Value {
        let message = Message::parse(text.to_string()).unwrap();
        // The session gives it its own id afterwards.
        let out = envelope().wrap(message).rewrite(Some("\"up\""), Vec::new());
        serde_json::from_str(out.text()).unwrap()
    }

    #[test]
    fn every_shape_of_params_gets_the_whole_envelope() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"method":"tools/list","jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{ "cursor":"c"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":7}}}"#,
        ] {
            let value = wrapped(text);
            let meta = &value["params"]["_meta"];
            assert_eq!(meta[META_VERSION], MODERN, "{text}");
            assert_eq!(
                meta[META_CAPABILITIES]["elicitation"],
                serde_json::json!({})
            );
            assert_eq!(meta[META_CLIENT_INFO]["name"], "h via ahp-proxy");
            assert_eq!(value["id"], "up");
        }
        assert_eq!(
            wrapped(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"cursor":"c"}}"#)["params"]
                ["cursor"],
            "c"
        );
        assert_eq!(
            wrapped(
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":7}}}"#
            )["params"]["_meta"]["progressToken"],
            7
        );
    }

    #[test]
    fn a_modern_harness_keeps_its_own_keys_but_is_named_via_the_proxy() {
        let text = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"cli","version":"9"}}}}"#;
        let meta = wrapped(text)["params"]["_meta"].clone();
        assert_eq!(meta[META_CAPABILITIES], serde_json::json!({"sampling": {}}));
        assert_eq!(meta[META_CLIENT_INFO]["name"], "cli via ahp-proxy");
        assert_eq!(meta[META_CLIENT_INFO]["version"], "9");
    }

    #[test]
    fn a_harness_client_info_changes_only_by_its_names() {
        let info = r#"{"version":"1.0.0","name":"h","x-info":1e3,"title":"caf\u00e9 \/ h"}"#;
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{{"_meta":{{"io.modelcontextprotocol/clientInfo":{info},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        let out = envelope().wrap(Message::parse(text.clone()).unwrap());
        let named = r#"{"version":"1.0.0","name":"h via ahp-proxy","x-info":1e3,"title":"caf\u00e9 \/ h via ahp-proxy"}"#;
        assert_eq!(out.text(), text.replace(info, named));
        // Named already: not a byte changes; no name: one is given.
        let again = Message::parse(out.text().to_string()).unwrap();
        assert_eq!(envelope().wrap(again).text(), text.replace(info, named));
        let anonymous = text.replace(info, r#"{ "version":"1"}"#);
        let out = envelope().wrap(Message::parse(anonymous.clone()).unwrap());
        let given = r#"{"name":"harness via ahp-proxy", "version":"1"}"#;
        assert_eq!(out.text(), anonymous.replace(r#"{ "version":"1"}"#, given));
    }

    #[test]
    fn a_legacy_server_is_sent_the_request_without_the_envelope() {
        let text = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info","z":[1, 2]}}}"#;
        let out = unwrapped(Message::parse(text.into()).unwrap());
        assert_eq!(
            out.text(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p","z":[1, 2]}}}"#
        );
        assert_eq!(
            out.find(&["name"]).map(|s| out.slice(s).to_string()),
            Some("\"x\"".into())
        );
        // Only the envelope's keys: no `_meta` at all, wherever it was.
        let envelope_only = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        for (params, sent) in [
            (
                format!(r#"{{"name":"x", {envelope_only}}}"#),
                r#"{"name":"x"}"#,
            ),
            (
                format!(r#"{{{envelope_only} ,"name":"x"}}"#),
                r#"{"name":"x"}"#,
            ),
            (
                format!(r#"{{"a":1,{envelope_only},"b":2}}"#),
                r#"{"a":1,"b":2}"#,
            ),
            (format!(r#"{{ {envelope_only} }}"#), r#"{  }"#),
        ] {
            let text =
                format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{params}}}"#);
            let out = unwrapped(Message::parse(text).unwrap());
            assert_eq!(
                out.text(),
                format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{sent}}}"#),
                "{params}"
            );
        }
        // Params of more members than a message indexes: found by walking them.
        let many: Vec<String> = (0..40).map(|n| format!(r#""k{n}":{n}"#)).collect();
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":6,"method":"m","params":{{{},{envelope_only}}}}}"#,
            many.join(",")
        );
        let out = unwrapped(Message::parse(text).unwrap());
        assert_eq!(
            out.text(),
            format!(
                r#"{{"jsonrpc":"2.0","id":6,"method":"m","params":{{{}}}}}"#,
                many.join(",")
            )
        );
        // Without the envelope's keys, not a byte changes.
        let plain = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta": {"progressToken":1},"name":"x"}}"#;
        assert_eq!(
            unwrapped(Message::parse(plain.into()).unwrap()).text(),
            plain
        );
    }
}
