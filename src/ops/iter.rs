//! Iteration over the set positions of a bitmap ("list the uids").

use std::ops::RangeBounds;
use std::sync::Arc;

use crate::db::Db;
use crate::engine::PageStream;
use crate::engine::{Meta, Reading};
use crate::error::Result;
use crate::geometry::{bit_pages, page_bound, PAGE_BITS};
use crate::ops::range::bit_range;
use crate::page::Page;

/// An iterator over the set bit offsets of a bitmap, ascending; see
/// [`Db::ones`]. Holds one page at a time.
pub struct Ones {
    stream: Option<PageStream>,
    current: Option<(u64, Arc<Page>)>,
    next_bit: u32,
    first: u64,
    last: u64,
}

impl std::fmt::Debug for Ones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ones").field("first", &self.first).field("last", &self.last).finish_non_exhaustive()
    }
}

impl Db {
    /// The offsets of the set bits of `key` within `range`, ascending.
    ///
    /// The iterator reads one page at a time, so it lists bitmaps larger than
    /// memory. It keeps listing the value the key had when it was created,
    /// even if the key is replaced or deleted meanwhile (that value's pages
    /// are reclaimed only after the iterator is dropped).
    ///
    /// # Errors
    /// [`crate::Error::WrongType`]; the iterator yields
    /// [`crate::Error::Corrupted`] for a page that does not decode, then ends.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set_bits(b"tag:vip", &[5, 70_000, 1_000_000_000], true)?;
    /// let uids: Vec<u64> = db.ones(b"tag:vip", ..)?.collect::<bitsled::Result<_>>()?;
    /// assert_eq!(uids, vec![5, 70_000, 1_000_000_000]);
    /// assert_eq!(db.ones(b"tag:vip", 6..=70_000)?.count(), 1);
    /// # Ok(()) }
    /// ```
    pub fn ones(&self, key: &[u8], range: impl RangeBounds<u64>) -> Result<Ones> {
        // The inclusive bit range listed, clipped to the key's length.
        let bounds = |m: &Meta| bit_range(&range, m.len);
        let (meta, stream) = self.string_and_stream(key, |m| bounds(m).map(bit_pages), Reading::Partly)?;
        let (Some((first, last)), Some(stream)) = (meta.as_ref().and_then(bounds), stream) else {
            return Ok(Ones { stream: None, current: None, next_bit: 0, first: 0, last: 0 });
        };
        Ok(Ones { stream: Some(stream), current: None, next_bit: 0, first, last })
    }
}

impl Iterator for Ones {
    type Item = Result<u64>;

    fn next(&mut self) -> Option<Result<u64>> {
        loop {
            if let Some((page, p)) = &self.current {
                let hi = if *page == self.last / PAGE_BITS { self.last % PAGE_BITS + 1 } else { PAGE_BITS };
                if let Some(b) = p.find(true, self.next_bit, page_bound(hi)) {
                    self.next_bit = b + 1;
                    return Some(Ok(page * PAGE_BITS + u64::from(b)));
                }
                self.current = None;
            }
            match self.stream.as_mut()?.next_page() {
                Ok(Some((page, p))) => {
                    self.next_bit = if page == self.first / PAGE_BITS { (self.first % PAGE_BITS) as u32 } else { 0 };
                    self.current = Some((page, p));
                }
                Ok(None) => {
                    self.stream = None;
                    return None;
                }
                Err(e) => {
                    self.stream = None;
                    return Some(Err(e));
                }
            }
        }
    }
}
