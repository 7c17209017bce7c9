//! Whole keys: RENAME, COPY, FLUSHALL, TYPE.

use crate::db::Db;
use crate::engine::{Kind, Meta, PageStream};
use crate::error::{Error, Result};

impl Db {
    /// The metadata of `name`, of any type, and a stream over all its
    /// pages, taken in one read transaction (for COPY and compaction, which
    /// move whole values whatever their type).
    pub(crate) fn meta_and_all_pages(&self, name: &[u8]) -> Result<Option<(Meta, PageStream)>> {
        self.engine.read(&[name], |tx| {
            let Some(meta) = tx.meta(name)? else { return Ok(None) };
            let stream = tx.stream(name, &meta, 0, u64::MAX)?;
            Ok(Some((meta, stream)))
        })
    }

    /// The Redis type name of `key` (Redis TYPE): `"string"`, `"MBbloom--"`
    /// for a Bloom filter (RedisBloom's type name), or `"none"` if it does
    /// not exist.
    ///
    /// # Errors
    /// [`Error::Corrupted`] metadata.
    pub fn key_type(&self, key: &[u8]) -> Result<&'static str> {
        Ok(match self.engine.read(&[key], |tx| tx.meta(key))? {
            None => "none",
            Some(m) => match m.kind {
                Kind::String => "string",
                Kind::Bloom => "MBbloom--",
            },
        })
    }

    /// Renames `from` to `to` (Redis RENAME), replacing `to` if it exists
    /// (or, with `nx`, leaving everything unchanged when `to` exists, as
    /// RENAMENX). The value keeps its expiry. Returns whether the rename
    /// happened. Renaming a key to itself succeeds without a change.
    ///
    /// Cost: O(1): one metadata record moves; the pages are keyed by the
    /// bitmap's id and stay where they are.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with Redis's text `no such key` if `from`
    /// does not exist; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.setbit(b"a", 9, true)?;
    /// assert!(db.rename(b"a", b"b", false)?);
    /// assert!(!db.exists(b"a")? && db.getbit(b"b", 9)?);
    /// # Ok(()) }
    /// ```
    pub fn rename(&self, from: &[u8], to: &[u8], nx: bool) -> Result<bool> {
        // One transaction holds both keys' locks, so the rename is atomic
        // for readers and for a crash alike.
        self.engine.write(&[from, to], |tx| {
            let meta = tx.meta(from)?.ok_or_else(|| Error::InvalidArgument("no such key".into()))?;
            if from == to {
                return Ok(true);
            }
            if nx && tx.meta(to)?.is_some() {
                return Ok(false);
            }
            tx.move_value(from, to, meta)?;
            Ok(true)
        })
    }

    /// Copies `from` to `to` (Redis COPY): `to` gets the same value (of any
    /// type) and expiry. Without `replace`, an existing `to` is left alone and the
    /// result is `false`. Returns `false` too if `from` does not exist.
    ///
    /// Cost: one page copy per stored page (pages are shared copy-on-write
    /// in memory; the copy is written back as new records); `to` switches
    /// to the copy atomically.
    ///
    /// # Errors
    /// [`Error::Corrupted`] if a page does not decode; [`Error::Poisoned`].
    pub fn copy(&self, from: &[u8], to: &[u8], replace: bool) -> Result<bool> {
        let Some((meta, mut stream)) = self.meta_and_all_pages(from)? else { return Ok(false) };
        if from == to || (!replace && self.exists(to)?) {
            return Ok(false);
        }
        let build = self.engine.begin_build()?;
        while let Some((page, p)) = stream.next_page()? {
            build.put(page, (*p).clone())?;
        }
        let copy = build.adopt(meta);
        // Without `replace`, `to` is checked again where the copy is
        // published: a key created while the pages were copied stays.
        build.publish_if(to, |old| (replace || old.is_none()).then_some(Some(copy)))
    }

    /// Deletes every key (Redis FLUSHALL / FLUSHDB); returns how many there
    /// were.
    ///
    /// Cost: one metadata change per key; the pages are reclaimed after the
    /// next write-back. Not atomic as a whole: keys written while it runs
    /// may survive.
    ///
    /// # Errors
    /// [`Error::Storage`], [`Error::Poisoned`].
    pub fn flush_all(&self) -> Result<u64> {
        let mut n = 0;
        for k in self.keys(b"*")? {
            n += u64::from(self.delete(&k)?);
        }
        Ok(n)
    }
}
