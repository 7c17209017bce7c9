//! Whole keys: RENAME, COPY, FLUSHALL, DBSIZE, TYPE.

use std::sync::Arc;

use crate::db::{Db, Inner};
use crate::error::{Error, Result};
use crate::meta::{Kind, Meta};
use crate::ops::stream::PageStream;

/// The metadata of `name`, of any type, and a stream over all its pages,
/// both taken under the key's lock so the stream pins a live bitmap (for
/// COPY and compaction, which move whole values whatever their type).
pub(crate) fn meta_and_all_pages(inner: &Arc<Inner>, name: &[u8]) -> Result<(Option<Meta>, Option<PageStream>)> {
    let mut g = inner.metas.lock(name);
    let Some(meta) = inner.meta_locked(&mut g, name)? else { return Ok((None, None)) };
    let stream = PageStream::new(inner, name, meta.id, 0, u64::MAX)?;
    Ok((Some(meta), Some(stream)))
}

impl Db {
    /// The Redis type name of `key` (Redis TYPE): `"string"`, `"MBbloom--"`
    /// for a Bloom filter (RedisBloom's type name), or `"none"` if it does
    /// not exist.
    ///
    /// # Errors
    /// [`Error::Corrupted`] metadata.
    pub fn key_type(&self, key: &[u8]) -> Result<&'static str> {
        Ok(match self.inner.meta(key)? {
            None => "none",
            Some(m) => match m.kind {
                Kind::String => "string",
                Kind::Bloom => "MBbloom--",
            },
        })
    }

    /// The number of keys (Redis DBSIZE).
    ///
    /// Cost: a scan of every key's metadata.
    ///
    /// # Errors
    /// [`Error::Storage`] if the scan fails.
    pub fn dbsize(&self) -> Result<u64> {
        Ok(self.keys(b"*")?.len() as u64)
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
        let inner = &*self.inner;
        // The two keys' locks are taken one after the other, never together
        // (two keys may share a lock shard). The whole rename runs under one
        // hold of the write gate, so a write-back (and so a crash) sees it
        // entirely or not at all; a concurrent reader may briefly see
        // neither key.
        inner.write(&[from, to], || loop {
            let meta = {
                let mut g = inner.metas.lock(from);
                inner.meta_locked(&mut g, from)?.ok_or_else(|| Error::InvalidArgument("no such key".into()))?
            };
            if from == to {
                return Ok(true);
            }
            if nx {
                let mut g = inner.metas.lock(to);
                if inner.meta_locked(&mut g, to)?.is_some() {
                    return Ok(false);
                }
            }
            {
                let mut g = inner.metas.lock(from);
                if inner.meta_locked(&mut g, from)? != Some(meta) {
                    // Changed since it was read: start again.
                    continue;
                }
                // Not `replace_locked`: the bitmap moves, it is not reclaimed.
                g.set(from, None);
            }
            let mut g = inner.metas.lock(to);
            // The destination's old bitmap (if any) is reclaimed.
            inner.replace_locked(&mut g, to, Some(meta))?;
            return Ok(true);
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
        let inner = &self.inner;
        let (meta, stream) = meta_and_all_pages(inner, from)?;
        let Some(meta) = meta else { return Ok(false) };
        if from == to || (!replace && self.exists(to)?) {
            return Ok(false);
        }
        let build = inner.begin_build()?;
        if let Some(mut stream) = stream {
            while let Some((page, p)) = stream.next_page()? {
                build.put(page, (*p).clone())?;
            }
        }
        let mut copy = meta;
        copy.id = build.id;
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
