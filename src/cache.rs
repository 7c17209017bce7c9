//! In-memory state between the operations and the store: a cache of decoded
//! pages and of key metadata, which also holds every change not yet written
//! back (dirty entries).
//!
//! Invariants:
//! - The store changes only through a write-back of dirty entries (and the
//!   reclaimer, which deletes pages of dead bitmap ids nobody can name).
//! - A dirty entry is never evicted; it becomes clean only once the write-back
//!   that carried its latest version has been applied.
//! - Every removal of a page slot bumps `epoch` first. A reader that loaded a
//!   page from the store without holding the shard lock inserts it only if
//!   the epoch did not move meanwhile; otherwise the store may have been
//!   rewritten from a slot that has since gone, and it reloads.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::error::Result;
use crate::meta::Meta;
use crate::page::Page;

/// (bitmap id, page number).
pub(crate) type PageId = (u64, u64);

const SHARDS: usize = 64;
/// Bookkeeping bytes charged per cached page on top of the page itself.
const SLOT_OVERHEAD: usize = 64;
/// Bookkeeping bytes charged per cached metadata entry.
const META_OVERHEAD: usize = 96;

/// A fast hasher for integer keys (FxHash-style multiply-rotate).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

fn shard_of_page(id: PageId) -> usize {
    let mut h = IdHasher::default();
    h.write_u64(id.0);
    h.write_u64(id.1);
    // The top bits of a multiplicative hash are the well-mixed ones.
    usize::try_from(h.finish() >> 58).unwrap_or(0) % SHARDS
}

/// Version stamp of a change; 0 means clean.
pub(crate) type Seq = u64;

struct PageSlot {
    /// `None`: the page is all zero (absent from the store, or to be removed).
    page: Option<Arc<Page>>,
    dirty: Seq,
    hot: bool,
    bytes: usize,
}

fn slot_bytes(page: &Option<Arc<Page>>) -> usize {
    SLOT_OVERHEAD + page.as_ref().map_or(0, |p| p.heap_bytes())
}

/// One dirty page captured by a write-back.
pub(crate) struct DirtyPage {
    pub(crate) id: PageId,
    pub(crate) seq: Seq,
    pub(crate) page: Option<Arc<Page>>,
}

/// Decoded pages, clean and dirty.
pub(crate) struct PageCache {
    shards: Box<[Mutex<FastMap<PageId, PageSlot>>]>,
    /// Ordered index of dirty pages, so an ordered page scan can merge them.
    dirty: Mutex<BTreeSet<PageId>>,
    bytes: AtomicUsize,
    dirty_bytes: AtomicUsize,
    /// Number of dirty pages (the size of `dirty`).
    dirty_pages: AtomicUsize,
    epoch: AtomicU64,
    seq: AtomicU64,
    capacity: usize,
    evicting: Mutex<()>,
}

impl PageCache {
    pub(crate) fn new(capacity: usize) -> PageCache {
        PageCache {
            shards: (0..SHARDS).map(|_| Mutex::new(FastMap::default())).collect(),
            dirty: Mutex::new(BTreeSet::new()),
            bytes: AtomicUsize::new(0),
            dirty_bytes: AtomicUsize::new(0),
            dirty_pages: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            capacity,
            evicting: Mutex::new(()),
        }
    }

    fn shard(&self, id: PageId) -> MutexGuard<'_, FastMap<PageId, PageSlot>> {
        self.shards[shard_of_page(id)].lock()
    }

    fn next_seq(&self) -> Seq {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The eviction epoch: changes whenever a cached page is dropped.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Bytes of dirty pages waiting for a write-back.
    pub(crate) fn dirty_bytes(&self) -> usize {
        self.dirty_bytes.load(Ordering::Relaxed)
    }

    /// Number of dirty pages waiting for a write-back.
    pub(crate) fn dirty_pages(&self) -> usize {
        self.dirty_pages.load(Ordering::Relaxed)
    }

    /// Bytes held by the cache, clean and dirty.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The page `id`, from the cache or else from `load`.
    ///
    /// `load` runs without any lock held and may run more than once; it gets
    /// `true` on a retry (when a value it produced earlier may be stale).
    pub(crate) fn get(&self, id: PageId, load: impl FnMut(bool) -> Result<Option<Page>>) -> Result<Option<Arc<Page>>> {
        self.with_slot(id, load, |slot| {
            slot.hot = true;
            slot.page.clone()
        })
    }

    /// Applies `f` to the page `id` (all-zero if absent) and marks it dirty.
    ///
    /// The caller must hold the lock of the key owning the bitmap, so there is
    /// one writer per page at a time.
    pub(crate) fn update<R>(
        &self,
        id: PageId,
        load: impl FnMut(bool) -> Result<Option<Page>>,
        f: impl FnOnce(&mut Page) -> R,
    ) -> Result<R> {
        self.with_slot(id, load, |slot| self.apply(id, slot, f))
    }

    /// Runs `f` on the slot of page `id` under its shard lock, loading the
    /// page with `load` (without any lock held) if it is not cached. The one
    /// place of the epoch protocol: a loaded page is inserted only if no slot
    /// was removed since before the load, else it is loaded again (`load`
    /// gets `true` on such a retry).
    fn with_slot<R>(
        &self,
        id: PageId,
        mut load: impl FnMut(bool) -> Result<Option<Page>>,
        f: impl FnOnce(&mut PageSlot) -> R,
    ) -> Result<R> {
        let mut retry = false;
        loop {
            let epoch = self.epoch.load(Ordering::SeqCst);
            if let Some(slot) = self.shard(id).get_mut(&id) {
                return Ok(f(slot));
            }
            let loaded = load(retry)?.map(Arc::new);
            let mut shard = self.shard(id);
            if let Some(slot) = shard.get_mut(&id) {
                return Ok(f(slot));
            }
            if self.epoch.load(Ordering::SeqCst) == epoch {
                let bytes = slot_bytes(&loaded);
                self.bytes.fetch_add(bytes, Ordering::Relaxed);
                // Inserted and used in one critical section, so eviction
                // cannot drop it in between.
                let slot = shard.entry(id).or_insert(PageSlot { page: loaded, dirty: 0, hot: true, bytes });
                let r = f(slot);
                drop(shard);
                // Readers fill the cache too: keep it within its budget.
                self.evict_if_needed();
                return Ok(r);
            }
            retry = true;
        }
    }

    /// Applies `f` to the page in `slot` (all zero if absent) and marks it
    /// dirty; the caller holds the slot's shard lock.
    fn apply<R>(&self, id: PageId, slot: &mut PageSlot, f: impl FnOnce(&mut Page) -> R) -> R {
        let page = slot.page.get_or_insert_with(|| Arc::new(Page::zeros()));
        let r = f(Arc::make_mut(page));
        if page.is_empty() {
            slot.page = None;
        }
        self.mark_dirty(id, slot);
        r
    }

    fn mark_dirty(&self, id: PageId, slot: &mut PageSlot) {
        let new_bytes = slot_bytes(&slot.page);
        let was_dirty = slot.dirty != 0;
        self.bytes.fetch_add(new_bytes, Ordering::Relaxed);
        self.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
        if was_dirty {
            self.dirty_bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
        } else {
            self.dirty.lock().insert(id);
            self.dirty_pages.fetch_add(1, Ordering::Relaxed);
        }
        self.dirty_bytes.fetch_add(new_bytes, Ordering::Relaxed);
        slot.bytes = new_bytes;
        slot.dirty = self.next_seq();
        slot.hot = true;
    }

    /// Replaces the page `id` with `page` (`None`: all zero) and marks it dirty.
    pub(crate) fn put(&self, id: PageId, page: Option<Page>) {
        let mut shard = self.shard(id);
        let slot =
            shard.entry(id).or_insert_with(|| PageSlot { page: None, dirty: 0, hot: true, bytes: SLOT_OVERHEAD });
        slot.page = page.filter(|p| !p.is_empty()).map(Arc::new);
        self.mark_dirty(id, slot);
    }

    /// Dirty page numbers of bitmap `bitmap` in `from ..= to`, in order.
    pub(crate) fn dirty_pages_of(&self, bitmap: u64, from: u64, to: u64) -> Vec<u64> {
        self.dirty.lock().range((bitmap, from)..=(bitmap, to)).map(|&(_, p)| p).collect()
    }

    /// Captures every dirty page. The caller excludes writers meanwhile.
    pub(crate) fn dirty_snapshot(&self) -> Vec<DirtyPage> {
        let ids: Vec<PageId> = self.dirty.lock().iter().copied().collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(slot) = self.shard(id).get(&id) {
                if slot.dirty != 0 {
                    out.push(DirtyPage { id, seq: slot.dirty, page: slot.page.clone() });
                }
            }
        }
        out
    }

    /// Marks the pages of an applied write-back clean, unless they changed
    /// again since it was captured. All-zero clean slots are dropped.
    pub(crate) fn mark_clean(&self, written: &[DirtyPage]) {
        for w in written {
            let mut shard = self.shard(w.id);
            let Some(slot) = shard.get_mut(&w.id) else { continue };
            if slot.dirty != w.seq {
                continue;
            }
            slot.dirty = 0;
            self.dirty_bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
            self.dirty.lock().remove(&w.id);
            self.dirty_pages.fetch_sub(1, Ordering::Relaxed);
            if slot.page.is_none() {
                self.epoch.fetch_add(1, Ordering::SeqCst);
                let bytes = slot.bytes;
                shard.remove(&w.id);
                self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            }
        }
    }

    /// Forgets the given pages, dirty or not: used for pages of dead bitmaps,
    /// which must never reach the store.
    pub(crate) fn discard(&self, ids: &[PageId]) {
        for id in ids {
            let mut shard = self.shard(*id);
            self.epoch.fetch_add(1, Ordering::SeqCst);
            if let Some(slot) = shard.remove(id) {
                self.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                if slot.dirty != 0 {
                    self.dirty_bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                    self.dirty.lock().remove(id);
                    self.dirty_pages.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Drops clean pages that were not used since the last sweep until the
    /// cache is below 7/8 of its capacity (or nothing more can go).
    pub(crate) fn evict_if_needed(&self) {
        if self.bytes() <= self.capacity {
            return;
        }
        let Some(_one) = self.evicting.try_lock() else { return };
        let target = self.capacity / 8 * 7;
        for _pass in 0..3 {
            for shard in self.shards.iter() {
                if self.bytes() <= target {
                    return;
                }
                let mut shard = shard.lock();
                self.epoch.fetch_add(1, Ordering::SeqCst);
                shard.retain(|_, slot| {
                    if slot.dirty != 0 {
                        return true;
                    }
                    if slot.hot {
                        slot.hot = false;
                        return true;
                    }
                    self.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                    false
                });
            }
        }
    }
}

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

fn shard_of_name(name: &[u8]) -> usize {
    let mut h = IdHasher::default();
    for chunk in name.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h.write_u64(u64::from_le_bytes(w));
    }
    h.write_u64(name.len() as u64);
    usize::try_from(h.finish() >> 56).unwrap_or(0) % META_SHARDS
}

const META_SHARDS: usize = 256;

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

    /// Locks the shard of `name`: no other writer can change that key until
    /// the guard is dropped.
    pub(crate) fn lock(&self, name: &[u8]) -> MetaGuard<'_> {
        MetaGuard { cache: self, shard: self.shards[shard_of_name(name)].lock() }
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

/// Small records written with the next write-back: reclaim markers.
pub(crate) struct Journal {
    entries: Mutex<BTreeMap<Vec<u8>, JournalValue>>,
    seq: AtomicU64,
}

/// A journal record's version and value (`None`: remove the key).
type JournalValue = (Seq, Option<Vec<u8>>);

/// A journal record captured by a write-back.
pub(crate) type JournalEntry = (Vec<u8>, Seq, Option<Vec<u8>>);

impl Journal {
    pub(crate) fn new() -> Journal {
        Journal { entries: Mutex::new(BTreeMap::new()), seq: AtomicU64::new(0) }
    }

    /// Records that `key` must be set to `value` (`None`: removed).
    pub(crate) fn set(&self, key: Vec<u8>, value: Option<Vec<u8>>) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        self.entries.lock().insert(key, (seq, value));
    }

    /// Whether a record for `key` waits for the next write-back.
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.entries.lock().contains_key(key)
    }

    pub(crate) fn snapshot(&self) -> Vec<JournalEntry> {
        self.entries.lock().iter().map(|(k, (s, v))| (k.clone(), *s, v.clone())).collect()
    }

    pub(crate) fn mark_clean(&self, written: &[JournalEntry]) {
        let mut entries = self.entries.lock();
        for (k, seq, _) in written {
            if entries.get(k).is_some_and(|(s, _)| s == seq) {
                entries.remove(k);
            }
        }
    }
}

type DirectoryMap = FastMap<u64, Arc<Vec<u64>>>;

/// Per-bitmap directories: the sorted numbers of the pages a bitmap has in
/// the store, so ordered page streams need no store scan once built.
///
/// A directory is complete for its bitmap id or absent. Write-backs update
/// the directories that exist after applying their batch; `version` lets a
/// directory built by a scan that raced with a write-back be dropped instead
/// of cached.
pub(crate) struct Directories {
    /// (version, directory per bitmap id).
    map: Mutex<(u64, DirectoryMap)>,
    entries: AtomicUsize,
    budget: usize,
}

impl Directories {
    pub(crate) fn new(budget_entries: usize) -> Directories {
        Directories { map: Mutex::new((0, FastMap::default())), entries: AtomicUsize::new(0), budget: budget_entries }
    }

    /// The directory of `bitmap`, if cached.
    pub(crate) fn get(&self, bitmap: u64) -> Option<Arc<Vec<u64>>> {
        self.map.lock().1.get(&bitmap).cloned()
    }

    /// The current version, to pass to [`Directories::insert`].
    pub(crate) fn version(&self) -> u64 {
        self.map.lock().0
    }

    /// Caches a directory built from a scan that started at `version`,
    /// unless a write-back changed the store since.
    pub(crate) fn insert(&self, bitmap: u64, pages: Arc<Vec<u64>>, version: u64) {
        let mut m = self.map.lock();
        if m.0 != version {
            return;
        }
        let n = pages.len();
        if self.entries.load(Ordering::Relaxed) + n > self.budget {
            m.1.clear();
            self.entries.store(0, Ordering::Relaxed);
            if n > self.budget {
                return;
            }
        }
        if let Some(old) = m.1.insert(bitmap, pages) {
            self.entries.fetch_sub(old.len(), Ordering::Relaxed);
        }
        self.entries.fetch_add(n, Ordering::Relaxed);
    }

    /// Records an applied write-back: `written` holds (id, page, stored?)
    /// sorted by id and page.
    pub(crate) fn apply(&self, written: &[(u64, u64, bool)]) {
        let mut m = self.map.lock();
        m.0 += 1;
        for group in written.chunk_by(|a, b| a.0 == b.0) {
            let id = group[0].0;
            let Some(dir) = m.1.get_mut(&id) else { continue };
            let before = dir.len();
            let merged = merge_directory(dir, group);
            *dir = Arc::new(merged);
            let after = dir.len();
            self.entries.fetch_add(after, Ordering::Relaxed);
            self.entries.fetch_sub(before, Ordering::Relaxed);
        }
    }

    /// Forgets the directory of `bitmap` (its pages are being deleted).
    pub(crate) fn remove(&self, bitmap: u64) {
        let mut m = self.map.lock();
        m.0 += 1;
        if let Some(old) = m.1.remove(&bitmap) {
            self.entries.fetch_sub(old.len(), Ordering::Relaxed);
        }
    }
}

/// `dir` with the pages of `changes` (sorted) added or removed.
fn merge_directory(dir: &[u64], changes: &[(u64, u64, bool)]) -> Vec<u64> {
    let mut out = Vec::with_capacity(dir.len() + changes.len());
    let mut d = dir.iter().copied().peekable();
    for &(_, page, stored) in changes {
        while let Some(&x) = d.peek() {
            if x >= page {
                break;
            }
            out.push(x);
            d.next();
        }
        if d.peek() == Some(&page) {
            d.next();
        }
        if stored {
            out.push(page);
        }
    }
    out.extend(d);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_merge_adds_and_removes_in_order() {
        let dir = vec![1, 3, 5, 9];
        let changes = [(0, 0, true), (0, 3, false), (0, 4, true), (0, 9, true), (0, 10, false), (0, 12, true)];
        assert_eq!(merge_directory(&dir, &changes), vec![0, 1, 4, 5, 9, 12]);
    }

    /// A directory built from a scan that raced with a write-back is not cached.
    #[test]
    fn stale_directory_is_not_cached() {
        let d = Directories::new(1000);
        let v = d.version();
        d.apply(&[(1, 1, true)]);
        d.insert(1, Arc::new(vec![]), v);
        assert!(d.get(1).is_none());
        let v = d.version();
        d.insert(1, Arc::new(vec![2]), v);
        d.apply(&[(1, 1, true), (2, 0, true)]);
        assert_eq!(d.get(1).as_deref(), Some(&vec![1, 2]));
    }
}
