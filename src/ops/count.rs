//! BITCOUNT and BITPOS.

use crate::db::Db;
use crate::engine::PageStream;
use crate::engine::{Meta, Reading};
use crate::error::{Error, Result};
use crate::geometry::{bit_pages, page_bound, PAGE_BITS};
use crate::ops::range::{clamp, span_bits, to_bits, total_units, Span, Unit};

/// The page-relative bounds `[lo, hi)` of the inclusive bit range
/// `first ..= last` within page `page`.
pub(super) fn page_bounds(page: u64, first: u64, last: u64) -> (u32, u32) {
    let lo = if page == first / PAGE_BITS { first % PAGE_BITS } else { 0 };
    let hi = if page == last / PAGE_BITS { last % PAGE_BITS + 1 } else { PAGE_BITS };
    (page_bound(lo), page_bound(hi))
}

/// The set bits in `first ..= last` of the bitmap, given a stream over the
/// pages of that range: the edge pages count a sub-range, the others use
/// their cached popcount.
pub(super) fn count_pages(stream: &mut PageStream, first: u64, last: u64) -> Result<u64> {
    let mut total = 0u64;
    while let Some((page, p)) = stream.next_page()? {
        let (lo, hi) = page_bounds(page, first, last);
        total += u64::from(if lo == 0 && u64::from(hi) == PAGE_BITS { p.count_ones() } else { p.count_range(lo, hi) });
    }
    Ok(total)
}

impl Db {
    /// Counts the set bits of `key` (Redis BITCOUNT), within `span` if given.
    ///
    /// Cost: without a span, O(1): the count is kept in the key's metadata
    /// and no page is read. With a span, reads the pages the span touches
    /// (only pages that exist); the two edge pages count a sub-range, the
    /// others use their cached popcount.
    ///
    /// # Errors
    /// [`Error::WrongType`], [`Error::Corrupted`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::Span;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set(b"k", b"foobar")?;
    /// assert_eq!(db.bitcount(b"k", None)?, 26);
    /// assert_eq!(db.bitcount(b"k", Some(Span::bytes(1, 1)))?, 6);
    /// assert_eq!(db.bitcount(b"k", Some(Span::bits(5, 30)))?, 17);
    /// # Ok(()) }
    /// ```
    pub fn bitcount(&self, key: &[u8], span: Option<Span>) -> Result<u64> {
        // The pages to read, unless the answer is the whole-key count or 0.
        let partial = |meta: &Meta| {
            let (first, last) = span_bits(span?, meta.len)?;
            let whole = first == 0 && last.saturating_add(1) >= meta.len.saturating_mul(8);
            (!whole).then_some((first, last))
        };
        let (meta, stream) = self.string_and_stream(key, |m| partial(m).map(bit_pages), Reading::ToTheEnd)?;
        let Some(meta) = meta else { return Ok(0) };
        let (Some((first, last)), Some(mut stream)) = (partial(&meta), stream) else {
            return Ok(if span.is_some_and(|s| span_bits(s, meta.len).is_none()) { 0 } else { meta.ones() });
        };
        count_pages(&mut stream, first, last)
    }

    /// The position of the first bit equal to `bit` in `key` (Redis BITPOS),
    /// optionally from `start` and up to `end` (inclusive, negative indexes
    /// count from the end) in `unit`s.
    ///
    /// Redis's rules: a missing key is all zeros (`-1` for a 1, `0` for a 0);
    /// when looking for a 0 without an explicit `end`, the string is taken as
    /// followed by zeros, so a string of all ones answers its length in bits;
    /// with an explicit `end` and no match, the answer is `-1`. `end` without
    /// `start` is ignored (the command layer never passes it).
    ///
    /// Cost: reads pages in order from the start of the range until the
    /// first match; absent pages count as zeros without a read.
    ///
    /// # Errors
    /// [`Error::WrongType`], [`Error::Corrupted`];
    /// [`Error::OffsetOutOfRange`] if the answer is above `i64::MAX` (only
    /// for offsets the Redis command layer never accepts).
    pub fn bitpos(&self, key: &[u8], bit: bool, start: Option<i64>, end: Option<i64>, unit: Unit) -> Result<i64> {
        let end_given = start.is_some() && end.is_some();
        // The inclusive bit range searched, by Redis's rules.
        let range = |meta: &Meta| match start {
            None => clamp(0, -1, meta.len).map(|(a, b)| to_bits(a, b, Unit::Byte)),
            Some(start) => {
                clamp(start, end.unwrap_or(-1), total_units(meta.len, unit)).map(|(a, b)| to_bits(a, b, unit))
            }
        };
        let (meta, stream) = self.string_and_stream(key, |m| range(m).map(bit_pages), Reading::Partly)?;
        let Some(meta) = meta else { return Ok(if bit { -1 } else { 0 }) };
        let (Some((first, last)), Some(stream)) = (range(&meta), stream) else { return Ok(-1) };
        let found = find(stream, bit, first, last)?;
        let pos = match found {
            Some(p) => p,
            None if bit || end_given => return Ok(-1),
            None => last.saturating_add(1),
        };
        i64::try_from(pos).map_err(|_| Error::OffsetOutOfRange { offset: pos })
    }
}

/// The first bit equal to `bit` in `first ..= last` of the bitmap, given a
/// stream over the pages of that range.
fn find(mut stream: PageStream, bit: bool, first: u64, last: u64) -> Result<Option<u64>> {
    let (first_page, last_page) = (first / PAGE_BITS, last / PAGE_BITS);
    // The next page number not yet known to hold no match (used for zeros).
    let mut expected = first_page;
    while let Some((page, p)) = stream.next_page()? {
        if !bit && page > expected {
            // An absent page is all zeros.
            return Ok(Some((expected * PAGE_BITS).max(first)));
        }
        let (lo, hi) = page_bounds(page, first, last);
        if let Some(b) = p.find(bit, lo, hi) {
            return Ok(Some(page * PAGE_BITS + u64::from(b)));
        }
        expected = page + 1;
    }
    if !bit && expected <= last_page {
        return Ok(Some((expected * PAGE_BITS).max(first)));
    }
    Ok(None)
}
