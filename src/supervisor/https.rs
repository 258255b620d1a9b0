//! The HTTP client behind every request to a remote server (streamable HTTP, legacy SSE,
//! RFC 9728 metadata): rustls with the ring provider, trusting the system's certificates.
//!
//! reqwest is built with `rustls-no-provider`: a client built before [`install_provider`]
//! panics. The proxy installs it first thing in `main`, and [`client_builder`] makes sure.

use std::sync::Once;

/// Make ring the process's TLS provider (once; a provider installed before is kept).
pub fn install_provider() {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A client builder with TLS ready.
pub fn client_builder() -> reqwest::ClientBuilder {
    install_provider();
    reqwest::Client::builder()
}
