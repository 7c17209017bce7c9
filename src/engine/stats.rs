//! Storage statistics of one key, read from the store.

use std::sync::Arc;

use super::bucket::Entry;
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
    /// Bytes of the key's records as stored (its metadata entry, at most,
    /// and its pages' keys and values), before the store's own overhead.
    pub stored_bytes: u64,
    /// The value is kept inline in the key's metadata entry (no pages).
    pub inline: bool,
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
    pub(crate) fn key_stats(self: &Arc<Self>, db: u32, key: &[u8]) -> Result<Option<KeyStats>> {
        // Holding the write-back lock keeps the store still: no write-back
        // and no reclamation runs until the scan is done.
        let f = self.flush_lock.lock();
        self.write_back_locked(&f)?;
        // Any type: a Bloom filter's pages are counted like a string's.
        let Some(meta) = self.read(db, &[key], |tx| tx.meta(key))? else { return Ok(None) };
        let mut st = KeyStats { len: meta.len, ones: meta.ones, ..KeyStats::default() };
        // The key's share of its bucket record: its entry.
        st.stored_bytes += Entry { name: key.into(), meta }.record_bytes() as u64;
        let Some(id) = meta.id() else {
            st.inline = true;
            return Ok(Some(st));
        };
        let (from, to) = layout::page_range(id, 0, u64::MAX);
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
