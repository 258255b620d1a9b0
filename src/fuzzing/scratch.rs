//! A scratch folder per thread for the targets that read files (discovery scans real paths):
//! under `$AHP_PROXY_FUZZ_SCRATCH` (else the temp dir), removed when the thread ends.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// One thread's scratch folder.
pub struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::var_os("AHP_PROXY_FUZZ_SCRATCH")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let root = base.join(format!(
            "ahp-proxy-fuzz-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("cannot create the fuzzing scratch folder");
        // Canonical, so that ids and bounds checks see the same path the scans do.
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        Self { root }
    }

    /// The folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// An empty folder `name` inside the scratch folder (emptied if it was there).
    pub fn fresh_dir(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create a scratch folder");
        dir
    }

    /// Write `bytes` to `path` (inside the scratch folder), creating its parents.
    pub fn write(path: &Path, bytes: &[u8]) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("cannot create a scratch folder");
        }
        std::fs::write(path, bytes).expect("cannot write a scratch file");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// Run `f` with this thread's scratch folder (created on first use).
pub fn with<R>(f: impl FnOnce(&Scratch) -> R) -> R {
    SCRATCH.with(|cell| {
        let mut slot = cell.borrow_mut();
        let scratch = slot.get_or_insert_with(Scratch::new);
        f(scratch)
    })
}
