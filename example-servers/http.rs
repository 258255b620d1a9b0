//! Streamable HTTP for the example servers (`--http ADDR`): rmcp's service on `/mcp`,
//! behind an optional required header (`--require-header name=value`, else 401).

use rmcp::ServerHandler;

/// Serve `server` on `http://<addr>/mcp` until the process ends; 1 when `addr` cannot be bound.
pub async fn serve_http<S: ServerHandler + Clone>(
    server: S,
    addr: std::net::SocketAddr,
    required: Option<String>,
) -> i32 {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("example-server: cannot listen on {addr}: {error}");
            return 1;
        }
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let required = required.and_then(|r| {
        r.split_once('=')
            .map(|(name, value)| (name.to_ascii_lowercase(), value.to_string()))
    });
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        // Answers are small writes after a read: without this, Nagle holds each one until
        // the client's delayed ACK (~40 ms per call).
        let _ = socket.set_nodelay(true);
        let service = service.clone();
        let required = required.clone();
        tokio::spawn(async move {
            let gate = tower_gate(service, required);
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), TowerToHyperService::new(gate))
                .await;
        });
    }
}

type HttpResponse =
    http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>>;

/// Answer 401 unless the required header is present; otherwise hand over to rmcp.
fn tower_gate<S>(
    inner: S,
    required: Option<(String, String)>,
) -> tower::util::BoxCloneService<
    http::Request<hyper::body::Incoming>,
    HttpResponse,
    std::convert::Infallible,
>
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = HttpResponse,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    use http_body_util::BodyExt;
    tower::util::BoxCloneService::new(tower::service_fn(
        move |request: http::Request<hyper::body::Incoming>| {
            let inner = inner.clone();
            let required = required.clone();
            async move {
                if let Some((name, value)) = &required {
                    let ok = request
                        .headers()
                        .get(name.as_str())
                        .is_some_and(|v| v.as_bytes() == value.as_bytes());
                    if !ok {
                        let body =
                            http_body_util::Full::new(bytes::Bytes::from_static(b"unauthorized"))
                                .map_err(|never| match never {})
                                .boxed();
                        let mut response = http::Response::new(body);
                        *response.status_mut() = http::StatusCode::UNAUTHORIZED;
                        return Ok(response);
                    }
                }
                tower::ServiceExt::oneshot(inner, request).await
            }
        },
    ))
}
