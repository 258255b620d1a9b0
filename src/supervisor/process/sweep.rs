//! What the proxy kills when a server stops or dies, when it shuts down, and (as the
//! watchdog) after it is gone: every process carrying a marker, in a cgroup, or below a root.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use super::{cgroup, tree};

/// The environment variable every server (and so everything it starts) carries:
/// `<proxy token>/<server serial>`.
pub const MARKER: &str = "AHP_PROXY_OWNER";

/// What to kill: processes whose environment holds `entry` (exactly, or as a prefix), the
/// live processes below `root`, and the members of `cgroup`. Never the proxy itself.
pub struct Targets {
    /// `NAME=value` (or its start, with `prefix`).
    pub entry: Vec<u8>,
    /// Match `entry` as a prefix.
    pub prefix: bool,
    /// A process whose whole tree goes (not itself).
    pub root: Option<i32>,
    /// A cgroup whose members go.
    pub cgroup: Option<PathBuf>,
}

impl Targets {
    /// Everything proxy `token` started: every process whose marker names it (whichever
    /// server), the members of its cgroup base `cgroup`, and what lies below `root`.
    pub fn of_proxy(token: &str, root: Option<i32>, cgroup: Option<PathBuf>) -> Self {
        Self {
            entry: format!("{MARKER}={token}/").into_bytes(),
            prefix: true,
            root,
            cgroup,
        }
    }

    /// The live targets among `procs` now.
    pub fn find(&self, procs: &[tree::Proc]) -> BTreeSet<i32> {
        let me = std::process::id() as i32;
        let mut found: BTreeSet<i32> = BTreeSet::new();
        if let Some(root) = self.root {
            found.extend(tree::below(procs, root));
        }
        for p in procs {
            if !p.zombie && p.pid != me && tree::environment_has(p.pid, &self.entry, self.prefix) {
                found.insert(p.pid);
            }
        }
        if let Some(path) = &self.cgroup {
            found.extend(cgroup::members(path));
        }
        found.remove(&me);
        found.retain(|pid| procs.iter().any(|p| p.pid == *pid && !p.zombie));
        found
    }
}

/// SIGKILL every target until none is left (a process may fork while its siblings die;
/// at most 50 rounds, 10 ms apart). Blocking: it reads `/proc` and sleeps.
pub fn kill_all(targets: &Targets) {
    if let Some(path) = &targets.cgroup {
        cgroup::kill(path);
    }
    for _ in 0..50 {
        let found = targets.find(&tree::snapshot());
        if found.is_empty() {
            return;
        }
        for pid in found {
            super::signal(pid, rustix::process::Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
