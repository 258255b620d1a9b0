//! MCP on the wire, below any typed model: a message kept as the text it arrived as (with
//! the spans routing needs), server-sent events, the protocol versions the proxy knows, and
//! a task's status.
//! Both the upstream clients and the harness-facing front speak through this.

pub mod era;
pub mod message;
pub mod sse;
pub mod strict;
pub mod task;
pub mod version;
