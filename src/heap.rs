//! Gives memory the allocator holds back to the operating system after large releases (a
//! rescan of a big manifest, expired MCP sessions): glibc keeps freed pages otherwise.

/// Return free heap pages to the system (glibc's `malloc_trim`); elsewhere nothing. Takes a
/// few milliseconds on a large heap: call it off the async workers (`spawn_blocking`).
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}
