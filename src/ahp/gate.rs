//! Who may open an AHP connection: the access token, the `Origin` (browsers; never the View
//! origin's) and the `Host` (DNS rebinding), all checked during the WebSocket upgrade, before
//! any frame; and whether the connection may decide held tool calls (it presented the
//! approval key, `approvers`, the way a token is presented).

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;

use super::presented::query_token;
use crate::authority::{host_name, well_formed_host};
use crate::bearer::{bearer, same};
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
    /// The approval key (the token when one is in effect); `None`: nobody decides.
    key: Option<String>,
    /// The View origin's port: an upgrade from that origin is refused.
    view_port: Option<u16>,
}

/// What a connection that passed the gate may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// It presented the approval key: it may approve, deny and review held calls.
    Decider,
    /// It did not: it sees everything and steers as before, but decides nothing held.
    Observer,
}

impl Standing {
    /// Whether it may decide held calls and reviewed results.
    pub fn decides(self) -> bool {
        self == Standing::Decider
    }
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
    /// The View origin, where MCP Apps' HTML runs: it never connects (HTTP 403).
    ViewOrigin(String),
    /// No `Host`, more than one, or one that is not `name[:port]` (HTTP 400).
    BadHost(String),
}

impl Refusal {
    /// The HTTP status of the refused upgrade.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Token => 401,
            Refusal::Origin(_)
            | Refusal::Host(_)
            | Refusal::Origins(_)
            | Refusal::ViewOrigin(_) => 403,
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
            Refusal::ViewOrigin(origin) => format!(
                "origin {:?} is the View origin, where MCP Apps' HTML runs: it never opens AHP connections",
                Untrusted(origin)
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
            key: token.clone(),
            token,
            origins: config.allowed_origins.clone(),
            hosts,
            view_port: None,
        }
    }

    /// The approval key connections present to decide held calls, when no token is in
    /// effect (with one, the token is the key and this changes nothing).
    pub fn with_approval_key(mut self, key: &str) -> Self {
        if self.token.is_none() {
            self.key = Some(key.to_string());
        }
        self
    }

    /// The View origin's port: upgrades from that origin are refused.
    pub fn with_view_port(mut self, port: u16) -> Self {
        self.view_port = Some(port);
        self
    }

    /// Check an upgrade request's headers and URI: refused, or admitted as a decider (it
    /// presented the approval key) or an observer.
    pub fn check(&self, headers: &HeaderMap, uri: &http::Uri) -> Result<Standing, Refusal> {
        self.check_site(headers)?;
        self.not_the_view_origin(headers)?;
        let presented = bearer(headers)
            .map(str::to_string)
            .or_else(|| query_token(uri));
        let matches = |expected: &String| {
            presented
                .as_ref()
                .is_some_and(|p| same(p.as_bytes(), expected.as_bytes()))
        };
        if self.token.as_ref().is_some_and(|t| !matches(t)) {
            return Err(Refusal::Token);
        }
        Ok(if self.key.as_ref().is_some_and(matches) {
            Standing::Decider
        } else {
            Standing::Observer
        })
    }

    /// An `Origin` on the View origin's port, named as this listener may be reached (on a
    /// loopback listener a name the `Host` check accepts; elsewhere any name, since the
    /// View origin answers on every name of the address), is the View origin.
    fn not_the_view_origin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let (Some(port), Some(origin)) = (self.view_port, headers.get(http::header::ORIGIN)) else {
            return Ok(());
        };
        let text = origin.to_str().unwrap_or_default();
        let Some((scheme, authority)) = normalize_origin(text).and_then(|o| {
            o.split_once("://")
                .map(|(s, a)| (s.to_string(), a.to_string()))
        }) else {
            return Ok(());
        };
        let origin_port = match authority.rsplit_once(':') {
            Some((_, p)) if !authority.ends_with(']') => p.parse().ok(),
            _ if scheme == "https" => Some(443),
            _ => Some(80),
        };
        let name = host_name(&authority).to_ascii_lowercase();
        let reachable = match &self.hosts {
            Some(hosts) => {
                hosts.contains(&name) || is_loopback_origin(&format!("http://{authority}"))
            }
            None => true,
        };
        if origin_port == Some(port) && reachable {
            return Err(Refusal::ViewOrigin(text.to_string()));
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
            assert_eq!(
                gate.check(&request(&[("host", ok)]), &root),
                Ok(Standing::Observer),
                "{ok}"
            );
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
            Ok(Standing::Decider)
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
                Ok(Standing::Observer),
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
        assert_eq!(gate.check(&request(&[host]), &root), Ok(Standing::Observer));
        let any = Gate::new(
            &config(&["*"], &[]),
            None,
            "127.0.0.1:8765".parse().unwrap(),
        );
        assert_eq!(
            any.check(&request(&[host, ("origin", "http://evil.example")]), &root),
            Ok(Standing::Observer)
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
            Ok(Standing::Decider)
        );
        assert_eq!(
            gate.check(
                &request(&[host]),
                &uri("/?x=1&token=s3cret%2Dtoken-0123456789")
            ),
            Ok(Standing::Decider)
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
            Ok(Standing::Decider)
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
    fn without_a_token_only_the_approval_key_makes_a_decider() {
        let key = "0123456789abcdef0123456789abcdef";
        let gate = Gate::new(&config(&[], &[]), None, "127.0.0.1:8765".parse().unwrap())
            .with_approval_key(key);
        let host = ("host", "127.0.0.1:8765");
        let bearer = format!("Bearer {key}");
        for (headers, at) in [
            (
                request(&[host, ("authorization", &bearer)]),
                "/".to_string(),
            ),
            (request(&[host]), format!("/?token={key}")),
            (request(&[host]), format!("/?tkn={key}")),
        ] {
            assert_eq!(
                gate.check(&headers, &uri(&at)),
                Ok(Standing::Decider),
                "{at}"
            );
        }
        // Without it, or with another, a connection still comes in: it only watches.
        for at in [
            "/",
            "/?token=0123456789abcdef0123456789abcdee",
            "/?tkn=0123",
        ] {
            let standing = gate.check(&request(&[host]), &uri(at));
            assert_eq!(standing, Ok(Standing::Observer), "{at}");
            assert!(!standing.unwrap().decides());
        }
        // Without a key nobody decides; with a token the token is the key.
        let keyless = Gate::new(&config(&[], &[]), None, "127.0.0.1:8765".parse().unwrap());
        assert_eq!(
            keyless.check(&request(&[host]), &uri("/?token=")),
            Ok(Standing::Observer)
        );
        let token = "s3cret-token-0123456789";
        let guarded = Gate::new(
            &config(&[], &[]),
            Some(token.into()),
            "127.0.0.1:8765".parse().unwrap(),
        )
        .with_approval_key(key);
        let at = format!("/?token={token}");
        assert_eq!(
            guarded.check(&request(&[host]), &uri(&at)),
            Ok(Standing::Decider)
        );
        let at = format!("/?token={key}");
        assert_eq!(
            guarded.check(&request(&[host]), &uri(&at)),
            Err(Refusal::Token)
        );
    }

    #[test]
    fn the_view_origin_never_connects_whatever_it_carries() {
        let key = "0123456789abcdef0123456789abcdef";
        let gate = Gate::new(
            &config(&["*"], &[]),
            None,
            "127.0.0.1:8765".parse().unwrap(),
        )
        .with_approval_key(key)
        .with_view_port(8766);
        let at = format!("/?token={key}");
        for origin in [
            "http://127.0.0.1:8766",
            "http://localhost:8766",
            "http://[::1]:8766",
        ] {
            let headers = request(&[("host", "127.0.0.1:8765"), ("origin", origin)]);
            let refusal = gate.check(&headers, &uri(&at));
            assert_eq!(refusal, Err(Refusal::ViewOrigin(origin.into())), "{origin}");
            assert_eq!(refusal.unwrap_err().status(), 403);
            // Its pages are the View origin's own business, not this check's.
            assert_eq!(gate.check_site(&headers), Ok(()));
        }
        // The console's origin (another port) still connects.
        let console = request(&[
            ("host", "127.0.0.1:8765"),
            ("origin", "http://127.0.0.1:8765"),
        ]);
        assert_eq!(gate.check(&console, &uri(&at)), Ok(Standing::Decider));
        // On a non-loopback listener the View origin answers on every name.
        let lan = Gate::new(
            &config(&["*"], &[]),
            Some("t".repeat(16)),
            "0.0.0.0:8765".parse().unwrap(),
        )
        .with_view_port(80);
        let headers = request(&[
            ("host", "box.lan:8765"),
            ("origin", "http://10.0.0.5"),
            ("authorization", &format!("Bearer {}", "t".repeat(16))),
        ]);
        assert!(matches!(
            lan.check(&headers, &uri("/")),
            Err(Refusal::ViewOrigin(_))
        ));
    }
}
