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

/// Columns on long lines are remembered every this many bytes, so finding a position never
/// rescans more than one stride (a 4 MiB single-line manifest stays linear, not quadratic).
const STRIDE: usize = 1024;

/// A remembered column part-way along a long line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    offset: usize,
    column_chars: u32,
    column_utf16: u32,
}

/// Line starts and long-line checkpoints of one text; compute once, keep next to the text.
#[derive(Debug, Clone, Default)]
pub struct LineTable {
    line_starts: Vec<usize>,
    checkpoints: Vec<Checkpoint>,
}

impl LineTable {
    /// Index `text`. Lines end at `\n`; a `\r` before it belongs to the line it ends.
    pub fn new(text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        let mut checkpoints = Vec::new();
        for (i, &start) in line_starts.iter().enumerate() {
            let end = line_starts.get(i + 1).copied().unwrap_or(text.len());
            if end - start <= STRIDE {
                continue;
            }
            let (mut chars, mut utf16) = (0u32, 0u32);
            let mut next = start + STRIDE;
            for (at, c) in text[start..end].char_indices() {
                let at = start + at;
                if at >= next {
                    checkpoints.push(Checkpoint {
                        offset: at,
                        column_chars: chars,
                        column_utf16: utf16,
                    });
                    next = at + STRIDE;
                }
                chars = chars.saturating_add(1);
                utf16 = utf16.saturating_add(c.len_utf16() as u32);
            }
        }
        Self {
            line_starts,
            checkpoints,
        }
    }
}

/// A text and its [`LineTable`], for turning byte offsets into [`Position`]s.
#[derive(Debug, Clone)]
pub struct LineIndex<'a> {
    text: &'a str,
    table: std::borrow::Cow<'a, LineTable>,
}

impl<'a> LineIndex<'a> {
    /// Index `text`. Lines end at `\n`; a `\r` before it belongs to the line it ends.
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            table: std::borrow::Cow::Owned(LineTable::new(text)),
        }
    }

    /// Reuse a table computed earlier by [`LineTable::new`] for the same text.
    pub fn with_table(text: &'a str, table: &'a LineTable) -> Self {
        Self {
            text,
            table: std::borrow::Cow::Borrowed(table),
        }
    }

    /// Position of the byte `offset`. Offsets past the end, or inside a multi-byte character,
    /// are clamped back to the nearest character boundary at or before them.
    pub fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let starts = &self.table.line_starts;
        let line = starts.partition_point(|&start| start <= offset) - 1;
        let mut from = Checkpoint {
            offset: starts[line],
            column_chars: 0,
            column_utf16: 0,
        };
        let points = &self.table.checkpoints;
        let below = points.partition_point(|p| p.offset <= offset);
        if let Some(p) = below.checked_sub(1).map(|i| points[i]) {
            if p.offset >= starts[line] {
                from = p;
            }
        }
        let prefix = &self.text[from.offset..offset];
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Position {
            line: count(line),
            column_chars: from
                .column_chars
                .saturating_add(count(prefix.chars().count())),
            column_utf16: from
                .column_utf16
                .saturating_add(count(prefix.encode_utf16().count())),
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
    fn long_lines_give_the_same_columns_as_a_plain_count() {
        let text = format!("a\n{}x{}\nb", "é😀z".repeat(900), "q".repeat(3000));
        let index = LineIndex::new(&text);
        let (mut line, mut chars, mut utf16) = (0, 0, 0);
        for (offset, c) in text.char_indices().chain([(text.len(), '\0')]) {
            let p = index.position(offset);
            assert_eq!(
                (p.line, p.column_chars, p.column_utf16),
                (line, chars, utf16),
                "at {offset}"
            );
            if c == '\n' {
                (line, chars, utf16) = (line + 1, 0, 0);
            } else {
                chars += 1;
                utf16 += c.len_utf16() as u32;
            }
        }
    }

    #[test]
    fn offsets_past_the_end_or_inside_a_character_are_clamped() {
        let index = LineIndex::new("é");
        assert_eq!(index.position(1).column_chars, 0);
        assert_eq!(index.position(99).column_chars, 1);
    }
}
