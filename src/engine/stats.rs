//! Storage statistics of one key, read from the store.

use std::sync::Arc;

use super::layout;
use super::Engine;
use crate::error::{Error, Result};
use crate::page::{peek_header, Encoding};

/// How one key is stored; see [`crate::Db::key_stats`].
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

impl Engine {
    /// How `key` is stored; see [`crate::Db::key_stats`].
    pub(crate) fn key_stats(self: &Arc<Self>, key: &[u8]) -> Result<Option<KeyStats>> {
        // Holding the write-back lock keeps the store still: no write-back
        // and no reclamation runs until the scan is done.
        let f = self.flush_lock.lock();
        self.write_back_locked(&f)?;
        // Any type: a Bloom filter's pages are counted like a string's.
        let Some(meta) = self.read(&[key], |tx| tx.meta(key))? else { return Ok(None) };
        let mut st = KeyStats { len: meta.len, ones: meta.ones, ..KeyStats::default() };
        let meta_key = layout::meta_key(key);
        if let Some(v) = self.store.get(&meta_key)? {
            st.stored_bytes += (meta_key.len() + v.len()) as u64;
        }
        let (from, to) = layout::page_range(meta.id, 0, u64::MAX);
        for r in self.store.scan(&from, &to) {
            let (k, v) = r?;
            let page = layout::parse_page_key(&k).map(|(_, p)| p);
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
