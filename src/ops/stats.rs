//! Storage statistics of one key.

use crate::db::Db;
use crate::error::{Error, Result};
use crate::key;
use crate::page::{peek_header, Encoding};

/// How one key is stored; see [`Db::key_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyStats {
    /// Logical length in bytes (Redis STRLEN).
    pub len: u64,
    /// Set bits.
    pub ones: u64,
    /// Stored pages encoded dense.
    pub dense_pages: u64,
    /// Stored pages encoded as sorted positions.
    pub sparse_pages: u64,
    /// Stored pages encoded as EWAH runs.
    pub ewah_pages: u64,
    /// Bytes of the key's records as stored (keys and values of its metadata
    /// and pages), before the store's own overhead.
    pub stored_bytes: u64,
}

impl KeyStats {
    /// Stored pages of any encoding.
    #[must_use]
    pub fn pages(&self) -> u64 {
        self.dense_pages + self.sparse_pages + self.ewah_pages
    }
}

impl Db {
    /// How `key` is stored, or `None` if it does not exist. Writes pending
    /// changes back first, so the figures are those of the store.
    ///
    /// Cost: reads the header of every page of the key.
    ///
    /// # Errors
    /// [`Error::Corrupted`] if a page header does not validate.
    pub fn key_stats(&self, key: &[u8]) -> Result<Option<KeyStats>> {
        let inner = &self.inner;
        // Holding the write-back lock keeps the store still: no write-back
        // and no reclamation runs until the scan is done.
        let f = inner.flush_lock.lock();
        inner.write_back_locked(&f)?;
        // Any type: a Bloom filter's pages are counted like a string's.
        let Some(meta) = inner.meta(key)? else { return Ok(None) };
        let mut st = KeyStats { len: meta.len, ones: meta.ones, ..KeyStats::default() };
        if let Some(v) = inner.store.get(&key::meta_key(key))? {
            st.stored_bytes += (key::meta_key(key).len() + v.len()) as u64;
        }
        let (from, to) = key::page_range(meta.id, 0, u64::MAX);
        for r in inner.store.scan(&from, &to) {
            let (k, v) = r?;
            let page = key::parse_page_key(&k).map(|(_, p)| p);
            let (enc, _) = peek_header(&v).map_err(|e| Error::Corrupted {
                key: String::from_utf8_lossy(key).into_owned(),
                page,
                reason: e.to_string(),
            })?;
            match enc {
                Encoding::Dense => st.dense_pages += 1,
                Encoding::Sparse => st.sparse_pages += 1,
                Encoding::Ewah => st.ewah_pages += 1,
            }
            st.stored_bytes += (k.len() + v.len()) as u64;
        }
        Ok(Some(st))
    }
}
