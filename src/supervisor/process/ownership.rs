//! The proxy as owner of every process its servers start. It is their subreaper (orphans
//! come back to it, not to init), each server carries a marker in its environment and, where
//! cgroup v2 allows, lives in a cgroup of its own. So whatever a server leaves behind (a
//! grandchild in its group, a daemon in a session of its own) is found and killed when the
//! server stops or dies, when the proxy shuts down, and by the watchdog when the proxy is
//! killed outright.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::sweep::{kill_all, Targets, MARKER};
use super::{cgroup, tree};

static OWNERSHIP: OnceLock<Ownership> = OnceLock::new();

/// What the proxy knows of the servers it started.
pub struct Ownership {
    /// This proxy, uniquely: `<pid>.<start time in clock ticks>`.
    token: String,
    cgroups: Option<cgroup::Base>,
    serial: AtomicU64,
    /// Every server process started and not yet cleared away, by pid.
    servers: Mutex<HashMap<u32, Server>>,
    /// Held shared by each spawn from before its fork until its pid is registered, and
    /// exclusively by whoever compares the process table with `servers`: spawns run side by
    /// side, and none is ever half done (forked, not registered) during a comparison.
    spawning: RwLock<()>,
    /// The write end of the watchdog's pipe, held for the proxy's whole life (its closing
    /// is the watchdog's signal).
    _watchdog: Option<std::os::fd::OwnedFd>,
}

/// One server process's marker and cgroup.
struct Server {
    marker: String,
    cgroup: Option<PathBuf>,
    /// Its leftovers were killed once its process ended (it may still await its reaper).
    swept: bool,
}

/// What [`super::spawn`] gives a new server: its marker (`NAME=value`) and its cgroup.
pub struct Plan {
    /// `AHP_PROXY_OWNER=<token>/<serial>`.
    pub marker: String,
    /// Its own cgroup, when the proxy has them.
    pub cgroup: Option<PathBuf>,
}

/// The janitor that clears away after servers that died, until [`Owned::release`].
pub struct Owned {
    stop: CancellationToken,
    janitor: tokio::task::JoinHandle<()>,
}

impl Ownership {
    /// The proxy's ownership of its servers, once [`Ownership::establish`] ran.
    pub fn get() -> Option<&'static Ownership> {
        OWNERSHIP.get()
    }

    /// Become the owner of every process servers will start (call once, in the runtime,
    /// before any server starts): make the cgroup base where the machine allows it and
    /// `cgroups` (`[supervisor] cgroups`) asks for it, take up the `watchdog` forked in
    /// `main` (none: the proxy runs without), become a subreaper, and clear away after
    /// servers as they die.
    pub fn establish(cgroups: bool, watchdog: Option<super::watchdog::Forked>) -> Owned {
        let ownership = OWNERSHIP.get_or_init(|| {
            let cgroups = cgroups.then(cgroup::Base::create).flatten();
            let base = cgroups.as_ref().map(|b| b.path());
            let (token, watchdog) = match watchdog.map(|w| w.adopt(base)) {
                Some((token, pipe)) => (token, Some(pipe)),
                None => (super::tree::own_token_and_threads().0, None),
            };
            // After the watchdog's middle process is reaped: the watchdog is nobody's child.
            super::become_subreaper();
            tracing::info!(
                cgroups = cgroups.as_ref().map(|b| b.path().display().to_string()),
                watchdog = watchdog.is_some(),
                "owning every process the servers start"
            );
            Ownership {
                token,
                cgroups,
                serial: AtomicU64::new(0),
                servers: Mutex::new(HashMap::new()),
                spawning: RwLock::new(()),
                _watchdog: watchdog,
            }
        });
        let stop = CancellationToken::new();
        let janitor = tokio::spawn(janitor(ownership, stop.clone()));
        Owned { stop, janitor }
    }

    /// A marker and (when the proxy has cgroups) a cgroup for the next server.
    pub fn plan(&self) -> Plan {
        let serial = self.serial.fetch_add(1, Ordering::Relaxed) + 1;
        Plan {
            marker: format!("{MARKER}={}/{serial}", self.token),
            cgroup: self.cgroups.as_ref().and_then(|base| base.server(serial)),
        }
    }

    /// Server process `pid`'s marker and cgroup, while it is registered.
    fn marker_and_cgroup(&self, pid: u32) -> Option<(String, Option<PathBuf>)> {
        self.lock()
            .get(&pid)
            .map(|s| (s.marker.clone(), s.cgroup.clone()))
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u32, Server>> {
        self.servers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for spawns under way to register their pids, and hold new ones back.
    fn no_spawns(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.spawning.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Start a server process with `spawn` and remember it under `plan`. No comparison of the
    /// process table with the registry runs meanwhile ([`Ownership::spawning`]), so a child
    /// that dies at once is never taken for an orphan to reap; a failed start's cgroup is
    /// removed. Other spawns run at the same time.
    pub fn spawn_registered(
        &self,
        plan: Plan,
        spawn: impl FnOnce() -> std::io::Result<super::Spawned>,
    ) -> std::io::Result<super::Spawned> {
        let _spawning = self.spawning.read().unwrap_or_else(|p| p.into_inner());
        match spawn() {
            Ok(spawned) => {
                if let Some(pid) = spawned.child.id() {
                    self.lock().insert(
                        pid,
                        Server {
                            marker: plan.marker,
                            cgroup: plan.cgroup,
                            swept: false,
                        },
                    );
                }
                Ok(spawned)
            }
            Err(error) => {
                if let Some(path) = plan.cgroup {
                    cgroup::remove(&path);
                }
                Err(error)
            }
        }
    }

    /// Server process `pid` has ended and been reaped (`gone`), or is being stopped:
    /// SIGKILL everything it left (everything carrying its marker, in its cgroup or below it
    /// in the tree); once it is gone, forget it and remove its cgroup.
    pub async fn clear(&self, pid: u32, gone: bool) {
        let Some((marker, cgroup)) = self.marker_and_cgroup(pid) else {
            return;
        };
        kill_all_off_runtime(Targets {
            entry: marker.into_bytes(),
            prefix: false,
            root: (!gone).then_some(pid as i32),
            cgroup: cgroup.clone(),
        })
        .await;
        {
            let mut registry = self.lock();
            if !gone {
                if let Some(server) = registry.get_mut(&pid) {
                    server.swept = true;
                }
                return;
            }
            registry.remove(&pid);
        }
        if let Some(path) = cgroup {
            // It retries a few ms apart until the last process has left.
            let _ = tokio::task::spawn_blocking(move || cgroup::remove(&path)).await;
        }
    }

    /// SIGTERM everything server `pid` started (its marker, its cgroup, its tree), not the
    /// server itself: a polite first step beside the SIGTERM to its group.
    /// (`/proc` is read on a blocking thread.)
    pub async fn ask_to_stop(&self, pid: u32) {
        let Some((marker, cgroup)) = self.marker_and_cgroup(pid) else {
            return;
        };
        let targets = Targets {
            entry: marker.into_bytes(),
            prefix: false,
            root: Some(pid as i32),
            cgroup,
        };
        let _ = tokio::task::spawn_blocking(move || {
            for target in targets.find(&tree::snapshot()) {
                if target != pid as i32 {
                    super::signal(target, rustix::process::Signal::TERM);
                }
            }
        })
        .await;
    }

    /// Shutdown, after every server stopped: kill whatever is left (anything carrying this
    /// proxy's marker, in its cgroups, or below it in the tree: orphans it adopted), reap
    /// them, and remove the cgroups.
    async fn release_all(&'static self) {
        let pids: Vec<u32> = self.lock().keys().copied().collect();
        for pid in pids {
            self.clear(pid, false).await;
        }
        kill_all_off_runtime(Targets::of_proxy(
            &self.token,
            Some(std::process::id() as i32),
            self.cgroups.as_ref().map(|b| b.path().to_path_buf()),
        ))
        .await;
        let _ = tokio::task::spawn_blocking(|| {
            self.reap_orphans();
            if let Some(base) = &self.cgroups {
                base.kill_all_and_remove();
            }
        })
        .await;
    }

    /// Reap children that are not server processes (orphans the proxy adopted as their
    /// subreaper) once they have exited; server processes are tokio's to reap.
    fn reap_orphans(&self) {
        let me = std::process::id() as i32;
        let _no_spawns = self.no_spawns();
        let registry = self.lock();
        for p in tree::snapshot() {
            if p.ppid == me && p.zombie && !registry.contains_key(&(p.pid as u32)) {
                super::reap(p.pid);
            }
        }
    }

    /// Server processes that ended: `(pid, true)` for those already reaped, `(pid, false)`
    /// for zombies not yet swept. The registry is locked before the snapshot: a server
    /// spawned after the snapshot would be missing from it and taken for one that ended.
    fn ended(&self) -> Vec<(u32, bool)> {
        let _no_spawns = self.no_spawns();
        let registry = self.lock();
        let procs = tree::snapshot();
        registry
            .iter()
            .filter_map(|(pid, server)| {
                let state = procs.iter().find(|p| p.pid == *pid as i32);
                match state {
                    None => Some((*pid, true)),
                    Some(p) if p.zombie && !server.swept => Some((*pid, false)),
                    Some(_) => None,
                }
            })
            .collect()
    }

    /// After some child ended: clear away after server processes that died (their leftovers
    /// killed at once; forgotten once reaped) and reap adopted orphans.
    /// (`/proc` is read on a blocking thread.)
    async fn tidy(&'static self) {
        let ended = tokio::task::spawn_blocking(|| self.ended())
            .await
            .unwrap_or_default();
        for (pid, gone) in ended {
            self.clear(pid, gone).await;
        }
        let _ = tokio::task::spawn_blocking(|| self.reap_orphans()).await;
    }
}

impl Owned {
    /// Shutdown, after the supervisor stopped every server: stop the janitor, then kill and
    /// reap whatever is left and remove the cgroups.
    pub async fn release(self) {
        self.stop.cancel();
        let _ = self.janitor.await;
        if let Some(ownership) = Ownership::get() {
            ownership.release_all().await;
        }
    }
}

/// On every SIGCHLD (and every few seconds, for deaths signalled while it was busy), tidy up.
async fn janitor(ownership: &'static Ownership, stop: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut children = signal(SignalKind::child()).ok();
    loop {
        let child = async {
            match children.as_mut() {
                Some(children) => {
                    children.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = child => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        ownership.tidy().await;
    }
}

/// [`kill_all`] on a blocking thread: it reads `/proc` and sleeps between rounds.
async fn kill_all_off_runtime(targets: Targets) {
    let _ = tokio::task::spawn_blocking(move || kill_all(&targets)).await;
}
