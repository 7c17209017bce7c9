//! The process heap as glibc's allocator sees it: how much is allocated,
//! how much it holds from the system, and giving free memory back.
//!
//! sled's memory is not in bitsled's budgets (DESIGN.md section 12); these
//! figures tell it apart from memory the allocator merely keeps (INFO's
//! `allocator_*` fields). On other targets they are unknown.

use std::sync::atomic::{AtomicU64, Ordering};

/// Trims the background threads ran, and their time in microseconds.
static TRIMS: AtomicU64 = AtomicU64::new(0);
static TRIM_MICROS: AtomicU64 = AtomicU64::new(0);

/// The allocator's figures for the whole process, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes in allocated blocks (small blocks and mmapped large ones).
    pub allocated: u64,
    /// Bytes the allocator holds from the system for the heap: allocated
    /// blocks and the free space between them that it has not returned.
    pub held: u64,
    /// Times a background thread returned free heap memory to the system
    /// (see DESIGN.md section 12), and the microseconds those took.
    pub trims: u64,
    /// See `trims`.
    pub trim_micros: u64,
}

/// The heap's figures now; `None` where the allocator does not say
/// (targets other than glibc). Walks every arena under its lock: for
/// reports, not hot paths.
#[allow(unsafe_code)]
pub fn heap_stats() -> Option<HeapStats> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments and returns a plain struct
        // of counters by value.
        let m = unsafe { libc::mallinfo2() };
        let mapped = m.hblkhd as u64;
        Some(HeapStats {
            allocated: m.uordblks as u64 + mapped,
            held: m.arena as u64 + mapped,
            trims: TRIMS.load(Ordering::Relaxed),
            trim_micros: TRIM_MICROS.load(Ordering::Relaxed),
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Gives the heap's free memory back to the system. glibc's heaps keep
/// up to their trim threshold of free memory each, and free pages inside
/// a heap are kept until `malloc_trim` returns them.
#[allow(unsafe_code)]
pub(crate) fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's own heaps;
    // it takes no pointers and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The process's resident memory (`VmRSS`), where Linux says.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Growth of the resident bytes beyond the accounted ones (see
/// [`Trimmer::round`]) since the last trim that lets [`Trimmer`] trim
/// again.
const TRIM_GROWTH_BYTES: u64 = 32 << 20;

/// The least time between two trims: a trim walks the free blocks under
/// their arena's lock (15-79 ms with a few hundred MiB of heap in the
/// soak), stalling allocations in that arena meanwhile.
const TRIM_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Returns free heap memory to the system when the resident set grows
/// past what the caller accounts for. glibc gives memory back on its own
/// only from the top of a heap, past a threshold that grows with the
/// largest block freed, so a process whose blocks come and go (cached
/// pages, write-back batches, sled's buffers) keeps its peak heap
/// resident. The background thread calls [`Trimmer::round`] each round.
/// It reads only `VmRSS`: the allocator's own figures ([`heap_stats`])
/// walk the heap under its locks.
#[derive(Debug, Default)]
pub(crate) struct Trimmer {
    last: Option<std::time::Instant>,
    /// The resident bytes beyond the accounted ones right after the last
    /// trim.
    floor: u64,
}

impl Trimmer {
    /// Trims when the resident set is past `budget` (the memory budgets:
    /// below it a trim's pause buys nothing the budgets promise) and the
    /// resident bytes beyond `accounted` (the bytes the caches hold:
    /// growth there is live data, which a trim cannot return) have grown
    /// [`TRIM_GROWTH_BYTES`] past what the last trim left, at most once
    /// per [`TRIM_INTERVAL`]. True when it trimmed.
    pub(crate) fn round(&mut self, accounted: u64, budget: u64) -> bool {
        if self.last.is_some_and(|t| t.elapsed() < TRIM_INTERVAL) {
            return false;
        }
        let Some(rss) = resident_bytes() else { return false };
        if rss <= budget || rss.saturating_sub(accounted) <= self.floor + TRIM_GROWTH_BYTES {
            return false;
        }
        let start = std::time::Instant::now();
        return_freed_memory();
        self.last = Some(std::time::Instant::now());
        self.floor = resident_bytes().unwrap_or(rss).saturating_sub(accounted);
        TRIMS.fetch_add(1, Ordering::Relaxed);
        TRIM_MICROS.fetch_add(u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: on glibc, a live allocation is counted as allocated and
    /// held, and the allocator never holds less than it has allocated.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_live_block_is_counted() {
        let before = heap_stats().unwrap();
        let block = std::hint::black_box(vec![1u8; 8 << 20]);
        let during = heap_stats().unwrap();
        assert!(during.allocated >= before.allocated + (8 << 20) - 4096, "{before:?} -> {during:?}");
        assert!(during.held >= during.allocated);
        drop(block);
        return_freed_memory();
    }

    /// Resident bytes beyond the allocated ones.
    fn resident_extra() -> Option<u64> {
        Some(resident_bytes()?.saturating_sub(heap_stats()?.allocated))
    }

    /// Invariant: when freed blocks in the middle of the heap keep far
    /// more than [`TRIM_GROWTH_BYTES`] resident, a round trims and the
    /// resident bytes beyond the allocated ones fall; a second round within
    /// [`TRIM_INTERVAL`] does nothing.

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_round_returns_free_blocks_between_live_ones() {
        // 128 MiB in 16 KiB blocks (below glibc's mmap threshold, so in a
        // heap), every 16th kept: the free ones cannot shrink the heap's top.
        let mut blocks: Vec<Vec<u8>> = (0..8192).map(|i| vec![i as u8 | 1; 16 << 10]).collect();
        let kept: Vec<Vec<u8>> = blocks.iter_mut().step_by(16).map(std::mem::take).collect();
        drop(blocks);
        let before = resident_extra().unwrap();
        let mut trimmer = Trimmer::default();
        assert!(before > TRIM_GROWTH_BYTES, "{} MiB free and resident", before >> 20);
        // Growth the caller accounts for (live data) is not trimmed.
        assert!(!trimmer.round(resident_bytes().unwrap(), 0), "a trim of accounted bytes");
        assert!(!trimmer.round(0, u64::MAX), "a trim within the budget");
        assert!(trimmer.round(0, 0), "no trim with {} MiB free and resident", before >> 20);
        let after = resident_extra().unwrap();
        assert!(after + (48 << 20) < before, "{} -> {} MiB", before >> 20, after >> 20);
        assert!(!trimmer.round(0, 0), "a second trim within the interval");
        assert!(kept.iter().all(|b| b[0] & 1 == 1));
    }
}
