//! The parse-once invariant as a target: a harness message the front accepts reads one way
//! (what the proxy judges is what a last-wins server runs), and one it refuses for a
//! duplicate member really has one; checked against the positioned JSON reader of
//! `discovery::json`, an independent implementation, and `serde_json`'s last-wins values.

use serde_json::Value;

use crate::discovery::json::{self as positioned, Node, Value as Positioned};
use crate::mcp::message::Message;

/// The paths of a request's body that the front judges or routes by.
const JUDGED: &[&[&str]] = &[
    &["name"],
    &["arguments"],
    &["task"],
    &["_meta"],
    &["_meta", "progressToken"],
    &["uri"],
    &["taskId"],
    &["requestState"],
];

/// `Message::parse_from_harness` on UTF-8 text.
pub fn harness_message(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let duplicated = positioned::parse(text)
        .ok()
        .map(|node| has_duplicates(&node));
    match Message::parse_from_harness(text.to_string()) {
        Ok(message) => {
            assert_eq!(duplicated, Some(false), "accepted with a duplicate member");
            let whole: Value = serde_json::from_str(text).expect("accepted text is JSON");
            assert!(whole.is_object(), "accepted a message that is no object");
            assert_eq!(
                whole.get("method").and_then(Value::as_str),
                message.method(),
                "the method judged is not the method a server reads"
            );
            let params = whole.get("params").or_else(|| whole.get("result"));
            for path in JUDGED {
                let judged = message
                    .find(path)
                    .map(|span| serde_json::from_str::<Value>(message.slice(span)).ok());
                let read = params
                    .and_then(|params| path.iter().try_fold(params, |value, key| value.get(key)))
                    .cloned();
                match (judged, read) {
                    (Some(Some(judged)), Some(read)) => assert_eq!(judged, read, "{path:?}"),
                    (None, None) => {}
                    (judged, read) => {
                        panic!("{path:?}: judged {judged:?}, a server reads {read:?}")
                    }
                }
            }
        }
        Err(invalid) if invalid.message.contains("appears twice") => {
            assert_eq!(
                duplicated,
                Some(true),
                "refused a duplicate that is not there"
            );
        }
        Err(_) => {}
    }
}

fn has_duplicates(node: &Node) -> bool {
    match &node.value {
        Positioned::Array(items) => items.iter().any(has_duplicates),
        Positioned::Object(members) => {
            !positioned::duplicates(members).is_empty()
                || members.iter().any(|m| has_duplicates(&m.node))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::harness_message;

    /// A small deterministic generator (xorshift): no dependency, the same cases every run.
    struct Cases(u64);

    impl Cases {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[(self.next() % from.len() as u64) as usize]
        }
        /// A value nesting at most `depth`, its object members drawn from a few names (so
        /// duplicates come often), some spelt with escapes.
        fn value(&mut self, depth: u32) -> String {
            match self.next() % if depth == 0 { 3 } else { 5 } {
                0 => self.pick(&["1", "null", "true", "-0.5e3"]).to_string(),
                1 => self
                    .pick(&[r#""x""#, r#""record""#, r#""\"}{""#, r#""\u0041""#])
                    .into(),
                2 => self.pick(&["{}", "[]"]).into(),
                3 => {
                    let n = self.next() % 4;
                    let items: Vec<String> = (0..n).map(|_| self.value(depth - 1)).collect();
                    format!("[{}]", items.join(","))
                }
                _ => self.object(depth - 1),
            }
        }
        fn object(&mut self, depth: u32) -> String {
            let n = self.next() % 5;
            let members: Vec<String> = (0..n)
                .map(|_| {
                    let key = self.pick(&[
                        "name",
                        "arguments",
                        "task",
                        "_meta",
                        "path",
                        "na\\u006de",
                        "uri",
                        "progressToken",
                        "a",
                        "b",
                    ]);
                    format!("\"{key}\":{}", self.value(depth))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
        fn message(&mut self) -> String {
            let method = self.pick(&["tools/call", "resources/read", "notifications/x", "x"]);
            let id = self.pick(&[r#""id":7,"#, "", r#""id":"a","id":8,"#]);
            let extra = self.pick(&["", r#","method":"tools/list""#, r#","jsonrpc":"2.0""#]);
            format!(
                r#"{{"jsonrpc":"2.0",{id}"method":"{method}","params":{}{extra}}}"#,
                self.object(3)
            )
        }
    }

    #[test]
    fn what_the_front_accepts_reads_one_way_and_what_it_refuses_as_twice_is_twice() {
        let mut cases = Cases(0x9e37_79b9_7f4a_7c15);
        let (mut accepted, mut twice) = (0, 0);
        for _ in 0..5000 {
            let text = cases.message();
            harness_message(text.as_bytes());
            match crate::mcp::message::Message::parse_from_harness(text) {
                Ok(_) => accepted += 1,
                Err(e) if e.message.contains("appears twice") => twice += 1,
                Err(_) => {}
            }
        }
        // The generator reaches both sides of the rule.
        assert!(
            accepted > 300 && twice > 200,
            "{accepted} accepted, {twice} twice"
        );
    }
}
