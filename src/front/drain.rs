//! Draining before a stop: once the proxy is told to stop, the MCP front takes no new
//! request and the harnesses' requests in flight get up to `[mcp] drain_ms` to finish.

use std::time::Duration;

use super::hub::Hub;

/// How often the requests in flight are counted while draining.
const RECOUNT: Duration = Duration::from_millis(25);

impl Hub {
    /// Stop taking requests (listen streams end as the spec says), then wait, at most
    /// `grace`, until none is in flight; the log says how it went.
    pub async fn drain(&self, grace: Duration) {
        self.stop_listening();
        let waiting = self.requests_in_flight();
        if waiting == 0 {
            return;
        }
        tracing::info!(
            requests = waiting,
            "draining: {waiting} harness requests in flight get up to {} ms to finish",
            grace.as_millis()
        );
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let left = self.requests_in_flight();
            if left == 0 {
                tracing::info!("drained: every request in flight was answered");
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    requests = left,
                    "drain time over: {left} harness requests in flight are cut off"
                );
                return;
            }
            tokio::time::sleep(RECOUNT).await;
        }
    }
}
