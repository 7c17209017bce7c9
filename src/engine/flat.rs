//! Flat position lists of sparse bitmaps, kept for the set kernels.
//!
//! A sparse bitmap (a day of sign-ins at 0.01%: 10^4 bits over 3,052
//! pages) costs a BITOP a page stream step per page, whatever the few bits
//! in each. Its *flat list* is every set bit's offset, ascending, in one
//! array: the AND, OR and XOR of such lists run over the positions alone
//! (`ops::positions`), never per page.
//!
//! A list is built from the bitmap's pages by a reader holding the key's
//! lock, and dropped by any change of any of the bitmap's pages: every
//! change goes through the page cache ([`super::pages::PageCache`]), which
//! calls [`FlatCache::changed`], and every writer holds the key's lock, so
//! a list is never built from pages that change meanwhile nor kept past a
//! change. Bitmap ids are never reused, so a dead bitmap's list is only
//! memory, dropped with the rest when the lists outgrow their budget.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::idhash::FastMap;

/// The most set bits a bitmap may have for a flat list (2 MiB of offsets).
pub(crate) const MAX_ONES: u64 = 1 << 18;
/// A flat list is kept only for bitmaps at most this dense: one set bit in
/// 64 or fewer (denser pages are faster as words).
pub(crate) const MAX_DENSITY_SHIFT: u32 = 6;

/// Whether a value of `len` bytes with `ones` set bits gets a flat list.
pub(crate) fn eligible(len: u64, ones: u64) -> bool {
    ones > 0 && ones <= MAX_ONES && ones.saturating_mul(1 << MAX_DENSITY_SHIFT) <= len.saturating_mul(8)
}

/// The flat lists of bitmaps, by bitmap id, within a byte budget.
pub(crate) struct FlatCache {
    map: Mutex<FastMap<u64, Arc<[u64]>>>,
    /// Lists held: the write path looks no further when there are none.
    entries: AtomicUsize,
    bytes: AtomicUsize,
    budget: AtomicUsize,
}

impl FlatCache {
    pub(crate) fn new(budget: usize) -> FlatCache {
        FlatCache {
            map: Mutex::new(FastMap::default()),
            entries: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            budget: AtomicUsize::new(budget),
        }
    }

    /// The list of `bitmap`, if kept.
    pub(crate) fn get(&self, bitmap: u64) -> Option<Arc<[u64]>> {
        if self.entries.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.map.lock().get(&bitmap).cloned()
    }

    /// Keeps `list` as the list of `bitmap` (built under the key's lock);
    /// the lists held so far are dropped first if it would not fit.
    pub(crate) fn insert(&self, bitmap: u64, list: Arc<[u64]>) {
        let size = list.len() * 8;
        let budget = self.budget.load(Ordering::Relaxed);
        if size > budget / 4 {
            return;
        }
        let mut map = self.map.lock();
        if self.bytes.load(Ordering::Relaxed) + size > budget {
            map.clear();
            self.bytes.store(0, Ordering::Relaxed);
        }
        if let Some(old) = map.insert(bitmap, list) {
            self.bytes.fetch_sub(old.len() * 8, Ordering::Relaxed);
        }
        self.bytes.fetch_add(size, Ordering::Relaxed);
        self.entries.store(map.len(), Ordering::Relaxed);
    }

    /// A page of `bitmap` changed: its list, if any, is dropped. Called by
    /// the page cache with the key's lock held by the writer.
    pub(crate) fn changed(&self, bitmap: u64) {
        if self.entries.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut map = self.map.lock();
        if let Some(old) = map.remove(&bitmap) {
            self.bytes.fetch_sub(old.len() * 8, Ordering::Relaxed);
        }
        self.entries.store(map.len(), Ordering::Relaxed);
    }

    /// Drops every list.
    pub(crate) fn clear_all(&self) {
        let mut map = self.map.lock();
        map.clear();
        self.bytes.store(0, Ordering::Relaxed);
        self.entries.store(0, Ordering::Relaxed);
    }

    /// Sets the bytes the lists may take; they are dropped if over it.
    pub(crate) fn set_budget(&self, bytes: usize) {
        if self.budget.load(Ordering::Relaxed) != bytes {
            self.budget.store(bytes, Ordering::Relaxed);
        }
        if self.bytes.load(Ordering::Relaxed) > bytes {
            let mut map = self.map.lock();
            map.clear();
            self.bytes.store(0, Ordering::Relaxed);
            self.entries.store(0, Ordering::Relaxed);
        }
    }

    /// Bytes of the lists held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: a list is found until its bitmap changes, the byte count
    /// follows the lists held, and a list that would pass the budget drops
    /// the others first (never the budget exceeded).
    #[test]
    fn lists_live_until_their_bitmap_changes_and_within_the_budget() {
        let cache = FlatCache::new(1000);
        assert!(cache.get(1).is_none());
        cache.insert(1, vec![3, 5, 8].into());
        cache.insert(2, vec![1].into());
        assert_eq!(cache.get(1).as_deref(), Some(&[3, 5, 8][..]));
        assert_eq!(cache.bytes(), 32);
        cache.changed(1);
        assert!(cache.get(1).is_none());
        assert_eq!(cache.bytes(), 8);
        cache.changed(7);
        cache.insert(3, vec![0; 30].into());
        cache.insert(4, vec![0; 30].into());
        cache.insert(5, vec![0; 30].into());
        cache.insert(6, vec![0; 30].into());
        assert!(cache.bytes() <= 1000, "{}", cache.bytes());
        assert!(cache.get(6).is_some(), "the last list inserted is kept");
        cache.insert(9, vec![0; 40].into());
        assert!(cache.get(9).is_none(), "a list past a quarter of the budget is not kept");
        cache.set_budget(100);
        assert_eq!(cache.bytes(), 0);
        assert!(cache.get(6).is_none());
    }

    /// Invariant: only non-empty values at most one bit in 64 dense and
    /// within the count limit get a list.
    #[test]
    fn eligibility_is_by_count_and_density() {
        assert!(!eligible(1000, 0));
        assert!(eligible(8, 1));
        assert!(!eligible(7, 1), "56 bits hold one bit in 64 no more");
        assert!(eligible(12_500_000, 10_000));
        assert!(!eligible(12_500_000, 1_000_000), "1% is past one in 64");
        assert!(!eligible(u64::MAX / 8, MAX_ONES + 1));
    }
}
