//! The threads that fork stdio servers: a few that live as long as the proxy. Linux sends a
//! child its parent-death signal when the *thread* that forked it exits, not the process.
//!
//! A runtime's blocking threads exit after ten idle seconds, so a server forked on one of
//! them was SIGKILLed ten seconds after a quiet moment (and restarted as if it had crashed).
//! Forking also waits for the child's `exec` and its cgroup write, so it stays off the async
//! workers: jobs go to these threads, one per core up to [`MAX_THREADS`], in arrival order.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

/// Enough to start fifty servers at once without queueing behind one slow `exec`, few enough
/// to cost nothing (each thread sleeps on the queue).
pub const MAX_THREADS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

static QUEUE: OnceLock<Option<Sender<Job>>> = OnceLock::new();

/// Run `job` on one of the spawning threads (inside the caller's runtime, so that tokio's
/// child reaping works) and await what it returns. `None` when no spawning thread could be
/// started at all (the system refuses threads), or when the job panicked.
pub async fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let queue = QUEUE.get_or_init(start_threads).as_ref()?;
    let runtime = tokio::runtime::Handle::current();
    let (answer, answered) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _entered = runtime.enter();
        let _ = answer.send(job());
    });
    queue.send(job).ok()?;
    answered.await.ok()
}

/// One thread per core, up to [`MAX_THREADS`], sharing one queue; `None` if not even one
/// would start.
fn start_threads() -> Option<Sender<Job>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (queue, jobs) = channel::<Job>();
    let jobs = Arc::new(Mutex::new(jobs));
    let mut started = 0;
    for n in 0..cores.clamp(1, MAX_THREADS) {
        let jobs = jobs.clone();
        let thread = std::thread::Builder::new()
            .name(format!("ahp-spawn-{n}"))
            .spawn(move || serve(&jobs));
        match thread {
            Ok(_) => started += 1,
            Err(error) => tracing::warn!(%error, "cannot start a thread to spawn servers on"),
        }
    }
    (started > 0).then_some(queue)
}

/// Take jobs until the queue's sender is gone (never, in the proxy: it is a static). A job
/// that panics is caught, so the thread and the servers it forked live on.
fn serve(jobs: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let jobs = jobs.lock().unwrap_or_else(|p| p.into_inner());
            jobs.recv()
        };
        let Ok(job) = job else { return };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}
