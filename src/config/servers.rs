//! `[servers.<name>]`: a server's name, the range of its declaration, and its launch spec
//! (exactly one of `command` for stdio or `url` for HTTP, with the keys that go with each).

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::checker::Checker;
use super::paths::Resolver;
use super::raw::RawServer;
use super::settings::ServerConfig;
use crate::spec::{Launch, ToolFilters};

/// Every `[servers.<name>]`, in name order; invalid ones are problems and left out.
pub(super) fn servers(
    checker: &mut Checker<'_>,
    raw: BTreeMap<Spanned<String>, Spanned<RawServer>>,
    resolver: &Resolver<'_>,
) -> Vec<ServerConfig> {
    raw.into_iter()
        .filter_map(|(name, server)| {
            let at = name.span().start;
            server_config(checker, name.into_inner(), at, server, resolver)
        })
        .collect()
}

fn server_config(
    checker: &mut Checker<'_>,
    name: String,
    name_at: usize,
    server: Spanned<RawServer>,
    resolver: &Resolver<'_>,
) -> Option<ServerConfig> {
    let before = checker.problem_count();
    if !is_server_name(&name) {
        checker.problem(
            name_at,
            format!(
                "servers.{name:?}: a server name may only use letters, digits, '-', '_' and '.'"
            ),
        );
    }
    let declared_at = checker.location(name_at);
    let range = checker.range(name_at, table_end(checker.text, server.span()));
    let at = server.span().start;
    let mut raw = server.into_inner();
    let kind = server_type(checker, &name, raw.kind.take());
    let transport = match (raw.command.take(), raw.url.take()) {
        (Some(_), Some(url)) => {
            checker.problem(
                url.span().start,
                format!("servers.{name}: set either `command` (stdio) or `url` (http), not both"),
            );
            None
        }
        (None, None) => {
            checker.problem(
                at,
                format!("servers.{name}: missing `command` (for a stdio server) or `url` (for an http server)"),
            );
            None
        }
        (Some(command), None) => Some(stdio(checker, &name, at, kind, command, &mut raw, resolver)),
        (None, Some(url)) => Some(http(checker, &name, at, kind, url, &mut raw)),
    };
    if checker.problem_count() > before {
        return None;
    }
    Some(ServerConfig {
        name,
        enabled: raw.enabled,
        transport: transport?,
        tools: ToolFilters {
            disabled: raw.disabled_tools,
            include: raw.include_tools,
            exclude: raw.exclude_tools,
            pre_approved: [raw.always_allow, raw.auto_approve].concat(),
        },
        declared_at,
        range,
    })
}

/// Letters, digits, `-`, `_` and `.`; not empty.
fn is_server_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `type`, when written and one of `stdio`, `http`, `sse`.
fn server_type(
    checker: &mut Checker<'_>,
    name: &str,
    kind: Option<Spanned<String>>,
) -> Option<String> {
    let kind = kind?;
    match kind.get_ref().as_str() {
        "stdio" | "http" | "sse" => Some(kind.into_inner()),
        other => {
            checker.problem(
                kind.span().start,
                format!(
                    "servers.{name}.type = {other:?} is not a server type: expected \"stdio\", \"http\" or \"sse\""
                ),
            );
            None
        }
    }
}

/// A server with `command`.
fn stdio(
    checker: &mut Checker<'_>,
    name: &str,
    at: usize,
    kind: Option<String>,
    command: Spanned<String>,
    raw: &mut RawServer,
    resolver: &Resolver<'_>,
) -> Launch {
    if let Some(kind @ ("http" | "sse")) = kind.as_deref() {
        checker.problem(
            command.span().start,
            format!("servers.{name}: a {kind} server takes `url`, not `command`"),
        );
    }
    if command.get_ref().trim().is_empty() {
        checker.problem(
            command.span().start,
            format!("servers.{name}.command is empty"),
        );
    }
    if !raw.headers.is_empty() {
        checker.problem(
            at,
            format!("servers.{name}: `headers` only apply to http servers"),
        );
    }
    Launch::Stdio {
        command: command.into_inner(),
        args: std::mem::take(&mut raw.args),
        env: std::mem::take(&mut raw.env),
        cwd: raw.cwd.as_deref().map(|cwd| resolver.resolve(cwd)),
    }
}

/// A server with `url`.
fn http(
    checker: &mut Checker<'_>,
    name: &str,
    at: usize,
    kind: Option<String>,
    url: Spanned<String>,
    raw: &mut RawServer,
) -> Launch {
    if kind.as_deref() == Some("stdio") {
        checker.problem(
            url.span().start,
            format!("servers.{name}: a stdio server takes `command`, not `url`"),
        );
    }
    let value = url.get_ref();
    if !(value.starts_with("http://") || value.starts_with("https://")) {
        checker.problem(
            url.span().start,
            format!("servers.{name}.url = {value:?} must start with http:// or https://"),
        );
    }
    if !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
        checker.problem(
            at,
            format!("servers.{name}: `args`, `env` and `cwd` only apply to stdio servers"),
        );
    }
    Launch::Http {
        url: url.into_inner(),
        headers: std::mem::take(&mut raw.headers),
        sse: kind.as_deref() == Some("sse"),
    }
}

/// Where a server's declaration ends. toml spans a `[servers.x]` table as just its header,
/// so for that form the table runs to the last key line before the next header.
fn table_end(text: &str, span: Range<usize>) -> usize {
    if !text.get(span.clone()).is_some_and(|t| t.starts_with('[')) {
        return span.end;
    }
    let line_start = text[..span.end].rfind('\n').map_or(0, |i| i + 1);
    let mut end = span.end;
    let mut pos = line_start;
    for (n, line) in text[line_start..].split_inclusive('\n').enumerate() {
        let trimmed = line.trim();
        if n > 0 && trimmed.starts_with('[') {
            break;
        }
        if n > 0 && !trimmed.is_empty() && !trimmed.starts_with('#') {
            end = pos + line.trim_end().len();
        }
        pos += line.len();
    }
    end
}
