//! The threads that start stdio servers: a few that live as long as the proxy. Linux sends a
//! child its parent-death signal when the *thread* that started it exits, not the process.
//!
//! A runtime's blocking threads exit after ten idle seconds, so a server started on one of
//! them was SIGKILLed ten seconds after a quiet moment (and restarted as if it had crashed).
//! Starting one waits for the child's `exec`, so it stays off the async workers: jobs go to
//! these threads in arrival order, and a job that finds none idle starts one more, up to
//! [`MAX_THREADS`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

/// How many starts may wait for their child's `exec` at once. The wait is not work: the new
/// child waits for a core behind the servers already starting, so on a 2-core VM two
/// threads left cores idle and fifty servers took ~76 ms to be ready against ~67 ms with
/// eight (more did no better; docs/benchmarks.md). Threads sleep on the queue when idle.
pub const MAX_THREADS: usize = 8;

type Job = Box<dyn FnOnce() + Send>;

/// The queue and the threads taking from it.
struct Pool {
    queue: Sender<Job>,
    jobs: Arc<Mutex<Receiver<Job>>>,
    /// Threads started so far.
    started: AtomicUsize,
    /// Threads waiting on the queue right now.
    idle: Arc<AtomicUsize>,
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// Run `job` on one of the spawning threads (inside the caller's runtime, so that tokio's
/// child reaping works) and await what it returns. `None` when no spawning thread could be
/// started at all (the system refuses threads), or when the job panicked.
pub async fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let pool = POOL.get_or_init(Pool::new);
    if !pool.grow() {
        return None;
    }
    let runtime = tokio::runtime::Handle::current();
    let (answer, answered) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _entered = runtime.enter();
        let _ = answer.send(job());
    });
    pool.queue.send(job).ok()?;
    answered.await.ok()
}

impl Pool {
    fn new() -> Pool {
        let (queue, jobs) = channel::<Job>();
        Pool {
            queue,
            jobs: Arc::new(Mutex::new(jobs)),
            started: AtomicUsize::new(0),
            idle: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Start one more thread if none is idle and fewer than [`MAX_THREADS`] run (a failure
    /// is logged: the threads there are take the job). Whether at least one thread runs.
    fn grow(&self) -> bool {
        let started = self.started.load(Ordering::Acquire);
        if self.idle.load(Ordering::Acquire) > 0 || started >= MAX_THREADS {
            return started > 0;
        }
        // Claim the thread's number first: two jobs at once start two threads, not one twice.
        let Ok(n) = self.started.compare_exchange(
            started,
            started + 1,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) else {
            return true;
        };
        let (jobs, idle) = (self.jobs.clone(), self.idle.clone());
        let thread = std::thread::Builder::new()
            .name(format!("ahp-spawn-{n}"))
            .spawn(move || serve(&jobs, &idle));
        match thread {
            Ok(_) => true,
            Err(error) => {
                self.started.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!(%error, "cannot start a thread to start servers on");
                n > 0
            }
        }
    }
}

/// Take jobs until the queue's sender is gone (never, in the proxy: it is a static). A job
/// that panics is caught, so the thread and the servers it started live on.
fn serve(jobs: &Mutex<Receiver<Job>>, idle: &AtomicUsize) {
    loop {
        idle.fetch_add(1, Ordering::AcqRel);
        let job = {
            let jobs = jobs.lock().unwrap_or_else(|p| p.into_inner());
            jobs.recv()
        };
        idle.fetch_sub(1, Ordering::AcqRel);
        let Ok(job) = job else { return };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_that_find_no_thread_idle_start_more_up_to_the_limit() {
        // Twenty jobs at once, each holding its thread a while: more than one thread takes
        // them, and none beyond the limit is ever started (other tests may share the pool).
        let jobs = (0..20).map(|_| {
            run(|| {
                std::thread::sleep(std::time::Duration::from_millis(30));
                std::thread::current().name().map(str::to_string)
            })
        });
        let names: std::collections::BTreeSet<String> = futures_util::future::join_all(jobs)
            .await
            .into_iter()
            .map(|name| name.flatten().expect("every job ran on a named thread"))
            .collect();
        assert!(names.len() > 1, "{names:?}");
        for name in &names {
            let n: usize = name
                .strip_prefix("ahp-spawn-")
                .and_then(|n| n.parse().ok())
                .unwrap_or(usize::MAX);
            assert!(n < MAX_THREADS, "{name} of {names:?}");
        }
        let started = POOL.get().map(|p| p.started.load(Ordering::Acquire));
        assert!(
            started.is_some_and(|n| (2..=MAX_THREADS).contains(&n)),
            "{started:?}"
        );
    }
}
