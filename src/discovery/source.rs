//! One file read for discovery (a regular file within the size cap, `file_read`), UTF-8
//! checked, with its `file://` URI and a line index that turns byte spans into
//! `file:line:col` text and LSP (UTF-16) ranges.

use std::path::{Path, PathBuf};

use ahp_types::state::{TextPosition, TextRange};

use crate::file_read::{self, ReadError};
use crate::line_index::{LineIndex, LineTable};
use crate::spec::Problem;

/// A file's text plus everything needed to point into it.
pub struct SourceFile {
    /// Where it is on disk.
    pub path: PathBuf,
    /// Its `file://` URI (customization `uri`, id base).
    pub uri: String,
    /// How messages name it (relative to the container's parent folder).
    pub display: String,
    /// The contents.
    pub text: String,
    lines: LineTable,
}

/// Why `display` could not be opened: `{doing}: {e}` at `display`, except that a symbolic
/// link loop is named as one (the OS text, "Too many levels of symbolic links", is not
/// obvious).
pub fn failure(display: &str, doing: &str, e: &std::io::Error) -> Problem {
    if e.raw_os_error() == Some(libc::ELOOP) {
        Problem::at(display, "symbolic link loop; nothing loaded")
    } else {
        Problem::at(display, format!("{doing}: {e}"))
    }
}

impl SourceFile {
    /// Read `path`; `display` is the name used in messages (and the problem's location).
    pub fn read(path: &Path, display: String) -> Result<Self, Problem> {
        let mut bytes =
            file_read::read(path, file_read::MAX_SOURCE_BYTES).map_err(|e| match e {
                ReadError::Io(e) => failure(&display, "cannot read", &e),
                ReadError::NotRegular => Problem::at(&display, "cannot read: not a regular file"),
                ReadError::TooLarge(max) => {
                    Problem::at(&display, format!("larger than {max} bytes; not read"))
                }
            })?;
        // Editors drop a byte-order mark from the document, so positions are counted without it.
        if bytes.starts_with(b"\xEF\xBB\xBF") {
            bytes.drain(..3);
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            Problem::at(
                &display,
                format!("not valid UTF-8 (byte {})", e.utf8_error().valid_up_to()),
            )
        })?;
        Ok(Self::from_text(path, display, text))
    }

    /// Wrap text that is already in memory.
    pub fn from_text(path: &Path, display: String, text: String) -> Self {
        let lines = LineTable::new(&text);
        Self {
            uri: super::uri::file_uri(path),
            path: path.to_path_buf(),
            display,
            text,
            lines,
        }
    }

    fn index(&self) -> LineIndex<'_> {
        LineIndex::with_table(&self.text, &self.lines)
    }

    /// `display:line:col` (1-based, characters) of a byte offset.
    pub fn location(&self, offset: usize) -> String {
        format!("{}:{}", self.display, self.index().position(offset).human())
    }

    /// `display:line:col` for a 1-based line and column the caller already has.
    pub fn location_at(&self, line: usize, column: usize) -> String {
        format!("{}:{line}:{column}", self.display)
    }

    /// The zero-based, UTF-16 range of a byte span (LSP / VS Code convention).
    pub fn range(&self, span: std::ops::Range<usize>) -> TextRange {
        let index = self.index();
        let point = |offset| {
            let p = index.position(offset);
            TextPosition {
                line: i64::from(p.line),
                character: i64::from(p.column_utf16),
            }
        };
        TextRange {
            start: point(span.start),
            end: point(span.end),
        }
    }
}
