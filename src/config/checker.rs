//! `Checker`: collects every problem of one config file with its `file:line:col`, and checks
//! the value shapes several sections share (socket addresses, bounded numbers).

use std::net::SocketAddr;
use std::time::Duration;

use ahp_types::state::{TextPosition, TextRange};
use toml::Spanned;

use super::error::ConfigError;
use super::keys::{Number, Text};
use crate::line_index::LineIndex;
use crate::spec::Problem;

/// Collects problems while turning the raw schema into a [`super::Config`].
pub(super) struct Checker<'a> {
    file: &'a str,
    /// The whole file, for spans toml reports too narrowly (a table is spanned as its header).
    pub text: &'a str,
    index: LineIndex<'a>,
    problems: Vec<Problem>,
}

impl<'a> Checker<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Self {
        Self {
            file,
            text,
            index: LineIndex::new(text),
            problems: Vec::new(),
        }
    }

    /// `file:line:col` of a byte offset.
    pub fn location(&self, offset: usize) -> String {
        format!("{}:{}", self.file, self.index.position(offset).human())
    }

    pub fn problem(&mut self, offset: usize, message: impl Into<String>) {
        let location = self.location(offset);
        self.problems.push(Problem {
            location,
            message: message.into(),
        });
    }

    /// How many problems so far (to tell whether a check added any).
    pub fn problem_count(&self) -> usize {
        self.problems.len()
    }

    /// Zero-based UTF-16 range between two byte offsets.
    pub fn range(&self, start: usize, end: usize) -> TextRange {
        let point = |offset: usize| {
            let p = self.index.position(offset);
            TextPosition {
                line: i64::from(p.line),
                character: i64::from(p.column_utf16),
            }
        };
        TextRange {
            start: point(start),
            end: point(end),
        }
    }

    /// `value` when there were no problems, else every problem in file order.
    pub fn finish<T>(mut self, value: Option<T>) -> Result<T, ConfigError> {
        self.problems.sort_by_key(|p| location_order(&p.location));
        match value {
            Some(value) if self.problems.is_empty() => Ok(value),
            _ => Err(ConfigError {
                problems: self.problems,
            }),
        }
    }

    /// A socket address (`IP:PORT`), or the key's default when absent; `None` (and a
    /// problem) when it does not parse.
    pub fn address(&mut self, key: &Text, value: Option<Spanned<String>>) -> Option<SocketAddr> {
        let Some(value) = value else {
            return key.default.parse().ok();
        };
        match value.get_ref().parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                self.problem(
                    value.span().start,
                    format!(
                        "{} = {:?} is not a socket address: expected IP:PORT, e.g. {:?}",
                        key.name,
                        value.get_ref(),
                        key.default
                    ),
                );
                None
            }
        }
    }

    /// A whole number within the key's bounds, or its default (when absent or out of range).
    fn number(&mut self, key: &Number, value: Option<Spanned<i64>>) -> u64 {
        let default = key.default as u64;
        let Some(value) = value else { return default };
        let number = *value.get_ref();
        if number < key.min || number > key.max {
            self.problem(
                value.span().start,
                format!(
                    "{} = {number} is out of range: expected {}..={}",
                    key.name, key.min, key.max
                ),
            );
            return default;
        }
        u64::try_from(number).unwrap_or(default)
    }

    /// A bounded count.
    pub fn count(&mut self, key: &Number, value: Option<Spanned<i64>>) -> usize {
        usize::try_from(self.number(key, value)).unwrap_or(key.count())
    }

    /// A bounded `_ms` key.
    pub fn millis(&mut self, key: &Number, value: Option<Spanned<i64>>) -> Duration {
        Duration::from_millis(self.number(key, value))
    }

    /// A bounded `_secs` key.
    pub fn secs(&mut self, key: &Number, value: Option<Spanned<i64>>) -> Duration {
        Duration::from_secs(self.number(key, value))
    }
}

/// Sort key for `file:line:col` so problems come out in file order.
fn location_order(location: &str) -> (u64, u64) {
    let mut parts = location.rsplit(':');
    let col = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let line = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    (line, col)
}
