//! A `Host` header's `host[:port]` (or an `Origin`'s authority): whether it is well formed,
//! and its name. Shared by the AHP gate and the MCP front, so both refuse the same names.

/// `name[:port]` or `[IPv6][:port]`: a DNS name or IPv4 address (letters, digits, `-`, `.`,
/// `_`; at most 253), and a port of 1 to 5 digits up to 65535. An unclosed bracket, text
/// after it, or an empty port is not.
pub fn well_formed_host(text: &str) -> bool {
    let (name_ok, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return false;
        };
        let port = match after {
            "" => None,
            after => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => return false,
            },
        };
        (inner.parse::<std::net::Ipv6Addr>().is_ok(), port)
    } else {
        let (name, port) = match text.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (text, None),
        };
        let ok = !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
        (ok, port)
    };
    let port_ok = port.is_none_or(|port| {
        !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u32>().is_ok_and(|p| p <= 65535)
    });
    name_ok && port_ok
}

/// The name in a `host[:port]` (IPv6 in brackets), without port or brackets
/// (`[::1]:8080` → `::1`). Meaningful for a [`well_formed_host`] only.
pub fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    host.split(':').next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_name_and_port_and_nothing_else() {
        for good in [
            "localhost",
            "localhost:8766",
            "[::1]",
            "[::1]:80",
            "a.b-c_d:65535",
        ] {
            assert!(well_formed_host(good), "{good}");
        }
        for bad in [
            "[::1",
            "[::1]x",
            "[::1]:",
            "localhost:",
            "localhost:abc",
            "a:70000",
            "",
            "a b",
            "a@b",
            "a/b",
            "[zz]",
        ] {
            assert!(!well_formed_host(bad), "{bad}");
        }
        assert_eq!(host_name("localhost:8766"), "localhost");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("example.com"), "example.com");
    }
}
