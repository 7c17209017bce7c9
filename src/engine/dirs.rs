//! Per-bitmap directories of stored page numbers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::idhash::FastMap;

type DirectoryMap = FastMap<u64, Arc<Vec<u64>>>;

/// The state under [`Directories`]' lock.
#[derive(Default)]
struct Inner {
    /// Bumped by every change of the store's pages.
    version: u64,
    /// The directory of each bitmap id that has one.
    dirs: DirectoryMap,
    /// Bitmaps with store scans open ([`Directories::watch`]): how many
    /// scans, and the changes to the bitmap's stored pages since the first
    /// of them began.
    watched: FastMap<u64, Watched>,
}

#[derive(Clone, Copy, Default)]
struct Watched {
    scans: usize,
    changes: u64,
}

/// A store scan of one bitmap's pages, registered with
/// [`Directories::watch`]: it can tell whether the bitmap's stored pages
/// have changed since it began ([`Directories::unchanged`]), and may leave
/// the directory it read ([`Directories::finish`]).
pub(crate) struct Watch {
    bitmap: u64,
    since: u64,
}

/// Per-bitmap directories: the sorted numbers of the pages a bitmap has in
/// the store, so ordered page streams need no store scan once built.
///
/// A directory is complete for its bitmap id or absent. Write-backs update
/// the directories that exist after applying their batch; `version` lets a
/// directory built by a scan that raced with a write-back be dropped instead
/// of cached.
pub(crate) struct Directories {
    map: Mutex<Inner>,
    entries: AtomicUsize,
    budget: usize,
}

impl Directories {
    pub(crate) fn new(budget_entries: usize) -> Directories {
        Directories { map: Mutex::new(Inner::default()), entries: AtomicUsize::new(0), budget: budget_entries }
    }

    /// The most page numbers all directories may hold together: a directory
    /// longer than this is never kept.
    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// The directory of `bitmap`, if cached.
    pub(crate) fn get(&self, bitmap: u64) -> Option<Arc<Vec<u64>>> {
        self.map.lock().dirs.get(&bitmap).cloned()
    }

    /// The current version, to pass to [`Directories::insert`].
    pub(crate) fn version(&self) -> u64 {
        self.map.lock().version
    }

    /// Caches a directory built from a scan that started at `version`,
    /// unless a write-back changed the store since.
    pub(crate) fn insert(&self, bitmap: u64, pages: Arc<Vec<u64>>, version: u64) {
        let mut m = self.map.lock();
        if m.version == version {
            self.cache(&mut m, bitmap, pages);
        }
    }

    /// Caches `pages` as the directory of `bitmap`, within the budget.
    fn cache(&self, m: &mut Inner, bitmap: u64, pages: Arc<Vec<u64>>) {
        let n = pages.len();
        if self.entries.load(Ordering::Relaxed) + n > self.budget {
            m.dirs.clear();
            self.entries.store(0, Ordering::Relaxed);
            if n > self.budget {
                return;
            }
        }
        if let Some(old) = m.dirs.insert(bitmap, pages) {
            self.entries.fetch_sub(old.len(), Ordering::Relaxed);
        }
        self.entries.fetch_add(n, Ordering::Relaxed);
    }

    /// Registers a store scan of the pages of `bitmap` that begins now:
    /// from here on every change of the bitmap's stored pages (a
    /// write-back that writes or deletes one, a follower's reset) is
    /// counted against it. End it with [`Directories::finish`].
    pub(crate) fn watch(&self, bitmap: u64) -> Watch {
        let mut m = self.map.lock();
        let w = m.watched.entry(bitmap).or_default();
        w.scans += 1;
        Watch { bitmap, since: w.changes }
    }

    /// Whether the stored pages of the watched bitmap are as they were when
    /// its scan began, so what the scan read is current.
    pub(crate) fn unchanged(&self, watch: &Watch) -> bool {
        self.map.lock().watched.get(&watch.bitmap).is_some_and(|w| w.changes == watch.since)
    }

    /// Ends the scan `watch`; with `pages` (every stored page the scan
    /// found, ascending: it ran over the bitmap's whole range), caches
    /// them as the bitmap's directory if its stored pages did not change
    /// while it ran.
    #[expect(clippy::needless_pass_by_value, reason = "the watch ends here: taking it stops a second finish")]
    pub(crate) fn finish(&self, watch: Watch, pages: Option<Vec<u64>>) {
        let Watch { bitmap, since } = watch;
        let mut m = self.map.lock();
        let Some(w) = m.watched.get_mut(&bitmap) else { return };
        let unchanged = w.changes == since;
        w.scans -= 1;
        if w.scans == 0 {
            m.watched.remove(&bitmap);
        }
        if let (true, Some(pages)) = (unchanged, pages) {
            self.cache(&mut m, bitmap, Arc::new(pages));
        }
    }

    /// Counts a change of the stored pages of `bitmap` against its open
    /// scans.
    fn changed(m: &mut Inner, bitmap: u64) {
        if let Some(w) = m.watched.get_mut(&bitmap) {
            w.changes += 1;
        }
    }

    /// Records an applied write-back: `written` holds (id, page, stored?),
    /// each id's pages together and in page order.
    pub(crate) fn apply(&self, written: &[(u64, u64, bool)]) {
        let mut m = self.map.lock();
        m.version += 1;
        for group in written.chunk_by(|a, b| a.0 == b.0) {
            let id = group[0].0;
            Self::changed(&mut m, id);
            let Some(dir) = m.dirs.get_mut(&id) else { continue };
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
        m.version += 1;
        m.dirs.clear();
        m.watched.values_mut().for_each(|w| w.changes += 1);
        self.entries.store(0, Ordering::Relaxed);
    }

    /// Forgets the directory of `bitmap` (its pages are being deleted).
    pub(crate) fn remove(&self, bitmap: u64) {
        let mut m = self.map.lock();
        m.version += 1;
        Self::changed(&mut m, bitmap);
        if let Some(old) = m.dirs.remove(&bitmap) {
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

    /// Invariant: a watched scan leaves its directory only if no change of
    /// its bitmap's stored pages was counted while it ran; each scan is
    /// judged from its own start (a later scan of the same bitmap is not
    /// spoiled by a change before it began), changes of other bitmaps do
    /// not count, and a finished watch leaves nothing registered.
    #[test]
    fn a_watched_scan_leaves_its_directory_only_if_unchanged() {
        let d = Directories::new(1000);
        let w = d.watch(1);
        d.apply(&[(2, 0, true)]);
        assert!(d.unchanged(&w));
        d.finish(w, Some(vec![0, 4]));
        assert_eq!(d.get(1).as_deref(), Some(&vec![0, 4]));

        let early = d.watch(3);
        d.apply(&[(3, 7, true)]);
        let late = d.watch(3);
        assert!(!d.unchanged(&early));
        assert!(d.unchanged(&late));
        d.finish(early, Some(vec![1]));
        assert!(d.get(3).is_none());
        d.finish(late, Some(vec![1, 7]));
        assert_eq!(d.get(3).as_deref(), Some(&vec![1, 7]));

        let w = d.watch(5);
        d.remove(5);
        d.finish(w, Some(vec![9]));
        assert!(d.get(5).is_none());
        let w = d.watch(6);
        d.clear_all();
        assert!(!d.unchanged(&w));
        d.finish(w, None);
        assert!(d.map.lock().watched.is_empty());
    }
}
