//! Invariant: reading a bitmap page by page gives its bits whatever mix of
//! pages is cached, not cached, dirty or new since the directory was built.
//! Streams look a run of cached pages up ahead of use; this checks listings,
//! BITOP and BITOP.COUNT (AND skips pages, OR visits all) against a model
//! after a reopen with a small cache and a mix of reads and writes.

use std::collections::BTreeSet;

use bitsled::{BitOp, Config};
use proptest::prelude::*;

const PAGE: u64 = 32_768;
/// 40 pages: runs of 16 pages, whole and cut.
const SPAN: u64 = 40 * PAGE;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn streams_read_every_mix_of_cached_pages(
        a in prop::collection::vec(0..SPAN, 1..400),
        b in prop::collection::vec(0..SPAN, 1..400),
        reads in prop::collection::vec(0..SPAN, 0..40),
        writes in prop::collection::vec((0..SPAN, any::<bool>()), 0..60),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut ma: BTreeSet<u64> = a.iter().copied().collect();
        let mb: BTreeSet<u64> = b.iter().copied().collect();
        {
            let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
            db.set_bits(b"a", &a, true).unwrap();
            db.set_bits(b"b", &b, true).unwrap();
            db.flush().unwrap();
        }
        let db = Config::new(dir.path()).flush_interval(None).cache_bytes(1 << 16).open().unwrap();
        // Build the directory (a stream from page 0) reading one page, then
        // cache some pages and change others.
        prop_assert_eq!(db.bitcount(b"a", None).unwrap(), ma.len() as u64);
        let first = db.ones(b"a", ..).unwrap().next().transpose().unwrap();
        prop_assert_eq!(first, ma.first().copied());
        for &r in &reads {
            db.getbit(b"a", r).unwrap();
        }
        for &(w, v) in &writes {
            db.setbit(b"a", w, v).unwrap();
            if v { ma.insert(w); } else { ma.remove(&w); }
        }
        let listed: Vec<u64> = db.ones(b"a", ..).unwrap().map(Result::unwrap).collect();
        prop_assert_eq!(&listed, &ma.iter().copied().collect::<Vec<_>>());
        let and = ma.intersection(&mb).count() as u64;
        let or = ma.union(&mb).count() as u64;
        prop_assert_eq!(db.bitop_count(BitOp::And, &[b"a", b"b"]).unwrap().1, and);
        prop_assert_eq!(db.bitop_count(BitOp::Or, &[b"b", b"a"]).unwrap().1, or);
        db.bitop(BitOp::And, b"both", &[b"b", b"a"]).unwrap();
        let both: Vec<u64> = db.ones(b"both", ..).unwrap().map(Result::unwrap).collect();
        prop_assert_eq!(both, ma.intersection(&mb).copied().collect::<Vec<_>>());
    }
}
