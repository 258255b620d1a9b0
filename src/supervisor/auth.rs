//! What an HTTP server's authorization challenge means: the `WWW-Authenticate` parameters,
//! its RFC 9728 protected resource metadata (fetched, bounded), and auth failures of a
//! running connection told apart from other transport errors.

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

/// The RFC 9728 metadata a challenge points at (`resource_metadata="…"`), when it can be
/// fetched over plain HTTP in time and is a JSON object with a string `resource`. `None`
/// otherwise: the caller shows the server URL as the resource instead.
pub async fn fetch_metadata(challenge: Option<&str>) -> Option<Value> {
    let url = challenge_params(challenge?).remove("resource_metadata")?;
    let client = reqwest::Client::builder()
        .timeout(METADATA_TIMEOUT)
        .build()
        .ok()?;
    let mut response = client.get(&url).send().await.ok()?;
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
    metadata
        .get("resource")
        .is_some_and(Value::is_string)
        .then_some(metadata)
}

/// If `error` (or anything it wraps) is an HTTP 401 or 403 from the server: the
/// `WWW-Authenticate` challenge and whether it was 403 (more scope needed).
pub fn auth_failure(error: &(dyn std::error::Error + 'static)) -> Option<(String, bool)> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(e) = e.downcast_ref::<AuthRequiredError>() {
            return Some((e.www_authenticate_header.clone(), false));
        }
        if let Some(e) = e.downcast_ref::<InsufficientScopeError>() {
            return Some((e.www_authenticate_header.clone(), true));
        }
        current = e.source();
    }
    None
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
}
