//! Unit tests of `mcp::message`: spans, splicing, ids, the harness nesting limit, on raw
//! messages as servers and harnesses write them.
use super::*;

fn parse(text: &str) -> Message {
    Message::parse(text.to_string()).expect("parses")
}

#[test]
fn harness_messages_nested_too_deep_are_refused_with_their_id() {
    let nested = |levels: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"q","method":"m","params":{{"s":"[[[{{","v":{}1{}}}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        )
    };
    // Envelope and params are two levels; brackets inside strings do not count.
    assert!(Message::parse_from_harness(nested(MAX_DEPTH - 2)).is_ok());
    let refused = Message::parse_from_harness(nested(MAX_DEPTH - 1)).unwrap_err();
    assert_eq!(refused.code, INVALID_REQUEST);
    assert_eq!(refused.id.as_deref(), Some("\"q\""));
    assert!(refused.message.contains("deeper than 128"));
    // A server's message is passed on whatever its depth.
    assert!(Message::parse(nested(1000)).is_ok());
}

#[test]
fn kinds_ids_methods_and_bodies_are_found_without_touching_the_text() {
    let text = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"z":1,"a":0.7}}}"#;
    let m = parse(text);
    assert_eq!(m.kind(), Kind::Request);
    assert_eq!(m.method(), Some("tools/call"));
    assert_eq!(m.id(), Some("7"));
    assert_eq!(m.numeric_id(), Some(7));
    assert_eq!(m.string(&["name"]).as_deref(), Some("echo"));
    assert_eq!(
        m.slice(m.find(&["arguments"]).unwrap()),
        r#"{"z":1,"a":0.7}"#
    );
    assert_eq!(m.text(), text);
    let n = parse(
        r#"{"method":"notifications/progress","jsonrpc":"2.0","params":{"progressToken":"t","progress":0}}"#,
    );
    assert_eq!(n.kind(), Kind::Notification);
    assert_eq!(n.id(), None);
    let r = parse(r#"{"jsonrpc":"2.0","id":"x","result":null}"#);
    assert_eq!(r.kind(), Kind::Result);
    assert_eq!(r.slice(r.body().unwrap()), "null");
    let e = parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"no"}}"#);
    assert_eq!(e.kind(), Kind::Error);
    assert_eq!(e.id(), Some("null"));
}

#[test]
fn rewriting_the_id_and_a_token_keeps_everything_else_byte_for_byte() {
    let text = "{ \"jsonrpc\": \"2.0\", \"id\": \"abc\", \"method\": \"tools/call\",\n  \"params\": {\"_meta\": {\"progressToken\": 5, \"x-unknown\": [1e400]}, \"name\": \"n\\u00e9\"} }";
    let m = parse(text);
    assert_eq!(m.string(&["name"]).as_deref(), Some("né"));
    let token = m.find(&["_meta", "progressToken"]).unwrap();
    assert_eq!(m.slice(token.clone()), "5");
    let out = m.rewrite(Some("42"), vec![(token, "\"p-1\"".into())]);
    assert_eq!(
        out.text(),
        "{ \"jsonrpc\": \"2.0\", \"id\": 42, \"method\": \"tools/call\",\n  \"params\": {\"_meta\": {\"progressToken\": \"p-1\", \"x-unknown\": [1e400]}, \"name\": \"n\\u00e9\"} }"
    );
    assert_eq!(out.numeric_id(), Some(42));
}

#[test]
fn a_rewritten_message_reads_as_its_text_would_when_parsed_again() {
    let texts = [
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"t"},"name":"a"}}"#,
        r#"{"params":{"name":"a","_meta":{"progressToken":12345}},"method":"x","id":"long-id","jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","result":{"content":[]},"id":123456789}"#,
        r#"{"id":"s","jsonrpc":"2.0","error":{"code":1,"message":"m"}}"#,
    ];
    for text in texts {
        let m = parse(text);
        let mut edits = Vec::new();
        for (path, new) in [
            (&["_meta", "progressToken"][..], "\"a-much-longer-token\""),
            (&["name"][..], "\"b\""),
        ] {
            if let Some(span) = m.find(path) {
                edits.push((span, new.to_string()));
            }
        }
        for id in ["1", "\"x-longer-than-before\""] {
            let out = m.clone().rewrite(Some(id), edits.clone());
            let again = parse(out.text());
            assert_eq!(out.id(), again.id(), "{}", out.text());
            assert_eq!(out.body(), again.body(), "{}", out.text());
            assert_eq!(out.method(), again.method());
            assert_eq!(out.kind(), again.kind());
        }
    }
}

#[test]
fn bad_messages_get_the_right_code_and_their_id_when_it_can_be_read() {
    let bad = |t: &str| Message::parse(t.to_string()).unwrap_err();
    assert_eq!(bad("{nope").code, PARSE_ERROR);
    assert_eq!(bad("[]").code, INVALID_REQUEST);
    assert_eq!(bad(r#"{"jsonrpc":"2.0","id":3}"#).id.as_deref(), Some("3"));
    assert_eq!(
        bad(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).code,
        INVALID_REQUEST
    );
    assert_eq!(
        bad(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#).code,
        INVALID_REQUEST
    );
    assert_eq!(
        bad(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#).code,
        INVALID_REQUEST
    );
    // Cut short after the id: the id is still recovered.
    let invalid = bad(r#"{"params":{"a":[1,"]"]},"id":"cut","method":"x","tail":[[["#);
    assert_eq!(invalid.code, PARSE_ERROR);
    assert_eq!(invalid.id.as_deref(), Some("\"cut\""));
    assert_eq!(recover_id(r#"{"a":"}\"","id":-4}"#).as_deref(), Some("-4"));
    assert_eq!(recover_id(r#"{"id":{"x":1}}"#), None);
    assert_eq!(recover_id("[1]"), None);
}

#[test]
fn members_are_renamed_at_any_depth_and_nothing_else_moves() {
    let text = r#"{"uri":"ui://v","b":["uri",{"resourceUri":"ui://v","x":"ui://v"}],"uriTemplate":"t://{id}","n":1.0}"#;
    let renamed = rename_members(text, &["uri", "resourceUri", "uriTemplate"], |v| {
        (v == "ui://v").then(|| "ui://s__v".to_string())
    })
    .unwrap();
    assert_eq!(
        renamed,
        r#"{"uri":"ui://s__v","b":["uri",{"resourceUri":"ui://s__v","x":"ui://v"}],"uriTemplate":"t://{id}","n":1.0}"#
    );
    assert_eq!(rename_members(text, &["uri"], |_| None), None);
}

#[test]
fn find_looks_only_at_objects() {
    let m = parse(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[1,2],"isError":true}}"#);
    assert_eq!(m.find(&["content", "x"]), None);
    assert_eq!(m.find(&["isError", "x"]), None);
    assert_eq!(m.slice(m.find(&["isError"]).unwrap()), "true");
    assert_eq!(quote("a\"b"), r#""a\"b""#);
}

/// What serde's own reader finds at `path` (the first of duplicate keys, as `find` takes).
fn found_by_serde(text: &str, path: &[&str]) -> Option<String> {
    let mut value: &RawValue = serde_json::from_str(text).ok()?;
    for key in path {
        value = first_members(value.get())?
            .into_iter()
            .find(|(k, _)| k == key)?
            .1;
    }
    Some(value.get().to_string())
}

/// An object's members in order, duplicates kept.
fn first_members(text: &str) -> Option<Vec<(std::borrow::Cow<'_, str>, &RawValue)>> {
    struct Members;
    impl<'de> serde::de::Visitor<'de> for Members {
        type Value = Vec<(std::borrow::Cow<'de, str>, &'de RawValue)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut all = Vec::new();
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                all.push((key, map.next_value::<&'de RawValue>()?));
            }
            Ok(all)
        }
    }
    use serde::Deserializer as _;
    serde_json::Deserializer::from_str(text)
        .deserialize_map(Members)
        .ok()
}

/// Bodies with the traps a lookup must step over: duplicates, escaped keys, brackets and
/// quotes inside strings, values that are no object.
const BODIES: [&str; 8] = [
    r#"{"a":1,"b":{"c":[1,{"d":"}"}],"e":"x\"y"},"f":null}"#,
    r#"{ "a" : { "b" : [ ] } , "a" : 2 }"#,
    r#"{"\u0061":"escaped key","a":"plain"}"#,
    r#"{"k\"q":{"z":true},"s":"a\\","t":[[["]"]]],"u":-1.5e3}"#,
    r#"{}"#,
    r#"[{"a":1}]"#,
    r#""a""#,
    r#"{"_meta":{"progressToken":"t\\\"1","x":{}},"name":"echo","arguments":{"text":"{\"a\":1}"}}"#,
];

/// What is looked up in each of [`BODIES`].
const PATHS: [&[&str]; 12] = [
    &["a"],
    &["b", "c"],
    &["b", "e"],
    &["f"],
    &["a", "b"],
    &["k\"q", "z"],
    &["s"],
    &["t"],
    &["u"],
    &["_meta", "progressToken"],
    &["arguments", "text"],
    &["missing"],
];

#[test]
fn find_stops_at_the_member_and_agrees_with_serde() {
    let mut compared = 0;
    for body in BODIES {
        for path in PATHS {
            let ours = find(body, 0..body.len(), path).map(|span| body[span].to_string());
            assert_eq!(ours, found_by_serde(body, path), "{body} at {path:?}");
            compared += usize::from(ours.is_some());
        }
    }
    assert!(compared >= 12, "only {compared} paths were found anywhere");
}

#[test]
fn a_message_finds_through_its_index_what_a_scan_finds_and_forgets_it_when_rewritten() {
    for body in BODIES {
        let text = format!(r#"{{"jsonrpc":"2.0","id":7,"method":"m","params":{body}}}"#);
        let m = parse(&text);
        let start = text.rfind(body).unwrap();
        // Twice: the first lookup builds the index, the second reads it.
        for _ in 0..2 {
            for path in PATHS {
                let scanned = find(body, 0..body.len(), path).map(|s| &body[s]);
                assert_eq!(m.find(path).map(|s| m.slice(s)), scanned, "{body} {path:?}");
            }
        }
        assert_eq!(m.find(&[]), Some(start..start + body.len()));
    }
    // A body of more members than are indexed is scanned instead: the same answers.
    let many: Vec<String> = (0..INDEXED_MEMBERS + 5)
        .map(|i| format!(r#""k{i}":{i}"#))
        .collect();
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{{},"k0":"dup"}}}}"#,
        many.join(",")
    );
    let m = parse(&text);
    assert_eq!(m.slice(m.find(&["k0"]).unwrap()), "0");
    let last = format!("k{}", INDEXED_MEMBERS + 4);
    assert_eq!(
        m.slice(m.find(&[last.as_str()]).unwrap()),
        (INDEXED_MEMBERS + 4).to_string()
    );
    assert_eq!(m.members.get(), Some(&None));
    // An edit before the members moves them: the index is made again from the new text.
    let m = parse(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"x","b":2}}"#);
    let a = m.find(&["a"]).unwrap();
    assert_eq!(m.slice(m.find(&["b"]).unwrap()), "2");
    let m = m.rewrite(None, vec![(a, r#""a longer value""#.to_string())]);
    assert_eq!(m.slice(m.find(&["b"]).unwrap()), "2");
    assert_eq!(m.slice(m.find(&["a"]).unwrap()), r#""a longer value""#);
}
