//! A modern `tools/call` over HTTP: its `Mcp-Param-*` headers checked against its arguments as
//! the tool's `x-mcp-header` annotations say (`-32020`, 400, when one is missing or differs).

use http::HeaderMap;
use serde_json::{Map, Value};

use super::super::hub::Hub;
use super::super::registry::Scope;
use crate::mcp::era::{self, Problem};
use crate::mcp::message::Message;
use crate::upstream::param_headers;

/// The refusal of a header that does not match.
fn mismatch(what: String) -> Problem {
    Problem {
        code: era::HEADER_MISMATCH,
        status: 400,
        message: format!("Header mismatch: {what}"),
        data: None,
    }
}

/// The `inputSchema` of tool `name` as the endpoint of `scope` lists it: `Some(None)` for a
/// tool whose schema has no `x-mcp-header` annotation (most: not parsed at all).
fn schema(hub: &Hub, scope: &Scope, name: &str) -> Option<Option<Value>> {
    let annotated = |item: &crate::upstream::offer::Item| {
        (item.raw.contains(param_headers::ANNOTATION) || item.raw.contains("\\u"))
            .then(|| item.value(&["inputSchema"]))
            .flatten()
    };
    match scope {
        Scope::All => (hub.namespace().tool(name)).map(|t| annotated(&t.item)),
        Scope::Server(id) => {
            let offer = hub.connections.get(id)?.offer();
            let tool = offer.tools.iter().find(|t| t.key == name)?;
            Some(annotated(tool))
        }
    }
}

/// Whether header value `header` (decoded) says body value `body` (its header form), with
/// integers compared as numbers (`42.0` is `42`).
fn same(header: &str, body: &str, integer: bool) -> bool {
    if header == body {
        return true;
    }
    let number = |s: &str| s.trim().parse::<f64>().ok();
    integer && number(header).is_some() && number(header) == number(body)
}

/// The value at `path` in `arguments`.
fn value_at<'a>(arguments: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    (rest.iter()).fold(arguments.get(first), |at, name| {
        at.and_then(|v| v.get(name))
    })
}

/// Check `message` (a modern request POSTed to the endpoint of `scope`) against the
/// `Mcp-Param-*` of `headers`. Only a `tools/call` of a known tool with annotations is looked
/// at (waiting, like the call would, for servers still starting); a tool the proxy does not
/// know is the server's to refuse.
pub async fn check(
    hub: &Hub,
    scope: &Scope,
    headers: &HeaderMap,
    message: &Message,
) -> Result<(), Problem> {
    if message.method() != Some("tools/call") {
        return Ok(());
    }
    let name = message.string(&["name"]).unwrap_or_default();
    let find = || schema(hub, scope, &name);
    let schema = hub.once_found(find).await.flatten();
    let Some(params) = schema.and_then(|s| param_headers::annotations(&s).ok()) else {
        return Ok(());
    };
    let arguments: Map<String, Value> = (message.find(&["arguments"]))
        .and_then(|span| serde_json::from_str(message.slice(span)).ok())
        .unwrap_or_default();
    for param in &params {
        let header = format!("Mcp-Param-{}", param.header);
        let expected = param_headers::values(std::slice::from_ref(param), &arguments);
        let sent = headers.get(header.as_str());
        let (body, sent) = match (expected.first(), sent) {
            (None, None) => continue,
            (Some(_), None) => return Err(mismatch(format!("the {header} header is missing"))),
            (None, Some(_)) => {
                return Err(mismatch(format!(
                    "the {header} header is sent, but the body has no value for it"
                )))
            }
            (Some((_, body)), Some(sent)) => (body, sent),
        };
        let decoded = sent.to_str().ok().and_then(era::decode_header);
        let Some(decoded) = decoded else {
            return Err(mismatch(format!(
                "the {header} header holds invalid characters or invalid base64"
            )));
        };
        let integer = value_at(&arguments, &param.path).is_some_and(|v| v.is_i64() || v.is_u64());
        if !same(&decoded, body, integer) {
            return Err(mismatch(format!(
                "{header} header value '{decoded}' does not match body value '{body}'"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_compare_as_numbers_strings_as_they_are() {
        assert!(same("42.0", "42", true));
        assert!(!same("42.0", "42", false));
        assert!(!same("43", "42", true));
        assert!(same("us-west1", "us-west1", false));
        assert!(!same("US-WEST1", "us-west1", false));
    }
}
