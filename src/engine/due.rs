//! Where keys with an expiry are, in memory: for each keyspace, the
//! earliest expiry of each of the 2^16 regions of the hash space (a lower
//! bound). Writers lower a region's time; the sweeper (`expiry.rs`) reads
//! due regions and sets their times from what it finds.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Bits of the hash that pick a region.
pub(super) const REGION_BITS: u32 = 16;
pub(super) const REGIONS: usize = 1 << REGION_BITS;
/// A region with no key that has an expiry.
pub(super) const NEVER: u64 = u64::MAX;

/// The region of hash `h`.
pub(super) fn region_of(h: u32) -> usize {
    // 16 bits fit in usize.
    usize::try_from(h >> (32 - REGION_BITS)).unwrap_or(0)
}

/// The first hash of region `r`.
pub(super) fn region_start(r: usize) -> u32 {
    u32::try_from(r).unwrap_or(0) << (32 - REGION_BITS)
}

/// A region table with every time `t`.
fn filled(t: u64) -> Box<[AtomicU64]> {
    (0..REGIONS).map(|_| AtomicU64::new(t)).collect()
}

/// One keyspace's regions and the earliest expiry in each (a lower bound;
/// [`NEVER`] for none). Allocated (512 KiB) when the keyspace first gets a
/// key with an expiry.
#[derive(Default)]
pub(crate) struct DueRegions {
    pub(super) times: OnceLock<Box<[AtomicU64]>>,
    /// Where the sweeper goes on in this keyspace.
    pub(super) cursor: AtomicU32,
}

impl std::fmt::Debug for DueRegions {
    /// The number of regions with a key that has an expiry, not the
    /// 65,536 times.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.times.get().map(|t| t.iter().filter(|a| a.load(Ordering::Relaxed) != NEVER).count());
        f.debug_struct("DueRegions").field("regions_with_expiries", &known).finish()
    }
}

impl DueRegions {
    /// Regions for a keyspace opened with keys that have an expiry: every
    /// region is due, so the sweeper reads them all once.
    pub(crate) fn all_due() -> DueRegions {
        let r = DueRegions::default();
        let _ = r.times.set(filled(0));
        r
    }

    /// Notes that a key of hash `h` expires at `at`. Called with the key's
    /// shard locked (so the sweeper, which sets region times under the same
    /// lock, never overwrites it with an older reading).
    pub(crate) fn note(&self, h: u32, at: u64) {
        let times = self.times.get_or_init(|| filled(NEVER));
        times[region_of(h)].fetch_min(at, Ordering::Relaxed);
    }

    /// The first region at or after the cursor (wrapping) that is due at
    /// `now`, looking at most at `REGIONS` regions.
    pub(super) fn next_due(&self, now: u64) -> Option<usize> {
        let times = self.times.get()?;
        let from = usize::try_from(self.cursor.load(Ordering::Relaxed)).unwrap_or(0) % REGIONS;
        (from..REGIONS).chain(0..from).find(|&r| times[r].load(Ordering::Relaxed) <= now)
    }

    /// Whether any region is due at `now`.
    pub(super) fn any_due(&self, now: u64) -> bool {
        self.times.get().is_some_and(|t| t.iter().any(|a| a.load(Ordering::Relaxed) <= now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: regions partition the hash space in order, and a region's
    /// time only goes down through `note`.
    #[test]
    fn regions_partition_the_hash_space_and_note_lowers_the_time() {
        assert_eq!(region_of(0), 0);
        assert_eq!(region_of(u32::MAX), REGIONS - 1);
        for r in [0, 1, 77, REGIONS - 1] {
            assert_eq!(region_of(region_start(r)), r);
            assert_eq!(region_of(region_start(r) | 0xffff), r);
        }
        let d = DueRegions::default();
        assert_eq!(d.next_due(u64::MAX - 1), None, "nothing noted: nothing due");
        d.note(region_start(5), 100);
        d.note(region_start(5) + 3, 200);
        assert_eq!(d.next_due(99), None);
        assert_eq!(d.next_due(100), Some(5));
        d.note(region_start(9), 50);
        assert_eq!(d.next_due(60), Some(9));
        d.cursor.store(6, Ordering::Relaxed);
        assert_eq!(d.next_due(1000), Some(9), "the search starts at the cursor");
        d.cursor.store(10, Ordering::Relaxed);
        assert_eq!(d.next_due(1000), Some(5), "and wraps");
        assert!(DueRegions::all_due().any_due(0));
    }
}
