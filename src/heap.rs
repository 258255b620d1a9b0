//! The process's allocator, and giving back to the operating system the memory it holds
//! after large releases (a rescan of a big manifest, expired MCP sessions).

/// mimalloc, for the binary and everything else that links this library. Each call's
/// buffers are made on one worker thread and often freed on another; glibc's malloc takes
/// the owning arena's lock for that (about a fifth of the proxy's CPU per call at 32 HTTP
/// sessions, docs/benchmarks.md), mimalloc hands the block back without a lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[allow(unsafe_code)]
extern "C" {
    /// mimalloc's collection: the calling thread's free pages, and with `force` every
    /// arena's pages waiting for their purge delay, returned to the system.
    fn mi_collect(force: bool);
}

/// Return free pages to the system now rather than after mimalloc's purge delay. Takes
/// a few milliseconds on a large heap: call it off the async workers (`spawn_blocking`).
pub fn give_back() {
    #[allow(unsafe_code)]
    // SAFETY: mi_collect takes no pointers; it only walks the allocator's own structures,
    // which it locks or owns per thread.
    unsafe {
        mi_collect(true);
    }
}
