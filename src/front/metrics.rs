//! The MCP front's metrics for `GET /metrics` (OpenMetrics text, `prometheus-client`): the
//! OpenTelemetry MCP duration histograms of both sides, plus servers, harnesses, in flight.
//!
//! `mcp_server_operation_duration_seconds` times a harness's request from the front taking it
//! to its answer (approval waits included); `mcp_client_operation_duration_seconds` times
//! the proxy's request to a server. Label values come from bounded sets only: a method the
//! spec does not name is `_OTHER`, a tool the server does not offer is `_OTHER`.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::mcp::message::{Kind, Message};

/// Label pairs, in the OpenTelemetry attribute names (dots as underscores).
type Labels = Vec<(&'static str, String)>;
type Durations = Family<Labels, Histogram, fn() -> Histogram>;

/// The bucket bounds the OpenTelemetry MCP conventions advise for both durations (seconds).
const BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The methods a label may name; any other is `_OTHER`.
const METHODS: [&str; 19] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
];

/// Every metric the front keeps.
pub struct Metrics {
    registry: Registry,
    server_operations: Durations,
    client_operations: Durations,
    servers: Family<Labels, Gauge>,
    harnesses: Gauge,
    in_flight: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// How one timed request ended, as its labels say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// `mcp.method.name` (or `_OTHER`).
    pub method: String,
    /// `gen_ai.tool.name`, for a call of a tool the server offers.
    pub tool: Option<String>,
    /// `error.type`: the JSON-RPC error code, `tool_error` for a result with `isError`, or
    /// why no answer came (`timeout`, …); `None` when it succeeded.
    pub error: Option<String>,
}

impl Metrics {
    /// A fresh registry with every metric at zero.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let histogram: fn() -> Histogram = || Histogram::new(BUCKETS);
        let server_operations = Durations::new_with_constructor(histogram);
        let client_operations = Durations::new_with_constructor(histogram);
        let servers = Family::<Labels, Gauge>::default();
        let harnesses = Gauge::default();
        let in_flight = Gauge::default();
        registry.register_with_unit(
            "mcp_server_operation_duration",
            "A harness's MCP request, from the front taking it to its answer",
            Unit::Seconds,
            server_operations.clone(),
        );
        registry.register_with_unit(
            "mcp_client_operation_duration",
            "The proxy's MCP request to a server, from sending it to its answer",
            Unit::Seconds,
            client_operations.clone(),
        );
        registry.register(
            "ahp_proxy_servers",
            "Declared MCP servers by state (ready, starting, authRequired, error, stopped)",
            servers.clone(),
        );
        registry.register(
            "ahp_proxy_harnesses",
            "Harness sessions on the MCP front",
            harnesses.clone(),
        );
        registry.register(
            "ahp_proxy_requests_in_flight",
            "Harness requests being answered",
            in_flight.clone(),
        );
        Self {
            registry,
            server_operations,
            client_operations,
            servers,
            harnesses,
            in_flight,
        }
    }

    /// A harness's request took `seconds` and ended as `operation`.
    pub fn served(&self, operation: &Operation, seconds: f64) {
        let labels = labels(operation, None);
        self.server_operations
            .get_or_create(&labels)
            .observe(seconds);
    }

    /// The proxy's request to server `server` (its declared name) took `seconds`.
    pub fn asked(&self, operation: &Operation, server: &str, seconds: f64) {
        let labels = labels(operation, Some(server));
        self.client_operations
            .get_or_create(&labels)
            .observe(seconds);
    }

    /// The exposition, with the gauges read now: `servers` by state, `harnesses`, `in_flight`.
    pub fn render(&self, servers: &[(String, i64)], harnesses: usize, in_flight: usize) -> String {
        for (state, count) in servers {
            self.servers
                .get_or_create(&vec![("state", state.clone())])
                .set(*count);
        }
        self.harnesses.set(harnesses as i64);
        self.in_flight.set(in_flight as i64);
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

/// The labels of `operation` (and the server's name, on the client side).
fn labels(operation: &Operation, server: Option<&str>) -> Labels {
    let mut labels: Labels = vec![("mcp_method_name", operation.method.clone())];
    if let Some(tool) = &operation.tool {
        labels.push(("gen_ai_tool_name", tool.clone()));
    }
    if let Some(error) = &operation.error {
        labels.push(("error_type", error.clone()));
    }
    if let Some(server) = server {
        labels.push(("mcp_server_name", server.to_string()));
    }
    labels
}

/// `method` as a label: itself when the spec names it, else `_OTHER`.
pub fn method_label(method: &str) -> String {
    match METHODS.contains(&method) {
        true => method.to_string(),
        false => "_OTHER".to_string(),
    }
}

/// `error.type` of an answer to `method`: its JSON-RPC error code, or `tool_error` for a
/// `tools/call` result with `isError: true` (only those results are searched); `None` for a
/// success.
pub fn error_of(answer: &Message, method: &str) -> Option<String> {
    match answer.kind() {
        Kind::Error => Some(
            answer
                .find(&["code"])
                .map(|span| answer.slice(span).to_string())
                .unwrap_or_else(|| "_OTHER".into()),
        ),
        _ if method == "tools/call"
            && answer
                .find(&["isError"])
                .is_some_and(|s| answer.slice(s) == "true") =>
        {
            Some("tool_error".into())
        }
        _ => None,
    }
}

/// Shared by the hub's settings.
pub type Shared = Arc<Metrics>;

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> Message {
        Message::parse(text.to_string()).unwrap()
    }

    #[test]
    fn durations_read_as_the_opentelemetry_mcp_conventions_say() {
        let metrics = Metrics::new();
        let call = Operation {
            method: method_label("tools/call"),
            tool: Some("now".into()),
            error: error_of(
                &message(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#),
                "tools/call",
            ),
        };
        metrics.served(&call, 0.003);
        metrics.asked(&call, "clock", 0.002);
        let odd = Operation {
            method: method_label("x/made-up"),
            tool: None,
            error: error_of(
                &message(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#),
                "x/made-up",
            ),
        };
        metrics.served(&odd, 0.5);
        let text = metrics.render(&[("ready".into(), 2), ("error".into(), 1)], 3, 0);
        assert!(
            text.contains("# TYPE mcp_server_operation_duration_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains(r#"mcp_server_operation_duration_seconds_bucket{le="0.01",mcp_method_name="tools/call",gen_ai_tool_name="now",error_type="tool_error"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="now",error_type="tool_error",mcp_server_name="clock"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcp_server_operation_duration_seconds_count{mcp_method_name="_OTHER",error_type="-32601"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ahp_proxy_servers{state="ready"} 2"#),
            "{text}"
        );
        assert!(text.contains("ahp_proxy_harnesses 3"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        let flagged = message(r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#);
        assert_eq!(
            error_of(&flagged, "resources/read"),
            None,
            "only tool results"
        );
        let plain = message(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#);
        assert_eq!(error_of(&plain, "tools/call"), None);
    }
}

#[cfg(test)]
mod cost {
    use super::*;

    /// Many calls counted: each lands in its series, and what counting one cost is printed
    /// (in a release build, `cargo test --release --lib front::metrics::cost -- --nocapture`,
    /// 327 ns for both sides on the 2-core machine; never asserted: machines are noisy).
    #[test]
    fn many_calls_are_each_counted_and_the_cost_of_one_is_printed() {
        let metrics = Metrics::new();
        let rounds: u32 = 20_000;
        let began = std::time::Instant::now();
        for round in 0..rounds {
            let operation = Operation {
                method: method_label("tools/call"),
                tool: Some("echo".into()),
                error: (round % 10 == 0).then(|| "tool_error".to_string()),
            };
            let seconds = began.elapsed().as_secs_f64();
            metrics.served(&operation, seconds);
            metrics.asked(&operation, "features", seconds);
        }
        let each = began.elapsed().as_nanos() / u128::from(rounds);
        eprintln!("counting one call on both sides: {each} ns");
        let text = metrics.render(&[], 0, 0);
        assert!(
            text.contains(r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="echo"} 18000"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="echo",error_type="tool_error",mcp_server_name="features"} 2000"#),
            "{text}"
        );
    }
}
