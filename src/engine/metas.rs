//! The cache of metadata buckets, which also holds every metadata change
//! not yet written back (dirty buckets).
//!
//! It is sharded by the top [`MIN_DEPTH`] bits of a key's hash; a bucket
//! never covers fewer bits, so it lies in one shard, and holding a shard's
//! lock is holding the lock of every key (and bucket) hashed to it. A
//! bucket is shared copy-on-write (`Arc`): a write-back captures it without
//! copying, and a writer that changes it afterwards copies it once.
//!
//! A write-back does not rewrite a changed bucket: it drains the bucket's
//! changed entries into its shard's delta record (`delta.rs`), and the
//! bucket becomes *unfolded*: newer than its stored record, which only the
//! store's delta records bring up to date. A *fold* writes a shard's
//! unfolded buckets whole and deletes its delta records, in one batch.
//!
//! Invariants:
//! - A dirty or unfolded bucket (a *pinned* one) is never evicted, so no
//!   lookup reads a stored bucket that delta records have overtaken; it
//!   becomes clean only once a fold that carried its latest version has
//!   been applied.
//! - The delta records of a shard in the store are exactly the shard's
//!   `deltas` list, and every change they hold is in a pinned bucket.
//! - In each keyspace, the buckets of a hash region (the hashes sharing the
//!   top [`MIN_DEPTH`] bits) either do not exist (the region is empty) or
//!   partition it; the cache and the store agree on every bucket the cache
//!   holds clean, and the cache's version wins otherwise.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::bucket::{bucket_start, covers, Bucket, Changes, MIN_DEPTH};
use super::delta::DeltaWriter;
pub(crate) use super::layout::shard_of;
use super::layout::{self, DELTA_KEY_LEN};
use super::pages::Seq;
use super::store::Store;
use crate::error::{Error, Result};

/// Number of shards, so of independent key locks: one per hash region.
pub(crate) const SHARDS: usize = 1 << MIN_DEPTH;

/// Bookkeeping bytes charged per cached bucket and per entry on top of the
/// record's size.
const BUCKET_OVERHEAD: usize = 96;

/// The end (exclusive) of the bucket of `depth` starting at `start`.
pub(crate) fn bucket_end(start: u32, depth: u8) -> u64 {
    u64::from(start) + (1u64 << (32 - u32::from(depth)))
}

struct Slot {
    bucket: Arc<Bucket>,
    /// Changed since the last write-back (0: not).
    dirty: Seq,
    /// Its stored record is older than the delta records of its shard.
    unfolded: bool,
    hot: bool,
    bytes: usize,
    /// Of a flushed keyspace: leaves the cache once written back.
    doomed: bool,
}

impl Slot {
    /// Whether the slot must stay in the cache (see the module's
    /// invariants).
    fn pinned(&self) -> bool {
        self.dirty != 0 || self.unfolded
    }
}

fn slot_bytes(b: &Bucket) -> usize {
    BUCKET_OVERHEAD + b.memory_bytes()
}

/// One shard: its cached buckets by (keyspace, first hash), and its delta
/// records in the store.
#[derive(Default)]
pub(crate) struct MetaShard {
    map: BTreeMap<(u32, u32), Slot>,
    /// Keys of the shard's delta records in the store, oldest first.
    deltas: Vec<[u8; DELTA_KEY_LEN]>,
    /// Their bytes.
    delta_bytes: usize,
}

/// Which shards a write-back folds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// Those whose delta records have grown as large as their unfolded
    /// buckets, and the largest ones while pinned buckets pass their
    /// budget.
    Auto,
    /// Every shard: the store's buckets are then complete.
    All,
    /// This one (replay at open).
    Shard(usize),
}

/// A shard folds once its delta records reach this many bytes or the
/// bytes of its unfolded buckets, whichever is more: a fold then rewrites
/// at most about as many bytes as the deltas it retires.
const FOLD_FLOOR: usize = 64 << 10;

/// Bytes of buckets one write-back folds at most (beyond [`Fold::All`] and
/// [`Fold::Shard`]): shards that are due wait for the next write-back, so
/// a batch, and what sled holds of it, stays bounded.
const FOLD_BATCH: usize = 32 << 20;

/// The metadata part of a write-back, captured with writers excluded.
#[derive(Default)]
pub(crate) struct MetaCapture {
    /// The changes of dirty buckets of shards that do not fold, written in
    /// this write-back's delta records.
    pub(crate) drains: Vec<Drained>,
    /// New delta records: key and value.
    pub(crate) deltas: Vec<(Vec<u8>, Vec<u8>)>,
    /// Buckets of folded shards, to write whole.
    pub(crate) folds: Vec<DirtyBucket>,
    /// Delta records the folds retire, to delete.
    pub(crate) retired: Vec<Vec<u8>>,
}

/// The changes of one bucket a write-back's delta record holds, to clear
/// once the record is stored.
pub(crate) struct Drained {
    ks: u32,
    start: u32,
    changes: Changes,
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
    /// Bytes of the pinned (dirty or unfolded) buckets, as [`slot_bytes`]
    /// counts them.
    pinned_bytes: AtomicUsize,
    capacity: AtomicUsize,
}

impl MetaCache {
    pub(crate) fn new(capacity_bytes: usize) -> MetaCache {
        MetaCache {
            shards: (0..SHARDS).map(|_| Mutex::new(MetaShard::default())).collect(),
            seq: AtomicU64::new(0),
            bytes: AtomicUsize::new(0),
            pinned_bytes: AtomicUsize::new(0),
            capacity: AtomicUsize::new(capacity_bytes),
        }
    }

    /// Locks shard `shard` (see [`shard_of`]): no other thread can read or
    /// change a key of that shard until the guard is dropped.
    pub(crate) fn lock_shard(&self, shard: usize) -> MetaGuard<'_> {
        MetaGuard { cache: self, shard: self.shards[shard].lock() }
    }

    /// Bytes of the pinned buckets: changed and not yet folded.
    pub(crate) fn pinned_bytes(&self) -> usize {
        self.pinned_bytes.load(Ordering::Relaxed)
    }

    /// Notes that a slot of `bytes` became pinned (`true`) or not.
    fn count_pinned(&self, bytes: usize, pinned: bool) {
        if pinned {
            self.pinned_bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            self.pinned_bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    /// Bytes the cache holds, clean and dirty.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Captures the metadata part of write-back `seq`; the caller excludes
    /// writers meanwhile, so this only takes references and decides: each
    /// shard's dirty buckets are captured to have their changes written as
    /// the shard's delta records (by [`MetaCache::encode_deltas`], outside
    /// the exclusion) and become unfolded, unless the shard folds: then its
    /// pinned buckets are captured whole and its delta records retired.
    /// `pinned_limit` is the budget of pinned bytes past which
    /// [`Fold::Auto`] folds the shards holding the most.
    pub(crate) fn capture(&self, seq: u64, fold: Fold, pinned_limit: usize) -> MetaCapture {
        let pressured = match fold {
            Fold::Auto if self.pinned_bytes() > pinned_limit => {
                self.shards_to_relieve(pinned_limit.saturating_sub(FOLD_BATCH.min(pinned_limit / 4)))
            }
            _ => Vec::new(),
        };
        let mut out = MetaCapture::default();
        let mut folded = 0;
        // Start where the last write-back stopped, so shards that are due
        // and wait for a later batch are not always the same ones.
        let first = usize::try_from(seq % SHARDS as u64).unwrap_or(0);
        for i in (first..SHARDS).chain(0..first) {
            let mut shard = self.shards[i].lock();
            let shard = &mut *shard;
            let (mut unfolded, mut new_bytes) = (0, 0);
            for slot in shard.map.values() {
                if slot.dirty != 0 {
                    new_bytes += slot.bucket.changes_bytes();
                }
                if slot.pinned() {
                    unfolded += slot.bucket.bytes;
                }
            }
            let folds = match fold {
                Fold::All => true,
                Fold::Shard(s) => s == i,
                Fold::Auto => {
                    pressured.contains(&i)
                        || (folded < FOLD_BATCH && shard.delta_bytes + new_bytes >= FOLD_FLOOR.max(unfolded))
                }
            };
            if folds {
                folded += unfolded;
                for (&(ks, start), slot) in &shard.map {
                    if slot.pinned() {
                        out.folds.push(DirtyBucket { ks, start, seq: slot.dirty, bucket: Arc::clone(&slot.bucket) });
                    }
                }
                out.retired.extend(shard.deltas.drain(..).map(|k| k.to_vec()));
                shard.delta_bytes = 0;
                continue;
            }
            // The changes are copied into the shard's delta record here,
            // with writers excluded, rather than captured as bucket
            // references: a writer changing a captured bucket before the
            // record is stored would copy the whole bucket.
            let mut writer = DeltaWriter::default();
            for (&(ks, start), slot) in shard.map.iter_mut() {
                if slot.dirty != 0 {
                    if slot.bucket.has_changes() {
                        let changes = slot.bucket.changes();
                        for name in &changes.removed {
                            writer.add(ks, name, None);
                        }
                        for c in &changes.entries {
                            writer.add(ks, &c.name, Some(&c.entry));
                        }
                        out.drains.push(Drained { ks, start, changes });
                    }
                    slot.dirty = 0;
                    slot.unfolded = true;
                }
            }
            let shard_byte = u8::try_from(i).unwrap_or(u8::MAX);
            // A shard's records stay below 2^16 parts: a part holds at
            // least 8 KiB, and a write-back's changes are bounded by the
            // metadata budget.
            for (part, value) in (0..=u16::MAX).zip(writer.finish()) {
                let key = layout::delta_key(shard_byte, seq, part);
                shard.deltas.push(key);
                shard.delta_bytes += value.len();
                out.deltas.push((key.to_vec(), value));
            }
        }
        out
    }

    /// After the batch holding `drains`' delta records was applied: clears
    /// the stored changes of each bucket. A bucket not changed since the
    /// capture forgets all its changes; one changed since forgets only the
    /// stored entries it still holds as they were stored (a bucket split
    /// since forgets nothing in its other half, which then writes those
    /// changes again in its next delta record: harmless, each entry holds a
    /// whole state).
    pub(crate) fn clear_drained(&self, drains: Vec<Drained>) {
        for d in drains {
            let mut shard = self.shards[shard_of(d.start)].lock();
            if let Some(slot) = shard.map.get_mut(&(d.ks, d.start)) {
                let bucket = Arc::make_mut(&mut slot.bucket);
                if slot.dirty == 0 {
                    bucket.clear_changes();
                } else {
                    bucket.clear_stored(&d.changes);
                }
            }
        }
    }

    /// The shards to fold so that pinned bytes drop to `target`: those
    /// holding the most first.
    fn shards_to_relieve(&self, target: usize) -> Vec<usize> {
        let mut per: Vec<(usize, usize)> = self
            .shards
            .iter()
            .enumerate()
            .map(|(i, s)| (s.lock().map.values().filter(|v| v.pinned()).map(|v| v.bytes).sum(), i))
            .collect();
        per.sort_unstable_by(|a, b| b.cmp(a));
        let mut left = self.pinned_bytes();
        let mut out = Vec::new();
        for (bytes, i) in per {
            if left <= target || bytes == 0 {
                break;
            }
            left -= bytes.min(left);
            out.push(i);
        }
        out
    }

    /// Marks the buckets of an applied fold clean unless they changed
    /// again since (then their new changes wait for the next delta).
    pub(crate) fn mark_folded(&self, written: Vec<DirtyBucket>) {
        for w in written {
            let mut shard = self.shards[shard_of(w.start)].lock();
            if let Some(slot) = shard.map.get_mut(&(w.ks, w.start)) {
                let same = Arc::ptr_eq(&slot.bucket, &w.bucket);
                if !same && slot.dirty == 0 {
                    // Replaced by a bucket the fold did not carry.
                    continue;
                }
                // Its changes up to the capture are in the folded record.
                clear_stored(slot, w.bucket);
                let was_pinned = slot.pinned();
                slot.unfolded = false;
                if slot.dirty == w.seq {
                    slot.dirty = 0;
                }
                if was_pinned && !slot.pinned() {
                    self.count_pinned(slot.bytes, false);
                }
                if slot.doomed && !slot.pinned() {
                    self.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                    shard.map.remove(&(w.ks, w.start));
                }
            }
        }
        self.evict_if_needed();
    }

    /// Forgets the cached buckets of keyspace `ks` (a flushed keyspace).
    /// Pinned ones stay until the next write-back, which folds every shard
    /// since it records the flush, has stored them: the
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
                if slot.pinned() {
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

/// Clears from `slot`'s bucket the changes `stored` (captured from it) holds,
/// which are now in the store.
fn clear_stored(slot: &mut Slot, stored: Arc<Bucket>) {
    if Arc::ptr_eq(&slot.bucket, &stored) {
        // Unchanged since: drop the captured reference first, so that this
        // does not copy the bucket.
        drop(stored);
        Arc::make_mut(&mut slot.bucket).clear_changes();
    } else {
        Arc::make_mut(&mut slot.bucket).clear_stored(&stored.changes());
    }
}

/// One CLOCK sweep over a shard: drops the clean buckets not used since the
/// last sweep and clears the others' `hot` bit; pinned buckets stay.
fn sweep(map: &mut BTreeMap<(u32, u32), Slot>, bytes: &AtomicUsize) {
    map.retain(|_, slot| {
        if slot.pinned() {
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
            self.cache.count_pinned(bytes, true);
        }
        let slot = Slot { bucket: Arc::new(bucket), dirty, unfolded: false, hot: true, bytes, doomed: false };
        let old = self.shard.map.insert((ks, start), slot);
        if let Some(old) = old {
            self.cache.bytes.fetch_sub(old.bytes, Ordering::Relaxed);
            if old.pinned() {
                self.cache.count_pinned(old.bytes, false);
            }
        }
    }

    /// Records that delta record `key` of `bytes` bytes of this shard is in
    /// the store (found at open).
    pub(crate) fn note_stored_delta(&mut self, key: [u8; DELTA_KEY_LEN], bytes: usize) {
        self.shard.deltas.push(key);
        self.shard.delta_bytes += bytes;
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
        if slot.pinned() {
            self.cache.count_pinned(slot.bytes, false);
        }
        self.cache.count_pinned(bytes, true);
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
        if slot.pinned() {
            self.cache.count_pinned(slot.bytes, false);
        }
        // Every part is dirty: the upper ones are new records, the lowest
        // replaces the old record with a deeper bucket. Their entries keep
        // their changed marks for the next delta record.
        for (s, b) in Arc::unwrap_or_clone(slot.bucket).partition(start) {
            let seq = self.cache.seq.fetch_add(1, Ordering::Relaxed) + 1;
            self.insert(ks, s, b, seq);
        }
    }
}
