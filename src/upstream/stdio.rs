//! The link to a server that is a child process: one message per line on its stdin, one per
//! line from its stdout. Lines that are not JSON-RPC are skipped and reported; a line too
//! long to be a message ends the session. A message goes into the stdin pipe straight from
//! the task that sends it when the pipe takes it whole; only the rest waits for the writer.

use std::io::{ErrorKind, IoSlice};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::session::{Link, Session, Unanswered, WeakSession};
use crate::mcp::message::Message;

/// A line longer than this (16 MiB) cannot be a message: the server is broken.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Bytes queued for a child that does not read its stdin; beyond, sends fail.
const BACKLOG_BYTES: usize = 4 * MAX_MESSAGE_BYTES;

/// Who hears what a child's stdout carried besides MCP.
pub trait Watch: Send + Sync + 'static {
    /// A line that is not a JSON-RPC message (cut to a sensible length by the watcher).
    fn noise(&self, line: &[u8]);
    /// A line grew past [`MAX_MESSAGE_BYTES`]; the session is ended.
    fn too_long(&self);
}

/// The child's stdin and what it has not taken yet.
struct Input {
    /// `None` once closed (or broken).
    pipe: Option<Arc<pipe::Sender>>,
    /// Bytes the pipe did not take yet, in order; the writer task owes them.
    backlog: Vec<u8>,
}

struct Shared {
    input: Mutex<Input>,
    /// Wakes the writer task when the backlog stops being empty.
    queued: Notify,
    closed: CancellationToken,
}

impl Shared {
    fn input(&self) -> MutexGuard<'_, Input> {
        self.input.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The link: what senders write into, shared with the writer task.
struct Pipes(Arc<Shared>);

impl Link for Pipes {
    fn send(&self, text: String, _request: Option<u64>) -> Result<(), Unanswered> {
        let shared = &self.0;
        let mut input = shared.input();
        let Some(pipe) = input.pipe.as_ref() else {
            return Err(Unanswered::Stopped);
        };
        if !input.backlog.is_empty() {
            // Behind what waits already, in order.
            if input.backlog.len() >= BACKLOG_BYTES {
                return Err(Unanswered::Undelivered(
                    "the server is not reading its input".into(),
                ));
            }
            input.backlog.extend_from_slice(text.as_bytes());
            input.backlog.push(b'\n');
            return Ok(());
        }
        let line = [IoSlice::new(text.as_bytes()), IoSlice::new(b"\n")];
        let written = match pipe.try_write_vectored(&line) {
            Ok(written) => written,
            Err(error) if error.kind() == ErrorKind::WouldBlock => 0,
            Err(_) => {
                // The child closed its stdin (or died): nothing more goes through.
                input.pipe = None;
                return Err(Unanswered::Stopped);
            }
        };
        if written > text.len() {
            return Ok(());
        }
        input.backlog.extend_from_slice(&text.as_bytes()[written..]);
        input.backlog.push(b'\n');
        shared.queued.notify_one();
        Ok(())
    }

    fn close(&self) {
        self.0.closed.cancel();
        // The child's stdin closes once the writer task lets go of it too.
        self.0.input().pipe = None;
    }
}

/// A session over a child's pipes. It ends when stdout ends, a line is too long, or it is
/// closed (which closes the child's stdin).
#[cfg(test)]
pub fn connect<R>(stdin: pipe::Sender, stdout: R, watch: Arc<dyn Watch>) -> Session
where
    R: AsyncRead + Unpin + Send + 'static,
{
    open(stdin, stdout, watch, None)
}

/// A session over the pipes of a child whose stdout the `--stdio` worker watches before it parks
/// ([`crate::park_spin`]) while the session reads it.
pub fn connect_child(
    stdin: pipe::Sender,
    stdout: pipe::Receiver,
    watch: Arc<dyn Watch>,
) -> Session {
    use std::os::fd::AsFd;
    let watched = crate::park_spin::Watched::new(stdout.as_fd());
    open(stdin, stdout, watch, Some(watched))
}

fn open<R>(
    stdin: pipe::Sender,
    stdout: R,
    watch: Arc<dyn Watch>,
    watched: Option<crate::park_spin::Watched>,
) -> Session
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let shared = Arc::new(Shared {
        input: Mutex::new(Input {
            pipe: Some(Arc::new(stdin)),
            backlog: Vec::new(),
        }),
        queued: Notify::new(),
        closed: CancellationToken::new(),
    });
    let closed = shared.closed.clone();
    let session = Session::new(Box::new(Pipes(shared.clone())));
    let session_of_reader = session.downgrade();
    tokio::spawn(write(shared));
    tokio::spawn(async move {
        read(stdout, session_of_reader, watch, closed).await;
        drop(watched);
    });
    session
}

/// Write the backlog whenever there is one, as fast as the child reads it.
async fn write(pipes: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = pipes.queued.notified() => {}
            _ = pipes.closed.cancelled() => return,
        }
        loop {
            let pipe = {
                let input = pipes.input();
                if input.backlog.is_empty() {
                    break;
                }
                match &input.pipe {
                    Some(pipe) => pipe.clone(),
                    None => return,
                }
            };
            let writable = tokio::select! {
                writable = pipe.writable() => writable.is_ok(),
                _ = pipes.closed.cancelled() => return,
            };
            let mut input = pipes.input();
            if !writable || input.pipe.is_none() {
                input.pipe = None;
                return;
            }
            match pipe.try_write(&input.backlog) {
                Ok(written) => {
                    input.backlog.drain(..written);
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                Err(_) => {
                    input.pipe = None;
                    return;
                }
            }
        }
    }
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

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        let (proxy_in, mut server_in) = pipe::pipe().unwrap();
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
        let n = server_in.read(&mut got).await.unwrap();
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
        let (proxy_in, _server_in) = pipe::pipe().unwrap();
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

    #[tokio::test]
    async fn what_the_pipe_cannot_take_at_once_follows_in_order_and_close_closes_stdin() {
        let (proxy_in, mut server_in) = pipe::pipe().unwrap();
        let (_server_out, proxy_out) = tokio::io::duplex(1 << 16);
        let session = connect(proxy_in, proxy_out, Arc::new(Seen::default()));
        // Far more than a pipe holds (64 KiB on Linux), sent while nobody reads.
        let filler = "x".repeat(1000);
        let count = 1000;
        for n in 0..count {
            let text =
                format!(r#"{{"jsonrpc":"2.0","method":"n","params":{{"n":{n},"f":"{filler}"}}}}"#);
            session.notify(text).unwrap();
        }
        // The reader takes every line, then waits for the end of its stdin.
        let (lines_read, mut lines_seen) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            let mut chunk = vec![0u8; 1 << 16];
            let mut lines_read = Some(lines_read);
            loop {
                let n = server_in.read(&mut chunk).await.unwrap();
                if n == 0 {
                    return all;
                }
                all.extend_from_slice(&chunk[..n]);
                if all.iter().filter(|b| **b == b'\n').count() == count {
                    if let Some(tx) = lines_read.take() {
                        let _ = tx.send(());
                    }
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), &mut lines_seen)
            .await
            .expect("every line arrives")
            .unwrap();
        session.end();
        let all = tokio::time::timeout(Duration::from_secs(10), reader)
            .await
            .expect("ending the session closes the child's stdin")
            .unwrap();
        let lines: Vec<&[u8]> = all
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), count);
        for (n, line) in lines.iter().enumerate() {
            let message: serde_json::Value = serde_json::from_slice(line).unwrap();
            assert_eq!(message["params"]["n"], n);
        }
    }
}
