//! Remote servers through the real binary: a legacy HTTP+SSE server (`type = "sse"`) comes up
//! and answers tool calls, an `https://` server is reached over TLS when its certificate is
//! trusted, and an untrusted certificate is an error that says so.

mod common;

use std::path::Path;
use std::sync::Arc;

use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use common::{HttpExampleServer, Proxy, Watcher, PATIENCE};

const FAST: &str =
    "[supervisor]\nrestart_delay_ms = 20\nrestart_delay_max_ms = 100\ncrash_loop_limit = 2\n";

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// Call `tool` on `/mcp` of `proxy` with `args`; returns the first text.
async fn call(proxy: &Proxy, tool: &str, args: serde_json::Value) -> String {
    let session = tokio::time::timeout(
        PATIENCE,
        ().serve(StreamableHttpClientTransport::from_uri(
            proxy.mcp_url.clone(),
        )),
    )
    .await
    .expect("handshake in time")
    .expect("MCP handshake over HTTP");
    let params: CallToolRequestParams =
        serde_json::from_value(json!({"name": tool, "arguments": args})).expect("params");
    let result = tokio::time::timeout(PATIENCE, session.peer().call_tool(params))
        .await
        .expect("answered in time")
        .expect("the call succeeds");
    let _ = session.cancel().await;
    serde_json::to_value(&result).expect("json")["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_sse_server_is_served_like_any_other() {
    let upstream = HttpExampleServer::start_sse("echo");
    let config = format!(
        "{FAST}[servers.old]\ntype = \"sse\"\nurl = \"{}\"\n",
        upstream.url
    );
    // The server may need a moment to listen; the supervisor retries.
    let config = config.replace("crash_loop_limit = 2", "crash_loop_limit = 50");
    let proxy = Proxy::start(&config);
    let mut w = Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("old", "ready", &mut seen).await;
    assert_eq!(
        call(&proxy, "echo", json!({"text": "over sse"})).await,
        "over sse"
    );
}

/// A TLS front (the fixture certificate, for 127.0.0.1) for `upstream`'s plain HTTP port;
/// returns its `https://127.0.0.1:<port>/mcp`.
async fn tls_front(upstream: &HttpExampleServer) -> String {
    let cert = CertificateDer::from_pem_file(fixture("cert.pem")).expect("certificate");
    let key = PrivateKeyDer::from_pem_file(fixture("key.pem")).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let plain = upstream
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let plain = plain.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let Ok(mut inner) = tokio::net::TcpStream::connect(&plain).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut inner).await;
            });
        }
    });
    format!("https://127.0.0.1:{port}/mcp")
}

#[tokio::test(flavor = "multi_thread")]
async fn https_servers_are_reached_over_tls_and_an_untrusted_certificate_is_said() {
    let upstream = HttpExampleServer::start("echo", &[]);
    let url = tls_front(&upstream).await;
    let config = format!("{FAST}[servers.secure]\nurl = \"{url}\"\n")
        .replace("crash_loop_limit = 2", "crash_loop_limit = 50");
    let cert = fixture("cert.pem").display().to_string();
    let trusting = Proxy::start_on(&config, "127.0.0.1:0", &[("SSL_CERT_FILE", &cert)]);
    let mut w = Watcher::open(&trusting).await;
    let mut seen = Vec::new();
    w.until("secure", "ready", &mut seen).await;
    assert_eq!(
        call(&trusting, "echo", json!({"text": "over tls"})).await,
        "over tls"
    );

    // Without the certificate trusted: an error naming the problem, not a type name.
    let config = format!("{FAST}[servers.secure]\nurl = \"{url}\"\n");
    let doubting = Proxy::start(&config);
    let mut w = Watcher::open(&doubting).await;
    let error = w.until("secure", "error", &mut seen).await;
    let message = error["error"]["message"].as_str().unwrap_or_default();
    let authority = url.trim_start_matches("https://").trim_end_matches("/mcp");
    assert!(
        message.starts_with(&format!(
            "TLS with {authority} failed: invalid peer certificate"
        )),
        "{message}"
    );
}
