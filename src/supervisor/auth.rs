//! What an HTTP server's authorization challenge means: the `WWW-Authenticate` parameters,
//! its RFC 9728 protected resource metadata (fetched, bounded), and whether a resource it
//! names is one the server may speak for.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

/// How long fetching resource metadata may take, and how large it may be.
const METADATA_TIMEOUT: Duration = Duration::from_secs(5);
const METADATA_MAX_BYTES: usize = 64 * 1024;

/// `key=value` / `key="value"` parameters of a `WWW-Authenticate: Bearer …` challenge.
pub fn challenge_params(challenge: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let rest = challenge
        .trim()
        .strip_prefix("Bearer")
        .or_else(|| challenge.trim().strip_prefix("bearer"))
        .unwrap_or(challenge);
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied() {
                if c == ',' || c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.insert(key.trim().to_ascii_lowercase(), value);
    }
}

/// The RFC 9728 metadata a challenge points at (`resource_metadata="…"`), when it is on the
/// server's own origin, can be fetched without redirects in time, is a JSON object, and
/// names a `resource` the server at `server_url` may speak for (see [`resource_covers`]).
/// `None` otherwise: the caller shows the server URL as the resource instead, so a server
/// can never have a client hand it a token meant for somewhere else.
pub async fn fetch_metadata(challenge: Option<&str>, server_url: &str) -> Option<Value> {
    let server = reqwest::Url::parse(server_url).ok()?;
    let url = challenge_params(challenge?).remove("resource_metadata")?;
    let url = server.join(&url).ok()?;
    if url.origin() != server.origin() {
        tracing::debug!("resource metadata on another origin ignored");
        return None;
    }
    let client = super::https::client_builder()
        .timeout(METADATA_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let mut response = client.get(url).send().await.ok()?;
    if !response.status().is_success() {
        tracing::debug!(status = %response.status(), "resource metadata not available");
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > METADATA_MAX_BYTES {
            tracing::debug!("resource metadata over {METADATA_MAX_BYTES} bytes ignored");
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    let metadata: Value = serde_json::from_slice(&body).ok()?;
    let resource = metadata.get("resource")?.as_str()?;
    if !resource_covers(resource, &server) {
        tracing::debug!("resource metadata naming another resource ignored");
        return None;
    }
    Some(metadata)
}

/// Whether `resource` (from metadata) may stand for the server at `server`: the same
/// origin, and a path equal to the server's or a parent of it at a segment boundary
/// (`https://h/` and `https://h/v1` cover `https://h/v1/mcp`; `https://h/v` does not).
pub fn resource_covers(resource: &str, server: &reqwest::Url) -> bool {
    let Ok(resource) = reqwest::Url::parse(resource) else {
        return false;
    };
    if resource.origin() != server.origin()
        || resource.query().is_some()
        || resource.fragment().is_some()
        || !resource.username().is_empty()
        || resource.password().is_some()
    {
        return false;
    }
    let parent = resource.path().trim_end_matches('/');
    let path = server.path();
    path == resource.path()
        || path.trim_end_matches('/') == parent
        || path
            .strip_prefix(parent)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters_quoted_or_not() {
        let params = challenge_params(
            r#"Bearer resource_metadata="http://h/.well-known/oauth-protected-resource", scope="a b", error=invalid_token"#,
        );
        assert_eq!(
            params["resource_metadata"],
            "http://h/.well-known/oauth-protected-resource"
        );
        assert_eq!(params["scope"], "a b");
        assert_eq!(params["error"], "invalid_token");
        assert!(challenge_params("Bearer").is_empty());
        assert_eq!(challenge_params(r#"Bearer realm="a\"b""#)["realm"], "a\"b");
    }

    #[test]
    fn metadata_resource_must_be_the_server_or_a_parent_of_it() {
        let server = reqwest::Url::parse("https://h.example:8443/v1/mcp?k=1").unwrap();
        for ok in [
            "https://h.example:8443/v1/mcp",
            "https://h.example:8443/v1/mcp/",
            "https://h.example:8443/v1",
            "https://h.example:8443/",
            "https://h.example:8443",
        ] {
            assert!(resource_covers(ok, &server), "{ok}");
        }
        for refused in [
            "https://h.example/v1/mcp",
            "http://h.example:8443/v1/mcp",
            "https://evil.example:8443/v1/mcp",
            "https://h.example:8443/v",
            "https://h.example:8443/v1/mcp/deeper",
            "https://h.example:8443/v1/mcp?k=1",
            "https://u@h.example:8443/v1/mcp",
            "not a url",
        ] {
            assert!(!resource_covers(refused, &server), "{refused}");
        }
    }
}
