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
use crate::supervisor::Command;

/// Changed paths buffered between notify's thread and the debouncer; overflow means
/// "rescan everything" rather than unbounded memory.
const EVENT_QUEUE: usize = 8192;

/// A batch never waits longer than this many debounce periods, even under a steady stream.
const MAX_BATCH_PERIODS: u32 = 10;

/// Everything a rescan needs; moved onto a blocking thread for each batch.
struct Scanner {
    catalog: Catalog,
    ctx: Context,
    watcher: notify::RecommendedWatcher,
    /// `(path, recursive)` currently watched.
    watched: BTreeSet<(PathBuf, bool)>,
}

/// Start watching everything the catalog was built from. Runs until `shutdown`.
pub fn spawn(
    catalog: Catalog,
    ctx: Context,
    host: Arc<Host>,
    supervisor: mpsc::Sender<Command>,
    debounce: Duration,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let (tx, rx) = mpsc::channel::<PathBuf>(EVENT_QUEUE);
    let overflow = Arc::new(AtomicBool::new(false));
    let flag = overflow.clone();
    let handler = move |event: notify::Result<notify::Event>| {
        let lost = match event {
            // Opening and closing files (our own scans do it) changes nothing.
            Ok(event) if matches!(event.kind, EventKind::Access(_)) => false,
            Ok(event) => {
                let lost = event.need_rescan();
                let mut full = false;
                for path in event.paths {
                    full |= tx.try_send(path).is_err();
                }
                lost || full
            }
            Err(_) => true,
        };
        if lost {
            flag.store(true, Ordering::Relaxed);
            let _ = tx.try_send(PathBuf::new()); // wake the debouncer
        }
    };
    // Links are not followed: discovery refuses anything a link leads to outside a plugin,
    // and following `link -> /` would watch the whole disk.
    let config = notify::Config::default().with_follow_symlinks(false);
    let watcher = notify::RecommendedWatcher::new(handler, config)
        .map_err(|e| format!("cannot start the file watcher: {e}"))?;
    let mut scanner = Scanner {
        catalog,
        ctx,
        watcher,
        watched: BTreeSet::new(),
    };
    let _ = scanner.sync_watches(&BTreeSet::new());
    Ok(tokio::spawn(run(
        scanner, host, supervisor, debounce, shutdown, rx, overflow,
    )))
}

impl Scanner {
    /// Watch what the catalog now needs (plus the parents of roots and directories, so one
    /// that is created or replaced later is noticed) and drop what it no longer needs.
    /// Targets named in `touched` are re-added: their old watch may have died with them.
    /// Returns the targets that were not watched before.
    fn sync_watches(&mut self, touched: &BTreeSet<PathBuf>) -> BTreeSet<PathBuf> {
        let mut wanted: BTreeSet<(PathBuf, bool)> = BTreeSet::new();
        for (path, recursive) in self.catalog.watch_targets() {
            if recursive {
                if let Some(parent) = path.parent() {
                    wanted.insert((parent.to_path_buf(), false));
                }
            }
            wanted.insert((path, recursive));
        }
        for (path, _) in self.watched.difference(&wanted) {
            let _ = self.watcher.unwatch(path);
        }
        let mut now = BTreeSet::new();
        let mut added = BTreeSet::new();
        for (path, recursive) in wanted {
            let alive =
                self.watched.contains(&(path.clone(), recursive)) && !touched.contains(&path);
            if alive {
                now.insert((path, recursive));
                continue;
            }
            let _ = self.watcher.unwatch(&path);
            let mode = if recursive {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            match self.watcher.watch(&path, mode) {
                Ok(()) => {
                    if !self.watched.contains(&(path.clone(), recursive)) {
                        added.insert(path.clone());
                    }
                    now.insert((path, recursive));
                }
                Err(error) => {
                    tracing::debug!(path = %path.display(), %error, "not watched (yet)");
                }
            }
        }
        self.watched = now;
        added
    }

    /// Rescan what a batch of changed paths touches; returns the actions to commit, or
    /// `None` when nothing was rescanned.
    ///
    /// Watches are re-armed *before* scanning: a change after that point raises an event
    /// (and a later batch), a change before it is in the scan. Scanning first would lose
    /// whatever lands between the scan and the new watch (a root deleted and recreated,
    /// then filled). A target the scan itself asks for (a manifest's extra folder) can
    /// only be watched after it; it is scanned once more then.
    fn batch(
        &mut self,
        paths: &BTreeSet<PathBuf>,
        everything: bool,
    ) -> Option<Vec<ahp_types::StateAction>> {
        let mut dirty = if everything {
            self.catalog.everything()
        } else {
            Dirty::default()
        };
        self.sync_watches(paths);
        for path in paths {
            dirty.merge(self.catalog.dirty_for(path));
        }
        if dirty.is_empty() {
            return None;
        }
        let started = std::time::Instant::now();
        let known: BTreeSet<String> = self.catalog.problems().map(|p| p.to_string()).collect();
        let mut actions = self.catalog.rescan(&dirty, &self.ctx);
        let added = self.sync_watches(&BTreeSet::new());
        let mut again = Dirty::default();
        for path in &added {
            again.merge(self.catalog.dirty_for(path));
        }
        if !again.is_empty() {
            actions.extend(self.catalog.rescan(&again, &self.ctx));
        }
        // A file that just broke (a half-typed save) is said once, when it breaks.
        for problem in self.catalog.problems() {
            if !known.contains(&problem.to_string()) {
                tracing::warn!(%problem, "discovery problem");
            }
        }
        tracing::debug!(
            paths = paths.len(),
            units = dirty.units.len(),
            roots = dirty.roots.len(),
            actions = actions.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "rescanned"
        );
        Some(actions)
    }
}

async fn run(
    mut scanner: Scanner,
    host: Arc<Host>,
    supervisor: mpsc::Sender<Command>,
    debounce: Duration,
    shutdown: CancellationToken,
    mut rx: mpsc::Receiver<PathBuf>,
    overflow: Arc<AtomicBool>,
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
        paths.remove(&PathBuf::new());
        let everything = overflow.swap(false, Ordering::Relaxed);
        // Scanning reads files: do it off the async workers.
        let joined = tokio::task::spawn_blocking(move || {
            let actions = scanner.batch(&paths, everything);
            (scanner, actions)
        })
        .await;
        let actions;
        (scanner, actions) = match joined {
            Ok(done) => done,
            Err(error) => {
                tracing::error!(%error, "discovery rescan failed; live updates stop");
                return;
            }
        };
        let Some(actions) = actions else { continue };
        for action in &actions {
            host.emit_to_sessions(action);
        }
        // Launch specs are not part of the tree: a rescan with no action can still change
        // one. When a rescanned unit's servers changed at all, the supervisor gets the whole
        // set again (shared pointers) and diffs it; only changed servers restart. An edit
        // that leaves every server as it was costs the supervisor nothing, however many
        // servers there are.
        if !scanner.catalog.take_servers_changed() {
            continue;
        }
        if supervisor
            .send(scanner.catalog.supervision())
            .await
            .is_err()
        {
            return;
        }
    }
}
