//! Text that came from outside (a client id, a URI or method a client named, a header) as
//! it may appear in a log line: control characters escaped, cut to a bounded length.
//!
//! Every log field holding such text goes through [`Untrusted`], so a client cannot forge
//! a log line (`\n`), drive the reader's terminal (escape sequences, bidi overrides) or
//! write megabytes per connection. The text log's writer adds a second guard (one event,
//! one line) in `log_line`.

use std::fmt::{self, Write as _};

/// At most this many characters of one untrusted value are logged; the rest is counted.
pub const MAX_LOGGED_CHARS: usize = 200;

/// Untrusted text for a log field: `%Untrusted(&text)` prints it with control characters
/// escaped (`\n`, `\u{1b}`, …) and cut after [`MAX_LOGGED_CHARS`]; `?Untrusted(&text)`
/// does the same inside double quotes.
#[derive(Clone, Copy)]
pub struct Untrusted<'a>(pub &'a str);

impl Untrusted<'_> {
    fn write_escaped(&self, f: &mut fmt::Formatter<'_>, quote: bool) -> fmt::Result {
        for (shown, (at, c)) in self.0.char_indices().enumerate() {
            if shown == MAX_LOGGED_CHARS {
                return write!(f, "…(+{} bytes)", self.0.len() - at);
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
        self.write_escaped(f, false)
    }
}

impl fmt::Debug for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        self.write_escaped(f, true)?;
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
