//! `file://` URIs for paths and back: customization `uri`s and ids, and the paths that
//! `resource*` commands name. Percent-encodes everything but unreserved characters and `/`.

use std::path::{Path, PathBuf};

/// `file:///abs/path` for an absolute path; non-UTF-8 bytes and reserved characters are
/// percent-encoded.
pub fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let mut out = String::with_capacity(bytes.len() + 8);
    out.push_str("file://");
    if !bytes.starts_with(b"/") {
        out.push('/');
    }
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path a `file:` URI names, if it is one (`file:///x`, `file://localhost/x`, `file:/x`;
/// the scheme in any case, RFC 8089).
pub fn file_path(uri: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let (scheme, rest) = uri.split_once(':')?;
    if !scheme.eq_ignore_ascii_case("file") {
        return None;
    }
    let rest = match rest.strip_prefix("//") {
        Some(authority_and_path) => authority_and_path
            .strip_prefix("localhost")
            .unwrap_or(authority_and_path),
        None => rest,
    };
    if !rest.starts_with('/') || rest.contains(['?', '#']) {
        return None;
    }
    let mut bytes = Vec::with_capacity(rest.len());
    let mut iter = rest.bytes();
    while let Some(b) = iter.next() {
        if b == b'%' {
            let hi = iter.next().and_then(hex)?;
            let lo = iter.next().and_then(hex)?;
            bytes.push(hi << 4 | lo);
        } else {
            bytes.push(b);
        }
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// A URI fragment component: percent-encodes what would break `#key=value` parsing.
pub fn fragment_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_odd_paths() {
        for path in ["/a/b c/d#e%f", "/déjà/vu", "/x?y", "/"] {
            let uri = file_uri(Path::new(path));
            assert!(!uri[7..].contains([' ', '#', '?']), "{uri}");
            assert_eq!(file_path(&uri).unwrap(), PathBuf::from(path), "{uri}");
        }
        assert_eq!(file_uri(Path::new("/a b")), "file:///a%20b");
    }

    #[test]
    fn rejects_non_file_and_malformed_uris() {
        assert_eq!(file_path("http://x/y"), None);
        assert_eq!(file_path("FILE:///a").unwrap(), PathBuf::from("/a"));
        assert_eq!(file_path("file:/a/b").unwrap(), PathBuf::from("/a/b"));
        assert_eq!(file_path("file:a"), None);
        assert_eq!(file_path("file://host/y"), None);
        assert_eq!(file_path("file:///a%2"), None);
        assert_eq!(file_path("file:///a%zz"), None);
        assert_eq!(file_path("file:///a#frag"), None);
        assert_eq!(
            file_path("file://localhost/a").unwrap(),
            PathBuf::from("/a")
        );
    }

    #[test]
    fn fragment_components_escape_separators() {
        assert_eq!(fragment_component("a b#c=d"), "a%20b%23c%3Dd");
    }
}
