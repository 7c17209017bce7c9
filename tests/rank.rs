//! Rank, select and range cardinality against a naive model: a sorted list
//! of the set offsets.
//!
//! Invariants checked, for bitmaps spread over several pages (sparse,
//! dense and run-shaped pages, an inline value, pages still dirty and
//! pages read back from the store):
//! - `count_in(a..=b)` equals the number of model offsets in `a..=b`;
//! - `rank(o)` equals the number of model offsets `<= o`;
//! - `select_bit(n)` is the model's `n`-th offset, `None` past the count;
//! - `rank(select_bit(n)) == n + 1`.

use bitsled::{BloomOptions, Config, Db, Error};
use proptest::prelude::*;

const PAGE: u64 = 32_768;

fn model_count(model: &[u64], first: u64, last: u64) -> u64 {
    model.iter().filter(|&&o| o >= first && o <= last).count() as u64
}

/// Offsets: a few clusters at random pages, each sparse, dense or a run.
fn offsets() -> impl Strategy<Value = Vec<u64>> {
    let cluster = (0u64..40, 0u8..3, any::<u64>()).prop_map(|(page, shape, seed)| {
        let base = page * PAGE;
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        match shape {
            0 => (0..20).map(|_| base + next() % PAGE).collect::<Vec<_>>(),
            1 => (0..PAGE).filter(|_| next() % 2 == 0).map(|b| base + b).collect(),
            _ => {
                let start = next() % PAGE;
                (start..(start + 5000).min(PAGE)).map(|b| base + b).collect()
            }
        }
    });
    prop::collection::vec(cluster, 0..5).prop_map(|clusters| {
        let mut all: Vec<u64> = clusters.into_iter().flatten().collect();
        all.sort_unstable();
        all.dedup();
        all
    })
}

fn check(db: &Db, key: &[u8], model: &[u64], probes: &[(u64, u64)]) -> Result<(), TestCaseError> {
    let end = model.last().map_or(0, |&o| o + 1);
    for &(a, b) in probes {
        let (a, b) = (a % (end + PAGE), b % (end + PAGE));
        let (first, last) = (a.min(b), a.max(b));
        prop_assert_eq!(
            db.count_in(key, first..=last).unwrap(),
            model_count(model, first, last),
            "{}..={}",
            first,
            last
        );
        prop_assert_eq!(db.rank(key, last).unwrap(), model_count(model, 0, last), "rank {}", last);
    }
    prop_assert_eq!(db.count_in(key, ..).unwrap(), model.len() as u64);
    let n = model.len();
    let sample: Vec<usize> =
        [0, 1, n / 3, n / 2, n.saturating_sub(2), n.saturating_sub(1)].into_iter().filter(|&i| i < n).collect();
    for i in sample {
        let pos = db.select_bit(key, i as u64).unwrap();
        prop_assert_eq!(pos, Some(model[i]), "select {}", i);
        prop_assert_eq!(db.rank(key, model[i]).unwrap(), i as u64 + 1);
    }
    prop_assert_eq!(db.select_bit(key, n as u64).unwrap(), None);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn rank_select_and_counts_match_the_model(model in offsets(), probes in prop::collection::vec((any::<u64>(), any::<u64>()), 8)) {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
        db.set_bits(b"k", &model, true).unwrap();
        // Dirty pages first, then the same value read back from the store.
        check(&db, b"k", &model, &probes)?;
        db.flush().unwrap();
        drop(db);
        let db = Config::new(dir.path()).flush_interval(None).cache_bytes(1 << 16).open().unwrap();
        check(&db, b"k", &model, &probes)?;
    }
}

/// Invariant: a short value (kept inline in its metadata) answers as a paged
/// one; edge ranges (empty, reversed, past the end, the last offset) count
/// nothing beyond the value.
#[test]
fn inline_values_and_edge_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.set(b"short", b"\xf0\x01").unwrap(); // bits 0-3 and 15
    assert_eq!(db.count_in(b"short", ..).unwrap(), 5);
    assert_eq!(db.count_in(b"short", 4..15).unwrap(), 0);
    assert_eq!(db.count_in(b"short", 4..=15).unwrap(), 1);
    assert_eq!(db.count_in(b"short", 16..).unwrap(), 0);
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 9..=3;
    assert_eq!(db.count_in(b"short", reversed).unwrap(), 0);
    assert_eq!(db.count_in(b"short", u64::MAX..).unwrap(), 0);
    assert_eq!(db.rank(b"short", 2).unwrap(), 3);
    assert_eq!(db.select_bit(b"short", 3).unwrap(), Some(3));
    assert_eq!(db.select_bit(b"short", 4).unwrap(), Some(15));
    assert_eq!(db.select_bit(b"short", 5).unwrap(), None);
    assert_eq!(db.rank(b"missing", 100).unwrap(), 0);
    assert_eq!(db.select_bit(b"missing", 0).unwrap(), None);
    db.setbit(b"top", u32::MAX.into(), true).unwrap();
    assert_eq!(db.select_bit(b"top", 0).unwrap(), Some(u32::MAX.into()));
    assert_eq!(db.rank(b"top", u64::from(u32::MAX) - 1).unwrap(), 0);
    assert_eq!(db.rank(b"top", u32::MAX.into()).unwrap(), 1);
}

/// Invariant: a key of another type is an error, not a count.
#[test]
fn other_types_are_wrongtype() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.bloom(b"bf").reserve(0.01, 100, BloomOptions::default()).unwrap();
    assert!(matches!(db.rank(b"bf", 5), Err(Error::WrongType)));
    assert!(matches!(db.select_bit(b"bf", 0), Err(Error::WrongType)));
    assert!(matches!(db.count_in(b"bf", ..), Err(Error::WrongType)));
}
