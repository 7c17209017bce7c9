//! The cache of decoded pages, which also holds every page change not yet
//! written back (dirty pages).
//!
//! Invariants:
//! - The store changes only through a write-back of dirty entries (and the
//!   reclaimer, which deletes pages of dead bitmap ids nobody can name).
//! - A dirty page is never evicted; it becomes clean only once the write-back
//!   that carried its latest version has been applied.
//! - A logged page (its store record is older than the page: the page delta
//!   records hold the rest, see `pagedelta.rs`) is never evicted either, and
//!   stays in the dirty index (so ordered page scans merge it from the
//!   cache) until a page fold has written it whole.
//! - A dirty page keeps `base`, the version the store and the page delta
//!   records give (all zero: `Some(None)`), so the write-back can log the
//!   bits that differ instead of the page.
//! - A passing page (one of a bulk value, see [`PageCache::is_bulk`]) leaves
//!   the cache as soon as it is clean, unless a reader took it meanwhile.
//! - Every removal of a page slot bumps `epoch` first. A reader that loaded a
//!   page from the store without holding the shard lock uses or inserts it
//!   only if the epoch did not move meanwhile; otherwise the store may have been
//!   rewritten from a slot that has since gone, and it reloads.

use std::collections::{BTreeSet, HashSet};
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::clock::{self, ClockSlot};
use super::flat::FlatCache;
use super::idhash::{FastMap, IdHasher};
use crate::error::Result;
use crate::page::Page;

/// (bitmap id, page number).
pub(crate) type PageId = (u64, u64);

const SHARDS: usize = 64;
/// Bookkeeping bytes charged per cached page on top of the page itself.
const SLOT_OVERHEAD: usize = 64;

/// Consecutive pages of a bitmap per run: a run shares one shard, so a
/// stream can take a run's cached pages under one lock
/// ([`PageCache::get_cached_run`]).
pub(crate) const RUN: u64 = 16;

fn shard_of_page(id: PageId) -> usize {
    let mut h = IdHasher::default();
    h.write_u64(id.0);
    h.write_u64(id.1 / RUN);
    // The top bits of a multiplicative hash are the well-mixed ones.
    usize::try_from(h.finish() >> 58).unwrap_or(0) % SHARDS
}

/// Version stamp of a change; 0 means clean.
pub(crate) type Seq = u64;

struct PageSlot {
    /// `None`: the page is all zero (absent from the store, or to be removed).
    page: Option<Arc<Page>>,
    /// The version the store (with the page delta records) gives, while it
    /// differs from `page`: always set on a dirty slot; `None` on a clean
    /// one, whose `page` is that version.
    base: Option<Option<Arc<Page>>>,
    dirty: Seq,
    /// Page delta records hold changes of this page beyond its store record.
    logged: bool,
    hot: bool,
    /// Written by a bulk build and not taken since by an ordinary read or
    /// a write: dropped once clean.
    passing: bool,
    bytes: usize,
}

impl ClockSlot for PageSlot {
    fn stays(&self) -> bool {
        self.dirty != 0 || self.logged
    }
    fn hot(&mut self) -> &mut bool {
        &mut self.hot
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
}

fn slot_bytes(page: Option<&Arc<Page>>) -> usize {
    SLOT_OVERHEAD + page.map_or(0, |p| p.heap_bytes())
}

impl PageSlot {
    fn clean(page: Option<Arc<Page>>, hot: bool) -> PageSlot {
        let bytes = slot_bytes(page.as_ref());
        PageSlot { page, base: None, dirty: 0, logged: false, hot, passing: false, bytes }
    }

    /// The bytes the slot holds: its page, and its base where that is a
    /// copy of its own.
    fn held_bytes(&self) -> usize {
        let base = match &self.base {
            Some(Some(b)) if !self.page.as_ref().is_some_and(|p| Arc::ptr_eq(p, b)) => b.heap_bytes(),
            _ => 0,
        };
        slot_bytes(self.page.as_ref()) + base
    }
}

/// A page read from the store, and the other pages its record held (the
/// members of its group), which the cache takes too where it has no slot.
#[derive(Default)]
pub(crate) struct Fetched {
    /// `None`: the page is all zero.
    pub(crate) page: Option<Page>,
    /// (page number, page) of the same bitmap.
    pub(crate) siblings: Vec<(u64, Page)>,
}

/// One dirty (or, for a page fold, logged) page captured by a write-back.
pub(crate) struct DirtyPage {
    pub(crate) id: PageId,
    /// 0 for a logged page that is not dirty.
    pub(crate) seq: Seq,
    pub(crate) page: Option<Arc<Page>>,
    /// The version the store and the page delta records give.
    pub(crate) base: Option<Arc<Page>>,
    /// Whether page delta records already hold changes of the page.
    pub(crate) logged: bool,
}

/// Decoded pages, clean and dirty.
pub(crate) struct PageCache {
    shards: Box<[Mutex<FastMap<PageId, PageSlot>>]>,
    /// Ordered index of dirty pages, so an ordered page scan can merge them.
    dirty: Mutex<BTreeSet<PageId>>,
    bytes: AtomicUsize,
    dirty_bytes: AtomicUsize,
    /// Number of dirty pages.
    dirty_pages: AtomicUsize,
    /// Bytes and number of logged pages.
    logged_bytes: AtomicUsize,
    logged_pages: AtomicUsize,
    epoch: AtomicU64,
    seq: AtomicU64,
    capacity: AtomicUsize,
    evicting: Mutex<()>,
    /// Flat position lists of sparse bitmaps, dropped by any change of a
    /// page of theirs (see `flat.rs`): at most an eighth of the capacity,
    /// and the pages are evicted to the capacity less their bytes.
    pub(crate) flat: FlatCache,
}

impl PageCache {
    pub(crate) fn new(capacity: usize) -> PageCache {
        PageCache {
            shards: (0..SHARDS).map(|_| Mutex::new(FastMap::default())).collect(),
            dirty: Mutex::new(BTreeSet::new()),
            bytes: AtomicUsize::new(0),
            dirty_bytes: AtomicUsize::new(0),
            dirty_pages: AtomicUsize::new(0),
            logged_bytes: AtomicUsize::new(0),
            logged_pages: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            capacity: AtomicUsize::new(capacity),
            evicting: Mutex::new(()),
            flat: FlatCache::new(capacity / 8),
        }
    }

    fn shard(&self, id: PageId) -> MutexGuard<'_, FastMap<PageId, PageSlot>> {
        self.shards[shard_of_page(id)].lock()
    }

    fn next_seq(&self) -> Seq {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Bytes of dirty pages waiting for a write-back.
    pub(crate) fn dirty_bytes(&self) -> usize {
        self.dirty_bytes.load(Ordering::Relaxed)
    }

    /// Number of dirty pages waiting for a write-back.
    pub(crate) fn dirty_pages(&self) -> usize {
        self.dirty_pages.load(Ordering::Relaxed)
    }

    /// Bytes of logged pages (see the module's invariants).
    pub(crate) fn logged_bytes(&self) -> usize {
        self.logged_bytes.load(Ordering::Relaxed)
    }

    /// Number of logged pages.
    pub(crate) fn logged_pages(&self) -> usize {
        self.logged_pages.load(Ordering::Relaxed)
    }

    /// Bytes held by the cache, clean and dirty.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The page `id`, from the cache or else from `load`.
    ///
    /// `load` runs without any lock held and may run more than once; it gets
    /// `true` on a retry (when a value it produced earlier may be stale).
    pub(crate) fn get(&self, id: PageId, load: impl FnMut(bool) -> Result<Fetched>) -> Result<Option<Arc<Page>>> {
        self.read(id, false, load)
    }

    /// As [`PageCache::get`]; with `passing` (a bulk read) a page found in
    /// the cache is left as it was (not marked used), and a page loaded
    /// from the store is not cached (the other members of its group record
    /// are, unused: see [`PageCache::with_slot`]), so a read of more than
    /// the cache holds does not push out what other readers use.
    pub(crate) fn read(
        &self,
        id: PageId,
        passing: bool,
        load: impl FnMut(bool) -> Result<Fetched>,
    ) -> Result<Option<Arc<Page>>> {
        self.with_slot(id, !passing, load, |slot| {
            if !passing {
                slot.hot = true;
                slot.passing = false;
            }
            slot.page.clone()
        })
    }

    /// Whether a value of about `bytes` bytes of pages is bulk: more than a
    /// quarter of the capacity. Its pages pass through the cache (read with
    /// [`PageCache::read`], built with `passing` puts) instead of
    /// filling it: a scan larger than the cache would find none of its
    /// pages still cached when it comes round again, and would evict every
    /// other reader's pages on the way.
    pub(crate) fn is_bulk(&self, bytes: u64) -> bool {
        bytes > self.capacity_u64() / 4
    }

    /// Whether one operation reading about `bytes` bytes of pages (of
    /// several values, each maybe not bulk) reads more than the cache
    /// holds: then its streams pass through the cache too.
    pub(crate) fn exceeds(&self, bytes: u64) -> bool {
        bytes > self.capacity_u64()
    }

    fn capacity_u64(&self) -> u64 {
        u64::try_from(self.capacity.load(Ordering::Relaxed)).unwrap_or(u64::MAX)
    }

    /// The cached slots of `pages` of `bitmap`, which must all lie in one
    /// run of [`RUN`] pages: for each, `None` if it is not cached (load it
    /// with [`PageCache::get`]), else its page (`Some(None)`: all zero).
    ///
    /// One shard lock for the run. The slots and page headers are first only
    /// read, with no atomic operation in between, so their cache misses
    /// overlap instead of waiting one for another; the reference counts are
    /// then taken on lines already in the CPU cache.
    ///
    /// With `passing` (a bulk read) the slots found are left as they were;
    /// otherwise each is marked used, and an ordinary page if passing.
    pub(crate) fn get_cached_run(&self, bitmap: u64, pages: &[u64], passing: bool) -> Vec<Option<Option<Arc<Page>>>> {
        let Some(&first) = pages.first() else { return Vec::new() };
        debug_assert!(pages.iter().all(|p| p / RUN == first / RUN), "pages of one run");
        let mut shard = self.shard((bitmap, first));
        let touched = pages
            .iter()
            .filter_map(|&p| shard.get(&(bitmap, p)))
            .filter_map(|slot| slot.page.as_ref())
            .fold(0u32, |sum, page| sum.wrapping_add(page.count_ones()));
        std::hint::black_box(touched);
        pages
            .iter()
            .map(|&p| {
                shard.get_mut(&(bitmap, p)).map(|slot| {
                    if !passing {
                        slot.hot = true;
                        slot.passing = false;
                    }
                    slot.page.clone()
                })
            })
            .collect()
    }

    /// Applies `f` to the page `id` (all-zero if absent) and marks it dirty.
    ///
    /// The caller must hold the lock of the key owning the bitmap, so there is
    /// one writer per page at a time.
    pub(crate) fn update<R>(
        &self,
        id: PageId,
        load: impl FnMut(bool) -> Result<Fetched>,
        f: impl FnOnce(&mut Page) -> R,
    ) -> Result<R> {
        self.with_slot(id, true, load, |slot| {
            slot.passing = false;
            self.apply(id, slot, f)
        })
    }

    /// Runs `f` on the slot of page `id` under its shard lock, loading the
    /// page with `load` (without any lock held) if it is not cached. The one
    /// place of the epoch protocol: a loaded page is used only if no slot
    /// was removed since before the load, else it is loaded again (`load`
    /// gets `true` on such a retry). With `keep`, the loaded page is
    /// inserted; without, `f` runs on a slot of its own that is then
    /// dropped. Either way the siblings that came with it (the other
    /// members of its group record: small pages) are inserted by the same
    /// rule, each where no slot exists, not marked as used, so a stream
    /// reading the group's next pages finds them instead of reading the
    /// record again, and eviction takes them first.
    fn with_slot<R>(
        &self,
        id: PageId,
        keep: bool,
        mut load: impl FnMut(bool) -> Result<Fetched>,
        f: impl FnOnce(&mut PageSlot) -> R,
    ) -> Result<R> {
        let mut retry = false;
        loop {
            let epoch = self.epoch.load(Ordering::SeqCst);
            if let Some(slot) = self.shard(id).get_mut(&id) {
                return Ok(f(slot));
            }
            let Fetched { page, siblings } = load(retry)?;
            let loaded = page.map(Arc::new);
            let mut shard = self.shard(id);
            if let Some(slot) = shard.get_mut(&id) {
                return Ok(f(slot));
            }
            if self.epoch.load(Ordering::SeqCst) == epoch {
                let r = if keep {
                    let slot = PageSlot::clean(loaded, true);
                    self.bytes.fetch_add(slot.bytes, Ordering::Relaxed);
                    // Inserted and used in one critical section, so eviction
                    // cannot drop it in between.
                    f(shard.entry(id).or_insert(slot))
                } else {
                    f(&mut PageSlot::clean(loaded, false))
                };
                drop(shard);
                for (page, p) in siblings {
                    self.insert_clean((id.0, page), p, epoch);
                }
                // Readers fill the cache too: keep it within its budget.
                self.evict_if_needed();
                return Ok(r);
            }
            retry = true;
        }
    }

    /// Caches `page`, read from the store after `epoch` was sampled, as
    /// page `id` if the cache has no slot for it and no slot was removed
    /// since (the epoch protocol of [`PageCache::with_slot`]).
    fn insert_clean(&self, id: PageId, page: Page, epoch: u64) {
        let mut shard = self.shard(id);
        if shard.contains_key(&id) || self.epoch.load(Ordering::SeqCst) != epoch {
            return;
        }
        let slot = PageSlot::clean(Some(Arc::new(page)), false);
        self.bytes.fetch_add(slot.bytes, Ordering::Relaxed);
        shard.insert(id, slot);
    }

    /// Applies `f` to the page in `slot` (all zero if absent) and marks it
    /// dirty; the caller holds the slot's shard lock.
    fn apply<R>(&self, id: PageId, slot: &mut PageSlot, f: impl FnOnce(&mut Page) -> R) -> R {
        self.flat.changed(id.0);
        // The stored version is kept aside before the first change (the
        // change then copies the page instead of editing it in place).
        slot.base.get_or_insert_with(|| slot.page.clone());
        let page = slot.page.get_or_insert_with(|| Arc::new(Page::zeros()));
        let r = f(Arc::make_mut(page));
        if page.is_empty() {
            slot.page = None;
        }
        self.mark_dirty(id, slot);
        r
    }

    fn mark_dirty(&self, id: PageId, slot: &mut PageSlot) {
        if slot.dirty == 0 {
            if !slot.logged {
                self.dirty.lock().insert(id);
            }
            self.dirty_pages.fetch_add(1, Ordering::Relaxed);
            self.dirty_bytes.fetch_add(slot.bytes, Ordering::Relaxed);
        }
        slot.dirty = self.next_seq();
        slot.hot = true;
        self.resize(slot);
    }

    /// Recounts the bytes of `slot` after its page or base changed.
    fn resize(&self, slot: &mut PageSlot) {
        let (old, new) = (slot.bytes, slot.held_bytes());
        if old == new {
            return;
        }
        let counted = [
            Some(&self.bytes),
            (slot.dirty != 0).then_some(&self.dirty_bytes),
            slot.logged.then_some(&self.logged_bytes),
        ];
        for c in counted.into_iter().flatten() {
            c.fetch_add(new, Ordering::Relaxed);
            c.fetch_sub(old, Ordering::Relaxed);
        }
        slot.bytes = new;
    }

    /// Replaces the page `id` with `page` (`None`: all zero) and marks it
    /// dirty; with `passing` (a page of a bulk build), it leaves the cache
    /// once written back.
    pub(crate) fn put(&self, id: PageId, page: Option<Page>, passing: bool) {
        self.flat.changed(id.0);
        let mut shard = self.shard(id);
        let slot = shard.entry(id).or_insert_with(|| {
            let slot = PageSlot::clean(None, true);
            self.bytes.fetch_add(slot.bytes, Ordering::Relaxed);
            slot
        });
        slot.base.get_or_insert_with(|| slot.page.clone());
        slot.page = page.filter(|p| !p.is_empty()).map(Arc::new);
        slot.passing = passing;
        self.mark_dirty(id, slot);
    }

    /// Makes every cached page of `bitmap` passing (a build that turned out
    /// bulk): the clean ones go now, the dirty ones once written back.
    pub(crate) fn pass_bitmap(&self, bitmap: u64) {
        for shard in &*self.shards {
            let mut shard = shard.lock();
            if !shard.keys().any(|id| id.0 == bitmap) {
                continue;
            }
            self.epoch.fetch_add(1, Ordering::SeqCst);
            shard.retain(|id, slot| {
                if id.0 != bitmap {
                    return true;
                }
                if slot.dirty != 0 || slot.logged {
                    slot.passing = true;
                    return true;
                }
                self.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                false
            });
        }
    }

    /// Whether bitmap `bitmap` has a dirty (or logged) page.
    pub(crate) fn has_dirty(&self, bitmap: u64) -> bool {
        self.dirty.lock().range((bitmap, 0)..=(bitmap, u64::MAX)).next().is_some()
    }

    /// Dirty page numbers of bitmap `bitmap` in `from ..= to`, in order.
    pub(crate) fn dirty_pages_of(&self, bitmap: u64, from: u64, to: u64) -> Vec<u64> {
        self.dirty.lock().range((bitmap, from)..=(bitmap, to)).map(|&(_, p)| p).collect()
    }

    /// Captures every dirty page, and with `fold` every logged one too
    /// (with `step`, the logged ones among those). The caller excludes
    /// writers meanwhile. From here on a captured page's base is the
    /// captured version (what the store and the page delta records give
    /// once the write-back is applied), so that a change made meanwhile is
    /// logged against it.
    pub(crate) fn dirty_snapshot(&self, fold: bool, step: &HashSet<PageId>) -> Vec<DirtyPage> {
        let ids: Vec<PageId> = self.dirty.lock().iter().copied().collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let mut shard = self.shard(id);
            let Some(slot) = shard.get_mut(&id) else { continue };
            if slot.dirty == 0 && !(slot.logged && (fold || step.contains(&id))) {
                continue;
            }
            let base = slot.base.take().unwrap_or_else(|| slot.page.clone());
            out.push(DirtyPage { id, seq: slot.dirty, page: slot.page.clone(), base, logged: slot.logged });
            if slot.dirty != 0 {
                slot.base = Some(slot.page.clone());
            }
            self.resize(slot);
        }
        out
    }

    /// Records an applied write-back: the pages it `logged` (changes in a
    /// page delta record) now have delta records, the others were written
    /// whole (with `folded`, every logged page was, and the delta records
    /// are gone). A page becomes clean unless it changed again since it was
    /// captured. All-zero and passing clean slots that nothing logs are
    /// dropped.
    pub(crate) fn mark_clean(&self, written: &[DirtyPage], logged: bool, folded: bool) {
        for w in written {
            let mut shard = self.shard(w.id);
            let Some(slot) = shard.get_mut(&w.id) else { continue };
            if w.seq != 0 && slot.dirty == w.seq {
                slot.dirty = 0;
                slot.base = None;
                self.dirty_bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                self.dirty_pages.fetch_sub(1, Ordering::Relaxed);
                self.resize(slot);
            }
            if logged && !slot.logged {
                slot.logged = true;
                self.logged_pages.fetch_add(1, Ordering::Relaxed);
                self.logged_bytes.fetch_add(slot.bytes, Ordering::Relaxed);
                self.dirty.lock().insert(w.id);
            } else if folded && slot.logged {
                slot.logged = false;
                self.logged_pages.fetch_sub(1, Ordering::Relaxed);
                self.logged_bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
            }
            if slot.dirty != 0 || slot.logged {
                continue;
            }
            self.dirty.lock().remove(&w.id);
            if slot.page.is_none() || slot.passing {
                self.epoch.fetch_add(1, Ordering::SeqCst);
                let bytes = slot.bytes;
                shard.remove(&w.id);
                self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            }
        }
    }

    /// The logged pages, in order.
    pub(crate) fn logged_ids(&self) -> Vec<PageId> {
        if self.logged_pages() == 0 {
            return Vec::new();
        }
        let ids: Vec<PageId> = self.dirty.lock().iter().copied().collect();
        ids.into_iter().filter(|id| self.shard(*id).get(id).is_some_and(|s| s.logged)).collect()
    }

    /// Takes from the end of `owed` the pages a step of a page fold writes
    /// whole: those still logged, until their bytes reach `budget` (at
    /// least one page when any is left).
    pub(crate) fn fold_step(&self, owed: &mut Vec<PageId>, budget: usize) -> HashSet<PageId> {
        let mut out = HashSet::new();
        let mut bytes = 0;
        while bytes < budget {
            let Some(id) = owed.pop() else { break };
            if let Some(slot) = self.shard(id).get(&id).filter(|s| s.logged) {
                bytes += slot.bytes;
                out.insert(id);
            }
        }
        out
    }

    /// Whether a page of `bitmap` is logged.
    pub(crate) fn has_logged(&self, bitmap: u64) -> bool {
        if self.logged_pages() == 0 {
            return false;
        }
        let ids: Vec<PageId> = self.dirty.lock().range((bitmap, 0)..=(bitmap, u64::MAX)).copied().collect();
        ids.into_iter().any(|id| self.shard(id).get(&id).is_some_and(|s| s.logged))
    }

    /// Forgets the given pages, dirty or not: used for pages of dead bitmaps,
    /// which must never reach the store.
    pub(crate) fn discard(&self, ids: &[PageId]) {
        for id in ids {
            self.flat.changed(id.0);
            let mut shard = self.shard(*id);
            self.epoch.fetch_add(1, Ordering::SeqCst);
            if let Some(slot) = shard.remove(id) {
                self.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                if slot.dirty != 0 {
                    self.dirty_bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                    self.dirty_pages.fetch_sub(1, Ordering::Relaxed);
                }
                if slot.logged {
                    self.logged_bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                    self.logged_pages.fetch_sub(1, Ordering::Relaxed);
                }
                if slot.dirty != 0 || slot.logged {
                    self.dirty.lock().remove(id);
                }
            }
        }
    }

    /// Forgets the cached pages `ids` that hold nothing but their stored
    /// version (a follower's store changed under them). Dirty pages stay:
    /// on a follower they hold page delta records replayed over a store
    /// record that only a fold rewrites.
    pub(crate) fn forget_clean(&self, ids: &[PageId]) {
        for id in ids {
            self.flat.changed(id.0);
            let mut shard = self.shard(*id);
            if shard.get(id).is_some_and(|slot| slot.dirty == 0 && !slot.logged) {
                self.epoch.fetch_add(1, Ordering::SeqCst);
                if let Some(slot) = shard.remove(id) {
                    self.bytes.fetch_sub(slot.bytes, Ordering::Relaxed);
                }
            }
        }
    }

    /// Forgets every page, dirty ones included (a follower's store changed
    /// under them; it writes nothing of its own).
    pub(crate) fn clear_all(&self) {
        self.flat.clear_all();
        // One lock at a time: a writer takes a shard, then the dirty index.
        for shard in &*self.shards {
            shard.lock().clear();
        }
        self.dirty.lock().clear();
        self.epoch.fetch_add(1, Ordering::SeqCst);
        for counter in [&self.bytes, &self.dirty_bytes, &self.dirty_pages, &self.logged_bytes, &self.logged_pages] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// Sets the bytes the cache may hold before it evicts.
    pub(crate) fn set_capacity(&self, bytes: usize) {
        // Asked after every write: each figure is stored only when it moves
        // (each compared with itself, so writers racing here leave no
        // lasting mismatch), which keeps the lines shared between the
        // writers and the write-back.
        self.flat.set_budget(bytes / 8);
        if self.capacity.load(Ordering::Relaxed) != bytes {
            self.capacity.store(bytes, Ordering::Relaxed);
        }
    }

    /// Drops clean pages that were not used since the last sweep until the
    /// cache is below 7/8 of its capacity (or nothing more can go).
    pub(crate) fn evict_if_needed(&self) {
        // The flat lists' bytes come out of the capacity.
        let capacity = self.capacity.load(Ordering::Relaxed).saturating_sub(self.flat.bytes());
        if self.bytes() <= capacity {
            return;
        }
        let Some(_one) = self.evicting.try_lock() else { return };
        clock::evict(capacity, &self.bytes, self.shards.len(), |i| {
            let mut shard = self.shards[i].lock();
            // Before any slot goes (the epoch protocol above).
            self.epoch.fetch_add(1, Ordering::SeqCst);
            clock::sweep(&mut shard, &self.bytes);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_with(bit: u32) -> Page {
        let mut p = Page::zeros();
        p.set(bit, true);
        p
    }

    /// A run lookup answers each page as a single lookup would: the cached
    /// page, a cached all-zero slot as `Some(None)`, and `None` for a page
    /// not cached; it loads nothing and marks what it found as used.
    #[test]
    fn run_lookup_matches_single_lookups() {
        let cache = PageCache::new(1 << 20);
        let bitmap = 7;
        cache.put((bitmap, 16), Some(page_with(3)), false);
        cache.put((bitmap, 18), None, false);
        cache.put((bitmap, 20), Some(page_with(9)), false);
        cache.put((bitmap + 1, 17), Some(page_with(1)), false);
        let pages = [16, 17, 18, 19, 20];
        let run = cache.get_cached_run(bitmap, &pages, false);
        assert_eq!(run.len(), pages.len());
        for (&p, hit) in pages.iter().zip(&run) {
            let single = match p {
                17 | 19 => None,
                _ => Some(cache.get((bitmap, p), |_| panic!("page {p} is cached")).unwrap()),
            };
            assert_eq!(hit, &single, "page {p}");
        }
        assert_eq!(run[0].as_ref().unwrap().as_ref().unwrap().count_ones(), 1);
        assert!(run[2] == Some(None), "a cached all-zero page");
        assert!(cache.get_cached_run(bitmap, &[], false).is_empty());
    }

    /// Invariants of logging: a captured dirty page carries the version
    /// the store gave (its base) beside its new version; a logged page
    /// survives any eviction and stays in the dirty index until a fold;
    /// the byte counters return to zero once nothing is dirty or logged.
    #[test]
    fn logged_pages_stay_until_folded_and_counters_balance() {
        let cache = PageCache::new(1 << 20);
        let id = (4, 2);
        let stored = |_| Ok(Fetched { page: Some(page_with(1)), siblings: Vec::new() });
        cache.update(id, stored, |p| p.set(9, true)).unwrap();
        let captured = cache.dirty_snapshot(false, &HashSet::new());
        assert_eq!(captured.len(), 1);
        assert_eq!(captured[0].base.as_deref(), Some(&page_with(1)));
        assert!(captured[0].page.as_ref().is_some_and(|p| p.get(9) && p.get(1)));
        cache.mark_clean(&captured, true, false);
        assert_eq!((cache.dirty_pages(), cache.logged_pages()), (0, 1));
        assert!(cache.logged_bytes() > 0 && cache.dirty_bytes() == 0);
        cache.set_capacity(0);
        cache.evict_if_needed();
        assert!(cache.get(id, |_| panic!("a logged page is never evicted")).unwrap().is_some());
        assert_eq!(cache.dirty_pages_of(4, 0, 10), vec![2], "in the dirty index");
        // Changed again: the base is the logged version, not the stored one.
        cache.update(id, |_| unreachable!(), |p| p.set(1, false)).unwrap();
        let again = cache.dirty_snapshot(false, &HashSet::new());
        assert!(again[0].logged && again[0].base.as_ref().is_some_and(|b| b.get(9) && b.get(1)));
        cache.mark_clean(&again, true, false);
        // A fold captures it although it is clean, and releases it.
        let fold = cache.dirty_snapshot(true, &HashSet::new());
        assert_eq!(fold.len(), 1);
        assert_eq!(fold[0].seq, 0);
        cache.mark_clean(&fold, false, true);
        assert_eq!((cache.logged_pages(), cache.logged_bytes(), cache.dirty_bytes()), (0, 0, 0));
        assert!(cache.dirty_pages_of(4, 0, 10).is_empty());
        cache.evict_if_needed();
        assert_eq!(cache.bytes(), 0, "evictable once folded");
    }

    /// Invariants of passing pages: a passing put stays while dirty and
    /// leaves once written back; a bulk read of a page not cached caches
    /// nothing, and of a cached one changes nothing; a page a reader took
    /// while dirty stays once clean; turning a bitmap passing drops its
    /// clean pages at once and marks its dirty ones; the byte counter
    /// returns to what the cache still holds.
    #[test]
    fn passing_pages_leave_once_written() {
        let cache = PageCache::new(1 << 20);
        let stored = |_| Ok(Fetched { page: Some(page_with(4)), siblings: Vec::new() });
        cache.put((1, 0), Some(page_with(1)), true);
        cache.put((1, 1), Some(page_with(2)), true);
        // A reader takes page 1 before the write-back: it stays.
        assert!(cache.get((1, 1), |_| unreachable!()).unwrap().is_some());
        let captured = cache.dirty_snapshot(false, &HashSet::new());
        assert_eq!(captured.len(), 2);
        assert!(cache.read((1, 0), true, |_| panic!("cached while dirty")).unwrap().is_some());
        cache.mark_clean(&captured, false, false);
        let kept = cache.bytes();
        assert!(cache.get((1, 1), |_| panic!("page 1 was read, so it stays")).unwrap().is_some());
        let loaded = cache.read((1, 0), true, stored).unwrap();
        assert!(loaded.is_some_and(|p| p.get(4)), "page 0 left: read from the store");
        assert_eq!(cache.bytes(), kept, "a bulk read caches nothing");
        // A bitmap turned passing: its clean page goes, its dirty one stays
        // until written back.
        cache.put((2, 0), Some(page_with(5)), false);
        cache.mark_clean(&cache.dirty_snapshot(false, &HashSet::new()), false, false);
        cache.put((2, 1), Some(page_with(6)), false);
        cache.pass_bitmap(2);
        assert!(cache.read((2, 0), true, stored).unwrap().is_some_and(|p| p.get(4)), "clean page 0 dropped");
        assert!(cache.read((2, 1), true, |_| panic!("dirty page 1 stays")).unwrap().is_some_and(|p| p.get(6)));
        cache.mark_clean(&cache.dirty_snapshot(false, &HashSet::new()), false, false);
        assert_eq!(cache.bytes(), kept, "only the page a reader took is left");
        assert_eq!((cache.dirty_pages(), cache.dirty_bytes()), (0, 0));
        assert!(cache.dirty_pages_of(1, 0, 9).is_empty() && cache.dirty_pages_of(2, 0, 9).is_empty());
        // A passing page that a write-back logged stays until a fold.
        cache.put((3, 0), Some(page_with(7)), true);
        cache.mark_clean(&cache.dirty_snapshot(false, &HashSet::new()), true, false);
        assert!(cache.read((3, 0), true, |_| panic!("a logged page stays")).unwrap().is_some());
        cache.mark_clean(&cache.dirty_snapshot(true, &HashSet::new()), false, true);
        assert_eq!(cache.bytes(), kept, "gone once folded");
        assert_eq!((cache.logged_pages(), cache.logged_bytes()), (0, 0));
        assert!(cache.dirty_pages_of(3, 0, 9).is_empty());
        assert!(cache.is_bulk(1 << 18 | 1) && !cache.is_bulk(1 << 18), "bulk: over a quarter of the capacity");
        assert!(cache.exceeds(1 << 20 | 1) && !cache.exceeds(1 << 20));
    }

    /// Pages of one run share a shard; other runs spread over the shards.
    #[test]
    fn a_run_shares_one_shard() {
        for bitmap in [0u64, 5, u64::MAX] {
            for run in [0u64, 1, 1 << 40] {
                let first = shard_of_page((bitmap, run * RUN));
                assert!((0..RUN).all(|i| shard_of_page((bitmap, run * RUN + i)) == first));
            }
        }
        let shards: std::collections::BTreeSet<usize> = (0..1000).map(|r| shard_of_page((3, r * RUN))).collect();
        assert!(shards.len() > SHARDS / 2, "runs spread over {} shards", shards.len());
    }
}
