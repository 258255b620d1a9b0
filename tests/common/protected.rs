//! A protected streamable HTTP MCP server for tests: the `features` example server
//! (rmcp, in-process) behind a bearer check with RFC 9728 metadata and a scope rule.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The `features` example server, served in-process behind the test's own bearer check.
#[path = "../../example-servers/features.rs"]
mod features;
use http_body_util::BodyExt;
use serde_json::{json, Value};

type Body = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

/// A protected MCP server: `/mcp` needs `Authorization: Bearer <one of tokens>`; the
/// metadata lives at `/.well-known/oauth-protected-resource`.
pub struct Protected {
    pub url: String,
    pub metadata: Value,
    /// What `/.well-known/oauth-protected-resource` serves (`metadata` at first).
    pub served: Arc<Mutex<Value>>,
    pub tokens: Arc<Mutex<HashSet<String>>>,
    /// Tokens that may also call `add` (scope `admin`); others get 403 for it.
    pub admins: Arc<Mutex<HashSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Protected {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn respond(
    status: http::StatusCode,
    headers: &[(&str, String)],
    body: String,
) -> http::Response<Body> {
    let mut response = http::Response::new(
        http_body_util::Full::new(bytes::Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_str(value).unwrap(),
        );
    }
    response
}

pub async fn protected() -> Protected {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let url = format!("{base}/mcp");
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource");
    let metadata = json!({
        "resource": url,
        "authorization_servers": [format!("{base}/auth")],
        "scopes_supported": ["notes"],
        "resource_name": "protected test server",
    });
    let tokens: Arc<Mutex<HashSet<String>>> = Arc::default();
    let admins: Arc<Mutex<HashSet<String>>> = Arc::default();
    let features = features::Features::default();
    let mcp = StreamableHttpService::new(
        move || Ok(features.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let served = Arc::new(Mutex::new(metadata.clone()));
    let (served_metadata, allowed, admitted) = (served.clone(), tokens.clone(), admins.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let (mcp, metadata, allowed, admitted) = (
                mcp.clone(),
                served_metadata.clone(),
                allowed.clone(),
                admitted.clone(),
            );
            let challenge = format!(r#"Bearer resource_metadata="{metadata_url}", scope="notes""#);
            let scope_challenge = format!(
                r#"Bearer error="insufficient_scope", scope="notes admin", resource_metadata="{metadata_url}", error_description="add needs admin""#
            );
            let gate = tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let (mcp, metadata, allowed, admitted, challenge, scope_challenge) = (
                    mcp.clone(),
                    metadata.clone(),
                    allowed.clone(),
                    admitted.clone(),
                    challenge.clone(),
                    scope_challenge.clone(),
                );
                async move {
                    if request.uri().path() == "/.well-known/oauth-protected-resource" {
                        return Ok::<_, std::convert::Infallible>(respond(
                            http::StatusCode::OK,
                            &[("content-type", "application/json".into())],
                            metadata.lock().unwrap().to_string(),
                        ));
                    }
                    let presented = request
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.strip_prefix("Bearer "))
                        .map(str::to_string);
                    let ok = presented
                        .as_ref()
                        .is_some_and(|t| allowed.lock().unwrap().contains(t));
                    if !ok {
                        return Ok(respond(
                            http::StatusCode::UNAUTHORIZED,
                            &[("www-authenticate", challenge)],
                            "unauthorized".into(),
                        ));
                    }
                    let (parts, body) = request.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let admin = presented.is_some_and(|t| admitted.lock().unwrap().contains(&t));
                    if message["method"] == "tools/call"
                        && message["params"]["name"] == "add"
                        && !admin
                    {
                        return Ok(respond(
                            http::StatusCode::FORBIDDEN,
                            &[("www-authenticate", scope_challenge)],
                            "insufficient scope".into(),
                        ));
                    }
                    let request = http::Request::from_parts(parts, http_body_util::Full::new(body));
                    let response = tower::ServiceExt::oneshot(mcp, request).await.unwrap();
                    Ok(response.map(|b| b.boxed()))
                }
            });
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(socket), TowerToHyperService::new(gate))
                    .await;
            });
        }
    });
    Protected {
        url,
        metadata,
        served,
        tokens,
        admins,
        task,
    }
}

/// A proxy whose one server (the protected one) is ready with token `NARROW-SENTINEL`
/// (scope `notes`, not `admin`), a watcher, and the seen-states log. `mcp` goes at the top
/// of the proxy's config.
pub async fn ready_with_narrow_token(
    mcp: &str,
) -> (
    Protected,
    crate::common::Proxy,
    crate::common::Watcher,
    Vec<String>,
) {
    let server = protected().await;
    server
        .tokens
        .lock()
        .unwrap()
        .insert("NARROW-SENTINEL".into());
    let proxy = crate::common::Proxy::start(&format!(
        "{mcp}[supervisor]\nrestart_delay_ms = 50\n[servers.remote]\nurl = \"{}\"\n",
        server.url
    ));
    let mut w = crate::common::Watcher::open(&proxy).await;
    let mut seen = Vec::new();
    w.until("remote", "authRequired", &mut seen).await;
    w.client
        .request::<_, Value>(
            "authenticate",
            json!({"channel": "ahp-root://", "resource": server.url, "token": "NARROW-SENTINEL"}),
        )
        .await
        .expect("authenticate");
    w.until("remote", "ready", &mut seen).await;
    (server, proxy, w, seen)
}

/// A harness session on the proxy's `/mcp`, and its `add {a, b}` call, running.
pub async fn harness_calls_add(
    proxy: &crate::common::Proxy,
    a: i64,
    b: i64,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, rmcp::ServiceError>>,
) {
    use rmcp::ServiceExt;
    let harness = ()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            proxy.mcp_url.clone(),
        ))
        .await
        .expect("harness handshake");
    let peer = harness.peer().clone();
    let call = tokio::spawn(async move {
        let arguments = json!({"a": a, "b": b}).as_object().cloned().unwrap();
        peer.call_tool(rmcp::model::CallToolRequestParams::new("add").with_arguments(arguments))
            .await
    });
    (harness, call)
}
