//! The server's settings that CONFIG SET changes while it runs
//! (`maxmemory`, `maxmemory-policy`, `timeout`, `maxclients`; the slow
//! log's two live in `slowlog.rs`, `appendfsync` is the database's
//! durability), how `maxmemory` becomes the database's budgets, and when a
//! write is refused for memory.

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use bitsled::Db;

use crate::command::POLICIES;

const NOEVICTION: u8 = 7;

/// The least budget the database's caches are given, whatever `maxmemory`
/// says (a smaller `maxmemory` still limits writes).
pub const LEAST_BUDGET_BYTES: u64 = 16 << 20;

/// The database's budgets for a memory limit of `bytes`: cache, dirty
/// changes and sled's cache, in that order (three quarters, an eighth and
/// an eighth). The one place the split is decided.
#[must_use]
pub fn budgets_for(bytes: u64) -> (u64, u64, u64) {
    let eighth = bytes.max(LEAST_BUDGET_BYTES) / 8;
    (bytes.max(LEAST_BUDGET_BYTES) - 2 * eighth, eighth, eighth)
}

/// The settings, shared by every connection.
pub(super) struct Settings {
    /// Bytes; 0 for no limit.
    maxmemory: AtomicU64,
    policy: AtomicU8,
    /// Seconds a client may stay idle; 0 for ever.
    timeout_secs: AtomicU64,
    max_clients: AtomicUsize,
    /// `notify-keyspace-events` classes.
    keyspace_events: std::sync::atomic::AtomicU32,
    /// The database's cache and dirty budgets as the server started: what
    /// `maxmemory 0` returns to.
    start_budgets: (u64, u64),
}

impl Settings {
    pub(super) fn new(maxmemory: u64, timeout: Option<Duration>, max_clients: usize, db: &Db) -> Settings {
        let m = db.memory_stats();
        Settings {
            maxmemory: AtomicU64::new(maxmemory),
            policy: AtomicU8::new(NOEVICTION),
            timeout_secs: AtomicU64::new(timeout.map_or(0, |t| t.as_secs())),
            max_clients: AtomicUsize::new(max_clients),
            keyspace_events: std::sync::atomic::AtomicU32::new(0),
            start_budgets: (m.cache_budget_bytes, m.dirty_budget_bytes),
        }
    }

    /// The keyspace event classes enabled.
    pub(super) fn keyspace_events(&self) -> u32 {
        self.keyspace_events.load(Ordering::Relaxed)
    }

    pub(super) fn set_keyspace_events(&self, classes: u32) {
        self.keyspace_events.store(classes, Ordering::Relaxed);
    }

    pub(super) fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// Sets the limit and sizes the database's budgets to it ([`budgets_for`];
    /// for 0, the budgets the server started with).
    pub(super) fn set_maxmemory(&self, bytes: u64, db: &Db) -> bitsled::Result<()> {
        self.maxmemory.store(bytes, Ordering::Relaxed);
        let (cache, dirty) = match bytes {
            0 => self.start_budgets,
            n => {
                let (cache, dirty, _) = budgets_for(n);
                (cache, dirty)
            }
        };
        db.set_budgets(cache, dirty)
    }

    pub(super) fn policy(&self) -> &'static str {
        POLICIES[usize::from(self.policy.load(Ordering::Relaxed)).min(POLICIES.len() - 1)]
    }

    /// Sets the policy by its name (one of [`POLICIES`]; others are
    /// ignored, the command layer checked the name).
    pub(super) fn set_policy(&self, name: &str) {
        if let Some(i) = POLICIES.iter().position(|p| *p == name) {
            self.policy.store(u8::try_from(i).unwrap_or(NOEVICTION), Ordering::Relaxed);
        }
    }

    pub(super) fn timeout(&self) -> Option<Duration> {
        Some(self.timeout_secs.load(Ordering::Relaxed)).filter(|&s| s > 0).map(Duration::from_secs)
    }

    pub(super) fn set_timeout_secs(&self, secs: u64) {
        self.timeout_secs.store(secs, Ordering::Relaxed);
    }

    pub(super) fn max_clients(&self) -> usize {
        self.max_clients.load(Ordering::Relaxed)
    }

    pub(super) fn set_max_clients(&self, n: usize) {
        self.max_clients.store(n, Ordering::Relaxed);
    }

    /// Whether a write that may use memory is refused now: a limit is set
    /// and `used` (the memory the server
    /// accounts, INFO `used_memory`) is past the limit even after the
    /// database wrote its changes back and evicted what it could.
    /// `used` is called again after that.
    pub(super) fn out_of_memory(&self, db: &Db, used: impl Fn() -> u64) -> bool {
        let limit = self.maxmemory();
        if limit == 0 || used() <= limit {
            return false;
        }
        // What Redis's eviction is to it: make room without losing a key.
        // A failed write-back leaves the memory in use; it is reported by
        // the write that follows, if any.
        let _ = db.release_memory();
        used() > limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: the split adds up to the limit (for limits past the
    /// least budget) and never goes below the least budget's split.
    #[test]
    fn the_budgets_add_up_to_the_limit() {
        for n in [LEAST_BUDGET_BYTES, 256 << 20, (1 << 30) + 7] {
            let (c, d, s) = budgets_for(n);
            assert_eq!(c + d + s, n, "{n}");
            assert_eq!(d, n / 8);
        }
        assert_eq!(budgets_for(1), budgets_for(LEAST_BUDGET_BYTES));
    }
}
