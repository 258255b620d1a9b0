//! Variable expansion in server launch specs: `${PLUGIN_ROOT}`, `${CLAUDE_PLUGIN_ROOT}`,
//! `${PLUGIN_DATA}`, `${VAR}`, `${VAR:-default}`, `${env:VAR}`. Single pass, never recursive.

/// Where `${…}` values come from.
pub struct Vars<'a> {
    /// The plugin folder (or the manifest's folder), absolute.
    pub plugin_root: &'a str,
    /// The plugin's persistent data folder, absolute.
    pub plugin_data: &'a str,
    /// `${workspaceFolder}` for VS Code manifests.
    pub workspace: &'a str,
    /// The environment (the process environment in production).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// A `${…}` that could not be resolved; the server it belongs to goes to `error`.
#[derive(Debug, Clone, PartialEq)]
pub struct Unresolved {
    /// The token as written, e.g. `${ACME_TOKEN}`.
    pub token: String,
    /// Why: "is not set", "prompts are not supported", …
    pub reason: &'static str,
}

/// Expand every `${…}` in `input`. Text that is not a well-formed token stays literal.
pub fn expand(input: &str, vars: &Vars<'_>) -> Result<String, Unresolved> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let body = &after[..close];
        let token = &rest[start..start + 2 + close + 1];
        match resolve(body, vars) {
            Resolution::Value(value) => out.push_str(&value),
            Resolution::Literal => out.push_str(token),
            Resolution::Unset(reason) => {
                return Err(Unresolved {
                    token: token.to_string(),
                    reason,
                })
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

enum Resolution {
    Value(String),
    Literal,
    Unset(&'static str),
}

fn resolve(body: &str, vars: &Vars<'_>) -> Resolution {
    match body {
        "PLUGIN_ROOT" | "CLAUDE_PLUGIN_ROOT" => return Resolution::Value(vars.plugin_root.into()),
        "PLUGIN_DATA" | "CLAUDE_PLUGIN_DATA" => return Resolution::Value(vars.plugin_data.into()),
        "workspaceFolder" => return Resolution::Value(vars.workspace.into()),
        _ => {}
    }
    if body.starts_with("input:") {
        return Resolution::Unset("asks for interactive input, which ahp-proxy cannot prompt for");
    }
    let (name, default) = match body.strip_prefix("env:") {
        Some(name) => (name, None),
        None => match body.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (body, None),
        },
    };
    if !is_name(name) {
        return Resolution::Literal;
    }
    match ((vars.env)(name), default) {
        (Some(value), Some(default)) if value.is_empty() => Resolution::Value(default.into()),
        (Some(value), _) => Resolution::Value(value),
        (None, Some(default)) => Resolution::Value(default.into()),
        (None, None) => Resolution::Unset("is not set"),
    }
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_env(input: &str) -> Result<String, Unresolved> {
        let env = |name: &str| match name {
            "HOME" => Some("/home/me".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        expand(
            input,
            &Vars {
                plugin_root: "/p",
                plugin_data: "/d",
                workspace: "/w",
                env: &env,
            },
        )
    }

    #[test]
    fn every_documented_form_expands() {
        assert_eq!(with_env("${PLUGIN_ROOT}/bin").unwrap(), "/p/bin");
        assert_eq!(with_env("${CLAUDE_PLUGIN_ROOT}/x").unwrap(), "/p/x");
        assert_eq!(with_env("${PLUGIN_DATA}/i").unwrap(), "/d/i");
        assert_eq!(with_env("${CLAUDE_PLUGIN_DATA}").unwrap(), "/d");
        assert_eq!(with_env("${workspaceFolder}/a").unwrap(), "/w/a");
        assert_eq!(with_env("${HOME}").unwrap(), "/home/me");
        assert_eq!(with_env("${env:HOME}/x").unwrap(), "/home/me/x");
        assert_eq!(with_env("${NOPE:-info}").unwrap(), "info");
        assert_eq!(with_env("${HOME:-x}").unwrap(), "/home/me");
        assert_eq!(with_env("${EMPTY:-dflt}").unwrap(), "dflt");
        assert_eq!(with_env("${EMPTY}").unwrap(), "");
        assert_eq!(
            with_env("a ${HOME} b ${PLUGIN_ROOT}").unwrap(),
            "a /home/me b /p"
        );
    }

    #[test]
    fn unset_variables_are_errors_naming_the_token() {
        let error = with_env("Bearer ${TICKETS_TOKEN}").unwrap_err();
        assert_eq!(error.token, "${TICKETS_TOKEN}");
        assert_eq!(error.reason, "is not set");
        assert_eq!(with_env("${env:NOPE}").unwrap_err().token, "${env:NOPE}");
        assert!(with_env("${input:apiKey}")
            .unwrap_err()
            .reason
            .contains("input"));
    }

    #[test]
    fn malformed_tokens_stay_literal_and_nothing_recurses() {
        assert_eq!(with_env("$HOME").unwrap(), "$HOME");
        assert_eq!(with_env("${unclosed").unwrap(), "${unclosed");
        assert_eq!(with_env("${1BAD}").unwrap(), "${1BAD}");
        assert_eq!(with_env("${a b}").unwrap(), "${a b}");
        assert_eq!(with_env("${NOPE:-${HOME}}").unwrap(), "${HOME}");
        assert_eq!(with_env("naïve ${HOME} ☃").unwrap(), "naïve /home/me ☃");
    }
}
