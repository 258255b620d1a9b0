//! Who may use the MCP HTTP front. With an access token in effect (`AHP_PROXY_MCP_TOKEN`,
//! else `mcp.token`), every request to `/mcp` and `/mcp/<server>` (and any other path but
//! `/healthz` and the metadata) must present it as `Authorization: Bearer`, compared in
//! constant time (`crate::bearer`, as the AHP gate does); else `401` with `WWW-Authenticate`
//! naming the protected-resource metadata (RFC 9728, the MCP authorization spec), which is
//! served here too, at `/.well-known/oauth-protected-resource` and its path-suffixed forms.
//! Without a token nothing is asked and there is no metadata. The decisions and the document
//! are pure; the token is never in an answer or a log line.

use http::{HeaderMap, HeaderValue, Response, StatusCode};

use super::http_reply::{json, json_error, plain, Body};
use crate::bearer::{bearer, same};

/// Where the protected-resource metadata is served (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The MCP front's access token, if one is in effect.
#[derive(Default)]
pub struct Auth {
    token: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Auth {{ token: {} }}", self.token.is_some())
    }
}

/// What a request presented, judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It may pass: no token is in effect, or it presented the token.
    Admitted,
    /// No `Authorization: Bearer` header.
    Missing,
    /// A bearer token that is not this endpoint's.
    Wrong,
}

impl Auth {
    /// With `token` in effect (`None`: the front asks for nothing).
    pub fn new(token: Option<String>) -> Self {
        Self { token }
    }

    /// Whether a token is asked for.
    pub fn required(&self) -> bool {
        self.token.is_some()
    }

    /// Judge a request's headers.
    pub fn judge(&self, headers: &HeaderMap) -> Verdict {
        let Some(token) = &self.token else {
            return Verdict::Admitted;
        };
        match bearer(headers) {
            None => Verdict::Missing,
            Some(presented) if same(presented.as_bytes(), token.as_bytes()) => Verdict::Admitted,
            Some(_) => Verdict::Wrong,
        }
    }

    /// The `401` for a request to `path` that did not present the token, `None` when it may
    /// pass. `host` is the request's (checked) `Host`.
    pub fn refuse(&self, headers: &HeaderMap, host: &str, path: &str) -> Option<Response<Body>> {
        let verdict = self.judge(headers);
        if verdict == Verdict::Admitted {
            return None;
        }
        tracing::debug!(
            path,
            ?verdict,
            "MCP HTTP request refused: no valid access token"
        );
        let text = match verdict {
            Verdict::Wrong => "the access token presented is not this MCP endpoint's",
            _ => "this MCP endpoint needs its access token: send `Authorization: Bearer <token>`",
        };
        let mut response = json_error(StatusCode::UNAUTHORIZED, "null", text);
        let challenge = challenge(host, path, verdict == Verdict::Wrong);
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(http::header::WWW_AUTHENTICATE, value);
        }
        Some(response)
    }

    /// The metadata document for the endpoint at `resource` (a path `metadata_for` gave),
    /// on `host`: `404` when no token is in effect (nothing is protected).
    pub fn metadata(&self, host: &str, resource: &str) -> Response<Body> {
        if !self.required() {
            return plain(
                StatusCode::NOT_FOUND,
                "no protected resource here: this MCP endpoint asks for no token\n".into(),
            );
        }
        json(
            StatusCode::OK,
            document(&format!("http://{host}{resource}")),
        )
    }
}

/// The endpoint a metadata request asks about, when `path` is a metadata path: the bare
/// form and `…/mcp` name `/mcp`, `…/mcp/<name>` that endpoint (for any name a server could
/// have, declared or not: which servers there are is not told before the token).
pub fn metadata_for(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(METADATA_PATH)?.trim_end_matches('/');
    match rest {
        "" => Some("/mcp"),
        rest => Some(rest).filter(|r| *r == "/mcp" || endpoint_of(r) == *r),
    }
}

/// The endpoint a request to `path` is for, as the challenge names it: `/mcp` or
/// `/mcp/<server>` when the name could be a server's (`A-Za-z0-9_-.`; whether one is declared
/// is not told before the token), else `/mcp`.
fn endpoint_of(path: &str) -> &str {
    let path = path.trim_end_matches('/');
    let named = path.strip_prefix("/mcp/").is_some_and(|name| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    });
    if named {
        path
    } else {
        "/mcp"
    }
}

/// The `WWW-Authenticate` value for a request to `path` on `host` (RFC 6750 §3, with RFC
/// 9728's `resource_metadata`).
pub fn challenge(host: &str, path: &str, wrong: bool) -> String {
    let endpoint = endpoint_of(path);
    let error = if wrong {
        ", error=\"invalid_token\""
    } else {
        ""
    };
    format!("Bearer resource_metadata=\"http://{host}{METADATA_PATH}{endpoint}\"{error}")
}

/// RFC 9728's protected-resource metadata for the endpoint at `resource` (a URL): the token
/// goes in the header; no authorization server is named (the token is handed out of band).
pub fn document(resource: &str) -> String {
    serde_json::json!({
        "resource": resource,
        "bearer_methods_supported": ["header"],
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_bearer(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn a_token_in_effect_is_asked_of_every_request() {
        let open = Auth::new(None);
        assert_eq!(open.judge(&HeaderMap::new()), Verdict::Admitted);
        let auth = Auth::new(Some("0123456789abcdef".into()));
        assert_eq!(auth.judge(&HeaderMap::new()), Verdict::Missing);
        assert_eq!(
            auth.judge(&with_bearer("Bearer 0123456789abcdef")),
            Verdict::Admitted
        );
        assert_eq!(
            auth.judge(&with_bearer("Bearer 0123456789abcdeF")),
            Verdict::Wrong
        );
        assert_eq!(
            auth.judge(&with_bearer("Basic 0123456789abcdef")),
            Verdict::Missing
        );
        assert!(!format!("{auth:?}").contains("0123456789abcdef"));
    }

    #[test]
    fn metadata_paths_name_their_endpoint() {
        assert_eq!(
            metadata_for("/.well-known/oauth-protected-resource"),
            Some("/mcp")
        );
        assert_eq!(
            metadata_for("/.well-known/oauth-protected-resource/"),
            Some("/mcp")
        );
        assert_eq!(
            metadata_for("/.well-known/oauth-protected-resource/mcp"),
            Some("/mcp")
        );
        assert_eq!(
            metadata_for("/.well-known/oauth-protected-resource/mcp/echo"),
            Some("/mcp/echo")
        );
        assert_eq!(
            metadata_for("/.well-known/oauth-protected-resource/other"),
            None
        );
        assert_eq!(
            metadata_for("/.well-known/oauth-protected-resource/mcp/a/b"),
            None
        );
        assert_eq!(metadata_for("/.well-known/oauth-protected-resourcex"), None);
        assert_eq!(metadata_for("/mcp"), None);
    }

    #[test]
    fn the_challenge_points_at_the_endpoints_metadata() {
        assert_eq!(
            challenge("127.0.0.1:8766", "/mcp", false),
            "Bearer resource_metadata=\"http://127.0.0.1:8766/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(
            challenge("localhost:1", "/mcp/echo/", true),
            "Bearer resource_metadata=\"http://localhost:1/.well-known/oauth-protected-resource/mcp/echo\", error=\"invalid_token\""
        );
        // Nothing of an odd path is echoed.
        for odd in ["/mcp/a%22b", "/elsewhere", "/mcp/", "/mcp/a/b"] {
            assert!(
                challenge("h", odd, false).ends_with("oauth-protected-resource/mcp\""),
                "{odd}"
            );
        }
    }

    #[test]
    fn the_document_names_the_resource_and_the_header() {
        let text = document("http://127.0.0.1:8766/mcp/echo");
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "resource": "http://127.0.0.1:8766/mcp/echo",
                "bearer_methods_supported": ["header"],
            })
        );
        assert!(value.get("authorization_servers").is_none());
    }
}
