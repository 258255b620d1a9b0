//! The link to a server that is a child process: one message per line on its stdin, one per
//! line from its stdout. Lines that are not JSON-RPC are skipped and reported; a line too
//! long to be a message ends the session.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::session::{Failure, Link, Session, WeakSession};
use crate::mcp::message::Message;

/// A line longer than this (16 MiB) cannot be a message: the server is broken.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Messages queued for a child that does not read its stdin; beyond, sends fail.
const QUEUE: usize = 4096;

/// Who hears what a child's stdout carried besides MCP.
pub trait Watch: Send + Sync + 'static {
    /// A line that is not a JSON-RPC message (cut to a sensible length by the watcher).
    fn noise(&self, line: &[u8]);
    /// A line grew past [`MAX_MESSAGE_BYTES`]; the session is ended.
    fn too_long(&self);
}

struct Pipes {
    queue: mpsc::Sender<String>,
    closed: CancellationToken,
}

impl Link for Pipes {
    fn send(&self, text: String, _request: Option<u64>) -> Result<(), Failure> {
        self.queue.try_send(text).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => {
                Failure::Undelivered("the server is not reading its input".into())
            }
            mpsc::error::TrySendError::Closed(_) => Failure::Stopped,
        })
    }

    fn close(&self) {
        self.closed.cancel();
    }
}

/// A session over a child's pipes. It ends when stdout ends, a line is too long, or it is
/// closed (which closes the child's stdin).
pub fn connect<W, R>(stdin: W, stdout: R, watch: Arc<dyn Watch>) -> Session
where
    W: AsyncWrite + Unpin + Send + 'static,
    R: AsyncRead + Unpin + Send + 'static,
{
    let (queue, outgoing) = mpsc::channel(QUEUE);
    let closed = CancellationToken::new();
    let session = Session::new(Box::new(Pipes {
        queue,
        closed: closed.clone(),
    }));
    tokio::spawn(write(stdin, outgoing, closed.clone()));
    tokio::spawn(read(stdout, session.downgrade(), watch, closed));
    session
}

/// Write queued messages, each followed by a newline, flushing when the queue is empty.
async fn write<W: AsyncWrite + Unpin>(
    stdin: W,
    mut outgoing: mpsc::Receiver<String>,
    closed: CancellationToken,
) {
    let mut stdin = tokio::io::BufWriter::with_capacity(64 * 1024, stdin);
    loop {
        let first = tokio::select! {
            message = outgoing.recv() => message,
            _ = closed.cancelled() => None,
        };
        let Some(mut message) = first else { break };
        loop {
            message.push('\n');
            if stdin.write_all(message.as_bytes()).await.is_err() {
                return;
            }
            match outgoing.try_recv() {
                Ok(next) => message = next,
                Err(_) => break,
            }
        }
        if stdin.flush().await.is_err() {
            return;
        }
    }
    let _ = stdin.shutdown().await;
}

/// Read lines until stdout ends; each JSON-RPC message goes to the session in order.
async fn read<R: AsyncRead + Unpin>(
    stdout: R,
    session: WeakSession,
    watch: Arc<dyn Watch>,
    closed: CancellationToken,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            read = read_line(&mut reader, &mut line) => read,
            _ = closed.cancelled() => break,
        };
        match read {
            Ok(true) => {}
            Ok(false) => break,
            Err(LineError::TooLong) => {
                watch.too_long();
                break;
            }
            Err(LineError::Io) => break,
        }
        let Some(session) = session.upgrade() else {
            return;
        };
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed[0] != b'{' {
            watch.noise(trimmed);
            continue;
        }
        let text = match String::from_utf8(trimmed.to_vec()) {
            Ok(text) => text,
            Err(_) => {
                watch.noise(trimmed);
                continue;
            }
        };
        match Message::parse(text) {
            Ok(message) => session.receive(message, None),
            Err(invalid) => {
                tracing::debug!(error = %invalid.message, "unreadable message from a server's stdout");
                watch.noise(trimmed);
            }
        }
    }
    if let Some(session) = session.upgrade() {
        session.end();
    }
}

enum LineError {
    TooLong,
    Io,
}

/// Read one line (without its newline) into `line`; `false` at the end of the stream.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> Result<bool, LineError> {
    loop {
        let available = reader.fill_buf().await.map_err(|_| LineError::Io)?;
        if available.is_empty() {
            return Ok(!line.is_empty());
        }
        let (used, done) = match available.iter().position(|b| *b == b'\n') {
            Some(end) => {
                line.extend_from_slice(&available[..end]);
                (end + 1, true)
            }
            None => {
                line.extend_from_slice(available);
                (available.len(), false)
            }
        };
        reader.consume(used);
        if line.len() > MAX_MESSAGE_BYTES {
            return Err(LineError::TooLong);
        }
        if done {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    #[derive(Default)]
    struct Seen {
        noise: Mutex<Vec<String>>,
        too_long: std::sync::atomic::AtomicBool,
    }

    impl Watch for Seen {
        fn noise(&self, line: &[u8]) {
            self.noise
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(line).into_owned());
        }
        fn too_long(&self) {
            self.too_long
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn a_request_goes_down_the_pipe_and_its_answer_comes_back_past_the_noise() {
        let (proxy_in, mut server_in) = tokio::io::duplex(1 << 16);
        let (mut server_out, proxy_out) = tokio::io::duplex(1 << 16);
        let seen = Arc::new(Seen::default());
        let session = connect(proxy_in, proxy_out, seen.clone());
        let call = tokio::spawn({
            let session = session.clone();
            async move {
                session
                    .call("tools/list", None, Duration::from_secs(5))
                    .await
            }
        });
        let mut got = vec![0u8; 256];
        let n = tokio::io::AsyncReadExt::read(&mut server_in, &mut got)
            .await
            .unwrap();
        assert_eq!(
            &got[..n],
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n"
        );
        server_out
            .write_all(b"starting up...\n\n  {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}  \r\n")
            .await
            .unwrap();
        let answer = call.await.unwrap().unwrap();
        assert_eq!(
            answer.text(),
            r#"{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}"#
        );
        assert_eq!(*seen.noise.lock().unwrap(), vec!["starting up..."]);
        drop(server_out);
        tokio::time::timeout(Duration::from_secs(5), session.ended())
            .await
            .expect("stdout closed ends the session");
    }

    #[tokio::test]
    async fn a_line_too_long_ends_the_session() {
        let (proxy_in, _server_in) = tokio::io::duplex(1 << 16);
        let (mut server_out, proxy_out) = tokio::io::duplex(1 << 20);
        let seen = Arc::new(Seen::default());
        let session = connect(proxy_in, proxy_out, seen.clone());
        let writer = tokio::spawn(async move {
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..17 {
                if server_out.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), session.ended())
            .await
            .expect("ended");
        assert!(seen.too_long.load(std::sync::atomic::Ordering::Relaxed));
        writer.abort();
    }
}
