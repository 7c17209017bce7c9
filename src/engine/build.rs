//! Values built whole before anyone can see them (BITOP results, SET, COPY,
//! a compaction's copies): pages go under a fresh bitmap id that no key
//! names, and one write transaction switches the key to it.

use std::sync::Arc;

use super::layout;
use super::record::{Body, InlineBytes, Kind, Meta};
use super::tx::WriteTx;
use super::Engine;
use crate::error::{Error, Result};
use crate::page::Page;

/// A value under construction; see [`Engine::begin_build`].
pub(crate) struct Build<'e> {
    engine: &'e Arc<Engine>,
    /// The database it is published in.
    db: u32,
    id: u64,
    /// The set bits of the pages put so far: the new value's count.
    ones: u64,
    /// The non-empty pages put, and the number of the first.
    pages: u64,
    first_page: u64,
    /// The bytes of the pages put so far.
    bytes: u64,
    /// Those bytes made the value bulk: its pages pass through the cache.
    passing: bool,
    published: bool,
}

impl Engine {
    /// Starts building a new value, to be published in database `db`, that
    /// is invisible until published. If the operation fails or the process
    /// dies first, its pages are reclaimed.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`]; a store error allocating the id.
    pub(crate) fn begin_build(self: &Arc<Self>, db: u32) -> Result<Build<'_>> {
        self.check_writable()?;
        let id = self.new_id()?;
        self.building.lock().insert(id);
        self.journal.set(layout::reclaim_key(id), Some(Vec::new()));
        Ok(Build { engine: self, db, id, ones: 0, pages: 0, first_page: 0, bytes: 0, passing: false, published: false })
    }
}

impl Build<'_> {
    /// Stores page `page` of the new value (an empty page is skipped) and
    /// adds its set bits to the value's count. Each page is put at most
    /// once (a page put again would be counted twice). Once the pages put
    /// make the value bulk ([`super::pages::PageCache::is_bulk`]), they
    /// pass through the cache: each leaves it once written back, so a
    /// value larger than the cache does not evict every other page.
    ///
    /// # Errors
    /// As a write-back forced by the dirty budget; [`Error::Internal`] if
    /// the count overflows, which a value of at most
    /// [`crate::MAX_OFFSET`] + 1 bits never does.
    pub(crate) fn put(&mut self, page: u64, p: Page) -> Result<()> {
        if !p.is_empty() {
            self.ones = self
                .ones
                .checked_add(u64::from(p.count_ones()))
                .ok_or_else(|| Error::Internal("a built value's set bit count overflows".into()))?;
            if self.pages == 0 {
                self.first_page = page;
            }
            self.pages += 1;
            self.bytes = self.bytes.saturating_add(p.heap_bytes() as u64);
            let turned = !self.passing && self.engine.pages.is_bulk(self.bytes);
            self.passing |= turned;
            self.engine.pages.put((self.id, page), Some(p), self.passing);
            if turned {
                self.engine.pages.pass_bitmap(self.id);
            }
            self.engine.after_change()?;
        }
        Ok(())
    }

    /// The metadata of the new value: `len` bytes, with the set bits of the
    /// pages put so far.
    pub(crate) fn meta(&self, kind: Kind, len: u64, expire_at_ms: u64) -> Meta {
        Meta::paged(kind, self.id, len, self.ones, expire_at_ms)
    }

    /// `meta` (another value's metadata) describing the new value instead,
    /// for a copy whose pages were all put: its count is theirs.
    pub(crate) fn adopt(&self, meta: &Meta) -> Meta {
        Meta { body: Body::Paged(self.id), ones: self.ones, inline: InlineBytes::zeroed(), ..meta.clone() }
    }

    /// Makes the new value the value of `name` (or deletes `name` when
    /// `meta` is `None`), atomically.
    ///
    /// # Errors
    /// As [`Engine::write`].
    pub(crate) fn publish(self, name: &[u8], meta: Option<&Meta>) -> Result<()> {
        self.publish_with(name, |_| meta.cloned())
    }

    /// As [`Build::publish`], with the new metadata computed from the key's
    /// current metadata (`None` if absent) under the key's lock.
    ///
    /// # Errors
    /// As [`Engine::write`].
    pub(crate) fn publish_with(self, name: &[u8], f: impl FnOnce(Option<&Meta>) -> Option<Meta>) -> Result<()> {
        self.publish_if(name, |tx, _| Ok(Some(f(tx.meta(name)?.as_ref())))).map(|_| ())
    }

    /// The one publishing step: under the key's lock and the gate, `f`
    /// (which may read the key, its old value included, through the
    /// transaction) gives the key's new metadata, or `None` to give up
    /// (then the new value is discarded). Returns whether it published.
    ///
    /// # Errors
    /// As [`Engine::write`]; whatever `f` returns.
    pub(crate) fn publish_if(
        mut self,
        name: &[u8],
        f: impl FnOnce(&mut WriteTx<'_>, &[u8]) -> Result<Option<Option<Meta>>>,
    ) -> Result<bool> {
        let engine = self.engine;
        let (id, lone) = (self.id, self.lone_page());
        let done = engine.write(self.db, &[name], |tx| {
            let Some(meta) = f(tx, name)? else { return Ok(false) };
            tx.publish(name, id, lone, meta.as_ref())?;
            Ok(true)
        })?;
        if done {
            self.published();
        }
        Ok(done)
    }

    /// The number of the value's only page, if it has exactly one.
    fn lone_page(&self) -> Option<u64> {
        (self.pages == 1).then_some(self.first_page)
    }

    /// Notes that a transaction published the value (the transaction took
    /// the id out of `building`, under the gate, after the journal marker).
    fn published(&mut self) {
        self.published = true;
    }
}

/// A value for [`Engine::publish_all`].
pub(crate) enum NewValue<'v, 'e> {
    /// A string of at most [`super::record::INLINE_MAX`] bytes, kept inline.
    Short(&'v [u8]),
    /// A value built whole, and its metadata.
    Built(Build<'e>, Box<Meta>),
}

impl Engine {
    /// Makes each value the value of its key, all in one write transaction
    /// (Redis MSET); with `only_if_absent`, none of them unless no key
    /// exists (MSETNX). A key named twice gets its last value. Returns
    /// whether it published.
    ///
    /// # Errors
    /// As [`Engine::write`].
    pub(crate) fn publish_all(
        self: &Arc<Self>,
        db: u32,
        mut items: Vec<(&[u8], NewValue<'_, '_>)>,
        only_if_absent: bool,
    ) -> Result<bool> {
        let names: Vec<&[u8]> = items.iter().map(|(n, _)| *n).collect();
        let done = self.write(db, &names, |tx| {
            if only_if_absent {
                for name in &names {
                    if tx.meta(name)?.is_some() {
                        return Ok(false);
                    }
                }
            }
            for (name, value) in &items {
                match value {
                    NewValue::Short(v) => tx.set_short(name, v, 0)?,
                    NewValue::Built(build, meta) => tx.publish(name, build.id, build.lone_page(), Some(&**meta))?,
                }
            }
            Ok(true)
        })?;
        if done {
            for (_, value) in &mut items {
                if let NewValue::Built(build, _) = value {
                    build.published();
                }
            }
        }
        Ok(done)
    }
}

impl Drop for Build<'_> {
    fn drop(&mut self) {
        // Only a build no transaction published: a transaction that
        // published the id and then failed (no rollback: a key may name the
        // id now) took it out of `building` itself.
        let mut building = self.engine.building.lock();
        if !self.published && building.contains(&self.id) {
            // Marked again first: a write-back may already have written (and
            // cleaned) the first marker and the pages put so far; the pages
            // put since need a marker of their own.
            self.engine.journal.set(layout::reclaim_key(self.id), Some(Vec::new()));
            building.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::record::{Kind, Meta};
    use crate::page::Page;
    use crate::Config;

    /// Invariant: values of more than a quarter of the page cache pass
    /// through it: once written back, neither the pages of a SET nor
    /// those of a BITOP result over them stay cached, and nor do the pages
    /// a GET or the BITOP read; every value reads back as written. A small
    /// value's pages stay cached.
    #[test]
    fn bulk_values_pass_through_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).cache_bytes(1 << 20).flush_interval(None).open().unwrap();
        // Bytes of a multiplicative hash: dense pages, no two alike.
        let value: Vec<u8> =
            (0u32..2 << 20).map(|i| i.wrapping_mul(0x9E37_79B1).rotate_right(13).to_le_bytes()[0]).collect();
        let cached = || db.memory_stats().page_cache_bytes;
        // Nothing but a few pages' worth: a value's pages are 4 KiB each.
        let few = 4 << 12;
        db.set(b"big", &value).unwrap();
        db.flush().unwrap();
        assert!(cached() < few, "after SET: {} bytes cached", cached());
        assert_eq!(db.get(b"big").unwrap().as_deref(), Some(&value[..]));
        assert!(cached() < few, "after GET: {} bytes cached", cached());
        db.bitop(crate::BitOp::Not, b"not", &[b"big"]).unwrap();
        db.flush().unwrap();
        assert!(cached() < few, "after BITOP: {} bytes cached", cached());
        let not: Vec<u8> = value.iter().map(|b| !b).collect();
        assert_eq!(db.get(b"not").unwrap().as_deref(), Some(&not[..]));
        let before = cached();
        db.set(b"small", &value[..32 << 10]).unwrap();
        db.flush().unwrap();
        assert_eq!(db.get(b"small").unwrap().as_deref(), Some(&value[..32 << 10]));
        assert!(cached() >= before + (32 << 10), "a small value stays cached");
    }

    /// Invariant: a BITOP whose sources together hold more than the page
    /// cache (each of them less than a quarter of it) reads them without
    /// caching them, from a cold cache, and gives the OR of them all.
    #[test]
    fn a_bitop_over_more_than_the_cache_reads_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let open = || Config::new(dir.path()).cache_bytes(1 << 20).flush_interval(None).open().unwrap();
        let len: usize = 240 << 10;
        let values: Vec<Vec<u8>> = (0..6u8)
            .map(|i| (0..len).map(|j| (j.to_le_bytes()[0] ^ i).wrapping_mul(37) & (1 << i)).collect())
            .collect();
        let db = open();
        for (i, v) in values.iter().enumerate() {
            db.set(format!("day:{i}").as_bytes(), v).unwrap();
        }
        drop(db);
        let db = open();
        let names: Vec<String> = (0..values.len()).map(|i| format!("day:{i}")).collect();
        let sources: Vec<&[u8]> = names.iter().map(String::as_bytes).collect();
        db.bitop(crate::BitOp::Or, b"any", &sources).unwrap();
        db.flush().unwrap();
        let cached = db.memory_stats().page_cache_bytes;
        assert!(cached < 1 << 19, "{cached} bytes cached after reading {} bytes", len * values.len());
        let or: Vec<u8> = (0..len).map(|j| values.iter().fold(0, |a, v| a | v[j])).collect();
        assert_eq!(db.get(b"any").unwrap().as_deref(), Some(&or[..]));
    }

    /// Invariant: a build published as an inline value leaves no pages
    /// behind, even when a write-back stored its first reclaim marker and
    /// a reclamation ran between the publish and the write-back of the
    /// build's last pages (the interleaving of a concurrent write-back).
    #[test]
    fn a_build_published_inline_leaves_no_pages() {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
        let engine = &db.engine;
        let mut build = engine.begin_build(0).unwrap();
        build.put(0, Page::from_positions(&[3])).unwrap();
        // Stores the build's marker and page 0.
        engine.write_back().unwrap();
        build.put(1, Page::from_positions(&[5])).unwrap();
        let meta = Meta { len: 1, ones: 1, ..Meta::empty(Kind::String) };
        build.publish(b"k", Some(&meta)).unwrap();
        // The reclamation of a write-back that captured its state before
        // the publish.
        {
            let f = engine.flush_lock.lock();
            engine.reclaim_step(&f, usize::MAX).unwrap();
        }
        engine.write_back().unwrap();
        engine.write_back().unwrap();
        assert!(db.key_stats(b"k").unwrap().unwrap().inline, "a 1-byte result is kept inline");
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{report:?}");
        assert_eq!(report.pages, 0, "no page outlives the build");
    }
}
