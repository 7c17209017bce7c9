//! A bitmap read into memory once, for many set operations on it.
//!
//! `Db::bitop_count` looks its keys up and opens a page stream per source on
//! every call; for bitmaps of a page or a few that lookup is nearly all of
//! the call (BENCHMARKS.md, "Small-bitmap AND counts"). An application that
//! intersects the same few hundred tag bitmaps pairwise, or ORs a
//! collection of them, reads each once into a [`Bitmap`] (its pages: a
//! paged value's shared with the page cache, not copied; a value kept in
//! its entry decoded into one) and runs the page kernels on the bitmaps
//! directly: no key lock, no metadata read, no stream.

use std::sync::Arc;

use crate::db::Db;
use crate::engine::Reading;
use crate::error::Result;
use crate::geometry::{value_pages, PAGE_WORDS};
use crate::page::{fold_pages, Fold, Page, SPARSE_MAX};

/// The set bits of a bitmap as they were when it was read: its non-empty
/// pages, in page order. See [`Db::bitmap`].
///
/// A bitmap is a value: later writes to the key do not change it, and it
/// holds no lock. It costs about the bitmap's stored size in memory.
#[derive(Clone, Debug, Default)]
pub struct Bitmap {
    /// (page number, page), ascending, no empty page.
    pages: Vec<(u64, Arc<Page>)>,
    /// The value's length in bytes (Redis's STRLEN).
    len: u64,
}

impl Db {
    /// The bitmap of `key` read into memory: its pages (a paged value's
    /// shared with the page cache). A missing key gives an empty bitmap of
    /// length 0.
    ///
    /// # Errors
    /// [`crate::Error::WrongType`] for a key that is not a string;
    /// [`crate::Error::Corrupted`] for a page that does not decode.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set_bits(b"tag:vip", &[5, 70_000, 9_000_000], true)?;
    /// db.set_bits(b"tag:active", &[5, 9_000_000, 12], true)?;
    /// let vip = db.bitmap(b"tag:vip")?;
    /// let active = db.bitmap(b"tag:active")?;
    /// assert_eq!(vip.and_count(&active), 2);
    /// let either = bitsled::Bitmap::union(&[&vip, &active]);
    /// assert_eq!(either.count(), 4);
    /// assert_eq!(either.ones().collect::<Vec<_>>(), vec![5, 12, 70_000, 9_000_000]);
    /// # Ok(()) }
    /// ```
    pub fn bitmap(&self, key: &[u8]) -> Result<Bitmap> {
        let (meta, stream) = self.string_and_stream(key, |m| value_pages(m.len), Reading::ToTheEnd)?;
        let len = meta.map_or(0, |m| m.len);
        let mut pages = Vec::new();
        if let Some(mut stream) = stream {
            while let Some((n, page)) = stream.next_page()? {
                if !page.is_empty() {
                    pages.push((n, page));
                }
            }
        }
        Ok(Bitmap { pages, len })
    }
}

impl Bitmap {
    /// The value's length in bytes when it was read (STRLEN).
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the value was empty or missing (length 0).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of set bits (BITCOUNT).
    #[must_use]
    pub fn count(&self) -> u64 {
        self.pages.iter().map(|(_, p)| u64::from(p.count_ones())).sum()
    }

    /// The number of bits set in both `self` and `other` (the BITCOUNT of
    /// their BITOP AND), page by page without building the AND.
    #[must_use]
    pub fn and_count(&self, other: &Bitmap) -> u64 {
        let (mut a, mut b) = (self.pages.as_slice(), other.pages.as_slice());
        let mut n = 0u64;
        while let (Some((pa, x)), Some((pb, y))) = (a.first(), b.first()) {
            if pa == pb {
                n += u64::from(x.and_count(y));
            }
            if pa <= pb {
                a = &a[1..];
            }
            if pb <= pa {
                b = &b[1..];
            }
        }
        n
    }

    /// The union (BITOP OR) of `sources`; its length is the longest
    /// source's, as BITOP's result. A page held by one source only is
    /// shared, not copied; pages of sparse sources that stay sparse are
    /// merged as position lists, others through words.
    #[must_use]
    pub fn union(sources: &[&Bitmap]) -> Bitmap {
        let len = sources.iter().map(|s| s.len).max().unwrap_or(0);
        let mut all: Vec<(u64, &Arc<Page>)> =
            sources.iter().flat_map(|s| s.pages.iter().map(|(n, p)| (*n, p))).collect();
        // Stable: a page's sources stay in the order given.
        all.sort_by_key(|(n, _)| *n);
        let mut pages = Vec::new();
        let mut positions: Vec<u16> = Vec::new();
        let mut words = [0u64; PAGE_WORDS];
        for group in all.chunk_by(|a, b| a.0 == b.0) {
            let n = group[0].0;
            if let [(_, only)] = group {
                pages.push((n, Arc::clone(only)));
                continue;
            }
            let listed = group.iter().try_fold(0usize, |n, (_, p)| p.sparse_positions().map(|l| n + l.len()));
            let page = if listed.is_some_and(|n| n <= SPARSE_MAX as usize) {
                positions.clear();
                group.iter().filter_map(|(_, p)| p.sparse_positions()).for_each(|l| positions.extend_from_slice(l));
                positions.sort_unstable();
                positions.dedup();
                Page::from_positions(&positions)
            } else {
                fold_pages(Fold::Or, group.iter().map(|(_, p)| p.as_ref()), &mut words);
                Page::from_words(&words)
            };
            pages.push((n, Arc::new(page)));
        }
        Bitmap { pages, len }
    }

    /// The offsets of the set bits, ascending.
    pub fn ones(&self) -> impl Iterator<Item = u64> + '_ {
        self.pages.iter().flat_map(|(n, p)| p.offsets(*n))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use rand::{Rng, SeedableRng};

    use super::Bitmap;

    /// Bit offsets of one of the shapes the page encodings are chosen for:
    /// scattered single bits (sparse), short runs (run lists), long runs
    /// (full pages), half-full words (dense) and a few dozen half-full
    /// words amid empty ones (EWAH).
    fn shape(rng: &mut rand::rngs::StdRng, kind: u32, span: u64) -> BTreeSet<u64> {
        let mut set = BTreeSet::new();
        match kind {
            0 => (0..rng.gen_range(0..60)).for_each(|_| {
                set.insert(rng.gen_range(0..span));
            }),
            1 => (0..rng.gen_range(0..40)).for_each(|_| {
                let start = rng.gen_range(0..span);
                set.extend(start..start + rng.gen_range(1..20));
            }),
            2 => (0..rng.gen_range(0..4)).for_each(|_| {
                let start = rng.gen_range(0..span);
                set.extend(start..start + rng.gen_range(1..70_000));
            }),
            3 => (0..span.min(100_000)).filter(|_| rng.gen_bool(0.5)).for_each(|b| {
                set.insert(b);
            }),
            _ => {
                let start = rng.gen_range(0..span);
                (start..start + 1_280).filter(|_| rng.gen_bool(0.5)).for_each(|b| {
                    set.insert(b);
                });
            }
        }
        set
    }

    /// Invariant: a bitmap's count, AND count with another, union and
    /// listed offsets equal those of the sets of offsets written, for
    /// every pair of shapes (so every pair of page encodings), and the
    /// AND count equals the database's own `bitop_count`.
    #[test]
    fn bitmaps_match_the_sets_they_were_written_from() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = crate::Db::open(dir.path()).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(27);
        let mut encodings = BTreeSet::new();
        for round in 0..40 {
            let span = if round % 2 == 0 { 40_000 } else { 300_000 };
            let sets: Vec<BTreeSet<u64>> = (0..5).map(|k| shape(&mut rng, (round + k) % 5, span)).collect();
            for (i, set) in sets.iter().enumerate() {
                let bits: Vec<u64> = set.iter().copied().collect();
                db.set_bits(format!("s:{round}:{i}").as_bytes(), &bits, true).unwrap();
            }
            // Pages read back from the store (after a reopen) come in their
            // stored, smallest representations, EWAH included; cached ones
            // in whatever form their writes left them.
            if round % 2 == 0 {
                drop(db);
                db = crate::Db::open(dir.path()).unwrap();
            }
            let mut snaps = Vec::new();
            for (i, set) in sets.iter().enumerate() {
                let key = format!("s:{round}:{i}");
                let bits: Vec<u64> = set.iter().copied().collect();
                let snap = db.bitmap(key.as_bytes()).unwrap();
                encodings.extend(snap.pages.iter().map(|(_, p)| format!("{:?}", p.encoding())));
                assert_eq!(snap.count(), set.len() as u64);
                assert_eq!(snap.ones().collect::<Vec<_>>(), bits);
                assert_eq!(snap.len(), set.last().map_or(0, |b| b / 8 + 1));
                snaps.push((key, snap));
            }
            for (i, (ka, a)) in snaps.iter().enumerate() {
                for (j, (kb, b)) in snaps.iter().enumerate() {
                    let want = sets[i].intersection(&sets[j]).count() as u64;
                    assert_eq!(a.and_count(b), want, "round {round}, sets {i} and {j}");
                    let keys = [ka.as_bytes(), kb.as_bytes()];
                    assert_eq!(db.bitop_count(crate::BitOp::And, &keys).unwrap().1, want);
                }
            }
            let refs: Vec<&Bitmap> = snaps.iter().map(|(_, s)| s).collect();
            let union = Bitmap::union(&refs);
            let want: BTreeSet<u64> = sets.iter().flatten().copied().collect();
            assert_eq!(union.ones().collect::<Vec<_>>(), want.into_iter().collect::<Vec<_>>());
            assert_eq!(union.len(), refs.iter().map(|s| s.len()).max().unwrap_or(0));
        }
        // Every representation was met (the page tests pair each with each).
        assert_eq!(encodings.len(), 4, "{encodings:?}");
    }

    /// Invariant: a missing key reads as an empty bitmap; a bitmap
    /// keeps the value it read after the key changes.
    #[test]
    fn a_bitmap_is_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path()).unwrap();
        let none = db.bitmap(b"missing").unwrap();
        assert!(none.is_empty());
        assert_eq!(none.count(), 0);
        db.set_bits(b"k", &[3, 100_000], true).unwrap();
        let before = db.bitmap(b"k").unwrap();
        db.set_bits(b"k", &[4], true).unwrap();
        db.set_bits(b"k", &[3], false).unwrap();
        assert_eq!(before.ones().collect::<Vec<_>>(), vec![3, 100_000]);
        assert_eq!(db.bitmap(b"k").unwrap().ones().collect::<Vec<_>>(), vec![4, 100_000]);
    }
}
