//! A resource URI nobody claimed may be any server's: when the server asked first answers
//! that it has no such resource (`-32002`, or `-32602` as some SDKs say it), the same
//! request goes to the next candidate server, under that server's own URI.

use crate::front::answers::{INVALID_PARAMS, RESOURCE_NOT_FOUND};
use crate::front::exchange::{Context, Course, Flow, Step};
use crate::mcp::message::{self, Kind, Message};

/// Asks the next `(server, uri)` when the server does not have the resource.
pub struct Fallback {
    /// The candidates left, next first.
    next: std::vec::IntoIter<(String, String)>,
    /// The request as the harness sent it.
    original: Option<Message>,
}

impl Fallback {
    /// Ask these `(server, uri)` in turn after the first.
    pub fn to(next: Vec<(String, String)>) -> Self {
        Self {
            next: next.into_iter(),
            original: None,
        }
    }
}

impl Step for Fallback {
    fn request(&mut self, _x: &mut Context, message: Message) -> Flow {
        self.original = Some(message.clone());
        Flow::Next(message)
    }

    fn answer(&mut self, _x: &mut Context, answer: Message) -> Flow {
        if !not_found(&answer) {
            return Flow::Next(answer);
        }
        let Some(original) = &self.original else {
            return Flow::Next(answer);
        };
        match self.next.next() {
            Some((server, uri)) => match with_uri(original, &uri) {
                Some(message) => Flow::Divert(Course::Send { server, message }),
                None => Flow::Next(answer),
            },
            None => Flow::Next(answer),
        }
    }
}

/// Whether `answer` says the server has no such resource.
pub fn not_found(answer: &Message) -> bool {
    if answer.kind() != Kind::Error {
        return false;
    }
    let code = answer
        .find(&["code"])
        .and_then(|span| answer.slice(span).parse::<i64>().ok());
    matches!(code, Some(RESOURCE_NOT_FOUND) | Some(INVALID_PARAMS))
}

/// `request` asking for `uri` instead.
pub fn with_uri(request: &Message, uri: &str) -> Option<Message> {
    let span = request.find(&["uri"])?;
    Some(
        request
            .clone()
            .rewrite(None, vec![(span, message::quote(uri))]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> Message {
        Message::parse(text.to_string()).unwrap()
    }

    #[test]
    fn only_a_missing_resource_asks_the_next_server() {
        assert!(not_found(&msg(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"no"}}"#
        )));
        assert!(not_found(&msg(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#
        )));
        assert!(!not_found(&msg(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"broken"}}"#
        )));
        assert!(!not_found(&msg(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)));
    }

    #[test]
    fn the_next_request_names_the_next_servers_uri_and_nothing_else_changes() {
        let read = msg(
            r#"{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"ui://a__v","x":0.7}}"#,
        );
        assert_eq!(
            with_uri(&read, "ui://v").unwrap().text(),
            r#"{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"ui://v","x":0.7}}"#
        );
    }
}
