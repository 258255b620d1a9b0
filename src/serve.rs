//! `ahp-proxy serve`: wires the host and the AHP listener together and runs until a signal.
//! Ctrl-C or SIGTERM closes every connection cleanly and returns.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::ahp::listener;
use crate::config::Config;
use crate::host::Host;

/// Run the proxy on `config` until Ctrl-C / SIGTERM. Errors are start-up failures.
pub async fn run(config: Config) -> Result<(), String> {
    let host = Arc::new(Host::new(&config));
    let tcp = listener::bind(config.ahp.listen).await?;
    let addr = tcp
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "AHP is listening on a non-loopback address without authentication");
    }
    tracing::info!(addr = %addr, url = %format!("ws://{addr}"), "AHP endpoint listening");

    let shutdown = CancellationToken::new();
    let server = tokio::spawn(listener::serve(
        tcp,
        host,
        config.limits.clone(),
        shutdown.clone(),
    ));
    wait_for_signal().await;
    tracing::info!("shutting down");
    shutdown.cancel();
    let _ = server.await;
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
