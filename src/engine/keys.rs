//! Listing keys: KEYS, SCAN and DBSIZE read the keys changed in memory and
//! the keys in the store together.

use std::collections::BTreeMap;
use std::iter::Peekable;

use super::layout;
use super::record::Meta;
use super::Engine;
use crate::error::Result;
use crate::glob::glob_match;

/// Whether metadata bytes stored for a key describe an expired key at `now`.
fn stored_is_expired(name: &[u8], bytes: &[u8], now: u64) -> bool {
    Meta::decode(name, bytes).is_ok_and(|m| m.expire_at_ms != 0 && m.expire_at_ms <= now)
}

impl Engine {
    /// Every live key matching the Redis glob `pattern`, in byte order; see
    /// [`crate::Db::keys`].
    pub(crate) fn keys(&self, pattern: &[u8]) -> Result<Vec<Vec<u8>>> {
        let literal = pattern.iter().position(|c| b"*?[\\".contains(c)).unwrap_or(pattern.len());
        let prefix = layout::meta_key(&pattern[..literal]);
        let mut found: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
        // Dirty state first: it is newer than the store for the keys it names.
        let now = self.now_ms();
        let live = |m: &Meta| m.expire_at_ms == 0 || m.expire_at_ms > now;
        for m in self.metas.dirty_snapshot() {
            found.insert(m.name, m.meta.as_ref().is_some_and(live));
        }
        for r in self.store.scan_prefix(&prefix) {
            let (k, v) = r?;
            if let Some(name) = layout::name_of_meta_key(&k) {
                found.entry(name.to_vec()).or_insert_with(|| !stored_is_expired(name, &v, now));
            }
        }
        Ok(found.into_iter().filter(|(n, live)| *live && glob_match(pattern, n)).map(|(n, _)| n).collect())
    }

    /// Up to `count` live keys after `after`, in byte order, and where to
    /// continue; see [`crate::Db::scan`].
    #[expect(clippy::type_complexity, reason = "a pair of plain types reads better here than a named alias")]
    pub(crate) fn scan(&self, after: Option<&[u8]>, count: usize) -> Result<(Vec<Vec<u8>>, Option<Vec<u8>>)> {
        let count = count.max(1);
        // Changed keys first, as `keys` does: a key changed before this
        // snapshot is seen here; one written back after it, in the store.
        // Keys whose expiry has passed count as absent.
        let now = self.now_ms();
        let live = |m: &Meta| m.expire_at_ms == 0 || m.expire_at_ms > now;
        let mut dirty: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
        for m in self.metas.dirty_snapshot() {
            if after.is_none_or(|a| m.name.as_slice() > a) {
                dirty.insert(m.name, m.meta.as_ref().is_some_and(live));
            }
        }
        // Store keys from just after `after` (its successor `after ++ 0x00`)
        // to the end of the metadata namespace.
        let from = match after {
            Some(a) => {
                let mut k = layout::meta_key(a);
                k.push(0);
                k
            }
            None => vec![layout::NS_META],
        };
        let stored = self.store.scan(&from, &[layout::NS_META + 1]).filter_map(move |r| match r {
            Ok((k, v)) => layout::name_of_meta_key(&k).map(|n| Ok((n.to_vec(), !stored_is_expired(n, &v, now)))),
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
