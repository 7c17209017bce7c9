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
    /// plus the reserve, recording the outcome (at `now_ms`).
    ///
    /// # Errors
    /// [`Error::DiskFull`] if it has not; a store error reading the space.
    pub(super) fn check(&self, store: &dyn Store, batch_bytes: u64, now_ms: u64) -> Result<()> {
        // A store that cannot tell (no such call on the platform) is never short.
        let Some(free) = store.available_bytes()? else { return Ok(()) };
        let needed = self.reserve.load(Ordering::Relaxed).saturating_add(batch_bytes);
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
