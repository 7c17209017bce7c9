//! Per-bitmap directories of stored page numbers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::idhash::FastMap;

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

    /// Records an applied write-back: `written` holds (id, page, stored?),
    /// each id's pages together and in page order.
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

    /// Forgets every directory (a follower's store changed under them).
    pub(crate) fn clear_all(&self) {
        let mut m = self.map.lock();
        m.0 += 1;
        m.1.clear();
        self.entries.store(0, Ordering::Relaxed);
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
