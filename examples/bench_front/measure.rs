//! One measured block of a path: a stdio block (calls back to back, one in flight) or an
//! HTTP block (N fresh sessions calling back to back for a while), with the CPU time the
//! proxy, the echo server(s) and this client spent on it.

use std::time::{Duration, Instant};

use crate::http_client::HttpSession;
use crate::process::{cpu_us, switches};
use crate::targets::{HttpPath, StdioPath};

/// CPU time in µs of the proxy, the echo server(s) and this client; the proxy's context
/// switches (a thread handing work to another shows up here).
#[derive(Debug, Default, Clone, Copy)]
pub struct Cpu {
    pub proxy: f64,
    pub servers: f64,
    pub client: f64,
    pub proxy_switches: f64,
}

impl Cpu {
    fn now(proxy: Option<u32>, servers: &[u32]) -> Cpu {
        Cpu {
            proxy: proxy.map_or(0.0, cpu_us),
            servers: servers.iter().map(|p| cpu_us(*p)).sum(),
            client: cpu_us(std::process::id()),
            proxy_switches: proxy.map_or(0, switches) as f64,
        }
    }

    fn add_since(&mut self, before: Cpu, after: Cpu) {
        self.proxy += after.proxy - before.proxy;
        self.servers += after.servers - before.servers;
        self.client += after.client - before.client;
        self.proxy_switches += after.proxy_switches - before.proxy_switches;
    }
}

/// What the blocks of one path (at one concurrency, for HTTP) added up to.
#[derive(Debug, Default)]
pub struct Tally {
    /// Latency of each call in the measured windows, µs (one call in flight only).
    pub samples: Vec<f64>,
    /// Calls completed inside the measured windows, and the windows' total length.
    pub calls: u64,
    pub seconds: f64,
    /// CPU between the first call and the last of each block, and the calls it covered.
    pub cpu: Cpu,
    pub cpu_calls: u64,
}

/// `calls` calls back to back on a stdio path.
pub async fn stdio_block(
    path: &mut StdioPath,
    calls: usize,
    tally: &mut Tally,
) -> Result<(), String> {
    let before = Cpu::now(path.route.proxy, &path.route.servers);
    let started = Instant::now();
    for _ in 0..calls {
        let call = Instant::now();
        path.client.exchange("tools/call", &path.route.call).await?;
        tally.samples.push(call.elapsed().as_secs_f64() * 1e6);
    }
    tally.seconds += started.elapsed().as_secs_f64();
    tally
        .cpu
        .add_since(before, Cpu::now(path.route.proxy, &path.route.servers));
    tally.calls += calls as u64;
    tally.cpu_calls += calls as u64;
    Ok(())
}

/// `sessions` fresh sessions on an HTTP path calling back to back: `warmup`, then counted
/// for `measure` (latencies kept with one session only). Opening and closing the sessions
/// is outside the CPU figures.
pub async fn http_block(
    path: &HttpPath,
    sessions: usize,
    warmup: Duration,
    measure: Duration,
    tally: &mut Tally,
) -> Result<(), String> {
    let opened = futures_util::future::join_all(
        (0..sessions).map(|_| HttpSession::open_as(&path.url, path.era)),
    )
    .await;
    let mut opened: Vec<HttpSession> = opened.into_iter().collect::<Result<_, _>>()?;
    for session in &mut opened {
        session.calls_tool(&path.tool);
    }
    let keep_samples = sessions == 1;
    let before = Cpu::now(path.route.proxy, &path.route.servers);
    let measure_from = Instant::now() + warmup;
    let until = measure_from + measure;
    let workers: Vec<_> = opened
        .into_iter()
        .map(|mut session| {
            let call = path.route.call.clone();
            tokio::spawn(async move {
                let mut counted = 0u64;
                let mut all = 0u64;
                let mut samples = Vec::new();
                loop {
                    let started = Instant::now();
                    session.exchange("tools/call", &call).await?;
                    let now = Instant::now();
                    all += 1;
                    if now >= until {
                        break;
                    }
                    if now >= measure_from {
                        counted += 1;
                        if keep_samples {
                            samples.push((now - started).as_secs_f64() * 1e6);
                        }
                    }
                }
                Ok::<_, String>((session, counted, all, samples))
            })
        })
        .collect();
    let mut sessions_done = Vec::new();
    let mut failure = None;
    for worker in workers {
        match worker.await {
            Ok(Ok((session, counted, all, samples))) => {
                sessions_done.push(session);
                tally.calls += counted;
                tally.cpu_calls += all;
                tally.samples.extend(samples);
            }
            Ok(Err(error)) => failure = Some(error),
            Err(panic) => failure = Some(format!("a session's task failed: {panic}")),
        }
    }
    tally
        .cpu
        .add_since(before, Cpu::now(path.route.proxy, &path.route.servers));
    tally.seconds += measure.as_secs_f64();
    futures_util::future::join_all(sessions_done.into_iter().map(HttpSession::close)).await;
    match failure {
        Some(error) => Err(error),
        None => Ok(()),
    }
}
