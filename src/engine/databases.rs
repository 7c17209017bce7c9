//! Whole-database operations: FLUSHDB, FLUSHALL and SWAPDB (one switch of
//! the catalog each, under the write gate held exclusively), DBSIZE and the
//! counts INFO shows (from the catalog's counters), and WATCH.

use std::sync::Arc;

use super::layout;
use super::metas::shard_of;
use super::tx::no_such_db;
use super::watch::WatchFlag;
use super::Engine;
use crate::error::Result;

/// The counts of one database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbCounts {
    /// Keys, including expired keys not deleted yet (as Redis's DBSIZE).
    pub keys: u64,
    /// Keys with an expiry.
    pub expires: u64,
    /// Sum of those keys' expiries, Unix seconds (for an average TTL).
    pub expire_secs: u64,
}

/// A watch on keys of one database; see [`Engine::watch`].
pub(crate) struct WatchSet {
    engine: Arc<Engine>,
    flag: Arc<WatchFlag>,
    /// (key, expiry the key had when watched; 0: none or absent).
    keys: Vec<(Vec<u8>, u64)>,
}

impl WatchSet {
    /// Whether a watched key changed, was deleted, expired, or its
    /// database was flushed or swapped since the watch began.
    pub(crate) fn changed(&self) -> bool {
        let now = self.engine.now_ms();
        self.flag.is_raised() || self.keys.iter().any(|&(_, exp)| exp != 0 && exp <= now)
    }
}

impl Drop for WatchSet {
    fn drop(&mut self) {
        for (key, _) in &self.keys {
            self.engine.watches.unregister(key, &self.flag);
        }
    }
}

impl Engine {
    /// The counts of database `db`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a database that does not exist.
    pub(crate) fn counts(&self, db: u32) -> Result<DbCounts> {
        let (_, c) = self.keyspaces.of(db).ok_or_else(|| no_such_db(db))?;
        let (keys, expires, expire_secs) = c.get();
        Ok(DbCounts { keys, expires, expire_secs })
    }

    /// Changes of keys since open (Redis's dirty counter).
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Keys deleted because their expiry passed, since open.
    pub(crate) fn expired_keys(&self) -> u64 {
        self.expired.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Number of databases.
    pub(crate) fn databases(&self) -> u32 {
        self.keyspaces.databases()
    }

    /// Empties database `db`: it gets a new keyspace in one catalog change;
    /// the old keyspace's buckets and pages are reclaimed in the
    /// background. Returns how many keys it held.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`]; [`crate::Error::InvalidArgument`] for a
    /// database that does not exist.
    pub(crate) fn flush_db(&self, db: u32) -> Result<u64> {
        self.check_writable()?;
        let _g = self.gate.write();
        self.flush_db_gated(db)
    }

    /// Empties every database, in one hold of the gate; returns how many
    /// keys they held.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`].
    pub(crate) fn flush_all(&self) -> Result<u64> {
        self.check_writable()?;
        let _g = self.gate.write();
        let mut n = 0;
        for db in 0..self.keyspaces.databases() {
            n += self.flush_db_gated(db)?;
        }
        Ok(n)
    }

    /// [`Engine::flush_db`] with the gate held exclusively.
    fn flush_db_gated(&self, db: u32) -> Result<u64> {
        let (old_ks, counts) = self.keyspaces.of(db).ok_or_else(|| no_such_db(db))?;
        let keys = counts.get().0;
        // Redis raises the watches of the keys that exist.
        self.touch_present(old_ks, None)?;
        let Some(old) = self.keyspaces.flush(db) else { return Err(no_such_db(db)) };
        if let Some((new, _)) = self.keyspaces.of(db) {
            self.watches.follow(old, new);
        }
        self.keyspaces.mark_changed();
        // Its dirty buckets are written with the dead marker, in the same
        // write-back, so the reclaimer finds every value they name.
        self.metas.drop_keyspace(old);
        self.journal.set(layout::dead_key(old), Some(Vec::new()));
        // Redis's dirty counter grows by the keys dropped.
        self.changes.fetch_add(keys, std::sync::atomic::Ordering::Relaxed);
        Ok(keys)
    }

    /// Swaps databases `a` and `b` (Redis SWAPDB): one catalog change.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`]; [`crate::Error::InvalidArgument`] for a
    /// database that does not exist.
    pub(crate) fn swap_db(&self, a: u32, b: u32) -> Result<()> {
        self.check_writable()?;
        let _g = self.gate.write();
        let (ka, _) = self.keyspaces.of(a).ok_or_else(|| no_such_db(a))?;
        let (kb, _) = self.keyspaces.of(b).ok_or_else(|| no_such_db(b))?;
        if a == b {
            // As in Redis: nothing changes, nobody's watch fires, but the
            // change count moves.
            self.changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(());
        }
        // Redis raises the watches of the keys that exist in either.
        self.touch_present(ka, Some(kb))?;
        self.touch_present(kb, Some(ka))?;
        if !self.keyspaces.swap(a, b) {
            return Err(no_such_db(a.max(b)));
        }
        self.watches.swap(ka, kb);
        self.keyspaces.mark_changed();
        self.changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Raises the watches on keys of keyspace `ks` that exist in `ks` or in
    /// `other` (expired or not, as Redis checks). The caller holds the gate
    /// exclusively.
    fn touch_present(&self, ks: u32, other: Option<u32>) -> Result<()> {
        for name in self.watches.names(ks) {
            let h = self.key_hash(&name);
            let mut g = self.metas.lock_shard(shard_of(h));
            let mut present = false;
            for k in std::iter::once(ks).chain(other) {
                let start = g.locate(k, h, &*self.store)?;
                present |= g.get(k, start).is_some_and(|l| l.bucket.contains(&name, h));
            }
            drop(g);
            if present {
                self.watches.touched(ks, &name);
            }
        }
        Ok(())
    }

    /// Starts watching `keys` of database `db` (Redis WATCH). A key that has
    /// already expired is deleted first (so its deletion is no change).
    ///
    /// # Errors
    /// As [`Engine::write`].
    pub(crate) fn watch(self: &Arc<Self>, db: u32, keys: &[&[u8]]) -> Result<WatchSet> {
        let flag = Arc::new(WatchFlag::default());
        let engine = Arc::clone(self);
        self.write(db, keys, |tx| {
            let ks = tx.keyspace();
            let mut set = WatchSet { engine, flag: Arc::clone(&flag), keys: Vec::with_capacity(keys.len()) };
            for key in keys {
                let exp = tx.meta(key)?.map_or(0, |m| m.expire_at_ms);
                self.watches.register(ks, key, &flag);
                set.keys.push((key.to_vec(), exp));
            }
            Ok(set)
        })
    }
}
