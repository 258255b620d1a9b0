//! Before the runtime's worker parks, it watches what the next message comes on (the harness's
//! stdin with `--stdio`, the MCP HTTP front's connections, the servers' stdouts, the HTTP
//! upstreams' connections) for a short, bounded time.
//!
//! On a VM, waking an idle vCPU costs tens of µs, and a call through the proxy wakes it
//! twice (the harness's request, the server's answer). Spinning on `epoll_wait(2)` (zero
//! timeout, over the watched descriptors) keeps the vCPU busy while an answer is due; when a
//! watched one becomes readable the worker parks and finds it at once. Off (zero budget)
//! unless configured.

use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rustix::event::{epoll, Timespec};

/// The spin budget in ns; 0: off.
static BUDGET_NS: AtomicU64 = AtomicU64::new(0);
/// The interest list of the watched descriptors (made with the first; `None` if it could not
/// be), and how many it holds. Every worker asks it at once, without a lock.
static INTEREST: OnceLock<Option<OwnedFd>> = OnceLock::new();
static WATCHED: AtomicUsize = AtomicUsize::new(0);

/// Spin at most `budget` before each park (zero: never).
pub fn set_budget(budget: Duration) {
    let ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
    BUDGET_NS.store(ns, Ordering::Relaxed);
}

fn interest() -> Option<&'static OwnedFd> {
    INTEREST
        .get_or_init(|| epoll::create(epoll::CreateFlags::CLOEXEC).ok())
        .as_ref()
}

/// A descriptor watched while this lives (through a copy of it, registered in the interest
/// list, so the watch ends with this and never outlives the copy).
#[derive(Debug)]
pub struct Watched(Option<OwnedFd>);

impl Watched {
    /// Watch `fd` (a pipe or socket the proxy reads). Best effort: a descriptor that cannot
    /// be watched is not (the worker then parks at once, as without the spin); nothing is
    /// watched while the spin is off (set the budget first).
    pub fn new(fd: BorrowedFd<'_>) -> Self {
        if BUDGET_NS.load(Ordering::Relaxed) == 0 {
            return Watched(None);
        }
        let copy = interest().and_then(|interest| {
            let copy = fd.try_clone_to_owned().ok()?;
            let flags = epoll::EventFlags::IN;
            epoll::add(interest, &copy, epoll::EventData::new_u64(0), flags).ok()?;
            Some(copy)
        });
        if copy.is_some() {
            WATCHED.fetch_add(1, Ordering::Relaxed);
        }
        Watched(copy)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let (Some(copy), Some(interest)) = (self.0.take(), interest()) {
            let _ = epoll::delete(interest, &copy);
            WATCHED.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The runtime's park hook: return when a watched descriptor is readable (or hung up), or
/// when the budget is spent.
pub fn before_park() {
    let budget = BUDGET_NS.load(Ordering::Relaxed);
    if budget == 0 || WATCHED.load(Ordering::Relaxed) == 0 {
        return;
    }
    let Some(interest) = interest() else {
        return;
    };
    let budget = Duration::from_nanos(budget);
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut ready = [MaybeUninit::<epoll::Event>::uninit(); 1];
    let start = Instant::now();
    loop {
        let found = epoll::wait(interest, &mut ready, Some(&now)).map_or(1, |(r, _)| r.len());
        if found != 0 || start.elapsed() >= budget {
            return;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn an_idle_pipe_waits_out_the_budget_and_a_readable_one_ends_the_spin() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        set_budget(Duration::from_millis(20));
        let _watched = Watched::new(reader.as_fd());
        let start = Instant::now();
        before_park();
        assert!(start.elapsed() >= Duration::from_millis(20));
        // With a budget of an hour, returning at all means the pipe ended the spin.
        std::io::Write::write_all(&mut writer, b"x").unwrap();
        set_budget(Duration::from_secs(3600));
        before_park();
        set_budget(Duration::ZERO);
    }
}
