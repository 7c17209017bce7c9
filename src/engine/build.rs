//! Values built whole before anyone can see them (BITOP results, SET, COPY,
//! a compaction's copies): pages go under a fresh bitmap id that no key
//! names, and one write transaction switches the key to it.

use std::sync::Arc;

use super::layout;
use super::record::{Kind, Meta};
use super::Engine;
use crate::error::Result;
use crate::page::Page;

/// A value under construction; see [`Engine::begin_build`].
pub(crate) struct Build<'e> {
    engine: &'e Arc<Engine>,
    id: u64,
    published: bool,
}

impl Engine {
    /// Starts building a new value that is invisible until published. If
    /// the operation fails or the process dies first, its pages are
    /// reclaimed.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`]; a store error allocating the id.
    pub(crate) fn begin_build(self: &Arc<Self>) -> Result<Build<'_>> {
        self.check_writable()?;
        let id = self.store.next_id()?;
        self.building.lock().insert(id);
        self.journal.set(layout::reclaim_key(id), Some(Vec::new()));
        Ok(Build { engine: self, id, published: false })
    }
}

impl Build<'_> {
    /// Stores page `page` of the new value (an empty page is skipped).
    ///
    /// # Errors
    /// As a write-back forced by the dirty budget.
    pub(crate) fn put(&self, page: u64, p: Page) -> Result<()> {
        if !p.is_empty() {
            self.engine.pages.put((self.id, page), Some(p));
            self.engine.after_change()?;
        }
        Ok(())
    }

    /// The metadata of the new value: `len` bytes with `ones` set bits.
    pub(crate) fn meta(&self, kind: Kind, len: u64, ones: u64, expire_at_ms: u64) -> Meta {
        Meta { kind, id: self.id, len, ones, expire_at_ms }
    }

    /// `meta` (another value's metadata) describing the new value instead,
    /// for a copy.
    pub(crate) fn adopt(&self, meta: Meta) -> Meta {
        Meta { id: self.id, ..meta }
    }

    /// Makes the new value the value of `name` (or deletes `name` when
    /// `meta` is `None`), atomically.
    ///
    /// # Errors
    /// As [`Engine::write`].
    pub(crate) fn publish(self, name: &[u8], meta: Option<Meta>) -> Result<()> {
        self.publish_with(name, |_| meta)
    }

    /// As [`Build::publish`], with the new metadata computed from the key's
    /// current metadata (`None` if absent) under the key's lock.
    ///
    /// # Errors
    /// As [`Engine::write`].
    pub(crate) fn publish_with(self, name: &[u8], f: impl FnOnce(Option<&Meta>) -> Option<Meta>) -> Result<()> {
        self.publish_if(name, |old| Some(f(old))).map(|_| ())
    }

    /// The one publishing step: under the key's lock and the gate, `f` maps
    /// the key's current metadata to the new one, or to `None` to give up
    /// (then the new value is discarded). Returns whether it published.
    ///
    /// # Errors
    /// As [`Engine::write`].
    pub(crate) fn publish_if(
        mut self,
        name: &[u8],
        f: impl FnOnce(Option<&Meta>) -> Option<Option<Meta>>,
    ) -> Result<bool> {
        let engine = self.engine;
        let id = self.id;
        let done = engine.write(&[name], |tx| {
            let old = tx.meta(name)?;
            let Some(meta) = f(old.as_ref()) else { return Ok(false) };
            tx.publish(name, id, meta)?;
            Ok(true)
        })?;
        if done {
            self.published = true;
            // Order matters: publishing removed the journal marker (under
            // the gate) before the id leaves `building`.
            engine.building.lock().remove(&id);
        }
        Ok(done)
    }
}

impl Drop for Build<'_> {
    fn drop(&mut self) {
        if !self.published {
            // Marked again first: a write-back may already have written (and
            // cleaned) the first marker and the pages put so far; the pages
            // put since need a marker of their own.
            self.engine.journal.set(layout::reclaim_key(self.id), Some(Vec::new()));
            self.engine.building.lock().remove(&self.id);
        }
    }
}
