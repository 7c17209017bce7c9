//! BITOP: a streaming k-way merge over the sources' ordered page scans.
//!
//! One page per source is in memory at a time. Result pages go into a new
//! bitmap id that nobody can see; when every page is written, the
//! destination key is switched to it in one step, so readers and crashes see
//! the old value or the new one, never a mix.

use std::sync::Arc;

use crate::db::Db;
use crate::engine::{read_bytes, Kind, PageStream, Reading};
use crate::error::{Error, Result};
use crate::geometry::{page_bit, PAGE_BITS, PAGE_WORDS};
use crate::page::{self, Census, Fold, Page};

use super::positions;

mod split;

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    /// Bits set in every source.
    And,
    /// Bits set in any source.
    Or,
    /// Bits set in an odd number of sources.
    Xor,
    /// The complement of the single source, over its length.
    Not,
    /// `X & !(A1 | A2 | ...)`: in the first source and in none of the others.
    Diff,
    /// `!X & (A1 | A2 | ...)`: in some other source but not the first.
    Diff1,
    /// `X & (A1 | A2 | ...)`: in the first source and in at least one other.
    AndOr,
    /// Bits set in exactly one source.
    One,
}

impl BitOp {
    /// The Redis name of the operation.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            BitOp::And => "AND",
            BitOp::Or => "OR",
            BitOp::Xor => "XOR",
            BitOp::Not => "NOT",
            BitOp::Diff => "DIFF",
            BitOp::Diff1 => "DIFF1",
            BitOp::AndOr => "ANDOR",
            BitOp::One => "ONE",
        }
    }
}

/// The sources of one result page, each `None` if absent (all zero).
type Column = Vec<Option<Arc<Page>>>;

impl Db {
    /// Computes `op` over `sources` into `dest` (Redis BITOP) and returns the
    /// result's length in bytes: the longest source's. Missing and shorter
    /// sources count as zeros. An empty result deletes `dest`. `dest` may be
    /// one of the sources.
    ///
    /// Cost: streams every source page by page (AND and DIFF/ANDOR skip pages
    /// the first source or any source lacks without reading them); memory is
    /// one page per source plus result pages up to the dirty budget. An AND,
    /// OR or XOR over sources larger than the page cache reads half of them
    /// on a second thread, which holds up to 64 result pages ahead. The
    /// destination changes atomically at the end.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wrong number of sources (NOT takes
    /// one; DIFF, DIFF1 and ANDOR at least two; the rest at least one);
    /// [`Error::WrongType`] if a source is not a string;
    /// [`Error::Corrupted`] if a source page does not decode.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::BitOp;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set_bits(b"mon", &[1, 2, 3], true)?;
    /// db.set_bits(b"tue", &[2, 3, 4], true)?;
    /// assert_eq!(db.bitop(BitOp::And, b"both", &[b"mon", b"tue"])?, 1);
    /// assert_eq!(db.bitcount(b"both", None)?, 2);
    /// # Ok(()) }
    /// ```
    pub fn bitop(&self, op: BitOp, dest: &[u8], sources: &[&[u8]]) -> Result<u64> {
        check_arity(op, sources.len())?;
        // When the destination is also a source, a write to it between
        // reading it and publishing the result would be lost: the
        // destination is claimed first, so its writers wait until then.
        let _claim = sources.contains(&dest).then(|| self.engine.claim(dest));
        self.engine.check_writable()?;
        let (len, streams, flats) = self.source_streams(op, sources)?;
        let mut build = self.engine.begin_build(self.index)?;
        if len == 0 {
            build.publish(dest, None)?;
            return Ok(0);
        }
        each_result_page(op, streams, flats, len, |page, result| build.put(page, result.into_page()))?;
        let meta = build.meta(Kind::String, len, 0);
        build.publish(dest, Some(&meta))?;
        Ok(len)
    }

    /// The number of set bits BITOP `op` over `sources` would give, without
    /// storing the result: "BITOP then BITCOUNT" when the destination is not
    /// needed (the `BITOP.COUNT` server extension). Returns the result's
    /// length in bytes and its count.
    ///
    /// Cost: as [`Db::bitop`]'s reading side; nothing is written, so memory
    /// is one page per source and one result page.
    ///
    /// # Errors
    /// As [`Db::bitop`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::BitOp;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set_bits(b"mon", &[1, 2, 3], true)?;
    /// db.set_bits(b"tue", &[2, 3, 4], true)?;
    /// assert_eq!(db.bitop_count(BitOp::And, &[b"mon", b"tue"])?, (1, 2));
    /// assert!(!db.exists(b"both")?);
    /// # Ok(()) }
    /// ```
    pub fn bitop_count(&self, op: BitOp, sources: &[&[u8]]) -> Result<(u64, u64)> {
        check_arity(op, sources.len())?;
        let (len, streams, flats) = self.source_streams(op, sources)?;
        let mut ones = 0u64;
        if len > 0 {
            // Only the counts: no result page is ever encoded.
            each_result_page(op, streams, flats, len, |_, result| {
                ones += u64::from(result.ones());
                Ok(())
            })?;
        }
        Ok((len, ones))
    }

    /// Streams over the sources (`None` for a missing one), the longest
    /// source's length in bytes, and for an AND, OR or XOR of sources that
    /// are all sparse (or missing) their flat position lists (`None` for a
    /// missing source), each read under its key's lock with its stream.
    fn source_streams(&self, op: BitOp, sources: &[&[u8]]) -> Result<(u64, Sources, Option<Flats>)> {
        let mut len = 0;
        let mut streams = Vec::with_capacity(sources.len());
        let mut flats = matches!(op, BitOp::And | BitOp::Or | BitOp::Xor).then(Vec::new);
        let reading = reading_of(op);
        // The bytes of pages the streams read, about.
        let mut read = 0u64;
        let mut weights = Vec::with_capacity(sources.len());
        for name in sources {
            let (meta, stream, list) = self.engine.read(self.index, &[name], |tx| {
                let Some(meta) = tx.string(name)? else { return Ok((None, None, None)) };
                let stream = tx.stream(name, &meta, (0, u64::MAX), reading)?;
                let list = if flats.is_some() { tx.flat_positions(name, &meta)? } else { None };
                Ok((Some(meta), Some(stream), list))
            })?;
            if let Some(f) = &mut flats {
                match (&meta, list) {
                    (None, _) => f.push(None),
                    (Some(_), Some(list)) => f.push(Some(list)),
                    (Some(_), None) => flats = None,
                }
            }
            let weight = meta.as_ref().map_or(0, |m| read_bytes(m, (0, u64::MAX)));
            if let Some(m) = &meta {
                read = read.saturating_add(weight);
                len = len.max(m.len);
            }
            weights.push(weight);
            streams.push(stream);
        }
        // More than the cache holds: caching the pages would only evict
        // them (and every other reader's) before they are read again.
        let bulk = self.engine.reads_past_cache(read);
        if bulk {
            streams.iter_mut().flatten().for_each(PageStream::pass);
        }
        Ok((len, Sources { streams, weights, bulk }, flats))
    }
}

/// The flat position lists of a BITOP's sources (`None` for a missing one).
type Flats = Vec<Option<Arc<[u64]>>>;

/// A BITOP's sources as [`Db::source_streams`] opens them.
struct Sources {
    /// A stream per source (`None` for a missing one).
    streams: Vec<Option<PageStream>>,
    /// The bytes of pages each stream reads, about ([`read_bytes`]).
    weights: Vec<u64>,
    /// Whether they read more than the page cache holds, so pass through it.
    bulk: bool,
}

/// Calls `f` with each non-zero page of the result of `op` (AND, OR or
/// XOR) over the sources' flat lists, below `bits`, in page order.
fn each_flat_result_page(
    op: BitOp,
    flats: &Flats,
    bits: u64,
    mut f: impl FnMut(u64, ResultPage<'_>) -> Result<()>,
) -> Result<()> {
    let lists: Vec<&[u64]> = flats.iter().flatten().map(|l| &l[..]).collect();
    match op {
        BitOp::And if lists.len() < flats.len() => Ok(()),
        BitOp::And => {
            positions::each_page(&positions::and(&lists), bits, |page, list| f(page, ResultPage::Positions(list)))
        }
        _ => positions::each_page_of_union(&lists, op == BitOp::Xor, bits, |page, list| {
            f(page, ResultPage::Positions(list))
        }),
    }
}

/// Calls `f` with each non-zero page of the result of `op` over the
/// sources (a result `len` bytes long, `len > 0`), in page order; from the
/// flat lists instead if every source has one, and from two threads
/// reading half the sources each if [`split::halves`] says so.
fn each_result_page(
    op: BitOp,
    sources: Sources,
    flats: Option<Flats>,
    len: u64,
    f: impl FnMut(u64, ResultPage<'_>) -> Result<()>,
) -> Result<()> {
    if let Some(flats) = flats {
        // Lengths are at most u64::MAX / 8 (offsets are limited so).
        return each_flat_result_page(op, &flats, len * 8, f);
    }
    match split::halves(op, sources) {
        Ok((mine, theirs)) => split::each_result_page(op, mine, theirs, len, f),
        Err(streams) => each_stream_result_page(op, streams, len, f),
    }
}

/// Calls `f` with each non-zero page of the result of `op` over `streams`
/// (a result `len` bytes long, `len > 0`), in page order.
fn each_stream_result_page(
    op: BitOp,
    mut streams: Vec<Option<PageStream>>,
    len: u64,
    mut f: impl FnMut(u64, ResultPage<'_>) -> Result<()>,
) -> Result<()> {
    // Lengths are at most u64::MAX / 8 (offsets are limited so).
    let bits = len * 8;
    let last_page = (bits - 1) / PAGE_BITS;
    let mut scratch = Scratch::take();
    let mut column: Column = vec![None; streams.len()];
    let mut next = 0u64;
    while let Some(page) = next_page(op, &mut streams, next, last_page)? {
        let combined = if op == BitOp::And {
            and_column(&mut streams, page, &mut column, &mut scratch)?
        } else {
            for (slot, s) in column.iter_mut().zip(streams.iter_mut()) {
                *slot = match s {
                    Some(s) => take_at(s, page)?,
                    None => None,
                };
            }
            combine(op, &column, &mut scratch)
        };
        // Bits past the length come from NOT, and from a source page read
        // after a concurrent write extended its key beyond the length taken
        // when the streams opened: the last page is cut at the length.
        let tail = (page == last_page).then(|| bits - page * PAGE_BITS).filter(|&t| t < PAGE_BITS).map(page_bit);
        let result = match combined {
            None => None,
            Some(Combined::Words) => {
                if let Some(t) = tail {
                    page::truncate_words(&mut scratch.acc, t);
                }
                let census = Census::of(&scratch.acc);
                (census.ones > 0).then_some(ResultPage::Words(&scratch.acc, census))
            }
            Some(Combined::Positions) => {
                if let Some(t) = tail {
                    page::truncate_positions(&mut scratch.list, t);
                }
                (!scratch.list.is_empty()).then_some(ResultPage::Positions(&scratch.list))
            }
            Some(Combined::Page(mut p)) => {
                if let Some(t) = tail {
                    p.truncate(t);
                }
                (!p.is_empty()).then_some(ResultPage::Page(p))
            }
            Some(Combined::Shared(p)) => match tail {
                None => Some(ResultPage::Shared(p)),
                Some(t) => {
                    let mut p = Arc::unwrap_or_clone(p);
                    p.truncate(t);
                    (!p.is_empty()).then_some(ResultPage::Page(p))
                }
            },
        };
        if let Some(result) = result {
            f(page, result)?;
        }
        next = page + 1;
    }
    scratch.give_back();
    if reading_of(op) == Reading::ToTheEnd {
        // Past the last page each source's stream sees its scan end, which
        // leaves the source's directory.
        for s in streams.iter_mut().flatten() {
            s.peek()?;
        }
    }
    Ok(())
}

/// How far a BITOP `op` reads its sources: OR, XOR, NOT and ONE read each to
/// its end; the others may leave a source early (an AND stops at the end of
/// its shortest source).
fn reading_of(op: BitOp) -> Reading {
    if matches!(op, BitOp::Or | BitOp::Xor | BitOp::Not | BitOp::One) {
        Reading::ToTheEnd
    } else {
        Reading::Partly
    }
}

/// One non-zero page of a result. Counting it never encodes it.
enum ResultPage<'a> {
    /// Words computed in the scratch buffer, with their census.
    Words(&'a [u64; PAGE_WORDS], Census),
    /// Set positions (ascending) computed in the scratch list.
    Positions(&'a [u16]),
    /// A page computed whole.
    Page(Page),
    /// A source page that is the result as it is.
    Shared(Arc<Page>),
}

impl ResultPage<'_> {
    fn ones(&self) -> u32 {
        match self {
            ResultPage::Words(_, census) => census.ones,
            // At most a page's bits, so it always fits.
            ResultPage::Positions(list) => u32::try_from(list.len()).unwrap_or(u32::MAX),
            ResultPage::Page(p) => p.count_ones(),
            ResultPage::Shared(p) => p.count_ones(),
        }
    }

    /// The page in its smallest representation.
    fn into_page(self) -> Page {
        match self {
            ResultPage::Words(words, census) => Page::from_census(words, census),
            ResultPage::Positions(list) => Page::from_positions(list),
            ResultPage::Page(p) => p,
            ResultPage::Shared(p) => Arc::unwrap_or_clone(p),
        }
    }
}

fn check_arity(op: BitOp, n: usize) -> Result<()> {
    let ok = match op {
        BitOp::Not => n == 1,
        BitOp::Diff | BitOp::Diff1 | BitOp::AndOr => n >= 2,
        _ => n >= 1,
    };
    if ok {
        return Ok(());
    }
    Err(Error::InvalidArgument(match op {
        BitOp::Not => "BITOP NOT must be called with a single source key.".into(),
        BitOp::Diff | BitOp::Diff1 | BitOp::AndOr => {
            format!("BITOP {} must be called with at least two source keys.", op.name())
        }
        _ => "BITOP requires at least one source key".into(),
    }))
}

/// The page of `s` numbered `page`, if it has one; skips earlier pages.
fn take_at(s: &mut PageStream, page: u64) -> Result<Option<Arc<Page>>> {
    s.seek(page)?;
    if s.peek()? == Some(page) {
        return Ok(s.take()?.map(|(_, p)| p));
    }
    Ok(None)
}

/// The next page number `>= from` that can be non-zero in the result.
fn next_page(op: BitOp, streams: &mut [Option<PageStream>], from: u64, last: u64) -> Result<Option<u64>> {
    if from > last {
        return Ok(None);
    }
    let p = match op {
        // Every page, present or not, is non-zero in the result.
        BitOp::Not => Some(from),
        BitOp::And => next_common(streams, from)?,
        BitOp::Or | BitOp::Xor | BitOp::One => min_head(streams, from)?,
        BitOp::Diff => match &mut streams[0] {
            Some(s) => {
                s.seek(from)?;
                s.peek()?
            }
            None => None,
        },
        BitOp::AndOr => {
            let mut at = from;
            loop {
                let Some(first) = streams[0].as_mut() else { break None };
                first.seek(at)?;
                let Some(x) = first.peek()? else { break None };
                let Some(a) = min_head(&mut streams[1..], x)? else { break None };
                if a == x {
                    break Some(x);
                }
                // No other source has page x: move the first one up to a.
                at = a;
            }
        }
        BitOp::Diff1 => min_head(&mut streams[1..], from)?,
    };
    Ok(p.filter(|&p| p <= last))
}

/// The smallest candidate page `>= from` over `streams`.
fn min_head(streams: &mut [Option<PageStream>], from: u64) -> Result<Option<u64>> {
    let mut best: Option<u64> = None;
    for s in streams.iter_mut().flatten() {
        s.seek(from)?;
        if let Some(p) = s.peek()? {
            best = Some(best.map_or(p, |b| b.min(p)));
        }
    }
    Ok(best)
}

/// The smallest page `>= from` that every stream has a candidate for.
fn next_common(streams: &mut [Option<PageStream>], from: u64) -> Result<Option<u64>> {
    if streams.iter().any(Option::is_none) {
        return Ok(None);
    }
    let mut at = from;
    loop {
        let mut agreed = true;
        for s in streams.iter_mut().flatten() {
            s.seek(at)?;
            match s.peek()? {
                None => return Ok(None),
                Some(p) if p > at => {
                    at = p;
                    agreed = false;
                }
                Some(_) => {}
            }
        }
        if agreed {
            return Ok(Some(at));
        }
    }
}

/// Word buffers reused across pages.
struct Scratch {
    acc: Box<[u64; PAGE_WORDS]>,
    other: Box<[u64; PAGE_WORDS]>,
    twice: Box<[u64; PAGE_WORDS]>,
    /// Positions of a sparse AND.
    list: Vec<u16>,
}

thread_local! {
    /// The scratch buffers of this thread's last BITOP, kept for its next
    /// one: three zeroed 4 KiB buffers cost more than a small BITOP itself.
    static SPARE_SCRATCH: std::cell::Cell<Option<Scratch>> = const { std::cell::Cell::new(None) };
}

impl Scratch {
    /// This thread's spare buffers, or new ones. Every use of a buffer
    /// writes what it reads first, so what a last BITOP left does not
    /// matter.
    fn take() -> Scratch {
        SPARE_SCRATCH.with(std::cell::Cell::take).unwrap_or_else(|| Scratch {
            acc: Box::new([0; PAGE_WORDS]),
            other: Box::new([0; PAGE_WORDS]),
            twice: Box::new([0; PAGE_WORDS]),
            list: Vec::new(),
        })
    }

    /// Keeps the buffers for this thread's next BITOP (not a list grown
    /// past a sparse page's bound).
    fn give_back(mut self) {
        if self.list.capacity() > page::SPARSE_MAX as usize {
            self.list = Vec::new();
        }
        SPARE_SCRATCH.with(|c| c.set(Some(self)));
    }
}

/// The AND of page `page` of every stream (each has a candidate there),
/// taking the sources' pages one at a time: the sparse pages' positions
/// are intersected as they come, and the first empty intersection (or a
/// page that turns out all zero) ends the column without taking the rest,
/// which the next page's seek moves past. At low densities most columns
/// end after two pages. Pages taken go into `column`; the result is left
/// in `s` as [`combine`] leaves it.
fn and_column(
    streams: &mut [Option<PageStream>],
    page: u64,
    column: &mut Column,
    s: &mut Scratch,
) -> Result<Option<Combined>> {
    column.clear();
    // Whether `s.list` holds the intersection of the sparse pages so far.
    let mut narrowed = false;
    for stream in streams.iter_mut() {
        let Some(p) = (match stream {
            Some(st) => take_at(st, page)?,
            None => None,
        }) else {
            return Ok(None);
        };
        if let Some(positions) = p.sparse_positions() {
            if narrowed {
                p.retain_set(&mut s.list);
            } else {
                s.list.clear();
                s.list.extend_from_slice(positions);
                narrowed = true;
            }
            if s.list.is_empty() {
                return Ok(None);
            }
        }
        column.push(Some(p));
    }
    if !narrowed {
        return Ok(combine(BitOp::And, column, s));
    }
    // The pages taken before the first sparse one, and the other pages
    // that are not lists, cut the list too.
    for p in column.iter().flatten().filter(|p| p.sparse_positions().is_none()) {
        p.retain_set(&mut s.list);
        if s.list.is_empty() {
            return Ok(None);
        }
    }
    Ok(Some(Combined::Positions))
}

/// How [`combine`] left a result page.
enum Combined {
    /// In the scratch buffer `acc`.
    Words,
    /// The set positions in the scratch list `list`, ascending.
    Positions,
    /// Computed whole.
    Page(Page),
    /// One source page, unchanged.
    Shared(Arc<Page>),
}

/// The result page of `op` over one column, or `None` if it is known to be
/// all zero without computing it.
fn combine(op: BitOp, col: &Column, s: &mut Scratch) -> Option<Combined> {
    let present = || col.iter().flatten();
    let combined = match op {
        BitOp::And => {
            if col.iter().any(Option::is_none) {
                return None;
            }
            // The sparsest page bounds the result: start from it.
            let smallest = present().min_by_key(|p| p.count_ones())?;
            let others = || present().filter(|p| !Arc::ptr_eq(p, smallest));
            if let Some(positions) = smallest.sparse_positions() {
                // Cut its positions down in place; a page is built only
                // for a non-zero result.
                s.list.clear();
                s.list.extend_from_slice(positions);
                for p in others() {
                    p.retain_set(&mut s.list);
                    if s.list.is_empty() {
                        return None;
                    }
                }
                return Some(Combined::Positions);
            }
            page::fold_pages(Fold::And, present().map(|p| &**p), &mut s.acc);
            Combined::Words
        }
        BitOp::Or => {
            let first = present().next()?;
            if present().count() == 1 {
                return Some(Combined::Shared(Arc::clone(first)));
            }
            page::fold_pages(Fold::Or, present().map(|p| &**p), &mut s.acc);
            Combined::Words
        }
        BitOp::Xor => {
            page::fold_pages(Fold::Xor, present().map(|p| &**p), &mut s.acc);
            Combined::Words
        }
        BitOp::One => {
            s.acc.fill(0);
            s.twice.fill(0);
            for p in present() {
                p.to_words(&mut s.other);
                for ((seen, twice), x) in s.acc.iter_mut().zip(s.twice.iter_mut()).zip(s.other.iter()) {
                    *twice |= *seen & x;
                    *seen |= x;
                }
            }
            for (seen, twice) in s.acc.iter_mut().zip(s.twice.iter()) {
                *seen &= !twice;
            }
            Combined::Words
        }
        BitOp::Not => Combined::Page(match &col[0] {
            Some(p) => p.not(),
            None => Page::full(),
        }),
        BitOp::Diff | BitOp::AndOr | BitOp::Diff1 => {
            // s.acc = A1 | A2 | ...
            s.acc.fill(0);
            let mut any = false;
            for p in col[1..].iter().flatten() {
                p.or_into(&mut s.acc);
                any = true;
            }
            let x = col[0].as_ref();
            match op {
                BitOp::Diff => {
                    let x = x?;
                    if !any {
                        return Some(Combined::Shared(Arc::clone(x)));
                    }
                    x.to_words(&mut s.other);
                    for (o, a) in s.other.iter_mut().zip(s.acc.iter()) {
                        *o &= !a;
                    }
                    std::mem::swap(&mut s.acc, &mut s.other);
                }
                BitOp::AndOr => x?.and_into(&mut s.acc),
                _ => {
                    if let Some(x) = x {
                        x.andnot_into(&mut s.acc);
                    }
                }
            }
            Combined::Words
        }
    };
    Some(combined)
}
