//! Rank, select and range cardinality over a bitmap's set bits.

use std::ops::RangeBounds;

use crate::db::Db;
use crate::engine::Reading;
use crate::error::Result;
use crate::geometry::{bit_pages, page_bit, value_pages, PAGE_BITS};
use crate::ops::count::count_pages;
use crate::ops::range::bit_range;

impl Db {
    /// The number of set bits of `key` within `range` (bit offsets in
    /// Redis's numbering; unlike BITCOUNT's span, never negative and never
    /// in bytes). A missing key has none.
    ///
    /// Cost: O(1) when the range covers the whole value (the count is kept
    /// in the key's metadata); otherwise reads the pages the range touches
    /// that exist, counting the two edge pages bit by bit and the others by
    /// their kept popcount.
    ///
    /// # Errors
    /// [`crate::Error::WrongType`], [`crate::Error::Corrupted`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set_bits(b"active", &[3, 10, 40_000, 1_000_000], true)?;
    /// assert_eq!(db.count_in(b"active", 4..=40_000)?, 2);
    /// assert_eq!(db.count_in(b"active", ..)?, 4);
    /// assert_eq!(db.count_in(b"nobody", ..)?, 0);
    /// # Ok(()) }
    /// ```
    pub fn count_in(&self, key: &[u8], range: impl RangeBounds<u64>) -> Result<u64> {
        // The pages to read, unless the answer is the whole-key count or 0.
        let partial = |len: u64| {
            let (first, last) = bit_range(&range, len)?;
            let whole = first == 0 && last.saturating_add(1) >= len.saturating_mul(8);
            (!whole).then_some((first, last))
        };
        let (meta, stream) = self.string_and_stream(key, |m| partial(m.len).map(bit_pages), Reading::ToTheEnd)?;
        let Some(meta) = meta else { return Ok(0) };
        let (Some((first, last)), Some(mut stream)) = (partial(meta.len), stream) else {
            return Ok(if bit_range(&range, meta.len).is_some() { meta.ones() } else { 0 });
        };
        count_pages(&mut stream, first, last)
    }

    /// The rank of `offset` in `key`: how many bits are set at offsets
    /// `0 ..= offset` (the bit at `offset` included).
    ///
    /// Cost: as [`Db::count_in`] over `..=offset`.
    ///
    /// # Errors
    /// [`crate::Error::WrongType`], [`crate::Error::Corrupted`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set_bits(b"signed", &[2, 5, 9], true)?;
    /// assert_eq!(db.rank(b"signed", 5)?, 2);
    /// assert_eq!(db.rank(b"signed", 4)?, 1);
    /// assert_eq!(db.rank(b"signed", u64::MAX)?, 3);
    /// # Ok(()) }
    /// ```
    pub fn rank(&self, key: &[u8], offset: u64) -> Result<u64> {
        self.count_in(key, ..=offset)
    }

    /// Select (named apart from [`Db::select`], which picks a database):
    /// the offset of the set bit of `key` that has exactly `n` set
    /// bits before it (`n` counts from 0), or `None` if the key has at most
    /// `n` set bits. `rank(select_bit(n)) == n + 1`.
    ///
    /// Cost: O(1) when `n` is past the key's count (kept in its metadata);
    /// otherwise reads pages in order, skipping each by its kept popcount,
    /// and bisects only the page that holds the answer by range counts.
    ///
    /// # Errors
    /// [`crate::Error::WrongType`], [`crate::Error::Corrupted`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set_bits(b"signed", &[2, 5, 90_000], true)?;
    /// assert_eq!(db.select_bit(b"signed", 0)?, Some(2));
    /// assert_eq!(db.select_bit(b"signed", 2)?, Some(90_000));
    /// assert_eq!(db.select_bit(b"signed", 3)?, None);
    /// # Ok(()) }
    /// ```
    pub fn select_bit(&self, key: &[u8], n: u64) -> Result<Option<u64>> {
        let (meta, stream) =
            self.string_and_stream(key, |m| (n < m.ones()).then(|| value_pages(m.len)).flatten(), Reading::Partly)?;
        let (Some(_), Some(mut stream)) = (meta, stream) else { return Ok(None) };
        let mut before = n;
        while let Some((page, p)) = stream.next_page()? {
            let ones = u64::from(p.count_ones());
            if before < ones {
                // The smallest `b` with more than `before` set bits in
                // `[0, b]`, by bisection over the page's range counts.
                let (mut lo, mut hi) = (0u32, page_bit(PAGE_BITS - 1));
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if u64::from(p.count_range(0, mid + 1)) > before {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                return Ok(Some(page * PAGE_BITS + u64::from(lo)));
            }
            before -= ones;
        }
        Ok(None)
    }
}
