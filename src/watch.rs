//! Live discovery: notify events on the watched folders, debounced into batches, mapped to
//! the catalog units they touch, rescanned, and committed to the host as minimal actions.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, Dirty};
use crate::discovery::Context;
use crate::host::Host;

/// Changed paths buffered between notify's thread and the debouncer; overflow means
/// "rescan everything" rather than unbounded memory.
const EVENT_QUEUE: usize = 8192;

/// A batch never waits longer than this many debounce periods, even under a steady stream.
const MAX_BATCH_PERIODS: u32 = 10;

/// Start watching everything the catalog was built from. Runs until `shutdown`.
pub fn spawn(
    catalog: Catalog,
    ctx: Context,
    host: Arc<Host>,
    debounce: Duration,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let (tx, rx) = mpsc::channel::<PathBuf>(EVENT_QUEUE);
    let overflow = Arc::new(AtomicBool::new(false));
    let flag = overflow.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match event {
            Ok(event) if matches!(event.kind, EventKind::Access(_)) => {}
            Ok(event) => {
                if event.need_rescan() {
                    flag.store(true, Ordering::Relaxed);
                    let _ = tx.try_send(PathBuf::new()); // wake the debouncer
                }
                for path in event.paths {
                    if tx.try_send(path).is_err() {
                        flag.store(true, Ordering::Relaxed);
                    }
                }
            }
            Err(_) => flag.store(true, Ordering::Relaxed),
        }
    })
    .map_err(|e| format!("cannot start the file watcher: {e}"))?;
    let mut watched = BTreeSet::new();
    sync_watches(&mut watcher, &mut watched, &catalog);
    Ok(tokio::spawn(run(
        catalog, ctx, host, debounce, shutdown, rx, overflow, watcher, watched,
    )))
}

/// Watch what the catalog now needs and stop watching what it no longer does.
fn sync_watches(
    watcher: &mut notify::RecommendedWatcher,
    watched: &mut BTreeSet<(PathBuf, bool)>,
    catalog: &Catalog,
) {
    let wanted: BTreeSet<(PathBuf, bool)> = catalog.watch_targets().into_iter().collect();
    for (path, _) in watched.difference(&wanted) {
        let _ = watcher.unwatch(path);
    }
    let mut now = BTreeSet::new();
    for (path, recursive) in wanted {
        if watched.contains(&(path.clone(), recursive)) {
            now.insert((path, recursive));
            continue;
        }
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        match watcher.watch(&path, mode) {
            Ok(()) => {
                now.insert((path, recursive));
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot watch; changes there are not seen until it exists at start-up")
            }
        }
    }
    *watched = now;
}

#[allow(clippy::too_many_arguments)]
async fn run(
    mut catalog: Catalog,
    ctx: Context,
    host: Arc<Host>,
    debounce: Duration,
    shutdown: CancellationToken,
    mut rx: mpsc::Receiver<PathBuf>,
    overflow: Arc<AtomicBool>,
    mut watcher: notify::RecommendedWatcher,
    mut watched: BTreeSet<(PathBuf, bool)>,
) {
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => return,
            path = rx.recv() => match path {
                Some(path) => path,
                None => return,
            },
        };
        let mut paths = BTreeSet::from([first]);
        let deadline = Instant::now() + debounce * MAX_BATCH_PERIODS;
        loop {
            let quiet = (Instant::now() + debounce).min(deadline);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(quiet) => break,
                path = rx.recv() => match path {
                    Some(path) => { paths.insert(path); }
                    None => return,
                },
            }
        }
        let mut dirty = Dirty::default();
        if overflow.swap(false, Ordering::Relaxed) {
            dirty = catalog.everything();
        }
        for path in &paths {
            dirty.merge(catalog.dirty_for(path));
        }
        if dirty.is_empty() {
            continue;
        }
        let started = std::time::Instant::now();
        let actions = tokio::task::block_in_place(|| catalog.rescan(&dirty, &ctx));
        tracing::debug!(
            paths = paths.len(),
            units = dirty.units.len(),
            roots = dirty.roots.len(),
            actions = actions.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "rescanned"
        );
        for action in &actions {
            host.emit_to_sessions(action);
        }
        if !actions.is_empty() {
            for problem in catalog.problems() {
                tracing::debug!(%problem, "discovery problem");
            }
            sync_watches(&mut watcher, &mut watched, &catalog);
        }
    }
}
