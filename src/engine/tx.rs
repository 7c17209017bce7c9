//! Key transactions: the one way operations read and change keys.
//!
//! A transaction names its keys up front and locks their metadata shards, in
//! shard order, so two transactions never wait for each other in a cycle
//! and a multi-key change (RENAME, COPY's publish) is atomic. A write
//! transaction first waits until no other thread claims one of its keys,
//! then holds the write gate shared for its whole duration, so a write-back
//! captures all of it or none of it (DESIGN.md, "Concurrency").
//!
//! Every metadata lookup applies expiry: an expired key is absent. A write
//! transaction deletes it on the spot; a read transaction leaves the
//! deletion to a write transaction run right after it (readers never hold
//! the gate). Typed lookups refuse a key of another type with `WrongType`.
//! A key's metadata changes only through [`WriteTx`], which also keeps the
//! expiry index and the reclaim markers of replaced values.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::layout;
use super::metas::{shard_of_name, MetaGuard};
use super::record::{Kind, Meta};
use super::stream::PageStream;
use super::Engine;
use crate::error::{Error, Result};
use crate::page::Page;

impl Engine {
    /// The length of the value `meta` describes (of key `key`) as a buffer
    /// size, or `TooLarge` past [`crate::Config::max_value_bytes`] (or the
    /// address space): the one place that decides whether a value may be
    /// built in memory.
    ///
    /// # Errors
    /// [`Error::TooLarge`].
    pub(crate) fn value_len(&self, key: &[u8], meta: &Meta) -> Result<usize> {
        let limit = self.config.max_value_bytes;
        usize::try_from(meta.len).ok().filter(|_| meta.len <= limit).ok_or_else(|| Error::TooLarge {
            key: String::from_utf8_lossy(key).into_owned(),
            len: meta.len,
            limit: limit.min(usize::MAX as u64),
        })
    }

    /// Runs `f` with the keys `keys` locked for reading. `f` sees each key's
    /// current metadata and pages; a stream it opens stays readable after
    /// the transaction (the stream pins the value).
    ///
    /// # Errors
    /// Whatever `f` returns.
    pub(crate) fn read<R>(self: &Arc<Self>, keys: &[&[u8]], f: impl FnOnce(&mut ReadTx<'_>) -> Result<R>) -> Result<R> {
        let (r, expired) = {
            let mut tx = ReadTx::lock(self, keys, false);
            let r = f(&mut tx);
            (r, std::mem::take(&mut tx.expired))
        };
        if !expired.is_empty() {
            // Lazy expiry: delete what the reader found expired, if it still
            // is. Best effort: a poisoned engine keeps them until reopened,
            // and they read as absent either way.
            // It adds no dirty bytes to speak of, so it does not write back
            // (a reader may hold the write-back lock: `key_stats`).
            let names: Vec<&[u8]> = expired.iter().map(Vec::as_slice).collect();
            let _ = self.write_then(&names, false, |tx| {
                for name in &names {
                    tx.meta(name)?;
                }
                Ok(())
            });
        }
        r
    }

    /// Runs `f` as one atomic change of the keys `keys`: `f` runs once no
    /// other thread claims one of them (see [`Engine::claim`]), with their
    /// locks held and write-backs held off. Afterwards, writes back if the
    /// dirty budget is exceeded.
    ///
    /// # Errors
    /// [`Error::Poisoned`] after a failed store write; whatever `f` returns
    /// (what `f` changed before failing stays changed).
    pub(crate) fn write<R>(
        self: &Arc<Self>,
        keys: &[&[u8]],
        f: impl FnOnce(&mut WriteTx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.write_then(keys, true, f)
    }

    /// [`Engine::write`], checking the dirty budget afterwards only if
    /// `check_budget`.
    fn write_then<R>(
        self: &Arc<Self>,
        keys: &[&[u8]],
        check_budget: bool,
        f: impl FnOnce(&mut WriteTx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.check_writable()?;
        let r = loop {
            let gate = self.gate.read();
            if self.claims.blocks(keys) {
                drop(gate);
                self.claims.wait(keys);
                continue;
            }
            let mut tx = WriteTx { tx: ReadTx::lock(self, keys, true) };
            let r = f(&mut tx);
            drop(tx);
            drop(gate);
            break r;
        };
        if check_budget {
            self.after_change()?;
        }
        r
    }
}

/// A read transaction; see [`Engine::read`]. A [`WriteTx`] derefs to one.
pub(crate) struct ReadTx<'e> {
    engine: &'e Arc<Engine>,
    /// The locked metadata shards of the declared keys, by shard number.
    locks: Vec<(usize, MetaGuard<'e>)>,
    /// Keys a read transaction found expired, deleted after it ends.
    expired: Vec<Vec<u8>>,
    writing: bool,
}

impl<'e> ReadTx<'e> {
    fn lock(engine: &'e Arc<Engine>, keys: &[&[u8]], writing: bool) -> ReadTx<'e> {
        let mut shards: Vec<usize> = keys.iter().map(|k| shard_of_name(k)).collect();
        shards.sort_unstable();
        shards.dedup();
        let locks = shards.into_iter().map(|s| (s, engine.metas.lock_shard(s))).collect();
        ReadTx { engine, locks, expired: Vec::new(), writing }
    }

    /// The lock of `key`, which the transaction must have declared.
    fn guard(&mut self, key: &[u8]) -> Result<&mut MetaGuard<'e>> {
        let shard = shard_of_name(key);
        match self.locks.binary_search_by_key(&shard, |(s, _)| *s) {
            Ok(i) => Ok(&mut self.locks[i].1),
            Err(_) => {
                debug_assert!(false, "key {:?} not declared by its transaction", String::from_utf8_lossy(key));
                Err(Error::InvalidArgument("internal: key not locked by its transaction".into()))
            }
        }
    }

    /// The metadata of `key`, of any type; `None` if it is missing or has
    /// expired.
    ///
    /// # Errors
    /// [`Error::Corrupted`] metadata; a store error.
    pub(crate) fn meta(&mut self, key: &[u8]) -> Result<Option<Meta>> {
        let engine = self.engine;
        let writing = self.writing;
        let g = self.guard(key)?;
        let m = match g.cached(key) {
            Some(m) => m,
            None => {
                let m = match engine.store.get(&layout::meta_key(key))? {
                    Some(b) => Some(Meta::decode(key, &b)?),
                    None => None,
                };
                g.insert_clean(key, m);
                m
            }
        };
        match m {
            Some(meta) if meta.expire_at_ms != 0 && meta.expire_at_ms <= engine.now_ms() => {
                if writing {
                    // The reclaim marker goes first: if a write-back captures
                    // only it, the stored key is still expired (so absent)
                    // and losing its pages is harmless; the other order could
                    // leak the pages.
                    engine.journal.set(layout::reclaim_key(meta.id), Some(Vec::new()));
                    g.set(key, None);
                } else {
                    self.expired.push(key.to_vec());
                }
                Ok(None)
            }
            m => Ok(m),
        }
    }

    /// The metadata of string key `key`, `None` if missing.
    ///
    /// # Errors
    /// [`Error::WrongType`] if it holds another type; as [`ReadTx::meta`].
    pub(crate) fn string(&mut self, key: &[u8]) -> Result<Option<Meta>> {
        match self.meta(key)? {
            Some(m) if m.kind != Kind::String => Err(Error::WrongType),
            m => Ok(m),
        }
    }

    /// The metadata of key `key` if it holds `kind`; `None` if missing.
    ///
    /// # Errors
    /// [`Error::WrongType`] if it holds another type; as [`ReadTx::meta`].
    pub(crate) fn typed(&mut self, key: &[u8], kind: Kind) -> Result<Option<Meta>> {
        match self.meta(key)? {
            Some(m) if m.kind != kind => Err(Error::WrongType),
            m => Ok(m),
        }
    }

    /// Page `page` of the value `meta` describes, the value of `key` (locked
    /// by this transaction); `None` if the page is all zero.
    ///
    /// # Errors
    /// [`Error::Corrupted`] if the stored page does not decode.
    pub(crate) fn page(&self, key: &[u8], meta: &Meta, page: u64) -> Result<Option<Arc<Page>>> {
        self.engine.page(key, meta.id, page)
    }

    /// A stream over pages `from ..= to` of the value `meta` describes, the
    /// value of `key`. The stream keeps reading that value after the
    /// transaction ends, even if the key is replaced or deleted meanwhile.
    ///
    /// # Errors
    /// A store error while listing the pages.
    pub(crate) fn stream(&self, key: &[u8], meta: &Meta, from: u64, to: u64) -> Result<PageStream> {
        PageStream::new(self.engine, key, meta.id, from, to)
    }

    /// The length of the value `meta` describes (of key `key`) as a buffer
    /// size, or `TooLarge` past [`crate::Config::max_value_bytes`] (or the
    /// address space).
    ///
    /// # Errors
    /// [`Error::TooLarge`].
    pub(crate) fn value_len(&self, key: &[u8], meta: &Meta) -> Result<usize> {
        self.engine.value_len(key, meta)
    }

    /// The current time by the engine's clock, Unix milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        self.engine.now_ms()
    }
}

/// A write transaction; see [`Engine::write`]. Reads go through the
/// [`ReadTx`] it derefs to.
pub(crate) struct WriteTx<'e> {
    tx: ReadTx<'e>,
}

impl<'e> Deref for WriteTx<'e> {
    type Target = ReadTx<'e>;
    fn deref(&self) -> &ReadTx<'e> {
        &self.tx
    }
}

impl DerefMut for WriteTx<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl WriteTx<'_> {
    /// The metadata of a new, empty value of type `kind` (not recorded
    /// until [`WriteTx::set`]).
    ///
    /// # Errors
    /// A store error allocating its id.
    pub(crate) fn new_value(&self, kind: Kind) -> Result<Meta> {
        Ok(Meta { kind, id: self.engine.store.next_id()?, len: 0, ones: 0, expire_at_ms: 0 })
    }

    /// The metadata of string key `key`, or that of a new empty string if
    /// it is missing (recorded once the caller sets it).
    ///
    /// # Errors
    /// As [`ReadTx::string`].
    pub(crate) fn string_or_new(&mut self, key: &[u8]) -> Result<Meta> {
        match self.string(key)? {
            Some(m) => Ok(m),
            None => self.new_value(Kind::String),
        }
    }

    /// Changes page `page` of the value `meta` describes (the value of
    /// `key`) with `f`; an absent page starts all zero. The caller then
    /// records `meta` (with its new length and count) with
    /// [`WriteTx::set`].
    ///
    /// # Errors
    /// [`Error::Corrupted`] if the stored page does not decode.
    pub(crate) fn update_page<R>(
        &mut self,
        key: &[u8],
        meta: &mut Meta,
        page: u64,
        f: impl FnOnce(&mut Page) -> R,
    ) -> Result<R> {
        let engine = self.engine;
        let id = meta.id;
        engine.pages.update((id, page), |_| engine.fetch_page(key, id, page), f)
    }

    /// Records `meta` as the metadata of `key`, whose value it describes
    /// (the same value, changed in place, or a new one from
    /// [`WriteTx::new_value`]). An expiry it carries is indexed.
    ///
    /// # Errors
    /// An internal error if `key` is not declared.
    pub(crate) fn set(&mut self, key: &[u8], meta: Meta) -> Result<()> {
        self.record(key, Some(meta))
    }

    /// Replaces `key` with `meta` (or deletes it) and marks the value it
    /// held for reclamation; returns whether it existed.
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn replace(&mut self, key: &[u8], meta: Option<Meta>) -> Result<bool> {
        let old = self.meta(key)?;
        if let Some(old) = old {
            self.engine.journal.set(layout::reclaim_key(old.id), Some(Vec::new()));
        }
        if old.is_some() || meta.is_some() {
            self.record(key, meta)?;
        }
        Ok(old.is_some())
    }

    /// Deletes `key`; returns whether it existed.
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn delete(&mut self, key: &[u8]) -> Result<bool> {
        self.replace(key, None)
    }

    /// Moves the value of `from` (described by `meta`, just read) to `to`,
    /// replacing whatever `to` held; `from` no longer exists.
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn move_value(&mut self, from: &[u8], to: &[u8], meta: Meta) -> Result<()> {
        // Not `replace`: the value moves, it is not reclaimed.
        self.record(from, None)?;
        self.replace(to, Some(meta))?;
        Ok(())
    }

    /// Publishes bitmap `id` (built by a [`super::Build`]) as the value of
    /// `key`: `meta` describes it, or `None` deletes `key`. The value `key`
    /// held is reclaimed.
    pub(super) fn publish(&mut self, key: &[u8], id: u64, meta: Option<Meta>) -> Result<()> {
        self.replace(key, meta)?;
        if meta.is_some() {
            self.engine.journal.set(layout::reclaim_key(id), None);
        }
        Ok(())
    }

    /// The one place a key's metadata changes: records it dirty, and
    /// indexes a new expiry so the sweeper finds the key.
    fn record(&mut self, key: &[u8], meta: Option<Meta>) -> Result<()> {
        let engine = self.engine;
        let g = self.guard(key)?;
        let old_expiry = g.cached(key).flatten().map_or(0, |m| m.expire_at_ms);
        g.set(key, meta);
        if let Some(m) = meta {
            if m.expire_at_ms != 0 && m.expire_at_ms != old_expiry {
                // Stale entries (the key changed its expiry or went away)
                // are dropped by the sweeper, which checks the key itself.
                engine.journal.set(layout::expiry_key(m.expire_at_ms, key), Some(Vec::new()));
            }
        }
        Ok(())
    }
}
