//! The free-space guard: a write-back runs only while the store's disk has
//! room for it and a reserve. sled treats a failed write as fatal (its
//! error sticks until the store is reopened, and reads fail with it), so
//! bitsled checks the space before it writes instead of meeting `ENOSPC`:
//! short of space, a write-back leaves every change in memory, writes are
//! refused with [`Error::DiskFull`], reads go on, and the next check that
//! finds room lifts the refusal.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::store::Store;
use crate::error::{Error, Result};

/// Why writes are refused: the space a check found and wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskShortage {
    /// Bytes free for the store's directory when last checked.
    pub free_bytes: u64,
    /// Bytes the held-back write-back and the reserve need.
    pub needed_bytes: u64,
    /// When the shortage began, Unix milliseconds.
    pub since_ms: u64,
}

/// How many bytes of disk a write-back's batch is counted for. sled's log
/// grows by more than the bytes it is given: new versions of the tree
/// nodes a batch touches, consolidations, and segments it cannot reuse
/// until later cleaning. Measured: a graceful stop writing back about 8 MB
/// of 64 KiB values grew sled's file by 22-27 MB (`server_disk_full`), so
/// about three times the batch; where the estimate fell short of that, the
/// write met `ENOSPC`, which sled cannot recover from.
pub(super) const STORE_GROWTH_PER_BATCH_BYTE: u64 = 3;

/// Free bytes a write-back of `batch_bytes` needs with `reserve` left over.
fn needed_bytes(reserve: u64, batch_bytes: u64) -> u64 {
    reserve.saturating_add(batch_bytes.saturating_mul(STORE_GROWTH_PER_BATCH_BYTE))
}

/// The guard's state.
pub(super) struct SpaceGuard {
    reserve: AtomicU64,
    /// Mirrors `shortage.is_some()`: the write path reads only this.
    short: AtomicBool,
    shortage: Mutex<Option<DiskShortage>>,
}

impl SpaceGuard {
    pub(super) fn new(reserve_bytes: u64) -> SpaceGuard {
        SpaceGuard { reserve: AtomicU64::new(reserve_bytes), short: AtomicBool::new(false), shortage: Mutex::new(None) }
    }

    /// Checks that the store has room for a write-back of `batch_bytes`
    /// (counted [`STORE_GROWTH_PER_BATCH_BYTE`] times) plus the reserve,
    /// recording the outcome (at `now_ms`).
    ///
    /// # Errors
    /// [`Error::DiskFull`] if it has not; a store error reading the space.
    pub(super) fn check(&self, store: &dyn Store, batch_bytes: u64, now_ms: u64) -> Result<()> {
        // A store that cannot tell (no such call on the platform) is never short.
        let Some(free) = store.available_bytes()? else { return Ok(()) };
        let needed = needed_bytes(self.reserve.load(Ordering::Relaxed), batch_bytes);
        let mut s = self.shortage.lock();
        if free >= needed {
            *s = None;
            self.short.store(false, Ordering::Release);
            return Ok(());
        }
        let since_ms = s.map_or(now_ms, |old| old.since_ms);
        *s = Some(DiskShortage { free_bytes: free, needed_bytes: needed, since_ms });
        self.short.store(true, Ordering::Release);
        Err(Error::DiskFull { free_bytes: free, needed_bytes: needed })
    }

    /// Whether the last check found too little space (cheap: the write
    /// path asks before every write).
    pub(super) fn is_short(&self) -> bool {
        self.short.load(Ordering::Acquire)
    }

    /// The current shortage, if any.
    pub(super) fn shortage(&self) -> Option<DiskShortage> {
        *self.shortage.lock()
    }

    pub(super) fn reserve_bytes(&self) -> u64 {
        self.reserve.load(Ordering::Relaxed)
    }

    pub(super) fn set_reserve_bytes(&self, bytes: u64) {
        self.reserve.store(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: a write-back of `b` bytes needs the reserve plus three
    /// times `b` free (sled's log grows by about that much), without
    /// overflowing.
    #[test]
    fn a_batch_is_counted_with_the_log_growth() {
        assert_eq!(needed_bytes(1000, 500), 2500);
        assert_eq!(needed_bytes(64 << 20, 0), 64 << 20);
        assert_eq!(needed_bytes(1, u64::MAX / 2), u64::MAX);
    }
}
