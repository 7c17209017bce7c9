//! Listing keys: SCAN, KEYS and RANDOMKEY walk a database's buckets in hash
//! order, through the bucket cache (which is newer than the store for the
//! buckets it holds).
//!
//! A SCAN cursor is a position in the 32-bit hash space (plus one, so that
//! 0 means "start" and "done"): it survives restarts, bucket splits and
//! concurrent writes, every key present for the whole scan is returned (a
//! key is returned when the scan passes its hash), and each call moves
//! forward, so a scan always ends. Cursors stay below 2^33.
//!
//! A store whose key hash puts the cluster slot on top (format 10, DESIGN.md
//! section 3) holds each slot's keys in one range of the hash space: a
//! slot's scan walks that range only, so it costs the slot's keys (and at
//! most the rest of the buckets at its two ends), not the database's.

use std::sync::Arc;

use super::bucket::Bucket;
use super::metas::{bucket_end, shard_of};
use super::record::Meta;
use super::tx::no_such_db;
use super::Engine;
use crate::error::Result;
use crate::glob::glob_match;

/// The hash position past the last: a scan's end when it covers them all.
const END: u64 = 1 << 32;

/// A key's name and metadata.
pub(crate) type Entry = (Vec<u8>, Meta);

/// Whether `meta` describes a key that is live at `now`.
fn live(meta: &Meta, now: u64) -> bool {
    meta.expire_at_ms == 0 || meta.expire_at_ms > now
}

impl Engine {
    /// Calls `f` with the bucket of database `db` holding hash `pos` and the
    /// position just past it.
    fn with_bucket_at<R>(&self, ks: u32, pos: u32, f: impl FnOnce(&Bucket, u32) -> R) -> Result<(R, u64)> {
        let mut g = self.metas.lock_shard(shard_of(pos));
        let start = g.locate(ks, pos, &*self.store)?;
        let Some(located) = g.get(ks, start) else { return Ok((f(&Bucket::default(), start), u64::from(pos) + 1)) };
        let end = bucket_end(start, located.bucket.depth);
        Ok((f(located.bucket, start), end))
    }

    /// Up to about `count` live keys of database `db` from SCAN cursor
    /// `cursor` on, in hash order (whole buckets at a time), and the next
    /// cursor (0 when the scan is complete). `keep` filters the names.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a database that does not exist;
    /// [`crate::Error::Corrupted`] for a bucket that does not decode.
    pub(crate) fn scan(
        &self,
        db: u32,
        cursor: u64,
        count: usize,
        keep: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(Vec<Vec<u8>>, u64)> {
        let mut out = Vec::new();
        let next = self.scan_visit(db, cursor, count, END, &mut |name, _| {
            if keep(name) {
                out.push(name.to_vec());
            }
        })?;
        Ok((out, next))
    }

    /// Whether the keys of one cluster slot are found without a scan of
    /// the others (the store's key hash puts the slot on top).
    pub(crate) fn slots_indexed(&self) -> bool {
        self.metas.key_hash().slot_range(0).is_some()
    }

    /// Up to about `count` live keys of database `db` in cluster slot
    /// `slot`, from `cursor` on (0 starts), and the next cursor (0 when
    /// done). With [`Engine::slots_indexed`] the walk covers the slot's
    /// range of the hash space only; otherwise it is a scan of every key,
    /// keeping the slot's.
    ///
    /// # Errors
    /// As [`Engine::scan`].
    pub(crate) fn scan_slot(&self, db: u32, slot: u16, cursor: u64, count: usize) -> Result<(Vec<Vec<u8>>, u64)> {
        let in_slot = |name: &[u8]| crate::slot::key_slot(name) == slot;
        let Some((first, last)) = self.metas.key_hash().slot_range(slot) else {
            return self.scan(db, cursor, count, &in_slot);
        };
        let from = if cursor == 0 { u64::from(first) + 1 } else { cursor };
        let mut out = Vec::new();
        let next = self.scan_visit(db, from, count, u64::from(last) + 1, &mut |name, _| {
            if in_slot(name) {
                out.push(name.to_vec());
            }
        })?;
        Ok((out, next))
    }

    /// [`Engine::scan`] with each live key's metadata, unfiltered.
    ///
    /// # Errors
    /// As [`Engine::scan`].
    pub(crate) fn scan_entries(&self, db: u32, cursor: u64, count: usize) -> Result<(Vec<Entry>, u64)> {
        let mut out = Vec::new();
        let next =
            self.scan_visit(db, cursor, count, END, &mut |name, meta| out.push((name.to_vec(), meta.clone())))?;
        Ok((out, next))
    }

    /// The walk of [`Engine::scan`]: calls `visit` with each live key and
    /// its metadata, whole buckets at a time, until about `count` keys or
    /// hash position `end`; returns the next cursor (0 past `end`).
    fn scan_visit(
        &self,
        db: u32,
        cursor: u64,
        count: usize,
        end: u64,
        visit: &mut dyn FnMut(&[u8], &Meta),
    ) -> Result<u64> {
        let (ks, _) = self.keyspaces.of(db).ok_or_else(|| no_such_db(db))?;
        let now = self.now_ms();
        let mut pos = cursor.saturating_sub(1);
        let mut visited = 0usize;
        while let Ok(h) = u32::try_from(pos) {
            if pos >= end {
                break;
            }
            let (n, end) = self.with_bucket_at(ks, h, |b, start| {
                let mut n = 0;
                for (name, meta) in b.iter() {
                    if (start == h || self.key_hash(&name) >= h) && live(&meta, now) {
                        n += 1;
                        visit(&name, &meta);
                    }
                }
                n
            })?;
            visited += n;
            pos = end;
            if visited >= count.max(1) {
                break;
            }
        }
        Ok(if pos >= end { 0 } else { pos + 1 })
    }

    /// Every live key of database `db` matching the Redis glob `pattern`,
    /// in hash order.
    ///
    /// # Errors
    /// As [`Engine::scan`].
    pub(crate) fn keys(&self, db: u32, pattern: &[u8]) -> Result<Vec<Vec<u8>>> {
        let all = pattern == b"*";
        Ok(self.scan(db, 0, usize::MAX, &|name| all || glob_match(pattern, name))?.0)
    }

    /// A random live key of database `db` (Redis RANDOMKEY); `None` if it
    /// has none.
    ///
    /// # Errors
    /// As [`Engine::scan`].
    pub(crate) fn random_key(self: &Arc<Self>, db: u32) -> Result<Option<Vec<u8>>> {
        if self.counts(db)?.keys == 0 {
            return Ok(None);
        }
        let (ks, _) = self.keyspaces.of(db).ok_or_else(|| no_such_db(db))?;
        let now = self.now_ms();
        let mut seed = self.random_seed();
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // Random positions first; a sparse keyspace falls back to the scan
        // from a random position, wrapping around once.
        for _ in 0..32 {
            let pos = u32::try_from(next() >> 32).unwrap_or(0);
            let r = next();
            let (pick, _) = self.with_bucket_at(ks, pos, |b, _| {
                let live: Vec<usize> = b.metas().filter(|(_, m)| live(m, now)).map(|(i, _)| i).collect();
                let n = u64::try_from(live.len()).unwrap_or(u64::MAX);
                (n > 0).then(|| b.name(live[usize::try_from(r % n).unwrap_or(0)]))
            })?;
            if pick.is_some() {
                return Ok(pick);
            }
        }
        let from = u64::from(u32::try_from(next() >> 32).unwrap_or(0)) + 1;
        for cursor in [from, 1] {
            let (keys, _) = self.scan(db, cursor, 1, &|_| true)?;
            if let Some(k) = keys.into_iter().next() {
                return Ok(Some(k));
            }
        }
        Ok(None)
    }

    /// A seed for random choices: the clock mixed with a per-call counter.
    fn random_seed(&self) -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let mix = u64::from(t.subsec_nanos()) ^ CALLS.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        mix | 1
    }
}
