//! The cache of key metadata, which also holds every metadata change not yet
//! written back. It is sharded by key name; holding a shard's lock is holding
//! the lock of every key hashed to it (see `tx`).

use std::collections::{BTreeSet, HashMap};
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};

use super::idhash::IdHasher;
use super::pages::Seq;
use super::record::Meta;

/// Bookkeeping bytes charged per cached metadata entry.
const META_OVERHEAD: usize = 96;

/// Number of shards, so of independent key locks.
pub(crate) const META_SHARDS: usize = 256;

struct MetaSlot {
    meta: Option<Meta>,
    dirty: Seq,
    hot: bool,
}

/// One shard of the metadata cache. Holding its lock is holding the write
/// lock of every key hashed to it.
pub(crate) struct MetaShard {
    map: HashMap<Vec<u8>, MetaSlot>,
    dirty: BTreeSet<Vec<u8>>,
}

/// One dirty metadata entry captured by a write-back.
pub(crate) struct DirtyMeta {
    pub(crate) name: Vec<u8>,
    pub(crate) seq: Seq,
    pub(crate) meta: Option<Meta>,
}

/// Key metadata, clean and dirty, sharded by key; a shard lock doubles as the
/// key lock for writers.
pub(crate) struct MetaCache {
    shards: Box<[Mutex<MetaShard>]>,
    seq: AtomicU64,
    entries: AtomicUsize,
    /// Number of dirty entries (over all shards' `dirty` sets).
    dirty_entries: AtomicUsize,
    capacity: usize,
}

/// The shard (and so the lock) of key `name`.
pub(crate) fn shard_of_name(name: &[u8]) -> usize {
    let mut h = IdHasher::default();
    for chunk in name.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h.write_u64(u64::from_le_bytes(w));
    }
    h.write_u64(name.len() as u64);
    usize::try_from(h.finish() >> 56).unwrap_or(0) % META_SHARDS
}

impl MetaCache {
    pub(crate) fn new(capacity_bytes: usize) -> MetaCache {
        MetaCache {
            shards: (0..META_SHARDS)
                .map(|_| Mutex::new(MetaShard { map: HashMap::new(), dirty: BTreeSet::new() }))
                .collect(),
            seq: AtomicU64::new(0),
            entries: AtomicUsize::new(0),
            dirty_entries: AtomicUsize::new(0),
            capacity: (capacity_bytes / META_OVERHEAD).max(1024),
        }
    }

    /// Locks shard `shard` (see [`shard_of_name`]): no other thread can
    /// change a key of that shard until the guard is dropped.
    pub(crate) fn lock_shard(&self, shard: usize) -> MetaGuard<'_> {
        MetaGuard { cache: self, shard: self.shards[shard].lock() }
    }

    /// Number of dirty entries waiting for a write-back.
    pub(crate) fn dirty_entries(&self) -> usize {
        self.dirty_entries.load(Ordering::Relaxed)
    }

    /// Captures every dirty entry. The caller excludes writers meanwhile.
    pub(crate) fn dirty_snapshot(&self) -> Vec<DirtyMeta> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for name in &shard.dirty {
                if let Some(slot) = shard.map.get(name) {
                    out.push(DirtyMeta { name: name.clone(), seq: slot.dirty, meta: slot.meta });
                }
            }
        }
        out
    }

    /// Marks entries of an applied write-back clean unless changed since.
    pub(crate) fn mark_clean(&self, written: &[DirtyMeta]) {
        for w in written {
            let mut shard = self.shards[shard_of_name(&w.name)].lock();
            let shard = &mut *shard;
            if let Some(slot) = shard.map.get_mut(&w.name) {
                if slot.dirty == w.seq {
                    slot.dirty = 0;
                    shard.dirty.remove(&w.name);
                    self.dirty_entries.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        self.evict_if_needed();
    }

    fn evict_if_needed(&self) {
        if self.entries.load(Ordering::Relaxed) <= self.capacity {
            return;
        }
        for shard in self.shards.iter() {
            sweep_metas(&mut shard.lock().map, &self.entries);
        }
    }
}

/// One CLOCK sweep over a metadata shard: drops the clean entries not used
/// since the last sweep and clears the others' `hot` bit; dirty entries stay.
fn sweep_metas(map: &mut HashMap<Vec<u8>, MetaSlot>, entries: &AtomicUsize) {
    map.retain(|_, slot| {
        if slot.dirty != 0 {
            return true;
        }
        if slot.hot {
            slot.hot = false;
            return true;
        }
        entries.fetch_sub(1, Ordering::Relaxed);
        false
    });
}

/// A locked metadata shard.
pub(crate) struct MetaGuard<'a> {
    cache: &'a MetaCache,
    shard: MutexGuard<'a, MetaShard>,
}

impl MetaGuard<'_> {
    /// The cached metadata of `name`: `None` if not cached, `Some(None)` if
    /// known absent.
    pub(crate) fn cached(&mut self, name: &[u8]) -> Option<Option<Meta>> {
        self.shard.map.get_mut(name).map(|slot| {
            slot.hot = true;
            slot.meta
        })
    }

    /// Caches the stored metadata of `name` (clean). Past the cache's
    /// capacity, first drops this shard's clean entries not used since the
    /// last sweep (readers fill the cache too).
    pub(crate) fn insert_clean(&mut self, name: &[u8], meta: Option<Meta>) {
        if self.cache.entries.load(Ordering::Relaxed) > self.cache.capacity {
            sweep_metas(&mut self.shard.map, &self.cache.entries);
        }
        if self.shard.map.insert(name.to_vec(), MetaSlot { meta, dirty: 0, hot: true }).is_none() {
            self.cache.entries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sets the metadata of `name` (`None` deletes the key), dirty.
    pub(crate) fn set(&mut self, name: &[u8], meta: Option<Meta>) {
        let seq = self.cache.seq.fetch_add(1, Ordering::Relaxed) + 1;
        match self.shard.map.get_mut(name) {
            Some(slot) => {
                slot.meta = meta;
                slot.dirty = seq;
                slot.hot = true;
            }
            None => {
                self.shard.map.insert(name.to_vec(), MetaSlot { meta, dirty: seq, hot: true });
                self.cache.entries.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !self.shard.dirty.contains(name) {
            self.shard.dirty.insert(name.to_vec());
            self.cache.dirty_entries.fetch_add(1, Ordering::Relaxed);
        }
    }
}
