//! Variable expansion in server launch specs: `${PLUGIN_ROOT}`, `${CLAUDE_PLUGIN_ROOT}`,
//! `${PLUGIN_DATA}`, `${VAR}`, `${VAR:-default}`, `${env:VAR}`, and VS Code's and Cursor's
//! `${workspaceFolder}`, `${workspaceFolderBasename}`, `${userHome}`, `${cwd}`,
//! `${pathSeparator}` (`${/}`) and `${input:id}`. Single pass, never recursive.

use crate::spec::LaunchError;

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
    /// Why, and what to do about it: "is not set", …
    pub reason: String,
}

/// The environment variable that answers `${input:<id>}`: `AHP_PROXY_INPUT_` and the id in
/// upper case, every character but letters and digits as `_` (`api-key` →
/// `AHP_PROXY_INPUT_API_KEY`). The `[inputs]` table of proxy.toml answers it too.
pub fn input_variable(id: &str) -> String {
    let id: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{INPUT_PREFIX}{id}")
}

/// What [`input_variable`] puts before the id.
pub const INPUT_PREFIX: &str = "AHP_PROXY_INPUT_";

/// The lookup name that answers `${cwd}` (the proxy's working directory).
pub const CWD_VARIABLE: &str = "AHP_PROXY_CWD";

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

/// `text` of a launch spec's `field`, expanded; the error names the token, why, and the
/// field (`${TOKEN} is not set (used in the server's env)`).
pub fn expand_field(
    field: &'static str,
    text: &str,
    vars: &Vars<'_>,
) -> Result<String, LaunchError> {
    expand(text, vars).map_err(|u| LaunchError::unexpanded(field, u.token, u.reason))
}

/// A remote server's launch spec (`url`, `headers`), expanded.
pub fn expand_remote(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    sse: bool,
    vars: &Vars<'_>,
) -> Result<crate::spec::Launch, LaunchError> {
    Ok(crate::spec::Launch::Http {
        url: expand_field("url", url, vars)?,
        headers: headers
            .iter()
            .map(|(k, v)| Ok((k.clone(), expand_field("headers", v, vars)?)))
            .collect::<Result<_, LaunchError>>()?,
        sse,
    })
}

enum Resolution {
    Value(String),
    Literal,
    Unset(String),
}

fn resolve(body: &str, vars: &Vars<'_>) -> Resolution {
    let lookup = |name: &str| (vars.env)(name);
    match body {
        "PLUGIN_ROOT" | "CLAUDE_PLUGIN_ROOT" => return Resolution::Value(vars.plugin_root.into()),
        "PLUGIN_DATA" | "CLAUDE_PLUGIN_DATA" => return Resolution::Value(vars.plugin_data.into()),
        "workspaceFolder" => return Resolution::Value(vars.workspace.into()),
        "workspaceFolderBasename" => {
            let base = std::path::Path::new(vars.workspace)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            return Resolution::Value(base.unwrap_or_default());
        }
        "pathSeparator" | "/" => return Resolution::Value(std::path::MAIN_SEPARATOR_STR.into()),
        "userHome" => {
            return match lookup("HOME") {
                Some(home) => Resolution::Value(home),
                None => Resolution::Unset("is not known (HOME is not set)".into()),
            }
        }
        "cwd" => return Resolution::Value(lookup(CWD_VARIABLE).unwrap_or_else(|| ".".into())),
        _ => {}
    }
    if let Some(id) = body.strip_prefix("input:") {
        let variable = input_variable(id);
        return match lookup(&variable) {
            Some(value) => Resolution::Value(value),
            None => Resolution::Unset(format!(
                "asks for input ahp-proxy cannot prompt for: answer it in proxy.toml (`[inputs]` with {} = \"…\") or in the environment ({variable}=…)",
                toml_key(id)
            )),
        };
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
        (None, None) => Resolution::Unset("is not set".into()),
    }
}

/// `id` as a TOML key: bare when it can be, else quoted.
fn toml_key(id: &str) -> String {
    if !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        id.to_string()
    } else {
        format!("{id:?}")
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
            "AHP_PROXY_INPUT_API_KEY" => Some("k-1".to_string()),
            CWD_VARIABLE => Some("/started/here".to_string()),
            _ => None,
        };
        expand(
            input,
            &Vars {
                plugin_root: "/p",
                plugin_data: "/d",
                workspace: "/work/space",
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
        assert_eq!(with_env("${workspaceFolder}/a").unwrap(), "/work/space/a");
        assert_eq!(with_env("${workspaceFolderBasename}").unwrap(), "space");
        assert_eq!(
            with_env("${userHome}${/}x${pathSeparator}y").unwrap(),
            "/home/me/x/y"
        );
        assert_eq!(with_env("${cwd}").unwrap(), "/started/here");
        assert_eq!(with_env("${input:api-key}").unwrap(), "k-1");
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
        let unanswered = with_env("${input:token}").unwrap_err().reason;
        assert!(
            unanswered.ends_with("answer it in proxy.toml (`[inputs]` with token = \"…\") or in the environment (AHP_PROXY_INPUT_TOKEN=…)"),
            "{unanswered}"
        );
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
