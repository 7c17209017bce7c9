//! Cache-line prefetch hints: the index lookup of a command reads a chain
//! of cache lines (the shard's map slot, the bucket, its heads, its name
//! prefix), each address found in the line before, so on an index larger
//! than the CPU's caches each read waits for main memory in turn. A
//! server reading a pipeline of commands asks for the next command's
//! lines while the current one runs, so their waits overlap.

/// Whether [`line`] asks the CPU for anything on this target (x86-64
/// only): elsewhere the hints' callers skip their work.
pub(crate) const HINTS: bool = cfg!(target_arch = "x86_64");

/// Asks the CPU to bring the cache line holding `addr` into its caches.
/// A hint only: any address is allowed, and nothing is read or changed.
#[allow(unsafe_code)]
#[inline]
pub(crate) fn line(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache. It does not dereference
    // the address (an unmapped or freed address is ignored, never a
    // fault) and has no effect a program can observe besides timing; SSE
    // is part of every x86-64 CPU.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}
