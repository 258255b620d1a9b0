//! JSON with positions: parses manifests (comments and trailing commas allowed) into a tree
//! that keeps the byte span of every value and member, and reports duplicate keys.

use jsonc_parser::ast;
use jsonc_parser::{CollectOptions, ParseOptions};

/// Byte span `[start, end)` in the source text.
pub type Span = std::ops::Range<usize>;

/// One JSON value and where it sits in the text.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value's own span (for an object: `{` to `}` inclusive).
    pub span: Span,
    /// What it is.
    pub value: Value,
}

/// The value part of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, as written.
    Number(String),
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<Node>),
    /// An object; members in source order, duplicates kept.
    Object(Vec<Member>),
}

/// `"key": value` inside an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The key, unescaped.
    pub key: String,
    /// From the key's opening quote to the end of its value.
    pub span: Span,
    /// The value.
    pub node: Node,
}

/// A syntax error at a byte offset.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// Where the parser gave up.
    pub offset: usize,
    /// What it expected.
    pub message: String,
}

/// Parse `text`. Comments and trailing commas are accepted (real manifests have them);
/// everything else non-standard is an error, and so is an empty file.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let options = ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let parsed = jsonc_parser::parse_to_ast(text, &CollectOptions::default(), &options).map_err(
        |error| SyntaxError {
            offset: error.range().start,
            message: error.kind().to_string(),
        },
    )?;
    match parsed.value {
        Some(value) => Ok(convert(value)),
        None => Err(SyntaxError {
            offset: 0,
            message: "the file is empty; expected a JSON object".into(),
        }),
    }
}

fn convert(value: ast::Value<'_>) -> Node {
    match value {
        ast::Value::NullKeyword(v) => node(v.range, Value::Null),
        ast::Value::BooleanLit(v) => node(v.range, Value::Bool(v.value)),
        ast::Value::NumberLit(v) => node(v.range, Value::Number(v.value.to_string())),
        ast::Value::StringLit(v) => node(v.range, Value::String(v.value.into_owned())),
        ast::Value::Array(v) => node(
            v.range,
            Value::Array(v.elements.into_iter().map(convert).collect()),
        ),
        ast::Value::Object(v) => {
            let members = v
                .properties
                .into_iter()
                .map(|prop| Member {
                    span: prop.range.start..prop.range.end,
                    key: prop.name.into_string(),
                    node: convert(prop.value),
                })
                .collect();
            node(v.range, Value::Object(members))
        }
    }
}

fn node(range: jsonc_parser::common::Range, value: Value) -> Node {
    Node {
        span: range.start..range.end,
        value,
    }
}

impl Node {
    /// The members if this is an object.
    pub fn members(&self) -> Option<&[Member]> {
        match &self.value {
            Value::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The string if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The last member named `key` (JSON.parse semantics: the last duplicate wins).
    pub fn get(&self, key: &str) -> Option<&Member> {
        self.members()?.iter().rev().find(|m| m.key == key)
    }

    /// Short name of the JSON type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
}

/// Members of `members` whose key appeared earlier too: `(earlier, later)` pairs.
pub fn duplicates(members: &[Member]) -> Vec<(&Member, &Member)> {
    let mut last: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, later) in members.iter().enumerate() {
        if let Some(earlier) = last.insert(later.key.as_str(), i) {
            out.push((&members[earlier], later));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_span_runs_from_key_quote_to_value_end() {
        let text = "{\n  \"a\": { \"b\": 1 },\n  \"c\": [1, 2]\n}";
        let root = parse(text).unwrap();
        let a = root.get("a").unwrap();
        assert_eq!(&text[a.span.clone()], "\"a\": { \"b\": 1 }");
        let c = root.get("c").unwrap();
        assert_eq!(&text[c.span.clone()], "\"c\": [1, 2]");
        assert_eq!(&text[c.node.span.clone()], "[1, 2]");
    }

    #[test]
    fn comments_and_trailing_commas_are_accepted() {
        let root = parse("// c\n{ \"a\": [1,], /* x */ \"b\": 2, }").unwrap();
        assert_eq!(root.members().unwrap().len(), 2);
    }

    #[test]
    fn other_leniencies_are_errors_with_an_offset() {
        for (text, offset) in [
            ("{ 'a': 1 }", 2),
            ("{ a: 1 }", 2),
            ("{ \"a\": 1 \"b\": 2 }", 8),
            ("{ \"a\": 0x1 }", 7),
        ] {
            let error = parse(text).unwrap_err();
            assert_eq!(error.offset, offset, "{text}: {}", error.message);
        }
        assert!(parse("").is_err());
        assert!(parse("   ").is_err());
        assert!(parse("{ \"a\": 1").is_err());
        assert!(parse("{} {}").is_err());
    }

    #[test]
    fn duplicate_keys_are_reported_and_the_last_one_wins() {
        let root = parse("{ \"a\": 1, \"b\": 2, \"a\": 3 }").unwrap();
        let dups = duplicates(root.members().unwrap());
        assert_eq!(dups.len(), 1);
        assert_eq!(dups[0].0.node.value, Value::Number("1".into()));
        assert_eq!(root.get("a").unwrap().node.value, Value::Number("3".into()));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&text).is_err());
    }
}
