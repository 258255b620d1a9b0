//! YAML frontmatter of skill, agent, rule and prompt files: finds the `---` block, parses it
//! with yaml-rust2's event parser (no aliases, bounded size) and reads typed fields.

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Frontmatter larger than this is refused: it is metadata, not content.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;

/// Deepest nesting of sequences and mappings accepted in frontmatter.
pub const MAX_DEPTH: usize = 32;

/// A parsed YAML node: only what frontmatter needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    /// A scalar; `plain` when it was written unquoted (so `true` may mean a boolean).
    Scalar { text: String, plain: bool },
    /// A sequence.
    Seq(Vec<Yaml>),
    /// A mapping with scalar keys, in source order.
    Map(Vec<(String, Yaml)>),
}

/// The fields of one frontmatter block.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frontmatter {
    fields: Vec<(String, Yaml)>,
}

/// Why frontmatter could not be read; `line` and `column` are 1-based file positions.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontmatterError {
    /// 1-based line in the file.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Split `text` into frontmatter and body. No leading `---` line means no frontmatter.
pub fn parse(text: &str) -> Result<Frontmatter, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return Ok(Frontmatter::default()),
    }
    let start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut offset = start;
    let mut end = None;
    for line in lines {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            end = Some(offset);
            break;
        }
        offset += line.len();
    }
    let Some(end) = end else {
        return Err(FrontmatterError {
            line: 1,
            column: 1,
            message: "frontmatter opened with --- is never closed".into(),
        });
    };
    let yaml = &text[start..end];
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(FrontmatterError {
            line: 2,
            column: 1,
            message: format!("frontmatter is larger than {MAX_FRONTMATTER_BYTES} bytes"),
        });
    }
    if yaml.trim().is_empty() {
        return Ok(Frontmatter::default());
    }
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(yaml);
    // Pull events one at a time (`Parser::load` recurses once per nesting level, and block
    // sequences are not covered by yaml-rust2's own depth limit).
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|error| at(error.marker(), error.info().to_string()))?;
        if matches!(event, Event::StreamEnd) {
            break;
        }
        builder.on_event(event, mark);
        if let Some((mark, message)) = builder.error.take() {
            return Err(at(&mark, message));
        }
    }
    match builder.root {
        Some(Yaml::Map(fields)) => Ok(Frontmatter { fields }),
        None => Ok(Frontmatter::default()),
        Some(_) => Err(FrontmatterError {
            line: 2,
            column: 1,
            message: "frontmatter must be a mapping of `key: value` lines".into(),
        }),
    }
}

/// Marker lines are 1-based within the YAML, which starts on file line 2.
fn at(mark: &Marker, message: String) -> FrontmatterError {
    FrontmatterError {
        line: mark.line() + 1,
        column: mark.col() + 1,
        message,
    }
}

/// Builds [`Yaml`] from parser events; refuses aliases (no billion laughs), complex keys and
/// nesting deeper than [`MAX_DEPTH`].
#[derive(Default)]
struct Builder {
    stack: Vec<Partial>,
    root: Option<Yaml>,
    error: Option<(Marker, String)>,
}

enum Partial {
    Seq(Vec<Yaml>),
    Map {
        fields: Vec<(String, Yaml)>,
        key: Option<String>,
    },
}

impl Builder {
    fn push_value(&mut self, value: Yaml, mark: Marker) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Partial::Seq(items)) => items.push(value),
            Some(Partial::Map { fields, key }) => match key.take() {
                Some(k) => fields.push((k, value)),
                None => match value {
                    Yaml::Scalar { text, .. } => *key = Some(text),
                    _ => self.fail(mark, "mapping keys must be plain text".into()),
                },
            },
        }
    }

    fn fail(&mut self, mark: Marker, message: String) {
        if self.error.is_none() {
            self.error = Some((mark, message));
        }
    }
}

impl Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match event {
            Event::Alias(_) => self.fail(mark, "YAML aliases are not supported here".into()),
            Event::Scalar(text, style, ..) => {
                let plain = style == TScalarStyle::Plain;
                self.push_value(Yaml::Scalar { text, plain }, mark);
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if self.stack.len() >= MAX_DEPTH => {
                self.fail(mark, format!("nested deeper than {MAX_DEPTH} levels"));
            }
            Event::SequenceStart(..) => self.stack.push(Partial::Seq(Vec::new())),
            Event::MappingStart(..) => self.stack.push(Partial::Map {
                fields: Vec::new(),
                key: None,
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                let value = match self.stack.pop() {
                    Some(Partial::Seq(items)) => Yaml::Seq(items),
                    Some(Partial::Map { fields, .. }) => Yaml::Map(fields),
                    None => return,
                };
                self.push_value(value, mark);
            }
            _ => {}
        }
    }
}

impl Frontmatter {
    /// The last value under `key`.
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// A scalar field as text (empty strings count as absent).
    pub fn text(&self, key: &str) -> Option<String> {
        match self.get(key)? {
            Yaml::Scalar { text, plain } if !(text.is_empty() || *plain && is_null(text)) => {
                Some(text.clone())
            }
            _ => None,
        }
    }

    /// A boolean field: unquoted `true` / `false` (any case). Anything else is absent.
    pub fn boolean(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            Yaml::Scalar { text, plain: true } => match text.to_ascii_lowercase().as_str() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// A list field: a YAML sequence of scalars, or one string split on `sep`; trimmed,
    /// empty items dropped; `None` when nothing is left.
    pub fn list(&self, key: &str, sep: char) -> Option<Vec<String>> {
        let items: Vec<String> = match self.get(key)? {
            Yaml::Scalar { text, .. } => text.split(sep).map(str::to_string).collect(),
            Yaml::Seq(items) => items
                .iter()
                .filter_map(|item| match item {
                    Yaml::Scalar { text, .. } => Some(text.clone()),
                    _ => None,
                })
                .collect(),
            Yaml::Map(_) => return None,
        };
        let items: Vec<String> = items
            .into_iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        (!items.is_empty()).then_some(items)
    }
}

fn is_null(text: &str) -> bool {
    matches!(text, "~" | "null" | "Null" | "NULL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_scalars_booleans_and_lists() {
        let fm = parse(
            "---\nname: x\ndescription: \"quoted: yes\"\nalwaysApply: true\nquoted: \"true\"\n\
             tools: Read, Grep ,, Glob\nlist: [a, b]\nempty:\n---\nbody\n",
        )
        .unwrap();
        assert_eq!(fm.text("name").as_deref(), Some("x"));
        assert_eq!(fm.text("description").as_deref(), Some("quoted: yes"));
        assert_eq!(fm.boolean("alwaysApply"), Some(true));
        assert_eq!(fm.boolean("quoted"), None);
        assert_eq!(fm.list("tools", ',').unwrap(), vec!["Read", "Grep", "Glob"]);
        assert_eq!(fm.list("list", ',').unwrap(), vec!["a", "b"]);
        assert_eq!(fm.text("empty"), None);
        assert_eq!(fm.text("missing"), None);
    }

    #[test]
    fn no_frontmatter_is_empty_not_an_error() {
        assert_eq!(parse("# Title\n---\n").unwrap(), Frontmatter::default());
        assert_eq!(parse("").unwrap(), Frontmatter::default());
        assert_eq!(parse("---\n---\n").unwrap(), Frontmatter::default());
    }

    #[test]
    fn unterminated_frontmatter_points_at_line_one() {
        let error = parse("---\nname: x\nbody\n").unwrap_err();
        assert_eq!((error.line, error.column), (1, 1));
        assert!(error.message.contains("never closed"));
    }

    #[test]
    fn syntax_errors_carry_file_positions() {
        let error = parse("---\nname: ok\ndescription: [unclosed\n---\n").unwrap_err();
        assert!(error.line >= 3, "{error:?}");
        // The scanner blames the plain scalar the TAB would continue: `x` at line 2, col 7.
        let error = parse("---\nname: x\n\tbad: tab\n---\n").unwrap_err();
        assert_eq!((error.line, error.column), (2, 7), "{error:?}");
    }

    #[test]
    fn aliases_and_non_mappings_are_refused() {
        let error = parse("---\na: &x [1, 2]\nb: *x\n---\n").unwrap_err();
        assert!(error.message.contains("aliases"), "{error:?}");
        assert!(parse("---\n- a\n- b\n---\n").is_err());
        assert!(parse("---\njust text\n---\n").is_err());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let text = format!("---\na:\n{}x\n---\n", "- ".repeat(10_000));
        assert!(parse(&text).unwrap_err().message.contains("nested deeper"));
        let text = format!("---\na: {}{}\n---\n", "[".repeat(200), "]".repeat(200));
        assert!(parse(&text).is_err());
    }

    #[test]
    fn oversized_frontmatter_is_refused() {
        let text = format!("---\na: {}\n---\n", "x".repeat(MAX_FRONTMATTER_BYTES));
        assert!(parse(&text).unwrap_err().message.contains("larger"));
    }
}
