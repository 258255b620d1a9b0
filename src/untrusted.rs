//! Text that came from outside (a client id, a URI or method a client named, a header, a
//! server's error) as it may reach a terminal: control characters escaped, and in a log
//! line cut to a bounded length.
//!
//! Every log field holding such text goes through [`Untrusted`], so a client cannot forge
//! a log line (`\n`), drive the reader's terminal (escape sequences, bidi overrides) or
//! write megabytes per connection. The text log's writer adds a second guard (one event,
//! one line) in `log_line`. What the command line prints (`status`, the steering commands,
//! `check`) goes through [`Escaped`]: the same escapes, nothing cut.

use std::fmt::{self, Write as _};

/// At most this many characters of one untrusted value are logged; the rest is counted.
pub const MAX_LOGGED_CHARS: usize = 200;

/// Untrusted text for a log field: `%Untrusted(&text)` prints it with control characters
/// escaped (`\n`, `\u{1b}`, …) and cut after [`MAX_LOGGED_CHARS`]; `?Untrusted(&text)`
/// does the same inside double quotes.
#[derive(Clone, Copy)]
pub struct Untrusted<'a>(pub &'a str);

/// Remote text for the terminal: `{}` prints it with control characters and direction
/// marks escaped as [`Untrusted`] does, but whole. Split multi-line text into lines first.
#[derive(Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_escaped(self.0, f, false, usize::MAX)
    }
}

/// JSON text for the terminal: the characters [`needs_escape`] names that JSON allows raw
/// (DEL, C1 controls, direction marks; serde_json escapes the C0 ones) written as `\uXXXX`.
/// The result is the same JSON value.
pub fn json_escaped(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if needs_escape(c) && u32::from(c) >= 0x7f {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with its control characters escaped (and `"`, `\\` when `quote`), cut after
/// `limit` characters.
fn write_escaped(text: &str, f: &mut fmt::Formatter<'_>, quote: bool, limit: usize) -> fmt::Result {
    for (shown, (at, c)) in text.char_indices().enumerate() {
        if shown == limit {
            return write!(f, "…(+{} bytes)", text.len() - at);
        }
        match c {
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            '"' | '\\' if quote => {
                f.write_char('\\')?;
                f.write_char(c)?;
            }
            c if needs_escape(c) => write!(f, "\\u{{{:x}}}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    Ok(())
}

/// Characters that must never reach a log reader as they are: C0 and C1 controls, DEL,
/// and the invisible direction and isolate marks that can make text read backwards.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_escaped(self.0, f, false, MAX_LOGGED_CHARS)
    }
}

impl fmt::Debug for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        write_escaped(self.0, f, true, MAX_LOGGED_CHARS)?;
        f.write_char('"')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_direction_marks_are_escaped() {
        let forged = "me\n2026-01-01T00:00:00Z  INFO forged\r\u{1b}[2J\u{7f}\u{85}\u{202e}txt";
        let shown = Untrusted(forged).to_string();
        assert_eq!(
            shown,
            "me\\n2026-01-01T00:00:00Z  INFO forged\\r\\u{1b}[2J\\u{7f}\\u{85}\\u{202e}txt"
        );
        assert!(!shown.chars().any(needs_escape));
        assert_eq!(
            format!("{:?}", Untrusted("a\"b\\c\n")),
            "\"a\\\"b\\\\c\\n\""
        );
        assert_eq!(Untrusted("déjà vu 😀").to_string(), "déjà vu 😀");
        // For the terminal: the same escapes, nothing cut.
        let long = format!("{}\u{1b}[2J", "y".repeat(MAX_LOGGED_CHARS * 2));
        assert_eq!(
            Escaped(&long).to_string(),
            format!("{}\\u{{1b}}[2J", "y".repeat(MAX_LOGGED_CHARS * 2))
        );
    }

    #[test]
    fn json_keeps_its_value_and_loses_its_raw_controls() {
        let value = serde_json::json!({"m": "a\u{1b}[2J\u{7f}\u{9b}\u{202e}b é"});
        let shown = json_escaped(&value.to_string());
        assert!(!shown.chars().any(needs_escape), "{shown}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&shown).unwrap(),
            value
        );
    }

    #[test]
    fn long_text_is_cut_and_the_rest_counted() {
        let long = "x".repeat(1024 * 1024);
        let shown = Untrusted(&long).to_string();
        assert!(shown.starts_with(&"x".repeat(MAX_LOGGED_CHARS)));
        assert!(shown.ends_with(&format!("…(+{} bytes)", 1024 * 1024 - MAX_LOGGED_CHARS)));
        assert!(shown.len() < MAX_LOGGED_CHARS + 32);
        // Exactly at the limit: nothing is cut.
        let exact = "é".repeat(MAX_LOGGED_CHARS);
        assert_eq!(Untrusted(&exact).to_string(), exact);
    }
}
