//! The active side of expiry: finding keys whose expiry passed while nobody
//! touched them, and deleting them. (Lookups delete expired keys too; see
//! `tx.rs`.)
//!
//! Nothing is stored for it. Each keyspace keeps, in memory, the earliest
//! expiry of each of the 2^16 regions of the hash space ([`DueRegions`]):
//! setting an expiry lowers its region's time, and the sweeper reads the
//! buckets of regions whose time has come, deletes their expired keys and
//! sets each region's time to the earliest expiry left in it. A region's
//! time is a lower bound (a key that lost its expiry, or was deleted,
//! leaves it early), so a region may be read for nothing but never skipped
//! while a key in it is due. A keyspace opened with keys that have an
//! expiry starts with every region due: the sweeper reads the whole
//! keyspace once, a bounded number of buckets per tick, and learns the
//! times.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::due::{region_of, region_start, DueRegions, NEVER, REGIONS, REGION_BITS};
use super::layout::shard_of;
use super::metas::bucket_end;
use super::tx::Target;
use super::Engine;
use crate::error::{Error, Result};

/// What one call of [`crate::Db::sweep_expired`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    /// Expired keys deleted.
    pub deleted: u64,
    /// Metadata buckets read.
    pub buckets: u64,
    /// Whether no key is left due (false: the budget ran out first).
    pub done: bool,
}

impl Engine {
    /// Deletes keys whose expiry has passed, reading at most about
    /// `max_buckets` metadata buckets of regions that are due (see the
    /// module). Each call starts at the keyspace after the one the last
    /// call started at, so no database waits behind a busy one.
    pub(crate) fn sweep_expired(self: &Arc<Self>, max_buckets: u64) -> Result<Sweep> {
        let now = self.now_ms();
        let mut sweep = Sweep::default();
        // A follower's expired keys go with its master's batches.
        if self.follow.on() {
            sweep.done = true;
            return Ok(sweep);
        }
        let mut live = self.keyspaces.live();
        live.sort_unstable_by_key(|(ks, _)| *ks);
        if !live.is_empty() {
            let first = self.sweep_start.fetch_add(1, Ordering::Relaxed) % live.len();
            live.rotate_left(first);
        }
        for (ks, counts) in &live {
            let due = &counts.due;
            while sweep.buckets < max_buckets {
                let Some(r) = due.next_due(now) else { break };
                // Past this region even if reading it fails, so one damaged
                // bucket does not stop the sweep of everything after it
                // (the region stays due and is tried again next round).
                due.cursor.store(u32::try_from((r + 1) % REGIONS).unwrap_or(0), Ordering::Relaxed);
                let (names, buckets, next) = self.read_region(*ks, due, r, now)?;
                sweep.buckets += buckets.max(1);
                due.cursor.store(u32::try_from(next % REGIONS).unwrap_or(0), Ordering::Relaxed);
                if names.is_empty() {
                    continue;
                }
                let keys: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
                let deleted = self.write_then(Target::Keyspace(*ks), &keys, true, |tx| {
                    let mut n = 0;
                    for k in &keys {
                        // Deletes the key if it is still expired; a key the
                        // clock finds alive again keeps its region due.
                        match tx.meta(k)? {
                            None => n += 1,
                            Some(m) if m.expire_at_ms != 0 => due.note(self.key_hash(k), m.expire_at_ms),
                            Some(_) => {}
                        }
                    }
                    Ok(n)
                });
                match deleted {
                    Ok(n) => sweep.deleted += n,
                    // A keyspace flushed meanwhile has nothing left to expire.
                    Err(Error::InvalidArgument(_)) => break,
                    Err(e) => {
                        // The region's time no longer counts these keys:
                        // make it due again so they are not forgotten.
                        for k in &keys {
                            due.note(self.key_hash(k), now);
                        }
                        return Err(e);
                    }
                }
            }
        }
        sweep.done = live.iter().all(|(_, c)| !c.due.any_due(now));
        Ok(sweep)
    }

    /// Reads the buckets of region `r` of keyspace `ks` (whole buckets: a
    /// bucket wider than the region is read whole, and every region it
    /// covers learns its time). Returns the names of keys expired at `now`,
    /// the buckets read, and the region after the last one covered.
    fn read_region(&self, ks: u32, due: &DueRegions, r: usize, now: u64) -> Result<(Vec<Vec<u8>>, u64, usize)> {
        let Some(times) = due.times.get() else { return Ok((Vec::new(), 0, r + 1)) };
        let lo = region_start(r);
        let hi = u64::from(lo) + (1u64 << (32 - REGION_BITS));
        // A region lies inside one lock shard, and so does every bucket.
        let mut g = self.metas.lock_shard(shard_of(lo));
        let (mut pos, mut first, mut buckets) = (u64::from(lo), None, 0u64);
        let mut expired = Vec::new();
        // (region, earliest expiry left) for the regions read.
        let mut left: Vec<(usize, u64)> = Vec::new();
        while pos < hi {
            let start = g.locate(ks, u32::try_from(pos).unwrap_or(u32::MAX), &*self.store)?;
            let Some(located) = g.get(ks, start) else { break };
            first.get_or_insert(start);
            buckets += 1;
            for (i, meta) in located.bucket.metas() {
                if meta.expire_at_ms == 0 {
                    continue;
                }
                let name = located.bucket.name(i);
                if meta.expire_at_ms <= now {
                    expired.push(name);
                    continue;
                }
                let region = region_of(self.key_hash(&name));
                match left.iter_mut().find(|(x, _)| *x == region) {
                    Some((_, t)) => *t = (*t).min(meta.expire_at_ms),
                    None => left.push((region, meta.expire_at_ms)),
                }
            }
            pos = bucket_end(start, located.bucket.depth);
        }
        let from = region_of(first.unwrap_or(lo));
        // `pos` is the end of the last bucket read, at least `hi`.
        let to = usize::try_from(pos >> (32 - REGION_BITS)).unwrap_or(REGIONS).min(REGIONS);
        for (region, time) in times.iter().enumerate().take(to).skip(from) {
            let t = left.iter().find(|(x, _)| *x == region).map_or(NEVER, |(_, t)| *t);
            time.store(t, Ordering::Relaxed);
        }
        Ok((expired, buckets, to))
    }
}
