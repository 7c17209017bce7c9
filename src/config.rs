//! Configuration of a database: the memory budgets, the durability policy
//! (and the background flush it implies), the largest value built in
//! memory and the clock.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Default byte budget of the decoded-page cache: 512 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 512 << 20;
/// Default byte budget of changes held in memory before a write-back: 64 MiB.
pub const DEFAULT_DIRTY_BYTES: u64 = 64 << 20;
/// Interval of the background flush under [`Durability::Always`] and
/// [`Durability::EverySecond`] (the default): 1 second.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Interval of the background flush under [`Durability::Lazy`]: 30 seconds.
pub const LAZY_FLUSH_INTERVAL: Duration = Duration::from_secs(30);
/// Default largest value `get` builds in memory: 512 MiB (Redis's string limit).
pub const DEFAULT_MAX_VALUE_BYTES: u64 = 512 << 20;
/// Default byte budget of sled's own page cache: 64 MiB.
pub const DEFAULT_STORE_CACHE_BYTES: u64 = 64 << 20;
/// Default number of databases (Redis's `databases`): 16.
pub const DEFAULT_DATABASES: u16 = 16;
/// Default of [`Config::disk_reserve_bytes`]: 64 MiB.
pub const DEFAULT_DISK_RESERVE_BYTES: u64 = 64 << 20;

/// When changes become durable, and so what a crash (kill -9, power loss)
/// can lose; set with [`Config::durability`], read with
/// [`crate::Db::durability`]. Whatever the policy, [`crate::Db::flush`] is a barrier:
/// what it acknowledged is never lost, and a crash keeps the state of the
/// last completed write-back, never a mix of two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Every write is made durable before it is acknowledged: whoever
    /// acknowledges writes (the Redis server replying to a client) first
    /// waits for a [`crate::Db::flush`] that covers them, one flush for any number
    /// of writes (the server's group commit: one per pipelined batch,
    /// shared by concurrent clients). The library's own calls return before
    /// that flush, and the background flush runs every
    /// [`DEFAULT_FLUSH_INTERVAL`] as under [`Durability::EverySecond`].
    ///
    /// A crash loses nothing that was acknowledged; writes not yet
    /// acknowledged may or may not survive.
    Always,
    /// A background thread flushes every [`DEFAULT_FLUSH_INTERVAL`] (1 s).
    ///
    /// A crash loses at most the writes of the last second or so: the
    /// interval plus one write-back's time.
    #[default]
    EverySecond,
    /// A background thread flushes every [`LAZY_FLUSH_INTERVAL`] (30 s), for
    /// the fewest syncs; [`crate::Db::flush`] (the server's SAVE) makes a durable
    /// point in between.
    ///
    /// A crash loses up to the last 30 s of writes, plus one write-back's
    /// time.
    Lazy,
}

impl Durability {
    /// The interval of the background flush this policy runs.
    #[must_use]
    pub fn flush_interval(self) -> Duration {
        match self {
            Durability::Always | Durability::EverySecond => DEFAULT_FLUSH_INTERVAL,
            Durability::Lazy => LAZY_FLUSH_INTERVAL,
        }
    }
}

/// The source of the current time, Unix milliseconds.
#[derive(Clone)]
pub(crate) struct Clock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

impl Default for Clock {
    /// The system clock.
    fn default() -> Clock {
        Clock(Arc::new(system_clock_ms))
    }
}

impl Clock {
    /// The current time, Unix milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        (self.0)()
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
    pub(crate) path: PathBuf,
    pub(crate) cache_bytes: u64,
    pub(crate) dirty_bytes: u64,
    pub(crate) store_cache_bytes: u64,
    pub(crate) durability: Durability,
    /// An explicit background flush interval (`Some(None)`: no background
    /// thread), overriding the one `durability` implies.
    flush_interval: Option<Option<Duration>>,
    pub(crate) max_value_bytes: u64,
    pub(crate) databases: u16,
    pub(crate) clock: Clock,
    pub(crate) disk_reserve_bytes: u64,
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
            durability: Durability::default(),
            flush_interval: None,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            databases: DEFAULT_DATABASES,
            clock: Clock::default(),
            disk_reserve_bytes: DEFAULT_DISK_RESERVE_BYTES,
        }
    }

    /// Byte budget of decoded pages and key metadata kept in memory (clean
    /// ones are evicted past it; pages and metadata share it). Default
    /// [`DEFAULT_CACHE_BYTES`].
    pub fn cache_bytes(mut self, bytes: u64) -> Config {
        self.cache_bytes = bytes;
        self
    }

    /// Byte budget of changed pages held in memory (part of the cache
    /// budget's usage too). Past it, the background thread writes them back
    /// to the store (without a durability barrier); past twice the budget,
    /// or without a background thread, the writing operation does it
    /// itself. Changed key metadata has a budget of half the cache budget,
    /// and at least this one. Default [`DEFAULT_DIRTY_BYTES`].
    pub fn dirty_bytes(mut self, bytes: u64) -> Config {
        self.dirty_bytes = bytes;
        self
    }

    /// Byte budget of sled's own cache of encoded records. Default
    /// [`DEFAULT_STORE_CACHE_BYTES`].
    pub fn store_cache_bytes(mut self, bytes: u64) -> Config {
        self.store_cache_bytes = bytes;
        self
    }

    /// When changes become durable; see [`Durability`] for what a crash
    /// loses under each policy. The background flush runs at the policy's
    /// [`Durability::flush_interval`] unless [`Config::flush_interval`] sets
    /// another. Default [`Durability::EverySecond`].
    pub fn durability(mut self, durability: Durability) -> Config {
        self.durability = durability;
        self
    }

    /// How often a background thread runs [`crate::Db::flush`], overriding the
    /// interval of the [`Config::durability`] policy (in either order of
    /// the calls); `None` disables the thread (then only explicit flushes,
    /// the dirty budget and dropping the last handle write changes, and a
    /// crash loses everything since the last of them). For tests and
    /// tuning. Default: the policy's [`Durability::flush_interval`].
    pub fn flush_interval(mut self, interval: Option<Duration>) -> Config {
        self.flush_interval = Some(interval);
        self
    }

    /// The interval of the background flush (`None`: no background
    /// thread): the one place it is decided.
    pub(crate) fn background_flush_interval(&self) -> Option<Duration> {
        self.flush_interval.unwrap_or_else(|| Some(self.durability.flush_interval()))
    }

    /// The interval [`Config::flush_interval`] set, if it was called: a
    /// later change of policy keeps it.
    pub(crate) fn explicit_flush_interval(&self) -> Option<Option<Duration>> {
        self.flush_interval
    }

    /// Largest value [`crate::Db::get`] builds in memory. Default
    /// [`DEFAULT_MAX_VALUE_BYTES`].
    pub fn max_value_bytes(mut self, bytes: u64) -> Config {
        self.max_value_bytes = bytes;
        self
    }

    /// Free disk space a write-back leaves untouched: a write-back runs only
    /// while the store's disk has room for it and this reserve; short of
    /// it, changes stay in memory and writes are refused with
    /// [`crate::Error::DiskFull`] until space is freed (reads go on). sled
    /// cannot recover from a failed write without a reopen, so bitsled
    /// checks first, counting a write-back's changes three times (sled's
    /// log grows by about that much). The reserve covers what the check
    /// does not estimate (a batch that grows the log more, another process
    /// writing to the same disk), so a small one risks meeting `ENOSPC`
    /// anyway, which poisons the handle. Default
    /// [`DEFAULT_DISK_RESERVE_BYTES`].
    pub fn disk_reserve_bytes(mut self, bytes: u64) -> Config {
        self.disk_reserve_bytes = bytes;
        self
    }

    /// The number of databases (Redis's `databases`; SELECT picks one),
    /// at least 1, used when the store is created; an existing store keeps
    /// the number it was created with. Default [`DEFAULT_DATABASES`].
    pub fn databases(mut self, n: u16) -> Config {
        self.databases = n.max(1);
        self
    }

    /// The clock that decides when keys expire (and times keys' last uses,
    /// [`crate::Db::idle_time`]): a function returning the current Unix
    /// time in milliseconds. Default: the system clock. Tests
    /// pass a controllable one.
    pub fn clock(mut self, now_ms: impl Fn() -> u64 + Send + Sync + 'static) -> Config {
        self.clock = Clock(Arc::new(now_ms));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The background flush follows the durability policy unless an
    /// explicit interval overrides it, whichever setter comes last.
    #[test]
    fn the_flush_interval_derives_from_the_durability() {
        let cfg = || Config::new("unused");
        assert_eq!(cfg().durability, Durability::EverySecond, "the documented default");
        assert_eq!(cfg().background_flush_interval(), Some(DEFAULT_FLUSH_INTERVAL));
        assert_eq!(cfg().durability(Durability::Always).background_flush_interval(), Some(DEFAULT_FLUSH_INTERVAL));
        assert_eq!(cfg().durability(Durability::Lazy).background_flush_interval(), Some(LAZY_FLUSH_INTERVAL));
        let short = Some(Duration::from_millis(5));
        assert_eq!(cfg().durability(Durability::Lazy).flush_interval(short).background_flush_interval(), short);
        assert_eq!(cfg().flush_interval(None).durability(Durability::Lazy).background_flush_interval(), None);
    }
}
