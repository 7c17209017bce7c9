//! The CLOCK eviction both caches use (metadata buckets in `metas.rs`, pages
//! in `pages.rs`): a slot used since the last sweep has its `hot` bit set;
//! a sweep clears the bit of hot slots and drops the cold ones, except the
//! slots that must stay (changes not yet written). Eviction sweeps shard
//! after shard, at most three rounds, until the cache is below 7/8 of its
//! capacity.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A cache slot as eviction sees it.
pub(super) trait ClockSlot {
    /// Whether the slot must stay whatever its age (it holds changes not
    /// yet written).
    fn stays(&self) -> bool;
    /// The slot's "used since the last sweep" bit.
    fn hot(&mut self) -> &mut bool;
    /// The bytes the slot is counted for.
    fn bytes(&self) -> usize;
}

/// One sweep over `map`: clears the hot bit of hot slots and drops the cold
/// ones that may go, taking their bytes off `bytes`.
pub(super) fn sweep<K: Eq + Hash, V: ClockSlot, S: BuildHasher>(map: &mut HashMap<K, V, S>, bytes: &AtomicUsize) {
    map.retain(|_, slot| stays(slot, bytes));
}

/// A sweep's verdict on `slot`: whether it stays (its hot bit, if set, is
/// cleared); a slot that goes has its bytes taken off `bytes`.
pub(super) fn stays<V: ClockSlot>(slot: &mut V, bytes: &AtomicUsize) -> bool {
    if slot.stays() {
        return true;
    }
    let hot = slot.hot();
    if *hot {
        *hot = false;
        return true;
    }
    bytes.fetch_sub(slot.bytes(), Ordering::Relaxed);
    false
}

/// Runs `sweep_shard` over shards `0..shards` in turn, at most three
/// rounds, until `bytes` is below 7/8 of `capacity`; nothing if it is
/// within `capacity`.
pub(super) fn evict(capacity: usize, bytes: &AtomicUsize, shards: usize, mut sweep_shard: impl FnMut(usize)) {
    if bytes.load(Ordering::Relaxed) <= capacity {
        return;
    }
    let target = capacity / 8 * 7;
    for _round in 0..3 {
        for shard in 0..shards {
            if bytes.load(Ordering::Relaxed) <= target {
                return;
            }
            sweep_shard(shard);
        }
    }
}
