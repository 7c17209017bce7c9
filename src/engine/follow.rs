//! Replication at the store's level: a master publishes every batch it
//! applies to its store as a frame of a change feed; a follower (replica)
//! applies the same batches to its own store, so the two stores are the
//! same records, and rebuilds its in-memory state from its store after
//! each apply (DESIGN.md section 5, "Replication").
//!
//! A follower never writes on its own: no write transaction, write-back,
//! fold, reclamation or expiry sweep runs while it follows. Its in-memory
//! state is what opening the store would build (delta records replayed,
//! not folded), rebuilt after each apply.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::layout;
use super::record::{self, Catalog, FollowerRecord, FOLLOW_CONSISTENT, FOLLOW_LOADING, FOLLOW_PROMOTED};
use super::store::{Bytes, Scan, Store, Write};
use super::Engine;
use crate::error::{Error, Result};
use crate::replication::{decode_frame, encode_frame, Feed, Snapshot, SyncItem};

/// Removes per batch when a load empties the store.
const WIPE_BATCH: usize = 10_000;

/// How long an apply holds new readers off while it waits for open page
/// streams to end, before it lets them run and tries again.
const PIN_WAIT: Duration = Duration::from_millis(20);

/// The engine's replication state.
pub(crate) struct Follow {
    /// This engine follows a master: writes are refused, and nothing is
    /// written but the master's batches.
    on: AtomicBool,
    /// Taken shared by every read transaction while following, and
    /// exclusively by an apply, which changes the store and the caches
    /// under the readers.
    lock: RwLock<()>,
    /// The change feed, while this engine keeps one (a master with
    /// replicas, or a follower with replicas of its own).
    feed: parking_lot::Mutex<Option<Arc<Feed>>>,
    feed_on: AtomicBool,
    /// Bitmap ids up to this one may be in use by a master this store
    /// followed: new ids are taken above it.
    id_floor: AtomicU64,
    /// The highest bitmap id this engine has handed out or seen in a
    /// master's frames.
    ids_high: AtomicU64,
    /// The store is loading a master's snapshot, or stopped while it did:
    /// it is not consistent, and nothing should be read from it.
    loading: AtomicBool,
}

impl Follow {
    /// The state of a store whose follower record is `record`.
    pub(crate) fn new(record: Option<&FollowerRecord>) -> Follow {
        let following = record.is_some_and(|r| r.state != FOLLOW_PROMOTED);
        let floor = record.map_or(0, |r| r.id_floor);
        Follow {
            on: AtomicBool::new(following),
            lock: RwLock::new(()),
            feed: parking_lot::Mutex::new(None),
            feed_on: AtomicBool::new(false),
            id_floor: AtomicU64::new(floor),
            ids_high: AtomicU64::new(floor),
            loading: AtomicBool::new(record.is_some_and(|r| r.state == FOLLOW_LOADING)),
        }
    }

    /// Whether the engine follows a master.
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// Whether the store is loading a master's snapshot (or stopped while
    /// it did).
    pub(crate) fn loading(&self) -> bool {
        self.loading.load(Ordering::Relaxed)
    }

    /// Held by a read transaction while following.
    pub(crate) fn guard(&self) -> Option<RwLockReadGuard<'_, ()>> {
        self.on().then(|| self.lock.read())
    }
}

/// Store records (key, value) in key order.
type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// What a batch of a master's changes touched, and so what a follower's
/// memory must take from it.
#[derive(Default)]
struct Touched {
    catalog: Option<Vec<u8>>,
    sequence: Option<Vec<u8>>,
    /// Bitmaps whose stored pages changed (their directories go).
    bitmaps: std::collections::BTreeSet<u64>,
    /// Pages whose stored version changed (page and group records).
    pages: Vec<super::pages::PageId>,
    /// New page delta records.
    page_deltas: Records,
    /// Page delta records were removed: a page fold.
    page_fold: bool,
    /// Shards whose buckets were written or delta records removed: a fold.
    refolded: std::collections::BTreeSet<usize>,
    /// New metadata delta records, per shard.
    deltas: std::collections::BTreeMap<usize, Records>,
}

impl Touched {
    fn of(writes: &[Write]) -> Touched {
        let mut t = Touched::default();
        for (key, value) in writes {
            match key.first() {
                Some(&layout::NS_SUPER) if *key == layout::catalog_key() => t.catalog.clone_from(value),
                Some(&layout::NS_SUPER) if *key == layout::sequence_key() => t.sequence.clone_from(value),
                Some(&layout::NS_PAGE) => {
                    if let Some((id, page)) = layout::parse_page_key(key) {
                        t.bitmaps.insert(id);
                        t.pages.push((id, page));
                    }
                }
                Some(&layout::NS_GROUP) => {
                    if let Some((id, group)) = layout::parse_group_key(key) {
                        t.bitmaps.insert(id);
                        let slots = u8::try_from(crate::page::GROUP_PAGES).unwrap_or(u8::MAX);
                        t.pages.extend((0..slots).map(|slot| (id, layout::group_page(group, slot))));
                    }
                }
                Some(&layout::NS_PAGE_DELTA) => match value {
                    Some(v) => t.page_deltas.push((key.clone(), v.clone())),
                    None => t.page_fold = true,
                },
                Some(&layout::NS_BUCKET) => {
                    if let Some((_, start)) = layout::parse_bucket_key(key) {
                        t.refolded.insert(layout::shard_of(start));
                    }
                }
                Some(&layout::NS_DELTA) => {
                    if let Some(&shard) = key.get(1) {
                        match value {
                            Some(v) => t.deltas.entry(usize::from(shard)).or_default().push((key.clone(), v.clone())),
                            None => {
                                t.refolded.insert(usize::from(shard));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        t
    }
}

/// Everything an apply holds: no write-back, reclamation, transaction or
/// page stream runs meanwhile.
struct Exclusive<'e> {
    flush: MutexGuard<'e, ()>,
    _readers: RwLockWriteGuard<'e, ()>,
    /// Not taken by a verify, whose capture takes it itself.
    _gate: Option<RwLockWriteGuard<'e, ()>>,
}

impl Engine {
    /// A new bitmap id: sled's next one, above the id floor (ids a master
    /// this store followed handed out).
    pub(crate) fn new_id(&self) -> Result<u64> {
        let id = self.store.next_id()?.saturating_add(self.follow.id_floor.load(Ordering::SeqCst));
        self.follow.ids_high.fetch_max(id, Ordering::SeqCst);
        Ok(id)
    }

    /// The frame of `writes` for the change feed, if one is kept. Made
    /// before the batch is applied (it consumes the writes); published by
    /// [`Engine::publish`] once the batch is in the store.
    pub(super) fn frame_of(&self, writes: &[Write]) -> Option<Vec<u8>> {
        if !self.follow.feed_on.load(Ordering::SeqCst) {
            return None;
        }
        let local = layout::follower_key();
        Some(encode_frame(self.follow.ids_high.load(Ordering::SeqCst), writes.iter().filter(|(k, _)| *k != local)))
    }

    /// Whether a change feed is kept (it starts and stops under the
    /// write-back lock).
    pub(super) fn feeding(&self) -> bool {
        self.follow.feed_on.load(Ordering::SeqCst)
    }

    /// Publishes a batch's frame (see [`Engine::frame_of`]). Called with the
    /// write-back lock held, after the batch is in the store: frames go
    /// out in the order their batches were applied.
    pub(super) fn publish(&self, frame: Option<Vec<u8>>) {
        if let Some(frame) = frame {
            if let Some(feed) = &*self.follow.feed.lock() {
                feed.push(frame);
            }
        }
    }

    /// Starts keeping a change feed whose next frame starts at `offset`
    /// (or returns the one kept, with its backlog set to `backlog_bytes`).
    pub(crate) fn start_feed(&self, offset: u64, backlog_bytes: usize) -> Result<Arc<Feed>> {
        let _f = self.flush_lock.lock();
        // Frames and snapshots carry the highest id handed out: one taken
        // now is above every id of the store, also those of earlier runs.
        self.new_id()?;
        let mut feed = self.follow.feed.lock();
        let f = feed.get_or_insert_with(|| Arc::new(Feed::new(offset, backlog_bytes)));
        f.set_backlog_bytes(backlog_bytes);
        self.follow.feed_on.store(true, Ordering::SeqCst);
        Ok(Arc::clone(f))
    }

    /// The change feed, if one is kept.
    pub(crate) fn feed(&self) -> Option<Arc<Feed>> {
        self.follow.feed.lock().clone()
    }

    /// Stops keeping the change feed.
    pub(crate) fn stop_feed(&self) {
        let _f = self.flush_lock.lock();
        self.follow.feed_on.store(false, Ordering::SeqCst);
        *self.follow.feed.lock() = None;
    }

    /// A snapshot of the store for a replica's full sync: its records as
    /// they are while it is read, consistent once the replica has applied
    /// the feed's frames from the snapshot's offset up to the feed's
    /// offset when the reading ended.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without a change feed.
    pub(crate) fn snapshot(&self) -> Result<Snapshot> {
        // With the write-back lock held, every batch the feed has
        // published is in the store and no other is being applied.
        let _f = self.flush_lock.lock();
        let feed = self.feed().ok_or_else(|| Error::InvalidArgument("no change feed is kept".into()))?;
        Ok(Snapshot::new(
            feed.offset(),
            self.follow.ids_high.load(Ordering::SeqCst),
            self.store.scan_prefix(&[]),
            layout::follower_key(),
        ))
    }

    /// The store's follower record, if it has one.
    ///
    /// # Errors
    /// [`Error::Corrupted`] for a damaged record; a store error.
    pub(crate) fn follower_record(&self) -> Result<Option<FollowerRecord>> {
        self.store.get(&layout::follower_key())?.map(|b| FollowerRecord::decode(&b)).transpose()
    }

    /// Whether the store is loading a master's snapshot.
    pub(crate) fn follow_loading(&self) -> bool {
        self.follow.loading()
    }

    /// Whether this engine follows a master.
    pub(crate) fn following(&self) -> bool {
        self.follow.on()
    }

    /// Makes this engine a follower: writes are refused from now on, and
    /// no write-back of its own runs.
    pub(crate) fn follow_on(&self) {
        self.follow.on.store(true, Ordering::SeqCst);
        // Transactions that began before they could see the flag are over
        // once these are free.
        drop(self.follow.lock.write());
        drop(self.gate.write());
        drop(self.flush_lock.lock());
    }

    /// Stops following: the store becomes the engine's own to write, and
    /// the delta records replayed from it are folded (as at open).
    ///
    /// # Errors
    /// As a write-back.
    pub(crate) fn follow_off(&self) -> Result<()> {
        let f = self.flush_lock.lock();
        if !self.follow.on() {
            return Ok(());
        }
        if let Some(mut r) = self.follower_record()? {
            r.state = FOLLOW_PROMOTED;
            r.id_floor = r.id_floor.max(self.follow.id_floor.load(Ordering::SeqCst));
            self.store.apply(vec![(layout::follower_key(), Some(r.encode()))])?;
        }
        self.follow.on.store(false, Ordering::SeqCst);
        self.write_back_locked(&f, super::metas::Fold::All)
    }

    /// Takes everything an apply needs held, waiting (without holding
    /// readers off for long) until no page stream is open.
    fn exclusive(&self) -> Exclusive<'_> {
        self.exclusive_with(true)
    }

    /// [`Engine::exclusive`], with the gate held or not.
    fn exclusive_with(&self, gate: bool) -> Exclusive<'_> {
        let flush = self.flush_lock.lock();
        loop {
            let readers = self.follow.lock.write();
            let deadline = std::time::Instant::now() + PIN_WAIT;
            while !self.pins.lock().is_empty() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
            if self.pins.lock().is_empty() {
                let gate = gate.then(|| self.gate.write());
                return Exclusive { flush, _readers: readers, _gate: gate };
            }
            // A stream's reader may be waiting for a transaction: let it
            // finish.
            drop(readers);
            std::thread::sleep(PIN_WAIT);
        }
    }

    /// Raises the id floor to cover `ids_high`, a master's highest id.
    fn raise_floor(&self, ids_high: u64) {
        self.follow.id_floor.fetch_max(ids_high, Ordering::SeqCst);
        self.follow.ids_high.fetch_max(ids_high, Ordering::SeqCst);
    }

    /// The follower record for `replid` at `offset` in `state`.
    fn record_write(&self, replid: &str, offset: u64, state: u8) -> Write {
        let r = FollowerRecord {
            state,
            offset,
            id_floor: self.follow.id_floor.load(Ordering::SeqCst),
            replid: replid.to_string(),
        };
        (layout::follower_key(), Some(r.encode()))
    }

    /// Applies a master's frames (each with the feed offset it ends at,
    /// in order) in one batch with the follower record, then rebuilds the
    /// in-memory state from the store.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when not following; [`Error::Corrupted`]
    /// for a frame that does not decode (nothing is applied); a store error.
    pub(crate) fn apply_frames(&self, replid: &str, frames: &[(u64, &[u8])]) -> Result<()> {
        let Some(&(end, _)) = frames.last() else { return Ok(()) };
        if !self.follow.on() {
            return Err(Error::InvalidArgument("not following a master".into()));
        }
        let mut writes = Vec::new();
        let mut high = 0;
        for (_, f) in frames {
            let (ids, w) = decode_frame(f)?;
            high = high.max(ids);
            writes.extend(w.into_iter().filter(|(k, _)| *k != layout::follower_key()));
        }
        let ex = self.exclusive();
        self.raise_floor(high);
        let touched = Touched::of(&writes);
        writes.push(self.record_write(replid, end, FOLLOW_CONSISTENT));
        let frame = self.frame_of(&writes);
        self.store.apply(writes).inspect_err(|e| self.poison(e))?;
        self.publish(frame);
        // Should the memory not follow the batch, it is rebuilt whole; if
        // that fails too, the engine is poisoned: its memory no longer
        // matches its store.
        if self.absorb(&ex, touched).is_err() {
            self.reload(&ex).inspect_err(|e| self.poison(e))?;
        }
        if self.durability() == crate::Durability::Always {
            self.store.sync()?;
            self.record_side_sequence()?;
        }
        Ok(())
    }

    /// Brings the in-memory state in line with a batch just applied to
    /// the store, touching only what the batch touched (see [`Touched`]);
    /// the result is what [`Engine::reload`] would build.
    fn absorb(&self, ex: &Exclusive<'_>, mut t: Touched) -> Result<()> {
        // Replayed in key order: write-back order, then part order.
        t.page_deltas.sort_unstable();
        for records in t.deltas.values_mut() {
            records.sort_unstable();
        }
        if let Some(b) = t.catalog {
            self.keyspaces.reload(&Catalog::decode(&b)?);
        }
        if let Some(b) = t.sequence {
            self.sequence.store(record::decode_sequence(&b, "<sequence>")?, Ordering::SeqCst);
        }
        for id in &t.bitmaps {
            self.dirs.remove(*id);
        }
        self.pages.forget_clean(&t.pages);
        if t.page_fold {
            // The master folded its page deltas: every page they changed
            // was written whole.
            self.pages.clear_all();
            *self.page_log.lock() = super::pagedelta::PageLog::default();
            self.replay_page_deltas_locked(&ex.flush)?;
        } else if !t.page_deltas.is_empty() {
            let mut log = super::pagedelta::PageLog::default();
            self.replay_page_records(t.page_deltas, &mut log)?;
            let mut page_log = self.page_log.lock();
            page_log.keys.extend(log.keys);
            page_log.bytes += log.bytes;
            page_log.fold_owed = true;
        }
        for &shard in &t.refolded {
            self.metas.reset_shard(shard);
            let records: Records = self
                .store
                .scan_prefix(&[layout::NS_DELTA, u8::try_from(shard).unwrap_or(u8::MAX)])
                .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Result<_>>()?;
            self.replay_shard(shard, records)?;
        }
        for (shard, records) in t.deltas {
            if !t.refolded.contains(&shard) {
                self.replay_shard(shard, records)?;
            }
        }
        Ok(())
    }

    /// Replaces the store's contents with a master's: empties it, then
    /// applies what `next` yields (the snapshot's chunks, its end, and the
    /// feed's frames from `offset` on) until the store is consistent,
    /// and rebuilds the in-memory state. Returns the offset reached.
    /// Readers wait meanwhile. If it fails or the process stops midway,
    /// the follower record says the store is loading: it must load again.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when not following or for items out of
    /// order; what `next` returns; as [`Engine::apply_frames`].
    pub(crate) fn load(&self, replid: &str, offset: u64, next: &mut dyn FnMut() -> Result<SyncItem>) -> Result<u64> {
        if !self.follow.on() {
            return Err(Error::InvalidArgument("not following a master".into()));
        }
        let ex = self.exclusive();
        // From here the store is not consistent until the load ends: the
        // record says so first (a restart loads again, and nothing reads
        // it meanwhile), and the side file must not claim more than it
        // will hold.
        self.follow.loading.store(true, Ordering::SeqCst);
        let mut at = offset;
        let mut consistent_at = None;
        self.store.apply(vec![self.record_write(replid, at, FOLLOW_LOADING)])?;
        self.store.sync()?;
        self.reset_side_sequence()?;
        self.wipe()?;
        // The emptied store holds no write-back number: a flush must not
        // record the old one in the side file.
        self.sequence.store(0, Ordering::SeqCst);
        self.journal.clear();
        self.clear_memory();
        while consistent_at.is_none_or(|c| at < c) {
            let (writes, high) = match next()? {
                SyncItem::Chunk(chunk) => {
                    let (high, w) = decode_frame(&chunk)?;
                    (w, high)
                }
                SyncItem::End { consistent_at: c } => {
                    if c < offset {
                        return Err(Error::InvalidArgument(format!("snapshot ends at {c}, before its start {offset}")));
                    }
                    consistent_at = Some(c);
                    continue;
                }
                SyncItem::Frame { end, frame } => {
                    if consistent_at.is_none() {
                        return Err(Error::InvalidArgument("a frame before the snapshot's end".into()));
                    }
                    let (high, w) = decode_frame(&frame)?;
                    at = end;
                    (w, high)
                }
            };
            self.raise_floor(high);
            let mut writes: Vec<Write> = writes.into_iter().filter(|(k, _)| *k != layout::follower_key()).collect();
            writes.push(self.record_write(replid, at, FOLLOW_LOADING));
            self.store.apply(writes).inspect_err(|e| self.poison(e))?;
        }
        self.store.sync()?;
        self.reload(&ex)?;
        self.store.apply(vec![self.record_write(replid, at, FOLLOW_CONSISTENT)])?;
        self.store.sync()?;
        self.record_side_sequence()?;
        self.follow.loading.store(false, Ordering::SeqCst);
        Ok(at)
    }

    /// [`Engine::verify`] of a follower: the checks run on the store with
    /// the writes of a full fold laid over it (a follower may not fold its
    /// master's delta records), and the memory is rebuilt from the store
    /// afterwards (the fold's capture changed its marks). Applies wait
    /// meanwhile.
    ///
    /// # Errors
    /// As [`Engine::verify`].
    pub(crate) fn verify_follower(&self) -> Result<crate::VerifyReport> {
        let ex = self.exclusive_with(false);
        let report = self
            .fold_writes(&ex.flush, super::metas::Fold::All)
            .and_then(|writes| self.check_store(&Overlay::new(&*self.store, writes)));
        self.reload(&ex)?;
        report
    }

    /// Removes every record of the store but the superblock, the catalog
    /// (both overwritten by the master's) and the follower position (which
    /// says the store is loading): the store stays one that opens, as a
    /// follower that must load again.
    fn wipe(&self) -> Result<()> {
        let keep = [layout::superblock_key(), layout::catalog_key(), layout::follower_key()];
        loop {
            let keys: Vec<Write> = self
                .store
                .scan_prefix(&[])
                .filter(|r| r.as_ref().map_or(true, |(k, _)| !keep.iter().any(|kept| kept[..] == k[..])))
                .take(WIPE_BATCH)
                .map(|r| r.map(|(k, _)| (k.to_vec(), None)))
                .collect::<Result<_>>()?;
            if keys.is_empty() {
                return Ok(());
            }
            self.store.apply(keys)?;
        }
    }

    /// Forgets every cached page, bucket, directory and delta record.
    fn clear_memory(&self) {
        self.metas.clear_all();
        self.pages.clear_all();
        self.dirs.clear_all();
        *self.page_log.lock() = super::pagedelta::PageLog::default();
    }

    /// Rebuilds the in-memory state from the store, as opening it would
    /// (without folding: a follower writes nothing of its own).
    fn reload(&self, ex: &Exclusive<'_>) -> Result<()> {
        let catalog = super::writeback::read_catalog(&*self.store)?;
        if catalog.key_hash != self.metas.key_hash() {
            return Err(Error::InvalidArgument(
                "the master hashes keys by another scheme than this store; copy the master with `bitsled compact` first".into(),
            ));
        }
        let sequence = match self.store.get(&layout::sequence_key())? {
            Some(b) => record::decode_sequence(&b, "<sequence>")?,
            None => 0,
        };
        self.clear_memory();
        self.keyspaces.reload(&catalog);
        self.sequence.store(sequence, Ordering::SeqCst);
        self.replay_page_deltas_locked(&ex.flush)?;
        self.replay_deltas_locked(&ex.flush)
    }
}

/// A store with writes laid over it, unapplied: reads see the writes
/// (a follower's `verify`); it refuses writes of its own.
struct Overlay<'s> {
    base: &'s dyn Store,
    over: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'s> Overlay<'s> {
    fn new(base: &'s dyn Store, writes: Vec<Write>) -> Overlay<'s> {
        Overlay { base, over: writes.into_iter().collect() }
    }

    /// `base` merged with the overlay's writes `over` (in key order, the
    /// keys `base` covers).
    fn merged<'o>(base: Scan, over: impl Iterator<Item = (&'o Vec<u8>, &'o Option<Vec<u8>>)>) -> Scan {
        let over: Vec<Write> = over.map(|(k, v)| (k.clone(), v.clone())).collect();
        Box::new(Merge { base: base.peekable(), over: over.into_iter().peekable() })
    }
}

/// A store scan merged with the overlay's writes in key order.
struct Merge {
    base: std::iter::Peekable<Scan>,
    over: std::iter::Peekable<std::vec::IntoIter<Write>>,
}

impl Iterator for Merge {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.base.peek(), self.over.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) | (Some(Ok(_)), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(Ok((b, _))), Some((o, _))) => b[..].cmp(&o[..]),
            };
            match order {
                std::cmp::Ordering::Less => return self.base.next(),
                // The overlay's write replaces the stored record.
                std::cmp::Ordering::Equal => drop(self.base.next()),
                std::cmp::Ordering::Greater => {}
            }
            if let Some((k, Some(v))) = self.over.next() {
                return Some(Ok((Bytes::from(k), Bytes::from(v))));
            }
        }
    }
}

impl Store for Overlay<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        match self.over.get(key) {
            Some(v) => Ok(v.clone().map(Bytes::from)),
            None => self.base.get(key),
        }
    }

    fn scan(&self, from: &[u8], to: &[u8]) -> Scan {
        Overlay::merged(self.base.scan(from, to), self.over.range(from.to_vec()..=to.to_vec()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Scan {
        let within = self.over.range(prefix.to_vec()..).take_while(|(k, _)| k.starts_with(prefix));
        Overlay::merged(self.base.scan_prefix(prefix), within)
    }

    fn last_at_or_before(&self, key: &[u8]) -> Result<Option<(Bytes, Bytes)>> {
        // Not on a verify's path: a merged scan of the key's namespace.
        let first = key.first().map_or(Vec::new(), |b| vec![*b]);
        let mut last = None;
        for r in self.scan(&first, key) {
            last = Some(r?);
        }
        Ok(last)
    }

    fn apply(&self, _writes: Vec<Write>) -> Result<()> {
        Err(Error::Internal("a verify's overlay store was written to".into()))
    }

    fn next_id(&self) -> Result<u64> {
        Err(Error::Internal("a verify's overlay store was asked for an id".into()))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        self.base.size_on_disk()
    }

    fn is_empty(&self) -> bool {
        self.base.is_empty() && self.over.values().all(Option::is_none)
    }

    fn available_bytes(&self) -> Result<Option<u64>> {
        self.base.available_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::store::SledStore;

    /// Invariant: an overlay reads as the store would after its writes
    /// were applied (puts, replacements and removes; get, scan and
    /// prefix scan), and leaves the store as it was.
    #[test]
    fn an_overlay_reads_as_the_applied_writes() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (plain, applied) =
            (SledStore::open(a.path(), 1 << 20).unwrap(), SledStore::open(b.path(), 1 << 20).unwrap());
        let base: Vec<Write> = (0u8..40).map(|i| (vec![i % 3, i], Some(vec![i]))).collect();
        plain.apply(base.clone()).unwrap();
        applied.apply(base).unwrap();
        let writes: Vec<Write> = (0u8..60)
            .step_by(3)
            .map(|i| (vec![i % 3 + 1, i], if i % 2 == 0 { None } else { Some(vec![i, i]) }))
            .collect();
        applied.apply(writes.clone()).unwrap();
        let over = Overlay::new(&plain, writes);
        let all = |s: &dyn Store| -> Vec<(Vec<u8>, Vec<u8>)> {
            s.scan_prefix(&[]).map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap()).collect()
        };
        assert_eq!(all(&over), all(&applied));
        for p in 0u8..4 {
            let prefix =
                |s: &dyn Store| -> Vec<Vec<u8>> { s.scan_prefix(&[p]).map(|r| r.unwrap().0.to_vec()).collect() };
            assert_eq!(prefix(&over), prefix(&applied));
            let range =
                |s: &dyn Store| -> Vec<Vec<u8>> { s.scan(&[p, 10], &[p, 30]).map(|r| r.unwrap().0.to_vec()).collect() };
            assert_eq!(range(&over), range(&applied));
        }
        for i in 0u8..60 {
            for ns in 0u8..4 {
                assert_eq!(over.get(&[ns, i]).unwrap(), applied.get(&[ns, i]).unwrap(), "{ns}/{i}");
            }
        }
        assert!(over.apply(Vec::new()).is_err());
        assert_eq!(plain.scan_prefix(&[]).count(), 40);
    }
}
