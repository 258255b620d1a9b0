//! What a mirrored call says in the chat (pure): while it runs, and once it ended, each
//! message naming the tool and who runs it (``Ran `now` on `clock` ``), as Markdown.

use ahp_types::common::StringOrMarkdown;
use serde_json::Value;

use super::confirmation::code_span;
use super::{CallStart, Outcome, Runner};

/// Longest server or client text (bytes) quoted in a message; longer is cut.
const MAX_QUOTED: usize = 512;

/// What a call's messages name: the tool as the harness called it, and who runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    tool: String,
    runner: Runner,
}

impl Subject {
    /// The subject of `call`.
    pub fn of(call: &CallStart) -> Self {
        Self {
            tool: call.tool.clone(),
            runner: call.runner.clone(),
        }
    }

    /// `` `tool` on `server` `` (names as code spans, shown as written).
    fn named(&self) -> String {
        let tool = code_span(&self.tool);
        match &self.runner {
            Runner::Server { name, .. } => format!("{tool} on {}", code_span(name)),
            Runner::Client { name, .. } => format!("{tool} in {}", code_span(name)),
        }
    }

    /// The invocation message: ``Running `now` on `clock` `` (a client's tool: ``Asking
    /// `My IDE` to run `runUnitTests` ``).
    pub fn invocation(&self) -> StringOrMarkdown {
        markdown(match &self.runner {
            Runner::Server { .. } => format!("Running {}", self.named()),
            Runner::Client { name, .. } => format!(
                "Asking {} to run {}",
                code_span(name),
                code_span(&self.tool)
            ),
        })
    }

    /// The past-tense message for how the call ended: ``Ran `now` on `clock` ``, or what
    /// went wrong (the server's own words escaped, so they read as text).
    pub fn past_tense(&self, outcome: &Outcome) -> StringOrMarkdown {
        let named = self.named();
        markdown(match outcome {
            Outcome::Result(result)
                if result.get("isError").and_then(Value::as_bool) == Some(true) =>
            {
                format!("Ran {named}: the tool reported an error")
            }
            Outcome::Result(_) | Outcome::Raw(_) => format!("Ran {named}"),
            Outcome::Failed(message) => format!(
                "{named} failed: {}",
                escaped(&super::cut(message, MAX_QUOTED))
            ),
            Outcome::Cancelled => format!("The harness cancelled {named}"),
        })
    }
}

fn markdown(text: String) -> StringOrMarkdown {
    StringOrMarkdown::Markdown { markdown: text }
}

/// `text` as Markdown that reads as the text itself: every ASCII punctuation character
/// backslash-escaped (CommonMark), line breaks as spaces.
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' | '\r' => out.push(' '),
            c if c.is_ascii_punctuation() => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(message: StringOrMarkdown) -> String {
        match message {
            StringOrMarkdown::Markdown { markdown } => markdown,
            StringOrMarkdown::Plain(plain) => panic!("plain text: {plain}"),
        }
    }

    fn clock() -> Subject {
        Subject {
            tool: "now".into(),
            runner: Runner::Server {
                id: "file:///p.toml#clock".into(),
                name: "clock".into(),
            },
        }
    }

    #[test]
    fn each_message_names_the_tool_and_its_server() {
        let clock = clock();
        assert_eq!(text(clock.invocation()), "Running `now` on `clock`");
        let ok = Outcome::Result(json!({"content": []}));
        assert_eq!(text(clock.past_tense(&ok)), "Ran `now` on `clock`");
        let tool_error = Outcome::Result(json!({"content": [], "isError": true}));
        assert_eq!(
            text(clock.past_tense(&tool_error)),
            "Ran `now` on `clock`: the tool reported an error"
        );
        assert_eq!(
            text(clock.past_tense(&Outcome::Cancelled)),
            "The harness cancelled `now` on `clock`"
        );
        let ide = Subject {
            tool: "runUnitTests".into(),
            runner: Runner::Client {
                id: "ide-1".into(),
                name: "My IDE".into(),
            },
        };
        assert_eq!(
            text(ide.invocation()),
            "Asking `My IDE` to run `runUnitTests`"
        );
        assert_eq!(text(ide.past_tense(&ok)), "Ran `runUnitTests` in `My IDE`");
    }

    #[test]
    fn a_failure_quotes_the_servers_words_as_text() {
        let failed = Outcome::Failed("**boom** [x](http://e)\nline".into());
        assert_eq!(
            text(clock().past_tense(&failed)),
            r"`now` on `clock` failed: \*\*boom\*\* \[x\]\(http\:\/\/e\) line"
        );
        let long = Outcome::Failed("é".repeat(MAX_QUOTED));
        assert!(text(clock().past_tense(&long)).contains("more bytes not shown"));
    }
}
