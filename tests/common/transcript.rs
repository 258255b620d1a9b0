//! Transcripts of raw MCP exchanges for the byte-transparency tests: steps of normalised
//! lines (`<-` received, `->` our answers), rendered, parsed back and compared.

use super::raw::{normalize, Exchange, Seen};

/// One step of a transcript: its name and the normalised lines (`<-` received, `->` our
/// answers to the server's requests).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: String,
    pub lines: Vec<String>,
}

pub fn step(name: &str, exchange: &Exchange) -> Step {
    let lines = (exchange.messages.iter())
        .map(|m| match m {
            Seen::Received(text) => format!("<- {}", normalize(text)),
            Seen::Sent(text) => format!("-> {}", normalize(text)),
        })
        .collect();
    Step {
        name: name.into(),
        lines,
    }
}

/// The transcript as text: `## <step>` then its lines.
pub fn render(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        out.push_str("## ");
        out.push_str(&step.name);
        out.push('\n');
        for line in &step.lines {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

pub fn parse(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for line in text.lines() {
        match line.strip_prefix("## ") {
            Some(name) => steps.push(Step {
                name: name.into(),
                lines: Vec::new(),
            }),
            None => match steps.last_mut() {
                Some(step) => step.lines.push(line.into()),
                None => panic!("a transcript starts with a step: {line}"),
            },
        }
    }
    steps
}

/// Compare step by step, and show the first difference with both lines.
pub fn assert_same(expected: &[Step], actual: &[Step], what: &str) {
    for (want, got) in expected.iter().zip(actual) {
        assert_eq!(want.name, got.name, "{what}: the steps differ");
        for (i, line) in want.lines.iter().enumerate() {
            let other = got.lines.get(i).map(String::as_str).unwrap_or("(nothing)");
            assert!(
                line == other,
                "{what}, step {:?}, message {}:\nexpected {line}\n     got {other}\nthe whole step:\n{}",
                want.name,
                i + 1,
                got.lines.join("\n")
            );
        }
        assert_eq!(
            want.lines.len(),
            got.lines.len(),
            "{what}, step {:?}: extra messages:\n{}",
            want.name,
            got.lines.join("\n")
        );
    }
    assert_eq!(expected.len(), actual.len(), "{what}: number of steps");
}

/// The committed transcript at `path`.
pub fn golden(path: &str) -> Vec<Step> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    parse(&text)
}

/// A direct transcript against the committed one at `path` (rewritten instead with
/// `AHP_TRANSPARENCY_BLESS` set).
pub fn check_direct(path: &str, steps: &[Step], what: &str) {
    if std::env::var_os("AHP_TRANSPARENCY_BLESS").is_some() {
        std::fs::write(path, render(steps)).expect("write the golden transcript");
        return;
    }
    assert_same(&golden(path), steps, what);
}
