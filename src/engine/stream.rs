//! Ordered page streams: the pages of one bitmap in page order, merging the
//! store's range scan with pages changed in memory but not yet written back.

use std::collections::VecDeque;
use std::iter::Peekable;
use std::sync::Arc;

use super::dirs::{Directories, Watch};
use super::layout;
use super::pages::{Fetched, RUN};
use super::stored::{corrupted, Held, StoredPages};
use super::Engine;
use crate::error::{Error, Result};
use crate::page::{split_group, Page};

/// The pages of one value within a page range, in order. Holds one page at
/// a time; pages that turn out all-zero are skipped.
pub(crate) struct PageStream(Source);

/// How far the reader of a stream goes, which decides how a stream of a
/// whole value with no directory learns its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// It may stop early (an AND, BITPOS, a select): the directory is built
    /// first with one scan, so this and later streams read only the pages
    /// they reach.
    Partly,
    /// It reads every page (GET, an OR, COPY): its own scan yields the
    /// pages and, once at the end, leaves the directory, so the store is
    /// read once.
    ToTheEnd,
}

enum Source {
    Paged(Box<Paged>),
    /// A value kept in its entry: its one page and its number, until taken.
    Inline(Option<(u64, Arc<Page>)>),
}

impl PageStream {
    /// Pages `from ..= to` of bitmap `bitmap`, owned by key `name`; see
    /// [`Paged::new`].
    pub(super) fn new(
        engine: &Arc<Engine>,
        name: &[u8],
        (bitmap, ones): (u64, u64),
        (from, to): (u64, u64),
        reading: Reading,
    ) -> Result<PageStream> {
        Ok(PageStream(Source::Paged(Box::new(Paged::new(engine, name, (bitmap, ones), (from, to), reading)?))))
    }

    /// The one page of a value kept in its entry (a copy: nothing to pin)
    /// and its number, if any.
    pub(super) fn inline(page: Option<(u64, Arc<Page>)>) -> PageStream {
        PageStream(Source::Inline(page))
    }

    /// Makes this a bulk read from here on: pages not cached are read
    /// without being cached (DESIGN.md section 5, "Bulk values pass
    /// through the page cache").
    pub(crate) fn pass(&mut self) {
        if let Source::Paged(p) = &mut self.0 {
            p.passing = true;
        }
    }

    /// The page number of the next candidate page, without reading it.
    /// A candidate may still turn out all-zero when fetched.
    pub(crate) fn peek(&mut self) -> Result<Option<u64>> {
        match &mut self.0 {
            Source::Paged(p) => p.peek(),
            Source::Inline(p) => Ok(p.as_ref().map(|&(at, _)| at)),
        }
    }

    /// Drops the current candidate without reading it.
    pub(crate) fn skip(&mut self) {
        match &mut self.0 {
            Source::Paged(p) => p.skip(),
            Source::Inline(p) => *p = None,
        }
    }

    /// Skips candidates before `page`.
    pub(crate) fn seek(&mut self, page: u64) -> Result<()> {
        while let Some(p) = self.peek()? {
            if p >= page {
                break;
            }
            self.skip();
        }
        Ok(())
    }

    /// Reads the current candidate and moves past it; `None` if it is all
    /// zero.
    pub(crate) fn take(&mut self) -> Result<Option<(u64, Arc<Page>)>> {
        match &mut self.0 {
            Source::Paged(p) => p.take(),
            Source::Inline(p) => Ok(p.take()),
        }
    }

    /// The next non-zero page, in order.
    pub(crate) fn next_page(&mut self) -> Result<Option<(u64, Arc<Page>)>> {
        while self.peek()?.is_some() {
            if let Some(hit) = self.take()? {
                return Ok(Some(hit));
            }
        }
        Ok(None)
    }
}

/// The stream of a paged value.
struct Paged {
    engine: Arc<Engine>,
    name: Vec<u8>,
    bitmap: u64,
    stored: Stored,
    dirty: Vec<u64>,
    next_dirty: usize,
    /// A candidate taken from the merge but not fetched yet, with what a
    /// store scan found for it.
    head: Option<(u64, Option<Held>)>,
    /// Cached pages of the directory taken ahead, a run at a time, in page
    /// order (see `take_ahead`).
    ahead: VecDeque<(u64, Option<Arc<Page>>)>,
    /// A bulk read: pages fetched from the store are not cached.
    passing: bool,
}

impl Paged {
    /// Pages `from ..= to` of bitmap `bitmap`, owned by key `name`. The
    /// caller must hold the key's lock (so `bitmap` is live); the stream pins
    /// the bitmap, so it stays readable after the lock is released.
    ///
    /// Uses the bitmap's cached directory of stored pages. Without one, a
    /// stream of the whole value read to the end ([`Reading::ToTheEnd`])
    /// scans the store and leaves the directory when it reaches the end;
    /// another stream from page 0 builds the directory first; any other
    /// stream scans the store.
    ///
    /// # Errors
    /// [`Error::Corrupted`] if the metadata counts `ones` set bits but the
    /// bitmap has no page at all, stored or in memory (its records were lost
    /// from the store): an error for the key, never a value of zeros.
    fn new(
        engine: &Arc<Engine>,
        name: &[u8],
        (bitmap, ones): (u64, u64),
        (from, to): (u64, u64),
        reading: Reading,
    ) -> Result<Paged> {
        // The dirty pages first: a page leaves the dirty index only after a
        // write-back has added it to the store and to the directories.
        let dirty = engine.pages.dirty_pages_of(bitmap, from, to);
        // With the key locked no page can become dirty meanwhile, so a
        // bitmap with no dirty page now has every page in its directory.
        // A whole-value stream has the bitmap's dirty pages already.
        let none_dirty =
            ones > 0 && if (from, to) == (0, u64::MAX) { dirty.is_empty() } else { !engine.pages.has_dirty(bitmap) };
        // A whole value read to the end: its scan leaves the directory
        // (`Stored::end`), so the store is read once, not once for the
        // directory and again for the pages.
        let record = (from, to) == (0, u64::MAX) && reading == Reading::ToTheEnd;
        let dir = match engine.dirs.get(bitmap) {
            Some(d) => Some(d),
            None if from == 0 && !record => match build_directory(engine, name, bitmap) {
                Ok(dir) => Some(dir),
                // A damaged group record fails the directory; the stream
                // then scans its own range, which fails only if the damage
                // is in it.
                Err(Error::Corrupted { .. }) => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        let stored = if let Some(pages) = dir {
            let next = pages.partition_point(|&p| p < from);
            let end = pages.partition_point(|&p| p <= to);
            Stored::Directory { pages, next, end }
        } else {
            // Registered before the scan starts: what the scan yields is
            // current as long as no write-back changes the bitmap's stored
            // pages meanwhile (see `take`).
            let watch = Some(engine.dirs.watch(bitmap));
            let scan = Box::new(StoredPages::of_bitmap(&*engine.store, bitmap, from, to).peekable());
            Stored::Scan { scan, watch, found: record.then(Vec::new), room: engine.dirs.budget() }
        };
        // From here on, dropping the stream ends the scan's watch and the pin.
        engine.pin(bitmap);
        let mut paged = Paged {
            engine: Arc::clone(engine),
            name: name.to_vec(),
            bitmap,
            stored,
            dirty,
            next_dirty: 0,
            head: None,
            ahead: VecDeque::new(),
            passing: false,
        };
        let no_page = match &mut paged.stored {
            Stored::Directory { pages, .. } => pages.is_empty(),
            stored @ Stored::Scan { found: Some(_), .. } => stored.peek(name)?.is_none(),
            Stored::Scan { found: None, .. } => false,
        };
        if none_dirty && no_page {
            return Err(Error::Corrupted {
                key: String::from_utf8_lossy(name).into_owned(),
                page: None,
                reason: format!("metadata counts {ones} set bits, but no page of bitmap {bitmap} is stored"),
            });
        }
        Ok(paged)
    }

    /// The page number of the next candidate page, without reading it.
    /// A candidate may still turn out all-zero when fetched.
    fn peek(&mut self) -> Result<Option<u64>> {
        if self.head.is_none() {
            self.head = self.pull()?;
        }
        Ok(self.head.as_ref().map(|(p, _)| *p))
    }

    /// Drops the current candidate without reading it.
    fn skip(&mut self) {
        self.head = None;
    }

    /// Reads the current candidate and moves past it; `None` if it is all zero.
    fn take(&mut self) -> Result<Option<(u64, Arc<Page>)>> {
        if self.head.is_none() {
            self.head = self.pull()?;
        }
        let Some((page, mut held)) = self.head.take() else { return Ok(None) };
        if let Some(cached) = self.take_ahead(page) {
            return Ok(cached.map(|p| (page, p)));
        }
        let engine = &self.engine;
        let (name, bitmap) = (&self.name, self.bitmap);
        let stored = &self.stored;
        let load = |retry| match (held.take(), retry) {
            // What the scan read is current only if no write-back changed
            // the bitmap's stored pages since the scan began (the page
            // may have been written back and dropped from the cache after
            // the scan read its leaf).
            (Some(h), false) if stored.current(&engine.dirs) => {
                Ok(Fetched { page: Some(h.into_page(Some(name), bitmap, page)?), siblings: Vec::new() })
            }
            _ => engine.fetch_page(name, bitmap, page),
        };
        let got = engine.pages.read((bitmap, page), self.passing, load)?;
        Ok(got.map(|p| (page, p)))
    }

    /// Page `page` if it is cached, looked up with the rest of its run.
    ///
    /// A stream reading from a directory knows the pages to come: when
    /// `page` is not among those taken ahead, the directory's pages from
    /// `page` to the end of its run of [`RUN`] pages are looked up together
    /// ([`PageCache::get_cached_run`](super::pages::PageCache::get_cached_run)),
    /// so their cache misses overlap. A page taken ahead is a version the
    /// cache held while the stream ran, as a page fetched when reached is.
    /// `None`: not cached, fetch it.
    fn take_ahead(&mut self, page: u64) -> Option<Option<Arc<Page>>> {
        while self.ahead.front().is_some_and(|&(p, _)| p < page) {
            self.ahead.pop_front();
        }
        if self.ahead.front().is_none_or(|&(p, _)| p != page) {
            let Stored::Directory { pages, next, end } = &self.stored else { return None };
            // The directory's pages of this run from `page` on (`next` is
            // already past `page` if `page` came from the directory).
            let start = pages[..*next].partition_point(|&p| p < page);
            let run_end = pages[start..*end].partition_point(|&p| p / RUN == page / RUN) + start;
            let run = &pages[start..run_end];
            if run.first() != Some(&page) {
                // A dirty page the directory does not list yet.
                return None;
            }
            let found = self.engine.pages.get_cached_run(self.bitmap, run, self.passing);
            self.ahead.clear();
            self.ahead.extend(run.iter().zip(found).filter_map(|(&p, hit)| hit.map(|page| (p, page))));
        }
        match self.ahead.front() {
            Some(&(p, _)) if p == page => self.ahead.pop_front().map(|(_, hit)| hit),
            _ => None,
        }
    }

    /// The next candidate from the merge of the stored pages and the dirty list.
    fn pull(&mut self) -> Result<Option<(u64, Option<Held>)>> {
        let stored = self.stored.peek(&self.name)?;
        if stored.is_none() {
            self.stored.end(&self.engine.dirs, true);
        }
        let dirty = self.dirty.get(self.next_dirty).copied();
        let page = match (stored, dirty) {
            (None, None) => return Ok(None),
            (Some(s), None) => s,
            (None, Some(d)) => d,
            (Some(s), Some(d)) => s.min(d),
        };
        if dirty == Some(page) {
            self.next_dirty += 1;
        }
        let held = if stored == Some(page) { self.stored.advance() } else { None };
        Ok(Some((page, held)))
    }
}

impl Drop for Paged {
    fn drop(&mut self) {
        self.stored.end(&self.engine.dirs, false);
        self.engine.unpin(self.bitmap);
    }
}

/// Where a stream learns which pages are stored.
enum Stored {
    /// A cached directory; `next .. end` are the pages still to visit.
    Directory { pages: Arc<Vec<u64>>, next: usize, end: usize },
    /// A range scan of the store (which also yields the pages), registered
    /// with the directories until it ends (`watch`), and for a scan of the
    /// whole range the pages it found so far, to leave as the directory
    /// (dropped once longer than `room`, the most the directories keep).
    Scan { scan: Box<Peekable<StoredPages>>, watch: Option<Watch>, found: Option<Vec<u64>>, room: usize },
}

impl Stored {
    /// The next stored page's number (errors name key `name`).
    fn peek(&mut self, name: &[u8]) -> Result<Option<u64>> {
        match self {
            Stored::Directory { pages, next, end } => Ok((*next < *end).then(|| pages[*next])),
            Stored::Scan { scan, found, .. } => match scan.peek() {
                Some(Ok(stored)) => Ok(Some(stored.page)),
                Some(Err(_)) => {
                    // The scan may go on past a damaged record: what it
                    // finds is no longer a whole directory.
                    *found = None;
                    match scan.next() {
                        Some(Err(e)) => Err(e.into_error(Some(name))),
                        _ => Ok(None),
                    }
                }
                None => Ok(None),
            },
        }
    }

    /// Moves past the current stored page; returns what the scan read of
    /// it, if at hand.
    fn advance(&mut self) -> Option<Held> {
        match self {
            Stored::Directory { next, .. } => {
                *next += 1;
                None
            }
            Stored::Scan { scan, found, room, .. } => match scan.next() {
                Some(Ok(stored)) => {
                    // A page stored both ways (which verify reports) comes
                    // out twice, its page record first: the stream takes
                    // that one, as a page read does.
                    while scan.peek().is_some_and(|next| next.as_ref().is_ok_and(|n| n.page == stored.page)) {
                        scan.next();
                    }
                    if let Some(pages) = found.as_mut() {
                        pages.push(stored.page);
                        if pages.len() > *room {
                            *found = None;
                        }
                    }
                    Some(stored.held)
                }
                _ => None,
            },
        }
    }

    /// Whether what a scan read is still current (the bitmap's stored
    /// pages did not change since it began); `false` for a directory,
    /// which reads nothing.
    fn current(&self, dirs: &Directories) -> bool {
        matches!(self, Stored::Scan { watch: Some(w), .. } if dirs.unchanged(w))
    }

    /// Ends a scan's registration (once; later calls do nothing). If
    /// `complete` (the scan ran to its end) and it scanned the whole range,
    /// the pages it found become the bitmap's directory, unless a
    /// write-back changed them meanwhile.
    fn end(&mut self, dirs: &Directories, complete: bool) {
        if let Stored::Scan { watch, found, .. } = self {
            if let Some(w) = watch.take() {
                dirs.finish(w, found.take().filter(|_| complete));
            }
        }
    }
}

/// Scans the store for the pages of `bitmap` and caches the directory
/// (unless a write-back ran meanwhile; the result is correct either way).
/// Reads the page records' keys and the group records' member slots, not
/// the pages.
///
/// # Errors
/// [`crate::Error::Corrupted`] (naming `name`) for a group record whose
/// members cannot be read; a store error.
fn build_directory(engine: &Engine, name: &[u8], bitmap: u64) -> Result<Arc<Vec<u64>>> {
    let version = engine.dirs.version();
    let (lo, hi) = layout::page_range(bitmap, 0, u64::MAX);
    let mut records = Vec::new();
    for r in engine.store.scan(&lo, &hi) {
        let (k, _) = r?;
        records.extend(layout::parse_page_key(&k).map(|(_, p)| p));
    }
    let (lo, hi) = layout::group_range(bitmap, 0, u64::MAX);
    let mut members = Vec::new();
    for r in engine.store.scan(&lo, &hi) {
        let (k, v) = r?;
        let Some((_, group)) = layout::parse_group_key(&k) else { continue };
        let first = layout::group_page(group, 0);
        let slots = split_group(&v).map_err(|e| corrupted(Some(name), bitmap, first, &e))?;
        members.extend(slots.iter().map(|m| layout::group_page(group, m.slot)));
    }
    // Both lists ascend; a page is in only one of them.
    records.extend(members);
    records.sort_unstable();
    records.dedup();
    let pages = Arc::new(records);
    engine.dirs.insert(bitmap, Arc::clone(&pages), version);
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::Reading;
    use crate::{Config, Db};

    /// The bitmap id of paged string `key`.
    fn id_of(db: &Db, key: &[u8]) -> u64 {
        db.engine.read(db.index, &[key], |tx| Ok(tx.string(key)?.unwrap().id().unwrap())).unwrap()
    }

    fn open(dir: &std::path::Path) -> Db {
        Config::new(dir).flush_interval(None).open().unwrap()
    }

    /// The bitmap id of `key` and the (page, set bits) of a whole-value
    /// stream of it.
    fn stream_all(db: &Db, key: &[u8], between: impl FnOnce()) -> (u64, Vec<(u64, Vec<u64>)>) {
        let (id, mut stream) = db
            .engine
            .read(db.index, &[key], |tx| {
                let meta = tx.string(key)?.unwrap();
                Ok((meta.id().unwrap(), tx.stream(key, &meta, (0, u64::MAX), Reading::ToTheEnd)?))
            })
            .unwrap();
        let mut pages = Vec::new();
        let mut between = Some(between);
        while let Some((page, p)) = stream.next_page().unwrap() {
            pages.push((page, p.offsets(page).collect()));
            if let Some(f) = between.take() {
                f();
            }
        }
        (id, pages)
    }

    /// Invariant: a whole-value stream of a bitmap with no directory (a
    /// cold store) yields the bitmap's pages and leaves behind exactly the
    /// directory a scan for it would build; a stream during which a
    /// write-back changed the bitmap's stored pages leaves none (and still
    /// yields every page with its bits as of when it was read).
    #[test]
    fn a_whole_value_stream_leaves_the_directory_it_scanned() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        // Sparse pages (group members) and a dense one (a page record).
        let mut bits: Vec<u64> = [5, 3 * 32_768 + 1, 70 * 32_768 + 9, 200 * 32_768].to_vec();
        bits.extend((10 * 32_768..11 * 32_768).step_by(3));
        bits.sort_unstable();
        db.set_bits(b"k", &bits, true).unwrap();
        db.flush().unwrap();
        drop(db);

        let db = open(dir.path());
        let (id, pages) = stream_all(&db, b"k", || {});
        let got: Vec<u64> = pages.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        assert_eq!(got, bits);
        let left = db.engine.dirs.get(id).expect("the stream left a directory");
        db.engine.dirs.remove(id);
        let built = super::build_directory(&db.engine, b"k", id).unwrap();
        assert_eq!(*left, *built);
        assert_eq!(*left, vec![0, 3, 10, 70, 200]);
        drop(db);

        // A GET streams pages 0 to the value's last page: the whole value.
        let db = open(dir.path());
        let value = db.get(b"k").unwrap().unwrap();
        assert_eq!(value.len() as u64, 200 * 4_096 + 1);
        let id = id_of(&db, b"k");
        assert_eq!(db.engine.dirs.get(id).as_deref(), Some(&vec![0, 3, 10, 70, 200]));
        drop(db);

        let db = open(dir.path());
        let (id, pages) = stream_all(&db, b"k", || {
            db.setbit(b"k", 150 * 32_768, true).unwrap();
            db.flush().unwrap();
        });
        assert!(db.engine.dirs.get(id).is_none(), "a write-back ran during the stream");
        assert_eq!(pages.first().map(|(p, _)| *p), Some(0));
        assert_eq!(db.bitcount(b"k", None).unwrap(), bits.len() as u64 + 1);
    }

    /// Invariant: what a store scan read is used only while no write-back
    /// has changed the bitmap's stored pages since the scan began. Pages 0
    /// and 5 share a group record, so the scan reads page 5 with page 0;
    /// page 5 then gains 3,000 bits (too many to log as a page delta: the
    /// write-back writes it whole) and is dropped from the cache, and the
    /// stream must yield page 5 as the store now holds it, not the version
    /// it read first.
    #[test]
    fn a_stream_does_not_use_what_its_scan_read_before_a_write_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.set_bits(b"k", &[3, 5 * 32_768 + 1], true).unwrap();
        db.flush().unwrap();
        drop(db);

        let db = open(dir.path());
        let new_bits: Vec<u64> = (5 * 32_768 + 100..).step_by(3).take(3_000).collect();
        let (id, pages) = stream_all(&db, b"k", || {
            db.set_bits(b"k", &new_bits, true).unwrap();
            db.flush().unwrap();
            let id = id_of(&db, b"k");
            db.engine.pages.forget_clean(&[(id, 5)]);
        });
        let page5: Vec<u64> = std::iter::once(5 * 32_768 + 1).chain(new_bits).collect();
        assert_eq!(pages, vec![(0, vec![3]), (5, page5)], "bitmap {id}");
    }

    /// Invariant: a whole-value stream leaves no directory longer than the
    /// directories' budget (here 4 page numbers: a 256-byte cache), and
    /// still yields every page.
    #[test]
    fn a_stream_keeps_no_directory_past_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let bits: Vec<u64> = (0..6).map(|p| p * 32_768 + 1).collect();
        let small = |dir: &std::path::Path| Config::new(dir).flush_interval(None).cache_bytes(256).open().unwrap();
        let db = small(dir.path());
        db.set_bits(b"four", &bits[..4], true).unwrap();
        db.set_bits(b"six", &bits, true).unwrap();
        db.flush().unwrap();
        drop(db);
        let db = small(dir.path());
        for (key, n) in [(&b"four"[..], 4), (&b"six"[..], 6)] {
            let (id, pages) = stream_all(&db, key, || {});
            assert_eq!(pages.len(), n);
            assert_eq!(db.engine.dirs.get(id).is_some(), n <= 4, "{}", String::from_utf8_lossy(key));
        }
    }

    /// Invariant: a stream of a value with no directory that may stop early
    /// ([`Reading::Partly`]) builds the directory first; and a page stored
    /// both as a page record and as a group member (damage `verify`
    /// reports) comes out of a scanning stream once, as its page record,
    /// as a point read of the page gives it.
    #[test]
    fn partial_readers_build_the_directory_and_a_doubly_stored_page_comes_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.set_bits(b"k", &[3, 4, 2 * 32_768 + 5], true).unwrap();
        db.flush().unwrap();
        let id = id_of(&db, b"k");
        drop(db);
        {
            // Page 0 also as a record of its own, with one more bit.
            let store = super::super::store::SledStore::open(dir.path(), 1 << 20).unwrap();
            let page = crate::page::Page::from_positions(&[3, 4, 9]);
            let key = super::layout::page_key(id, 0).to_vec();
            super::super::store::Store::apply(&store, vec![(key, Some(page.encode()))]).unwrap();
        }
        let db = open(dir.path());
        let partly = db
            .engine
            .read(db.index, &[b"k"], |tx| {
                let meta = tx.string(b"k")?.unwrap();
                tx.stream(b"k", &meta, (0, u64::MAX), Reading::Partly)
            })
            .unwrap();
        assert_eq!(db.engine.dirs.get(id).as_deref(), Some(&vec![0, 2]));
        drop(partly);
        db.engine.dirs.remove(id);
        let (_, pages) = stream_all(&db, b"k", || {});
        assert_eq!(pages, vec![(0, vec![3, 4, 9]), (2, vec![2 * 32_768 + 5])]);
        assert_eq!(db.engine.dirs.get(id).as_deref(), Some(&vec![0, 2]));
    }

    /// Invariant: a BITOP OR over values with no directory (a cold store)
    /// leaves each source's directory, the pages it stores, even when a
    /// source has a page on the result's last page (its stream is polled
    /// past it); an AND, which may leave a source early, builds them first.
    #[test]
    fn a_bitop_leaves_its_sources_directories() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let a: Vec<u64> = (0..100_000).collect();
        let b: Vec<u64> = (0..100_000).step_by(2).collect();
        db.set_bits(b"a", &a, true).unwrap();
        db.set_bits(b"b", &b, true).unwrap();
        db.flush().unwrap();
        drop(db);
        for (op, ones) in [(crate::BitOp::Or, 100_000), (crate::BitOp::And, 50_000)] {
            let db = open(dir.path());
            let (ia, ib) = (id_of(&db, b"a"), id_of(&db, b"b"));
            assert!(db.engine.dirs.get(ia).is_none());
            db.bitop(op, b"d", &[b"a", b"b"]).unwrap();
            assert_eq!(db.bitcount(b"d", None).unwrap(), ones);
            for i in [ia, ib] {
                assert_eq!(db.engine.dirs.get(i).as_deref(), Some(&vec![0, 1, 2, 3]), "{op:?}");
            }
            drop(db);
        }
    }
}
