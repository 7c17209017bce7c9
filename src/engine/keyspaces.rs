//! Databases and keyspaces: database `i` (SELECT i) keeps its keys in a
//! keyspace, whose id prefixes its buckets. FLUSHDB gives a database a new,
//! empty keyspace and marks the old one for reclamation in the background;
//! SWAPDB swaps two databases' keyspaces. Both are one change of the
//! catalog, which every write-back stores with the per-database counts
//! (keys, keys with an expiry, the sum of their expiries) that DBSIZE and
//! INFO read.
//!
//! The mapping changes only while the engine's write gate is held
//! exclusively, so a write transaction (which holds it shared) sees one
//! keyspace for its whole duration.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::due::DueRegions;
use super::idhash::FastMap;
use super::layout::KeyHash;
use super::record::{Catalog, DbRecord};

/// The counts of one keyspace. Signed, so that concurrent updates never
/// underflow in between; never negative at rest.
#[derive(Default, Debug)]
pub(crate) struct Counts {
    keys: AtomicI64,
    expires: AtomicI64,
    expire_secs: AtomicI64,
    /// Where keys with an expiry are, for the sweeper (`expiry.rs`).
    pub(crate) due: DueRegions,
}

impl Counts {
    fn from_record(d: &DbRecord) -> Counts {
        let c = Counts {
            due: if d.expires > 0 { DueRegions::all_due() } else { DueRegions::default() },
            ..Counts::default()
        };
        c.keys.store(i64::try_from(d.keys).unwrap_or(i64::MAX), Ordering::Relaxed);
        c.expires.store(i64::try_from(d.expires).unwrap_or(i64::MAX), Ordering::Relaxed);
        c.expire_secs.store(i64::try_from(d.expire_secs).unwrap_or(i64::MAX), Ordering::Relaxed);
        c
    }

    /// Records one key's change: it existed (`before`, with its expiry or
    /// 0) and exists (`after`).
    pub(crate) fn change(&self, before: Option<u64>, after: Option<u64>) {
        let secs = |ms: u64| i64::try_from(ms / 1000).unwrap_or(i64::MAX);
        if let Some(exp) = before {
            self.keys.fetch_sub(1, Ordering::Relaxed);
            if exp != 0 {
                self.expires.fetch_sub(1, Ordering::Relaxed);
                self.expire_secs.fetch_sub(secs(exp), Ordering::Relaxed);
            }
        }
        if let Some(exp) = after {
            self.keys.fetch_add(1, Ordering::Relaxed);
            if exp != 0 {
                self.expires.fetch_add(1, Ordering::Relaxed);
                self.expire_secs.fetch_add(secs(exp), Ordering::Relaxed);
            }
        }
    }

    /// (keys, keys with an expiry, sum of their expiries in seconds).
    pub(crate) fn get(&self) -> (u64, u64, u64) {
        let g = |a: &AtomicI64| u64::try_from(a.load(Ordering::Relaxed)).unwrap_or(0);
        (g(&self.keys), g(&self.expires), g(&self.expire_secs))
    }
}

/// The databases' keyspaces and counts, in memory.
pub(crate) struct Keyspaces {
    /// Database index -> keyspace, and each keyspace's counts.
    dbs: RwLock<Vec<(u32, Arc<Counts>)>>,
    /// Live keyspace -> its counts (the same `Arc`s), for lookups by
    /// keyspace (the expiry sweep).
    by_ks: RwLock<FastMap<u32, Arc<Counts>>>,
    next: AtomicU32,
    /// The mapping changed since the last write-back took it.
    changed: AtomicBool,
    /// The store's key hash scheme, which the catalog records.
    key_hash: KeyHash,
}

impl Keyspaces {
    pub(crate) fn from_catalog(c: &Catalog) -> Keyspaces {
        let dbs: Vec<(u32, Arc<Counts>)> =
            c.dbs.iter().map(|d| (d.keyspace, Arc::new(Counts::from_record(d)))).collect();
        let by_ks = dbs.iter().map(|(ks, c)| (*ks, Arc::clone(c))).collect();
        Keyspaces {
            dbs: RwLock::new(dbs),
            by_ks: RwLock::new(by_ks),
            next: AtomicU32::new(c.next_keyspace),
            changed: AtomicBool::new(false),
            key_hash: c.key_hash,
        }
    }

    /// Takes the mapping and counts of catalog `c` (a follower's store
    /// changed under them). The key hash scheme stays the engine's.
    pub(crate) fn reload(&self, c: &Catalog) {
        let fresh = Keyspaces::from_catalog(c);
        *self.dbs.write() = fresh.dbs.into_inner();
        *self.by_ks.write() = fresh.by_ks.into_inner();
        self.next.store(c.next_keyspace, Ordering::SeqCst);
        self.changed.store(false, Ordering::SeqCst);
    }

    /// Notes a change of the mapping, so the next write-back stores the
    /// catalog even if nothing else changed.
    pub(crate) fn mark_changed(&self) {
        self.changed.store(true, Ordering::SeqCst);
    }

    /// Whether the mapping changed since the last [`Keyspaces::take_changed`].
    pub(crate) fn is_changed(&self) -> bool {
        self.changed.load(Ordering::SeqCst)
    }

    /// Whether the mapping changed since the last call.
    pub(crate) fn take_changed(&self) -> bool {
        self.changed.swap(false, Ordering::SeqCst)
    }

    /// Number of databases.
    pub(crate) fn databases(&self) -> u32 {
        u32::try_from(self.dbs.read().len()).unwrap_or(u32::MAX)
    }

    /// The keyspace of database `db` and its counts.
    pub(crate) fn of(&self, db: u32) -> Option<(u32, Arc<Counts>)> {
        let dbs = self.dbs.read();
        dbs.get(usize::try_from(db).ok()?).map(|(ks, c)| (*ks, Arc::clone(c)))
    }

    /// The keyspace of database `db`, if it exists.
    pub(crate) fn keyspace_of(&self, db: u32) -> Option<u32> {
        self.dbs.read().get(usize::try_from(db).ok()?).map(|(ks, _)| *ks)
    }

    /// The database whose keyspace is `ks`, if it is live.
    pub(crate) fn db_of(&self, ks: u32) -> Option<u32> {
        let dbs = self.dbs.read();
        dbs.iter().position(|(k, _)| *k == ks).and_then(|i| u32::try_from(i).ok())
    }

    /// Every live keyspace and its counts.
    pub(crate) fn live(&self) -> Vec<(u32, Arc<Counts>)> {
        self.by_ks.read().iter().map(|(ks, c)| (*ks, Arc::clone(c))).collect()
    }

    /// The counts of keyspace `ks`, if it is live.
    pub(crate) fn counts(&self, ks: u32) -> Option<Arc<Counts>> {
        self.by_ks.read().get(&ks).cloned()
    }

    /// Gives database `db` a new empty keyspace; returns the old one (the
    /// caller holds the gate exclusively and marks it for reclamation).
    pub(crate) fn flush(&self, db: u32) -> Option<u32> {
        let mut dbs = self.dbs.write();
        let slot = dbs.get_mut(usize::try_from(db).ok()?)?;
        let new = self.next.fetch_add(1, Ordering::SeqCst);
        let counts = Arc::new(Counts::default());
        let old = std::mem::replace(slot, (new, Arc::clone(&counts)));
        let mut by_ks = self.by_ks.write();
        by_ks.remove(&old.0);
        by_ks.insert(new, counts);
        Some(old.0)
    }

    /// Swaps the keyspaces of databases `a` and `b`; false if either does
    /// not exist.
    pub(crate) fn swap(&self, a: u32, b: u32) -> bool {
        let mut dbs = self.dbs.write();
        let (Ok(a), Ok(b)) = (usize::try_from(a), usize::try_from(b)) else { return false };
        if a >= dbs.len() || b >= dbs.len() {
            return false;
        }
        dbs.swap(a, b);
        true
    }

    /// The catalog to store (the caller holds the gate exclusively, so the
    /// counts match the captured buckets).
    pub(crate) fn catalog(&self) -> Catalog {
        let dbs = self.dbs.read();
        Catalog {
            key_hash: self.key_hash,
            next_keyspace: self.next.load(Ordering::SeqCst),
            dbs: dbs
                .iter()
                .map(|(ks, c)| {
                    let (keys, expires, expire_secs) = c.get();
                    DbRecord { keyspace: *ks, keys, expires, expire_secs }
                })
                .collect(),
        }
    }
}
