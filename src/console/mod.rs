//! The web console's pages: the single-page AHP client the AHP listener serves at `GET /`,
//! and the relay MCP Apps' Views run in on their own origin. Every file is embedded.
//!
//! Pure: `Console::page` routes a path to a `Page` (status, type, body, headers); `csp` builds
//! the content security policies; `http` turns pages into responses and serves the View
//! origin's pages. The listeners (`ahp::listener`, `ahp::views`) do the networking.

pub(crate) mod assets;
pub mod csp;
pub mod http;

use bytes::Bytes;

/// What the console needs to know to render its page: where the View origin listens,
/// whether connecting takes a token, and the session it follows. Nothing secret.
#[derive(Debug, Clone)]
pub struct Console {
    /// Port of the View origin (same host name as the console, another port).
    pub view_port: u16,
    /// Whether the AHP endpoint wants a token (the page then asks for one).
    pub token_required: bool,
    /// The URI the host publishes its default session under (`<provider>:/default`).
    pub session: String,
}

/// One answer to a plain HTTP request.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Bytes,
    pub headers: Vec<(&'static str, String)>,
}

impl Page {
    /// A plain-text answer (refusals, not found).
    pub fn text(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Bytes::from(message.into()),
            headers: Vec::new(),
        }
    }

    pub(crate) fn asset(asset: &assets::Asset) -> Self {
        Self {
            status: 200,
            content_type: asset.content_type,
            body: Bytes::from_static(asset.bytes),
            headers: vec![
                ("cache-control", "no-cache".into()),
                ("x-content-type-options", "nosniff".into()),
            ],
        }
    }
}

impl Console {
    /// The console's answer to `GET path` on the AHP listener.
    pub fn page(&self, path: &str) -> Page {
        if path == "/" || path == "/index.html" {
            let html = assets::INDEX
                .replace("__VIEW_PORT__", &self.view_port.to_string())
                .replace("__TOKEN_REQUIRED__", &self.token_required.to_string())
                .replace("__SESSION__", &attribute(&self.session));
            let mut page = Page::asset(&assets::Asset {
                path: "/",
                content_type: "text/html; charset=utf-8",
                bytes: b"",
            });
            page.body = Bytes::from(html);
            page.headers.extend([
                ("content-security-policy", csp::console(self.view_port)),
                ("referrer-policy", "no-referrer".into()),
                ("x-frame-options", "DENY".into()),
            ]);
            return page;
        }
        match assets::CONSOLE.iter().find(|a| a.path == path) {
            Some(asset) => Page::asset(asset),
            None => Page::text(404, format!("no console page {path:?}")),
        }
    }
}

/// `value` escaped for a double-quoted HTML attribute.
fn attribute(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_the_view_port_and_forbids_framing() {
        let console = Console {
            view_port: 4321,
            token_required: true,
            session: "my.agent:/default".into(),
        };
        let page = console.page("/");
        assert_eq!(page.status, 200);
        let html = std::str::from_utf8(&page.body).unwrap();
        assert!(html.contains("content=\"4321\""), "{html}");
        assert!(html.contains("content=\"true\""), "{html}");
        assert!(html.contains("content=\"my.agent:/default\""), "{html}");
        let header = |name: &str| {
            page.headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        assert!(header("content-security-policy").contains("frame-src http://*:4321"));
        assert!(header("content-security-policy").contains("frame-ancestors 'none'"));
        assert_eq!(header("referrer-policy"), "no-referrer");
        for asset in assets::CONSOLE {
            assert_eq!(console.page(asset.path).status, 200, "{}", asset.path);
        }
        assert_eq!(console.page("/../Cargo.toml").status, 404);
        assert_eq!(console.page("/sandbox").status, 404);
    }
}
