//! What a server's transitions say on the terminal: one WARN line per transition into
//! `error`, `authRequired` or a crash loop, repeats of one failure summarised, and the
//! secrets of its launch spec blanked out of every message before anyone sees it. Pure.

use super::{AuthReason, Failure, Status};
use crate::spec::Launch;

/// What replaces a secret in a message.
const REDACTED: &str = "[redacted]";
/// Values shorter than this are not treated as secrets (`1`, `on`, `dev` would blank out
/// ordinary words).
const SHORTEST_SECRET: usize = 4;

/// One server's memory of what it last said, to tell a transition from a repeat.
#[derive(Debug, Default)]
pub struct Alerts {
    /// The kind and first line of the last failure warned about, or the last auth demand.
    last: Option<String>,
}

impl Alerts {
    /// The WARN line `status` deserves (without the server's name), or `None` when it is not
    /// a transition into trouble or repeats what was said. `failures` is how many times in a
    /// row the server has failed, this one included (0 when `status` is not a failure).
    pub fn on(&mut self, status: &Status, failures: u32) -> Option<String> {
        match status {
            Status::Starting { .. } => None,
            Status::Ready { .. } => {
                // A server that comes back after failing is news; what it failed with then
                // is not forgotten (a crash loop that passes through `ready` still repeats).
                None
            }
            Status::Stopped => {
                self.last = None;
                None
            }
            Status::AuthRequired {
                resource, reason, ..
            } => {
                let key = format!("auth {reason:?} {resource}");
                if self.last.as_deref() == Some(key.as_str()) {
                    return None;
                }
                self.last = Some(key);
                Some(format!(
                    "needs authorization for {resource}: {}; an AHP client must `authenticate`",
                    match reason {
                        AuthReason::Required => "no token yet",
                        AuthReason::Expired => "its token expired or was refused",
                        AuthReason::InsufficientScope => "its token lacks a required scope",
                    }
                ))
            }
            Status::Error(failure) => {
                let text = failure.to_string();
                let key = format!(
                    "{} {}",
                    failure.kind(),
                    text.lines().next().unwrap_or_default()
                );
                let repeat = self.last.as_deref() == Some(key.as_str());
                self.last = Some(key);
                let crash_loop = matches!(failure, Failure::CrashLoop { .. });
                if !repeat || crash_loop {
                    Some(format!("failed ({}): {text}", failure.kind()))
                } else if failures >= 4 && failures.is_power_of_two() && failures % 3 == 1 {
                    // 4, 16, 64, … times in a row: a reminder, not a line per restart.
                    Some(format!(
                        "failed {failures} times in a row, each time with the same error ({}); still restarting",
                        failure.kind()
                    ))
                } else {
                    None
                }
            }
        }
    }
}

/// The values of a launch spec that must never be shown: env and header values, a bearer
/// token, a URL's credentials and query values, and values of arguments that look like
/// credentials (`--api-key X`, `--token=X`).
#[derive(Debug, Default, Clone)]
pub struct Secrets {
    /// Longest first, so a secret containing another is blanked whole.
    values: Vec<String>,
}

impl Secrets {
    /// The secrets of `launch`, and `token` when there is one.
    pub fn of(launch: &Launch, token: Option<&str>) -> Self {
        let mut values: Vec<String> = Vec::new();
        match launch {
            Launch::Stdio { args, env, .. } => {
                values.extend(env.values().cloned());
                values.extend(secret_args(args));
            }
            Launch::Http { url, headers, .. } => {
                for value in headers.values() {
                    values.push(value.clone());
                    if let Some((_, credential)) = value.split_once(' ') {
                        values.push(credential.trim().to_string());
                    }
                }
                if let Ok(url) = reqwest::Url::parse(url) {
                    values.push(url.username().to_string());
                    values.extend(url.password().map(str::to_string));
                    values.extend(url.query_pairs().map(|(_, v)| v.into_owned()));
                }
            }
        }
        values.extend(token.map(str::to_string));
        values.retain(|v| v.chars().count() >= SHORTEST_SECRET);
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { values }
    }

    /// `text` with every secret replaced by `[redacted]`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        out
    }

    /// `failure` with its text scrubbed.
    pub fn scrub_failure(&self, failure: Failure) -> Failure {
        if self.values.is_empty() {
            return failure;
        }
        failure.map_text(&|text| self.scrub(&text))
    }
}

/// Argument values that look like credentials: `--token=X`, or `X` after `--api-key`.
fn secret_args(args: &[String]) -> Vec<String> {
    let secret_name = |name: &str| {
        let name = name.to_ascii_lowercase();
        [
            "token",
            "key",
            "secret",
            "password",
            "passwd",
            "auth",
            "credential",
        ]
        .iter()
        .any(|word| name.contains(word))
    };
    let mut out = Vec::new();
    let mut after_flag = false;
    for arg in args {
        if after_flag && !arg.starts_with('-') {
            out.push(arg.clone());
        }
        after_flag = false;
        match arg.split_once('=') {
            Some((name, value)) if secret_name(name) => out.push(value.to_string()),
            Some(_) => {}
            None => after_flag = arg.starts_with('-') && secret_name(arg),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn crash(text: &str) -> Status {
        Status::Error(Failure::Exited(text.into()))
    }

    #[test]
    fn one_line_per_transition_and_a_reminder_for_repeats() {
        let mut alerts = Alerts::default();
        assert_eq!(alerts.on(&Status::Starting { slow: false }, 0), None);
        let first = alerts.on(&crash("exited with status 3\nstderr"), 1);
        assert_eq!(
            first.as_deref(),
            Some("failed (exited): exited with status 3\nstderr")
        );
        let said: Vec<u32> = (2..=20)
            .filter(|&n| {
                alerts
                    .on(&crash("exited with status 3\nother"), n)
                    .is_some()
            })
            .collect();
        assert_eq!(said, [4, 16], "reminders only at 4, 16, 64, …");
        // A different failure is news at once, and so is giving up.
        assert!(alerts.on(&crash("exited with status 4"), 21).is_some());
        let gave_up = Status::Error(Failure::CrashLoop {
            failures: 5,
            last: Box::new(Failure::Exited("exited with status 4".into())),
        });
        assert!(alerts
            .on(&gave_up, 5)
            .is_some_and(|t| t.starts_with("failed (crashLoop): failed 5 times")));
        // Stopping forgets: the next failure is a transition again.
        assert_eq!(alerts.on(&Status::Stopped, 0), None);
        assert!(alerts.on(&crash("exited with status 4"), 1).is_some());
    }

    #[test]
    fn an_auth_demand_is_said_once_per_reason() {
        let mut alerts = Alerts::default();
        let auth = |reason| Status::AuthRequired {
            resource: "https://mcp.example.com/mcp".into(),
            challenge: None,
            reason,
            metadata: None,
        };
        let said = alerts.on(&auth(AuthReason::Required), 0).expect("said");
        assert!(said.contains("https://mcp.example.com/mcp"), "{said}");
        assert_eq!(alerts.on(&auth(AuthReason::Required), 0), None);
        assert!(alerts.on(&auth(AuthReason::Expired), 0).is_some());
    }

    #[test]
    fn secrets_of_a_launch_spec_are_blanked() {
        let stdio = Launch::Stdio {
            command: "server".into(),
            args: vec![
                "--api-key".into(),
                "sk-live-1".into(),
                "--token=tok-2".into(),
                "--verbose".into(),
                "run".into(),
            ],
            env: BTreeMap::from([
                ("API".into(), "env-secret".into()),
                ("V".into(), "1".into()),
            ]),
            cwd: None,
        };
        let secrets = Secrets::of(&stdio, None);
        assert_eq!(
            secrets.scrub("bad key sk-live-1, tok-2 and env-secret; run 1"),
            "bad key [redacted], [redacted] and [redacted]; run 1"
        );
        let http = Launch::Http {
            url: "https://me:pass-word@h/mcp?key=q-secret".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer abc123".into())]),
            sse: false,
        };
        let secrets = Secrets::of(&http, Some("client-token"));
        assert_eq!(
            secrets.scrub("abc123 pass-word q-secret client-token me h"),
            "[redacted] [redacted] [redacted] [redacted] me h"
        );
    }
}
