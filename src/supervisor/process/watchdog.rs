//! The watchdog: a copy of the proxy forked in `main` before any thread starts (config read,
//! nothing else running), of no parent's and of its own session. It holds the read end of
//! a pipe whose write end only the proxy holds; the proxy sends it the cgroup base once made,
//! and when the pipe closes (the proxy exited, or was killed, even with SIGKILL) the watchdog
//! kills everything carrying the proxy's marker or sitting in its cgroups, removes the
//! cgroups, and exits.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::process::{Pid, WaitOptions};

use super::cgroup;
use super::sweep::{kill_all, Targets};
use super::tree;

/// Ends the cgroup base's path on the pipe (no path holds it).
const END: u8 = 0;
/// Longest cgroup base the watchdog takes (Linux's `PATH_MAX`).
const PATH_MAX: usize = 4096;

/// A watchdog forked and detached, not yet told the cgroup base. The proxy takes it up in
/// [`super::Ownership::establish`] ([`Forked::adopt`]).
#[derive(Debug)]
pub struct Forked {
    /// This proxy, uniquely: `<pid>.<start time in clock ticks>` (the marker's prefix).
    token: String,
    /// The pipe's write end: never closed while the proxy lives.
    pipe: OwnedFd,
    /// The process between the proxy and the watchdog, which exits at once: reaped before
    /// the proxy becomes a subreaper, so the watchdog cannot become the proxy's child.
    between: Pid,
}

impl Forked {
    /// Fork the watchdog of this proxy. Call it where the process has one thread (in `main`
    /// before any runtime or thread starts): `None` if it has more (checked, not assumed),
    /// or the fork fails; the proxy then runs without a watchdog and says so.
    pub fn start() -> Option<Forked> {
        let (token, threads) = tree::own_token_and_threads();
        if threads != Some(1) {
            return None;
        }
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
        // SAFETY: the process has one thread (checked above, from /proc), so the copy is
        // whole: no lock of another thread's is held in it. The middle process only forks and
        // calls _exit; the watchdog runs ordinary single-threaded code and ends with _exit, so
        // no destructor or exit handler of the proxy's runs twice.
        #[allow(unsafe_code)]
        let between = unsafe {
            match libc::fork() {
                -1 => return None,
                0 => {
                    drop(write);
                    if libc::fork() == 0 {
                        watch(read, &token);
                    }
                    libc::_exit(0)
                }
                pid => pid,
            }
        };
        drop(read);
        Some(Forked {
            token,
            pipe: write,
            between: Pid::from_raw(between)?,
        })
    }

    /// Take the watchdog up: wait for the middle process to be gone, tell the watchdog the
    /// cgroup base (if any), and give back the token and the pipe to hold for life.
    pub fn adopt(self, cgroups: Option<&Path>) -> (String, OwnedFd) {
        let _ = rustix::process::waitpid(Some(self.between), WaitOptions::empty());
        if let Some(path) = cgroups {
            let mut message = path.as_os_str().as_bytes().to_vec();
            message.push(END);
            // A few bytes into an empty pipe: never blocks, never short.
            let _ = rustix::io::write(&self.pipe, &message);
        }
        (self.token, self.pipe)
    }
}

/// The watchdog proper (never returns): leave the proxy's session and descriptors, wait for
/// the pipe to close, then kill everything the proxy started and remove its cgroups.
fn watch(pipe: OwnedFd, token: &str) -> ! {
    let _ = rustix::process::setsid();
    let _ = rustix::thread::set_name(c"ahp-watchdog");
    let pipe = keep_only(pipe);
    let cgroups = read_until_closed(std::fs::File::from(pipe));
    // The proxy is gone: nothing it started may stay.
    kill_all(&Targets::of_proxy(token, None, cgroups.clone()));
    if let Some(path) = cgroups {
        cgroup::Base::at(path).kill_all_and_remove();
    }
    // SAFETY: ends this process without running the proxy's exit handlers (it is a copy).
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(0)
    }
}

/// Close every descriptor of the proxy's the watchdog inherited (a harness's stdout held
/// open would keep it from seeing the proxy end) but `pipe`; 0, 1 and 2 become /dev/null.
fn keep_only(pipe: OwnedFd) -> OwnedFd {
    // Above 2, whatever the proxy was started with.
    let pipe = match pipe.as_raw_fd() {
        0..=2 => rustix::io::fcntl_dupfd_cloexec(&pipe, 3).unwrap_or(pipe),
        _ => pipe,
    };
    if let Ok(null) = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDWR,
        rustix::fs::Mode::empty(),
    ) {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
        let _ = rustix::stdio::dup2_stderr(&null);
        // Closed below if above 2; one of 0, 1, 2 (the proxy had it closed) if not.
        std::mem::forget(null);
    }
    let keep = pipe.as_raw_fd().unsigned_abs();
    // SAFETY: closes descriptors only: the watchdog never returns into the proxy's code,
    // so no copy of the proxy's values that own them is used or dropped again.
    #[allow(unsafe_code)]
    unsafe {
        if keep > 3 {
            libc::close_range(3, keep - 1, 0);
        }
        libc::close_range(keep + 1, u32::MAX, 0);
    }
    pipe
}

/// Read the pipe until it closes: the cgroup base, if the proxy sends one.
fn read_until_closed(mut pipe: impl Read) -> Option<PathBuf> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 512];
    loop {
        match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                if received.len() < PATH_MAX + 1 {
                    received.extend_from_slice(&buffer[..n]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    cgroup_base(&received)
}

/// The cgroup base in what the proxy sent: the bytes before the first [`END`], if there is
/// one and they name an absolute path.
fn cgroup_base(received: &[u8]) -> Option<PathBuf> {
    let end = received.iter().position(|b| *b == END)?;
    let path = Path::new(std::ffi::OsStr::from_bytes(&received[..end]));
    (path.is_absolute() && end <= PATH_MAX).then(|| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_base_is_what_comes_before_the_end_and_absolute() {
        let mut sent = b"/sys/fs/cgroup/user.slice/ahp-proxy-7".to_vec();
        sent.push(END);
        assert_eq!(
            cgroup_base(&sent),
            Some(PathBuf::from("/sys/fs/cgroup/user.slice/ahp-proxy-7"))
        );
        // Nothing sent (no cgroups), a path cut short, a relative one: no base.
        assert_eq!(cgroup_base(b""), None);
        assert_eq!(cgroup_base(b"/sys/fs/cgroup/user.sl"), None);
        assert_eq!(cgroup_base(b"relative\0"), None);
        let mut long = vec![b'/'; PATH_MAX + 1];
        long.push(END);
        assert_eq!(cgroup_base(&long), None);
    }

    #[test]
    fn the_pipe_is_read_to_its_end_whatever_the_chunks() {
        // Read in 512-byte chunks: a path longer than a chunk still comes whole.
        let path = format!("/{}", "a".repeat(900));
        let mut sent = path.clone().into_bytes();
        sent.push(END);
        assert_eq!(
            read_until_closed(std::io::Cursor::new(sent)),
            Some(PathBuf::from(path))
        );
        assert_eq!(read_until_closed(std::io::Cursor::new(Vec::new())), None);
    }
}
