//! The proxy as an MCP client of its servers, below any typed model: a session that
//! multiplexes raw requests over a link (a child's pipes, streamable HTTP, legacy SSE),
//! the handshake or the modern probe, and what a server offers, kept as the text it wrote.

pub mod bridge;
pub mod envelope;
pub mod era;
pub mod exchange;
pub mod handshake;
pub mod http;
pub mod http1;
pub mod legacy_sse;
pub mod listen;
pub mod modern;
pub mod offer;
pub mod param_headers;
pub mod session;
pub mod stateless;
pub mod stdio;
