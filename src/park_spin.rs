//! Before a worker of `serve --stdio` parks, it watches the pipes the next message comes
//! on (the harness's stdin, the servers' stdouts) for a short, bounded time.
//!
//! On a VM, waking an idle vCPU costs tens of µs, and a call through the stdio front wakes
//! the proxy twice (the harness's request, the server's answer). Spinning on `poll(2)`
//! (zero timeout) keeps the vCPU busy while an answer is due; when a watched pipe becomes
//! readable the worker parks and finds it at once. Off (zero budget) unless configured.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The spin budget in ns; 0: off.
static BUDGET_NS: AtomicU64 = AtomicU64::new(0);
/// The watched descriptors (a descriptor may be listed more than once).
static WATCHED: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

/// Spin at most `budget` before each park (zero: never).
pub fn set_budget(budget: Duration) {
    let ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
    BUDGET_NS.store(ns, Ordering::Relaxed);
}

/// A descriptor watched while this lives.
#[derive(Debug)]
pub struct Watched(RawFd);

impl Watched {
    /// Watch `fd` (a pipe or socket the proxy reads).
    pub fn new(fd: RawFd) -> Self {
        WATCHED.lock().unwrap_or_else(|p| p.into_inner()).push(fd);
        Watched(fd)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let mut watched = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = watched.iter().position(|fd| *fd == self.0) {
            watched.swap_remove(at);
        }
    }
}

thread_local! {
    static POLLED: std::cell::RefCell<Vec<libc::pollfd>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The runtime's park hook: return when a watched descriptor is readable (or hung up), or
/// when the budget is spent.
pub fn before_park() {
    let budget = BUDGET_NS.load(Ordering::Relaxed);
    if budget == 0 {
        return;
    }
    POLLED.with_borrow_mut(|polled| {
        polled.clear();
        polled.extend(
            WATCHED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|fd| libc::pollfd {
                    fd: *fd,
                    events: libc::POLLIN,
                    revents: 0,
                }),
        );
        if polled.is_empty() {
            return;
        }
        let budget = Duration::from_nanos(budget);
        let start = Instant::now();
        loop {
            // SAFETY: `polled` is a valid array of `polled.len()` pollfd structs.
            #[allow(unsafe_code)]
            let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, 0) };
            if ready != 0 || start.elapsed() >= budget {
                return;
            }
            std::hint::spin_loop();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn an_idle_pipe_waits_out_the_budget_and_a_readable_one_ends_the_spin() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let _watched = Watched::new(reader.as_raw_fd());
        set_budget(Duration::from_millis(20));
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
