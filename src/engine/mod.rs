//! The storage engine: the store, the key layout and record formats, the
//! in-memory caches and the write-back, and the one way operations reach
//! keys, [`Engine::read`] and [`Engine::write`] transactions.
//!
//! ```text
//!  ops (src/ops)  ── Engine::read / Engine::write ──▶ ReadTx / WriteTx   tx.rs
//!                 ── Engine::begin_build ──────────▶ Build              build.rs
//!                 ── ReadTx::stream ───────────────▶ PageStream         stream.rs
//!                                   │
//!       in memory: MetaCache (metas.rs), PageCache (pages.rs),
//!                  Directories (dirs.rs), Journal (journal.rs),
//!                  Claims (claims.rs), expiry regions (due.rs), pins, builds
//!                                   │ write-back: one atomic batch   writeback.rs
//!                                   │ (then built pages in batches)
//!                                   ▼
//!       Store trait (store.rs) ── sled, one tree; key layout layout.rs,
//!                                  record formats record.rs
//! ```
//!
//! The fields of [`Engine`] are private to this module tree: the locking
//! protocol (gate, claims, key locks, expiry, type checks) lives in `tx.rs`
//! and nowhere else.

#![deny(clippy::cast_possible_truncation)]

mod bloombits;
mod bucket;
mod build;
mod claims;
mod clock;
mod databases;
mod delta;
mod dirs;
mod due;
mod entry;
mod expiry;
#[cfg(any(test, feature = "testing"))]
pub(crate) mod fault;
pub(crate) mod flat;
#[cfg(test)]
mod fold_tests;
mod follow;
mod generation;
mod hashmemo;
pub(crate) mod idhash;
mod journal;
mod keys;
mod keyspaces;
pub(crate) mod layout;
mod metas;
mod pagedelta;
#[cfg(test)]
mod pagedelta_tests;
mod pages;
mod pagewrites;
mod prefetch;
mod probemap;
pub(crate) mod record;
mod settings;
#[cfg(test)]
mod slot_tests;
mod space;
mod stats;
pub(crate) mod store;
mod stored;
mod stream;
mod tx;
mod upgrade;
mod verify;
mod watch;
mod writeback;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

pub(crate) use build::{Build, NewValue};
pub(crate) use claims::Claim;
pub use databases::DbCounts;
pub(crate) use databases::WatchSet;
pub use expiry::Sweep;
pub(crate) use record::{Kind, Meta, INLINE_MAX};
pub use space::DiskShortage;
pub use stats::{KeyStats, MemoryStats};
pub(crate) use stream::{PageStream, Reading};
pub(crate) use tx::{read_bytes, ReadTx, WriteTx};
pub use verify::{Problem, VerifyReport};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::page::Page;
use claims::Claims;
use dirs::Directories;
use journal::Journal;
use keyspaces::Keyspaces;
use metas::{Fold, MetaCache};
use pages::{Fetched, PageCache};
use settings::Settings;
use space::SpaceGuard;
use store::{SledStore, Store};
use watch::Watches;

/// Dirty pages past which a writer asks the background thread for an early
/// write-back (see [`Engine::after_change`]).
const DIRTY_RECORDS: usize = 16_384;

/// Record bytes the metadata buckets may grow by (new keys' entries) before
/// a writer asks the background thread for an early write-back. sled
/// copies a batch and serialises it into its log buffers before it writes
/// any of it, and the allocator keeps much of that memory afterwards: a
/// load of 10^6 new Bloom filters put 79 and 93 MB of delta records in
/// its first two write-backs (a second of changes each, mostly new
/// entries), and each left the resident set 200-250 MiB higher; its later
/// 4.6 MB batches moved it by 0-3 MiB (BENCHMARKS.md, "Smaller first
/// write-backs"). Writes that keep entries' sizes do not count, so loads
/// that change existing keys keep their one write-back a second.
///
/// Each write-back has a cost of its own besides its records: a delta
/// record in nearly every shard, each a change to a different sled leaf,
/// and, while folds wait, a second write-back at once. At 16 MiB the
/// 10^7-key sign-in load (about 24 MB of new entries a second) took two
/// to three write-backs a second instead of one, wrote about a fifth more
/// and left 533-578 MiB on disk against 383-398 MiB with no early
/// write-back; at 32 MiB it writes as much as with none and leaves 391-418
/// MiB, and the Bloom load's largest batch in a logged run was 35.7 MB
/// (BENCHMARKS.md, "Heap thresholds again").
const DELTA_GROWTH_BYTES: usize = 32 << 20;

/// Metadata buckets the expiry sweeper reads per call.
const SWEEP_BUCKETS: u64 = 64;

/// How often the background thread runs the expiry sweeper, and for how
/// long at most (Redis's active expiry runs 10 times a second and takes
/// at most a quarter of the time too).
const SWEEP_INTERVAL: Duration = Duration::from_millis(100);
const SWEEP_TIME: Duration = Duration::from_millis(25);

/// The storage engine behind a [`crate::Db`]: shared by every clone of the
/// handle and by the background thread (through a weak reference).
pub(crate) struct Engine {
    store: Box<dyn Store>,
    config: Config,
    /// The budgets and the durability policy, changeable while open.
    settings: Settings,
    pages: PageCache,
    metas: MetaCache,
    /// Databases, their keyspaces and counts.
    keyspaces: Keyspaces,
    watches: Watches,
    /// Directories of stored pages per bitmap.
    dirs: Directories,
    journal: Journal,
    /// Held shared by every write transaction, exclusively while a
    /// write-back captures the dirty state: a write-back sees whole
    /// transactions only.
    gate: RwLock<()>,
    /// Keys claimed by a BITOP that reads its own destination.
    claims: Claims,
    /// Bitmap ids being read by a page stream, with the number of streams.
    /// Their pages are neither reclaimed nor discarded meanwhile.
    pins: Mutex<HashMap<u64, usize>>,
    /// Serialises write-backs and reclamation.
    flush_lock: Mutex<()>,
    /// Number of the last write-back applied to the store.
    sequence: AtomicU64,
    /// Number last recorded in the side file; its lock serialises the
    /// durability barriers (see `Engine::flush`).
    side_sequence: Mutex<u64>,
    /// The page delta records in the store (changed only by write-backs).
    page_log: Mutex<pagedelta::PageLog>,
    /// Bitmap ids being built by a running operation (not yet published):
    /// added when a build begins, removed by the transaction that
    /// publishes it (under the gate) or when the build is dropped.
    building: Mutex<HashSet<u64>>,
    /// Set after a failed store write; every later write is refused.
    poisoned: Mutex<Option<String>>,
    /// Set once `poisoned` holds a reason (it never clears): the write
    /// path reads this flag, not the lock.
    is_poisoned: AtomicBool,
    /// Holds write-backs (and so writes) back while the disk is short of space.
    space: SpaceGuard,
    /// Keys deleted because their expiry passed, since open.
    expired: AtomicU64,
    /// Called with (database, key) for each key deleted because it expired.
    pub(crate) expired_listener: parking_lot::RwLock<Option<crate::ExpiredListener>>,
    /// Where the next expiry sweep starts among the live keyspaces.
    sweep_start: AtomicUsize,
    /// Live `Db` handles: when the last goes, the background thread is
    /// stopped and joined on the dropping thread (see [`Engine::release`]).
    handles: AtomicUsize,
    /// Changes of keys since open (Redis's dirty counter): one per key a
    /// write signals as changed, and the keys a FLUSHDB or FLUSHALL drops.
    changes: AtomicU64,
    /// Replication: following a master, or keeping a change feed.
    follow: follow::Follow,
    /// Wakes the background thread: to stop, or to write back early.
    signal: Arc<(Mutex<Signal>, Condvar)>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

/// The bytes of buckets an ordinary write-back is counted as folding when
/// the disk's room is checked: its fold batch ([`metas::FOLD_BATCH`]) and
/// a fold under pressure, which relieves whatever passed the budget, with
/// room to spare.
const AUTO_FOLD_ESTIMATE: usize = 64 << 20;

/// Requests to the background thread.
#[derive(Default)]
struct Signal {
    stop: bool,
    /// The dirty budget is exceeded, or folds wait: write back now.
    kick: bool,
}

impl Engine {
    /// Opens (or creates) the database `config` describes, on sled.
    pub(crate) fn open(config: Config) -> Result<Arc<Engine>> {
        let store = SledStore::open(&config.path, config.store_cache_bytes)?;
        Engine::open_caught(config, Box::new(store))
    }

    /// [`Engine::open_on`], with a panic of the store turned into an error:
    /// the reads at open (superblock, catalog, delta records, reclaim
    /// markers) can meet damage sled only notices by panicking, and that is
    /// an error naming the store, as a panic in sled's own open is.
    fn open_caught(config: Config, store: Box<dyn Store>) -> Result<Arc<Engine>> {
        let dir = config.path.clone();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Engine::open_on(config, store)))
            .unwrap_or_else(|payload| Err(store::panicked(&dir, &*payload)))
    }

    /// Opens the engine over `store`: checks (or writes) the superblock and
    /// the durable write-back number, reclaims what a crash left behind,
    /// deletes keys that expired while closed, and starts the background
    /// thread.
    fn open_on(config: Config, store: Box<dyn Store>) -> Result<Arc<Engine>> {
        let opened = writeback::check_or_create(&config.path, &*store, config.databases)?;
        let follower = store.get(&layout::follower_key())?.map(|b| record::FollowerRecord::decode(&b)).transpose()?;
        let cache_bytes = usize::try_from(config.cache_bytes).unwrap_or(usize::MAX);
        let engine = Arc::new(Engine {
            sequence: AtomicU64::new(opened.sequence),
            side_sequence: Mutex::new(opened.acked),
            page_log: Mutex::new(pagedelta::PageLog::default()),
            store,
            // The two caches share `cache_bytes` (see `balance_caches`).
            pages: PageCache::new(cache_bytes),
            metas: MetaCache::new(cache_bytes).with_clock(config.clock.clone()).with_key_hash(opened.catalog.key_hash),
            keyspaces: Keyspaces::from_catalog(&opened.catalog),
            watches: Watches::default(),
            // A directory entry costs 8 bytes; allow an eighth of the budget.
            dirs: Directories::new(cache_bytes / 64),
            journal: Journal::new(),
            gate: RwLock::new(()),
            claims: Claims::default(),
            pins: Mutex::new(HashMap::new()),
            flush_lock: Mutex::new(()),
            building: Mutex::new(HashSet::new()),
            poisoned: Mutex::new(None),
            is_poisoned: AtomicBool::new(false),
            space: SpaceGuard::new(config.disk_reserve_bytes),
            expired: AtomicU64::new(0),
            expired_listener: parking_lot::RwLock::new(None),
            sweep_start: AtomicUsize::new(0),
            handles: AtomicUsize::new(0),
            changes: AtomicU64::new(0),
            follow: follow::Follow::new(follower.as_ref()),
            signal: Arc::new((Mutex::new(Signal::default()), Condvar::new())),
            flusher: Mutex::new(None),
            settings: Settings::new(&config),
            config,
        });
        // Before anything reads a stored bucket: delta records may hold
        // newer metadata than the buckets.
        // A store that stopped while loading a master's snapshot holds a
        // part of it: nothing in it is replayed; it loads again.
        if !engine.follow.loading() {
            engine.replay_deltas()?;
            engine.replay_page_deltas()?;
        }
        engine.reclaim_at_open()?;
        // Keys that expired while the database was closed are invisible
        // already; the background sweeper deletes them (`expiry.rs`).
        if engine.config.background_flush_interval().is_some() {
            engine.metas.tick();
            let weak = Arc::downgrade(&engine);
            let signal = Arc::clone(&engine.signal);
            let handle = std::thread::Builder::new()
                .name("bitsled-flush".into())
                .spawn(move || background_flush(&weak, &signal))?;
            *engine.flusher.lock() = Some(handle);
        }
        Ok(engine)
    }

    /// The hash of key `name` in this store (DESIGN.md section 3, "The
    /// key hash").
    pub(crate) fn key_hash(&self, name: &[u8]) -> u32 {
        let scheme = self.metas.key_hash();
        hashmemo::recall(scheme, name).unwrap_or_else(|| scheme.of(name))
    }

    /// The configuration the engine was opened with.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The durability policy now (see [`Engine::set_durability`]).
    pub(crate) fn durability(&self) -> crate::Durability {
        self.settings.durability()
    }

    /// See [`crate::Db::set_durability`].
    pub(crate) fn set_durability(&self, d: crate::Durability) {
        self.settings.set_durability(d);
        // The background thread picks up the new interval when it wakes.
        self.signal.1.notify_all();
    }

    /// See [`crate::Db::release_memory`].
    pub(crate) fn release_memory(&self) -> Result<()> {
        self.write_back()?;
        self.balance_caches();
        Ok(())
    }

    /// See [`crate::Db::set_budgets`].
    pub(crate) fn set_budgets(&self, cache_bytes: u64, dirty_bytes: u64) -> Result<()> {
        self.settings.set_budgets(cache_bytes, dirty_bytes);
        // Smaller budgets take effect now: dirty data past them is written
        // back (which lets the caches evict it), clean data evicted.
        self.after_change()
    }

    /// The current time by the configured clock, Unix milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        self.config.clock.now_ms()
    }

    /// Bytes the store occupies on disk.
    pub(crate) fn size_on_disk(&self) -> Result<u64> {
        self.store.size_on_disk()
    }

    /// Refuses writes after a failed store write, and while the disk is
    /// short of space (checking again: freed space lifts the refusal).
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.follow.on() {
            return Err(Error::ReadOnlyReplica);
        }
        if self.is_poisoned.load(Ordering::Acquire) {
            if let Some(why) = &*self.poisoned.lock() {
                return Err(Error::Poisoned(why.clone()));
            }
        }
        if self.space.is_short() {
            self.check_space(Fold::Auto, 0)?;
        }
        Ok(())
    }

    /// Checks that the disk has room for a write-back of what is held in
    /// memory now, folding as `fold` says, `extra` bytes more, and the
    /// reserve (see `space.rs`). The estimate counts the dirty pages and
    /// the pinned metadata a fold may write whole (an ordinary write-back
    /// is counted as folding up to [`AUTO_FOLD_ESTIMATE`]; delta records
    /// are smaller than the buckets they change), three times over for the growth of
    /// sled's log, and the logged pages a page fold writes whole, once;
    /// the reserve is for what this does not see.
    fn check_space(&self, fold: Fold, extra: u64) -> Result<()> {
        let pinned = self.metas.pinned_bytes();
        let metadata = match fold {
            Fold::Auto => pinned.min(AUTO_FOLD_ESTIMATE),
            Fold::All | Fold::Shard(_) => pinned,
        };
        let changed = u64::try_from(self.pages.dirty_bytes().saturating_add(metadata)).unwrap_or(u64::MAX);
        let logged = u64::try_from(self.pages.logged_bytes()).unwrap_or(u64::MAX);
        let pending = space::write_back_bytes(changed, logged);
        self.space.check(&*self.store, pending.saturating_add(extra), self.now_ms())
    }

    /// Whether a write-back has anything to write: dirty pages, changed
    /// metadata, journal records or a changed catalog mapping.
    fn has_pending_writes(&self) -> bool {
        self.pages.dirty_bytes() > 0
            || self.metas.changed_since_cut()
            || !self.journal.is_empty()
            || self.keyspaces.is_changed()
    }

    /// See [`crate::Db::check_disk_space`].
    pub(crate) fn check_disk_space(&self, extra: u64) -> Result<()> {
        self.check_space(Fold::Auto, extra)
    }

    /// The disk shortage holding writes back, if any.
    pub(crate) fn disk_shortage(&self) -> Option<DiskShortage> {
        self.space.shortage()
    }

    /// See [`crate::Db::set_disk_reserve`].
    pub(crate) fn set_disk_reserve(&self, bytes: u64) {
        self.space.set_reserve_bytes(bytes);
    }

    /// See [`crate::Db::disk_reserve`].
    pub(crate) fn disk_reserve(&self) -> u64 {
        self.space.reserve_bytes()
    }

    fn poison(&self, e: &Error) {
        self.poisoned.lock().get_or_insert_with(|| e.to_string());
        self.is_poisoned.store(true, Ordering::Release);
    }

    /// Claims `key` for this thread until the claim is dropped: other
    /// threads' write transactions on it wait. Transactions already running
    /// finish first. A thread holds at most one claim (see `claims.rs`).
    pub(crate) fn claim(&self, key: &[u8]) -> Claim<'_> {
        loop {
            if let Some(c) = {
                let _g = self.gate.write();
                self.claims.try_claim(key)
            } {
                return c;
            }
            self.claims.wait(&[key]);
        }
    }

    /// Past a dirty budget, asks the background thread for a write-back;
    /// past twice it (the background thread cannot keep up, or there is
    /// none), writes back itself. Trims the cache.
    ///
    /// Dirty pages are bounded by `dirty_bytes`, pinned metadata buckets
    /// (changed and not yet folded) by [`Engine::meta_budget`].
    fn after_change(&self) -> Result<()> {
        let page_budget = self.settings.dirty_bytes();
        let meta_budget = self.meta_budget();
        let (pages, metas) = (self.pages.dirty_bytes(), self.metas.pinned_bytes());
        let background = self.config.background_flush_interval().is_some();
        // sled applies a batch under its process-wide write lock, so every
        // store read waits for a write-back's batch: keep batches short in
        // records too (many tiny pages fill no byte budget).
        let records = self.pages.dirty_pages();
        let over = pages > page_budget || metas > meta_budget;
        if pages > page_budget.saturating_mul(2)
            || metas > meta_budget.saturating_add(page_budget)
            || (over && !background)
        {
            match self.write_back() {
                // This write is in memory and stays there: the shortage
                // refuses the next ones.
                Err(Error::DiskFull { .. }) => {}
                r => r?,
            }
        } else if over || (background && (records > DIRTY_RECORDS || self.metas.grown_since_cut() > DELTA_GROWTH_BYTES))
        {
            self.kick_background();
        }
        self.balance_caches();
        Ok(())
    }

    /// Whether one operation reading about `bytes` bytes of pages reads
    /// more than the page cache holds (then its streams should pass
    /// through it: [`PageStream::pass`]).
    pub(crate) fn reads_past_cache(&self, bytes: u64) -> bool {
        self.pages.exceeds(bytes)
    }

    /// Asks the background thread (if there is one) for a write-back now.
    pub(super) fn kick_background(&self) {
        let mut s = self.signal.0.lock();
        if !s.kick {
            s.kick = true;
            self.signal.1.notify_all();
        }
    }

    /// The bytes pinned metadata buckets (changed since their last fold) may
    /// take: what the page cache leaves of seven eighths of the cache
    /// budget, at least half of it and at least `dirty_bytes`. A pinned
    /// bucket occupies its cache slot as a clean one would, and every fold
    /// rewrites a shard's pinned buckets whole, so the longer buckets stay
    /// pinned, the more changes each rewrite carries (see DESIGN.md,
    /// write-back).
    pub(super) fn meta_budget(&self) -> usize {
        let page_budget = self.settings.dirty_bytes();
        let total = self.settings.cache_bytes();
        let left = (total / 8 * 7).saturating_sub(self.pages.bytes());
        page_budget.max(total / 2).max(left)
    }

    /// Shares the cache budget between pages and metadata buckets: each may
    /// take what the other leaves, but at least an eighth; then evicts
    /// from whichever is over.
    pub(super) fn balance_caches(&self) {
        let total = self.settings.cache_bytes();
        let floor = total / 8;
        self.pages.set_capacity(total.saturating_sub(self.metas.bytes()).max(floor));
        self.metas.set_capacity(total.saturating_sub(self.pages.bytes()).max(floor));
        self.pages.evict_if_needed();
        self.metas.evict_if_needed();
    }

    /// Reads and decodes a page from the store, with the other members of
    /// its group (see [`stored::fetch`]).
    fn fetch_page(&self, name: &[u8], bitmap: u64, page: u64) -> Result<Fetched> {
        stored::fetch(&*self.store, name, bitmap, page)
    }

    /// Page `page` of bitmap `bitmap` (owned by key `name`, for errors),
    /// through the cache. The caller holds the key's lock or a pin.
    fn page(&self, name: &[u8], bitmap: u64, page: u64) -> Result<Option<Arc<Page>>> {
        self.pages.get((bitmap, page), |_| self.fetch_page(name, bitmap, page))
    }

    /// Marks `bitmap` as being read: its pages are neither reclaimed nor
    /// discarded until [`Engine::unpin`]. Pin only an id read from live
    /// metadata while holding the key's lock, so the id cannot die between
    /// the read and the pin.
    fn pin(&self, bitmap: u64) {
        *self.pins.lock().entry(bitmap).or_insert(0) += 1;
    }

    /// Ends one [`Engine::pin`].
    fn unpin(&self, bitmap: u64) {
        let mut pins = self.pins.lock();
        if let Some(n) = pins.get_mut(&bitmap) {
            *n -= 1;
            if *n == 0 {
                pins.remove(&bitmap);
            }
        }
    }
}

/// The background thread: a durable flush every `interval`, the expiry
/// sweeper every [`SWEEP_INTERVAL`], and a write-back (without the sync)
/// whenever writers report the dirty budget exceeded, so they need not do
/// it themselves.
fn background_flush(weak: &Weak<Engine>, signal: &(Mutex<Signal>, Condvar)) {
    let mut last_flush = Instant::now();
    let mut next_sweep = Instant::now() + SWEEP_INTERVAL;
    let mut trimmer = crate::heap::Trimmer::default();
    loop {
        // The policy can change while open (`Engine::set_durability`
        // wakes this thread): its interval is read each round.
        let Some(interval) = weak.upgrade().and_then(|e| e.settings.flush_interval()) else { return };
        let next_flush = last_flush + interval;
        let kicked = {
            let mut s = signal.0.lock();
            if !s.stop && !s.kick {
                signal.1.wait_until(&mut s, next_flush.min(next_sweep));
            }
            if s.stop {
                return;
            }
            std::mem::take(&mut s.kick)
        };
        let Some(engine) = weak.upgrade() else { return };
        engine.metas.tick();
        // A failure poisons the engine; the next operation reports it.
        let now = Instant::now();
        if now >= next_flush {
            let _ = engine.flush();
            last_flush = Instant::now();
        } else if kicked {
            let _ = engine.write_back();
        }
        if now >= next_sweep {
            let start = Instant::now();
            while start.elapsed() < SWEEP_TIME && engine.sweep_expired(SWEEP_BUCKETS).is_ok_and(|s| !s.done) {}
            next_sweep = Instant::now() + SWEEP_INTERVAL;
        }
        // A failed step abandons the rewrite; the next trigger starts over.
        let keys = engine.keyspaces.live().iter().map(|(_, c)| c.get().0).sum();
        let _ = engine.store.maintain(keys);
        let m = engine.memory_stats();
        trimmer.round(m.page_cache_bytes + m.metadata_cache_bytes, m.budget_bytes);
    }
}

impl Engine {
    /// Counts a new `Db` handle.
    pub(crate) fn acquire(&self) {
        self.handles.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts a dropped `Db` handle. When it was the last, stops the
    /// background thread and waits for it: the thread holds the engine
    /// only while it works (a sweep, a flush), and without the wait the
    /// engine could be dropped there, closing the store after the caller
    /// went on (and, say, reopened the directory).
    pub(crate) fn release(&self) {
        if self.handles.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.stop_background();
        }
    }

    fn stop_background(&self) {
        self.signal.0.lock().stop = true;
        self.signal.1.notify_all();
        // The engine may be dropped on the background thread itself.
        let handle = self.flusher.lock().take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_background();
        // Dropped while a panic unwinds (the store panicked during the
        // open, say): writing would read the same store again, and a
        // second panic there would abort the process.
        if std::thread::panicking() {
            return;
        }
        // Best effort: a failure here has no caller to report to, and what
        // the last flush acknowledged is safe either way.
        let _ = self.flush();
    }
}

/// Decodes arbitrary bytes as a metadata bucket (keyspace and first hash
/// from the first 8 bytes), as a keyspace catalog, as a metadata delta
/// record (of the shard the first byte names) and as a page delta record,
/// under the key hash scheme the second byte's low bit picks; none may
/// panic,
/// and whatever decodes must encode to a record that decodes to the same
/// value. The bytes are tried again with their CRC trailer recomputed, so
/// random input also reaches the checks behind the checksum.
#[cfg(feature = "testing")]
pub(crate) fn check_record_decode(data: &[u8]) {
    let Some((head, rest)) = data.split_first_chunk::<8>() else { return };
    let ks = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let start = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    let hash = if head[1] & 1 == 0 { layout::KeyHash::Slot } else { layout::KeyHash::Murmur };
    let mut sealed = rest.to_vec();
    crate::page::check::reseal(&mut sealed);
    for bytes in [rest, &sealed[..]] {
        if let Ok(b) = bucket::Bucket::decode(hash, ks, start, bytes) {
            let again = bucket::Bucket::decode(hash, ks, start, &b.encode()).expect("an encoded bucket decodes");
            assert_eq!(again, b, "bucket round trip");
        }
        if let Ok(c) = record::Catalog::decode(bytes) {
            assert_eq!(record::Catalog::decode(&c.encode()).expect("an encoded catalog decodes"), c);
        }
        let shard = usize::from(head[0]);
        if let Ok(entries) = delta::decode(hash, shard, "fuzz", bytes) {
            let again: Vec<delta::DeltaEntry> = delta::encode(&entries)
                .iter()
                .flat_map(|p| delta::decode(hash, shard, "fuzz", p).expect("an encoded delta decodes"))
                .collect();
            assert_eq!(again, delta::in_record_order(&entries), "delta round trip");
        }
        if let Ok((high, writes)) = crate::replication::decode_frame(bytes) {
            let again = crate::replication::encode_frame(high, writes.iter());
            assert_eq!(crate::replication::decode_frame(&again).expect("an encoded frame decodes"), (high, writes));
        }
        if let Ok(r) = record::FollowerRecord::decode(bytes) {
            assert_eq!(record::FollowerRecord::decode(&r.encode()).expect("an encoded position decodes"), r);
        }
        if let Ok(deltas) = pagedelta::decode("fuzz", bytes) {
            let again: Vec<pagedelta::PageDelta> = pagedelta::encode(&deltas)
                .iter()
                .flat_map(|p| pagedelta::decode("fuzz", p).expect("an encoded page delta decodes"))
                .collect();
            assert_eq!(again, deltas, "page delta round trip");
        }
    }
}
