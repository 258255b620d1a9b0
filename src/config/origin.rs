//! What counts as an `Origin` (`scheme://host[:port]`, `"*"`, `"null"`) and its one normal
//! form, shared by `ahp.allowed_origins` validation and the upgrade gate's comparison.

/// `scheme://host[:port]` lower-cased, without a trailing `/`; `"*"` and `"null"` as they
/// are. `None` when it is not an origin (a path, no scheme, spaces).
pub fn normalize_origin(origin: &str) -> Option<String> {
    let origin = origin.trim();
    if origin == "*" || origin == "null" {
        return Some(origin.to_string());
    }
    let (scheme, rest) = origin.split_once("://")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let valid_scheme = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let valid_rest = !rest.is_empty()
        && !rest.contains(['/', '?', '#', '@'])
        && !rest.chars().any(|c| c.is_whitespace() || c.is_control());
    (valid_scheme && valid_rest).then(|| format!("{scheme}://{rest}").to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalized_or_rejected() {
        assert_eq!(
            normalize_origin("HTTPS://Example.COM:443/").as_deref(),
            Some("https://example.com:443")
        );
        assert_eq!(normalize_origin("*").as_deref(), Some("*"));
        for bad in [
            "example.com",
            "https://example.com/app",
            "https://",
            "a b://c",
        ] {
            assert_eq!(normalize_origin(bad), None, "{bad}");
        }
    }
}
