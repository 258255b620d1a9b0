//! MCP protocol versions the proxy speaks with an `initialize` handshake, and how a version
//! is answered when the proxy stands in for a server that already negotiated its own.

/// Every version with an `initialize` handshake that the proxy knows, oldest first.
pub const KNOWN: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The newest of [`KNOWN`]: what the proxy asks servers for when no harness said otherwise.
pub const LATEST: &str = "2025-11-25";

/// Whether `version` is one of [`KNOWN`].
pub fn is_known(version: &str) -> bool {
    KNOWN.contains(&version)
}

/// The version to answer a harness that asked for `requested`, on behalf of a server that
/// speaks `server`: what a server supporting every known version up to its own answers —
/// the requested one when it knows it and it is not newer, else its own.
pub fn answer<'a>(requested: &'a str, server: &'a str) -> &'a str {
    if is_known(requested) && requested <= server {
        requested
    } else {
        server
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_answers_an_older_known_version_and_its_own_otherwise() {
        assert_eq!(answer("2025-03-26", "2025-11-25"), "2025-03-26");
        assert_eq!(answer("2025-11-25", "2025-06-18"), "2025-06-18");
        assert_eq!(answer("1999-01-01", "2025-06-18"), "2025-06-18");
        assert_eq!(answer("2025-06-18", "2025-06-18"), "2025-06-18");
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(KNOWN.last(), Some(&LATEST));
    }
}
