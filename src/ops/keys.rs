//! Whole keys: RENAME, COPY, FLUSHALL, TYPE.

use crate::db::Db;
use crate::engine::{Kind, Meta, PageStream, Reading};
use crate::error::{Error, Result};

impl Db {
    /// The metadata of `name`, of any type, and a stream over all its
    /// pages, taken in one read transaction (for COPY and compaction, which
    /// move whole values whatever their type).
    pub(crate) fn meta_and_all_pages(&self, name: &[u8]) -> Result<Option<(Meta, PageStream)>> {
        self.engine.read(self.index, &[name], |tx| {
            let Some(meta) = tx.meta(name)? else { return Ok(None) };
            let stream = tx.stream(name, &meta, (0, u64::MAX), Reading::ToTheEnd)?;
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
        Ok(match self.engine.read_untouched(self.index, &[key], |tx| tx.meta(key))? {
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
        self.engine.write(self.index, &[from, to], |tx| {
            let meta = tx.meta(from)?.ok_or_else(|| Error::InvalidArgument("no such key".into()))?;
            if from == to {
                return Ok(true);
            }
            if nx && tx.meta(to)?.is_some() {
                return Ok(false);
            }
            tx.move_value(from, to, &meta)?;
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
        self.copy_to(from, self, to, replace)
    }

    /// [`Db::copy`] into key `to` of database `dest` (Redis COPY with DB;
    /// `dest` may also be a database of another store). Copying a key onto
    /// itself copies nothing and answers `false`.
    ///
    /// # Errors
    /// As [`Db::copy`].
    pub fn copy_to(&self, from: &[u8], dest: &Db, to: &[u8], replace: bool) -> Result<bool> {
        let same_key = std::sync::Arc::ptr_eq(&self.engine, &dest.engine) && self.index == dest.index && from == to;
        let Some((meta, mut stream)) = self.meta_and_all_pages(from)? else { return Ok(false) };
        if same_key || (!replace && dest.exists(to)?) {
            return Ok(false);
        }
        let mut build = dest.engine.begin_build(dest.index)?;
        while let Some((page, p)) = stream.next_page()? {
            build.put(page, (*p).clone())?;
        }
        let copy = build.adopt(&meta);
        // Without `replace`, `to` is checked again where the copy is
        // published: a key created while the pages were copied stays.
        build.publish_if(to, |tx, to| Ok((replace || tx.meta(to)?.is_none()).then_some(Some(copy))))
    }

    /// Moves `key` to database `to` of the same store (Redis MOVE):
    /// `false`, changing nothing, if `key` does not exist here or exists
    /// there. The value, its expiry and its type move in one atomic change.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `to` is this database or does not
    /// exist; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.setbit(b"k", 5, true)?;
    /// assert!(db.move_key(b"k", 2)?);
    /// assert!(!db.exists(b"k")? && db.select(2)?.getbit(b"k", 5)?);
    /// # Ok(()) }
    /// ```
    pub fn move_key(&self, key: &[u8], to: u32) -> Result<bool> {
        if to == self.index {
            return Err(Error::InvalidArgument("source and destination objects are the same".into()));
        }
        self.select(to)?;
        self.engine.write(self.index, &[key], |tx| {
            let Some(meta) = tx.meta(key)? else { return Ok(false) };
            tx.use_db(to)?;
            if tx.meta(key)?.is_some() {
                return Ok(false);
            }
            tx.set(key, &meta)?;
            tx.use_db(self.index)?;
            tx.forget(key)?;
            Ok(true)
        })
    }
}
