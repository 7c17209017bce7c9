//! Whole string values through readers and writers, a page at a time: a
//! SET whose bytes come from a [`Read`] and a GET that goes to a
//! [`Write`], so a value larger than memory loads and leaves in bounded
//! memory (one page of it, plus the page cache, which bulk values pass
//! through: DESIGN.md section 5).

use std::io::{Read, Write};

use crate::db::Db;
use crate::engine::{Kind, Reading};
use crate::error::{Error, Result};
use crate::geometry::{value_pages, MAX_OFFSET, PAGE_LEN};
use crate::page::Page;

/// The most bytes a value holds: bits up to [`MAX_OFFSET`].
const MAX_VALUE_BYTES: u64 = MAX_OFFSET / 8 + 1;

impl Db {
    /// Replaces `key` with the string read from `reader` until it ends
    /// (Redis SET of those bytes; any expiry is removed) and returns its
    /// length in bytes. Holds one page (4 KiB) of the value at a time.
    ///
    /// Atomic: the key switches to the whole new value once the reader has
    /// ended. If the reader fails, the key keeps its old value and the
    /// pages built so far are reclaimed.
    ///
    /// # Errors
    /// [`Error::Io`] from the reader; [`Error::InvalidArgument`] if the
    /// reader gives more than 2^61 - 1 bytes (bits up to
    /// [`crate::MAX_OFFSET`]); [`Error::Poisoned`] after an
    /// earlier store failure.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// let day = std::fs::File::open("/dev/zero")?;
    /// use std::io::Read;
    /// assert_eq!(db.set_from_reader(b"day", day.take(1 << 20))?, 1 << 20);
    /// assert_eq!(db.strlen(b"day")?, 1 << 20);
    /// # Ok(()) }
    /// ```
    pub fn set_from_reader(&self, key: &[u8], mut reader: impl Read) -> Result<u64> {
        let mut chunk = Vec::with_capacity(PAGE_LEN);
        let mut n = next_page(&mut reader, &mut chunk)?;
        if n < PAGE_LEN {
            // One page at most: as SET, which keeps a short value in its entry.
            self.set(key, &chunk[..n])?;
            return Ok(n as u64);
        }
        let mut build = self.engine.begin_build(self.index)?;
        let (mut page, mut len) = (0u64, 0u64);
        while n > 0 {
            len += n as u64;
            if len > MAX_VALUE_BYTES {
                return Err(Error::InvalidArgument(format!(
                    "the value read for key {:?} passes {MAX_VALUE_BYTES} bytes",
                    String::from_utf8_lossy(key)
                )));
            }
            build.put(page, Page::from_bytes(&chunk[..n]))?;
            if n < PAGE_LEN {
                break;
            }
            page += 1;
            n = next_page(&mut reader, &mut chunk)?;
        }
        let meta = build.meta(Kind::String, len, 0);
        build.publish(key, Some(&meta))?;
        Ok(len)
    }

    /// Writes the bytes of string `key` (Redis GET) to `writer` and returns
    /// their length, or `None` if `key` is missing (nothing is written).
    /// Holds one page of the value at a time, so no
    /// [`crate::Config::max_value_bytes`] applies; absent pages are written
    /// as zero bytes. The length is the value's when the call began; as
    /// with [`Db::get`], each page is read whole when reached, so a write
    /// to the key meanwhile may show in the pages not yet written.
    ///
    /// # Errors
    /// [`Error::Io`] from the writer; [`Error::WrongType`];
    /// [`Error::Corrupted`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.setbit(b"k", 7, true)?;
    /// let mut out = Vec::new();
    /// assert_eq!(db.write_value(b"k", &mut out)?, Some(1));
    /// assert_eq!(out, [1]);
    /// # Ok(()) }
    /// ```
    pub fn write_value(&self, key: &[u8], mut writer: impl Write) -> Result<Option<u64>> {
        let pages = |m: &crate::engine::Meta| if m.is_inline() { None } else { value_pages(m.len) };
        let (meta, stream) = self.string_and_stream(key, pages, Reading::ToTheEnd)?;
        let Some(meta) = meta else { return Ok(None) };
        if meta.is_inline() {
            writer.write_all(meta.inline_value())?;
            return Ok(Some(meta.len));
        }
        let mut bytes = vec![0u8; PAGE_LEN];
        // Bytes written so far: the next page starts at or after it.
        let mut at = 0u64;
        if let Some(mut stream) = stream {
            while let Some((page, p)) = stream.next_page()? {
                let start =
                    page.checked_mul(PAGE_LEN as u64).filter(|&s| s >= at && s < meta.len).ok_or_else(|| {
                        Error::Internal(format!("page {page} lies outside the {} bytes of the value", meta.len))
                    })?;
                write_zeros(&mut writer, &mut at, start)?;
                let n = at_most_a_page(meta.len - start);
                p.write_bytes(&mut bytes[..n]);
                writer.write_all(&bytes[..n])?;
                at = start + n as u64;
            }
        }
        write_zeros(&mut writer, &mut at, meta.len)?;
        writer.flush()?;
        Ok(Some(meta.len))
    }
}

/// `bytes`, or a page's length if that is less.
fn at_most_a_page(bytes: u64) -> usize {
    usize::try_from(bytes).map_or(PAGE_LEN, |b| b.min(PAGE_LEN))
}

/// Writes zero bytes to `writer` from byte `at` up to `to` (an absent
/// page's bytes); `at` ends at `to`.
fn write_zeros(writer: &mut impl Write, at: &mut u64, to: u64) -> Result<()> {
    const ZEROS: [u8; PAGE_LEN] = [0; PAGE_LEN];
    while *at < to {
        let n = at_most_a_page(to - *at);
        writer.write_all(&ZEROS[..n])?;
        *at += n as u64;
    }
    Ok(())
}

/// Reads the next page of bytes from `reader` into `chunk` (all of a
/// page, or what is left before the reader ends); returns how many.
fn next_page(reader: &mut impl Read, chunk: &mut Vec<u8>) -> Result<usize> {
    chunk.clear();
    Ok(reader.by_ref().take(PAGE_LEN as u64).read_to_end(chunk)?)
}

#[cfg(test)]
mod tests {
    use std::io::{Error as IoError, ErrorKind, Read};

    use crate::geometry::PAGE_LEN;
    use crate::{Config, Db, Error};

    /// A reader of `bytes` that gives at most `step` bytes a call and is
    /// interrupted before every other call; fails with `fail_at` once that
    /// many bytes are read, if given.
    struct Jerky<'a> {
        bytes: &'a [u8],
        at: usize,
        step: usize,
        calls: usize,
        fail_at: Option<usize>,
    }

    impl Read for Jerky<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls % 2 == 0 {
                return Err(IoError::from(ErrorKind::Interrupted));
            }
            if self.fail_at.is_some_and(|f| self.at >= f) {
                return Err(IoError::other("the source went away"));
            }
            let n = self.step.min(buf.len()).min(self.bytes.len() - self.at);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn jerky(bytes: &[u8], fail_at: Option<usize>) -> Jerky<'_> {
        Jerky { bytes, at: 0, step: 1000, calls: 0, fail_at }
    }

    /// Bytes of a multiplicative hash, with page 2 (and only it) all zero
    /// where the value reaches it.
    fn value(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| {
                let zero = (2 * PAGE_LEN..3 * PAGE_LEN).contains(&i);
                if zero {
                    0
                } else {
                    i.wrapping_mul(0x9E37_79B9).rotate_right(11).to_le_bytes()[0]
                }
            })
            .collect()
    }

    fn streamed(db: &Db, key: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let len = db.write_value(key, &mut out).unwrap();
        assert_eq!(len, len.map(|_| out.len() as u64), "the length returned is the bytes written");
        len.map(|_| out)
    }

    /// Invariant: a value SET from a reader (in uneven, interrupted reads)
    /// reads back as the same bytes through GET and through `write_value`,
    /// with the length and count SET gives, for every length around the
    /// inline limit and the page boundaries, an all-zero page in the middle
    /// and a last page that is all zero included.
    #[test]
    fn values_stream_in_and_out_as_set_and_get_give_them() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let lens =
            [0, 1, 64, 65, PAGE_LEN - 1, PAGE_LEN, PAGE_LEN + 1, 2 * PAGE_LEN + 5, 3 * PAGE_LEN, 5 * PAGE_LEN + 7];
        for len in lens {
            let v = value(len);
            assert_eq!(db.set_from_reader(b"k", jerky(&v, None)).unwrap(), len as u64, "{len}");
            assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&v[..]), "{len}");
            assert_eq!(streamed(&db, b"k").as_deref(), Some(&v[..]), "{len}");
            db.set(b"same", &v).unwrap();
            assert_eq!(db.bitcount(b"k", None).unwrap(), db.bitcount(b"same", None).unwrap(), "{len}");
            assert_eq!(db.strlen(b"k").unwrap(), len as u64);
        }
        // A value whose pages are absent past its first: zeros to its end.
        db.delete(b"k").unwrap();
        db.setbit(b"k", 0, true).unwrap();
        db.setbit(b"k", 8 * (4 * PAGE_LEN as u64) + 3, false).unwrap();
        assert_eq!(streamed(&db, b"k"), db.get(b"k").unwrap());
        assert_eq!(streamed(&db, b"missing"), None);
    }

    /// Invariant: a reader that fails part way leaves the key as it was
    /// (its old value, its expiry) and no pages behind it: `verify` finds
    /// nothing unowned once the build is reclaimed.
    #[test]
    fn a_failing_reader_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let old = value(3 * PAGE_LEN);
        db.set(b"k", &old).unwrap();
        let at = db.now_ms() + 3_600_000;
        db.expire_at(b"k", at, crate::ExpireCondition::Always).unwrap();
        let new = value(10 * PAGE_LEN);
        let err = db.set_from_reader(b"k", jerky(&new, Some(6 * PAGE_LEN))).unwrap_err();
        assert!(matches!(err, Error::Io(_)), "{err:?}");
        assert_eq!(db.get(b"k").unwrap(), Some(old));
        assert_eq!(db.expiry(b"k").unwrap(), crate::Expiry::At(at), "the expiry stays");
        db.flush().unwrap();
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
    }

    /// Invariant: `write_value` refuses a key of another type, writing
    /// nothing, and ignores the limit on values built in memory.
    #[test]
    fn write_value_checks_the_type_but_not_the_size_limit() {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).max_value_bytes(PAGE_LEN as u64).open().unwrap();
        db.bloom(b"bf").add(b"x").unwrap();
        let mut out = Vec::new();
        assert!(matches!(db.write_value(b"bf", &mut out), Err(Error::WrongType)));
        assert!(out.is_empty());
        let v = value(4 * PAGE_LEN);
        db.set_from_reader(b"big", &v[..]).unwrap();
        assert!(matches!(db.get(b"big"), Err(Error::TooLarge { .. })));
        assert_eq!(streamed(&db, b"big"), Some(v));
    }
}
