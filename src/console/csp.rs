//! Content security policies: the console page's own, and a View's, built from the
//! `_meta.ui.csp` its resource declares, as the MCP Apps spec asks (restrictive by default,
//! never looser than declared). Pure.

use serde_json::Value;

/// The console page's policy: its own scripts and styles, its own WebSocket, and frames only
/// from the View origin (any host name the browser used, the View port).
pub fn console(view_port: u16) -> String {
    [
        "default-src 'self'".to_string(),
        "script-src 'self'".into(),
        "style-src 'self'".into(),
        "img-src 'self' data:".into(),
        "connect-src 'self'".into(),
        format!("frame-src http://*:{view_port} https://*:{view_port}"),
        "object-src 'none'".into(),
        "base-uri 'none'".into(),
        "form-action 'none'".into(),
        "frame-ancestors 'none'".into(),
    ]
    .join("; ")
}

/// The `frame-ancestors` sources of the View origin's relay: the console's origin, the host
/// name the relay was asked for (`host`, a `Host` header the View listener accepted: the
/// console's page named it in the frame's URL) on `console_port`, and `'self'` (the View's
/// own document, loaded inside the relay, inherits its policy; Views' opaque origins never
/// match it). A name a CSP source cannot hold (an IPv6 literal) falls back to any host on
/// that port.
pub fn console_origins(host: &str, console_port: u16) -> String {
    let name = crate::authority::host_name(host);
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    let name = if plain { name } else { "*" };
    format!("'self' http://{name}:{console_port} https://{name}:{console_port}")
}

/// A View's policy from its resource's `_meta.ui.csp` (`None`: the spec's restrictive
/// default). Entries that are not plain sources (quotes, `;`, spaces, keywords) are dropped.
pub fn view(declared: Option<&Value>) -> String {
    let list = |key: &str| -> Vec<String> {
        declared
            .and_then(|csp| csp.get(key))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|source| is_source(source))
            .map(str::to_string)
            .collect()
    };
    let resources = list("resourceDomains");
    let connect = list("connectDomains");
    let frames = list("frameDomains");
    let bases = list("baseUriDomains");
    let with = |base: &str, extra: &[String]| {
        std::iter::once(base.to_string())
            .chain(extra.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let or_none = |sources: &[String]| {
        if sources.is_empty() {
            "'none'".to_string()
        } else {
            sources.join(" ")
        }
    };
    [
        "default-src 'none'".to_string(),
        format!("script-src {}", with("'self' 'unsafe-inline'", &resources)),
        format!("style-src {}", with("'self' 'unsafe-inline'", &resources)),
        format!("img-src {}", with("'self' data:", &resources)),
        format!("font-src {}", with("'self' data:", &resources)),
        format!("media-src {}", with("'self' data:", &resources)),
        format!("connect-src {}", or_none(&connect)),
        format!("frame-src {}", or_none(&frames)),
        if bases.is_empty() {
            "base-uri 'self'".to_string()
        } else {
            format!("base-uri {}", bases.join(" "))
        },
        "object-src 'none'".into(),
        "form-action 'none'".into(),
    ]
    .join("; ")
}

/// A host or scheme source (`https://cdn.example.com`, `https://*.example.com:443`,
/// `wss://x`): letters, digits and `.:/*-_` only, so nothing can end a directive or add a
/// keyword.
fn is_source(source: &str) -> bool {
    !source.is_empty()
        && source.len() <= 256
        && source
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".:/*-_".contains(c))
        && source.chars().any(|c| c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn without_a_declaration_a_view_gets_the_specs_restrictive_default() {
        let policy = view(None);
        for directive in [
            "default-src 'none'",
            "script-src 'self' 'unsafe-inline'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "media-src 'self' data:",
            "connect-src 'none'",
            "frame-src 'none'",
            "base-uri 'self'",
            "object-src 'none'",
        ] {
            assert!(
                policy.split("; ").any(|d| d == directive),
                "{directive} in {policy}"
            );
        }
    }

    #[test]
    fn declared_domains_open_their_directives_and_nothing_else() {
        let declared = json!({
            "connectDomains": ["https://api.example.com", "wss://live.example.com"],
            "resourceDomains": ["https://*.cdn.example", "'unsafe-eval'", "x; script-src *", "a b"],
            "frameDomains": ["https://player.example"],
            "baseUriDomains": ["https://base.example"],
        });
        let policy = view(Some(&declared));
        assert!(policy.contains("connect-src https://api.example.com wss://live.example.com"));
        assert!(policy.contains("script-src 'self' 'unsafe-inline' https://*.cdn.example;"));
        assert!(policy.contains("img-src 'self' data: https://*.cdn.example;"));
        assert!(policy.contains("frame-src https://player.example"));
        assert!(policy.contains("base-uri https://base.example"));
        assert!(!policy.contains("unsafe-eval"), "{policy}");
        assert!(!policy.contains("script-src *"), "{policy}");
        assert_eq!(policy.matches("script-src").count(), 1);
        // Junk shapes are ignored, not trusted.
        assert_eq!(
            view(Some(&json!({"connectDomains": "https://x"}))),
            view(None)
        );
        assert_eq!(view(Some(&json!([1, 2]))), view(None));
    }

    #[test]
    fn the_relay_names_the_consoles_origin_as_its_only_framer() {
        assert_eq!(
            console_origins("localhost:9001", 8765),
            "'self' http://localhost:8765 https://localhost:8765"
        );
        let any = "'self' http://*:8765 https://*:8765";
        assert_eq!(console_origins("[::1]:9001", 8765), any);
        assert_eq!(console_origins("", 8765), any);
    }

    #[test]
    fn the_console_frames_only_the_view_port() {
        let policy = console(9001);
        assert!(policy.contains("frame-src http://*:9001 https://*:9001"));
        assert!(policy.contains("script-src 'self'"));
        assert!(!policy.contains("unsafe"));
    }
}
