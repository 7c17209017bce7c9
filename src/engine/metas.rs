//! The cache of metadata buckets, which also holds every metadata change
//! not yet written back (dirty buckets).
//!
//! It is sharded by the top [`MIN_DEPTH`] bits of a key's hash; a bucket
//! never covers fewer bits, so it lies in one shard, and holding a shard's
//! lock is holding the lock of every key (and bucket) hashed to it. A
//! bucket is shared copy-on-write (`Arc`): a write-back captures it without
//! copying, and a writer that changes it afterwards copies it once.
//!
//! Invariants:
//! - A dirty bucket is never evicted; it becomes clean only once the
//!   write-back that carried its latest version has been applied.
//! - In each keyspace, the buckets of a hash region (the hashes sharing the
//!   top [`MIN_DEPTH`] bits) either do not exist (the region is empty) or
//!   partition it; the cache and the store agree on every bucket the cache
//!   holds clean, and the cache's version wins otherwise.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::bucket::{bucket_start, covers, Bucket, MIN_DEPTH};
use super::layout;
use super::pages::Seq;
use super::store::Store;
use crate::error::{Error, Result};

/// Number of shards, so of independent key locks: one per hash region.
pub(crate) const SHARDS: usize = 1 << MIN_DEPTH;

/// Bookkeeping bytes charged per cached bucket and per entry on top of the
/// record's size.
const BUCKET_OVERHEAD: usize = 96;

/// The shard (and so the lock) of a key with hash `h`.
pub(crate) fn shard_of(h: u32) -> usize {
    usize::try_from(h >> (32 - u32::from(MIN_DEPTH))).unwrap_or(0)
}

/// The end (exclusive) of the bucket of `depth` starting at `start`.
pub(crate) fn bucket_end(start: u32, depth: u8) -> u64 {
    u64::from(start) + (1u64 << (32 - u32::from(depth)))
}

struct Slot {
    bucket: Arc<Bucket>,
    dirty: Seq,
    hot: bool,
    bytes: usize,
    /// Of a flushed keyspace: leaves the cache once written back.
    doomed: bool,
}

fn slot_bytes(b: &Bucket) -> usize {
    BUCKET_OVERHEAD + b.memory_bytes()
}

/// One shard: its cached buckets by (keyspace, first hash).
#[derive(Default)]
pub(crate) struct MetaShard {
    map: BTreeMap<(u32, u32), Slot>,
}

/// One dirty bucket captured by a write-back.
pub(crate) struct DirtyBucket {
    pub(crate) ks: u32,
    pub(crate) start: u32,
    pub(crate) seq: Seq,
    pub(crate) bucket: Arc<Bucket>,
}

/// The bucket cache.
pub(crate) struct MetaCache {
    shards: Box<[Mutex<MetaShard>]>,
    seq: AtomicU64,
    bytes: AtomicUsize,
    /// Bytes of the dirty buckets (as [`slot_bytes`] counts them).
    dirty_bytes: AtomicUsize,
    capacity: AtomicUsize,
}

impl MetaCache {
    pub(crate) fn new(capacity_bytes: usize) -> MetaCache {
        MetaCache {
            shards: (0..SHARDS).map(|_| Mutex::new(MetaShard::default())).collect(),
            seq: AtomicU64::new(0),
            bytes: AtomicUsize::new(0),
            dirty_bytes: AtomicUsize::new(0),
            capacity: AtomicUsize::new(capacity_bytes),
        }
    }

    /// Locks shard `shard` (see [`shard_of`]): no other thread can read or
    /// change a key of that shard until the guard is dropped.
    pub(crate) fn lock_shard(&self, shard: usize) -> MetaGuard<'_> {
        MetaGuard { cache: self, shard: self.shards[shard].lock() }
    }

    /// Bytes of the dirty buckets waiting for a write-back.
    pub(crate) fn dirty_bytes(&self) -> usize {
        self.dirty_bytes.load(Ordering::Relaxed)
    }

    /// Notes that a slot of `bytes` became dirty (`true`) or clean.
    fn count_dirty(&self, bytes: usize, dirty: bool) {
        if dirty {
            self.dirty_bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            self.dirty_bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    /// Bytes the cache holds, clean and dirty.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Captures every dirty bucket. The caller excludes writers meanwhile.
    pub(crate) fn dirty_snapshot(&self) -> Vec<DirtyBucket> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            for (&(ks, start), slot) in &shard.lock().map {
                if slot.dirty != 0 {
                    out.push(DirtyBucket { ks, start, seq: slot.dirty, bucket: Arc::clone(&slot.bucket) });
                }
            }
        }
        out
    }

    /// Marks the buckets of an applied write-back clean unless they changed
    /// again since.
    pub(crate) fn mark_clean(&self, written: &[DirtyBucket]) {
        for w in written {
            let mut shard = self.shards[shard_of(w.start)].lock();
            if let Some(slot) = shard.map.get_mut(&(w.ks, w.start)) {
                if slot.dirty == w.seq {
                    slot.dirty = 0;
                    self.count_dirty(slot.bytes, false);
                    if slot.doomed {
                        self.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                        shard.map.remove(&(w.ks, w.start));
                    }
                }
            }
        }
        self.evict_if_needed();
    }

    /// Forgets the cached buckets of keyspace `ks` (a flushed keyspace).
    /// Dirty ones stay until the next write-back has stored them: the
    /// reclaimer reads the keyspace's stored buckets to find the values to
    /// reclaim, and an older stored version could name a value that has
    /// since moved to another database (MOVE).
    pub(crate) fn drop_keyspace(&self, ks: u32) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let bytes = &self.bytes;
            let in_ks: Vec<(u32, u32)> = shard.map.range((ks, 0)..=(ks, u32::MAX)).map(|(k, _)| *k).collect();
            for k in in_ks {
                let Some(slot) = shard.map.get_mut(&k) else { continue };
                if slot.dirty != 0 {
                    slot.doomed = true;
                } else if let Some(slot) = shard.map.remove(&k) {
                    bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                }
            }
        }
    }

    /// Sets the bytes the cache may hold before it evicts.
    pub(crate) fn set_capacity(&self, bytes: usize) {
        self.capacity.store(bytes, Ordering::Relaxed);
    }

    /// Drops clean buckets not used since the last sweep until the cache is
    /// below 7/8 of its capacity (or nothing more can go).
    pub(crate) fn evict_if_needed(&self) {
        let capacity = self.capacity.load(Ordering::Relaxed);
        if self.bytes() <= capacity {
            return;
        }
        let target = capacity / 8 * 7;
        for _pass in 0..3 {
            for shard in self.shards.iter() {
                if self.bytes() <= target {
                    return;
                }
                sweep(&mut shard.lock().map, &self.bytes);
            }
        }
    }
}

/// One CLOCK sweep over a shard: drops the clean buckets not used since the
/// last sweep and clears the others' `hot` bit; dirty buckets stay.
fn sweep(map: &mut BTreeMap<(u32, u32), Slot>, bytes: &AtomicUsize) {
    map.retain(|_, slot| {
        if slot.dirty != 0 {
            return true;
        }
        if slot.hot {
            slot.hot = false;
            return true;
        }
        bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
        false
    });
}

/// A located bucket's contents.
pub(crate) struct Located<'a> {
    pub(crate) bucket: &'a Bucket,
}

/// A locked shard.
pub(crate) struct MetaGuard<'a> {
    cache: &'a MetaCache,
    shard: MutexGuard<'a, MetaShard>,
}

impl MetaGuard<'_> {
    /// The first hash of the bucket of keyspace `ks` holding hash `h`
    /// (which must be in this shard), loading it from `store` if it is not
    /// cached; a region with no bucket gets an empty one (not stored until
    /// it is written).
    ///
    /// # Errors
    /// [`Error::Corrupted`] if the stored bucket does not decode or the
    /// region's buckets do not partition it; a store error.
    pub(crate) fn locate(&mut self, ks: u32, h: u32, store: &dyn Store) -> Result<u32> {
        if let Some(start) = self.cached_start(ks, h) {
            return Ok(start);
        }
        let region = bucket_start(h, MIN_DEPTH);
        let found = match store.last_at_or_before(&layout::bucket_key(ks, h))? {
            Some((k, v)) => match layout::parse_bucket_key(&k) {
                Some((k_ks, start)) if k_ks == ks && bucket_start(start, MIN_DEPTH) == region => {
                    let bucket = Bucket::decode(ks, start, &v)?;
                    if !covers(start, bucket.depth, h) {
                        return Err(Error::Corrupted {
                            key: format!("<bucket {ks}/{start:#010x}>"),
                            page: None,
                            reason: format!("metadata bucket: does not reach hash {h:#010x} of its region"),
                        });
                    }
                    Some((start, bucket))
                }
                _ => None,
            },
            None => None,
        };
        let (start, bucket) = found.unwrap_or_else(|| (region, Bucket::new(MIN_DEPTH)));
        self.insert(ks, start, bucket, 0);
        Ok(start)
    }

    /// The first hash of the cached bucket holding `(ks, h)`, if cached.
    fn cached_start(&mut self, ks: u32, h: u32) -> Option<u32> {
        let (&(k_ks, start), slot) = self.shard.map.range_mut(..=(ks, h)).next_back()?;
        if k_ks != ks || !covers(start, slot.bucket.depth, h) {
            return None;
        }
        slot.hot = true;
        Some(start)
    }

    fn insert(&mut self, ks: u32, start: u32, bucket: Bucket, dirty: Seq) {
        if dirty == 0 && self.cache.bytes() > self.cache.capacity.load(Ordering::Relaxed) {
            // Readers fill the cache too: make room in this shard first.
            sweep(&mut self.shard.map, &self.cache.bytes);
        }
        let bytes = slot_bytes(&bucket);
        self.cache.bytes.fetch_add(bytes, Ordering::Relaxed);
        if dirty != 0 {
            self.cache.count_dirty(bytes, true);
        }
        let old = self
            .shard
            .map
            .insert((ks, start), Slot { bucket: Arc::new(bucket), dirty, hot: true, bytes, doomed: false });
        if let Some(old) = old {
            self.cache.bytes.fetch_sub(old.bytes, Ordering::Relaxed);
            if old.dirty != 0 {
                self.cache.count_dirty(old.bytes, false);
            }
        }
    }

    /// The cached bucket starting at `start` (located first).
    pub(crate) fn get(&self, ks: u32, start: u32) -> Option<Located<'_>> {
        self.shard.map.get(&(ks, start)).map(|s| Located { bucket: &s.bucket })
    }

    /// Changes the cached bucket starting at `start` with `f` and marks it
    /// dirty; a bucket grown past its size splits (each half dirty).
    pub(crate) fn update<R>(&mut self, ks: u32, start: u32, f: impl FnOnce(&mut Bucket) -> R) -> Option<R> {
        let seq = self.cache.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let slot = self.shard.map.get_mut(&(ks, start))?;
        let r = f(Arc::make_mut(&mut slot.bucket));
        let bytes = slot_bytes(&slot.bucket);
        self.cache.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.cache.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
        if slot.dirty != 0 {
            self.cache.count_dirty(slot.bytes, false);
        }
        self.cache.count_dirty(bytes, true);
        slot.bytes = bytes;
        slot.dirty = seq;
        slot.hot = true;
        if slot.bucket.wants_split() {
            self.split(ks, start);
        }
        Some(r)
    }

    /// Splits the bucket starting at `start` until every part fits (or
    /// cannot split further).
    fn split(&mut self, ks: u32, start: u32) {
        let Some(slot) = self.shard.map.remove(&(ks, start)) else { return };
        self.cache.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
        if slot.dirty != 0 {
            self.cache.count_dirty(slot.bytes, false);
        }
        // Every part is dirty: the upper ones are new records, the lowest
        // replaces the old record with a deeper bucket.
        for (s, b) in Arc::unwrap_or_clone(slot.bucket).partition(start) {
            let seq = self.cache.seq.fetch_add(1, Ordering::Relaxed) + 1;
            self.insert(ks, s, b, seq);
        }
    }
}
