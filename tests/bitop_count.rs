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

/// The set bits of `key`, read with GET (the page streams, not the flat
/// lists).
fn bits_of(db: &bitsled::Db, key: &[u8]) -> std::collections::BTreeSet<u64> {
    let bytes = db.get(key).unwrap().unwrap_or_default();
    (0..bytes.len() as u64 * 8).filter(|&b| bytes[(b / 8) as usize] & (0x80 >> (b % 8)) != 0).collect()
}

/// Checks AND, OR and XOR counts of `keys` against their bits read with GET.
fn check_counts(db: &bitsled::Db, keys: &[&[u8]], step: &str) {
    let sets: Vec<_> = keys.iter().map(|k| bits_of(db, k)).collect();
    let all: std::collections::BTreeSet<u64> = sets.iter().flatten().copied().collect();
    let in_how_many = |b: &u64| sets.iter().filter(|s| s.contains(b)).count();
    let and = all.iter().filter(|b| in_how_many(b) == sets.len()).count() as u64;
    let xor = all.iter().filter(|b| in_how_many(b) % 2 == 1).count() as u64;
    assert_eq!(db.bitop_count(BitOp::And, keys).unwrap().1, and, "AND after {step}");
    assert_eq!(db.bitop_count(BitOp::Or, keys).unwrap().1, all.len() as u64, "OR after {step}");
    assert_eq!(db.bitop_count(BitOp::Xor, keys).unwrap().1, xor, "XOR after {step}");
}

/// Invariant: the flat position lists kept for sparse sources follow every
/// kind of write to them (SETBIT, clearing bits, SET, SETRANGE, a BITOP
/// into a source, RENAME, DEL, a write-back): each count equals what the
/// sources' bytes, read through the page streams, give.
#[test]
fn sparse_sources_follow_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
    let a: Vec<u64> = (0..40).map(|i| i * 7919 % 300_000).collect();
    let b: Vec<u64> = (0..40).map(|i| i * 104_729 % 300_000).chain(a[..10].iter().copied()).collect();
    db.set_bits(b"a", &a, true).unwrap();
    db.set_bits(b"b", &b, true).unwrap();
    db.setbit(b"b", 299_999, false).unwrap();
    check_counts(&db, &[b"a", b"b"], "the first writes");
    check_counts(&db, &[b"a", b"b"], "nothing (the lists are kept)");
    db.setbit(b"a", b[20], true).unwrap();
    check_counts(&db, &[b"a", b"b"], "SETBIT");
    db.set_bits(b"b", &a[..5], false).unwrap();
    check_counts(&db, &[b"a", b"b"], "clearing bits");
    db.flush().unwrap();
    check_counts(&db, &[b"a", b"b"], "a write-back");
    let mut bytes = vec![0u8; 30_000];
    bytes[100] = 0x81;
    bytes[29_999] = 1;
    db.set(b"a", &bytes).unwrap();
    check_counts(&db, &[b"a", b"b"], "SET");
    db.setrange(b"b", 100, &[0xFF]).unwrap();
    check_counts(&db, &[b"a", b"b"], "SETRANGE");
    db.bitop(BitOp::Or, b"a", &[b"a", b"b"]).unwrap();
    check_counts(&db, &[b"a", b"b"], "a BITOP into a source");
    db.rename(b"b", b"c", false).unwrap();
    check_counts(&db, &[b"a", b"c"], "RENAME");
    db.set_bits(b"c", &[5], true).unwrap();
    check_counts(&db, &[b"a", b"c"], "a write to the renamed key");
    db.delete(b"a").unwrap();
    check_counts(&db, &[b"a", b"c"], "DEL");
    db.set_bits(b"a", &[5, 6], true).unwrap();
    check_counts(&db, &[b"a", b"c"], "a new key under a deleted name");
}
