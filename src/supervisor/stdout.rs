//! A child's stdout on its way to rmcp, watched without being changed: lines that are not JSON
//! (rmcp skips them) are counted and kept for error messages, and a line too long to ever
//! be read as a message marks the server broken.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::stderr::{Tail, MAX_LINE_BYTES};

/// rmcp drops a stdout line longer than this (`DEFAULT_MAX_LINE_LENGTH`): a server that
/// writes one can no longer be understood.
pub const MAX_MESSAGE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// What was noticed on one child's stdout; shared with its lifecycle task.
#[derive(Debug, Default)]
pub struct Report {
    noise: Mutex<Tail>,
    noise_lines: AtomicU64,
    /// Cancelled when a line grew past [`MAX_MESSAGE_BYTES`].
    broken: CancellationToken,
}

impl Report {
    /// How many non-JSON lines the child wrote.
    pub fn noise_lines(&self) -> u64 {
        self.noise_lines.load(Ordering::Relaxed)
    }

    /// Resolves once the child wrote a line too long to be a message.
    pub async fn broken(&self) {
        self.broken.cancelled().await
    }

    /// `how`, followed by the last non-JSON lines when there were any.
    pub fn explain(&self, how: String) -> String {
        let count = self.noise_lines();
        if count == 0 {
            return how;
        }
        let tail = self.noise.lock().unwrap_or_else(|p| p.into_inner()).text();
        format!("{how}; {count} non-JSON stdout lines were ignored, the last:\n{tail}")
    }
}

/// Follows line boundaries in a byte stream and classifies each line by its first
/// non-blank byte: `{` or `[` may be JSON-RPC, anything else is noise.
#[derive(Debug, Default)]
struct Lines {
    len: usize,
    /// `None` until the first non-blank byte of the line; then whether it is noise.
    noise: Option<bool>,
    kept: Vec<u8>,
    overflowed: bool,
}

impl Lines {
    /// Feed bytes; calls `done` with each finished noise line, returns true once a line is
    /// longer than [`MAX_MESSAGE_BYTES`].
    fn feed(&mut self, mut bytes: &[u8], mut done: impl FnMut(String)) -> bool {
        let mut too_long = false;
        while !bytes.is_empty() {
            let end = bytes.iter().position(|b| *b == b'\n');
            let segment = &bytes[..end.unwrap_or(bytes.len())];
            self.len = self.len.saturating_add(segment.len());
            too_long |= self.len > MAX_MESSAGE_BYTES;
            if self.noise.is_none() {
                if let Some(first) = segment.iter().find(|b| !b.is_ascii_whitespace()) {
                    self.noise = Some(!matches!(first, b'{' | b'['));
                }
            }
            if self.noise == Some(true) {
                let room = MAX_LINE_BYTES.saturating_sub(self.kept.len());
                self.kept
                    .extend_from_slice(&segment[..segment.len().min(room)]);
                self.overflowed |= segment.len() > room;
            }
            match end {
                Some(end) => {
                    if self.noise == Some(true) {
                        let mut line = String::from_utf8_lossy(&self.kept).into_owned();
                        if line.ends_with('\r') {
                            line.pop();
                        }
                        if self.overflowed {
                            line.push_str(" […]");
                        }
                        done(line);
                    }
                    *self = Self::default();
                    bytes = &bytes[end + 1..];
                }
                None => break,
            }
        }
        too_long
    }
}

/// `inner` with every byte passed on unchanged and its lines watched into a [`Report`].
pub struct Watched<R> {
    inner: R,
    lines: Lines,
    report: Arc<Report>,
    server: String,
}

impl<R> Watched<R> {
    /// Watch `inner`, a child's stdout, for server `server` (logs).
    pub fn new(inner: R, report: Arc<Report>, server: String) -> Self {
        Self {
            inner,
            lines: Lines::default(),
            report,
            server,
        }
    }

    fn observe(&mut self, bytes: &[u8]) {
        let report = &self.report;
        let server = &self.server;
        let too_long = self.lines.feed(bytes, |line| {
            if report.noise_lines.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(server = %server, "the server writes lines that are not JSON on stdout; they are ignored (debug logs show them)");
            }
            tracing::debug!(server = %server, "stdout (not JSON): {line}");
            report
                .noise
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line);
        });
        if too_long && !report.broken.is_cancelled() {
            report.broken.cancel();
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let filled = buf.filled();
            if filled.len() > before {
                this.observe(&filled[before..]);
            }
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(lines: &mut Lines, bytes: &[u8]) -> (Vec<String>, bool) {
        let mut out = Vec::new();
        let too_long = lines.feed(bytes, |l| out.push(l));
        (out, too_long)
    }

    #[test]
    fn only_lines_that_cannot_be_json_are_noise() {
        let mut lines = Lines::default();
        let (noise, too_long) = feed(
            &mut lines,
            b"Server starting\n{\"jsonrpc\":\"2.0\"}\n  [1]\n\n\r\nWARN: x\r\n  {\"a\"",
        );
        assert_eq!(noise, ["Server starting", "WARN: x"]);
        assert!(!too_long);
        // A line split across reads is classified once, by its first byte.
        let (noise, _) = feed(&mut lines, b":1}\nbye");
        assert!(noise.is_empty());
        let (noise, _) = feed(&mut lines, b" now\n");
        assert_eq!(noise, ["bye now"]);
    }

    #[test]
    fn a_noise_line_is_cut_and_an_endless_line_is_too_long() {
        let mut lines = Lines::default();
        let long = vec![b'x'; MAX_LINE_BYTES * 4];
        let _ = feed(&mut lines, &long);
        let (noise, _) = feed(&mut lines, b"\n");
        assert_eq!(noise.len(), 1);
        assert!(noise[0].ends_with(" […]") && noise[0].len() < MAX_LINE_BYTES + 8);
        let chunk = vec![b'{'; 1024 * 1024];
        let mut too_long = false;
        for _ in 0..=MAX_MESSAGE_BYTES / chunk.len() {
            too_long |= feed(&mut lines, &chunk).1;
        }
        assert!(too_long);
        // Once it ends, the next line starts afresh.
        let _ = feed(&mut lines, b"\n");
        let (_, too_long) = feed(&mut lines, b"{}\n");
        assert!(!too_long);
    }
}
