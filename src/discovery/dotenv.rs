//! `.env` files, as VS Code's and Cursor's `envFile` reads them: `KEY=value` lines, `export`
//! allowed, `#` comments, single quotes literal, double quotes with `\n` escapes. Pure.

use std::collections::BTreeMap;

/// Every `KEY=value` of `text`; lines that are not assignments are skipped (as `dotenv`
/// does).
pub fn parse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            continue;
        }
        let rest = rest.trim_start();
        let value = match rest.chars().next() {
            Some(quote @ ('"' | '\'' | '`')) => quoted(&rest[1..], quote, &mut lines),
            _ => unquoted(rest),
        };
        out.insert(key.to_string(), value);
    }
    out
}

/// A value without quotes: up to a ` #` comment, trimmed.
fn unquoted(rest: &str) -> String {
    let value = match rest.find(" #") {
        Some(at) => &rest[..at],
        None => rest,
    };
    value.trim().to_string()
}

/// A quoted value, which may run over several lines; `\n` is a newline inside double quotes.
fn quoted<'a>(first: &'a str, quote: char, more: &mut impl Iterator<Item = &'a str>) -> String {
    let mut value = String::new();
    let mut line = first;
    loop {
        if let Some(end) = line.find(quote) {
            value.push_str(&line[..end]);
            break;
        }
        value.push_str(line);
        match more.next() {
            Some(next) => {
                value.push('\n');
                line = next;
            }
            None => break,
        }
    }
    if quote == '"' {
        value = value
            .replace("\\n", "\n")
            .replace("\\r", "\r")
            .replace("\\t", "\t");
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_comments_quotes_and_export() {
        let env = parse(
            "\u{feff}# a comment\nA=1\nexport B = two words # trailing\nC='lit $X \\n'\nD=\"line\\nbreak\"\nE=\"multi\nline\"\nnot an assignment\n=novalue\nF=\n",
        );
        assert_eq!(env["A"], "1");
        assert_eq!(env["B"], "two words");
        assert_eq!(env["C"], "lit $X \\n");
        assert_eq!(env["D"], "line\nbreak");
        assert_eq!(env["E"], "multi\nline");
        assert_eq!(env["F"], "");
        assert_eq!(env.len(), 6, "{env:?}");
    }
}
