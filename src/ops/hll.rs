//! HyperLogLog sketches (Redis PFADD, PFCOUNT, PFMERGE) on string values.
//!
//! A sketch is a plain string key whose bytes are Redis 7's HyperLogLog
//! format (see `DESIGN.md`), so GET, SET, TYPE and the bit commands see
//! exactly what Redis would show. Each command reads the value (at most
//! 12,304 bytes once dense) under the key's lock, changes it with the
//! algorithm in `crate::hll`, and writes back only the pages whose bytes
//! changed, in one atomic change that keeps the key's expiry; PFADD on a
//! dense sketch reads and writes only the bytes of its elements' registers.

use crate::db::Db;
use crate::engine::{Kind, Meta, ReadTx, WriteTx};
use crate::error::{Error, Result};
use crate::geometry::PAGE_LEN;
use crate::hll::{self, Encoding, HllError, HEADER_LEN, REGISTERS};
use crate::page::Page;

/// The library error for a sketch problem in `key`.
fn hll_error(key: &[u8], e: HllError) -> Error {
    let key = String::from_utf8_lossy(key).into_owned();
    match e {
        HllError::NotHll => Error::NotHyperLogLog { key },
        HllError::Corrupt => Error::InvalidHyperLogLog { key },
    }
}

/// A string key's metadata and first bytes, checked to be a sketch's
/// header; `None` if the key is missing.
fn load_head(tx: &mut ReadTx<'_>, key: &[u8]) -> Result<Option<(Meta, [u8; HEADER_LEN])>> {
    let Some(meta) = tx.string(key)? else { return Ok(None) };
    let mut head = [0u8; HEADER_LEN];
    if meta.len >= HEADER_LEN as u64 {
        if let Some(p) = tx.page(key, &meta, 0)? {
            p.write_bytes(&mut head);
        }
    }
    hll::check_prefix(&head, meta.len).map_err(|e| hll_error(key, e))?;
    Ok(Some((meta, head)))
}

/// The whole value of string key `key` (described by `meta`).
fn read_value(tx: &ReadTx<'_>, key: &[u8], meta: &Meta) -> Result<Vec<u8>> {
    let mut out = vec![0u8; tx.value_len(key, meta)?];
    for (page, chunk) in out.chunks_mut(PAGE_LEN).enumerate() {
        if let Some(p) = tx.page(key, meta, page as u64)? {
            p.write_bytes(chunk);
        }
    }
    Ok(out)
}

/// A sketch's metadata and bytes, checked to have a sketch's header;
/// `None` if the key is missing.
fn load(tx: &mut ReadTx<'_>, key: &[u8]) -> Result<Option<(Meta, Vec<u8>)>> {
    let Some((meta, _)) = load_head(tx, key)? else { return Ok(None) };
    let value = read_value(tx, key, &meta)?;
    Ok(Some((meta, value)))
}

/// Byte `at` of the value of `key` (described by `meta`): one page read.
fn value_byte(tx: &ReadTx<'_>, key: &[u8], meta: &Meta, at: usize) -> Result<u8> {
    Ok(tx.page(key, meta, (at / PAGE_LEN) as u64)?.map_or(0, |p| p.byte(at % PAGE_LEN)))
}

/// The two bytes of a dense sketch's register window at `at` (the second
/// reads as zero past the value's end): one page read, unless the two lie
/// in different pages.
fn window_at(tx: &ReadTx<'_>, key: &[u8], meta: &Meta, at: usize) -> Result<[u8; 2]> {
    let page = tx.page(key, meta, (at / PAGE_LEN) as u64)?;
    let lo = page.as_ref().map_or(0, |p| p.byte(at % PAGE_LEN));
    let next = at + 1;
    let hi = if next >= hll::DENSE_LEN {
        0
    } else if next % PAGE_LEN == 0 {
        value_byte(tx, key, meta, next)?
    } else {
        page.as_ref().map_or(0, |p| p.byte(next % PAGE_LEN))
    };
    Ok([lo, hi])
}

/// Sets byte `at` of the value of `key` (described by `meta`, whose set-bit
/// count follows) to `value`.
fn put_value_byte(tx: &mut WriteTx<'_>, key: &[u8], meta: &mut Meta, at: usize, value: u8) -> Result<()> {
    tx.update_page(key, meta, (at / PAGE_LEN) as u64, |p| p.set_byte(at % PAGE_LEN, value))
}

/// PFADD on a dense sketch in place: each element reads the two bytes its
/// register lies in and writes them only if the register rises, so a call
/// costs a few byte reads, not the 12,304-byte value. Marks the cached
/// cardinality stale if any register rose; returns how many did. The
/// caller records `meta`.
fn add_dense<E: AsRef<[u8]>>(
    tx: &mut WriteTx<'_>,
    key: &[u8],
    meta: &mut Meta,
    head: [u8; HEADER_LEN],
    elements: &[E],
) -> Result<usize> {
    let mut raised = 0;
    for e in elements {
        let (index, count) = hll::hash_element(e.as_ref());
        let (at, shift) = hll::dense::position(index);
        let at = HEADER_LEN + at;
        // The last register ends inside the value's last byte; the byte
        // after it reads as zero and is never written.
        let has_next = at + 1 < hll::DENSE_LEN;
        let [lo, hi] = window_at(tx, key, meta, at)?;
        let w = u16::from_le_bytes([lo, hi]);
        if count <= hll::dense::in_window(w, shift) {
            continue;
        }
        let [new_lo, new_hi] = hll::dense::with_register(w, shift, count).to_le_bytes();
        if new_lo != lo {
            put_value_byte(tx, key, meta, at, new_lo)?;
        }
        if has_next && new_hi != hi {
            put_value_byte(tx, key, meta, at + 1, new_hi)?;
        }
        raised += 1;
    }
    if raised > 0 {
        let mut stale = head;
        hll::invalidate_cache(&mut stale);
        for (at, (&was, &now)) in head.iter().zip(&stale).enumerate() {
            if was != now {
                put_value_byte(tx, key, meta, at, now)?;
            }
        }
    }
    Ok(raised)
}

/// Makes `new` the value of `key`, whose current value is `old` (empty for
/// a new key), rewriting only the pages whose bytes differ, and records the
/// metadata (expiry kept); the key's watchers are told if `announce`.
fn store(tx: &mut WriteTx<'_>, key: &[u8], mut meta: Meta, old: &[u8], new: &[u8], announce: bool) -> Result<()> {
    let span = old.len().max(new.len());
    for (page, start) in (0..span).step_by(PAGE_LEN).enumerate() {
        let end = (start + PAGE_LEN).min(span);
        let before = old.get(start..end.min(old.len())).unwrap_or_default();
        let after = new.get(start..end.min(new.len())).unwrap_or_default();
        if before == after {
            continue;
        }
        tx.update_page(key, &mut meta, page as u64, |p| *p = Page::from_bytes(after))?;
    }
    meta.len = new.len() as u64;
    if announce {
        tx.set(key, &meta)
    } else {
        tx.set_unannounced(key, &meta)
    }
}

/// A HyperLogLog sketch stored under one key: a handle from [`Db::hll`].
///
/// ```
/// # fn main() -> bitsled::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = bitsled::Db::open(dir.path())?;
/// let visitors = db.hll(b"visitors");
/// assert!(visitors.add(&["alice", "bob", "carol"])?);
/// assert!(!visitors.add(&["bob"])?); // already counted
/// assert_eq!(visitors.count()?, 3);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Hll<'a> {
    db: &'a Db,
    name: &'a [u8],
}

impl Hll<'_> {
    /// The key.
    #[must_use]
    pub fn key(&self) -> &[u8] {
        self.name
    }

    /// Adds `elements` to the sketch (Redis PFADD), creating it, even with
    /// no elements, if missing. Returns `true` if the key was created or a
    /// register changed (the estimate may have changed), else `false`. The
    /// key's expiry is kept.
    ///
    /// The stored bytes are exactly Redis 7's for the same commands: a new
    /// sketch starts sparse and turns dense past 3,000 bytes or when a
    /// register exceeds 32; GET returns them.
    ///
    /// Cost: reads the value (at most 12 KiB unless a sparse value was SET
    /// larger) and rewrites the changed pages, atomically under the key's
    /// lock.
    ///
    /// # Errors
    /// [`Error::WrongType`] for a key of another type;
    /// [`Error::NotHyperLogLog`] for a string that is not a sketch;
    /// [`Error::InvalidHyperLogLog`] for a corrupt sparse sketch (as in
    /// Redis, the elements before the one that failed stay added);
    /// [`Error::TooLarge`]; [`Error::Corrupted`]; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// let uv = db.hll(b"page:uv:20260101");
    /// assert!(uv.add(&["a", "b", "c"])?);
    /// assert!(!uv.add(&["a"])?);
    /// assert_eq!(uv.count()?, 3);
    /// // The value is Redis's: it starts with the HYLL header.
    /// assert_eq!(&db.get(b"page:uv:20260101")?.unwrap()[..4], b"HYLL");
    /// # Ok(()) }
    /// ```
    pub fn add<E: AsRef<[u8]>>(&self, elements: &[E]) -> Result<bool> {
        self.db.pfadd(self.name, elements)
    }

    /// The estimated number of distinct elements added (Redis PFCOUNT of
    /// this one key): the cached cardinality, or a new estimate, which is
    /// then cached in the stored value as Redis does. A missing key counts
    /// as an empty sketch. The standard error is 0.81%; the result is
    /// Redis's for the same registers.
    ///
    /// Cost: with a valid cache, 16 bytes are read; otherwise the value.
    ///
    /// # Errors
    /// As [`Hll::add`].
    pub fn count(&self) -> Result<u64> {
        self.db.pfcount(&[self.name])
    }

    /// The estimated number of distinct elements in the union of this
    /// sketch and `others` (Redis PFCOUNT with several keys). No key is
    /// changed; missing keys count as empty sketches.
    ///
    /// Cost: every value is read once (at most 12 KiB each).
    ///
    /// # Errors
    /// As [`Hll::add`], for the first key (this one, then `others` in
    /// order) that has the problem.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.hll(b"a").add(&["x", "y"])?;
    /// db.hll(b"b").add(&["y", "z"])?;
    /// assert_eq!(db.hll(b"a").count()?, 2);
    /// assert_eq!(db.hll(b"a").count_with(&[&b"b"[..], b"missing"])?, 3);
    /// # Ok(()) }
    /// ```
    pub fn count_with<K: AsRef<[u8]>>(&self, others: &[K]) -> Result<u64> {
        let mut keys: Vec<&[u8]> = Vec::with_capacity(1 + others.len());
        keys.push(self.name);
        keys.extend(others.iter().map(AsRef::as_ref));
        self.db.pfcount(&keys)
    }

    /// Merges the sketches of `sources` into this one (Redis PFMERGE with
    /// this key as the destination): each register becomes the largest
    /// among them. A missing destination is created; missing sources count
    /// as empty. As in Redis, the result is dense if any of them (the
    /// destination included) is dense, else it stays sparse until it
    /// outgrows the sparse limit; its cached cardinality is marked stale
    /// and its expiry kept.
    ///
    /// Cost: reads every key once, then the destination again under its
    /// lock and writes it atomically. A concurrent change to a source may
    /// or may not be included, as if it ran just before or just after.
    ///
    /// # Errors
    /// As [`Hll::add`], checking the destination first, then the sources
    /// in order.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.hll(b"monday").add(&["a", "b"])?;
    /// db.hll(b"tuesday").add(&["b", "c"])?;
    /// db.hll(b"week").merge_from(&[&b"monday"[..], b"tuesday"])?;
    /// assert_eq!(db.hll(b"week").count()?, 3);
    /// # Ok(()) }
    /// ```
    pub fn merge_from<K: AsRef<[u8]>>(&self, sources: &[K]) -> Result<()> {
        self.db.pfmerge(self.name, sources)
    }
}

impl Db {
    /// A handle on the HyperLogLog sketch under key `name` (which need not
    /// exist yet).
    #[must_use]
    pub fn hll<'a>(&'a self, name: &'a [u8]) -> Hll<'a> {
        Hll { db: self, name }
    }

    /// PFADD; see [`Hll::add`].
    pub(crate) fn pfadd<E: AsRef<[u8]>>(&self, key: &[u8], elements: &[E]) -> Result<bool> {
        self.engine.write(self.index, &[key], |tx| {
            let (meta, old, created) = match load_head(tx, key)? {
                Some((mut meta, head)) if hll::check_prefix(&head, meta.len) == Ok(Encoding::Dense) => {
                    let raised = add_dense(tx, key, &mut meta, head, elements)?;
                    if raised > 0 {
                        tx.set(key, &meta)?;
                        tx.count_changes(raised as u64 - 1);
                    }
                    return Ok(raised > 0);
                }
                Some((meta, _)) => {
                    let value = read_value(tx, key, &meta)?;
                    (meta, value, false)
                }
                None => (tx.new_value(Kind::String), Vec::new(), true),
            };
            let mut value = if created { hll::new_sparse() } else { old.clone() };
            let added = hll::add(&mut value, elements);
            if created {
                // Redis counts the creation as a change: the cache of the
                // new value is stale too.
                hll::invalidate_cache(&mut value);
            }
            if value != old {
                // A PFADD that fails on a corrupt sketch keeps the changes
                // of the elements before the failing one, but Redis does
                // not signal the key then.
                store(tx, key, meta, &old, &value, added.is_ok())?;
                if let Ok(n) = added {
                    // Redis counts the creation and each raised register;
                    // the recorded change counted one of them.
                    tx.count_changes((u64::from(created) + n as u64).saturating_sub(1));
                }
            }
            match added {
                Ok(n) => Ok(created || n > 0),
                Err(e) => Err(hll_error(key, e)),
            }
        })
    }

    /// PFCOUNT of one key or of the union of several; see [`Hll::count`]
    /// and [`Hll::count_with`].
    pub(crate) fn pfcount<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<u64> {
        match keys {
            [] => Err(Error::InvalidArgument("PFCOUNT needs at least one key".into())),
            [key] => self.pfcount_one(key.as_ref()),
            _ => {
                let mut max = [0u8; REGISTERS];
                for key in keys {
                    self.merge_key_into(key.as_ref(), &mut max)?;
                }
                Ok(hll::estimate_registers(&max))
            }
        }
    }

    /// PFCOUNT of one key, caching the estimate in the value.
    fn pfcount_one(&self, key: &[u8]) -> Result<u64> {
        self.engine.write(self.index, &[key], |tx| {
            let Some((meta, head)) = load_head(tx, key)? else { return Ok(0) };
            if let Some(card) = hll::cached(&head) {
                return Ok(card);
            }
            let old = read_value(tx, key, &meta)?;
            let mut value = old.clone();
            let (card, wrote) = hll::count(&mut value).map_err(|e| hll_error(key, e))?;
            if wrote {
                store(tx, key, meta, &old, &value, true)?;
            }
            Ok(card)
        })
    }

    /// Raises `max` to the registers of the sketch under `key`, if any;
    /// returns whether the sketch is dense.
    fn merge_key_into(&self, key: &[u8], max: &mut [u8; REGISTERS]) -> Result<bool> {
        let Some((_, value)) = self.engine.read(self.index, &[key], |tx| load(tx, key))? else { return Ok(false) };
        hll::merge_into(max, &value).map_err(|e| hll_error(key, e))?;
        Ok(hll::is_dense(&value))
    }

    /// PFMERGE; see [`Hll::merge_from`].
    pub(crate) fn pfmerge<K: AsRef<[u8]>>(&self, dest: &[u8], sources: &[K]) -> Result<()> {
        let mut max = [0u8; REGISTERS];
        let mut use_dense = self.merge_key_into(dest, &mut max)?;
        for src in sources {
            use_dense |= self.merge_key_into(src.as_ref(), &mut max)?;
        }
        self.engine.write(self.index, &[dest], |tx| {
            // `dest` again, under the lock that covers the write.
            let (meta, old, mut value) = match load(tx, dest)? {
                Some((meta, value)) => {
                    hll::merge_into(&mut max, &value).map_err(|e| hll_error(dest, e))?;
                    use_dense |= hll::is_dense(&value);
                    let copy = value.clone();
                    (meta, value, copy)
                }
                None => (tx.new_value(Kind::String), Vec::new(), hll::new_sparse()),
            };
            hll::merge_write(&mut value, &max, use_dense).map_err(|e| hll_error(dest, e))?;
            if value == old {
                // Redis signals PFMERGE's destination whatever changed.
                tx.touch(dest);
            } else {
                store(tx, dest, meta, &old, &value, true)?;
            }
            Ok(())
        })
    }
}
