//! Who may open an AHP connection: the access token, the `Origin` (browsers) and the
//! `Host` (DNS rebinding), all checked during the WebSocket upgrade, before any frame.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;

use crate::authority::{host_name, well_formed_host};
use crate::config::{normalize_origin, AhpConfig};
use crate::untrusted::Untrusted;

/// The checks for one listening address.
#[derive(Debug)]
pub struct Gate {
    token: Option<String>,
    /// Accepted origins besides loopback ones, normalized; `"*"` accepts any.
    origins: Vec<String>,
    /// Accepted `Host` names (without port); `None` accepts any (a non-loopback listener,
    /// which needs a token anyway).
    hosts: Option<Vec<String>>,
}

/// Why an upgrade was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No token, or the wrong one (HTTP 401).
    Token,
    /// An `Origin` that is not allowed (HTTP 403).
    Origin(String),
    /// A `Host` that is not this server's (HTTP 403).
    Host(String),
    /// More than one `Origin` header, however the first reads (HTTP 403).
    Origins(usize),
    /// No `Host`, more than one, or one that is not `name[:port]` (HTTP 400).
    BadHost(String),
}

impl Refusal {
    /// The HTTP status of the refused upgrade.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Token => 401,
            Refusal::Origin(_) | Refusal::Host(_) | Refusal::Origins(_) => 403,
            Refusal::BadHost(_) => 400,
        }
    }

    /// What the refused client is told (never the token).
    pub fn message(&self) -> String {
        match self {
            Refusal::Token => "this AHP endpoint needs its access token: send `Authorization: Bearer <token>`, `?token=<token>` or `?tkn=<token>`".into(),
            Refusal::Origin(origin) => format!(
                "origin {:?} may not open AHP connections here (add it to ahp.allowed_origins)",
                Untrusted(origin)
            ),
            Refusal::Host(host) => format!(
                "host {:?} is not this AHP endpoint (add it to ahp.allowed_hosts)",
                Untrusted(host)
            ),
            Refusal::Origins(count) => {
                format!("{count} Origin headers; a browser sends one")
            }
            Refusal::BadHost(why) => format!("bad Host header: {why}"),
        }
    }
}

impl Gate {
    /// The gate for a listener bound to `bound`, with the token in effect (`token`: the
    /// environment's or the config's).
    pub fn new(config: &AhpConfig, token: Option<String>, bound: SocketAddr) -> Self {
        let hosts = bound.ip().is_loopback().then(|| {
            let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
            hosts.push(bound.ip().to_string());
            hosts.extend(config.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
            hosts
        });
        Self {
            token,
            origins: config.allowed_origins.clone(),
            hosts,
        }
    }

    /// Check an upgrade request's headers and URI.
    pub fn check(&self, headers: &HeaderMap, uri: &http::Uri) -> Result<(), Refusal> {
        self.check_site(headers)?;
        if let Some(expected) = &self.token {
            let presented = bearer(headers)
                .map(str::to_string)
                .or_else(|| query_token(uri));
            if !presented.is_some_and(|p| same(p.as_bytes(), expected.as_bytes())) {
                return Err(Refusal::Token);
            }
        }
        Ok(())
    }

    /// The `Host` and `Origin` checks alone: for the console's pages, which carry no
    /// secret (the page asks for the token and presents it on its WebSocket).
    pub fn check_site(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = single_host(headers)?;
        if let Some(hosts) = &self.hosts {
            let name = host_name(host).to_ascii_lowercase();
            if !hosts.contains(&name) {
                return Err(Refusal::Host(host.to_string()));
            }
        }
        // One page, one origin: a second header is not a choice between two.
        let origins = headers.get_all(http::header::ORIGIN).iter().count();
        if origins > 1 {
            return Err(Refusal::Origins(origins));
        }
        if let Some(origin) = headers.get(http::header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("<not text>");
            let allowed = self.origins.iter().any(|o| o == "*")
                || normalize_origin(origin).is_some_and(|o| {
                    is_loopback_origin(&o)
                        || self.origins.contains(&o)
                        || is_own_origin(&o, Some(host))
                });
            if !allowed {
                return Err(Refusal::Origin(origin.to_string()));
            }
        }
        Ok(())
    }
}

/// The endpoint's own origin (its console page), the `Host` the request was sent to: on a
/// loopback listener that `Host` has passed the host check; elsewhere the token still guards.
fn is_own_origin(origin: &str, host: Option<&str>) -> bool {
    let (Some((scheme, _)), Some(host)) = (origin.split_once("://"), host) else {
        return false;
    };
    normalize_origin(&format!("{scheme}://{host}")).is_some_and(|own| own == origin)
}

/// The request's one `Host` header, when it is well formed (RFC 9112 §3.2: exactly one,
/// `host[:port]`); anything else is refused whatever the listener, so no check downstream
/// sees two names or a name with a path, credentials or spaces glued to it.
fn single_host(headers: &HeaderMap) -> Result<&str, Refusal> {
    let mut all = headers.get_all(http::header::HOST).iter();
    let (Some(value), None) = (all.next(), all.next()) else {
        let count = headers.get_all(http::header::HOST).iter().count();
        return Err(Refusal::BadHost(if count == 0 {
            "none sent".into()
        } else {
            format!("{count} sent, one expected")
        }));
    };
    let text = value
        .to_str()
        .map_err(|_| Refusal::BadHost("not ASCII text".into()))?;
    if well_formed_host(text) {
        Ok(text)
    } else {
        Err(Refusal::BadHost(format!(
            "{:?} is not host[:port]",
            Untrusted(text)
        )))
    }
}

/// An origin served from this machine (`http://localhost:3000`, `http://127.0.0.1`, …).
fn is_loopback_origin(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    if scheme != "http" && scheme != "https" {
        return false;
    }
    let name = host_name(rest);
    well_formed_host(rest)
        && (name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// `token=` in the query (for browsers, which cannot set headers on a WebSocket), or
/// `tkn=`, where VS Code puts it (`connectionTokenQueryName`, its base/common/network.ts).
fn query_token(uri: &http::Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|pair| {
            pair.strip_prefix("token=").or_else(|| {
                pair.strip_prefix(VSCODE_TOKEN_PARAMETER)
                    .and_then(|p| p.strip_prefix('='))
            })
        })
        .map(percent_decode)
}

/// The query parameter VS Code sends the connection token in.
pub const VSCODE_TOKEN_PARAMETER: &str = "tkn";

/// The URL to paste into VS Code's **Agents: Add Remote Agent Host…** for the AHP endpoint
/// at `ahp_url`: the token, when one is needed, in `tkn` (VS Code takes it out of the pasted
/// URL and sends it there on every connection).
pub fn vscode_url(ahp_url: &str, token: Option<&str>) -> String {
    match token {
        None => ahp_url.to_string(),
        Some(token) => {
            let escaped: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
            let authority_only = ahp_url
                .split_once("://")
                .is_some_and(|(_, rest)| !rest.contains(['/', '?']));
            let base = if authority_only {
                format!("{ahp_url}/")
            } else {
                ahp_url.to_string()
            };
            let separator = if base.contains('?') { '&' } else { '?' };
            format!("{base}{separator}{VSCODE_TOKEN_PARAMETER}={escaped}")
        }
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Equal, in time that depends only on the lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(origins: &[&str], hosts: &[&str]) -> AhpConfig {
        AhpConfig {
            listen: "127.0.0.1:8765".parse().unwrap(),
            views_port: 0,
            token: None,
            allowed_origins: origins
                .iter()
                .map(|o| normalize_origin(o).unwrap())
                .collect(),
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn request(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    fn uri(text: &str) -> http::Uri {
        text.parse().unwrap()
    }

    #[test]
    fn loopback_listeners_accept_only_their_own_host_names() {
        let gate = Gate::new(
            &config(&[], &["ahp.lan"]),
            None,
            "127.0.0.1:8765".parse().unwrap(),
        );
        let root = uri("/");
        for ok in ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "AHP.lan"] {
            assert_eq!(gate.check(&request(&[("host", ok)]), &root), Ok(()), "{ok}");
        }
        for refused in ["evil.example:8765", "127.0.0.2.evil:1"] {
            assert_eq!(
                gate.check(&request(&[("host", refused)]), &root),
                Err(Refusal::Host(refused.to_string())),
                "{refused}"
            );
        }
        // Malformed, missing or repeated: 400, on any listener.
        for malformed in [
            "",
            "localhost:abc",
            "localhost:8765:1",
            "localhost:",
            "localhost:99999",
            "user@localhost",
            "localhost/x",
            "localhost 127.0.0.1",
            "[::1",
            "[::1]x",
            "[nope]:1",
        ] {
            let refusal = gate.check(&request(&[("host", malformed)]), &root);
            assert!(
                matches!(refusal, Err(Refusal::BadHost(_))),
                "{malformed:?}: {refusal:?}"
            );
            assert_eq!(refusal.unwrap_err().status(), 400);
        }
        assert!(matches!(
            gate.check(&HeaderMap::new(), &root),
            Err(Refusal::BadHost(_))
        ));
        let mut twice = request(&[("host", "localhost:8765")]);
        twice.append(http::header::HOST, "evil.example".parse().unwrap());
        assert!(matches!(
            gate.check(&twice, &root),
            Err(Refusal::BadHost(_))
        ));
        // Non-loopback listeners (token required) take any Host.
        let open = Gate::new(
            &config(&[], &[]),
            Some("t".repeat(16)),
            "0.0.0.0:8765".parse().unwrap(),
        );
        let token = format!("Bearer {}", "t".repeat(16));
        assert_eq!(
            open.check(
                &request(&[("host", "box.lan:8765"), ("authorization", &token)]),
                &root
            ),
            Ok(())
        );
        assert!(matches!(
            open.check(
                &request(&[("host", "box.lan:8765/x"), ("authorization", &token)]),
                &root
            ),
            Err(Refusal::BadHost(_))
        ));
    }

    #[test]
    fn browsers_need_a_loopback_or_listed_origin() {
        let gate = Gate::new(
            &config(&["https://App.Example"], &[]),
            None,
            "127.0.0.1:8765".parse().unwrap(),
        );
        let root = uri("/");
        let host = ("host", "127.0.0.1:8765");
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "http://[::1]:5173",
            "https://app.example",
            "https://app.example/",
        ] {
            assert_eq!(
                gate.check(&request(&[host, ("origin", ok)]), &root),
                Ok(()),
                "{ok}"
            );
        }
        for refused in [
            "http://evil.example",
            "http://localhost.evil.example",
            "null",
            "file://",
            "https://app.example:8443",
        ] {
            assert!(matches!(
                gate.check(&request(&[host, ("origin", refused)]), &root),
                Err(Refusal::Origin(_))
            ));
        }
        // The endpoint's own origin (the console's page), wherever it is served.
        let lan = Gate::new(
            &config(&[], &[]),
            Some("t".repeat(16)),
            "0.0.0.0:8765".parse().unwrap(),
        );
        let own = [("host", "box.lan:8765"), ("origin", "http://box.lan:8765")];
        assert_eq!(lan.check_site(&request(&own)), Ok(()));
        let other = [("host", "box.lan:8765"), ("origin", "http://box.lan:9999")];
        assert!(matches!(
            lan.check_site(&request(&other)),
            Err(Refusal::Origin(_))
        ));
        // No Origin: not a browser, not this check's business.
        assert_eq!(gate.check(&request(&[host]), &root), Ok(()));
        let any = Gate::new(
            &config(&["*"], &[]),
            None,
            "127.0.0.1:8765".parse().unwrap(),
        );
        assert_eq!(
            any.check(&request(&[host, ("origin", "http://evil.example")]), &root),
            Ok(())
        );
    }

    #[test]
    fn the_token_comes_as_a_bearer_header_or_a_query_parameter() {
        let token = "s3cret-token-0123456789";
        let gate = Gate::new(
            &config(&[], &[]),
            Some(token.into()),
            "127.0.0.1:8765".parse().unwrap(),
        );
        let host = ("host", "localhost:8765");
        let bearer = format!("Bearer {token}");
        assert_eq!(
            gate.check(&request(&[host, ("authorization", &bearer)]), &uri("/")),
            Ok(())
        );
        assert_eq!(
            gate.check(
                &request(&[host]),
                &uri("/?x=1&token=s3cret%2Dtoken-0123456789")
            ),
            Ok(())
        );
        for (headers, at) in [
            (request(&[host]), "/"),
            (request(&[host, ("authorization", "Bearer wrong")]), "/"),
            (request(&[host, ("authorization", token)]), "/"),
            (request(&[host]), "/?token=s3cret-token-012345678"),
            (request(&[host]), "/?token=%"),
        ] {
            assert_eq!(gate.check(&headers, &uri(at)), Err(Refusal::Token), "{at}");
        }
        assert!(!Refusal::Token.message().contains(token));
        // VS Code's parameter, escaped as `encodeURIComponent` escapes it.
        assert_eq!(
            gate.check(&request(&[host]), &uri("/?tkn=s3cret-token-0123456789")),
            Ok(())
        );
        assert_eq!(
            gate.check(&request(&[host]), &uri("/?tkn=s3cret-token")),
            Err(Refusal::Token)
        );
        assert_eq!(
            gate.check(&request(&[host]), &uri("/?tknx=s3cret-token-0123456789")),
            Err(Refusal::Token)
        );
    }

    #[test]
    fn the_vscode_url_carries_the_token_escaped_in_tkn() {
        assert_eq!(
            vscode_url("ws://127.0.0.1:8765", None),
            "ws://127.0.0.1:8765"
        );
        let url = vscode_url("ws://127.0.0.1:8765", Some("a+b/c=d e"));
        assert_eq!(url, "ws://127.0.0.1:8765/?tkn=a%2Bb%2Fc%3Dd+e");
        // What the gate reads back is the token.
        let parsed: http::Uri = url
            .trim_start_matches("ws://127.0.0.1:8765")
            .parse()
            .unwrap();
        assert_eq!(query_token(&parsed).as_deref(), Some("a+b/c=d e"));
    }
}
