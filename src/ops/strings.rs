//! Byte ranges of string values: GETRANGE, SETRANGE, APPEND.

use crate::db::Db;
use crate::engine::{Kind, Meta, Reading};
use crate::error::{Error, Result};
use crate::geometry::{PAGE_BITS, PAGE_BYTES, PAGE_LEN};
use crate::ops::range::clamp_nonreversed;
use crate::page::Page;

impl Db {
    /// The bytes `start ..= end` of string `key` (Redis GETRANGE): negative
    /// indexes count from the end, both are clamped to the string, and an
    /// empty range or a missing key gives an empty vector.
    ///
    /// Cost: reads only the stored pages of the range.
    ///
    /// # Errors
    /// [`Error::WrongType`]; [`Error::TooLarge`] if the range is longer than
    /// [`crate::Config::max_value_bytes`]; [`Error::Corrupted`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set(b"k", b"This is a string")?;
    /// assert_eq!(db.getrange(b"k", 0, 3)?, b"This");
    /// assert_eq!(db.getrange(b"k", -3, -1)?, b"ing");
    /// assert_eq!(db.getrange(b"k", 10, 100)?, b"string");
    /// # Ok(()) }
    /// ```
    pub fn getrange(&self, key: &[u8], start: i64, end: i64) -> Result<Vec<u8>> {
        let max = self.engine.config().max_value_bytes;
        let bytes = |m: &Meta| clamp_nonreversed(start, end, m.len);
        let pages = |m: &Meta| {
            let (first, last) = bytes(m)?;
            (last - first < max).then_some(((first * 8) / PAGE_BITS, (last * 8) / PAGE_BITS))
        };
        let (meta, stream) = self.string_and_stream(key, pages, Reading::ToTheEnd)?;
        let Some((first, last)) = meta.as_ref().and_then(bytes) else { return Ok(Vec::new()) };
        let len = last - first + 1;
        let too_large = || Error::TooLarge { key: String::from_utf8_lossy(key).into_owned(), len, limit: max };
        let Some(mut stream) = stream else { return Err(too_large()) };
        let mut out = vec![0u8; usize::try_from(len).map_err(|_| too_large())?];
        let mut page_buf = vec![0u8; PAGE_LEN];
        while let Some((page, p)) = stream.next_page()? {
            p.write_bytes(&mut page_buf);
            let page_start = page * PAGE_BYTES;
            // The part of this page inside first ..= last, relative to both.
            let from = first.max(page_start);
            let to = last.min(page_start + PAGE_BYTES - 1);
            if from > to {
                continue;
            }
            // All below are < PAGE_BYTES or < len, which fits in usize.
            let index = |v: u64| usize::try_from(v).map_err(|_| too_large());
            let (src, n, dst) = (index(from - page_start)?, index(to - from + 1)?, index(from - first)?);
            out[dst..dst + n].copy_from_slice(&page_buf[src..src + n]);
        }
        Ok(out)
    }

    /// Overwrites string `key` from byte `offset` with `value` (Redis
    /// SETRANGE) and returns the new length. The string grows as needed,
    /// zero-filled; a missing key is created, except that an empty `value`
    /// changes nothing. The key's expiry is kept.
    ///
    /// The library accepts any offset; the Redis command layer limits
    /// strings to 512 MiB.
    ///
    /// Cost: one read-modify-write per touched page, all applied atomically
    /// under the key's lock.
    ///
    /// # Errors
    /// [`Error::WrongType`]; [`Error::InvalidArgument`] if the end would
    /// pass `u64::MAX` bits; [`Error::Corrupted`]; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// assert_eq!(db.setrange(b"k", 2, b"ab")?, 4);
    /// assert_eq!(db.get(b"k")?, Some(b"\0\0ab".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn setrange(&self, key: &[u8], offset: u64, value: &[u8]) -> Result<u64> {
        self.write_range(key, Some(offset), value)
    }

    /// Appends `value` to string `key` (Redis APPEND), creating it (even
    /// with an empty `value`) if missing; returns the new length. The key's
    /// expiry is kept.
    ///
    /// Cost: one read-modify-write per touched page, atomically.
    ///
    /// # Errors
    /// As [`Db::setrange`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// assert_eq!(db.append(b"k", b"Hello")?, 5);
    /// assert_eq!(db.append(b"k", b" World")?, 11);
    /// assert_eq!(db.get(b"k")?, Some(b"Hello World".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn append(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        self.write_range(key, None, value)
    }

    /// Writes `value` at `offset` (`None`: at the end, creating the key even
    /// for an empty value).
    fn write_range(&self, key: &[u8], offset: Option<u64>, value: &[u8]) -> Result<u64> {
        self.engine.write(self.index, &[key], |tx| {
            let old = tx.string(key)?;
            if value.is_empty() && (old.is_some() || offset.is_some()) {
                if offset.is_none() {
                    // Redis counts an APPEND of nothing as a change (WATCH
                    // sees it); SETRANGE of nothing is none.
                    tx.touch(key);
                }
                return Ok(old.map_or(0, |m| m.len));
            }
            // APPEND to a missing key writes its value whole, as Redis does;
            // the other writes change it in place (`update_page`).
            let created_whole = old.is_none() && offset.is_none();
            let mut meta = match old {
                Some(m) => m,
                None => tx.new_value(Kind::String),
            };
            let start = offset.unwrap_or(meta.len);
            let end = start
                .checked_add(value.len() as u64)
                .filter(|e| e.checked_mul(8).is_some())
                .ok_or_else(|| Error::InvalidArgument("string would end past the largest offset".into()))?;
            let mut page_buf = vec![0u8; PAGE_LEN];
            let mut written = 0usize;
            while written < value.len() {
                let at = start + written as u64;
                let page = at / PAGE_BYTES;
                let in_page = (at % PAGE_BYTES) as usize;
                let n = (PAGE_LEN - in_page).min(value.len() - written);
                let chunk = &value[written..written + n];
                tx.update_page(key, &mut meta, page, |p| {
                    p.write_bytes(&mut page_buf);
                    page_buf[in_page..in_page + n].copy_from_slice(chunk);
                    *p = Page::from_bytes(&page_buf);
                })?;
                written += n;
            }
            meta.len = meta.len.max(end);
            if created_whole {
                meta.changed_in_place = false;
            }
            tx.set(key, &meta)?;
            Ok(meta.len)
        })
    }
}
