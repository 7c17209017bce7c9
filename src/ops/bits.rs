//! Single bits: SETBIT, GETBIT, and the batch form for bulk loading.

use smallvec::SmallVec;

use crate::db::Db;
use crate::engine::INLINE_MAX;
use crate::error::{Error, Result};
use crate::geometry::{locate, MAX_OFFSET, PAGE_BITS};

/// Page groups handled under one hold of the write gate by [`Db::set_bits`].
const BATCH_PAGES: usize = 64;

impl Db {
    /// Sets or clears the bit at `offset` of string `key` (Redis SETBIT) and
    /// returns its previous value.
    ///
    /// A missing key is created; the string grows to `offset / 8 + 1` bytes,
    /// zero-filled. The library accepts any `u64` offset; the Redis command
    /// layer limits offsets to `2^32 - 1`.
    ///
    /// Cost: one page read (usually cached) and one page change in memory.
    ///
    /// # Errors
    /// [`crate::Error::OffsetOutOfRange`] above [`crate::MAX_OFFSET`];
    /// [`crate::Error::WrongType`] if `key` is not a string;
    /// [`crate::Error::Corrupted`] if the page does not decode.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// assert!(!db.setbit(b"login", 999_999_999, true)?);
    /// assert!(db.getbit(b"login", 999_999_999)?);
    /// assert_eq!(db.strlen(b"login")?, 125_000_000);
    /// # Ok(()) }
    /// ```
    pub fn setbit(&self, key: &[u8], offset: u64, value: bool) -> Result<bool> {
        if offset > MAX_OFFSET {
            return Err(Error::OffsetOutOfRange { offset });
        }
        self.engine.write(self.index, &[key], |tx| {
            let mut meta = tx.string_or_new(key)?;
            let byte_len = offset / 8 + 1;
            let current = tx.bit(key, &meta, offset)?;
            let mut changed = false;
            if current != value {
                tx.put_bit(key, &mut meta, offset, value)?;
                changed = true;
            }
            if byte_len > meta.len {
                meta.len = byte_len;
                changed = true;
            }
            // Like Redis, a SETBIT that changes nothing is no change (WATCH
            // does not see it).
            if changed {
                meta.changed_in_place = true;
                tx.set(key, &meta)?;
            }
            Ok(current)
        })
    }

    /// The bit at `offset` of `key` (Redis GETBIT): `false` past the end or
    /// for a missing key.
    ///
    /// Cost: one page read (usually cached).
    ///
    /// # Errors
    /// [`crate::Error::WrongType`], [`crate::Error::Corrupted`].
    pub fn getbit(&self, key: &[u8], offset: u64) -> Result<bool> {
        // The key's lock is held while the page is read, so the bitmap
        // cannot be replaced (and its pages discarded) in between.
        self.engine.read(self.index, &[key], |tx| {
            let Some(meta) = tx.string(key)? else { return Ok(false) };
            tx.bit(key, &meta, offset)
        })
    }

    /// Sets (or clears) every bit in `offsets` of `key`: the bulk-loading
    /// form of [`Db::setbit`]. Offsets may come in any order and repeat.
    /// Returns how many bits changed.
    ///
    /// Cost: one read-modify-write per touched page. Each group of up to 64
    /// pages is applied atomically, but the batch as a whole is not: a crash
    /// may keep a prefix of the groups (in page order).
    ///
    /// # Errors
    /// [`crate::Error::OffsetOutOfRange`] if any offset is above
    /// [`crate::MAX_OFFSET`] (then nothing is changed);
    /// [`crate::Error::WrongType`], [`crate::Error::Corrupted`]; on an error
    /// the groups applied before it stay applied.
    pub fn set_bits(&self, key: &[u8], offsets: &[u64], value: bool) -> Result<u64> {
        if let Some(&offset) = offsets.iter().find(|&&o| o > MAX_OFFSET) {
            return Err(Error::OffsetOutOfRange { offset });
        }
        let mut sorted: SmallVec<[u64; 8]> = offsets.iter().copied().collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut changed_total = 0u64;
        let mut rest = &sorted[..];
        while !rest.is_empty() {
            // Take the offsets of up to BATCH_PAGES pages.
            let mut end = 0;
            let mut pages = 0;
            let mut last_page = None;
            while end < rest.len() {
                let p = rest[end] / PAGE_BITS;
                if last_page != Some(p) {
                    if pages == BATCH_PAGES {
                        break;
                    }
                    pages += 1;
                    last_page = Some(p);
                }
                end += 1;
            }
            let (group, tail) = rest.split_at(end);
            rest = tail;
            changed_total += self.engine.write(self.index, &[key], |tx| {
                let mut meta = tx.string_or_new(key)?;
                let mut changed = 0u64;
                if meta.is_inline() && group.last().is_some_and(|&o| o < INLINE_MAX * 8) {
                    // Bits of a value kept inline that stays inline: flipped
                    // in its bytes, with no page built.
                    for &o in group {
                        if tx.bit(key, &meta, o)? != value {
                            tx.put_bit(key, &mut meta, o, value)?;
                            changed += 1;
                        }
                    }
                } else {
                    for same_page in group.chunk_by(|a, b| a / PAGE_BITS == b / PAGE_BITS) {
                        let page = same_page[0] / PAGE_BITS;
                        changed += tx.update_page(key, &mut meta, page, |p| {
                            same_page.iter().filter(|&&o| p.set(locate(o).bit, value) != value).count() as u64
                        })?;
                    }
                }
                let byte_len = group.last().map_or(0, |o| o / 8 + 1);
                meta.len = meta.len.max(byte_len);
                tx.set(key, &meta)?;
                Ok(changed)
            })?;
        }
        Ok(changed_total)
    }
}
