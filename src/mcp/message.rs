//! One MCP message (JSON-RPC 2.0) kept as the text it arrived as, parsed only as far as
//! routing needs: its kind, method, and where its `id` and body stand in the text.
//!
//! Nothing is re-serialized: the proxy rewrites a message by splicing new text over a
//! span (an id, a progress token, a name), so key order, numbers, unknown fields and
//! whitespace elsewhere pass through byte for byte.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

use serde::de::Deserializer;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::strict::{self, string_end};

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Has a `method` and an `id`: an answer is owed.
    Request,
    /// Has a `method`, no `id`.
    Notification,
    /// Has an `id` and a `result`.
    Result,
    /// Has an `error` (and an `id`, `null` when the request could not be read).
    Error,
}

/// A message that could not be read, with what JSON-RPC says to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// `-32700` (not JSON) or `-32600` (JSON, but not a JSON-RPC message).
    pub code: i64,
    /// What is wrong.
    pub message: String,
    /// The raw `id`, when it could be recovered (answer with it; else `null`).
    pub id: Option<String>,
    /// It came as a notification (no `id`): where every reply is an answer (stdio), none is
    /// written; it is dropped and logged.
    pub notification: bool,
}

/// JSON-RPC "parse error".
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC "invalid request".
pub const INVALID_REQUEST: i64 = -32600;

/// How deep a harness's message may nest (objects and arrays, the envelope counted): what
/// `serde_json` and so most MCP servers read. A deeper one would never be answered.
pub const MAX_DEPTH: usize = 128;

/// One message and its text.
#[derive(Debug, Clone)]
pub struct Message {
    text: String,
    kind: Kind,
    method: Option<Box<str>>,
    id: Option<Range<usize>>,
    body: Option<Range<usize>>,
    /// The body's members in order (the key's span with its quotes, the value's span), read
    /// on the first [`Message::find`]: a message is looked into several times on its way
    /// (its name, `_meta`, its task, its request state), and each lookup would otherwise
    /// step over every member before the one it wants (a modern request's `_meta` first).
    /// `None` for a body of more than [`INDEXED_MEMBERS`] members: those are scanned, so
    /// a message of many tiny members cannot make the index several times its own size.
    members: OnceLock<Option<Box<[Member]>>>,
}

/// The most members of a body [`Message::find`] indexes (MCP bodies have a handful).
const INDEXED_MEMBERS: usize = 32;

/// One member of an object: its key's span (quotes included) and its value's.
pub type Member = (Range<usize>, Range<usize>);

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// A member that is present is `Some`, even when it is `null` (`"result": null` is a
/// result; `"id": null` is an id).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

impl Message {
    /// Read one message. Batches (JSON arrays) are refused: MCP removed them in 2025-06-18;
    /// so is any other value that is not an object (serde would read an array positionally).
    pub fn parse(text: String) -> Result<Self, Invalid> {
        match text.trim_start().as_bytes().first() {
            Some(b'{') => {}
            Some(b'[') => return Err(batch()),
            _ => {
                return Err(Invalid {
                    code: INVALID_REQUEST,
                    message: "a JSON-RPC message must be a JSON object".into(),
                    id: None,
                    notification: false,
                })
            }
        }
        let envelope: Envelope = match serde_json::from_str(&text) {
            Ok(envelope) => envelope,
            Err(error) => return Err(unreadable(&text, &error)),
        };
        let span = |raw: &RawValue| offset_of(&text, raw);
        let id = envelope.id.map(span);
        let invalid = |message: &str| Invalid {
            code: INVALID_REQUEST,
            message: message.to_string(),
            id: envelope.id.map(|raw| raw.get().to_string()),
            notification: false,
        };
        if envelope.jsonrpc.as_deref() != Some("2.0") {
            return Err(invalid(
                "not a JSON-RPC 2.0 message (jsonrpc must be \"2.0\")",
            ));
        }
        if let Some(raw) = envelope.id {
            if !matches!(
                raw.get().as_bytes().first(),
                Some(b'"' | b'-' | b'0'..=b'9' | b'n')
            ) {
                return Err(invalid("a JSON-RPC id must be a string or a number"));
            }
        }
        let (kind, body) = match (&envelope.method, envelope.result, envelope.error) {
            (Some(_), None, None) if envelope.id.is_some_and(|id| id.get() != "null") => {
                (Kind::Request, envelope.params.map(span))
            }
            (Some(_), None, None) if envelope.id.is_none() => {
                (Kind::Notification, envelope.params.map(span))
            }
            (None, Some(result), None) if envelope.id.is_some() => {
                (Kind::Result, Some(span(result)))
            }
            (None, None, Some(error)) if envelope.id.is_some() => (Kind::Error, Some(span(error))),
            _ => {
                return Err(invalid(
                    "not a request, notification or response (method, result and error do not fit)",
                ))
            }
        };
        let method = envelope.method.map(|m| m.into_owned().into_boxed_str());
        Ok(Self {
            text,
            kind,
            method,
            id,
            body,
            members: OnceLock::new(),
        })
    }

    /// Read one message from a harness, strictly, so that what the proxy judges is what
    /// every server reads (an AHP client's `mcp://` request is written anew from the value
    /// that was judged): as [`Message::parse`], and
    /// refused (`-32600`, with its id) when a member name appears twice in any object
    /// ([`strict`]), when it nests deeper than [`MAX_DEPTH`] (which no server could read),
    /// or when a method that is not a notification (`notifications/…`) comes without an id
    /// (a request nobody could answer, which a server might run all the same).
    pub fn parse_from_harness(text: String) -> Result<Self, Invalid> {
        let message = Self::parse(text)?;
        if let Some(flaw) = strict::flaw(message.text(), MAX_DEPTH) {
            return Err(Invalid {
                code: INVALID_REQUEST,
                message: flaw.describe(),
                id: message.id().map(str::to_string),
                notification: message.kind == Kind::Notification,
            });
        }
        if let (Kind::Notification, Some(method)) = (message.kind, message.method()) {
            if !method.starts_with("notifications/") {
                return Err(Invalid {
                    code: INVALID_REQUEST,
                    message: format!(
                        "{:?} came without an id: only notifications/… methods may",
                        crate::untrusted::Untrusted(method)
                    ),
                    id: None,
                    notification: true,
                });
            }
        }
        Ok(message)
    }

    /// The message's text, exactly as it is now.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text, taken.
    pub fn into_text(self) -> String {
        self.text
    }

    /// What it is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its method (requests and notifications).
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// Its `id` as written (`1`, `"a"`), if it has one.
    pub fn id(&self) -> Option<&str> {
        self.id.clone().map(|r| &self.text[r])
    }

    /// Its `id` when it is a whole number the proxy could have assigned.
    pub fn numeric_id(&self) -> Option<u64> {
        self.id().and_then(|id| id.parse().ok())
    }

    /// The span of `params` (requests, notifications), `result` or `error` (responses).
    pub fn body(&self) -> Option<Range<usize>> {
        self.body.clone()
    }

    /// The body's members (key and value spans, in order) when it has at most
    /// [`INDEXED_MEMBERS`]: read once, and what [`Message::find`] looks in.
    pub fn body_members(&self) -> Option<&[Member]> {
        let body = self.body.clone()?;
        self.members
            .get_or_init(|| {
                let all = members(&self.text, body, INDEXED_MEMBERS + 1);
                (all.len() <= INDEXED_MEMBERS).then(|| all.into_boxed_slice())
            })
            .as_deref()
    }

    /// The value at `path` inside the body (`["_meta", "progressToken"]`), as its span.
    pub fn find(&self, path: &[&str]) -> Option<Range<usize>> {
        let body = self.body.clone()?;
        let Some((first, rest)) = path.split_first() else {
            return Some(body);
        };
        let Some(members) = self.body_members() else {
            return find(&self.text, body, path);
        };
        let value = members
            .iter()
            .find(|(key, _)| key_is(&self.text, key.clone(), first))?
            .1
            .clone();
        find(&self.text, value, rest)
    }

    /// The string at `path` inside the body, unescaped.
    pub fn string(&self, path: &[&str]) -> Option<Cow<'_, str>> {
        string_at(&self.text, self.find(path)?)
    }

    /// The raw text at `span`.
    pub fn slice(&self, span: Range<usize>) -> &str {
        &self.text[span]
    }

    /// The message with its `id` replaced by `id` (raw JSON text) and the other `edits`
    /// (span → new raw text) applied. Spans must not overlap.
    pub fn rewrite(self, id: Option<&str>, edits: Vec<(Range<usize>, String)>) -> Self {
        let mut all: Vec<(Range<usize>, &str)> =
            edits.iter().map(|(r, t)| (r.clone(), t.as_str())).collect();
        if let (Some(span), Some(id)) = (self.id.clone(), id) {
            all.push((span, id));
        }
        if all.is_empty() {
            return self;
        }
        let text = splice(&self.text, &mut all);
        // Every edit replaced a whole JSON value by another: the message keeps its shape, and
        // its spans only move by what the edits before their ends added or removed.
        let moved = |span: Range<usize>| moved(&all, span);
        Self {
            text,
            kind: self.kind,
            method: self.method,
            id: self.id.map(moved),
            body: self.body.map(moved),
            members: OnceLock::new(),
        }
    }
}

/// `text` with each span replaced by its new text (spans sorted here; they must not overlap).
pub fn splice(text: &str, edits: &mut [(Range<usize>, &str)]) -> String {
    edits.sort_by_key(|(r, _)| r.start);
    let grow: usize = edits.iter().map(|(_, t)| t.len()).sum();
    let mut out = String::with_capacity(text.len() + grow);
    let mut at = 0;
    for (range, new) in edits.iter() {
        if range.start < at || range.end > text.len() {
            continue;
        }
        out.push_str(&text[at..range.start]);
        out.push_str(new);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Where `span` stands after `edits` (sorted, not overlapping, each a whole value inside
/// `span`, being `span`, or apart from it) are spliced in: each end moves by what the edits
/// ending before it added or removed.
fn moved(edits: &[(Range<usize>, &str)], span: Range<usize>) -> Range<usize> {
    let shift = |at: usize| {
        edits
            .iter()
            .filter(|(range, _)| range.end <= at)
            .fold(at, |at, (range, new)| at + new.len() - range.len())
    };
    shift(span.start)..shift(span.end)
}

/// Where `raw` (borrowed from `text`) stands in `text`.
fn offset_of(text: &str, raw: &RawValue) -> Range<usize> {
    let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
    start..start + raw.get().len()
}

/// The span of the value at `path` inside the JSON value spanning `within` of `text`.
/// `text` is JSON already read whole ([`Message::parse`]): the search skips over what it does
/// not look for and stops at the member it does.
pub fn find(text: &str, within: Range<usize>, path: &[&str]) -> Option<Range<usize>> {
    let mut span = within;
    for key in path {
        span = member(text, span, key)?;
    }
    Some(span)
}

/// The span of member `key`'s value in the object spanning `within` of `text`: the first of
/// the same name, as serde's reader takes it; `None` when there is none or it is no object.
fn member(text: &str, within: Range<usize>, key: &str) -> Option<Range<usize>> {
    let mut found = None;
    walk_members(text, within, |name, value| {
        let same = key_is(text, name, key);
        if same {
            found = Some(value);
        }
        !same
    });
    found
}

/// The members of the object spanning `within` of `text`, in order, at most `limit`: the
/// key's span (with its quotes) and the value's; those before a flaw when the object is cut
/// short.
pub fn members(text: &str, within: Range<usize>, limit: usize) -> Vec<Member> {
    let mut all = Vec::new();
    walk_members(text, within, |name, value| {
        all.push((name, value));
        all.len() < limit
    });
    all
}

/// Call `each` with the key span and value span of every member of the object spanning
/// `within` of `text`, in order, while it returns `true`; stops at the first flaw.
fn walk_members(
    text: &str,
    within: Range<usize>,
    mut each: impl FnMut(Range<usize>, Range<usize>) -> bool,
) {
    let bytes = text.as_bytes();
    let end = within.end.min(bytes.len());
    let mut i = skip_ws(bytes, within.start);
    if bytes.get(i) != Some(&b'{') {
        return;
    }
    i = skip_ws(bytes, i + 1);
    while i < end && bytes[i] == b'"' {
        let Some(key_end) = string_end(bytes, i) else {
            return;
        };
        let key = i..key_end;
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return;
        }
        i = skip_ws(bytes, i + 1);
        let Some(value_end) = value_end(bytes, i).filter(|&e| e <= end) else {
            return;
        };
        if !each(key, i..value_end) {
            return;
        }
        i = skip_ws(bytes, value_end);
        if bytes.get(i) != Some(&b',') {
            return;
        }
        i = skip_ws(bytes, i + 1);
    }
}

/// Whether the JSON string at `span` of `text` (quotes included) is `key`, escapes read.
pub fn key_is(text: &str, span: Range<usize>, key: &str) -> bool {
    let Some(raw) = text.get(span.start + 1..span.end.saturating_sub(1)) else {
        return false;
    };
    match raw.contains('\\') {
        true => string_at(text, span).is_some_and(|k| k == key),
        false => raw == key,
    }
}

/// The JSON string at `span` of `text`, unescaped; `None` when it is not a string.
pub fn string_at(text: &str, span: Range<usize>) -> Option<Cow<'_, str>> {
    let raw = text.get(span)?;
    if !raw.starts_with('"') {
        return None;
    }
    serde_json::from_str::<Cow<str>>(raw).ok()
}

/// `s` as a JSON string literal.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// `text` with every string member named one of `keys` (at any depth) replaced by what
/// `rename` gives for its value; `None` when nothing changed. Everything else is kept as
/// written.
pub fn rename_members(
    text: &str,
    keys: &[&str],
    rename: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let bytes = text.as_bytes();
    let mut containers: Vec<bool> = Vec::new();
    let mut expect_key = false;
    let mut last_key: Option<Cow<str>> = None;
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => {
                containers.push(true);
                expect_key = true;
            }
            b'[' => {
                containers.push(false);
                expect_key = false;
            }
            b'}' | b']' => {
                containers.pop();
                expect_key = false;
            }
            b',' => expect_key = containers.last() == Some(&true),
            b':' => expect_key = false,
            b'"' => {
                let end = string_end(bytes, i)?;
                let in_object = containers.last() == Some(&true);
                if in_object && expect_key {
                    last_key = string_at(text, i..end);
                } else if in_object && last_key.as_deref().is_some_and(|k| keys.contains(&k)) {
                    if let Some(new) = string_at(text, i..end).and_then(|v| rename(&v)) {
                        edits.push((i..end, quote(&new)));
                    }
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if edits.is_empty() {
        return None;
    }
    let mut edits: Vec<(Range<usize>, &str)> =
        edits.iter().map(|(r, t)| (r.clone(), t.as_str())).collect();
    Some(splice(text, &mut edits))
}

/// Why `text` could not be read, recovering the `id` of a request that is JSON-RPC in shape
/// but too deep or too odd for the reader.
fn unreadable(text: &str, error: &serde_json::Error) -> Invalid {
    let (code, message) = match error.classify() {
        serde_json::error::Category::Data => {
            (INVALID_REQUEST, format!("not a JSON-RPC message: {error}"))
        }
        _ => (PARSE_ERROR, format!("not valid JSON: {error}")),
    };
    Invalid {
        code,
        message,
        id: recover_id(text),
        notification: false,
    }
}

/// The refusal of a batch (or of a message written as an array).
fn batch() -> Invalid {
    Invalid {
        code: INVALID_REQUEST,
        message: "JSON-RPC batches (and messages written as arrays) are not supported (MCP removed batches in 2025-06-18)".into(),
        id: None,
        notification: false,
    }
}

/// The top-level `id` of an object whose full reading failed (too deep, cut short…): a
/// shallow scan that skips nested values by counting brackets outside strings.
pub fn recover_id(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut i = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    if bytes[i] != b'{' {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(bytes, i);
        if bytes.get(i)? != &b'"' {
            return None;
        }
        let key_end = string_end(bytes, i)?;
        let key = &text[i..key_end];
        i = skip_ws(bytes, key_end);
        if bytes.get(i)? != &b':' {
            return None;
        }
        i = skip_ws(bytes, i + 1);
        let value_end = value_end(bytes, i)?;
        if key == "\"id\"" {
            let id = text[i..value_end].trim();
            let first = id.as_bytes().first()?;
            return matches!(first, b'"' | b'-' | b'0'..=b'9').then(|| id.to_string());
        }
        i = skip_ws(bytes, value_end);
        match bytes.get(i)? {
            b',' => i += 1,
            _ => return None,
        }
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Index just past the value starting at `i`, nested values skipped by bracket count.
fn value_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    match bytes.get(i)? {
        b'"' => string_end(bytes, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while bytes
                .get(i)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                i += 1;
            }
            Some(i)
        }
    }
}

#[cfg(test)]
mod tests;
