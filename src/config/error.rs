//! `ConfigError`: every problem found in one config file, printed one `file:line:col: message`
//! per line, in file order.

use crate::spec::Problem;

/// Everything wrong with a config file, each problem with its `file:line:col`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", lines(.problems))]
pub struct ConfigError {
    /// One entry per problem, in file order.
    pub problems: Vec<Problem>,
}

/// `location: message` per problem, joined by newlines (no trailing newline).
fn lines(problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    lines.join("\n")
}
