//! A harness gets log messages at the level it asked for (`logging/setLevel`) and above, on
//! its requests' streams too: the server logs at the most verbose level any harness asked
//! for, so what is below this harness's level is dropped here.

use crate::front::exchange::{Context, Step};
use crate::front::registry::Level;
use crate::mcp::message::Message;

/// Drops log messages below the harness's level.
pub struct LogLevel;

impl Step for LogLevel {
    fn related(&mut self, x: &Context, message: Message) -> Option<Message> {
        if message.method() != Some("notifications/message") {
            return Some(message);
        }
        let wanted = x
            .hub()
            .tables()
            .registry
            .harness(x.harness)
            .and_then(|h| h.log_level);
        passes(&message, wanted).then_some(message)
    }
}

/// Whether log message `message` reaches a harness that asked for `wanted` (a message
/// without a level it knows, or a harness that asked for none, always does).
pub fn passes(message: &Message, wanted: Option<Level>) -> bool {
    let level = message.string(&["level"]).and_then(|l| Level::parse(&l));
    !matches!((level, wanted), (Some(level), Some(wanted)) if level < wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(level: &str) -> Message {
        Message::parse(format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"{level}","data":"x"}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn messages_below_the_harness_level_are_dropped() {
        let warning = Level::parse("warning");
        assert!(!passes(&log("info"), warning));
        assert!(passes(&log("error"), warning));
        assert!(passes(&log("warning"), warning));
        assert!(passes(&log("debug"), None));
        assert!(passes(&log("loud"), warning), "an unknown level passes");
    }
}
