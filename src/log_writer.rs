//! The text log's writer: one event, one line. Control characters inside an event (a
//! newline or escape sequence in some value nobody wrapped in `Untrusted`) are escaped
//! before they reach stderr, so no value can forge a line or drive the reader's terminal.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// Stderr for the text log. With `ansi` (stderr is a terminal and colours are on) the
/// escape character itself passes, since the formatter's colours use it; every other
/// control character inside an event is escaped, and only the event's final newline is kept.
#[derive(Debug, Clone, Copy)]
pub struct OneLine {
    /// Whether the formatter writes ANSI colours.
    pub ansi: bool,
}

impl<'a> MakeWriter<'a> for OneLine {
    type Writer = OneLineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        OneLineWriter { ansi: self.ansi }
    }
}

/// One event's writer (see [`OneLine`]).
#[derive(Debug)]
pub struct OneLineWriter {
    ansi: bool,
}

impl Write for OneLineWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let escaped = escape_event(buf, self.ansi);
        io::stderr().lock().write_all(&escaped)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// `event` with every control character but its final newline escaped (`\n`, `\r`, `\t`,
/// `\x1b`, `\u{85}`…); ESC is kept when `ansi` is on. Byte-wise: UTF-8 never uses these
/// bytes inside a multi-byte character, and C1 controls are recognised as their two bytes.
pub fn escape_event(event: &[u8], ansi: bool) -> Vec<u8> {
    let (body, end) = match event.strip_suffix(b"\n") {
        Some(body) => (body, &b"\n"[..]),
        None => (event, &b""[..]),
    };
    if !body.iter().any(|&b| b < 0x20 || b == 0x7f || b == 0xc2) {
        return event.to_vec();
    }
    let mut out = Vec::with_capacity(event.len() + 16);
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x1b if ansi => out.push(b),
            0x00..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            0xc2 if body.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)) => {
                out.extend_from_slice(format!("\\u{{{:x}}}", body[i + 1]).as_bytes());
                i += 1;
            }
            _ => out.push(b),
        }
        i += 1;
    }
    out.extend_from_slice(end);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stays_on_one_line() {
        let event = "2026-01-01T00:00:00Z  INFO client initialized client=x\n2026-01-01T00:00:01Z  WARN forged\r\u{1b}[2J\u{85}é\n";
        let shown = String::from_utf8(escape_event(event.as_bytes(), false)).unwrap();
        assert_eq!(
            shown,
            "2026-01-01T00:00:00Z  INFO client initialized client=x\\n2026-01-01T00:00:01Z  WARN forged\\r\\x1b[2J\\u{85}é\n"
        );
        assert_eq!(shown.matches('\n').count(), 1);
    }

    #[test]
    fn colours_pass_when_they_are_on_and_plain_lines_are_untouched() {
        let coloured = "\u{1b}[32m INFO\u{1b}[0m ready\n";
        assert_eq!(escape_event(coloured.as_bytes(), true), coloured.as_bytes());
        assert_eq!(
            escape_event(coloured.as_bytes(), false),
            b"\\x1b[32m INFO\\x1b[0m ready\n"
        );
        let plain = "ready: 3 servers, déjà vu\n";
        assert_eq!(escape_event(plain.as_bytes(), false), plain.as_bytes());
    }
}
