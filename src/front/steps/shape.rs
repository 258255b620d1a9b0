//! Answers shaped for the harness that gets them: on the aggregated endpoint a server's
//! renamed URIs are rewritten to the names the harness knows; a harness without MCP Apps
//! does not see app-only tools in a `tools/list` answer, nor tools its server's declaration
//! filters out.

use crate::front::exchange::{Context, Flow, Step};
use crate::mcp::message::Message;

/// Rewrites the server's renamed URIs in its answer (aggregated endpoint).
pub struct RewriteUris;

impl Step for RewriteUris {
    fn answer(&mut self, x: &mut Context, message: Message) -> Flow {
        let names = x.hub().namespace();
        Flow::Next(match names.rewrite_uris(&x.server, message.text()) {
            Some(text) => reparsed(message, text),
            None => message,
        })
    }
}

/// Hides app-only tools in a `tools/list` answer.
pub struct HideAppOnly;

impl Step for HideAppOnly {
    fn answer(&mut self, _x: &mut Context, message: Message) -> Flow {
        Flow::Next(
            match crate::upstream::offer::without_app_only(message.text()) {
                Some(text) => reparsed(message, text),
                None => message,
            },
        )
    }
}

/// Hides the tools the server's declaration filters out (`disabledTools`, `includeTools`,
/// `excludeTools`) in a `tools/list` answer.
pub struct HideFiltered;

impl Step for HideFiltered {
    fn answer(&mut self, x: &mut Context, message: Message) -> Flow {
        let Some(filters) = x.hub().connections.tool_filters(&x.server) else {
            return Flow::Next(message);
        };
        Flow::Next(
            match crate::upstream::offer::without_tools(message.text(), |t| filters.hides(&t.key)) {
                Some(text) => reparsed(message, text),
                None => message,
            },
        )
    }
}

/// `text` (a rewrite of `old`) as a message; `old` if it somehow does not read.
fn reparsed(old: Message, text: String) -> Message {
    Message::parse(text).unwrap_or(old)
}
