//! The process's allocator, and giving back to the operating system the memory it holds
//! after large releases (a rescan of a big manifest, expired MCP sessions).

/// The allocator the binary installs (`main.rs`; the library leaves the choice to whoever
/// links it, e.g. the fuzz targets keep the system's, which sanitizers watch): mimalloc.
/// Each call's buffers are made on one worker thread and often freed on another; glibc's
/// malloc takes the owning arena's lock for that (about a fifth of the proxy's CPU per call
/// at 32 HTTP sessions, docs/benchmarks.md), mimalloc hands the block back without a lock.
pub type Allocator = mimalloc::MiMalloc;

/// The one value of [`Allocator`], for `#[global_allocator]`.
pub const ALLOCATOR: Allocator = mimalloc::MiMalloc;

#[allow(unsafe_code)]
extern "C" {
    /// mimalloc's collection: the calling thread's free pages, and with `force` every
    /// arena's pages waiting for their purge delay, returned to the system.
    fn mi_collect(force: bool);
}

/// Return free pages to the system now rather than after mimalloc's purge delay. Takes
/// a few milliseconds on a large heap: call it off the async workers (`spawn_blocking`).
/// In a program that did not install [`ALLOCATOR`] there is nothing to collect.
pub fn give_back() {
    #[allow(unsafe_code)]
    // SAFETY: mi_collect takes no pointers; it only walks the allocator's own structures,
    // which it locks or owns per thread.
    unsafe {
        mi_collect(true);
    }
}
