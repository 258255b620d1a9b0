//! The stdio carrier of the raw server: one JSON-RPC message a line on stdin and stdout, one
//! session for the life of the process.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::{classify, start, Frame, Handler, Incoming, Peer};

/// Serve `handler` on stdin/stdout until stdin closes; returns the exit status.
pub async fn serve<H: Handler>(handler: H) -> i32 {
    let handler = Arc::new(handler);
    let peer = Arc::new(Peer::default());
    // One writer owns stdout; each call's messages reach it in the order the call sent them.
    let (out, mut lines) = mpsc::channel::<String>(256);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut line) = lines.recv().await {
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = stdin.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        match classify(&line) {
            Incoming::Request { id, method, params } => {
                let mut frames = start(&handler, &peer, id, method, params);
                let out = out.clone();
                tokio::spawn(async move {
                    while let Some(frame) = frames.recv().await {
                        let text = match frame {
                            Frame::Message(text) => text,
                            Frame::Close => continue,
                            Frame::Reply(text) => {
                                let _ = out.send(text).await;
                                break;
                            }
                        };
                        if out.send(text).await.is_err() {
                            break;
                        }
                    }
                });
            }
            Incoming::Notification { method, params } => {
                handler.notification(&method, params.as_deref())
            }
            Incoming::Response { id, text } => {
                peer.answer(&id, text);
            }
            Incoming::Invalid(error) => {
                let _ = out.send(error).await;
            }
        }
    }
    // Calls still waiting on the client get `None`; give the rest a moment to be written.
    peer.close();
    drop(out);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), writer).await;
    0
}
