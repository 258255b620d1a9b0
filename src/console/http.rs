//! Pages as hyper responses, and the View origin's pages: the relay (`/sandbox`, with the
//! View's content security policy from its `csp` query parameter) and its script.

use bytes::Bytes;
use http_body_util::Full;

use super::{assets, csp, Page};

/// A page as an HTTP response (`HEAD` gets the headers only), closing the connection after
/// it: one request per connection.
pub fn response(page: Page, head: bool) -> http::Response<Full<Bytes>> {
    let mut builder = http::Response::builder()
        .status(page.status)
        .header(http::header::CONNECTION, "close")
        .header(http::header::CONTENT_TYPE, page.content_type)
        .header(http::header::CONTENT_LENGTH, page.body.len());
    for (name, value) in &page.headers {
        builder = builder.header(*name, value);
    }
    let body = if head { Bytes::new() } else { page.body };
    builder
        .body(Full::new(body))
        .unwrap_or_else(|_| http::Response::new(Full::new(Bytes::from_static(b"bad header"))))
}

/// The View origin's answer to `GET path?query`: the relay page with the CSP its View
/// declared (JSON in `csp`) and `frame-ancestors` the console's origins (`framers`), the
/// relay's script, or 404.
pub fn view_origin_page(path: &str, query: Option<&str>, framers: &str) -> Page {
    match path {
        "/sandbox" => {
            let declared = query.and_then(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .find(|(key, _)| key == "csp")
                    .and_then(|(_, value)| serde_json::from_str::<serde_json::Value>(&value).ok())
            });
            let policy = format!(
                "{}; frame-ancestors {framers}",
                csp::view(declared.as_ref())
            );
            tracing::debug!(csp = %policy, "View sandbox served");
            Page {
                status: 200,
                content_type: "text/html; charset=utf-8",
                body: Bytes::from_static(assets::SANDBOX_HTML),
                headers: vec![
                    ("content-security-policy", policy),
                    ("cache-control", "no-store".into()),
                    ("x-content-type-options", "nosniff".into()),
                    ("referrer-policy", "no-referrer".into()),
                ],
            }
        }
        p if p == assets::SANDBOX_JS.path => Page::asset(&assets::SANDBOX_JS),
        _ => Page::text(404, "only the MCP App sandbox is served on this origin"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_carries_the_declared_policy() {
        let csp = r#"{"connectDomains":["https://api.example.com"]}"#;
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("csp", csp)
            .finish();
        let framers = csp::console_origins("127.0.0.1:8766", 8765);
        let page = view_origin_page("/sandbox", Some(&query), &framers);
        assert_eq!(page.status, 200);
        let policy = &page.headers[0].1;
        assert!(
            policy.contains("connect-src https://api.example.com"),
            "{policy}"
        );
        // Only the console may frame the relay.
        assert!(
            policy
                .ends_with("; frame-ancestors 'self' http://127.0.0.1:8765 https://127.0.0.1:8765"),
            "{policy}"
        );
        let with = |declared| format!("{declared}; frame-ancestors {framers}");
        let plain = view_origin_page("/sandbox", None, &framers);
        assert_eq!(plain.headers[0].1, with(csp::view(None)));
        let junk = view_origin_page("/sandbox", Some("csp=%7Bnot-json"), &framers);
        assert_eq!(junk.headers[0].1, with(csp::view(None)));
        assert_eq!(view_origin_page("/sandbox.js", None, &framers).status, 200);
        assert_eq!(view_origin_page("/", None, &framers).status, 404);
        assert_eq!(view_origin_page("/console.js", None, &framers).status, 404);
    }
}
