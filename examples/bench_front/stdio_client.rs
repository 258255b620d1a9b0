//! The light stdio client: raw JSON-RPC lines over a child's stdin/stdout, no MCP framework,
//! so its own cost per call is a write, a read and a small borrowed parse.

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use crate::mcp;

pub struct StdioClient {
    reader: BufReader<ChildStdout>,
    writer: ChildStdin,
    next_id: u64,
    /// The last line read (after a request: its answer).
    line: String,
    request: Vec<u8>,
}

impl StdioClient {
    /// `initialize` + `notifications/initialized` over the child's pipes.
    pub async fn connect((stdout, stdin): (ChildStdout, ChildStdin)) -> Result<Self, String> {
        let mut client = StdioClient {
            reader: BufReader::new(stdout),
            writer: stdin,
            next_id: 0,
            line: String::new(),
            request: Vec::new(),
        };
        client
            .exchange("initialize", mcp::INITIALIZE_PARAMS)
            .await?;
        client.request = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec();
        client.request.push(b'\n');
        client
            .writer
            .write_all(&client.request)
            .await
            .map_err(|e| format!("write: {e}"))?;
        Ok(client)
    }

    /// One request; the line that answered it.
    pub async fn request(&mut self, method: &str, params: &str) -> Result<String, String> {
        self.exchange(method, params).await?;
        Ok(self.line.clone())
    }

    /// One request, its answer left in `self.line`; an error answer is an `Err`.
    pub async fn exchange(&mut self, method: &str, params: &str) -> Result<(), String> {
        self.next_id += 1;
        self.request.clear();
        mcp::write_request(&mut self.request, self.next_id, method, params);
        self.request.push(b'\n');
        self.writer
            .write_all(&self.request)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let wanted = self.next_id.to_string();
        loop {
            self.line.clear();
            let n = self
                .reader
                .read_line(&mut self.line)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err(format!("stdout closed while {method} was pending"));
            }
            let reply: mcp::Reply =
                serde_json::from_str(&self.line).map_err(|e| format!("bad line: {e}"))?;
            // Notifications and server→client requests pass by.
            if !reply.answers(&wanted) {
                continue;
            }
            return match reply.error {
                Some(error) => Err(format!("{method} failed: {}", error.get())),
                None => Ok(()),
            };
        }
    }
}
