//! The MCP front on stdin/stdout: one harness, one JSON-RPC message per line each way. A
//! line that cannot be read is answered with a JSON-RPC error (with its id when it can be
//! recovered) and logged; a line longer than 16 MiB is skipped to its end and answered so.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::answers::error_answer;
use super::harness::Harness;
use super::hub::Hub;
use super::outbox::{Outgoing, Stream};
use super::registry::Scope;
use crate::mcp::message::{self, Message, INVALID_REQUEST, PARSE_ERROR};
use crate::upstream::stdio::MAX_MESSAGE_BYTES;

/// Serve the harness on `input`/`output` until it closes `input` (or `shutdown`). The
/// proxy stands for this harness: servers are initialized with its identity (the caller
/// made them wait for it with `Connections::set_identity(None)` before they started).
pub async fn serve<R, W>(hub: Arc<Hub>, input: R, output: W, shutdown: CancellationToken)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let harness = Harness::new(hub, Scope::All, true);
    let (stream, frames) = Stream::channel();
    harness.set_general(Some(stream.clone()));
    let writer = tokio::spawn(write(output, frames));
    tracing::info!("serving MCP on stdin/stdout");
    tokio::select! {
        _ = read(&harness, input, &stream) => tracing::info!("the harness closed stdin"),
        _ = shutdown.cancelled() => {}
    }
    harness.set_general(None);
    drop(stream);
    drop(harness);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
}

async fn read<R: AsyncRead + Unpin>(harness: &Arc<Harness>, input: R, stream: &Stream) {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line).await {
            Ok(Line::Done) => {}
            Ok(Line::End) => return,
            Ok(Line::TooLong(start)) => {
                let id = message::recover_id(&String::from_utf8_lossy(&start));
                tracing::warn!(
                    "the harness sent a line longer than 16 MiB; answered with an error"
                );
                stream.send(error_answer(
                    id.as_deref().unwrap_or("null"),
                    INVALID_REQUEST,
                    "the message is longer than 16 MiB",
                ));
                continue;
            }
            Err(_) => return,
        }
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        let text = String::from_utf8_lossy(trimmed).into_owned();
        match Message::parse_from_harness(text) {
            Ok(message) => harness.handle(message, stream.clone()),
            Err(invalid) if invalid.notification => {
                tracing::warn!(error = %invalid.message, "the harness sent a notification that cannot be taken; dropped");
            }
            Err(invalid) => {
                tracing::warn!(error = %invalid.message, "the harness sent a message that cannot be read; answered with an error");
                let code = if invalid.code == PARSE_ERROR {
                    PARSE_ERROR
                } else {
                    INVALID_REQUEST
                };
                stream.send(error_answer(
                    invalid.id.as_deref().unwrap_or("null"),
                    code,
                    &invalid.message,
                ));
            }
        }
    }
}

enum Line {
    Done,
    End,
    /// Longer than the limit: skipped to its end; its first bytes.
    TooLong(Vec<u8>),
}

async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if too_long {
                Line::TooLong(std::mem::take(line))
            } else if line.is_empty() {
                Line::End
            } else {
                Line::Done
            });
        }
        let (used, done) = match available.iter().position(|b| *b == b'\n') {
            Some(end) => (end + 1, true),
            None => (available.len(), false),
        };
        if !too_long {
            let end = if done { used - 1 } else { used };
            line.extend_from_slice(&available[..end]);
            if line.len() > MAX_MESSAGE_BYTES {
                too_long = true;
                line.truncate(64 * 1024);
            }
        }
        reader.consume(used);
        if done {
            return Ok(if too_long {
                Line::TooLong(std::mem::take(line))
            } else {
                Line::Done
            });
        }
    }
}

/// Write frames, one per line, flushing when none wait.
async fn write<W: AsyncWrite + Unpin>(
    output: W,
    mut frames: tokio::sync::mpsc::UnboundedReceiver<Outgoing>,
) {
    let mut out = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    while let Some(frame) = frames.recv().await {
        let mut next = Some(frame);
        while let Some(frame) = next {
            if write_frame(&mut out, &frame.text).await.is_err() {
                return;
            }
            drop(frame.permit);
            next = frames.try_recv().ok();
        }
        if out.flush().await.is_err() {
            return;
        }
    }
}

/// One message on its own line: a server's reformatted message may hold line breaks
/// between tokens, which become spaces (a JSON string cannot hold a raw one).
async fn write_frame<W: AsyncWrite + Unpin>(out: &mut W, text: &str) -> std::io::Result<()> {
    if text.contains(['\n', '\r']) {
        let flat = text.replace(['\n', '\r'], " ");
        out.write_all(flat.as_bytes()).await?;
    } else {
        out.write_all(text.as_bytes()).await?;
    }
    out.write_all(b"\n").await
}
