//! A child's stderr: drained for its whole life (a full pipe would stall the child), logged
//! under the server's name with a rate limit, and its last lines kept for error messages.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

/// Lines kept for error messages.
pub const TAIL_LINES: usize = 10;
/// Longer lines are cut here (in bytes, at a character boundary).
pub const MAX_LINE_BYTES: usize = 1024;
/// Lines logged per second per server; the rest are counted and reported.
pub const LINES_PER_SECOND: u32 = 50;
/// How long the last lines of a child that ended may take to be read (a grandchild that
/// outlives it may hold the pipe open for ever).
pub const FINAL_LINES_WAIT: Duration = Duration::from_millis(500);

/// The last lines a child wrote on stderr.
#[derive(Debug, Default, Clone)]
pub struct Tail {
    lines: VecDeque<String>,
}

impl Tail {
    /// Remember `line`, forgetting the oldest beyond [`TAIL_LINES`].
    pub fn push(&mut self, line: String) {
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The kept lines, oldest first, joined with newlines.
    pub fn text(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// A shared [`Tail`], written by the drain task and read when the child fails.
pub type SharedTail = Arc<Mutex<Tail>>;

/// Splits a byte stream into lines, cutting overlong ones; keeps no more than one line.
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
    overflowed: bool,
}

impl LineSplitter {
    /// Feed bytes; complete lines go to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) {
        for &byte in bytes {
            if byte == b'\n' {
                out.push(self.take());
            } else if self.pending.len() < MAX_LINE_BYTES {
                self.pending.push(byte);
            } else {
                self.overflowed = true;
            }
        }
    }

    /// The unterminated rest, if any (at end of stream).
    pub fn finish(&mut self) -> Option<String> {
        (!self.pending.is_empty() || self.overflowed).then(|| self.take())
    }

    fn take(&mut self) -> String {
        let mut line = String::from_utf8_lossy(&self.pending).into_owned();
        if line.ends_with('\r') {
            line.pop();
        }
        if self.overflowed {
            line.push_str(" […]");
        }
        self.pending.clear();
        self.overflowed = false;
        line
    }
}

/// Allows [`LINES_PER_SECOND`] lines per one-second window and counts the rest.
#[derive(Debug)]
pub struct RateLimit {
    window: Instant,
    used: u32,
    suppressed: u64,
}

impl RateLimit {
    /// A fresh limit starting at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            window: now,
            used: 0,
            suppressed: 0,
        }
    }

    /// Whether a line at `now` may be logged; when a new window opens, also how many lines
    /// the previous one suppressed.
    pub fn admit(&mut self, now: Instant) -> (bool, u64) {
        let mut dropped = 0;
        if now.duration_since(self.window) >= Duration::from_secs(1) {
            self.window = now;
            self.used = 0;
            dropped = std::mem::take(&mut self.suppressed);
        }
        if self.used < LINES_PER_SECOND {
            self.used += 1;
            (true, dropped)
        } else {
            self.suppressed += 1;
            (false, dropped)
        }
    }
}

/// The tail of a child that has ended, once `drained` (its [`drain`] task) has read the
/// pipe to its end, or after [`FINAL_LINES_WAIT`]: the lines it wrote just before exiting
/// (usually the reason) are still in the pipe when its exit is seen.
pub async fn last_lines(tail: &SharedTail, drained: &mut tokio::task::JoinHandle<()>) -> String {
    let _ = tokio::time::timeout(FINAL_LINES_WAIT, drained).await;
    tail.lock().unwrap_or_else(|p| p.into_inner()).text()
}

/// Read `stderr` to its end: every line into `tail`, logged at debug level under `server`
/// (stderr can carry anything the server prints, so never at info).
pub async fn drain(mut stderr: tokio::net::unix::pipe::Receiver, server: String, tail: SharedTail) {
    let mut splitter = LineSplitter::default();
    let mut limit = RateLimit::new(Instant::now());
    let mut buf = vec![0u8; 8192];
    let mut lines = Vec::new();
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        if n == 0 {
            lines.extend(splitter.finish());
        } else {
            splitter.feed(&buf[..n], &mut lines);
        }
        for line in lines.drain(..) {
            let (log, dropped) = limit.admit(Instant::now());
            if dropped > 0 {
                tracing::debug!(server = %server, dropped, "stderr lines not logged (rate limit)");
            }
            if log {
                tracing::debug!(server = %server, "stderr: {line}");
            }
            tail.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }
        if n == 0 {
            return;
        }
    }
}

/// What [`with_tail`] puts before a server's last stderr lines.
pub(super) const TAIL_MARKER: &str = "; last stderr lines:\n";

/// `how`, followed by the last stderr lines when there are some.
pub(super) fn with_tail(how: String, tail: &str) -> String {
    if tail.is_empty() {
        how
    } else {
        format!("{how}{TAIL_MARKER}{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        let mut tail = Tail::default();
        for i in 0..25 {
            tail.push(format!("line {i}"));
        }
        let text = tail.text();
        assert!(text.starts_with("line 15\n"), "{text}");
        assert!(text.ends_with("line 24"), "{text}");
    }

    #[test]
    fn splitter_handles_chunks_crlf_and_overlong_lines() {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        s.feed(b"ab", &mut out);
        s.feed(b"c\r\nde", &mut out);
        assert_eq!(out, ["abc"]);
        let long = vec![b'x'; MAX_LINE_BYTES * 3];
        s.feed(&long, &mut out);
        s.feed(b"\nlast", &mut out);
        assert_eq!(out.len(), 2);
        assert!(out[1].starts_with("dexxx") && out[1].ends_with(" […]"));
        assert!(out[1].len() <= MAX_LINE_BYTES + 8);
        assert_eq!(s.finish().as_deref(), Some("last"));
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn rate_limit_counts_what_it_drops() {
        let start = Instant::now();
        let mut limit = RateLimit::new(start);
        let admitted = (0..80).filter(|_| limit.admit(start).0).count();
        assert_eq!(admitted, LINES_PER_SECOND as usize);
        assert_eq!(limit.admit(start + Duration::from_secs(2)), (true, 30));
    }
}
