//! What a child's stdout carried besides MCP: lines that are not JSON-RPC (skipped by the
//! link) counted and kept for error messages, and whether a line too long to ever be read
//! as a message marked the server broken.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use super::stderr::{Tail, MAX_LINE_BYTES};

/// What was noticed on one child's stdout; shared with its lifecycle task.
#[derive(Debug, Default)]
pub struct Report {
    server: String,
    noise: Mutex<Tail>,
    noise_lines: AtomicU64,
    /// Cancelled when a line grew past the largest message.
    broken: CancellationToken,
}

impl Report {
    /// A report for server `server` (its name, for logs).
    pub fn new(server: &str) -> Self {
        Self {
            server: server.to_string(),
            ..Self::default()
        }
    }

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
        format!("{how}; {count} non-JSON stdout lines were ignored{NOISE_MARKER}{tail}")
    }
}

/// What [`Report::explain`] puts before the non-JSON lines it shows.
const NOISE_MARKER: &str = ", the last:\n";

/// An explained failure without the non-JSON stdout lines themselves (they may carry
/// anything: only AHP clients and debug logs see them); the stderr tail after them stays.
pub fn without_noise(text: &str) -> String {
    let Some(start) = text.find(NOISE_MARKER) else {
        return text.to_string();
    };
    let rest = &text[start..];
    let kept = rest
        .rfind(super::stderr::TAIL_MARKER)
        .map_or("", |at| &rest[at..]);
    format!(
        "{} (AHP clients and debug logs show the last){kept}",
        &text[..start]
    )
}

impl crate::upstream::stdio::Watch for Report {
    fn noise(&self, line: &[u8]) {
        let mut text =
            String::from_utf8_lossy(&line[..line.len().min(MAX_LINE_BYTES)]).into_owned();
        if line.len() > MAX_LINE_BYTES {
            text.push_str(" […]");
        }
        if self.noise_lines.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(server = %self.server, "the server writes lines that are not JSON on stdout; they are ignored (debug logs show them)");
        }
        tracing::debug!(server = %self.server, "stdout (not JSON): {text}");
        self.noise
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(text);
    }

    fn too_long(&self) {
        self.broken.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::stdio::Watch;

    #[test]
    fn noise_is_counted_cut_and_explained_and_a_long_line_breaks_the_server() {
        let report = Report::new("s");
        report.noise(b"Server starting");
        report.noise(&vec![b'x'; MAX_LINE_BYTES * 4]);
        assert_eq!(report.noise_lines(), 2);
        let explained = report.explain("it exited".into());
        assert!(explained.starts_with(
            "it exited; 2 non-JSON stdout lines were ignored, the last:\nServer starting\n"
        ));
        assert!(explained.ends_with(" […]"));
        let told = without_noise(&format!("{explained}; last stderr lines:\nboom"));
        assert_eq!(
            told,
            "it exited; 2 non-JSON stdout lines were ignored (AHP clients and debug logs show the last); last stderr lines:\nboom"
        );
        assert!(!report.broken.is_cancelled());
        report.too_long();
        assert!(report.broken.is_cancelled());
    }
}
