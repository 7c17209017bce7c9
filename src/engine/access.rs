//! When each key was last used (Redis's LRU clock, OBJECT IDLETIME), kept
//! beside its cached metadata bucket, never written: a bucket loaded into
//! the cache counts every key in it as used at the load, and a key read or
//! written since has its own time. Unix seconds by the engine's clock; a
//! bucket that leaves the cache forgets its keys' times.

use super::bucket::covers;
use super::idhash::FastMap;

/// Bytes one key's time costs in the cache's budget (map entry and its
/// share of the table).
pub(super) const ENTRY_BYTES: usize = 16;

/// The times of one cached bucket's keys.
#[derive(Debug, Default, Clone)]
pub(super) struct Access {
    /// When the bucket was loaded (or created).
    loaded: u32,
    /// Keys used since, by key hash.
    used: FastMap<u32, u32>,
}

impl Access {
    /// The times of a bucket loaded at `now`.
    pub(super) fn loaded_at(now: u32) -> Access {
        Access { loaded: now, used: FastMap::default() }
    }

    /// Notes a use of the key of hash `h` at `now`; returns the bytes this
    /// added (a key seen for the first time).
    pub(super) fn touch(&mut self, h: u32, now: u32) -> usize {
        match self.used.insert(h, now) {
            None => ENTRY_BYTES,
            Some(_) => 0,
        }
    }

    /// Seconds since the key of hash `h` was last used, at `now`.
    pub(super) fn idle(&self, h: u32, now: u32) -> u32 {
        now.saturating_sub(self.used.get(&h).copied().unwrap_or(self.loaded))
    }

    /// Bytes these times cost.
    pub(super) fn bytes(&self) -> usize {
        self.used.len() * ENTRY_BYTES
    }

    /// The times of the keys a bucket of `depth` starting at `start` holds
    /// (a part of a split bucket).
    pub(super) fn part(&self, start: u32, depth: u8) -> Access {
        let used = self.used.iter().filter(|&(&h, _)| covers(start, depth, h)).map(|(&h, &t)| (h, t)).collect();
        Access { loaded: self.loaded, used }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: a key's idle time counts from its last use, or from the
    /// load for a key not used since; a split keeps each key's time in
    /// the part that holds it.
    #[test]
    fn idle_time_counts_from_the_last_use_or_the_load() {
        let mut a = Access::loaded_at(100);
        assert_eq!(a.touch(7, 130), ENTRY_BYTES);
        assert_eq!(a.touch(7, 140), 0);
        assert_eq!(a.idle(7, 150), 10);
        assert_eq!(a.idle(8, 150), 50);
        assert_eq!(a.idle(7, 90), 0, "a clock behind the load reads 0");
        let hi = 0x8000_0001;
        a.touch(hi, 145);
        let (lo_part, hi_part) = (a.part(0, 1), a.part(0x8000_0000, 1));
        assert_eq!((lo_part.idle(7, 150), lo_part.idle(hi, 150)), (10, 50));
        assert_eq!((hi_part.idle(7, 150), hi_part.idle(hi, 150)), (50, 5));
    }
}
