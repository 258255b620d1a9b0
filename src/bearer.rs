//! An access token presented as `Authorization: Bearer <token>`, shared by the AHP gate and
//! the MCP front so both admit the same way: reading the header, comparing in constant time,
//! what a token must look like (16+ characters, no spaces or control characters), which
//! listening addresses need one (anything but loopback), and the token in effect for a
//! listener (its environment variable, else its config key; none beyond loopback refuses to
//! start). Pure; no message here ever holds a token.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;

/// The `Authorization: Bearer` value, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Equal, in time that depends only on the lengths.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a token must be: at least 16 characters, none of them a space or a control character.
pub fn well_formed(token: &str) -> bool {
    token.len() >= 16 && !token.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Whether a listener on `ip` needs a token to start: anything but loopback (`127.0.0.0/8`,
/// `::1`); `0.0.0.0` and `::` reach every interface.
pub fn needs_token(ip: IpAddr) -> bool {
    !ip.is_loopback()
}

/// Where one listener's token comes from, for the messages that name them.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    /// What is served, as the refusal says it (`AHP`, `MCP over HTTP`).
    pub face: &'static str,
    /// The environment variable, which wins.
    pub env: &'static str,
    /// The config key.
    pub key: &'static str,
}

/// The token in effect for a listener on `listen` (`None`: no listener): `from_env` (the
/// variable's value, empty meaning unset; checked here, as the config checks its key),
/// else `from_config`. Refused, naming the variable and the key, when the listener is not on
/// loopback and there is none.
pub fn in_effect(
    source: Source,
    from_env: Option<String>,
    from_config: Option<&str>,
    listen: Option<SocketAddr>,
) -> Result<Option<String>, String> {
    let from_env = from_env.filter(|t| !t.is_empty());
    if from_env.as_deref().is_some_and(|t| !well_formed(t)) {
        return Err(format!(
            "{} must be at least 16 characters, without spaces or control characters",
            source.env
        ));
    }
    let token = from_env.or_else(|| from_config.map(str::to_string));
    match listen {
        Some(listen) if token.is_none() && needs_token(listen.ip()) => Err(format!(
            "refusing to serve {} on {listen}, which is not a loopback address, without an access token: set {} (or {} in the config), or listen on 127.0.0.1",
            source.face, source.env, source.key
        )),
        _ => Ok(token),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MCP: Source = Source {
        face: "MCP over HTTP",
        env: "AHP_PROXY_MCP_TOKEN",
        key: "mcp.token",
    };

    #[test]
    fn only_loopback_goes_without_a_token() {
        for ip in ["127.0.0.1", "127.1.2.3", "::1"] {
            assert!(!needs_token(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "0.0.0.0",
            "::",
            "192.168.1.5",
            "10.0.0.1",
            "::ffff:127.0.0.1",
            "fe80::1",
        ] {
            assert!(needs_token(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn the_environment_wins_and_beyond_loopback_a_token_is_required() {
        let lan = "0.0.0.0:8766".parse().ok();
        let local = "127.0.0.1:8766".parse().ok();
        let env = Some("from-the-environment".to_string());
        let file = Some("from-the-config-file");
        assert_eq!(
            in_effect(MCP, env.clone(), file, lan).unwrap().as_deref(),
            Some("from-the-environment")
        );
        assert_eq!(
            in_effect(MCP, Some(String::new()), file, lan)
                .unwrap()
                .as_deref(),
            Some("from-the-config-file")
        );
        assert_eq!(in_effect(MCP, None, None, local).unwrap(), None);
        assert_eq!(in_effect(MCP, None, None, None).unwrap(), None);
        let refused = in_effect(MCP, None, None, lan).unwrap_err();
        assert!(refused.contains("AHP_PROXY_MCP_TOKEN"), "{refused}");
        assert!(refused.contains("mcp.token"), "{refused}");
        assert!(refused.contains("0.0.0.0:8766"), "{refused}");
        let short = in_effect(MCP, Some("short secret".into()), None, local).unwrap_err();
        assert!(!short.contains("short secret"), "{short}");
        assert!(short.contains("AHP_PROXY_MCP_TOKEN"), "{short}");
    }

    #[test]
    fn a_bearer_header_is_read_and_compared_whole() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("bearer  abc "),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Basic abc"),
        );
        assert_eq!(bearer(&headers), None);
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}
