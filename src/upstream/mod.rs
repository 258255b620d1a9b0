//! The proxy as an MCP client of its servers, below any typed model: a session that
//! multiplexes raw requests over a link (a child's pipes, streamable HTTP, legacy SSE).

pub mod http;
pub mod session;
pub mod stdio;
