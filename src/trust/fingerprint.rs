//! What a server definition would run, as one SHA-256 (trust is keyed to it: any change of
//! command, args, env names or values, cwd, URL or headers asks again), and as people are
//! shown it when asked (command line, cwd, env and header names; never their values). Pure.

use crate::spec::Launch;

/// The fingerprint of `launch`: SHA-256 of a canonical text of everything it would run
/// with, as 64 hex digits.
pub fn fingerprint(launch: &Launch) -> String {
    let canonical = match launch {
        Launch::Stdio {
            command,
            args,
            env,
            cwd,
        } => serde_json::json!(["stdio", command, args, env, cwd]),
        Launch::Http { url, headers, sse } => serde_json::json!(["http", url, headers, sse]),
    };
    // `env` and `headers` are BTreeMaps: their members come out sorted, so equal
    // definitions give equal text.
    let digest = ring::digest::digest(&ring::digest::SHA256, canonical.to_string().as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// `launch` as a person deciding whether to trust it reads it: the command line (each
/// argument quoted when it needs to be), the working folder, and the names of the
/// environment variables or headers it sets (their values may be secrets).
pub fn described(launch: &Launch) -> String {
    match launch {
        Launch::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut line = quoted(command);
            for arg in args {
                line.push(' ');
                line.push_str(&quoted(arg));
            }
            let mut text = format!("runs: {line}");
            if let Some(cwd) = cwd {
                text.push_str(&format!("\nin: {}", cwd.display()));
            }
            if !env.is_empty() {
                let names: Vec<&str> = env.keys().map(String::as_str).collect();
                text.push_str(&format!("\nwith environment: {}", names.join(", ")));
            }
            text
        }
        Launch::Http { url, headers, sse } => {
            let kind = if *sse {
                "legacy SSE"
            } else {
                "streamable HTTP"
            };
            let mut text = format!("connects to: {} ({kind})", without_secrets(url));
            if !headers.is_empty() {
                let names: Vec<&str> = headers.keys().map(String::as_str).collect();
                text.push_str(&format!("\nwith headers: {}", names.join(", ")));
            }
            text
        }
    }
}

/// `word` as a shell would need it to stay one word.
fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

/// A URL without its user, password, query and fragment (where tokens are put).
fn without_secrets(url: &str) -> String {
    let cut = url.find(['?', '#']).map_or(url, |at| &url[..at]);
    match cut.split_once("://") {
        Some((scheme, rest)) => {
            let host_at = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(host_at);
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{scheme}://{host}{path}")
        }
        None => cut.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn stdio(args: &[&str], env: &[(&str, &str)]) -> Launch {
        Launch::Stdio {
            command: "npx".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cwd: None,
        }
    }

    #[test]
    fn any_change_of_what_would_run_changes_the_fingerprint() {
        let base = fingerprint(&stdio(&["-y", "server"], &[("TOKEN", "a")]));
        assert_eq!(base.len(), 64);
        assert_eq!(
            base,
            fingerprint(&stdio(&["-y", "server"], &[("TOKEN", "a")]))
        );
        for other in [
            stdio(&["-y", "server", "--x"], &[("TOKEN", "a")]),
            stdio(&["-y server"], &[("TOKEN", "a")]),
            stdio(&["-y", "server"], &[("TOKEN", "b")]),
            stdio(&["-y", "server"], &[("TOKEN2", "a")]),
            stdio(&["-y", "server"], &[]),
        ] {
            assert_ne!(base, fingerprint(&other), "{}", described(&other));
        }
        let http = |url: &str, header: &str| Launch::Http {
            url: url.into(),
            headers: BTreeMap::from([("Authorization".to_string(), header.to_string())]),
            sse: false,
        };
        let remote = fingerprint(&http("https://h/mcp", "Bearer a"));
        assert_ne!(remote, fingerprint(&http("https://h/mcp", "Bearer b")));
        assert_ne!(remote, fingerprint(&http("https://h/mcp2", "Bearer a")));
    }

    #[test]
    fn people_see_the_command_line_and_names_but_never_values() {
        let shown = described(&stdio(&["-y", "my server", "it's"], &[("TOKEN", "s3cret")]));
        assert_eq!(
            shown,
            "runs: npx -y 'my server' 'it'\\''s'\nwith environment: TOKEN"
        );
        let remote = Launch::Http {
            url: "https://user:pw@example.com/mcp?key=s3cret#x".into(),
            headers: BTreeMap::from([("Authorization".to_string(), "Bearer s3cret".to_string())]),
            sse: false,
        };
        let shown = described(&remote);
        assert_eq!(
            shown,
            "connects to: https://example.com/mcp (streamable HTTP)\nwith headers: Authorization"
        );
        assert!(!shown.contains("s3cret") && !shown.contains("pw"));
    }
}
