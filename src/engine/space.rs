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
    /// Bytes the held-back write-back (its changes counted three times,
    /// for sled's log growth) and the reserve need.
    pub needed_bytes: u64,
    /// When the shortage began, Unix milliseconds.
    pub since_ms: u64,
}

/// How many bytes of disk each byte of a write-back's changes (dirty pages,
/// metadata) is counted for. sled's log grows by more than the bytes it is
/// given: new versions of the tree nodes a batch touches, consolidations,
/// and segments it cannot reuse until later cleaning. Measured: a graceful
/// stop writing back about 8 MB of 64 KiB values grew sled's file by 21-27
/// MB (`server_disk_full`), so up to about three times the batch; where the
/// estimate fell short of that, the write met `ENOSPC`, which sled cannot
/// recover from.
pub(super) const STORE_GROWTH_PER_BATCH_BYTE: u64 = 3;

/// Disk bytes a write-back may take: `changed_bytes` of dirty pages and
/// metadata, grown as sled grows its log, and `logged_bytes` of logged
/// pages that only a page fold writes whole (counted once: most
/// write-backs write none of them).
pub(super) fn write_back_bytes(changed_bytes: u64, logged_bytes: u64) -> u64 {
    changed_bytes.saturating_mul(STORE_GROWTH_PER_BATCH_BYTE).saturating_add(logged_bytes)
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

    /// Checks that the store has `needed_bytes` free besides the reserve,
    /// recording the outcome (at `now_ms`).
    ///
    /// # Errors
    /// [`Error::DiskFull`] if it has not; a store error reading the space.
    pub(super) fn check(&self, store: &dyn Store, needed_bytes: u64, now_ms: u64) -> Result<()> {
        // A store that cannot tell (no such call on the platform) is never short.
        let Some(free) = store.available_bytes()? else { return Ok(()) };
        let needed = self.reserve.load(Ordering::Relaxed).saturating_add(needed_bytes);
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

    /// The current shortage, if any. The server asks before every write,
    /// so the usual answer (none) comes from the flag, without the lock.
    pub(super) fn shortage(&self) -> Option<DiskShortage> {
        if !self.is_short() {
            return None;
        }
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

    /// Invariant: a write-back's changes count three times (sled's log
    /// grows by about that much), logged pages once, without overflowing.
    #[test]
    fn changes_are_counted_with_the_log_growth() {
        assert_eq!(write_back_bytes(500, 0), 1500);
        assert_eq!(write_back_bytes(500, 1000), 2500);
        assert_eq!(write_back_bytes(0, 7), 7);
        assert_eq!(write_back_bytes(u64::MAX / 2, 1), u64::MAX);
    }
}
