//! The settings a running engine lets its owner change: the cache and
//! dirty budgets and the durability policy. They start as the
//! [`Config`] says and are read here, never from the configuration, so a
//! change reaches every reader at once. sled's own cache is sized when the
//! store opens and stays so.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

use crate::config::{Config, Durability};

/// The engine's changeable settings.
pub(super) struct Settings {
    cache_bytes: AtomicU64,
    dirty_bytes: AtomicU64,
    durability: AtomicU8,
    /// The configuration's explicit flush interval, which no policy change
    /// overrides (`Some(None)`: no background thread).
    fixed_interval: Option<Option<Duration>>,
}

const POLICIES: [Durability; 3] = [Durability::Always, Durability::EverySecond, Durability::Lazy];

fn policy_code(d: Durability) -> u8 {
    match d {
        Durability::Always => 0,
        Durability::EverySecond => 1,
        Durability::Lazy => 2,
    }
}

impl Settings {
    pub(super) fn new(config: &Config) -> Settings {
        Settings {
            cache_bytes: AtomicU64::new(config.cache_bytes),
            dirty_bytes: AtomicU64::new(config.dirty_bytes),
            durability: AtomicU8::new(policy_code(config.durability)),
            fixed_interval: config.explicit_flush_interval(),
        }
    }

    /// The cache budget, bytes as `usize`.
    pub(super) fn cache_bytes(&self) -> usize {
        usize::try_from(self.cache_bytes.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    /// The dirty-page budget, bytes as `usize`.
    pub(super) fn dirty_bytes(&self) -> usize {
        usize::try_from(self.dirty_bytes.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    /// The cache and dirty budgets, bytes.
    pub(super) fn budgets(&self) -> (u64, u64) {
        (self.cache_bytes.load(Ordering::Relaxed), self.dirty_bytes.load(Ordering::Relaxed))
    }

    /// The two budgets and sled's cache, as the configuration counts them.
    pub(super) fn budget_bytes(&self, store_cache_bytes: u64) -> u64 {
        self.cache_bytes
            .load(Ordering::Relaxed)
            .saturating_add(self.dirty_bytes.load(Ordering::Relaxed))
            .saturating_add(store_cache_bytes)
    }

    pub(super) fn set_budgets(&self, cache_bytes: u64, dirty_bytes: u64) {
        self.cache_bytes.store(cache_bytes, Ordering::Relaxed);
        self.dirty_bytes.store(dirty_bytes, Ordering::Relaxed);
    }

    pub(super) fn durability(&self) -> Durability {
        POLICIES[usize::from(self.durability.load(Ordering::Relaxed)).min(POLICIES.len() - 1)]
    }

    pub(super) fn set_durability(&self, d: Durability) {
        self.durability.store(policy_code(d), Ordering::Relaxed);
    }

    /// The background flush's interval now: the configuration's explicit
    /// one, else the current policy's.
    pub(super) fn flush_interval(&self) -> Option<Duration> {
        self.fixed_interval.unwrap_or_else(|| Some(self.durability().flush_interval()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: a policy read back is the one stored, and the flush
    /// interval follows it unless the configuration fixed one.
    #[test]
    fn the_interval_follows_the_policy_unless_fixed() {
        let dir = std::path::Path::new(".");
        let s = Settings::new(&Config::new(dir));
        for d in POLICIES {
            s.set_durability(d);
            assert_eq!(s.durability(), d);
            assert_eq!(s.flush_interval(), Some(d.flush_interval()));
        }
        let fixed = Settings::new(&Config::new(dir).flush_interval(None));
        fixed.set_durability(Durability::Lazy);
        assert_eq!(fixed.flush_interval(), None);
    }
}
