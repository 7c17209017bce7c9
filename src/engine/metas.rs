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
//! With writers excluded a write-back only cuts ([`MetaCache::cut`]); the
//! copying is done afterwards, bucket by bucket, by the write-back or by
//! the first writer to change a bucket after the cut, whichever comes
//! first, so each record holds the buckets as they were at the cut.
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

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::bloombits::{BitsNote, ShardBits};
use super::bucket::{bucket_start, covers, Bucket, LookupLines, MIN_DEPTH};
use super::clock::{self, ClockSlot};
use super::delta::DeltaWriter;
pub(crate) use super::layout::shard_of;
use super::layout::{self, KeyHash, DELTA_KEY_LEN};
use super::pages::Seq;
use super::probemap::{Layout, ProbeMap};
use super::store::Store;
use crate::config::Clock;
use crate::error::{Error, Result};

/// Number of shards, so of independent key locks: one per hash region.
pub(crate) const SHARDS: usize = 1 << MIN_DEPTH;

/// Bookkeeping bytes charged per cached bucket on top of its buffers: the
/// bucket's own block (about 160 bytes with its `Arc` counts) and its
/// 72-byte entry in the shard's map (key and value), which is mostly a
/// quarter to a half full (an eighth after removals; see [`ProbeMap`]).
const BUCKET_OVERHEAD: usize = 320;

/// The end (exclusive) of the bucket of `depth` starting at `start`.
pub(crate) fn bucket_end(start: u32, depth: u8) -> u64 {
    u64::from(start) + (1u64 << (32 - u32::from(depth)))
}

struct Slot {
    bucket: Arc<Bucket>,
    /// Where a lookup in the bucket reads first, as of its last change.
    lines: LookupLines,
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

impl ClockSlot for Slot {
    fn stays(&self) -> bool {
        self.pinned()
    }
    fn hot(&mut self) -> &mut bool {
        &mut self.hot
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Moves `counter` from counting `from` bytes of something to `to`, in one
/// atomic change.
fn resize_count(counter: &AtomicUsize, from: usize, to: usize) {
    if to > from {
        counter.fetch_add(to - from, Ordering::Relaxed);
    } else if from > to {
        counter.fetch_sub(from - to, Ordering::Relaxed);
    }
}

fn slot_bytes(b: &Bucket) -> usize {
    BUCKET_OVERHEAD + b.memory_bytes()
}

type SlotMap = ProbeMap<Slot>;

/// One shard: its cached buckets by (keyspace, first hash), and its delta
/// records in the store.
#[derive(Default)]
pub(crate) struct MetaShard {
    map: SlotMap,
    /// The greatest depth of a bucket cached in this shard since it was
    /// created: a lookup probes the first hashes of depths up to it.
    max_depth: u8,
    /// The depth of the bucket the last lookup found: probed first.
    last_depth: u8,
    /// Keys of the shard's delta records in the store, oldest first.
    deltas: Vec<[u8; DELTA_KEY_LEN]>,
    /// Their bytes.
    delta_bytes: usize,
    /// While a write-back drains this shard: the delta record being
    /// written, holding the changes of the buckets drained so far (see
    /// [`MetaCache::cut`]).
    draining: Option<DeltaWriter>,
    /// As the last drain found them: record bytes of the pinned buckets,
    /// and their bytes in memory (as [`slot_bytes`] counts them).
    unfolded_bytes: usize,
    pinned_memory: usize,
    /// What the shard's changes mean for small Bloom filters' bits (what a
    /// delta record may hold instead of whole entries).
    bloom_bits: ShardBits,
}

impl MetaShard {
    /// Whether the delta records have reached the size of the unfolded
    /// buckets (as the last drain counted them), so the shard is due to
    /// fold.
    fn fold_due(&self) -> bool {
        self.delta_bytes >= FOLD_FLOOR.max(self.unfolded_bytes)
    }
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

/// Bytes of buckets one write-back folds at most (beyond [`Fold::All`],
/// [`Fold::Shard`] and the shards under pressure): shards that are due
/// wait for the next write-back, which the capture asks for at once
/// ([`MetaCapture::folds_waiting`]). sled holds every leaf a batch touches
/// until the batch ends, and keys hash evenly over the shards, so their
/// folds fall due together: one batch folding them all left a step of
/// ~10 bytes of heap per byte of buckets written.
pub(super) const FOLD_BATCH: usize = 1 << 20;

/// Bytes below their budget that a fold under pressure brings the pinned
/// buckets to. sled holds every leaf a batch touches until the batch
/// ends, so a fold of many shards at once leaves a step in resident
/// memory; a small margin spreads the relief over the write-backs that
/// the pressure calls for anyway.
const PRESSURE_MARGIN: usize = 4 << 20;

/// The metadata part of a write-back, captured with writers excluded.
#[derive(Default)]
pub(crate) struct MetaCapture {
    /// New delta records: key and value, holding the changes of the dirty
    /// buckets of shards that do not fold.
    pub(crate) deltas: Vec<(Vec<u8>, Vec<u8>)>,
    /// Buckets of folded shards, to write whole.
    pub(crate) folds: Vec<DirtyBucket>,
    /// Delta records the folds retire, to delete.
    pub(crate) retired: Vec<Vec<u8>>,
    /// Shards were due to fold and wait for a later write-back, this one's
    /// batch being full.
    pub(crate) folds_waiting: bool,
}

/// One dirty bucket captured by a write-back.
pub(crate) struct DirtyBucket {
    pub(crate) ks: u32,
    pub(crate) start: u32,
    pub(crate) seq: Seq,
    pub(crate) bucket: Arc<Bucket>,
}

/// What a prefetch hint knows of a shard without its lock.
#[derive(Default)]
struct ShardLayout {
    map: Layout,
    /// The shard's [`MetaShard::max_depth`].
    depth: std::sync::atomic::AtomicU8,
}

impl ShardLayout {
    /// Records `shard`'s map arrays and deepest depth (stores only where a
    /// figure moved).
    fn publish(&self, shard: &MetaShard) {
        self.map.publish(&shard.map);
        if self.depth.load(Ordering::Relaxed) != shard.max_depth {
            self.depth.store(shard.max_depth, Ordering::Relaxed);
        }
    }
}

/// The bucket cache.
pub(crate) struct MetaCache {
    shards: Box<[Mutex<MetaShard>]>,
    /// Each shard's map layout and deepest bucket, for prefetch hints
    /// taken without the shard's lock ([`MetaCache::prefetch_index`]).
    layouts: Box<[ShardLayout]>,
    seq: AtomicU64,
    bytes: AtomicUsize,
    /// Bytes of the pinned (dirty or unfolded) buckets, as [`slot_bytes`]
    /// counts them.
    pinned_bytes: AtomicUsize,
    /// Record bytes the buckets grew by since the last cut: about the new
    /// entries the next write-back's delta records carry.
    grown: AtomicUsize,
    capacity: AtomicUsize,
    /// The sequence number of the last cut: a bucket changed at or before
    /// it, in a shard still draining, belongs to the running write-back.
    cut: AtomicU64,
    /// The clock of keys' last uses (OBJECT IDLETIME): the engine's.
    clock: Clock,
    /// Its Unix seconds as the background thread last read them (Redis's
    /// cached LRU clock), so a use costs no clock read; 0 without a
    /// background thread.
    coarse_secs: AtomicU32,
    /// How the store hashes names: which bucket and shard hold a key.
    key_hash: KeyHash,
}

impl MetaCache {
    pub(crate) fn new(capacity_bytes: usize) -> MetaCache {
        MetaCache {
            shards: (0..SHARDS).map(|_| Mutex::new(MetaShard::default())).collect(),
            layouts: (0..SHARDS).map(|_| ShardLayout::default()).collect(),
            seq: AtomicU64::new(0),
            bytes: AtomicUsize::new(0),
            pinned_bytes: AtomicUsize::new(0),
            grown: AtomicUsize::new(0),
            capacity: AtomicUsize::new(capacity_bytes),
            cut: AtomicU64::new(0),
            clock: Clock::default(),
            coarse_secs: AtomicU32::new(0),
            key_hash: KeyHash::NEW,
        }
    }

    /// The cache of a store that hashes names by `key_hash`.
    pub(crate) fn with_key_hash(mut self, key_hash: KeyHash) -> MetaCache {
        self.key_hash = key_hash;
        self
    }

    /// How the store hashes names.
    pub(crate) fn key_hash(&self) -> KeyHash {
        self.key_hash
    }

    /// The cache with `clock` for keys' last uses.
    pub(crate) fn with_clock(mut self, clock: Clock) -> MetaCache {
        self.clock = clock;
        self
    }

    /// Unix seconds by the cache's clock, for keys' last uses: as the
    /// background thread last read it ([`MetaCache::tick`]), else read now.
    pub(crate) fn now_secs(&self) -> u32 {
        match self.coarse_secs.load(Ordering::Relaxed) {
            0 => self.read_clock(),
            s => s,
        }
    }

    fn read_clock(&self) -> u32 {
        u32::try_from(self.clock.now_ms() / 1000).unwrap_or(u32::MAX)
    }

    /// Reads the clock for [`MetaCache::now_secs`]: the background thread
    /// calls it at least every tenth of a second.
    pub(crate) fn tick(&self) {
        self.coarse_secs.store(self.read_clock().max(1), Ordering::Relaxed);
    }

    /// Asks the CPU for the cache line of the shard's map where a lookup
    /// of hash `h` in keyspace `ks` starts (at the shard's two deepest
    /// depths, where most of its buckets are), reading nothing: the first
    /// of two prefetch steps (see `prefetch.rs`), taken a few commands
    /// ahead.
    pub(crate) fn prefetch_index(&self, ks: u32, h: u32) {
        let layout = &self.layouts[shard_of(h)];
        let deepest = layout.depth.load(Ordering::Relaxed).max(MIN_DEPTH);
        let depths = if deepest > MIN_DEPTH { deepest - 1..=deepest } else { deepest..=deepest };
        for depth in depths {
            for at in layout.map.home::<Slot>((ks, bucket_start(h, depth))).into_iter().flatten() {
                super::prefetch::line(at);
            }
        }
    }

    /// Asks the CPU for the cache lines a lookup of hash `h` in keyspace
    /// `ks` reads in its bucket (the bucket, its heads where the hash's
    /// tag falls, its name prefix), finding the bucket in the shard's map
    /// (which [`MetaCache::prefetch_index`] asked for a command earlier):
    /// the second step. A hint that changes nothing; skipped if the shard
    /// is locked or its bucket is not cached.
    pub(crate) fn prefetch_bucket(&self, ks: u32, h: u32) {
        let Some(shard) = self.shards[shard_of(h)].try_lock() else { return };
        let depth = shard.last_depth.max(MIN_DEPTH);
        let start = bucket_start(h, depth);
        if let Some(slot) = shard.map.get(&(ks, start)) {
            if covers(start, slot.lines.depth, h) {
                super::prefetch::line(Arc::as_ptr(&slot.bucket) as usize);
                slot.lines.prefetch(h);
            }
        }
    }

    /// Locks shard `shard` (see [`shard_of`]): no other thread can read or
    /// change a key of that shard until the guard is dropped.
    pub(crate) fn lock_shard(&self, shard: usize) -> MetaGuard<'_> {
        MetaGuard { cache: self, index: shard, shard: self.shards[shard].lock() }
    }

    /// Whether a bucket changed since the last cut (a write-back has
    /// metadata to write).
    pub(crate) fn changed_since_cut(&self) -> bool {
        self.seq.load(Ordering::Relaxed) != self.cut.load(Ordering::Relaxed)
    }

    /// Record bytes the cached buckets grew by since the last cut (new
    /// entries, longer inline values; as the bucket estimates its record
    /// bytes): about the size of the next write-back's delta records when
    /// many keys are new. Changes that keep an entry's size (most writes
    /// to existing keys) do not count.
    pub(crate) fn grown_since_cut(&self) -> usize {
        self.grown.load(Ordering::Relaxed)
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

    /// Cuts the metadata part of write-back `seq`; the caller excludes
    /// writers meanwhile, so this decides and takes references only. A
    /// shard that folds has its pinned buckets captured whole (their
    /// changed marks cleared: the record carries them) and its delta
    /// records retired. Every other shard is left *draining*: the changes
    /// its dirty buckets hold at this instant go to its delta record, each
    /// bucket's either when the first writer after the cut changes it
    /// ([`MetaGuard::update`]) or when [`MetaCache::drain`] reaches it, so
    /// writers wait for neither. `pinned_limit` is the budget of pinned
    /// bytes past which [`Fold::Auto`] folds the shards holding the most.
    pub(crate) fn cut(&self, seq: u64, fold: Fold, pinned_limit: usize) -> MetaCapture {
        let pressured = match fold {
            Fold::Auto if self.pinned_bytes() > pinned_limit => {
                self.shards_to_relieve(pinned_limit.saturating_sub(PRESSURE_MARGIN.min(pinned_limit / 4)))
            }
            _ => Vec::new(),
        };
        self.cut.store(self.seq.load(Ordering::Relaxed), Ordering::Relaxed);
        self.grown.store(0, Ordering::Relaxed);
        let mut out = MetaCapture::default();
        let mut folded = 0;
        // Start where the last write-back stopped, so shards that are due
        // and wait for a later batch are not always the same ones.
        let first = usize::try_from(seq % SHARDS as u64).unwrap_or(0);
        for i in (first..SHARDS).chain(0..first) {
            let mut shard = self.shards[i].lock();
            let shard = &mut *shard;
            let folds = match fold {
                Fold::All => true,
                Fold::Shard(s) => s == i,
                Fold::Auto if pressured.contains(&i) => true,
                Fold::Auto if shard.fold_due() => {
                    out.folds_waiting |= folded >= FOLD_BATCH;
                    folded < FOLD_BATCH
                }
                Fold::Auto => false,
            };
            shard.bloom_bits.cut(folds);
            if !folds {
                shard.draining = Some(DeltaWriter::default());
                continue;
            }
            folded += shard.unfolded_bytes;
            for ((ks, start), slot) in shard.map.iter_mut() {
                if slot.pinned() {
                    // The record written carries every change so far; the
                    // marks go before the capture shares the bucket, so
                    // clearing them copies nothing.
                    if slot.bucket.has_changes() {
                        Arc::make_mut(&mut slot.bucket).clear_changes();
                        slot.lines = slot.bucket.lookup_lines();
                    }
                    out.folds.push(DirtyBucket { ks, start, seq: slot.dirty, bucket: Arc::clone(&slot.bucket) });
                }
            }
            out.retired.extend(shard.deltas.drain(..).map(|k| k.to_vec()));
            shard.delta_bytes = 0;
            (shard.unfolded_bytes, shard.pinned_memory) = (0, 0);
        }
        out
    }

    /// Finishes the cut of write-back `seq`: drains the buckets of every
    /// draining shard that no writer has drained since, adds the shards'
    /// delta records to `out`, and notes each shard's sizes for the next
    /// write-back's fold decision.
    pub(crate) fn drain(&self, seq: u64, out: &mut MetaCapture) {
        let cut = self.cut.load(Ordering::Relaxed);
        for (i, shard) in self.shards.iter().enumerate() {
            let mut shard = shard.lock();
            let shard = &mut *shard;
            let Some(mut writer) = shard.draining.take() else { continue };
            let (mut unfolded, mut memory) = (0, 0);
            for ((ks, start), slot) in shard.map.iter_mut() {
                drain_slot(self.key_hash, (ks, start), slot, cut, &mut writer, &mut shard.bloom_bits);
                if slot.pinned() {
                    unfolded += slot.bucket.bytes;
                    memory += slot.bytes;
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
            shard.unfolded_bytes = unfolded;
            shard.pinned_memory = memory;
            shard.bloom_bits.drained();
        }
    }

    /// The shards to fold so that pinned bytes drop to `target`: those
    /// holding the most first.
    fn shards_to_relieve(&self, target: usize) -> Vec<usize> {
        // As the last drain counted them.
        let mut per: Vec<(usize, usize)> =
            self.shards.iter().enumerate().map(|(i, s)| (s.lock().pinned_memory, i)).collect();
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
                if slot.dirty == 0 && !Arc::ptr_eq(&slot.bucket, &w.bucket) {
                    // Replaced by a bucket the fold did not carry.
                    continue;
                }
                // Its changes up to the capture are in the folded record;
                // later ones are marked for the next delta record.
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
        for shard in &self.shards {
            let mut shard = shard.lock();
            let bytes = &self.bytes;
            let in_ks: Vec<(u32, u32)> = shard.map.keys().filter(|k| k.0 == ks).collect();
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

    /// Forgets the buckets of shard `shard`, pinned ones included, and its
    /// delta records (a follower's fold of that shard came in).
    pub(crate) fn reset_shard(&self, shard: usize) {
        let mut s = self.shards[shard].lock();
        let (mut bytes, mut pinned) = (0, 0);
        for slot in s.map.values() {
            bytes += slot.bytes;
            if slot.pinned() {
                pinned += slot.bytes;
            }
        }
        *s = MetaShard::default();
        self.layouts[shard].publish(&s);
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        self.pinned_bytes.fetch_sub(pinned, Ordering::Relaxed);
    }

    /// Forgets every bucket, pinned ones included, and the shards' delta
    /// records (a follower's store changed under them; it writes nothing
    /// of its own).
    pub(crate) fn clear_all(&self) {
        for (shard, layout) in self.shards.iter().zip(&*self.layouts) {
            let mut shard = shard.lock();
            *shard = MetaShard::default();
            layout.publish(&shard);
        }
        self.bytes.store(0, Ordering::Relaxed);
        self.pinned_bytes.store(0, Ordering::Relaxed);
        self.grown.store(0, Ordering::Relaxed);
    }

    /// Sets the bytes the cache may hold before it evicts.
    pub(crate) fn set_capacity(&self, bytes: usize) {
        // Asked after every write: a store only when the figure moves keeps
        // the line shared between the writers and the write-back.
        if self.capacity.load(Ordering::Relaxed) == bytes {
            return;
        }
        self.capacity.store(bytes, Ordering::Relaxed);
    }

    /// Drops clean buckets not used since the last sweep until the cache is
    /// below 7/8 of its capacity (or nothing more can go).
    pub(crate) fn evict_if_needed(&self) {
        clock::evict(self.capacity.load(Ordering::Relaxed), &self.bytes, SHARDS, |i| {
            self.lock_shard(i).sweep();
        });
    }
}

/// Drains `slot` (of keyspace `ks`) into `writer` if it changed at or
/// before the cut `cut` and was not drained since: its changes go to the
/// delta record, their marks are cleared (a later change marks its entry
/// again, for the next record; if the batch fails the store is poisoned
/// and no later write-back needs them), and it becomes unfolded.
fn drain_slot(
    hash: KeyHash,
    (ks, start): (u32, u32),
    slot: &mut Slot,
    cut: Seq,
    writer: &mut DeltaWriter,
    bloom_bits: &mut ShardBits,
) {
    if slot.dirty == 0 || slot.dirty > cut {
        return;
    }
    if slot.bucket.has_changes() {
        let bucket = Arc::make_mut(&mut slot.bucket);
        let last = start | u32::MAX.checked_shr(u32::from(bucket.depth)).unwrap_or(0);
        let has_bits = !bloom_bits.draining_is_empty() && bloom_bits.focus(ks, start, last);
        let mut positions: Vec<u64> = Vec::new();
        bucket.for_each_change(|name, entry| {
            let items = match entry {
                Some(_) if has_bits => bloom_bits.drained_bits(ks, hash.of(name), name, &mut positions),
                _ => None,
            };
            match items {
                Some(items) => writer.add_bloom_bits(ks, name, items, &positions),
                None => writer.add(ks, name, entry),
            }
        });
        bucket.clear_changes();
        // `make_mut` may have copied the bucket (a capture shared it).
        slot.lines = slot.bucket.lookup_lines();
    }
    slot.dirty = 0;
    slot.unfolded = true;
}

/// A located bucket's contents.
pub(crate) struct Located<'a> {
    pub(crate) bucket: &'a Bucket,
}

/// A locked shard.
pub(crate) struct MetaGuard<'a> {
    cache: &'a MetaCache,
    index: usize,
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
                    let bucket = Bucket::decode(self.cache.key_hash, ks, start, &v)?;
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
        let (start, mut bucket) = found.unwrap_or_else(|| (region, Bucket::new(MIN_DEPTH)));
        // Its keys count as used now (OBJECT IDLETIME).
        bucket.set_loaded(self.cache.now_secs());
        self.insert(ks, start, bucket, 0);
        Ok(start)
    }

    /// The first hash of the cached bucket holding `(ks, h)`, if cached.
    ///
    /// The buckets of a region partition it, so probing the first hash of
    /// `h` at each depth up to the deepest cached one finds the bucket
    /// holding `h` at its own depth.
    ///
    /// Any other bucket a probe finds does not cover `h`, so the probes may
    /// go in any order: the depth of the last bucket found comes first
    /// (with evenly spread hashes, most buckets of a shard share a depth).
    fn cached_start(&mut self, ks: u32, h: u32) -> Option<u32> {
        let shard = &mut *self.shard;
        let likely = shard.last_depth.max(MIN_DEPTH);
        let others = (MIN_DEPTH..=shard.max_depth).rev().filter(|&d| d != likely);
        for depth in std::iter::once(likely).chain(others) {
            let start = bucket_start(h, depth);
            if let Some(slot) = shard.map.get_mut(&(ks, start)) {
                if covers(start, slot.bucket.depth, h) {
                    slot.hot = true;
                    shard.last_depth = depth;
                    return Some(start);
                }
            }
        }
        None
    }

    /// One CLOCK sweep of this shard's buckets (see `clock.rs`).
    fn sweep(&mut self) {
        let bytes = &self.cache.bytes;
        self.shard.map.retain(|_, slot| clock::stays(slot, bytes));
        self.cache.layouts[self.index].publish(&self.shard);
    }

    fn insert(&mut self, ks: u32, start: u32, bucket: Bucket, dirty: Seq) {
        if dirty == 0 && self.cache.bytes() > self.cache.capacity.load(Ordering::Relaxed) {
            // Readers fill the cache too: make room in this shard first.
            self.sweep();
        }
        let bytes = slot_bytes(&bucket);
        self.shard.max_depth = self.shard.max_depth.max(bucket.depth);
        self.cache.bytes.fetch_add(bytes, Ordering::Relaxed);
        if dirty != 0 {
            self.cache.count_pinned(bytes, true);
        }
        let lines = bucket.lookup_lines();
        let slot = Slot { bucket: Arc::new(bucket), lines, dirty, unfolded: false, hot: true, bytes, doomed: false };
        let old = self.shard.map.insert((ks, start), slot);
        self.cache.layouts[self.index].publish(&self.shard);
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

    /// [`MetaGuard::update`] of the entry of `name` (hash `h`), which then
    /// logs in the shard what a delta record needs of the change (see
    /// [`BitsNote`]) from what `f` returned.
    pub(crate) fn update_key<'n, R>(
        &mut self,
        ks: u32,
        start: u32,
        (h, name): (u32, &[u8]),
        f: impl FnOnce(&mut Bucket) -> R,
        note: impl FnOnce(&R) -> BitsNote<'n>,
    ) -> Option<R> {
        let r = self.update(ks, start, f);
        if let Some(r) = &r {
            self.shard.bloom_bits.note(ks, h, name, note(r));
        }
        r
    }

    /// Changes the cached bucket starting at `start` with `f` and marks it
    /// dirty; a bucket grown past its size splits (each half dirty).
    pub(crate) fn update<R>(&mut self, ks: u32, start: u32, f: impl FnOnce(&mut Bucket) -> R) -> Option<R> {
        let seq = self.cache.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let shard = &mut *self.shard;
        let slot = shard.map.get_mut(&(ks, start))?;
        if let Some(writer) = shard.draining.as_mut() {
            // The running write-back takes the bucket as it was at its cut.
            drain_slot(
                self.cache.key_hash,
                (ks, start),
                slot,
                self.cache.cut.load(Ordering::Relaxed),
                writer,
                &mut shard.bloom_bits,
            );
        }
        let record_before = slot.bucket.bytes;
        let r = f(Arc::make_mut(&mut slot.bucket));
        if slot.bucket.bytes > record_before {
            self.cache.grown.fetch_add(slot.bucket.bytes - record_before, Ordering::Relaxed);
        }
        let bytes = slot_bytes(&slot.bucket);
        slot.lines = slot.bucket.lookup_lines();
        // One change per counter (the write path's atomics are shared with
        // every other writer and the write-back).
        resize_count(&self.cache.bytes, slot.bytes, bytes);
        if slot.pinned() {
            resize_count(&self.cache.pinned_bytes, slot.bytes, bytes);
        } else {
            self.cache.count_pinned(bytes, true);
        }
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
        for (s, b) in Arc::unwrap_or_clone(slot.bucket).partition(self.cache.key_hash, start) {
            let seq = self.cache.seq.fetch_add(1, Ordering::Relaxed) + 1;
            self.insert(ks, s, b, seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::delta;
    use crate::engine::layout::key_hash;
    use crate::engine::record::{Kind, Meta};
    use crate::engine::store::SledStore;
    use std::collections::BTreeMap;

    /// Invariant: a cached bucket's value in the shard's map is one cache
    /// line, so the first prefetch step asks for all of it.
    #[test]
    fn a_map_entry_is_one_cache_line() {
        assert_eq!(super::super::probemap::line_size::<Slot>(), 64);
    }

    /// Names of shard `shard`, in order of trying.
    fn names_of(shard: usize, n: usize) -> Vec<Vec<u8>> {
        (0u64..).map(|i| format!("k{i}").into_bytes()).filter(|k| shard_of(key_hash(k)) == shard).take(n).collect()
    }

    fn set(cache: &MetaCache, store: &dyn Store, name: &[u8], meta: &Meta) {
        let h = key_hash(name);
        let mut g = cache.lock_shard(shard_of(h));
        let start = g.locate(0, h, store).unwrap();
        g.update(0, start, |b| b.upsert(name, h, meta)).unwrap();
    }

    /// The entries of `capture`'s delta records, by name.
    fn delta_entries(capture: &MetaCapture) -> BTreeMap<Vec<u8>, Option<Meta>> {
        let mut out = BTreeMap::new();
        for (key, value) in &capture.deltas {
            let shard = usize::from(key[1]);
            for e in delta::decode(KeyHash::NEW, shard, "test", value).unwrap() {
                let meta = match e.change {
                    delta::Change::Removed => None,
                    delta::Change::Entry(m) => Some(m),
                    delta::Change::BloomBits { .. } => panic!("no Bloom filter in these tests"),
                };
                out.insert(e.name, meta);
            }
        }
        out
    }

    /// Invariant: a lookup finds, for every hash of a region whose buckets
    /// have different depths, the one bucket covering it, whatever depth
    /// the previous lookup found; a hash of a region with no cached bucket
    /// finds none.
    #[test]
    fn lookups_find_the_covering_bucket_among_mixed_depths() {
        let cache = MetaCache::new(1 << 30);
        let region = 5u32 << 24;
        let mut g = cache.lock_shard(5);
        // [0, 1/2) at depth 9, [1/2, 3/4) at 10, [3/4, 7/8) and [7/8, 1) at 11.
        let parts = [(0u32, 9u8), (1 << 23, 10), (3 << 22, 11), (7 << 21, 11)];
        for &(offset, depth) in &parts {
            g.insert(0, region | offset, Bucket::new(depth), 0);
        }
        let mut x = 0x9e37_79b9u32;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let h = region | (x & 0x00ff_ffff);
            let want = parts.iter().map(|&(o, d)| (region | o, d)).find(|&(s, d)| covers(s, d, h)).unwrap().0;
            assert_eq!(g.cached_start(0, h), Some(want), "hash {h:#010x}");
        }
        assert_eq!(g.cached_start(1, region), None, "another keyspace");
        drop(g);
        assert_eq!(cache.lock_shard(6).cached_start(0, 6 << 24), None, "an empty region");
    }

    /// Invariant: a write-back's delta records hold each bucket exactly as
    /// it was at the write-back's cut, whether a writer changing the bucket
    /// after the cut drained it or the write-back's own drain did; the
    /// writer's change goes to the next write-back's records only.
    #[test]
    fn a_write_back_stores_the_state_at_its_cut() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        let cache = MetaCache::new(1 << 30);
        let (m1, m2) = (Meta::paged(Kind::String, 5, 100, 3, 0), Meta::paged(Kind::String, 6, 100, 4, 0));
        let touched = names_of(3, 2);
        let untouched = names_of(7, 1);
        for name in touched.iter().chain(&untouched) {
            set(&cache, &store, name, &m1);
        }
        let mut first = cache.cut(1, Fold::Auto, usize::MAX);
        assert!(first.folds.is_empty() && first.deltas.is_empty(), "nothing folds; the drain is left to do");
        // A writer after the cut: its bucket's cut state is drained first.
        set(&cache, &store, &touched[0], &m2);
        cache.drain(1, &mut first);
        let want: BTreeMap<Vec<u8>, Option<Meta>> =
            touched.iter().chain(&untouched).map(|n| (n.clone(), Some(m1.clone()))).collect();
        assert_eq!(delta_entries(&first), want, "the state at the cut, not the later change");
        let mut second = cache.cut(2, Fold::Auto, usize::MAX);
        cache.drain(2, &mut second);
        let want: BTreeMap<Vec<u8>, Option<Meta>> = [(touched[0].clone(), Some(m2))].into_iter().collect();
        assert_eq!(delta_entries(&second), want, "the later change, in the next write-back");
    }

    /// Invariant: the growth the early write-back watches is exactly what
    /// updates added to the cached buckets' record bytes since the last
    /// cut: new entries count, a change that keeps an entry's size does
    /// not, and a cut starts the count again.
    #[test]
    fn growth_since_the_cut_counts_new_record_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        let cache = MetaCache::new(1 << 30);
        let names = names_of(5, 3);
        let record_bytes = || cache.shards[5].lock().map.values().map(|s| s.bucket.bytes).sum::<usize>();
        for name in &names {
            cache.lock_shard(5).locate(0, key_hash(name), &store).unwrap();
        }
        let before = record_bytes();
        assert_eq!(cache.grown_since_cut(), 0, "loading a bucket is no growth");
        let (m1, m2) = (Meta::paged(Kind::String, 5, 100, 3, 0), Meta::paged(Kind::String, 6, 100, 4, 0));
        for name in &names {
            set(&cache, &store, name, &m1);
        }
        let grown = record_bytes() - before;
        assert!(grown > 0);
        assert_eq!(cache.grown_since_cut(), grown, "new entries count their bytes");
        for name in &names {
            set(&cache, &store, name, &m2);
        }
        assert_eq!(record_bytes() - before, grown, "m2 encodes at m1's size");
        assert_eq!(cache.grown_since_cut(), grown, "a same-size change is no growth");
        let mut capture = cache.cut(1, Fold::Auto, usize::MAX);
        assert_eq!(cache.grown_since_cut(), 0, "the cut starts the count again");
        // Growth after the cut, before the drain, is the next write-back's.
        set(&cache, &store, &names_of(5, 4)[3], &m1);
        let after_cut = cache.grown_since_cut();
        assert!(after_cut > 0);
        cache.drain(1, &mut capture);
        assert_eq!(cache.grown_since_cut(), after_cut, "the drain keeps it");
    }

    /// Invariant: when every shard falls due at once, one write-back folds
    /// shards only up to [`FOLD_BATCH`] bytes of buckets (the last one may
    /// pass it) and says that folds wait; the next write-back folds the
    /// rest and says none wait.
    #[test]
    fn due_folds_are_spread_over_write_backs() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        let cache = MetaCache::new(1 << 30);
        let meta = Meta::paged(Kind::String, 5, 100, 3, 0);
        for shard in 0..SHARDS {
            set(&cache, &store, &names_of(shard, 1)[0], &meta);
        }
        let mut first = cache.cut(1, Fold::Auto, usize::MAX);
        cache.drain(1, &mut first);
        assert!(first.folds.is_empty() && !first.folds_waiting, "nothing is due yet");
        // Every shard due, each holding a sixteenth of a batch.
        let share = FOLD_BATCH / 16;
        for shard in 0..SHARDS {
            set(&cache, &store, &names_of(shard, 1)[0], &meta);
            let mut s = cache.shards[shard].lock();
            (s.unfolded_bytes, s.delta_bytes) = (share, share.max(FOLD_FLOOR));
        }
        let folded =
            |c: &MetaCapture| c.folds.iter().map(|b| shard_of(b.start)).collect::<std::collections::BTreeSet<_>>();
        let mut second = cache.cut(2, Fold::Auto, usize::MAX);
        cache.drain(2, &mut second);
        assert_eq!(folded(&second).len(), 16, "a batch's worth of shards");
        assert!(second.folds_waiting, "the others wait");
        let mut third = cache.cut(3, Fold::Auto, usize::MAX);
        cache.drain(3, &mut third);
        assert!(folded(&second).is_disjoint(&folded(&third)));
        assert_eq!(folded(&third).len(), SHARDS - 16, "the rest, now small, in one batch");
        assert!(!third.folds_waiting);
    }
}
