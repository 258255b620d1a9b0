//! Maps byte offsets in a text to line/column positions.
//! One index serves both human messages (1-based, characters) and LSP-style ranges (0-based, UTF-16).

/// A position inside a text, in every unit a caller may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Zero-based line number.
    pub line: u32,
    /// Zero-based column counted in Unicode scalar values (what a person counts).
    pub column_chars: u32,
    /// Zero-based column counted in UTF-16 code units (what LSP and VS Code count).
    pub column_utf16: u32,
}

impl Position {
    /// `line:col`, both 1-based, columns in characters — the form editors accept in `file:line:col`.
    pub fn human(&self) -> String {
        format!("{}:{}", self.line + 1, self.column_chars + 1)
    }
}

/// Line starts of a text, for turning byte offsets into [`Position`]s.
#[derive(Debug, Clone)]
pub struct LineIndex<'a> {
    text: &'a str,
    line_starts: std::borrow::Cow<'a, [usize]>,
}

impl<'a> LineIndex<'a> {
    /// Index `text`. Lines end at `\n`; a `\r` before it belongs to the line it ends.
    pub fn new(text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        Self {
            text,
            line_starts: line_starts.into(),
        }
    }

    /// Reuse line starts computed earlier by [`LineIndex::line_starts`] for the same text.
    pub fn with_line_starts(text: &'a str, line_starts: &'a [usize]) -> Self {
        Self {
            text,
            line_starts: line_starts.into(),
        }
    }

    /// Byte offsets where each line starts (the first is always 0).
    pub fn line_starts(&self) -> &[usize] {
        &self.line_starts
    }

    /// Position of the byte `offset`. Offsets past the end, or inside a multi-byte character,
    /// are clamped back to the nearest character boundary at or before them.
    pub fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let prefix = &self.text[self.line_starts[line]..offset];
        Position {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column_chars: u32::try_from(prefix.chars().count()).unwrap_or(u32::MAX),
            column_utf16: u32::try_from(prefix.encode_utf16().count()).unwrap_or(u32::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_byte_is_line_one_column_one() {
        let index = LineIndex::new("abc");
        assert_eq!(index.position(0).human(), "1:1");
    }

    #[test]
    fn offsets_after_newlines_start_new_lines() {
        let index = LineIndex::new("ab\ncd\r\nef");
        assert_eq!(index.position(3).human(), "2:1");
        assert_eq!(index.position(4).human(), "2:2");
        assert_eq!(index.position(7).human(), "3:1");
    }

    #[test]
    fn non_ascii_counts_characters_and_utf16_units_separately() {
        // "é" is 2 bytes, 1 char, 1 UTF-16 unit; "😀" is 4 bytes, 1 char, 2 UTF-16 units.
        let text = "é😀x";
        let index = LineIndex::new(text);
        let x = text.find('x').expect("x is in the text");
        let position = index.position(x);
        assert_eq!(position.column_chars, 2);
        assert_eq!(position.column_utf16, 3);
    }

    #[test]
    fn offsets_past_the_end_or_inside_a_character_are_clamped() {
        let index = LineIndex::new("é");
        assert_eq!(index.position(1).column_chars, 0);
        assert_eq!(index.position(99).column_chars, 1);
    }
}
