//! What makes a message from a harness readable one way only: no member name twice in any
//! object (escapes read, so `"na\u006de"` is `"name"`), and no nesting past a limit.
//!
//! The proxy judges a request (its tool, its arguments, its task) on the first member of a
//! name; a server reading the same text may take the last. Refusing duplicates at every
//! depth makes the judged reading and every server's reading the same text (pure).

use std::borrow::Cow;
use std::collections::HashSet;

/// Why a message can be read more than one way (or not at all by most servers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flaw {
    /// A member name written twice in one object, at `path` (`params.arguments`).
    Duplicate { path: String, name: String },
    /// Objects and arrays nested deeper than the limit.
    TooDeep(usize),
}

impl Flaw {
    /// What the sender is told.
    pub fn describe(&self) -> String {
        match self {
            Flaw::Duplicate { path, name } if path.is_empty() => {
                format!("member {name:?} appears twice in the message (a JSON-RPC message must be read one way)")
            }
            Flaw::Duplicate { path, name } => {
                format!("member {name:?} appears twice in {path} (a JSON-RPC message must be read one way)")
            }
            Flaw::TooDeep(limit) => format!("the message nests deeper than {limit} levels"),
        }
    }
}

/// How many names an object's names are compared against one by one before a set is built.
const LINEAR_NAMES: usize = 16;

/// The names seen so far in one open object.
enum Names<'a> {
    Few(Vec<Cow<'a, str>>),
    Many(HashSet<Cow<'a, str>>),
}

impl<'a> Names<'a> {
    /// Adds `name`; `false` when it was there already.
    fn insert(&mut self, name: Cow<'a, str>) -> bool {
        match self {
            Names::Few(names) if names.len() < LINEAR_NAMES => {
                if names.contains(&name) {
                    return false;
                }
                names.push(name);
                true
            }
            Names::Few(names) => {
                let mut set: HashSet<Cow<'a, str>> = names.drain(..).collect();
                let fresh = set.insert(name);
                *self = Names::Many(set);
                fresh
            }
            Names::Many(set) => set.insert(name),
        }
    }
}

/// One open container: an object's names and the key it was found under (for the path).
struct Open<'a> {
    names: Option<Names<'a>>,
    under: Option<Cow<'a, str>>,
}

/// The first flaw of `text`, which must be JSON that has already been read whole (so its
/// strings and brackets are balanced); `None` when it reads one way and nests at most
/// `limit` deep.
pub fn flaw(text: &str, limit: usize) -> Option<Flaw> {
    let bytes = text.as_bytes();
    let mut open: Vec<Open> = Vec::new();
    // The key of the member whose value comes next (the path's next step).
    let mut pending_key: Option<Cow<str>> = None;
    let mut expect_key = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let end = string_end(bytes, i)?;
                if expect_key {
                    let name = unescaped(&text[i..end]);
                    let names = open.last_mut().and_then(|o| o.names.as_mut());
                    if let Some(names) = names {
                        if !names.insert(name.clone()) {
                            return Some(Flaw::Duplicate {
                                path: path(&open),
                                name: name.into_owned(),
                            });
                        }
                    }
                    pending_key = Some(name);
                    expect_key = false;
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                if open.len() >= limit {
                    return Some(Flaw::TooDeep(limit));
                }
                let object = bytes[i] == b'{';
                open.push(Open {
                    names: object.then(|| Names::Few(Vec::new())),
                    under: pending_key.take(),
                });
                expect_key = object;
            }
            b'}' | b']' => {
                open.pop();
                pending_key = None;
            }
            b',' => {
                expect_key = open.last().is_some_and(|o| o.names.is_some());
                pending_key = None;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The dotted path of the innermost open object (`params.arguments`); array steps are `[]`.
fn path(open: &[Open]) -> String {
    let mut out = String::new();
    for container in open.iter().skip(1) {
        match &container.under {
            Some(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            None => out.push_str("[]"),
        }
    }
    out
}

/// The JSON string literal `raw` (quotes included) as text: borrowed unless it has escapes.
fn unescaped(raw: &str) -> Cow<'_, str> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains('\\') {
        return Cow::Borrowed(inner);
    }
    serde_json::from_str::<String>(raw)
        .map(Cow::Owned)
        .unwrap_or(Cow::Borrowed(inner))
}

/// Index just past the JSON string starting at `i` (a `"`); its text skipped a word at a
/// time (`memchr`). Shared with `message`.
pub(super) fn string_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        // Text runs are skipped a word at a time, not byte by byte.
        i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
        match bytes[i] {
            b'\\' => i += 2,
            _ => return Some(i + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicate(text: &str) -> Option<(String, String)> {
        match flaw(text, 128) {
            Some(Flaw::Duplicate { path, name }) => Some((path, name)),
            _ => None,
        }
    }

    #[test]
    fn a_name_twice_is_found_at_any_depth_and_named_with_its_path() {
        let twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calls","arguments":{},"name":"record"}}"#;
        assert_eq!(duplicate(twice), Some(("params".into(), "name".into())));
        let deep = r#"{"params":{"arguments":{"a":[{"x":1,"y":{"path":"a","path":"b"}}]}}}"#;
        assert_eq!(
            duplicate(deep),
            Some(("params.arguments.a[].y".into(), "path".into()))
        );
        let top = r#"{"id":1,"id":2}"#;
        assert_eq!(duplicate(top), Some((String::new(), "id".into())));
        assert!(Flaw::Duplicate {
            path: "params".into(),
            name: "name".into()
        }
        .describe()
        .contains("\"name\" appears twice in params"));
    }

    #[test]
    fn escapes_are_read_before_names_are_compared() {
        let escaped = r#"{"params":{"name":"a","na\u006de":"b"}}"#;
        assert_eq!(duplicate(escaped), Some(("params".into(), "name".into())));
        let quote = r#"{"a\"b":1,"a\"b":2}"#;
        assert_eq!(duplicate(quote), Some((String::new(), "a\"b".into())));
        assert_eq!(duplicate(r#"{"a\\":1,"a":2}"#), None, "a\\ is not a");
    }

    #[test]
    fn the_same_name_in_sibling_objects_values_and_strings_is_no_flaw() {
        for fine in [
            r#"{"a":{"name":1},"b":{"name":2}}"#,
            r#"{"name":"name","x":["name","name"]}"#,
            r#"[{"k":1},{"k":2}]"#,
            r#"{"s":"{\"k\":1,\"k\":2}"}"#,
            r#"{"a":[{"k":1,"j":2}],"k":3}"#,
            "{}",
            "[]",
            "\"text\"",
        ] {
            assert_eq!(flaw(fine, 128), None, "{fine}");
        }
    }

    #[test]
    fn many_names_are_compared_through_a_set() {
        let mut members: Vec<String> = (0..40).map(|n| format!("\"k{n}\":{n}")).collect();
        let unique = format!("{{{}}}", members.join(","));
        assert_eq!(flaw(&unique, 128), None);
        members.push("\"k3\":0".into());
        let twice = format!("{{{}}}", members.join(","));
        assert_eq!(duplicate(&twice), Some((String::new(), "k3".into())));
    }

    #[test]
    fn nesting_past_the_limit_is_a_flaw_and_up_to_it_is_not() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(flaw(&nested(4), 4), None);
        assert_eq!(flaw(&nested(5), 4), Some(Flaw::TooDeep(4)));
        assert_eq!(
            flaw(r#"{"a":"[[[[[[[[[["}"#, 2),
            None,
            "brackets in strings"
        );
    }
}
