//! Validation of `[approval]`: the mode, the wait and what an unanswered call becomes, and
//! the per-server and per-tool overrides, into the pure [`Policy`](crate::approval::Policy).

use toml::Spanned;

use super::checker::Checker;
use super::keys;
use super::raw::RawApproval;
use crate::approval::{Mode, OnTimeout, Policy, ServerRule, ToolRule};

/// `[approval]`.
pub(super) fn approval(checker: &mut Checker<'_>, raw: RawApproval) -> Policy {
    let mode = mode_key(checker, keys::APPROVAL_MODE.name, raw.mode).unwrap_or_default();
    let on_timeout = match raw.on_timeout {
        None => OnTimeout::default(),
        Some(value) => OnTimeout::parse(value.get_ref()).unwrap_or_else(|| {
            checker.problem(
                value.span().start,
                format!(
                    "{} = {:?}: expected \"deny\" or \"allow\"",
                    keys::APPROVAL_ON_TIMEOUT.name,
                    value.get_ref()
                ),
            );
            OnTimeout::default()
        }),
    };
    let servers = (raw.servers.into_iter())
        .map(|(name, server)| {
            let key = format!("approval.servers.{name}.mode");
            let tools = (server.tools.into_iter())
                .map(|(tool, rule)| {
                    let key = format!("approval.servers.{name}.tools.{tool}.mode");
                    let rule = ToolRule {
                        mode: mode_key(checker, &key, rule.mode),
                        review_result: rule.review_result,
                    };
                    (tool, rule)
                })
                .collect();
            let rule = ServerRule {
                mode: mode_key(checker, &key, server.mode),
                tools,
            };
            (name, rule)
        })
        .collect();
    Policy {
        mode,
        timeout: checker.millis(&keys::APPROVAL_TIMEOUT_MS, raw.timeout_ms),
        on_timeout,
        servers,
    }
}

/// A `mode` key (named `key` in errors), if written and known.
fn mode_key(checker: &mut Checker<'_>, key: &str, value: Option<Spanned<String>>) -> Option<Mode> {
    let value = value?;
    let mode = Mode::parse(value.get_ref());
    if mode.is_none() {
        checker.problem(
            value.span().start,
            format!(
                "{key} = {:?}: expected \"never\", \"destructive\" or \"always\"",
                value.get_ref()
            ),
        );
    }
    mode
}
