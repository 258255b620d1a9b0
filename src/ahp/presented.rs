//! How a connection presents a secret (the access token, or the approval key): an
//! `Authorization: Bearer` header, `?token=` (browsers cannot set headers on a WebSocket) or
//! VS Code's `?tkn=`; compared in constant time (the header and the comparison are
//! `crate::bearer`'s, which the MCP front shares); and the URL to paste into VS Code, with
//! the secret in `tkn`. Pure.

/// `token=` in the query (for browsers, which cannot set headers on a WebSocket), or
/// `tkn=`, where VS Code puts it (`connectionTokenQueryName`, its base/common/network.ts).
pub fn query_token(uri: &http::Uri) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
