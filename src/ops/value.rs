//! Whole values and keys: GET, SET, STRLEN, DEL, EXISTS.

use crate::db::Db;
use crate::engine::{Meta, Reading};
use crate::error::Result;
use crate::geometry::value_pages;

impl Db {
    /// The bytes of string `key` (Redis GET), or `None` if it is missing.
    ///
    /// Bytes are Redis's: bit offset 0 is the most significant bit of the
    /// first byte, and absent pages read as zero bytes.
    ///
    /// Cost: builds the whole value in memory; reads only stored pages.
    ///
    /// # Errors
    /// [`crate::Error::TooLarge`] if the value is longer than
    /// [`crate::Config::max_value_bytes`]; [`crate::Error::WrongType`];
    /// [`crate::Error::Corrupted`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let max = self.engine.config().max_value_bytes;
        // A value kept in its entry is copied from there, without a page.
        let pages = |m: &Meta| (!m.is_inline() && m.len <= max).then(|| value_pages(m.len)).flatten();
        let (meta, stream) = self.string_and_stream(key, pages, Reading::ToTheEnd)?;
        let Some(meta) = meta else { return Ok(None) };
        if meta.is_inline() && meta.len <= max {
            return Ok(Some(meta.inline_value().to_vec()));
        }
        Ok(Some(self.collect(key, &meta, stream)?))
    }

    /// Replaces `key` with the string `value` (Redis SET without options).
    /// The key's expiry, if any, is removed.
    ///
    /// Cost: builds one page per 4 KiB of `value` (all-zero pages are not
    /// stored); the key switches to the new value atomically.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`] after an earlier store failure.
    pub fn set(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.set_with_expiry(key, value, crate::SetExpiry::Clear)
    }

    /// The length in bytes of string `key` (Redis STRLEN); 0 if missing.
    ///
    /// # Errors
    /// [`crate::Error::WrongType`].
    pub fn strlen(&self, key: &[u8]) -> Result<u64> {
        Ok(self.engine.read(self.index, &[key], |tx| tx.string(key))?.map_or(0, |m| m.len))
    }

    /// Deletes `key`; returns whether it existed.
    ///
    /// Cost: O(1); the pages are deleted in the background after the next
    /// write-back.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`], [`crate::Error::Corrupted`] metadata.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.engine.write(self.index, &[key], |tx| tx.delete(key))
    }

    /// Whether `key` exists.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] metadata.
    pub fn exists(&self, key: &[u8]) -> Result<bool> {
        Ok(self.engine.read_untouched(self.index, &[key], |tx| tx.meta(key))?.is_some())
    }

    /// Whether `key`'s value was last changed in place (SETBIT, SETRANGE,
    /// APPEND, BITFIELD, a bit-level write) rather than written whole;
    /// `None` if it does not exist. Redis reports such a short string's
    /// encoding as `raw` (OBJECT ENCODING). Like Redis after a reload, a
    /// reopened database (or a key whose metadata left the cache) says
    /// `false`.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] metadata; a store error.
    pub fn changed_in_place(&self, key: &[u8]) -> Result<Option<bool>> {
        Ok(self.engine.read_untouched(self.index, &[key], |tx| tx.meta(key))?.map(|m| m.changed_in_place))
    }

    /// Whether `key` exists, counting it as used if it does (Redis TOUCH;
    /// see [`Db::idle_time`]).
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] metadata; a store error.
    pub fn touch(&self, key: &[u8]) -> Result<bool> {
        Ok(self.engine.read(self.index, &[key], |tx| tx.meta(key))?.is_some())
    }

    /// Seconds since `key` was last used (Redis OBJECT IDLETIME), `None`
    /// if it does not exist. Every read or write of a key uses it, but
    /// [`Db::exists`], [`Db::key_type`], [`Db::expiry`],
    /// [`Db::memory_usage`] and this call. The times live beside the cached
    /// metadata and are never written: a key whose metadata was loaded
    /// into the cache (at open, or after an eviction) and not used since
    /// counts from the load.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] metadata; a store error.
    pub fn idle_time(&self, key: &[u8]) -> Result<Option<u64>> {
        self.engine.read_untouched(self.index, &[key], |tx| tx.idle_secs(key))
    }
}
