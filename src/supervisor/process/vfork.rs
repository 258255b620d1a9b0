//! Starting a server process without copying the proxy: `clone(CLONE_VM | CLONE_VFORK)` on a
//! small stack of its own, as glibc's `posix_spawn` does, with the steps a server needs first.
//!
//! A `fork` copies the proxy's page tables and makes its memory copy-on-write (the proxy's
//! next writes fault), and the child tears the copy down again at `exec`: with fifty servers
//! starting on two cores that was most of the proxy's start-up beyond the servers' own. Here
//! the child borrows the proxy's memory while the forking thread waits, so it touches only
//! what was prepared for it before the clone: it sets its parent-death signal, checks its
//! parent, joins its cgroup, takes its pipes, process group and folder, resets its signals
//! and `exec`s (trying `PATH` as `execvp` does); what failed comes back as an errno written
//! to the shared plan, and the parent reaps the child.

use std::ffi::{c_char, c_int, c_void, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The child's stack: its function, a few libc calls and their frames (glibc's `posix_spawn`
/// uses 32 KiB plus the paths).
const STACK: usize = 64 * 1024;

std::thread_local! {
    /// The stack of this thread's children, made once: one child uses it at a time (the
    /// clone returns once that child has `exec`ed or exited), and it is never zeroed (the
    /// child writes its frames before it reads them), so a start touches only the pages the
    /// child's frames reach, not 64 KiB of fresh or cleared memory.
    static CHILD_STACK: std::cell::Cell<Option<Box<[std::mem::MaybeUninit<u8>]>>> =
        const { std::cell::Cell::new(None) };
}

/// Everything the child needs, made before the clone (the child may not allocate).
#[derive(Debug)]
pub struct Plan {
    /// The files to `exec`, in order: the command itself when it names a path, else the
    /// command in each folder of `PATH` (the server's `PATH` when its environment sets one).
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
    /// The server's cgroup: its folder, to be cloned into (`CLONE_INTO_CGROUP`), and its
    /// `cgroup.procs`, to join by writing "0" where that cannot be done.
    cgroup: Option<(OwnedFd, CString)>,
}

impl Plan {
    /// The plan for `command args`, with `env` as the whole environment, in `cwd`, in the
    /// cgroup at `cgroup` (best effort). `None` when a text holds a NUL byte (it cannot be
    /// passed to `exec`).
    pub fn new(
        command: &str,
        args: &[String],
        env: &[(Vec<u8>, Vec<u8>)],
        cwd: Option<&std::path::Path>,
        cgroup: Option<&std::path::Path>,
    ) -> Option<Self> {
        let search = env
            .iter()
            .find(|(name, _)| name == b"PATH")
            .map(|(_, value)| value.clone())
            .or_else(|| std::env::var_os("PATH").map(|p| p.into_encoded_bytes()))
            .unwrap_or_else(|| b"/bin:/usr/bin".to_vec());
        let candidates = candidates(command.as_bytes(), &search)?;
        let argv = std::iter::once(command)
            .chain(args.iter().map(String::as_str))
            .map(|a| CString::new(a).ok())
            .collect::<Option<Vec<_>>>()?;
        let envp = env
            .iter()
            .map(|(name, value)| {
                let mut pair = Vec::with_capacity(name.len() + value.len() + 1);
                pair.extend_from_slice(name);
                pair.push(b'=');
                pair.extend_from_slice(value);
                CString::new(pair).ok()
            })
            .collect::<Option<Vec<_>>>()?;
        let cwd = match cwd {
            Some(cwd) => Some(CString::new(cwd.as_os_str().as_encoded_bytes()).ok()?),
            None => None,
        };
        let cgroup = cgroup.and_then(|folder| {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd = rustix::fs::open(folder, flags, Mode::empty()).ok()?;
            Some((fd, super::cgroup::procs_file(folder)?))
        });
        Some(Self {
            candidates,
            argv,
            envp,
            cwd,
            cgroup,
        })
    }
}

/// The files `execvp` would try for `command` with `search` as `PATH`.
fn candidates(command: &[u8], search: &[u8]) -> Option<Vec<CString>> {
    if command.contains(&b'/') || command.is_empty() {
        return Some(vec![CString::new(command).ok()?]);
    }
    search
        .split(|&b| b == b':')
        .map(|folder| {
            let mut path = folder.to_vec();
            if !path.is_empty() && !path.ends_with(b"/") {
                path.push(b'/');
            }
            path.extend_from_slice(command);
            CString::new(path).ok()
        })
        .collect()
}

/// A started child: its pid and the proxy's ends of its pipes.
#[derive(Debug)]
pub struct Started {
    pub pid: rustix::process::Pid,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// What the child reads (pointers into the plan and the pipes' child ends) and writes (the
/// errno of the step that failed).
#[repr(C)]
struct Shared {
    candidates: *const *const c_char,
    candidate_count: usize,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    cgroup_procs: *const c_char,
    parent: libc::pid_t,
    /// The child's ends, made stdin, stdout and stderr.
    fds: [c_int; 3],
    error: AtomicI32,
}

/// Start the plan's child with fresh pipes for stdin, stdout and stderr, in a process group
/// of its own, SIGKILLed by the kernel when the calling thread ends (run it on a thread that
/// lives as long as the proxy). Returns once the child has `exec`ed, or with why it could not.
pub fn start(plan: &Plan) -> std::io::Result<Started> {
    let (stdin_read, stdin_write) = pipe()?;
    let (stdout_read, stdout_write) = pipe()?;
    let (stderr_read, stderr_write) = pipe()?;
    let pointers = |texts: &[CString]| -> Vec<*const c_char> {
        texts
            .iter()
            .map(|t| t.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let candidates = pointers(&plan.candidates);
    let argv = pointers(&plan.argv);
    let envp = pointers(&plan.envp);
    let mut shared = Shared {
        candidates: candidates.as_ptr(),
        candidate_count: plan.candidates.len(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: plan.cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        cgroup_procs: std::ptr::null(),
        parent: rustix::process::getpid().as_raw_nonzero().get(),
        fds: [
            stdin_read.as_raw_fd(),
            stdout_write.as_raw_fd(),
            stderr_write.as_raw_fd(),
        ],
        error: AtomicI32::new(0),
    };
    let mut stack = CHILD_STACK
        .take()
        .unwrap_or_else(|| Box::new_uninit_slice(STACK + 16));
    let offset = stack.as_ptr().align_offset(16);
    // SAFETY: `offset + STACK` is within the allocation (16 spare bytes).
    let base = unsafe { stack.as_mut_ptr().add(offset) }.cast::<u8>();
    // SAFETY: the stack is ours and outlives the child's use of it (CLONE_VFORK: the clone
    // returns once the child has `exec`ed or exited). Every signal is blocked around the
    // clone so that no handler of the proxy runs in the child on shared memory (the child
    // resets them before it unblocks). The child function reads `shared` (alive until the
    // clone returns) and makes only system calls.
    let pid = unsafe {
        let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        let mut before = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigfillset(all.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), before.as_mut_ptr());
        // Straight into the server's cgroup where the kernel can (Linux 5.7): no migration
        // afterwards, which takes a lock every fork and exit of the system waits for.
        let mut pid = match &plan.cgroup {
            Some((folder, _)) => into_cgroup::clone(folder, base, STACK, &shared),
            None => -1,
        };
        if pid < 0 {
            shared.cgroup_procs = plan
                .cgroup
                .as_ref()
                .map_or(std::ptr::null(), |(_, procs)| procs.as_ptr());
            pid = libc::clone(
                in_child,
                base.add(STACK).cast::<c_void>(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                std::ptr::from_ref(&shared).cast_mut().cast::<c_void>(),
            );
        }
        let clone_error = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, before.as_ptr(), std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    CHILD_STACK.set(Some(stack));
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return Err(std::io::Error::other("clone returned no pid"));
    };
    let error = shared.error.load(Ordering::Acquire);
    if error != 0 {
        // It exited without `exec`: reap it.
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        return Err(std::io::Error::from_raw_os_error(error));
    }
    drop((stdin_read, stdout_write, stderr_write));
    Ok(Started {
        pid,
        stdin: stdin_write,
        stdout: stdout_read,
        stderr: stderr_read,
    })
}

/// `clone3(2)` with `CLONE_INTO_CGROUP`, which the C library offers no wrapper for: the child
/// starts on its own stack, so the call and the jump to [`in_child`] are written out.
pub(super) mod into_cgroup {
    use super::{in_child, Shared};
    use std::ffi::c_void;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Cleared once the kernel refused (no `clone3`, no `CLONE_INTO_CGROUP`, a seccomp filter
    /// answering ENOSYS): the caller's fallback from then on.
    static ABLE: AtomicBool = AtomicBool::new(cfg!(target_arch = "x86_64"));

    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

    /// Whether children still go straight into their cgroups.
    #[cfg(test)]
    pub(in crate::supervisor::process) fn able() -> bool {
        ABLE.load(Ordering::Relaxed)
    }

    /// `struct clone_args` (Linux 5.7: up to `cgroup`).
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }

    /// The child's pid, or -1 (errno set) when it could not be cloned this way.
    ///
    /// # Safety
    /// As `libc::clone` with `CLONE_VM | CLONE_VFORK`: `base..base + size` is a 16-aligned
    /// stack the child alone uses, `shared` lives until this returns, signals are blocked.
    pub(super) unsafe fn clone(
        folder: &OwnedFd,
        base: *mut u8,
        size: usize,
        shared: &Shared,
    ) -> i32 {
        if !ABLE.load(Ordering::Relaxed) {
            return -1;
        }
        let args = CloneArgs {
            flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP,
            exit_signal: libc::SIGCHLD as u64,
            stack: base as u64,
            stack_size: size as u64,
            cgroup: folder.as_raw_fd() as u64,
            ..CloneArgs::default()
        };
        let arg = std::ptr::from_ref(shared).cast_mut().cast::<c_void>();
        let pid = raw(&args, arg);
        if pid < 0 {
            let errno = -pid as i32;
            if matches!(
                errno,
                libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM
            ) {
                ABLE.store(false, Ordering::Relaxed);
            }
            *libc::__errno_location() = errno;
            return -1;
        }
        pid as i32
    }

    /// The system call; in the child (on its new stack) `child(arg)`, which never returns.
    #[cfg(target_arch = "x86_64")]
    unsafe fn raw(args: &CloneArgs, arg: *mut c_void) -> i64 {
        let entry: extern "C" fn(*mut c_void) -> i32 = in_child;
        let ret: i64;
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            // The child: a fresh stack (its top 16-aligned), no frame above.
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, 60", // exit (never reached: `in_child` exits)
            "syscall",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") std::ptr::from_ref(args),
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") entry,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
        ret
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn raw(_: &CloneArgs, _: *mut c_void) -> i64 {
        -i64::from(libc::ENOSYS)
    }
}

/// A close-on-exec pipe whose ends are both above 2, so that putting the child's ends on 0, 1
/// and 2 never overwrites another of its pipes.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let above = |fd: OwnedFd| -> std::io::Result<OwnedFd> {
        if fd.as_raw_fd() > 2 {
            return Ok(fd);
        }
        Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
    };
    Ok((above(read)?, above(write)?))
}

/// The child: never returns (it `exec`s, or exits with the failed step's errno in the plan).
extern "C" fn in_child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `Shared`, alive until this child `exec`s or exits.
    let shared = unsafe { &*arg.cast::<Shared>() };
    // SAFETY: see `prepare_and_exec`.
    let error = unsafe { prepare_and_exec(shared) };
    shared.error.store(error.max(1), Ordering::Release);
    // SAFETY: ends this child only (it is a process of its own).
    unsafe { libc::_exit(127) }
}

fn errno() -> c_int {
    // SAFETY: the calling thread's errno (in the child, the suspended parent thread's, as in
    // glibc's own `posix_spawn`).
    unsafe { *libc::__errno_location() }
}

/// The steps before `exec`; returns the errno of the one that failed.
///
/// # Safety
/// Runs in the cloned child only, on memory shared with the waiting parent: it makes system
/// calls on what `shared` points at and allocates nothing.
unsafe fn prepare_and_exec(shared: &Shared) -> c_int {
    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
        return errno();
    }
    // The proxy may have died before the prctl: then nobody would signal this child.
    if libc::getppid() != shared.parent {
        return libc::ESRCH;
    }
    // Into the server's own cgroup ("0": the writing process). Best effort: a server that
    // cannot join still carries the proxy's marker.
    if !shared.cgroup_procs.is_null() {
        let fd = libc::open(shared.cgroup_procs, libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
    for (target, &fd) in shared.fds.iter().enumerate() {
        // Every pipe end is above 2 (`pipe`), so dup2 makes a fresh copy without close-on-exec.
        if libc::dup2(fd, target as c_int) < 0 {
            return errno();
        }
    }
    if libc::setpgid(0, 0) != 0 {
        return errno();
    }
    if !shared.cwd.is_null() && libc::chdir(shared.cwd) != 0 {
        return errno();
    }
    // The proxy's handlers mean nothing to the server: back to the default (a handler would
    // otherwise run here, on the parent's memory, once signals are unblocked), and SIGPIPE,
    // which Rust programs ignore, too, as `std::process::Command` does.
    for signal in 1..=libc::SIGRTMAX() {
        let mut action = std::mem::zeroed::<libc::sigaction>();
        if libc::sigaction(signal, std::ptr::null(), &mut action) != 0 {
            continue;
        }
        let handled = action.sa_sigaction != libc::SIG_DFL && action.sa_sigaction != libc::SIG_IGN;
        if handled || signal == libc::SIGPIPE {
            let mut default = std::mem::zeroed::<libc::sigaction>();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &default, std::ptr::null_mut());
        }
    }
    let mut none = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    libc::sigemptyset(none.as_mut_ptr());
    libc::pthread_sigmask(libc::SIG_SETMASK, none.as_ptr(), std::ptr::null_mut());
    // Each candidate in turn, as `execvp`: a file that is not there (or not a file) sends it on
    // to the next; permission denied is remembered and said if nothing else runs.
    let mut denied = false;
    let mut last = libc::ENOENT;
    for n in 0..shared.candidate_count {
        libc::execve(*shared.candidates.add(n), shared.argv, shared.envp);
        last = errno();
        match last {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return last,
        }
    }
    if denied {
        libc::EACCES
    } else {
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_searched_as_execvp_searches_it() {
        let got = |command: &str, search: &str| -> Vec<String> {
            candidates(command.as_bytes(), search.as_bytes())
                .unwrap()
                .into_iter()
                .map(|c| c.into_string().unwrap())
                .collect()
        };
        assert_eq!(got("sh", "/usr/bin:/bin/"), ["/usr/bin/sh", "/bin/sh"]);
        // An empty entry is the current folder.
        assert_eq!(got("sh", ":/bin"), ["sh", "/bin/sh"]);
        assert_eq!(got("./tool", "/bin"), ["./tool"]);
        assert_eq!(got("/opt/x/srv", "/bin"), ["/opt/x/srv"]);
        assert!(candidates(b"a\0b", b"/bin").is_none());
    }

    /// The address of this thread's children's stack, if it has one.
    fn stack_of_this_thread() -> Option<usize> {
        CHILD_STACK.with(|cell| {
            let stack = cell.take();
            let address = stack.as_ref().map(|s| s.as_ptr() as usize);
            cell.set(stack);
            address
        })
    }

    #[test]
    fn a_thread_reuses_one_stack_and_each_start_reports_its_own_outcome() {
        std::thread::spawn(|| {
            assert_eq!(stack_of_this_thread(), None);
            let missing = Plan::new(
                "/nonexistent/ahp-proxy-no-such-program",
                &[],
                &[],
                None,
                None,
            )
            .expect("a plan");
            let shell = Plan::new("/bin/sh", &["-c".into(), "exit 7".into()], &[], None, None)
                .expect("a plan");
            let mut first = None;
            for round in 0..3 {
                let refused = start(&missing).expect_err("there is no such program");
                assert_eq!(refused.raw_os_error(), Some(libc::ENOENT), "round {round}");
                let started = start(&shell).expect("the shell starts");
                let (_, status) = rustix::process::waitpid(
                    Some(started.pid),
                    rustix::process::WaitOptions::empty(),
                )
                .expect("waitpid")
                .expect("the shell's status");
                assert_eq!(status.exit_status(), Some(7), "round {round}");
                let stack = stack_of_this_thread();
                assert!(stack.is_some(), "round {round}: the stack is kept");
                assert_eq!(
                    *first.get_or_insert(stack),
                    stack,
                    "round {round}: the same stack"
                );
            }
        })
        .join()
        .expect("the starting thread");
    }
}
