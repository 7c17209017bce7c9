//! Invariant: `Db::bitop_count(op, sources)` answers exactly what
//! `Db::bitop(op, dest, sources)` followed by BITCOUNT of `dest` gives
//! (length and count), for every operation and source shape, and writes
//! nothing.

use bitsled::{BitOp, Config};
use proptest::prelude::*;

const PAGE: u64 = 32_768;

/// A source: absent, or set offsets over a few pages (sparse, dense, runs).
fn source() -> impl Strategy<Value = Option<Vec<u64>>> {
    let offsets = prop::collection::vec((0u64..6, 0u64..PAGE, 1u64..3000), 0..6).prop_map(|runs| {
        runs.into_iter()
            .flat_map(|(page, start, n)| (start..(start + n).min(PAGE)).map(move |b| page * PAGE + b))
            .collect()
    });
    prop::option::weighted(0.85, offsets)
}

const OPS: [BitOp; 8] =
    [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Not, BitOp::Diff, BitOp::Diff1, BitOp::AndOr, BitOp::One];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn count_only_equals_bitop_then_bitcount(sources in prop::collection::vec(source(), 1..5)) {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
        let names: Vec<Vec<u8>> = (0..sources.len()).map(|i| format!("src:{i}").into_bytes()).collect();
        for (name, offsets) in names.iter().zip(&sources) {
            if let Some(offsets) = offsets {
                db.set_bits(name, offsets, true).unwrap();
            }
        }
        let refs: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
        for op in OPS {
            let counted = db.bitop_count(op, &refs);
            let before = db.dbsize().unwrap();
            match db.bitop(op, b"dest", &refs) {
                Ok(len) => {
                    let (clen, cones) = counted.unwrap();
                    prop_assert_eq!(clen, len, "{:?}", op);
                    prop_assert_eq!(cones, db.bitcount(b"dest", None).unwrap(), "{:?}", op);
                    db.delete(b"dest").unwrap();
                }
                Err(e) => prop_assert_eq!(counted.unwrap_err().to_string(), e.to_string()),
            }
            // bitop_count itself created nothing.
            let again = db.bitop_count(op, &refs).map(|_| ());
            prop_assert_eq!(db.dbsize().unwrap(), before, "{:?} {:?}", op, again);
        }
    }
}

/// One page of a source: absent, a few positions, a dense random half, a
/// run, or full (each page encoding, and lists met before and after words).
fn page_shape() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        Just(Vec::new()),
        prop::collection::vec(0u64..PAGE, 1..40),
        any::<u64>().prop_map(|seed| {
            (0..PAGE).filter(|b| (b.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed).rotate_left(17) & 1 == 1).collect()
        }),
        (0u64..PAGE, 1u64..5000).prop_map(|(s, n)| (s..(s + n).min(PAGE)).collect()),
        Just((0..PAGE).collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Invariant: the count of an AND equals the size of the intersection
    /// of the sources' sets, computed naively, whatever the order in which
    /// sparse, dense, run and full pages meet (the AND stops taking pages
    /// at a column's first empty intersection).
    #[test]
    fn and_counts_the_intersection(pages in prop::collection::vec(prop::collection::vec(page_shape(), 3), 2..6)) {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
        let mut sets: Vec<std::collections::BTreeSet<u64>> = Vec::new();
        let names: Vec<Vec<u8>> = (0..pages.len()).map(|i| format!("day:{i}").into_bytes()).collect();
        for (name, source) in names.iter().zip(&pages) {
            let offsets: std::collections::BTreeSet<u64> = source
                .iter()
                .enumerate()
                .flat_map(|(p, bits)| bits.iter().map(move |b| p as u64 * PAGE + b))
                .collect();
            // Every source reaches the last page, so lengths agree.
            db.setbit(name, 3 * PAGE - 1, false).unwrap();
            let list: Vec<u64> = offsets.iter().copied().collect();
            db.set_bits(name, &list, true).unwrap();
            sets.push(offsets);
        }
        let want = sets[0].iter().filter(|b| sets[1..].iter().all(|s| s.contains(b))).count() as u64;
        let refs: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(db.bitop_count(BitOp::And, &refs).unwrap(), (3 * PAGE / 8, want));
        db.flush().unwrap();
        prop_assert_eq!(db.bitop_count(BitOp::And, &refs).unwrap(), (3 * PAGE / 8, want), "after a write-back");
    }
}
