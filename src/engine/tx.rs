//! Key transactions: the one way operations read and change keys.
//!
//! A transaction works in one database, names its keys up front and locks
//! their metadata shards, in shard order, so two transactions never wait
//! for each other in a cycle and a multi-key change (RENAME, COPY's publish)
//! is atomic. A write transaction first waits until no other thread claims
//! one of its keys, then holds the write gate shared for its whole duration,
//! so a write-back captures all of it or none of it, and the database's
//! keyspace cannot change under it (FLUSHDB and SWAPDB hold the gate
//! exclusively).
//!
//! Every metadata lookup applies expiry: an expired key is absent. A write
//! transaction deletes it on the spot; a read transaction leaves the
//! deletion to a write transaction run right after it (readers never hold
//! the gate). Typed lookups refuse a key of another type with `WrongType`.
//! A key's metadata changes only through [`WriteTx::record`], which also
//! keeps the counts, the expiry regions, the watchers and the reclaim
//! markers of replaced values, and decides whether a value is kept inline.
//!
//! The engine keeps each key's count of set bits (`Meta::ones`, which lets
//! a whole-key BITCOUNT read no page): every in-place change goes through
//! [`WriteTx::update_page`] or [`WriteTx::put_bit`], which see the page (or
//! the inline bytes) before and after and move the count by the difference;
//! a value built whole gets the sum of its pages from its
//! [`super::Build`]. Operations never set the count themselves.

use std::sync::Arc;

use smallvec::SmallVec;

use super::bloombits::BitsNote;
use super::bucket::Bucket;
use super::keyspaces::Counts;
use super::layout;
use super::metas::{shard_of, MetaGuard};
use super::record::{Body, InlineBytes, Kind, Meta, INLINE_BYTES, INLINE_MAX};
use super::stream::{PageStream, Reading};
use super::Engine;
use crate::error::{Error, Result};
use crate::geometry::{locate, PAGE_BYTES, PAGE_LEN};
use crate::page::Page;

mod write;
pub(super) use write::inline_meta;
pub(crate) use write::WriteTx;

/// What a metadata change tells the rest of the engine.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Signal {
    /// Watchers are told and the change counts (Redis's dirty counter).
    Changed,
    /// Watchers are told; not counted (an expired key's deletion; the
    /// source of a RENAME or MOVE, whose destination counts the change).
    Uncounted,
    /// Neither (a write Redis does not count as a modification).
    Quiet,
}

/// The database a transaction works in: by index (what operations name),
/// or by keyspace (the expiry sweep, which finds keys by keyspace).
#[derive(Clone, Copy)]
pub(super) enum Target {
    Db(u32),
    Keyspace(u32),
}

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

    /// The keyspace of `target` and its counts, or the error for a
    /// database that does not exist.
    fn resolve(&self, target: Target) -> Result<(u32, Arc<Counts>)> {
        match target {
            Target::Db(db) => self.keyspaces.of(db).ok_or_else(|| no_such_db(db)),
            Target::Keyspace(ks) => self
                .keyspaces
                .counts(ks)
                .map(|c| (ks, c))
                .ok_or_else(|| Error::InvalidArgument(format!("keyspace {ks} was flushed"))),
        }
    }

    /// [`crate::Db::prefetch_index`] of `key` in database `db`: the key's
    /// keyspace and hash, for the second step.
    pub(crate) fn prefetch_index(&self, db: u32, key: &[u8]) -> Option<(u32, u32)> {
        if !super::prefetch::HINTS {
            return None;
        }
        let ks = self.keyspaces.keyspace_of(db)?;
        let scheme = self.metas.key_hash();
        let h = scheme.of(key);
        // For the command on `key` that follows on this thread.
        super::hashmemo::remember(scheme, key, h);
        self.metas.prefetch_index(ks, h);
        Some((ks, h))
    }

    /// [`crate::Db::prefetch_bucket`]: the second step for a key of
    /// keyspace `ks` with hash `h`.
    pub(crate) fn prefetch_bucket(&self, ks: u32, h: u32) {
        self.metas.prefetch_bucket(ks, h);
    }

    /// Runs `f` with the keys `keys` of database `db` locked for reading.
    /// `f` sees each key's current metadata and pages; a stream it opens
    /// stays readable after the transaction (the stream pins the value).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a database that does not exist;
    /// whatever `f` returns.
    pub(crate) fn read<R>(
        self: &Arc<Self>,
        db: u32,
        keys: &[&[u8]],
        f: impl FnOnce(&mut ReadTx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.read_with(db, keys, true, f)
    }

    /// [`Engine::read`] that leaves the keys' last-use times as they are
    /// (Redis's `LOOKUP_NOTOUCH`: TYPE, EXISTS, TTL, OBJECT, MEMORY USAGE).
    pub(crate) fn read_untouched<R>(
        self: &Arc<Self>,
        db: u32,
        keys: &[&[u8]],
        f: impl FnOnce(&mut ReadTx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.read_with(db, keys, false, f)
    }

    fn read_with<R>(
        self: &Arc<Self>,
        db: u32,
        keys: &[&[u8]],
        touch: bool,
        f: impl FnOnce(&mut ReadTx<'_>) -> Result<R>,
    ) -> Result<R> {
        // While following, an apply changes the store and the caches with
        // no reader inside.
        let follow = self.follow.guard();
        let (ks, counts) = self.resolve(Target::Db(db))?;
        let (r, expired) = {
            let mut tx = ReadTx::lock(self, ks, counts, keys, false);
            tx.touch = touch;
            let r = f(&mut tx);
            (r, std::mem::take(&mut tx.expired))
        };
        drop(follow);
        if !expired.is_empty() {
            // Lazy expiry: delete what the reader found expired, if it still
            // is. It adds little dirty state, so it does not write back (a
            // reader may hold the write-back lock: `key_stats`). Best
            // effort: a poisoned engine keeps them until reopened, and they
            // read as absent either way.
            let names: Vec<&[u8]> = expired.iter().map(Vec::as_slice).collect();
            let _ = self.write_then(Target::Keyspace(ks), &names, false, |tx| {
                for name in &names {
                    tx.meta(name)?;
                }
                Ok(())
            });
        }
        r
    }

    /// Runs `f` as one atomic change of the keys `keys` of database `db`:
    /// `f` runs once no other thread claims one of them (see
    /// [`Engine::claim`]), with their locks held and write-backs held off.
    /// Afterwards, writes back if the dirty budget is exceeded.
    ///
    /// # Errors
    /// [`Error::Poisoned`] after a failed store write;
    /// [`Error::InvalidArgument`] for a database that does not exist;
    /// whatever `f` returns (what `f` changed before failing stays changed).
    pub(crate) fn write<R>(
        self: &Arc<Self>,
        db: u32,
        keys: &[&[u8]],
        f: impl FnOnce(&mut WriteTx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.write_then(Target::Db(db), keys, true, f)
    }

    /// [`Engine::write`] on `target`, checking the dirty budget afterwards
    /// only if `check_budget`.
    pub(super) fn write_then<R>(
        self: &Arc<Self>,
        target: Target,
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
            // Resolved under the gate: the keyspace stays the database's
            // for the whole transaction.
            let (ks, counts) = self.resolve(target)?;
            let mut tx = WriteTx { tx: ReadTx::lock(self, ks, counts, keys, true) };
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

/// The error for a database index past the configured number.
pub(crate) fn no_such_db(db: u32) -> Error {
    Error::InvalidArgument(format!("database {db} does not exist"))
}

/// A read transaction; see [`Engine::read`]. A [`WriteTx`] derefs to one.
pub(crate) struct ReadTx<'e> {
    engine: &'e Arc<Engine>,
    ks: u32,
    counts: Arc<Counts>,
    /// The locked metadata shards of the declared keys, by shard number.
    locks: SmallVec<[(usize, MetaGuard<'e>); 2]>,
    /// Keys a read transaction found expired, deleted after it ends.
    expired: Vec<Vec<u8>>,
    writing: bool,
    /// The last bucket located: (keyspace, key hash, bucket start). A
    /// read-modify-write of one key locates its bucket once. Only this
    /// transaction changes the bucket layout of its locked shards (a
    /// split, in [`ReadTx::record_with`], forgets it) and a locate that
    /// loads a bucket (and may evict others) replaces it.
    located: Option<(u32, u32, u32)>,
    /// Where the last entry looked up is in its bucket: (keyspace, key
    /// hash, bucket start, entry index or `None` if it has none), so the
    /// write that follows a read of the same key does not scan the bucket
    /// again. Forgotten with `located` when a bucket changes; an index is
    /// checked against the entry's name before use (a clean bucket evicted
    /// and loaded again keeps its entries, not their order).
    found: Option<(u32, u32, u32, Option<usize>)>,
    /// Whether a key found counts as used (OBJECT IDLETIME): every
    /// transaction but [`Engine::read_untouched`]'s.
    touch: bool,
    /// The last name hashed (up to [`MEMO_NAME`] bytes), its length and
    /// its hash: the steps of one command on one key (lock, look up,
    /// write) hash it once.
    last_hash: Option<([u8; MEMO_NAME], usize, u32)>,
}

/// The longest name whose hash a transaction remembers.
const MEMO_NAME: usize = 48;

/// What a transaction remembers of `key`'s hash `h`; `None` for a name
/// too long to keep.
fn hash_memo(key: &[u8], h: u32) -> Option<([u8; MEMO_NAME], usize, u32)> {
    let mut name = [0u8; MEMO_NAME];
    name.get_mut(..key.len())?.copy_from_slice(key);
    Some((name, key.len(), h))
}

impl<'e> ReadTx<'e> {
    fn lock(engine: &'e Arc<Engine>, ks: u32, counts: Arc<Counts>, keys: &[&[u8]], writing: bool) -> ReadTx<'e> {
        // Most transactions name one or two keys: no allocation for them,
        // and no sorting for one.
        let mut last_hash = None;
        let locks = if let [key] = keys {
            let h = engine.key_hash(key);
            last_hash = hash_memo(key, h);
            let shard = shard_of(h);
            let mut one = SmallVec::new();
            one.push((shard, engine.metas.lock_shard(shard)));
            one
        } else {
            let mut shards: SmallVec<[usize; 4]> = keys.iter().map(|k| shard_of(engine.key_hash(k))).collect();
            shards.sort_unstable();
            shards.dedup();
            shards.into_iter().map(|s| (s, engine.metas.lock_shard(s))).collect()
        };
        ReadTx {
            engine,
            ks,
            counts,
            locks,
            expired: Vec::new(),
            writing,
            located: None,
            found: None,
            touch: true,
            last_hash,
        }
    }

    /// The hash of `key`, remembered for the next call with the same name.
    fn key_hash(&mut self, key: &[u8]) -> u32 {
        if let Some((name, len, h)) = &self.last_hash {
            if name.get(..*len) == Some(key) {
                return *h;
            }
        }
        let h = self.engine.key_hash(key);
        if let Some(memo) = hash_memo(key, h) {
            self.last_hash = Some(memo);
        }
        h
    }

    /// The lock of a key with hash `h`, which the transaction must have
    /// declared.
    fn guard(&mut self, key: &[u8], h: u32) -> Result<&mut MetaGuard<'e>> {
        let shard = shard_of(h);
        if let Ok(i) = self.locks.binary_search_by_key(&shard, |(s, _)| *s) {
            Ok(&mut self.locks[i].1)
        } else {
            debug_assert!(false, "key {:?} not declared by its transaction", String::from_utf8_lossy(key));
            Err(Error::Internal("key not locked by its transaction".into()))
        }
    }

    /// The keyspace the transaction works in.
    pub(super) fn keyspace(&self) -> u32 {
        self.ks
    }

    /// The stored entry of `key` (expired or not), and its bucket's start.
    fn entry(&mut self, key: &[u8]) -> Result<(u32, Option<Meta>)> {
        let (ks, h) = (self.ks, self.key_hash(key));
        let start = self.bucket_of(key, h)?;
        let now = if self.touch { self.engine.metas.now_secs() } else { 0 };
        let guard = self.guard(key, h)?;
        let Some(b) = guard.get(ks, start) else { return Ok((start, None)) };
        let at = b.bucket.find(key, h, now);
        self.found = Some((ks, h, start, at.as_ref().map(|&(i, _)| i)));
        Ok((start, at.map(|(_, m)| m)))
    }

    /// `f` of the bytes of `key`'s value where they lie in its bucket
    /// entry, if the key holds a value of kind `kind` kept inline that has
    /// not expired: a read that decodes no metadata and copies no value.
    /// `None` (nothing run) where [`ReadTx::meta`] must answer: a missing
    /// or expired key, another kind, a value in pages.
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn peek_inline<R>(&mut self, key: &[u8], kind: Kind, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        let (ks, h) = (self.ks, self.key_hash(key));
        let start = self.bucket_of(key, h)?;
        let now = if self.touch { self.engine.metas.now_secs() } else { 0 };
        let now_ms = self.engine.now_ms();
        let guard = self.guard(key, h)?;
        let Some(b) = guard.get(ks, start) else { return Ok(None) };
        let Some((i, r)) = b.bucket.peek_inline((key, h), kind, (now, now_ms), f) else { return Ok(None) };
        self.found = Some((ks, h, start, Some(i)));
        Ok(Some(r))
    }

    /// Seconds since `key` was last used (OBJECT IDLETIME), as far as the
    /// cache knows: a key not used since its bucket was loaded counts from
    /// the load. `None` if it is missing.
    pub(crate) fn idle_secs(&mut self, key: &[u8]) -> Result<Option<u64>> {
        if self.meta(key)?.is_none() {
            return Ok(None);
        }
        let (ks, h) = (self.ks, self.key_hash(key));
        let start = self.bucket_of(key, h)?;
        let now = self.engine.metas.now_secs();
        Ok(self.guard(key, h)?.get(ks, start).and_then(|b| b.bucket.idle(key, h, now)).map(u64::from))
    }

    /// The start of the bucket holding `key` (whose hash is `h`), which is
    /// then cached.
    fn bucket_of(&mut self, key: &[u8], h: u32) -> Result<u32> {
        let (engine, ks) = (self.engine, self.ks);
        if let Some((l_ks, l_h, start)) = self.located {
            if (l_ks, l_h) == (ks, h) {
                return Ok(start);
            }
        }
        let start = self.guard(key, h)?.locate(ks, h, &*engine.store).map_err(|e| match e {
            // Name the key looked up; the reason names the bucket.
            Error::Corrupted { key: bucket, reason, .. } => Error::Corrupted {
                key: String::from_utf8_lossy(key).into_owned(),
                page: None,
                reason: format!("{reason} ({bucket})"),
            },
            e => e,
        })?;
        self.located = Some((ks, h, start));
        Ok(start)
    }

    /// The metadata of `key`, of any type; `None` if it is missing or has
    /// expired.
    ///
    /// # Errors
    /// [`Error::Corrupted`] metadata; a store error.
    pub(crate) fn meta(&mut self, key: &[u8]) -> Result<Option<Meta>> {
        let (_, meta) = self.entry(key)?;
        match meta {
            Some(m) if m.expire_at_ms != 0 && m.expire_at_ms <= self.engine.now_ms() => {
                if self.writing {
                    // The reclaim marker goes first: if a write-back captures
                    // only it, the stored key is still expired (so absent)
                    // and losing its pages is harmless.
                    if let Some(id) = m.id() {
                        self.engine.journal.set(layout::reclaim_key(id), Some(Vec::new()));
                    }
                    // Watchers see it; Redis's dirty counter does not
                    // count an expired key's deletion.
                    self.record_with(key, None, Signal::Uncounted)?;
                    self.engine.expired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if let Some(listener) = self.engine.expired_listener.read().as_ref() {
                        if let Some(db) = self.engine.keyspaces.db_of(self.ks) {
                            listener(db, key);
                        }
                    }
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
        self.typed(key, Kind::String)
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
        match meta.body {
            Body::Paged(id) => self.engine.page(key, id, page),
            Body::Inline => Ok(inline_page(meta, page).map(Arc::new)),
            Body::Page { .. } => Ok(meta.lone_page(key)?.filter(|&(at, _)| at == page).map(|(_, p)| Arc::new(p))),
        }
    }

    /// Bit `offset` of the value `meta` describes, the value of `key`
    /// (locked by this transaction): one page read, or none for an inline
    /// value.
    ///
    /// # Errors
    /// [`Error::Corrupted`] if the stored page does not decode.
    pub(crate) fn bit(&self, key: &[u8], meta: &Meta, offset: u64) -> Result<bool> {
        if meta.body == Body::Inline {
            return Ok(inline_bit(offset).is_some_and(|(i, mask)| meta.inline[i] & mask != 0));
        }
        let at = locate(offset);
        Ok(self.page(key, meta, at.page)?.is_some_and(|p| p.get(at.bit)))
    }

    /// A stream over every page of the value `meta` describes, the value
    /// of `key`, read to the end; `None` for an empty value. As
    /// [`ReadTx::stream`], it outlives the transaction.
    ///
    /// # Errors
    /// A store error while listing the pages.
    pub(crate) fn whole_stream(&self, key: &[u8], meta: &Meta) -> Result<Option<PageStream>> {
        crate::geometry::value_pages(meta.len).map(|pages| self.stream(key, meta, pages, Reading::ToTheEnd)).transpose()
    }

    /// A stream over pages `from ..= to` of the value `meta` describes, the
    /// value of `key`, for a reader that goes as far as `reading` says. The
    /// stream keeps reading that value after the transaction ends, even if
    /// the key is replaced or deleted meanwhile.
    ///
    /// # Errors
    /// A store error while listing the pages.
    pub(crate) fn stream(
        &self,
        key: &[u8],
        meta: &Meta,
        (from, to): (u64, u64),
        reading: Reading,
    ) -> Result<PageStream> {
        match meta.body {
            Body::Paged(id) => {
                // No page lies past the value's last one: a range that
                // reaches it is the whole value (a GET's, say).
                let to = match crate::geometry::value_pages(meta.len) {
                    Some((_, last)) if to >= last => u64::MAX,
                    _ => to,
                };
                let mut stream = PageStream::new(self.engine, key, (id, meta.ones), (from, to), reading)?;
                if self.engine.pages.is_bulk(read_bytes(meta, (from, to))) {
                    stream.pass();
                }
                Ok(stream)
            }
            Body::Inline => {
                Ok(PageStream::inline(inline_page(meta, 0).filter(|_| from == 0).map(|p| (0, Arc::new(p)))))
            }
            Body::Page { .. } => Ok(PageStream::inline(
                meta.lone_page(key)?.filter(|&(at, _)| (from..=to).contains(&at)).map(|(at, p)| (at, Arc::new(p))),
            )),
        }
    }

    /// The set bits of the paged value `meta` describes (the value of
    /// `key`, locked by this transaction), ascending, if it is sparse enough
    /// for a flat list ([`super::flat::eligible`]), kept in the flat cache
    /// until a page of it changes. `None` for a value kept in its entry (one
    /// page: the page kernels take it as it is), and when the pages do not
    /// add up to the metadata's count (the page streams report such damage).
    ///
    /// # Errors
    /// As [`ReadTx::stream`] and reading its pages.
    pub(crate) fn flat_positions(&self, key: &[u8], meta: &Meta) -> Result<Option<Arc<[u64]>>> {
        let Body::Paged(id) = meta.body else { return Ok(None) };
        if !super::flat::eligible(meta.len, meta.ones) {
            return Ok(None);
        }
        if let Some(list) = self.engine.pages.flat.get(id) {
            return Ok(Some(list));
        }
        let mut stream = self.stream(key, meta, (0, u64::MAX), Reading::ToTheEnd)?;
        let mut out = Vec::with_capacity(usize::try_from(meta.ones).unwrap_or(0));
        while let Some((page, p)) = stream.next_page()? {
            out.extend(p.offsets(page));
        }
        if out.len() as u64 != meta.ones {
            return Ok(None);
        }
        let list: Arc<[u64]> = out.into();
        self.engine.pages.flat.insert(id, Arc::clone(&list));
        Ok(Some(list))
    }

    /// As [`Engine::value_len`].
    ///
    /// # Errors
    /// [`Error::TooLarge`].
    pub(crate) fn value_len(&self, key: &[u8], meta: &Meta) -> Result<usize> {
        self.engine.value_len(key, meta)
    }

    /// The bytes of the value `meta` describes (the value of `key`) if it
    /// is at most `max` bytes long (at most a page), else `None`: for the
    /// commands that read a short value whole (INCR and friends).
    ///
    /// # Errors
    /// [`Error::Corrupted`] if the stored page does not decode.
    pub(crate) fn short_value(&self, key: &[u8], meta: &Meta, max: usize) -> Result<Option<Vec<u8>>> {
        let Ok(len) = usize::try_from(meta.len) else { return Ok(None) };
        if len > max.min(PAGE_LEN) {
            return Ok(None);
        }
        if meta.body == Body::Inline {
            return Ok(Some(meta.inline_value().to_vec()));
        }
        let mut out = vec![0u8; len];
        if let Some(p) = self.page(key, meta, 0)? {
            p.write_bytes(&mut out);
        }
        Ok(Some(out))
    }

    /// Moves a value kept in its entry into pages under a fresh bitmap id:
    /// `page` (a page number and its bits) if given, else what the entry
    /// held (an inline value's bytes as page 0, or the page kept there at
    /// its number).
    fn promote(&self, key: &[u8], meta: &mut Meta, page: Option<(u64, Page)>) -> Result<()> {
        let page = match page {
            Some(p) => Some(p),
            None => match meta.body {
                Body::Page { .. } => meta.lone_page(key)?,
                _ => inline_page(meta, 0).map(|p| (0, p)),
            },
        };
        let id = self.engine.new_id()?;
        if let Some((at, p)) = page.filter(|(_, p)| !p.is_empty()) {
            self.engine.pages.put((id, at), Some(p), false);
        }
        meta.body = Body::Paged(id);
        meta.inline = InlineBytes::zeroed();
        Ok(())
    }

    /// The one place a key's metadata changes: records it in its bucket
    /// (dirty), moves an inline value that grew too long to pages, and
    /// keeps the keyspace's counts, the expiry regions and the watchers.
    fn record(&mut self, key: &[u8], meta: Option<&Meta>) -> Result<()> {
        self.record_with(key, meta, Signal::Changed)
    }

    /// [`ReadTx::record`], raising the key's watchers' flags only if
    /// `touch`.
    fn record_with(&mut self, key: &[u8], meta: Option<&Meta>, signal: Signal) -> Result<()> {
        self.record_change(key, meta, signal, None)
    }

    /// [`ReadTx::record_with`]; `bloom`: the change is items added to a
    /// small Bloom filter, which now counts `.0` and gained the bits at
    /// `.1` (so a delta record may hold those instead of the entry).
    fn record_change(
        &mut self,
        key: &[u8],
        meta: Option<&Meta>,
        signal: Signal,
        bloom: Option<(u64, &[u64])>,
    ) -> Result<()> {
        debug_assert!(self.writing, "a read transaction changes nothing");
        let promoted;
        let meta = match meta {
            Some(m) if m.body == Body::Inline && m.len > m.kind.inline_max() => {
                if m.kind != Kind::String {
                    return Err(Error::Internal(format!("an inline {:?} value of {} bytes", m.kind, m.len)));
                }
                let mut paged = m.clone();
                self.promote(key, &mut paged, None)?;
                promoted = paged;
                Some(&promoted)
            }
            other => other,
        };
        let (ks, h) = (self.ks, self.key_hash(key));
        // One lookup in the bucket: the upsert returns the expiry of the
        // entry it replaced (all the counts need of it).
        let old_expiry = if let Some(m) = meta {
            let old = self.change_entry(
                (key, h),
                |b, now, known| b.upsert_known(key, h, m, now, known),
                |old| change_note(old.map(|(_, changed)| changed), bloom),
            )?;
            old.map(|(expiry, _)| expiry)
        } else {
            let (start, old) = self.entry(key)?;
            if old.is_none() {
                return Ok(());
            }
            self.located = None;
            self.found = None;
            self.guard(key, h)?.update_key(ks, start, (h, key), |b| b.remove(key, h), |_| BitsNote::Other);
            old.map(|o| o.expire_at_ms)
        };
        self.counts.change(old_expiry, meta.map(|m| m.expire_at_ms));
        if let Some(at) = meta.map(|m| m.expire_at_ms).filter(|&at| at != 0) {
            if old_expiry != Some(at) {
                self.counts.due.note(h, at);
            }
        }
        self.signal(key, signal);
        Ok(())
    }

    /// Changes the entry of `key` (hash `h`) in its cached bucket with `f`,
    /// given the time (a write is a use: OBJECT IDLETIME) and what a
    /// lookup in this transaction found of the entry (as
    /// [`Bucket::upsert_known`] takes it), and logs `note` of what `f`
    /// returned in the shard's Bloom bits log. The update may move
    /// entries, so what was located and found is used once and forgotten.
    fn change_entry<'n, R>(
        &mut self,
        (key, h): (&[u8], u32),
        f: impl FnOnce(&mut Bucket, u32, Option<Option<usize>>) -> Option<R>,
        note: impl FnOnce(&Option<R>) -> BitsNote<'n>,
    ) -> Result<Option<R>> {
        let (engine, ks) = (self.engine, self.ks);
        let start = self.bucket_of(key, h)?;
        self.located = None;
        let known = self.found.take().filter(|f| (f.0, f.1, f.2) == (ks, h, start)).map(|f| f.3);
        let now = engine.metas.now_secs();
        Ok(self.guard(key, h)?.update_key(ks, start, (h, key), |b| f(b, now, known), note).flatten())
    }

    /// Tells `key`'s watchers of a change and counts it, as `signal` says.
    fn signal(&self, key: &[u8], signal: Signal) {
        if signal != Signal::Quiet {
            self.engine.watches.touched(self.ks, key);
        }
        if signal == Signal::Changed {
            self.engine.changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The current time by the engine's clock, Unix milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        self.engine.now_ms()
    }
}

impl WriteTx<'_> {
    /// Changes the value of `key` where its bytes lie in its bucket entry,
    /// if it holds a value of kind `kind` kept inline: `patch` changes
    /// them keeping their length and says whether it could. The same
    /// change as recording the changed value (the entry's bytes are what a
    /// rewrite gives), without the value copied out and back. `bloom`: the
    /// change is items added to a small Bloom filter, as
    /// [`ReadTx::record_change`] takes it. Returns whether it was made (if
    /// not, nothing changed).
    ///
    /// The caller has read the key in this transaction (so it has not
    /// expired, and its expiry stays as it is).
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn patch_inline(
        &mut self,
        key: &[u8],
        kind: Kind,
        bloom: Option<(u64, &[u64])>,
        patch: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<bool> {
        let tx = &mut self.tx;
        let h = tx.key_hash(key);
        let patched = tx.change_entry(
            (key, h),
            |b, now, known| b.patch_inline((key, h), kind, now, known, patch),
            // Nothing changed: nothing to note.
            |was_changed| was_changed.map_or(BitsNote::OtherOfClean, |c| change_note(Some(c), bloom)),
        )?;
        if patched.is_none() {
            return Ok(false);
        }
        // The expiry is the entry's own: no count changes.
        tx.signal(key, Signal::Changed);
        Ok(true)
    }
}

/// What a change of a key's entry means for its shard's Bloom bits log
/// ([`BitsNote`]), from the changed mark of the entry it replaced (`None`:
/// the key had no entry) and, for items added to a small Bloom filter,
/// its count and the bits they set.
fn change_note(old_changed: Option<bool>, bloom: Option<(u64, &[u64])>) -> BitsNote<'_> {
    match bloom {
        Some((items, positions)) => BitsNote::Added { was_clean: old_changed == Some(false), items, positions },
        // A clean entry (or none) has no bits to forget.
        None if old_changed == Some(true) => BitsNote::Other,
        None => BitsNote::OtherOfClean,
    }
}

/// The byte index and mask of bit `offset` in an inline value's bytes, if
/// it falls inside them.
fn inline_bit(offset: u64) -> Option<(usize, u8)> {
    let i = usize::try_from(offset / 8).ok().filter(|&i| (i as u64) < INLINE_MAX)?;
    Some((i, 0x80 >> (offset % 8)))
}

/// About the bytes the cache would hold for pages `from ..= to` of the
/// paged value `meta` describes: the pages' dense size, or two bytes per
/// set bit (a sparse page's positions) where that is less. What decides
/// whether a stream is a bulk read.
pub(crate) fn read_bytes(meta: &Meta, (from, to): (u64, u64)) -> u64 {
    let last = crate::geometry::value_pages(meta.len).map_or(0, |(_, last)| last);
    let pages = last.min(to).saturating_sub(from).saturating_add(1);
    pages.saturating_mul(PAGE_BYTES).min(meta.ones.saturating_mul(2))
}

/// Page `page` of an inline value: page 0 holds it all. All its bytes
/// count, not only the first `len`: an operation sets bits before it
/// updates the length.
fn inline_page(meta: &Meta, page: u64) -> Option<Page> {
    // Within the type's inline limit: bytes past it are always zero.
    // A buffer shorter than the limit holds no bytes past its end.
    let limit = usize::try_from(meta.kind.inline_max()).unwrap_or(INLINE_BYTES).min(INLINE_BYTES);
    let bytes = &meta.inline[..limit.min(meta.inline.len())];
    (page == 0).then(|| Page::from_bytes(bytes)).filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use crate::{Config, Error};

    /// Invariant: a key's count follows its pages, and a count that
    /// already disagrees with them (here set too low by hand) is refused
    /// as an internal error that changes nothing, never saturated. An
    /// inline value's count cannot disagree: its bucket entry keeps only
    /// the bytes, and the count is taken from them.
    #[test]
    fn a_count_below_a_page_is_an_internal_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
        let break_count = |key: &[u8]| {
            db.engine
                .write(0, &[key], |tx| {
                    let mut meta = tx.string(key)?.unwrap();
                    meta.ones = 0;
                    tx.set(key, &meta)
                })
                .unwrap();
        };
        db.set_bits(b"short", &[1, 9], true).unwrap();
        break_count(b"short");
        assert_eq!(db.bitcount(b"short", None).unwrap(), 2, "an inline count comes from the bytes");
        assert!(db.setbit(b"short", 9, false).unwrap(), "the old bit");
        assert_eq!(db.bitcount(b"short", None).unwrap(), 1);
        let (key, offset) = (&b"long"[..], 100_000u64);
        db.set_bits(key, &[1, offset], true).unwrap();
        assert_eq!(db.bitcount(key, None).unwrap(), 2);
        break_count(key);
        let r = db.setbit(key, offset, false);
        assert!(matches!(r, Err(Error::Internal(_))), "{r:?}");
        assert!(db.getbit(key, offset).unwrap(), "the refused change changed nothing");
        let r =
            db.bitfield(key, &[crate::BitfieldOp::Set { ty: crate::BitfieldType::Unsigned(8), offset: 0, value: 0 }]);
        assert!(matches!(r, Err(Error::Internal(_))), "{r:?}");
        assert!(db.getbit(key, 1).unwrap(), "the refused change changed nothing");
        assert!(!db.verify().unwrap().is_ok(), "verify names the key");
        // Rewriting the key repairs it.
        db.set(key, b"\x01").unwrap();
        assert_eq!(db.bitcount(key, None).unwrap(), 1);
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{report:?}");
    }
}
