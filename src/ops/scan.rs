//! Key iteration in pieces, for SCAN.

use std::collections::BTreeMap;
use std::iter::Peekable;

use crate::db::Db;
use crate::error::Result;
use crate::key;
use crate::meta::Meta;
use crate::ops::expiry::stored_is_expired;

impl Db {
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
        let count = count.max(1);
        // Changed keys first, as `keys` does: a key changed before this
        // snapshot is seen here; one written back after it, in the store.
        // Keys whose expiry has passed count as absent.
        let now = self.inner.now_ms();
        let live = |m: &Meta| m.expire_at_ms == 0 || m.expire_at_ms > now;
        let mut dirty: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
        for m in self.inner.metas.dirty_snapshot() {
            if after.is_none_or(|a| m.name.as_slice() > a) {
                dirty.insert(m.name, m.meta.as_ref().is_some_and(live));
            }
        }
        // Store keys from just after `after` (its successor `after ++ 0x00`)
        // to the end of the metadata namespace.
        let from = match after {
            Some(a) => {
                let mut k = key::meta_key(a);
                k.push(0);
                k
            }
            None => vec![key::NS_META],
        };
        let stored = self.inner.store.scan(&from, &[key::NS_META + 1]).filter_map(move |r| match r {
            Ok((k, v)) => key::name_of_meta_key(&k).map(|n| Ok((n.to_vec(), !stored_is_expired(n, &v, now)))),
            Err(e) => Some(Err(e)),
        });
        let mut merged = Merge { dirty: dirty.into_iter().peekable(), stored: stored.peekable() };
        let mut keys = Vec::new();
        while let Some(name) = merged.next_live()? {
            if keys.len() == count {
                // One more live key exists: the caller continues after the
                // last one returned.
                let last = keys.last().cloned();
                return Ok((keys, last));
            }
            keys.push(name);
        }
        Ok((keys, None))
    }
}

/// A key name and whether it is live.
type Named = (Vec<u8>, bool);

/// Merges changed keys (newer) and stored keys, both in byte order and each
/// with its liveness, into the live keys in byte order.
struct Merge<D: Iterator<Item = Named>, S: Iterator<Item = Result<Named>>> {
    dirty: Peekable<D>,
    stored: Peekable<S>,
}

impl<D: Iterator<Item = Named>, S: Iterator<Item = Result<Named>>> Merge<D, S> {
    fn next_live(&mut self) -> Result<Option<Vec<u8>>> {
        loop {
            let stored = match self.stored.peek() {
                Some(Err(_)) => {
                    // Take the error out by value.
                    return match self.stored.next() {
                        Some(Err(e)) => Err(e),
                        _ => Ok(None),
                    };
                }
                Some(Ok((name, _))) => Some(name.as_slice()),
                None => None,
            };
            let dirty = self.dirty.peek().map(|(n, _)| n.as_slice());
            let (name, live) = match (dirty, stored) {
                (None, None) => return Ok(None),
                (Some(d), Some(s)) if d == s => {
                    // The changed state is newer than the stored record.
                    self.stored.next();
                    self.dirty.next().unwrap_or_default()
                }
                (Some(d), Some(s)) if d < s => self.dirty.next().unwrap_or_default(),
                (Some(_), None) => self.dirty.next().unwrap_or_default(),
                _ => match self.stored.next() {
                    Some(Ok(named)) => named,
                    _ => return Ok(None),
                },
            };
            if live {
                return Ok(Some(name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn open(dir: &std::path::Path) -> Db {
        crate::Config::new(dir).flush_interval(None).open().unwrap()
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
        let db = crate::Config::new(dir.path())
            .flush_interval(None)
            .clock(move || clock.load(Ordering::SeqCst))
            .open()
            .unwrap();
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
