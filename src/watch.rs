//! Live discovery: notify events on the watched folders, debounced into batches, mapped to
//! the catalog units they touch, rescanned, and committed to the host as minimal actions;
//! the plugins AHP clients publish, read as they come and watched while published.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, Changes, Dirty};
use crate::discovery::Context;
use crate::host::client_plugins::Published;
use crate::host::Host;
use crate::supervisor::Command;

/// Changed paths buffered between notify's thread and the debouncer; overflow means
/// "rescan everything" rather than unbounded memory.
const EVENT_QUEUE: usize = 8192;

/// A batch never waits longer than this many debounce periods, even under a steady stream.
const MAX_BATCH_PERIODS: u32 = 10;

/// What notify's thread tells the debouncer.
#[derive(Debug)]
enum Noticed {
    /// This path changed.
    Path(PathBuf),
    /// Events were lost (notify's own overflow, or the queue to here was full): everything
    /// is rescanned (the overflow flag says so even when this could not be queued).
    Lost,
}

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
    let (tx, rx) = mpsc::channel::<Noticed>(EVENT_QUEUE);
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
                    full |= tx.try_send(Noticed::Path(path)).is_err();
                }
                lost || full
            }
            Err(_) => true,
        };
        if lost {
            flag.store(true, Ordering::Relaxed);
            let _ = tx.try_send(Noticed::Lost);
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
    let inputs = Inputs {
        paths: rx,
        overflow,
        published: host.client_plugins(),
    };
    Ok(tokio::spawn(run(
        scanner, host, supervisor, debounce, shutdown, inputs,
    )))
}

/// What the watcher waits on: changed paths (and whether some were lost), and the plugins
/// AHP clients publish.
struct Inputs {
    paths: mpsc::Receiver<Noticed>,
    overflow: Arc<AtomicBool>,
    published: tokio::sync::watch::Receiver<Published>,
}

/// One round of work.
enum Work {
    /// A debounced batch of changed paths; `true` when events were lost.
    Paths(BTreeSet<PathBuf>, bool),
    /// The published client plugins changed.
    Published(Published),
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
        // A watch belongs to a folder, not to the path it was asked for: unwatching one path
        // (a client plugin withdrawn, a touched target about to be re-added) also ends the
        // watches of every wanted path on the same folders (the same folder by another path,
        // a parent watched with everything in it, a child). Those are watched again below.
        let mut dropped = Vec::new();
        for (path, recursive) in self.watched.difference(&wanted) {
            let _ = self.watcher.unwatch(path);
            dropped.push((real_path(path), *recursive));
        }
        for (path, recursive) in &wanted {
            if touched.contains(path) && self.watched.contains(&(path.clone(), *recursive)) {
                let _ = self.watcher.unwatch(path);
                dropped.push((real_path(path), *recursive));
            }
        }
        let mut now = BTreeSet::new();
        let mut added = BTreeSet::new();
        for (path, recursive) in wanted {
            let alive = self.watched.contains(&(path.clone(), recursive))
                && !touched.contains(&path)
                && (dropped.is_empty() || {
                    let real = real_path(&path);
                    !dropped
                        .iter()
                        .any(|(gone, gone_all)| shares_folders(&real, recursive, gone, *gone_all))
                });
            if alive {
                now.insert((path, recursive));
                continue;
            }
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
    fn batch(&mut self, paths: &BTreeSet<PathBuf>, everything: bool) -> Option<Changes> {
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
        let mut changes = self.catalog.refresh(&dirty, &self.ctx);
        changes.extend(self.watch_new_targets());
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
            clients = dirty.clients.len(),
            actions = changes.every.len() + changes.sessions.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "rescanned"
        );
        Some(changes)
    }

    /// Take the plugins AHP clients publish now: read what is new or changed, then watch
    /// their folders (and read once more what changed before the watch was armed).
    fn publish(&mut self, published: &Published) -> Changes {
        let mut changes = self.catalog.publish(published, &self.ctx);
        changes.extend(self.watch_new_targets());
        tracing::debug!(
            plugins = published.len(),
            actions = changes.sessions.len(),
            "client plugins read"
        );
        changes
    }

    /// Watch what the catalog asks for now; rescan what the targets that were not watched
    /// before hold (they may have changed before their watch was armed).
    fn watch_new_targets(&mut self) -> Changes {
        let added = self.sync_watches(&BTreeSet::new());
        let mut again = Dirty::default();
        for path in &added {
            again.merge(self.catalog.dirty_for(path));
        }
        if again.is_empty() {
            return Changes::default();
        }
        self.catalog.refresh(&again, &self.ctx)
    }
}

async fn run(
    mut scanner: Scanner,
    host: Arc<Host>,
    supervisor: mpsc::Sender<Command>,
    debounce: Duration,
    shutdown: CancellationToken,
    mut inputs: Inputs,
) {
    let mut publishing = true;
    loop {
        let work = tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = inputs.published.changed(), if publishing => match changed {
                Ok(()) => Work::Published(inputs.published.borrow_and_update().clone()),
                Err(_) => {
                    publishing = false; // the host is gone; files still count
                    continue;
                }
            },
            path = inputs.paths.recv() => match path {
                Some(first) => match debounced(first, &mut inputs, debounce, &shutdown).await {
                    Some(work) => work,
                    None => return,
                },
                None => return,
            },
        };
        // Scanning reads files: do it off the async workers.
        let joined = tokio::task::spawn_blocking(move || {
            let changes = match &work {
                Work::Paths(paths, everything) => scanner.batch(paths, *everything),
                Work::Published(published) => Some(scanner.publish(published)),
            };
            (scanner, changes)
        })
        .await;
        let changes;
        (scanner, changes) = match joined {
            Ok(done) => done,
            Err(error) => {
                tracing::error!(%error, "discovery rescan failed; live updates stop");
                return;
            }
        };
        let Some(changes) = changes else { continue };
        for action in &changes.every {
            host.emit_to_sessions(action);
        }
        for (session, action) in &changes.sessions {
            host.emit_to_session(session, action);
        }
        // What the replaced containers and scans held, and the actions, are free now (the
        // actions dropped first: a trim that ran before their drop would miss them); give
        // it back.
        drop(changes);
        tokio::task::spawn_blocking(crate::heap::give_back);
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

/// The batch that starts with `first`: every path that follows until a quiet `debounce`
/// (at most [`MAX_BATCH_PERIODS`] of them). `None` on shutdown or when the watcher is gone.
async fn debounced(
    first: Noticed,
    inputs: &mut Inputs,
    debounce: Duration,
    shutdown: &CancellationToken,
) -> Option<Work> {
    let mut paths = BTreeSet::new();
    let mut take = |noticed: Noticed| {
        if let Noticed::Path(path) = noticed {
            paths.insert(path);
        }
    };
    take(first);
    let deadline = Instant::now() + debounce * MAX_BATCH_PERIODS;
    loop {
        let quiet = (Instant::now() + debounce).min(deadline);
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep_until(quiet) => break,
            noticed = inputs.paths.recv() => take(noticed?),
        }
    }
    let everything = inputs.overflow.swap(false, Ordering::Relaxed);
    Some(Work::Paths(paths, everything))
}

/// Whether watching `a` (with everything in it when `a_all`) and `b` share a folder's watch.
fn shares_folders(a: &std::path::Path, a_all: bool, b: &std::path::Path, b_all: bool) -> bool {
    a == b || (a_all && b.starts_with(a)) || (b_all && a.starts_with(b))
}

/// `path` with symbolic links and `..` resolved when it exists (then two paths to one folder
/// compare equal), else as given.
fn real_path(path: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
