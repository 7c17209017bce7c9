//! The database handle: [`Db`], cheap to clone and shared across threads.
//! Its bitmap, string, key and expiry operations are in `src/ops/`; this
//! file holds opening, durability and the whole-database operations.

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::engine::{DbCounts, Engine, KeyStats, MemoryStats, Sweep, VerifyReport, WatchSet};
use crate::error::{Error, Result};

/// A handle to one database of an open store. Cheap to clone; all clones
/// share the store and may be used from any thread. A store has several
/// numbered databases (Redis's `SELECT`; [`Config::databases`], 16 by
/// default); [`Db::open`] gives database 0 and [`Db::select`] another one.
///
/// # Durability
/// Every operation changes the in-memory state at once and is visible to all
/// handles, but reaches the disk only through a write-back: [`Db::flush`], the
/// background flush (every second by default; [`Config::durability`] sets the
/// policy, see [`crate::Durability`]), a write-back forced by the dirty
/// budget, or dropping the last handle. A crash (kill -9, power loss) keeps
/// exactly the state of the last write-back that completed: every write-back
/// is one atomic batch, so the state after recovery is the state at one moment
/// between two operations, never a mix. What [`Db::flush`] acknowledged is
/// never lost; the window of loss without it is the flush interval (1 s by
/// default) plus the time of one write-back.
pub struct Db {
    pub(crate) engine: Arc<Engine>,
    /// The database this handle works in.
    pub(crate) index: u32,
}

/// Where a key lies in the in-memory index, from [`Db::prefetch_index`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexHint {
    ks: u32,
    h: u32,
}

impl Db {
    /// A handle on `engine`'s database `index`, counted by the engine.
    pub(crate) fn handle(engine: Arc<Engine>, index: u32) -> Db {
        engine.acquire();
        Db { engine, index }
    }
}

impl Clone for Db {
    fn clone(&self) -> Db {
        Db::handle(Arc::clone(&self.engine), self.index)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.engine.release();
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.engine.config().path)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// A watch on some keys of one database; see [`Db::watch`]. Dropping it
/// ends the watch.
pub struct Watch(WatchSet);

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("changed", &self.changed()).finish()
    }
}

impl Watch {
    /// Whether a watched key was written (even with an unchanged value,
    /// where Redis counts the write, as for SET; a SETBIT that leaves the
    /// key as it was is not a write), deleted, or expired, or its database
    /// was flushed or swapped, since the watch began: a transaction relying
    /// on the watched keys must not run (Redis's EXEC after WATCH).
    #[must_use]
    pub fn changed(&self) -> bool {
        self.0.changed()
    }
}

impl Config {
    /// Opens the database.
    ///
    /// Cost: reads the superblock and deletes the pages of bitmaps that a
    /// crash left unreferenced; pages are read on demand.
    ///
    /// # Errors
    /// [`crate::Error::UnsupportedVersion`] or [`crate::Error::Corrupted`] for a store this
    /// build cannot read; [`crate::Error::Io`]/[`crate::Error::Storage`] if the directory
    /// cannot be opened (for example, locked by another process).
    pub fn open(self) -> Result<Db> {
        Db::open_with(self)
    }
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

    pub(crate) fn open_with(config: Config) -> Result<Db> {
        Ok(Db::handle(Engine::open(config)?, 0))
    }

    /// A handle to database `index` of the same store (Redis SELECT).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the store has no such database.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db0 = bitsled::Db::open(dir.path())?;
    /// let db3 = db0.select(3)?;
    /// db3.setbit(b"k", 1, true)?;
    /// assert!(!db0.exists(b"k")? && db3.exists(b"k")?);
    /// assert!(db0.select(16).is_err(), "16 databases by default");
    /// # Ok(()) }
    /// ```
    pub fn select(&self, index: u32) -> Result<Db> {
        if index >= self.engine.databases() {
            return Err(Error::InvalidArgument(format!("database {index} does not exist")));
        }
        Ok(Db::handle(Arc::clone(&self.engine), index))
    }

    /// The first of two prefetch steps for a command on `key` a few
    /// commands ahead: asks the CPU for the part of the in-memory index
    /// where a lookup of `key` starts. [`Db::prefetch_bucket`] of what it
    /// returns, a command later, asks for the key's bucket; the command on
    /// `key` after that then waits less for memory (on an index larger
    /// than the CPU's caches, each step of a lookup otherwise waits for
    /// main memory in turn). A server reading a pipeline of commands
    /// takes the steps for the commands behind the one it runs.
    ///
    /// Hints only: they change nothing, read nothing from disk and never
    /// fail. The first costs a hash of `key` and a read of the database
    /// table, the second an attempt at the key's shard lock (skipped if
    /// it is held). `None` for a database that does not exist, and on
    /// targets without a prefetch instruction (other than x86-64), where
    /// both steps do nothing.
    #[must_use]
    pub fn prefetch_index(&self, key: &[u8]) -> Option<IndexHint> {
        self.engine.prefetch_index(self.index, key).map(|(ks, h)| IndexHint { ks, h })
    }

    /// The second prefetch step (see [`Db::prefetch_index`]).
    pub fn prefetch_bucket(&self, hint: IndexHint) {
        self.engine.prefetch_bucket(hint.ks, hint.h);
    }

    /// The index of this handle's database.
    #[must_use]
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The number of databases of the store.
    #[must_use]
    pub fn databases(&self) -> u32 {
        self.engine.databases()
    }

    /// The longest value this handle builds in memory
    /// ([`crate::Config::max_value_bytes`]).
    #[must_use]
    pub fn max_value_bytes(&self) -> u64 {
        self.engine.config().max_value_bytes
    }

    /// The durability policy: the one the store was opened with
    /// ([`Config::durability`]) or set since ([`Db::set_durability`]).
    /// Under [`crate::Durability::Always`], whoever acknowledges writes
    /// calls [`Db::flush`] before it does (the Redis server reads the
    /// policy here).
    #[must_use]
    pub fn durability(&self) -> crate::Durability {
        self.engine.durability()
    }

    /// Changes the durability policy while open (the server's `CONFIG SET
    /// appendfsync`). The background flush follows the new policy's
    /// interval from now on, unless [`Config::flush_interval`] fixed one
    /// (or chose no background thread, which stays so). Changes made
    /// before the call are not flushed by it; call [`Db::flush`] for that.
    pub fn set_durability(&self, durability: crate::Durability) {
        self.engine.set_durability(durability);
    }

    /// Why writes are refused for want of disk space, if they are: what the
    /// last check found free and needed (see [`Config::disk_reserve_bytes`]).
    /// `None` once a check finds room again.
    pub fn disk_shortage(&self) -> Option<crate::DiskShortage> {
        self.engine.disk_shortage()
    }

    /// Checks now that the disk has room for a write-back of what is in
    /// memory, `extra` bytes more (what the caller is about to write, at
    /// most) and the reserve (see [`Config::disk_reserve_bytes`]). The
    /// server asks before every write under `appendfsync always`, so that
    /// a write it could not make durable is refused before it runs.
    ///
    /// # Errors
    /// [`Error::DiskFull`] (recorded: writes are refused until a check
    /// finds room); a store error reading the free space.
    pub fn check_disk_space(&self, extra: u64) -> Result<()> {
        self.engine.check_disk_space(extra)
    }

    /// Changes the free disk space write-backs leave untouched (see
    /// [`Config::disk_reserve_bytes`]); takes effect at the next check.
    pub fn set_disk_reserve(&self, bytes: u64) {
        self.engine.set_disk_reserve(bytes);
    }

    /// The free disk space write-backs leave untouched, bytes.
    pub fn disk_reserve(&self) -> u64 {
        self.engine.disk_reserve()
    }

    /// Makes what room it can in memory without losing anything: writes
    /// every change back to the store (without the sync of [`Db::flush`])
    /// and evicts clean pages and metadata down to the budgets. The
    /// server calls it before refusing a write for memory.
    ///
    /// # Errors
    /// As [`Db::flush`], if the write-back fails.
    pub fn release_memory(&self) -> Result<()> {
        self.engine.release_memory()
    }

    /// Changes the cache and dirty budgets while open (see
    /// [`Config::cache_bytes`] and [`Config::dirty_bytes`]; the server's
    /// `CONFIG SET maxmemory`). Smaller budgets take effect at once: clean
    /// pages and metadata past them are evicted, and changes past the
    /// dirty budget are written back. sled's own cache
    /// ([`Config::store_cache_bytes`]) keeps the size it was opened with.
    ///
    /// # Errors
    /// As [`Db::flush`], if the write-back this starts fails.
    pub fn set_budgets(&self, cache_bytes: u64, dirty_bytes: u64) -> Result<()> {
        self.engine.set_budgets(cache_bytes, dirty_bytes)
    }

    /// Writes every change made so far to the store and makes it durable.
    ///
    /// When it returns `Ok`, everything done before the call survives a crash
    /// or kill -9. Cost: one atomic batch with every changed page and key,
    /// then a sync of the store's log file.
    ///
    /// # Errors
    /// [`crate::Error::Storage`]/[`crate::Error::Io`] if the store cannot
    /// write; the handle is then poisoned ([`crate::Error::Poisoned`]).
    pub fn flush(&self) -> Result<()> {
        self.engine.flush()
    }

    /// The directory of this database.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.engine.config().path
    }

    /// Bytes the store occupies on disk (sled's accounting).
    ///
    /// # Errors
    /// [`crate::Error::Storage`] if the store cannot report it.
    pub fn size_on_disk(&self) -> Result<u64> {
        self.engine.size_on_disk()
    }

    /// Every key of this database matching the Redis glob `pattern` (`*`,
    /// `?`, `[a-z]`, `[^x]`, `\` escapes), in hash order (as a SCAN would
    /// return them).
    ///
    /// Cost: reads every key's metadata (as Redis's KEYS does).
    ///
    /// # Errors
    /// [`Error::Corrupted`] for damaged metadata; [`Error::Storage`].
    pub fn keys(&self, pattern: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.engine.keys(self.index, pattern)
    }

    /// One step of a scan over this database's keys (Redis SCAN): from
    /// `cursor` (0 to start), about `count` live keys (whole metadata
    /// buckets at a time, so sometimes more), and the cursor to continue
    /// from, 0 when the scan is complete.
    ///
    /// A cursor is a position in the keys' hash order, below 2^33: it stays
    /// valid across writes and restarts. Every key that exists for the
    /// whole scan is returned at least once; keys created or deleted
    /// meanwhile may or may not be; every call moves forward, so a scan
    /// ends.
    ///
    /// # Errors
    /// [`Error::Corrupted`] for damaged metadata; [`Error::Storage`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// for k in [&b"a"[..], b"b", b"c"] {
    ///     db.setbit(k, 0, true)?;
    /// }
    /// let mut seen = Vec::new();
    /// let mut cursor = 0;
    /// loop {
    ///     let (keys, next) = db.scan(cursor, 1)?;
    ///     seen.extend(keys);
    ///     if next == 0 {
    ///         break;
    ///     }
    ///     cursor = next;
    /// }
    /// seen.sort();
    /// assert_eq!(seen, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    /// # Ok(()) }
    /// ```
    pub fn scan(&self, cursor: u64, count: usize) -> Result<(Vec<Vec<u8>>, u64)> {
        self.engine.scan(self.index, cursor, count, &|_| true)
    }

    /// A step of a scan over the keys of one Redis Cluster slot
    /// ([`crate::slot::key_slot`]): up to about `count` keys from `cursor`
    /// on (0 starts) and the next cursor (0 when done). The cursor
    /// promises what [`Db::scan`]'s does, for the slot's keys.
    ///
    /// Cost: O(keys in the slot) in a store created by this build, whose
    /// key hash orders keys by slot ([`Db::slots_indexed`]); in a store
    /// created by a build before format 10, a scan of every key.
    ///
    /// # Errors
    /// As [`Db::scan`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// for k in [&b"{r17}:mon"[..], b"{r17}:tue", b"other"] {
    ///     db.setbit(k, 0, true)?;
    /// }
    /// let slot = bitsled::slot::key_slot(b"r17");
    /// let (mut keys, mut cursor) = (Vec::new(), 0);
    /// loop {
    ///     let (batch, next) = db.scan_slot(slot, cursor, 100)?;
    ///     keys.extend(batch);
    ///     if next == 0 {
    ///         break;
    ///     }
    ///     cursor = next;
    /// }
    /// keys.sort();
    /// assert_eq!(keys, vec![b"{r17}:mon".to_vec(), b"{r17}:tue".to_vec()]);
    /// assert!(db.slots_indexed());
    /// # Ok(()) }
    /// ```
    pub fn scan_slot(&self, slot: u16, cursor: u64, count: usize) -> Result<(Vec<Vec<u8>>, u64)> {
        self.engine.scan_slot(self.index, slot, cursor, count)
    }

    /// Whether [`Db::scan_slot`] walks only the slot's keys: true for
    /// stores created by this build (format 10 and later); a store created
    /// before keeps its key order, and a copy into a new store
    /// ([`Db::compact_into`], `bitsled compact`) gives it the slot order.
    pub fn slots_indexed(&self) -> bool {
        self.engine.slots_indexed()
    }

    /// The number of keys of this database (Redis DBSIZE), expired keys not
    /// yet deleted included, as in Redis.
    ///
    /// Cost: O(1): a counter kept with every change.
    ///
    /// # Errors
    /// None in practice (the database exists).
    pub fn dbsize(&self) -> Result<u64> {
        Ok(self.engine.counts(self.index)?.keys)
    }

    /// The key, expiry and TTL counts of this database (INFO keyspace).
    ///
    /// # Errors
    /// None in practice (the database exists).
    pub fn counts(&self) -> Result<DbCounts> {
        self.engine.counts(self.index)
    }

    /// Deletes keys whose expiry has passed, in every database, reading at
    /// most about `max_buckets` metadata buckets; returns what it did.
    ///
    /// Expired keys are invisible either way (every lookup checks the
    /// expiry); deleting them frees their records and makes DBSIZE exact.
    /// The background thread runs this ten times a second, for at most
    /// 25 ms each time; call it yourself when the database runs without one
    /// ([`crate::Config::flush_interval`] `None`), or to finish the work
    /// at once (`while !db.sweep_expired(1024)?.done {}`).
    ///
    /// Cost: the buckets read (from the cache or the store) and a write
    /// transaction per region with expired keys.
    ///
    /// # Errors
    /// [`Error::Corrupted`] for damaged metadata; [`Error::Storage`];
    /// [`Error::Poisoned`].
    pub fn sweep_expired(&self, max_buckets: u64) -> Result<Sweep> {
        self.engine.sweep_expired(max_buckets)
    }

    /// A random live key of this database (Redis RANDOMKEY), `None` if it
    /// is empty.
    ///
    /// # Errors
    /// [`Error::Corrupted`] for damaged metadata; [`Error::Storage`].
    pub fn random_key(&self) -> Result<Option<Vec<u8>>> {
        self.engine.random_key(self.index)
    }

    /// Deletes every key of this database (Redis FLUSHDB); returns how many
    /// there were.
    ///
    /// Cost: O(1): the database switches to a new empty keyspace in one
    /// change (durable with the next write-back, like any write), and the
    /// old keys' records are deleted in the background.
    ///
    /// # Errors
    /// [`Error::Poisoned`].
    pub fn flush_db(&self) -> Result<u64> {
        self.engine.flush_db(self.index)
    }

    /// Deletes every key of every database (Redis FLUSHALL); returns how
    /// many there were. O(1), as [`Db::flush_db`].
    ///
    /// # Errors
    /// [`Error::Poisoned`].
    pub fn flush_all(&self) -> Result<u64> {
        self.engine.flush_all()
    }

    /// Swaps databases `a` and `b` of the store (Redis SWAPDB): every
    /// handle of `a` sees `b`'s keys and the other way round. O(1).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a database that does not exist;
    /// [`Error::Poisoned`].
    pub fn swap_db(&self, a: u32, b: u32) -> Result<()> {
        self.engine.swap_db(a, b)
    }

    /// Watches `keys` of this database (Redis WATCH): [`Watch::changed`]
    /// tells whether any of them changed since.
    ///
    /// # Errors
    /// [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// let w = db.watch(&[b"balance"])?;
    /// assert!(!w.changed());
    /// db.setbit(b"balance", 3, true)?;
    /// assert!(w.changed());
    /// # Ok(()) }
    /// ```
    pub fn watch(&self, keys: &[&[u8]]) -> Result<Watch> {
        Ok(Watch(self.engine.watch(self.index, keys)?))
    }

    /// Checks every record in the store: the superblock, each key's metadata
    /// (checksum, fields), each page (checksum, header, structure), each
    /// Bloom filter's header (present, well formed, agreeing with the key's
    /// length), that no page holds bits past its key's length, that each
    /// key's stored count equals the sum over its pages, and that no page is
    /// left without a key. Writes pending changes back first so the store is
    /// complete.
    ///
    /// Cost: reads and decodes every record once.
    ///
    /// # Errors
    /// Only if the store cannot be read at all; damage is reported in the
    /// [`VerifyReport`], not as an error.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.engine.verify()
    }

    /// Changes of keys in every database since it was opened, as Redis
    /// counts them for `rdb_changes_since_last_save`: one for each key a
    /// write changed (a SETBIT that leaves the bit as it was counts
    /// nothing; MSET of two keys counts two), the keys a FLUSHDB or
    /// FLUSHALL drops, one for a SWAPDB; an expired key's deletion does not
    /// count.
    #[must_use]
    pub fn changes(&self) -> u64 {
        self.engine.changes()
    }

    /// Keys of every database deleted because their expiry passed (by a
    /// lookup or by the sweeper) since the database was opened (Redis's
    /// INFO `expired_keys`).
    #[must_use]
    pub fn expired_keys(&self) -> u64 {
        self.engine.expired_keys()
    }

    /// Sets (or, with `None`, removes) the function called with (database
    /// index, key name) for each key deleted because its expiry passed,
    /// whether a lookup or the background sweep found it. It runs on the
    /// deleting thread with the key's metadata shard locked, so it must
    /// not call back into the database (hand the event to another thread
    /// or a queue instead). One listener serves every database handle of
    /// the store.
    pub fn set_expired_listener(&self, listener: Option<crate::ExpiredListener>) {
        *self.engine.expired_listener.write() = listener;
    }

    /// The memory the caches hold now, and the configured budget (INFO
    /// memory). The store's own cache and the process's other memory are
    /// not included.
    #[must_use]
    pub fn memory_stats(&self) -> MemoryStats {
        self.engine.memory_stats()
    }

    /// About how many bytes `key` takes in the store (Redis MEMORY USAGE):
    /// its metadata entry and its encoded pages, before the store's own
    /// overhead; `None` if it does not exist. Unlike [`Db::key_stats`] it
    /// writes nothing back.
    ///
    /// Cost: reads every page of the key (through the cache).
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] if a page does not decode.
    pub fn memory_usage(&self, key: &[u8]) -> Result<Option<u64>> {
        self.engine.memory_usage(self.index, key)
    }

    /// How `key` is stored, or `None` if it does not exist. Writes pending
    /// changes back first, so the figures are those of the store.
    ///
    /// Cost: reads the header of every page of the key.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] if a page header does not validate.
    pub fn key_stats(&self, key: &[u8]) -> Result<Option<KeyStats>> {
        self.engine.key_stats(self.index, key)
    }

    /// The sum of [`Db::key_stats`] over every live key of this database,
    /// and the number of keys, in one pass over the metadata (`bitsled
    /// stats`).
    ///
    /// Cost: one write-back, then every metadata bucket once and every page
    /// record's key and header once.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] if a bucket or a page header does not
    /// validate.
    pub fn all_key_stats(&self) -> Result<(u64, KeyStats)> {
        self.engine.all_key_stats(self.index)
    }
}
