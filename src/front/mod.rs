//! The MCP front: the harness's MCP server, over stdio or streamable HTTP. One aggregated
//! endpoint over every ready server (names per [`naming`]) and one endpoint per server that
//! is that server; messages pass through raw (see `mcp::message`): what a server sends
//! arrives as it sent it, in order, and only ids, remapped progress tokens and documented
//! renames are touched. Tool calls are mirrored into AHP.

pub mod answers;
pub mod client_calls;
pub mod client_offers;
pub mod dispatch;
pub mod drain;
pub mod envelope;
pub mod exchange;
pub mod fairness;
pub mod harness;
pub mod harness_state;
pub mod http;
pub mod http_auth;
pub mod http_modern;
pub mod http_reply;
pub mod http_sessions;
pub mod hub;
pub mod in_flight;
pub mod initialize;
pub mod lists;
pub mod lock;
pub mod metrics;
pub mod modern;
pub mod naming;
pub mod outbox;
pub mod parked;
pub mod registry;
pub mod replay;
pub mod routes;
pub mod server_requests;
pub mod stdio;
pub mod steps;
pub mod task_tickets;
pub mod tool_call;

pub use hub::{Hub, Settings};

#[cfg(test)]
mod tests;
