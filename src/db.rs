//! The database handle: [`Db`], cheap to clone and shared across threads.
//! Its bitmap, string, key and expiry operations are in `src/ops/`; this
//! file holds opening, durability and the whole-database operations.

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::engine::{Engine, KeyStats, VerifyReport};
use crate::error::Result;

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
    pub(crate) engine: Arc<Engine>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.engine.config().path).finish_non_exhaustive()
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
        Ok(Db { engine: Engine::open(config)? })
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

    /// Every key matching the Redis glob `pattern` (`*`, `?`, `[a-z]`,
    /// `[^x]`, `\` escapes), in byte order.
    ///
    /// Cost: scans the keys sharing the pattern's literal prefix.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] if the scan fails.
    pub fn keys(&self, pattern: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.engine.keys(pattern)
    }

    /// Up to `count` live keys that sort strictly after `after` (all keys
    /// when `after` is `None`), in byte order, and where to continue: the
    /// last key returned, or `None` when no key follows it. A `count` of 0
    /// is taken as 1.
    ///
    /// Calling it again with the returned position until it is `None` is a
    /// SCAN: every key that exists during the whole iteration is returned
    /// exactly once (byte order never revisits a key); keys created or
    /// deleted meanwhile may or may not be returned.
    ///
    /// Cost: reads at most `count + 1` live keys' records from the store
    /// (plus the deleted ones in between), and looks through the changed
    /// keys not yet written back.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] if the store scan fails.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// for k in [&b"a"[..], b"b", b"c"] {
    ///     db.setbit(k, 0, true)?;
    /// }
    /// let (keys, next) = db.scan(None, 2)?;
    /// assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
    /// assert_eq!(next.as_deref(), Some(&b"b"[..]));
    /// let (keys, next) = db.scan(next.as_deref(), 2)?;
    /// assert_eq!((keys, next), (vec![b"c".to_vec()], None));
    /// # Ok(()) }
    /// ```
    #[expect(clippy::type_complexity, reason = "a pair of plain types reads better here than a named alias")]
    pub fn scan(&self, after: Option<&[u8]>, count: usize) -> Result<(Vec<Vec<u8>>, Option<Vec<u8>>)> {
        self.engine.scan(after, count)
    }

    /// The number of keys (Redis DBSIZE).
    ///
    /// Cost: a scan of every key's metadata.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] if the scan fails.
    pub fn dbsize(&self) -> Result<u64> {
        Ok(self.engine.keys(b"*")?.len() as u64)
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

    /// How `key` is stored, or `None` if it does not exist. Writes pending
    /// changes back first, so the figures are those of the store.
    ///
    /// Cost: reads the header of every page of the key.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] if a page header does not validate.
    pub fn key_stats(&self, key: &[u8]) -> Result<Option<KeyStats>> {
        self.engine.key_stats(key)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::Config;

    fn open(dir: &std::path::Path) -> Db {
        Config::new(dir).flush_interval(None).open().unwrap()
    }

    /// Collects a whole scan with `count` per call.
    fn scan_all(db: &Db, count: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let (keys, next) = db.scan(after.as_deref(), count).unwrap();
            assert!(keys.len() <= count.max(1));
            out.extend(keys);
            match next {
                Some(n) => after = Some(n),
                None => return out,
            }
        }
    }

    /// Invariant: with stored keys, changed keys not yet written back and
    /// deleted keys mixed, a scan returns exactly the live keys, in byte
    /// order, for every count.
    #[test]
    fn merges_dirty_and_stored_keys() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let mut live = BTreeSet::new();
        for i in 0..40u32 {
            let k = format!("k{i:02}").into_bytes();
            db.setbit(&k, 1, true).unwrap();
            live.insert(k);
        }
        db.flush().unwrap();
        // Deleted (dirty) over stored, new dirty keys, a key with an empty
        // name and one with a zero byte.
        for i in (0..40u32).step_by(3) {
            let k = format!("k{i:02}").into_bytes();
            db.delete(&k).unwrap();
            live.remove(&k);
        }
        for k in [&b""[..], b"k05\0", b"a", b"zz", b"k1"] {
            db.setbit(k, 3, true).unwrap();
            live.insert(k.to_vec());
        }
        let want: Vec<Vec<u8>> = live.into_iter().collect();
        for count in [0, 1, 2, 3, 7, 100] {
            assert_eq!(scan_all(&db, count), want, "count {count}");
        }
        db.flush().unwrap();
        assert_eq!(scan_all(&db, 4), want);
        // A position that is no key continues after it.
        let (keys, _) = db.scan(Some(b"k0"), 1).unwrap();
        assert_eq!(keys, vec![b"k01".to_vec()]);
        let (keys, next) = db.scan(Some(b"zz"), 5).unwrap();
        assert!(keys.is_empty() && next.is_none());
    }

    /// Invariant: a key whose expiry has passed is not returned, whether its
    /// metadata is stored or still only in memory.
    #[test]
    fn expired_keys_are_skipped() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let now = Arc::new(AtomicU64::new(1_000));
        let clock = Arc::clone(&now);
        let db =
            Config::new(dir.path()).flush_interval(None).clock(move || clock.load(Ordering::SeqCst)).open().unwrap();
        for k in [&b"a"[..], b"b", b"c", b"d"] {
            db.setbit(k, 0, true).unwrap();
        }
        db.expire_at(b"b", 2_000, crate::ExpireCondition::Always).unwrap();
        db.flush().unwrap();
        db.expire_at(b"c", 2_000, crate::ExpireCondition::Always).unwrap();
        assert_eq!(scan_all(&db, 1).len(), 4);
        now.store(2_000, Ordering::SeqCst);
        assert_eq!(scan_all(&db, 1), vec![b"a".to_vec(), b"d".to_vec()]);
    }

    /// The last page of a scan says it is the last (no empty extra call
    /// needed), and a full page that happens to end the keys does too.
    #[test]
    fn last_page_ends_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        for k in [&b"a"[..], b"b"] {
            db.setbit(k, 0, true).unwrap();
        }
        assert_eq!(db.scan(None, 2).unwrap(), (vec![b"a".to_vec(), b"b".to_vec()], None));
        assert_eq!(db.scan(None, 1).unwrap(), (vec![b"a".to_vec()], Some(b"a".to_vec())));
    }
}
