//! Storage statistics of one key, read from the store.

use std::sync::Arc;

use super::bucket::{entry_bytes, record_bytes};
use super::layout;
use super::record::Meta;
use super::Engine;
use crate::error::{Error, Result};
use crate::page::{fits_group, peek_header, split_group, Encoding, Member, PageError, GROUP_HEADER_BYTES};

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
    /// Stored pages encoded as run lists.
    pub runs_pages: u64,
    /// Bytes of the key's records as stored (its metadata entry with its
    /// whole name, and its pages' keys and values), before the store's own
    /// overhead.
    pub stored_bytes: u64,
    /// The value is kept in the key's metadata entry (no page records):
    /// a short value's bytes, or a string's one small page.
    pub inline: bool,
    /// Store records holding the pages: page records of their own and the
    /// group records of small pages.
    pub records: u64,
}

impl KeyStats {
    /// Stored pages of any encoding.
    #[must_use]
    pub fn pages(&self) -> u64 {
        self.dense_pages + self.sparse_pages + self.ewah_pages + self.runs_pages
    }
}

impl Engine {
    /// A write-back that also folds the logged pages, so that their page
    /// and group records are current (the counts below read them).
    fn write_back_folding_pages(&self, f: &parking_lot::MutexGuard<'_, ()>) -> Result<()> {
        self.page_log.lock().fold_asked = true;
        self.write_back_locked(f, super::metas::Fold::Auto)
    }

    /// How `key` is stored; see [`crate::Db::key_stats`].
    pub(crate) fn key_stats(self: &Arc<Self>, db: u32, key: &[u8]) -> Result<Option<KeyStats>> {
        // Holding the write-back lock keeps the store still: no write-back
        // and no reclamation runs until the scan is done.
        let f = self.flush_lock.lock();
        self.write_back_folding_pages(&f)?;
        // Any type: a Bloom filter's pages are counted like a string's.
        let Some(meta) = self.read(db, &[key], |tx| tx.meta(key))? else { return Ok(None) };
        self.stored_stats(key, &meta).map(Some)
    }

    /// The sum of [`Engine::key_stats`] over every live key of database
    /// `db`, and their number: one write-back, then one pass over the
    /// database's buckets in hash order; see [`crate::Db::all_key_stats`].
    pub(crate) fn all_key_stats(self: &Arc<Self>, db: u32) -> Result<(u64, KeyStats)> {
        let f = self.flush_lock.lock();
        self.write_back_folding_pages(&f)?;
        let (mut n, mut total) = (0u64, KeyStats::default());
        let mut cursor = 0;
        loop {
            let (entries, next) = self.scan_entries(db, cursor, 1024)?;
            for (name, meta) in &entries {
                let st = self.stored_stats(name, meta)?;
                n += 1;
                total.len += st.len;
                total.ones += st.ones;
                total.dense_pages += st.dense_pages;
                total.sparse_pages += st.sparse_pages;
                total.ewah_pages += st.ewah_pages;
                total.runs_pages += st.runs_pages;
                total.stored_bytes += st.stored_bytes;
                total.records += st.records;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        Ok((n, total))
    }

    /// How the value of `key`, whose metadata is `meta`, is stored (the
    /// caller keeps the store still).
    fn stored_stats(&self, key: &[u8], meta: &Meta) -> Result<KeyStats> {
        let mut st = KeyStats { len: meta.len, ones: meta.ones, ..KeyStats::default() };
        // The key's share of its bucket record: its entry, with its whole
        // name (a bucket shares a name prefix among its entries, which
        // only saves).
        st.stored_bytes += entry_bytes(key.len(), meta) as u64;
        let Some(id) = meta.id() else {
            st.inline = true;
            return Ok(st);
        };
        let bad = |page: Option<u64>, e: PageError| Error::Corrupted {
            key: String::from_utf8_lossy(key).into_owned(),
            page,
            reason: e.to_string(),
        };
        let mut count = |enc: Encoding| match enc {
            Encoding::Dense => st.dense_pages += 1,
            Encoding::Sparse => st.sparse_pages += 1,
            Encoding::Ewah => st.ewah_pages += 1,
            Encoding::Runs => st.runs_pages += 1,
        };
        let (mut bytes, mut records) = (0, 0);
        let (from, to) = layout::page_range(id, 0, u64::MAX);
        for r in self.store.scan(&from, &to) {
            let (k, v) = r?;
            let page = layout::parse_page_key(&k).map(|(_, p)| p);
            let (enc, _) = peek_header(&v).map_err(|e| bad(page, e))?;
            count(enc);
            bytes += (k.len() + v.len()) as u64;
            records += 1;
        }
        let (from, to) = layout::group_range(id, 0, u64::MAX);
        for r in self.store.scan(&from, &to) {
            let (k, v) = r?;
            let page = layout::parse_group_key(&k).map(|(_, g)| layout::group_page(g, 0));
            for m in split_group(&v).map_err(|e| bad(page, e))? {
                count(m.encoding());
            }
            bytes += (k.len() + v.len()) as u64;
            records += 1;
        }
        st.stored_bytes += bytes;
        st.records = records;
        Ok(st)
    }
}

impl Engine {
    /// Bytes `key` takes in the store, estimated without a write-back (its
    /// metadata entry, and the key and encoded size of each page, from the
    /// cache where it can); `None` if missing. Reads every page of a paged
    /// value.
    pub(crate) fn memory_usage(self: &Arc<Self>, db: u32, key: &[u8]) -> Result<Option<u64>> {
        let found = self.read_untouched(db, &[key], |tx| {
            let Some(meta) = tx.meta(key)? else { return Ok(None) };
            let stream = match meta.id() {
                Some(_) => Some(tx.stream(key, &meta, (0, u64::MAX), super::Reading::ToTheEnd)?),
                None => None,
            };
            Ok(Some((meta, stream)))
        })?;
        let Some((meta, stream)) = found else { return Ok(None) };
        let mut bytes = record_bytes(key.len(), &meta) as u64;
        if let Some(mut stream) = stream {
            // The groups that hold a member so far: each adds its key and
            // its record's header and checksum once.
            let mut group = None;
            while let Some((page, p)) = stream.next_page()? {
                let record = p.encode();
                if !fits_group(&record) {
                    bytes += (layout::PAGE_KEY_LEN + record.len()) as u64;
                    continue;
                }
                let (g, slot) = layout::group_of(page);
                if group != Some(g) {
                    group = Some(g);
                    bytes += (layout::PAGE_KEY_LEN + GROUP_HEADER_BYTES) as u64;
                }
                let member = Member::of_record(slot, &record).map_err(|e| Error::Corrupted {
                    key: String::from_utf8_lossy(key).into_owned(),
                    page: Some(page),
                    reason: e.to_string(),
                })?;
                bytes += member.map_or(0, |m| m.encoded_len()) as u64;
            }
        }
        Ok(Some(bytes))
    }
}

/// Memory the engine's caches hold now; see [`crate::Db::memory_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Cached pages, clean and dirty, and the flat position lists of
    /// sparse bitmaps the set operations keep beside them.
    pub page_cache_bytes: u64,
    /// Of those, pages waiting for a write-back.
    pub dirty_page_bytes: u64,
    /// Cached metadata buckets, clean and dirty.
    pub metadata_cache_bytes: u64,
    /// Of those, buckets waiting for a write-back.
    pub dirty_metadata_bytes: u64,
    /// The configured budget: cache, dirty and store cache bytes together.
    pub budget_bytes: u64,
    /// Of those, the cache budget now ([`crate::Config::cache_bytes`],
    /// [`crate::Db::set_budgets`]).
    pub cache_budget_bytes: u64,
    /// And the dirty budget now.
    pub dirty_budget_bytes: u64,
}

impl Engine {
    /// See [`crate::Db::memory_stats`].
    pub(crate) fn memory_stats(&self) -> MemoryStats {
        let c = &self.config;
        let (cache_budget_bytes, dirty_budget_bytes) = self.settings.budgets();
        MemoryStats {
            page_cache_bytes: (self.pages.bytes() + self.pages.flat.bytes()) as u64,
            dirty_page_bytes: self.pages.dirty_bytes() as u64,
            metadata_cache_bytes: self.metas.bytes() as u64,
            dirty_metadata_bytes: self.metas.pinned_bytes() as u64,
            budget_bytes: self.settings.budget_bytes(c.store_cache_bytes),
            cache_budget_bytes,
            dirty_budget_bytes,
        }
    }
}
