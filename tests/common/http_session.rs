//! A harness's streamable HTTP session on the proxy's MCP front, spoken by hand (reqwest):
//! the handshake done, then POSTs carrying the session's headers, and its DELETE.

use serde_json::{json, Value};

/// An initialized MCP session at one endpoint.
pub struct RawSession {
    pub http: reqwest::Client,
    pub url: String,
    pub id: String,
}

impl RawSession {
    /// `initialize` and `notifications/initialized` at `url` (e.g. `…/mcp` or `…/mcp/echo`).
    pub async fn open(http: &reqwest::Client, url: &str) -> Self {
        let init = post(
            http,
            url,
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .await
        .unwrap();
        assert!(init.status().is_success(), "{}", init.status());
        let id = (init.headers().get("mcp-session-id"))
            .expect("a session id")
            .to_str()
            .unwrap()
            .to_string();
        let _ = init.text().await;
        let session = Self {
            http: http.clone(),
            url: url.to_string(),
            id,
        };
        let initialized = session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
            .unwrap();
        assert!(
            initialized.status().is_success(),
            "{}",
            initialized.status()
        );
        session
    }

    /// POST `body` in this session.
    pub fn post(
        &self,
        body: Value,
    ) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> {
        post(&self.http, &self.url, Some(&self.id), body)
    }

    /// POST `text` as it is (a body no JSON serialiser would write) in this session.
    pub async fn post_text(&self, text: &str) -> reqwest::Response {
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &self.id)
            .body(text.to_string())
            .send()
            .await
            .unwrap()
    }

    /// End the session (DELETE).
    pub async fn delete(&self) -> reqwest::Response {
        self.http
            .delete(&self.url)
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap()
    }
}

/// POST `body` to `url`, in `session` if given.
pub fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: Value,
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send()
}
