//! The database handle, its configuration, the write-back of dirty state and
//! the reclamation of dead bitmaps.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use crate::cache::{Directories, DirtyPage, Journal, JournalEntry, MetaCache, MetaGuard, PageCache};
use crate::claims::{Claim, Claims};
use crate::error::{Error, Result};
use crate::key;
use crate::meta::{self, Kind, Meta};
use crate::ops::stream::PageStream;
use crate::page::Page;
use crate::store::{SledStore, Store, Write};

/// Default byte budget of the decoded-page cache: 512 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 512 << 20;
/// Default byte budget of changes held in memory before a write-back: 64 MiB.
pub const DEFAULT_DIRTY_BYTES: u64 = 64 << 20;
/// Default interval of the background flush: 1 second.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Default largest value `get` builds in memory: 512 MiB (Redis's string limit).
pub const DEFAULT_MAX_VALUE_BYTES: u64 = 512 << 20;
/// Default byte budget of sled's own page cache: 64 MiB.
pub const DEFAULT_STORE_CACHE_BYTES: u64 = 64 << 20;

/// Dirty pages and metadata entries past which a writer asks the background
/// thread for an early write-back (see `Inner::after_change`).
const DIRTY_RECORDS: usize = 16_384;

/// Expired keys deleted per background tick (and per round at open).
const SWEEP_BATCH: usize = 1000;

/// Reclamation deletes a dead bitmap's pages in batches of this many.
const RECLAIM_BATCH: usize = 512;

/// The source of the current time, Unix milliseconds.
#[derive(Clone)]
pub(crate) struct Clock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

fn system_clock_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// Configuration of a database; build one with [`Config::new`], then
/// [`Config::open`].
///
/// ```
/// # fn main() -> bitsled::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = bitsled::Config::new(dir.path())
///     .cache_bytes(64 << 20)
///     .flush_interval(None)
///     .open()?;
/// db.setbit(b"k", 7, true)?;
/// assert_eq!(db.get(b"k")?, Some(vec![0x01]));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct Config {
    path: PathBuf,
    cache_bytes: u64,
    pub(crate) dirty_bytes: u64,
    store_cache_bytes: u64,
    flush_interval: Option<Duration>,
    pub(crate) max_value_bytes: u64,
    clock: Clock,
}

impl Config {
    /// A configuration for the database in directory `path` (created if
    /// missing), with every other setting at its default.
    pub fn new(path: impl AsRef<Path>) -> Config {
        Config {
            path: path.as_ref().to_path_buf(),
            cache_bytes: DEFAULT_CACHE_BYTES,
            dirty_bytes: DEFAULT_DIRTY_BYTES,
            store_cache_bytes: DEFAULT_STORE_CACHE_BYTES,
            flush_interval: Some(DEFAULT_FLUSH_INTERVAL),
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            clock: Clock(Arc::new(system_clock_ms)),
        }
    }

    /// Byte budget of decoded pages kept in memory (clean ones are evicted
    /// past it). Default [`DEFAULT_CACHE_BYTES`].
    pub fn cache_bytes(mut self, bytes: u64) -> Config {
        self.cache_bytes = bytes;
        self
    }

    /// Byte budget of changed pages held in memory. Past it, the background
    /// thread writes them back to the store (without a durability barrier);
    /// past twice the budget, or without a background thread, the writing
    /// operation does it itself. Default [`DEFAULT_DIRTY_BYTES`].
    pub fn dirty_bytes(mut self, bytes: u64) -> Config {
        self.dirty_bytes = bytes;
        self
    }

    /// Byte budget of sled's own cache of encoded pages. Default
    /// [`DEFAULT_STORE_CACHE_BYTES`].
    pub fn store_cache_bytes(mut self, bytes: u64) -> Config {
        self.store_cache_bytes = bytes;
        self
    }

    /// How often a background thread runs [`Db::flush`]; `None` disables it
    /// (then only explicit flushes, the dirty budget and dropping the last
    /// handle write changes). Default [`DEFAULT_FLUSH_INTERVAL`].
    pub fn flush_interval(mut self, interval: Option<Duration>) -> Config {
        self.flush_interval = interval;
        self
    }

    /// Largest value [`Db::get`] builds in memory. Default
    /// [`DEFAULT_MAX_VALUE_BYTES`].
    pub fn max_value_bytes(mut self, bytes: u64) -> Config {
        self.max_value_bytes = bytes;
        self
    }

    /// The clock that decides when keys expire: a function returning the
    /// current Unix time in milliseconds. Default: the system clock. Tests
    /// pass a controllable one.
    pub fn clock(mut self, now_ms: impl Fn() -> u64 + Send + Sync + 'static) -> Config {
        self.clock = Clock(Arc::new(now_ms));
        self
    }

    /// Opens the database.
    ///
    /// Cost: reads the superblock and deletes the pages of bitmaps that a
    /// crash left unreferenced; pages are read on demand.
    ///
    /// # Errors
    /// [`Error::UnsupportedVersion`] or [`Error::Corrupted`] for a store this
    /// build cannot read; [`Error::Io`]/[`Error::Storage`] if the directory
    /// cannot be opened (for example, locked by another process).
    pub fn open(self) -> Result<Db> {
        Db::open_with(self)
    }
}

/// A handle to an open database. Cheap to clone; all clones share one
/// database and may be used from any thread.
///
/// # Durability
/// Every operation changes the in-memory state at once and is visible to all
/// handles, but reaches the disk only through a write-back: [`Db::flush`], the
/// background flush every [`Config::flush_interval`], a write-back forced by
/// the dirty budget, or dropping the last handle. A crash (kill -9, power
/// loss) keeps exactly the state of the last write-back that completed: every
/// write-back is one atomic batch, so the state after recovery is the state
/// at one moment between two operations, never a mix. What [`Db::flush`]
/// acknowledged is never lost; the window of loss without it is the flush
/// interval (1 s by default) plus the time of one write-back.
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.inner.config.path).finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) store: Box<dyn Store>,
    pub(crate) config: Config,
    pub(crate) pages: PageCache,
    pub(crate) metas: MetaCache,
    /// Directories of stored pages per bitmap.
    pub(crate) dirs: Directories,
    journal: Journal,
    /// Held shared by every visible change, exclusively while a write-back
    /// captures the dirty state: a write-back sees whole operations only.
    gate: RwLock<()>,
    /// Keys claimed by a BITOP that reads its own destination.
    claims: Claims,
    /// Bitmap ids being read by a page stream, with the number of streams.
    /// Their pages are neither reclaimed nor discarded meanwhile.
    pins: Mutex<HashMap<u64, usize>>,
    /// Serialises write-backs and reclamation.
    pub(crate) flush_lock: Mutex<()>,
    /// Number of the last write-back applied to the store.
    sequence: AtomicU64,
    /// Number last recorded in the side file.
    side_sequence: AtomicU64,
    /// Bitmap ids being built by a running operation (not yet published).
    building: Mutex<HashSet<u64>>,
    /// Set after a failed store write; every later write is refused.
    poisoned: Mutex<Option<String>>,
    /// Wakes the background thread: to stop, or to write back early.
    signal: Arc<(Mutex<Signal>, Condvar)>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

impl Db {
    /// Opens (or creates) the database in directory `path` with the default
    /// [`Config`].
    ///
    /// # Errors
    /// As [`Config::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Db> {
        Config::new(path).open()
    }

    fn open_with(config: Config) -> Result<Db> {
        let store = SledStore::open(&config.path, config.store_cache_bytes)?;
        match store.get(&key::superblock_key())? {
            Some(b) => meta::check_superblock(&b)?,
            // A new store's superblock is made durable, and then the side
            // file written, before anything else: an empty store beside a
            // side file means sled dropped damaged records. Do not start
            // afresh over them. (Without a side file, creation itself was
            // cut short, and nothing was ever acknowledged.)
            None if store.is_empty() && read_side_sequence(&config.path)?.is_some() => {
                return Err(Error::Corrupted {
                    key: "<store>".into(),
                    page: None,
                    reason: format!(
                        "sled recovered no records from a {}-byte log (damaged?), but this database was created \
                         and flushed before; refusing to create a new database over it: restore the directory \
                         from a backup, or remove it to start afresh",
                        store.log_file_len()
                    ),
                });
            }
            None if store.is_empty() => {
                store.apply(vec![(key::superblock_key(), Some(meta::encode_superblock()))])?;
                store.sync()?;
                write_side_sequence(&config.path, 0)?;
            }
            None => {
                return Err(Error::Corrupted {
                    key: "<superblock>".into(),
                    page: None,
                    reason: "store has records but no bitsled superblock".into(),
                })
            }
        }
        // Every write-back carries its number; every flush records the
        // number it made durable in a side file. A store behind its side
        // file lost acknowledged writes (sled drops a damaged log's tail).
        let stored_seq = match store.get(&key::sequence_key())? {
            Some(b) => meta::decode_sequence(&b)?,
            None => 0,
        };
        if let Some(acked) = read_side_sequence(&config.path)? {
            if acked > stored_seq {
                return Err(Error::Corrupted {
                    key: "<store>".into(),
                    page: None,
                    reason: format!(
                        "the store holds write-back {stored_seq} but a flush acknowledged write-back {acked}: \
                         acknowledged writes were lost (damaged log?); restore the directory from a backup"
                    ),
                });
            }
        }
        let cache_bytes = usize::try_from(config.cache_bytes).unwrap_or(usize::MAX);
        let inner = Arc::new(Inner {
            sequence: AtomicU64::new(stored_seq),
            side_sequence: AtomicU64::new(u64::MAX),
            store: Box::new(store),
            pages: PageCache::new(cache_bytes),
            metas: MetaCache::new(cache_bytes / 8),
            // A directory entry costs 8 bytes; allow an eighth of the budget.
            dirs: Directories::new(cache_bytes / 64),
            journal: Journal::new(),
            gate: RwLock::new(()),
            claims: Claims::default(),
            pins: Mutex::new(HashMap::new()),
            flush_lock: Mutex::new(()),
            building: Mutex::new(HashSet::new()),
            poisoned: Mutex::new(None),
            signal: Arc::new((Mutex::new(Signal::default()), Condvar::new())),
            flusher: Mutex::new(None),
            config,
        });
        {
            let _f = inner.flush_lock.lock();
            inner.reclaim()?;
        }
        // Keys that expired while the database was closed.
        while inner.sweep_expired(SWEEP_BATCH)? == SWEEP_BATCH {
            inner.write_back()?;
        }
        if let Some(interval) = inner.config.flush_interval {
            let weak = Arc::downgrade(&inner);
            let signal = Arc::clone(&inner.signal);
            let handle = std::thread::Builder::new()
                .name("bitsled-flush".into())
                .spawn(move || background_flush(&weak, &signal, interval))?;
            *inner.flusher.lock() = Some(handle);
        }
        Ok(Db { inner })
    }

    /// Writes every change made so far to the store and makes it durable.
    ///
    /// When it returns `Ok`, everything done before the call survives a crash
    /// or kill -9. Cost: one atomic batch with every changed page and key,
    /// then a sync of the store's log file.
    ///
    /// # Errors
    /// [`Error::Storage`]/[`Error::Io`] if the store cannot write; the handle
    /// is then poisoned ([`Error::Poisoned`]).
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// The directory of this database.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.inner.config.path
    }

    /// Bytes the store occupies on disk (sled's accounting).
    ///
    /// # Errors
    /// [`Error::Storage`] if the store cannot report it.
    pub fn size_on_disk(&self) -> Result<u64> {
        self.inner.store.size_on_disk()
    }
}

/// The side file recording the last write-back a flush made durable.
const SEQUENCE_FILE: &str = "bitsled.seq";

/// The sequence number in the side file, if there is one.
fn read_side_sequence(dir: &Path) -> Result<Option<u64>> {
    match std::fs::read(dir.join(SEQUENCE_FILE)) {
        Ok(b) => meta::decode_sequence(&b).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Records durably that write-back `seq` is on disk: a new file, synced,
/// renamed over the old one, and the directory synced.
fn write_side_sequence(dir: &Path, seq: u64) -> Result<()> {
    use std::io::Write as _;
    let tmp = dir.join("bitsled.seq.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&meta::encode_sequence(seq))?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(SEQUENCE_FILE))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// Requests to the background thread.
#[derive(Default)]
struct Signal {
    stop: bool,
    /// The dirty budget is exceeded: write back now.
    kick: bool,
}

/// The background thread: a durable flush every `interval`, and a
/// write-back (without the sync) whenever writers report the dirty budget
/// exceeded, so they need not do it themselves.
fn background_flush(weak: &Weak<Inner>, signal: &(Mutex<Signal>, Condvar), interval: Duration) {
    let mut next_flush = std::time::Instant::now() + interval;
    loop {
        let kicked = {
            let mut s = signal.0.lock();
            if !s.stop && !s.kick {
                signal.1.wait_until(&mut s, next_flush);
            }
            if s.stop {
                return;
            }
            std::mem::take(&mut s.kick)
        };
        let Some(inner) = weak.upgrade() else { return };
        // A failure poisons the handle; the next operation reports it.
        if std::time::Instant::now() >= next_flush {
            let _ = inner.sweep_expired(SWEEP_BATCH);
            let _ = inner.flush();
            next_flush = std::time::Instant::now() + interval;
        } else if kicked {
            let _ = inner.write_back();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.signal.0.lock().stop = true;
        self.signal.1.notify_all();
        // The last handle may be dropped on the flush thread itself.
        if let Some(h) = self.flusher.lock().take() {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
        // Best effort: a failure here has no caller to report to, and what
        // the last flush acknowledged is safe either way.
        let _ = self.flush();
    }
}

impl Inner {
    pub(crate) fn check_writable(&self) -> Result<()> {
        match &*self.poisoned.lock() {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// Runs one visible change to `keys`: `f` runs while write-backs are
    /// held off, so they capture all of it or none of it, and once no other
    /// thread claims one of `keys` (see [`Inner::claim`]). Afterwards,
    /// writes back if the dirty budget is exceeded.
    pub(crate) fn write<R>(&self, keys: &[&[u8]], f: impl FnOnce() -> Result<R>) -> Result<R> {
        self.check_writable()?;
        let r = loop {
            let g = self.gate.read();
            if self.claims.blocks(keys) {
                drop(g);
                self.claims.wait(keys);
                continue;
            }
            break f();
        };
        self.after_change()?;
        r
    }

    /// Claims `key` for this thread until the claim is dropped: other
    /// threads' writes to it wait. Writes already running finish first.
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

    /// Past the dirty budget, asks the background thread for a write-back;
    /// past twice the budget (the background thread cannot keep up, or
    /// there is none), writes back itself. Trims the cache.
    pub(crate) fn after_change(&self) -> Result<()> {
        let budget = usize::try_from(self.config.dirty_bytes).unwrap_or(usize::MAX);
        let dirty = self.pages.dirty_bytes();
        let background = self.config.flush_interval.is_some();
        // sled applies a batch under its process-wide write lock, so every
        // store read waits for a write-back's batch: keep batches short in
        // records too (many tiny keys fill no byte budget).
        let records = self.pages.dirty_pages() + self.metas.dirty_entries();
        if dirty > budget.saturating_mul(2) || (dirty > budget && !background) {
            self.write_back()?;
        } else if dirty > budget || (background && records > DIRTY_RECORDS) {
            let mut s = self.signal.0.lock();
            if !s.kick {
                s.kick = true;
                self.signal.1.notify_all();
            }
        }
        self.pages.evict_if_needed();
        Ok(())
    }

    pub(crate) fn flush(&self) -> Result<()> {
        self.write_back()?;
        // Read before the sync: everything up to it is then durable.
        let seq = self.sequence.load(Ordering::SeqCst);
        self.store.sync().inspect_err(|e| self.poison(e))?;
        if self.side_sequence.swap(seq, Ordering::SeqCst) != seq {
            write_side_sequence(&self.config.path, seq).inspect_err(|e| self.poison(e))?;
        }
        Ok(())
    }

    fn poison(&self, e: &Error) {
        self.poisoned.lock().get_or_insert_with(|| e.to_string());
    }

    /// Writes every dirty page, key and journal record to the store in one
    /// atomic batch, then reclaims dead bitmaps.
    pub(crate) fn write_back(&self) -> Result<()> {
        let f = self.flush_lock.lock();
        self.write_back_locked(&f)
    }

    /// [`Inner::write_back`] with the write-back lock already held.
    pub(crate) fn write_back_locked(&self, _flush_lock: &MutexGuard<'_, ()>) -> Result<()> {
        self.check_writable()?;
        let (pages, metas, journal, building) = {
            let _g = self.gate.write();
            // `building` is read under the gate too, and after the journal:
            // starting a build (not gated) adds to `building` before it
            // journals the build's marker, so every build whose marker is
            // captured is in the captured `building` unless it has ended.
            // Publishing changes the journal under the gate.
            let pages = self.pages.dirty_snapshot();
            let journal = self.journal.snapshot();
            let building = self.building.lock().clone();
            (pages, self.metas.dirty_snapshot(), journal, building)
        };
        if pages.is_empty() && metas.is_empty() && journal.is_empty() {
            return Ok(());
        }
        let pages = self.drop_dead_pages(pages, &journal, &building);
        let mut writes: Vec<Write> = Vec::with_capacity(pages.len() + metas.len() + journal.len() + 1);
        // Write-backs are serialised by `flush_lock`, so this is the next number.
        let seq = self.sequence.load(Ordering::SeqCst) + 1;
        writes.push((key::sequence_key(), Some(meta::encode_sequence(seq))));
        for p in &pages {
            let k = key::page_key(p.id.0, p.id.1).to_vec();
            writes.push((k, p.page.as_ref().map(|page| page.encode())));
        }
        for m in &metas {
            writes.push((key::meta_key(&m.name), m.meta.map(|meta| meta.encode())));
        }
        for (k, _, v) in &journal {
            writes.push((k.clone(), v.clone()));
        }
        self.store.apply(writes).inspect_err(|e| self.poison(e))?;
        self.sequence.store(seq, Ordering::SeqCst);
        let stored: Vec<(u64, u64, bool)> = pages.iter().map(|p| (p.id.0, p.id.1, p.page.is_some())).collect();
        self.dirs.apply(&stored);
        self.pages.mark_clean(&pages);
        self.metas.mark_clean(&metas);
        self.journal.mark_clean(&journal);
        self.reclaim().inspect_err(|e| self.poison(e))?;
        self.pages.evict_if_needed();
        Ok(())
    }

    /// Removes from a captured write-back the pages of bitmaps that died
    /// before ever being written (a BITOP result overwritten by the next
    /// one, a key deleted soon after it was set): their reclaim marker is in
    /// this same batch, so writing them would only make work for the
    /// reclaimer. Skipped while a multi-page reader might still read them.
    fn drop_dead_pages(
        &self,
        pages: Vec<DirtyPage>,
        journal: &[JournalEntry],
        building: &HashSet<u64>,
    ) -> Vec<DirtyPage> {
        let dead: HashSet<u64> = journal
            .iter()
            .filter(|(_, _, v)| v.is_some())
            .filter_map(|(k, _, _)| key::parse_reclaim_key(k))
            .filter(|id| !building.contains(id))
            .collect();
        if dead.is_empty() {
            return pages;
        }
        let pins = self.pins.lock();
        let dead: HashSet<u64> = dead.into_iter().filter(|id| !pins.contains_key(id)).collect();
        drop(pins);
        let (gone, keep): (Vec<DirtyPage>, Vec<DirtyPage>) = pages.into_iter().partition(|p| dead.contains(&p.id.0));
        let ids: Vec<_> = gone.iter().map(|p| p.id).collect();
        self.pages.discard(&ids);
        keep
    }

    /// Marks `bitmap` as being read: its pages are neither reclaimed nor
    /// discarded until [`Inner::unpin`]. Pin only an id read from live
    /// metadata while holding the key's lock, so the id cannot die between
    /// the read and the pin.
    pub(crate) fn pin(&self, bitmap: u64) {
        *self.pins.lock().entry(bitmap).or_insert(0) += 1;
    }

    /// Ends one [`Inner::pin`].
    pub(crate) fn unpin(&self, bitmap: u64) {
        let mut pins = self.pins.lock();
        if let Some(n) = pins.get_mut(&bitmap) {
            *n -= 1;
            if *n == 0 {
                pins.remove(&bitmap);
            }
        }
    }

    /// Deletes the pages of every bitmap id with a reclaim marker in the
    /// store, unless a running operation still builds it or a newer marker
    /// state waits in the journal, or a stream reads it. Called with
    /// `flush_lock` held.
    fn reclaim(&self) -> Result<()> {
        let markers: Vec<u64> = self
            .store
            .scan_prefix(&[key::NS_RECLAIM])
            .map(|r| r.map(|(k, _)| key::parse_reclaim_key(&k)))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        // Deletions of many ids share batches; an id's marker is queued
        // after its pages, and batches apply in order, so a marker never
        // goes before the pages it stands for.
        let mut batch: Vec<Write> = Vec::with_capacity(RECLAIM_BATCH);
        for id in markers {
            // Order matters: publishing removes the journal marker before it
            // leaves `building`.
            if self.building.lock().contains(&id)
                || self.journal.contains(&key::reclaim_key(id))
                || self.pins.lock().contains_key(&id)
            {
                continue;
            }
            self.dirs.remove(id);
            let (from, to) = key::page_range(id, 0, u64::MAX);
            for r in self.store.scan(&from, &to) {
                let (k, _) = r?;
                batch.push((k.to_vec(), None));
                if batch.len() >= RECLAIM_BATCH {
                    self.store.apply(std::mem::take(&mut batch))?;
                }
            }
            batch.push((key::reclaim_key(id), None));
            if batch.len() >= RECLAIM_BATCH {
                self.store.apply(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            self.store.apply(batch)?;
        }
        Ok(())
    }

    /// The metadata of `name` with the shard locked by `g`. A key whose
    /// expiry has passed is absent: it is deleted on the spot.
    pub(crate) fn meta_locked(&self, g: &mut MetaGuard<'_>, name: &[u8]) -> Result<Option<Meta>> {
        let m = match g.cached(name) {
            Some(m) => m,
            None => {
                let m = match self.store.get(&key::meta_key(name))? {
                    Some(b) => Some(Meta::decode(name, &b)?),
                    None => None,
                };
                g.insert_clean(name, m);
                m
            }
        };
        match m {
            Some(meta) if meta.expire_at_ms != 0 && meta.expire_at_ms <= self.now_ms() => {
                // The reclaim marker goes first: if a write-back captures
                // only it, the stored key is still expired (so absent) and
                // losing its pages is harmless; the other order could leak
                // the pages.
                self.journal.set(key::reclaim_key(meta.id), Some(Vec::new()));
                g.set(name, None);
                Ok(None)
            }
            m => Ok(m),
        }
    }

    /// The current time by the configured clock, Unix milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        (self.config.clock.0)()
    }

    /// Records in the expiry index that `name` may expire at `at_ms`. Stale
    /// entries (the key changed its expiry or went away) are dropped by the
    /// sweeper, which always checks the key itself.
    pub(crate) fn index_expiry(&self, name: &[u8], at_ms: u64) {
        self.journal.set(key::expiry_key(at_ms, name), Some(Vec::new()));
    }

    /// Deletes up to `limit` keys whose expiry has passed, following the
    /// expiry index, and drops the index entries it visits. Returns how many
    /// index entries it processed.
    pub(crate) fn sweep_expired(&self, limit: usize) -> Result<usize> {
        let now = self.now_ms();
        let (lo, hi) = (key::expiry_key(0, b""), key::expiry_key(now.saturating_add(1), b""));
        let mut due: Vec<Vec<u8>> = Vec::new();
        for r in self.store.scan(&lo, &hi).take(limit) {
            let (k, _) = r?;
            if key::parse_expiry_key(&k).is_some_and(|(at, _)| at <= now) {
                due.push(k.to_vec());
            }
        }
        for k in &due {
            let Some((_, name)) = key::parse_expiry_key(k) else { continue };
            self.write(&[name], || {
                let mut g = self.metas.lock(name);
                // Deletes the key if it has expired; a key whose expiry moved
                // later keeps its newer index entry.
                self.meta_locked(&mut g, name)?;
                self.journal.set(k.clone(), None);
                Ok(())
            })?;
        }
        Ok(due.len())
    }

    /// The metadata of string key `name` under the lock `g`, or, if it is
    /// missing, that of a new empty string with a fresh bitmap id (not yet
    /// recorded: the caller sets it once it has written).
    pub(crate) fn string_meta_or_new(&self, g: &mut MetaGuard<'_>, name: &[u8]) -> Result<Meta> {
        match check_string(self.meta_locked(g, name)?)? {
            Some(m) => Ok(m),
            None => self.new_string_meta(),
        }
    }

    /// The metadata of a new, empty string key with a fresh bitmap id.
    pub(crate) fn new_string_meta(&self) -> Result<Meta> {
        Ok(Meta { kind: Kind::String, id: self.store.next_id()?, len: 0, ones: 0, expire_at_ms: 0 })
    }

    /// The length of key `name`'s value (described by `meta`) as a buffer
    /// size, or `TooLarge` past `max_value_bytes` (or the address space).
    pub(crate) fn value_len(&self, name: &[u8], meta: &Meta) -> Result<usize> {
        let limit = self.config.max_value_bytes;
        usize::try_from(meta.len).ok().filter(|_| meta.len <= limit).ok_or_else(|| Error::TooLarge {
            key: String::from_utf8_lossy(name).into_owned(),
            len: meta.len,
            limit: limit.min(usize::MAX as u64),
        })
    }

    /// The metadata of `name`.
    pub(crate) fn meta(&self, name: &[u8]) -> Result<Option<Meta>> {
        let mut g = self.metas.lock(name);
        self.meta_locked(&mut g, name)
    }

    /// The metadata of a string key, or `WrongType`.
    pub(crate) fn string_meta(&self, name: &[u8]) -> Result<Option<Meta>> {
        check_string(self.meta(name)?)
    }

    /// The metadata of string key `name` and, when `pages(&meta)` names a
    /// page range, a stream over it. Both are taken under the key's lock,
    /// so the stream pins a live bitmap.
    pub(crate) fn meta_and_stream(
        self: &Arc<Self>,
        name: &[u8],
        pages: impl FnOnce(&Meta) -> Option<(u64, u64)>,
    ) -> Result<(Option<Meta>, Option<PageStream>)> {
        let mut g = self.metas.lock(name);
        let Some(meta) = check_string(self.meta_locked(&mut g, name)?)? else { return Ok((None, None)) };
        let stream = match pages(&meta) {
            Some((from, to)) => Some(PageStream::new(self, name, meta.id, from, to)?),
            None => None,
        };
        Ok((Some(meta), stream))
    }

    /// Reads and decodes a page from the store.
    pub(crate) fn fetch_page(&self, name: &[u8], bitmap: u64, page: u64) -> Result<Option<Page>> {
        match self.store.get(&key::page_key(bitmap, page))? {
            Some(bytes) => decode_page(name, page, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Page `page` of bitmap `bitmap` (owned by key `name`, for errors).
    pub(crate) fn page(&self, name: &[u8], bitmap: u64, page: u64) -> Result<Option<Arc<Page>>> {
        self.pages.get((bitmap, page), |_| self.fetch_page(name, bitmap, page))
    }

    /// Changes page `page` of bitmap `bitmap` with `f` (absent pages start
    /// all zero). The caller holds the key's lock.
    pub(crate) fn update_page<R>(
        &self,
        name: &[u8],
        bitmap: u64,
        page: u64,
        f: impl FnOnce(&mut Page) -> R,
    ) -> Result<R> {
        self.pages.update((bitmap, page), |_| self.fetch_page(name, bitmap, page), f)
    }

    /// Starts building a new bitmap that is invisible until published. If
    /// the operation fails or the process dies first, its pages are
    /// reclaimed.
    pub(crate) fn begin_build(&self) -> Result<Build<'_>> {
        self.check_writable()?;
        let id = self.store.next_id()?;
        self.building.lock().insert(id);
        self.journal.set(key::reclaim_key(id), Some(Vec::new()));
        Ok(Build { inner: self, id, published: false })
    }

    /// Replaces key `name` with `meta` (or deletes it) and marks the pages of
    /// the bitmap it held for reclamation. The caller holds the key's lock
    /// and the gate.
    pub(crate) fn replace_locked(&self, g: &mut MetaGuard<'_>, name: &[u8], meta: Option<Meta>) -> Result<bool> {
        let old = self.meta_locked(g, name)?;
        if let Some(old) = old {
            self.journal.set(key::reclaim_key(old.id), Some(Vec::new()));
        }
        if old.is_some() || meta.is_some() {
            g.set(name, meta);
        }
        Ok(old.is_some())
    }
}

/// A bitmap under construction; see [`Inner::begin_build`].
pub(crate) struct Build<'a> {
    inner: &'a Inner,
    pub(crate) id: u64,
    published: bool,
}

impl Build<'_> {
    /// Stores page `page` of the new bitmap (empty pages are skipped).
    pub(crate) fn put(&self, page: u64, p: Page) -> Result<()> {
        if !p.is_empty() {
            self.inner.pages.put((self.id, page), Some(p));
            self.inner.after_change()?;
        }
        Ok(())
    }

    /// Makes the new bitmap the value of `name` (or deletes `name` when
    /// `meta` is `None`), atomically.
    pub(crate) fn publish(self, name: &[u8], meta: Option<Meta>) -> Result<()> {
        self.publish_with(name, |_| meta)
    }

    /// As [`Build::publish`], with the new metadata computed from the key's
    /// current metadata (`None` if absent) under the key's lock.
    pub(crate) fn publish_with(self, name: &[u8], f: impl FnOnce(Option<&Meta>) -> Option<Meta>) -> Result<()> {
        self.publish_if(name, |old| Some(f(old))).map(|_| ())
    }

    /// The one publishing step: under the key's lock and the gate, `f` maps
    /// the key's current metadata to the new one, or to `None` to give up.
    pub(crate) fn publish_if(
        mut self,
        name: &[u8],
        f: impl FnOnce(Option<&Meta>) -> Option<Option<Meta>>,
    ) -> Result<bool> {
        let inner = self.inner;
        let done = inner.write(&[name], || {
            let mut g = inner.metas.lock(name);
            let old = inner.meta_locked(&mut g, name)?;
            let Some(meta) = f(old.as_ref()) else { return Ok(false) };
            inner.replace_locked(&mut g, name, meta)?;
            if meta.is_some() {
                inner.journal.set(key::reclaim_key(self.id), None);
            }
            Ok(true)
        })?;
        if done {
            self.published = true;
            inner.building.lock().remove(&self.id);
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
            self.inner.journal.set(key::reclaim_key(self.id), Some(Vec::new()));
            self.inner.building.lock().remove(&self.id);
        }
    }
}

/// `meta` if it is a string key, else `WrongType`.
pub(crate) fn check_string(meta: Option<Meta>) -> Result<Option<Meta>> {
    match meta {
        Some(m) if m.kind != Kind::String => Err(Error::WrongType),
        m => Ok(m),
    }
}

/// Decodes a stored page, naming key and page in the error.
pub(crate) fn decode_page(name: &[u8], page: u64, bytes: &[u8]) -> Result<Page> {
    Page::decode(bytes).map_err(|e| Error::Corrupted {
        key: String::from_utf8_lossy(name).into_owned(),
        page: Some(page),
        reason: e.to_string(),
    })
}
