//! A cgroup (v2) per server, where the machine lets the proxy make them: folders under a
//! base folder inside the proxy's own cgroup, so every process a server starts, daemons
//! that changed session and group included, is found and killed together.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The proxy's folder of server cgroups (`<its own cgroup>/ahp-proxy-<pid>`).
#[derive(Debug, Clone)]
pub struct Base {
    path: PathBuf,
}

impl Base {
    /// Make the base folder, if cgroup v2 is mounted and the proxy may write inside its own
    /// cgroup; `None` otherwise (no error: the proxy then relies on markers and the
    /// process tree).
    pub fn create() -> Option<Self> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = cgroup2_mount(&mountinfo)?;
        let own = own_cgroup(&std::fs::read_to_string("/proc/self/cgroup").ok()?)?;
        let parent = Path::new(&mount).join(own.trim_start_matches('/'));
        let path = parent.join(format!("ahp-proxy-{}", std::process::id()));
        std::fs::create_dir(&path).ok()?;
        // Writing a process into a child needs write access to the parent's `cgroup.procs`
        // (the common ancestor of where it comes from and where it goes).
        let writable = std::fs::OpenOptions::new()
            .write(true)
            .open(parent.join("cgroup.procs"))
            .is_ok();
        if !writable {
            let _ = std::fs::remove_dir(&path);
            return None;
        }
        Some(Self { path })
    }

    /// The base folder of a proxy whose base is at `path` (the watchdog's view).
    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Make the cgroup of server number `serial`.
    pub fn server(&self, serial: u64) -> Option<PathBuf> {
        let path = self.path.join(format!("server-{serial}"));
        std::fs::create_dir(&path).ok().map(|()| path)
    }

    /// Kill everything in every server cgroup and remove them all, the base included.
    pub fn kill_all_and_remove(&self) {
        kill(&self.path);
        if let Ok(entries) = std::fs::read_dir(&self.path) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    remove(&entry.path());
                }
            }
        }
        remove(&self.path);
    }
}

/// Cgroup `folder`'s `cgroup.procs`, as the C string a starting child opens to join it;
/// `None` if the path holds a NUL byte.
pub fn procs_file(folder: &Path) -> Option<std::ffi::CString> {
    let path = folder.join("cgroup.procs");
    std::ffi::CString::new(path.into_os_string().into_encoded_bytes()).ok()
}

/// The mount point of the cgroup v2 hierarchy, from `/proc/self/mountinfo`.
pub fn cgroup2_mount(mountinfo: &str) -> Option<String> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fstype = after.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| before.split_whitespace().nth(4).map(str::to_string))?
    })
}

/// The process's cgroup v2 path, from `/proc/self/cgroup` (the `0::<path>` line).
pub fn own_cgroup(cgroup: &str) -> Option<String> {
    cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_string)
}

/// The processes in cgroup `path` and its children.
pub fn members(path: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_to_string(path.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pids.extend(members(&entry.path()));
            }
        }
    }
    pids
}

/// SIGKILL every process in cgroup `path` and below, at once (`cgroup.kill`, Linux 5.14);
/// on older kernels the caller kills [`members`] one by one.
pub fn kill(path: &Path) -> bool {
    std::fs::write(path.join("cgroup.kill"), "1").is_ok()
}

/// Remove cgroup `path` once its processes are gone (they leave it as they exit: a few
/// tries, a few milliseconds apart).
pub fn remove(path: &Path) {
    for _ in 0..50 {
        match std::fs::remove_dir(path) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_and_own_path_are_read() {
        let mountinfo = "\
25 30 0:22 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 30 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            cgroup2_mount(mountinfo).as_deref(),
            Some("/sys/fs/cgroup/unified")
        );
        assert_eq!(cgroup2_mount("1 2 0:1 / / rw - ext4 /dev/vda rw\n"), None);
        let cgroup = "4:memory:/x\n0::/user.slice/user-1000.slice/session-2.scope\n";
        assert_eq!(
            own_cgroup(cgroup).as_deref(),
            Some("/user.slice/user-1000.slice/session-2.scope")
        );
        assert_eq!(own_cgroup("4:memory:/x\n"), None);
    }
}
