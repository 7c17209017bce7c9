//! Regression tests for bugs found in review, one per test; each states the
//! invariant that was broken.

use bitsled::testing::PAGE_BITS;
use bitsled::MAX_OFFSET;
use bitsled::{BitOp, Config, Db, Error};

fn open(dir: &std::path::Path, cache: u64) -> Db {
    Config::new(dir).cache_bytes(cache).flush_interval(None).open().unwrap()
}

/// A page stream that scans the store (a range not starting at page 0)
/// must not put page bytes into the cache that a write-back has replaced
/// since the scan read them: an acknowledged SETBIT stays visible and
/// durable, and stored counts match the pages.
#[test]
fn scan_stream_never_caches_stale_pages() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path(), 1 << 20);
        for p in 1..=5 {
            db.setbit(b"k", p * PAGE_BITS, true).unwrap();
        }
        db.flush().unwrap();
    }
    {
        // A one-byte cache evicts every clean page at once.
        let db = open(dir.path(), 1);
        let mut it = db.ones(b"k", PAGE_BITS..).unwrap();
        assert_eq!(it.next().unwrap().unwrap(), PAGE_BITS);
        db.setbit(b"k", 2 * PAGE_BITS + 7, true).unwrap();
        db.flush().unwrap();
        assert_eq!(it.next().unwrap().unwrap(), 2 * PAGE_BITS);
        assert_eq!(it.next().unwrap().unwrap(), 2 * PAGE_BITS + 7, "the iterator sees the page as written");
        assert!(db.getbit(b"k", 2 * PAGE_BITS + 7).unwrap());
        db.setbit(b"k", 2 * PAGE_BITS + 9, true).unwrap();
        db.flush().unwrap();
    }
    let db = open(dir.path(), 1 << 20);
    assert!(db.getbit(b"k", 2 * PAGE_BITS + 7).unwrap());
    assert!(db.getbit(b"k", 2 * PAGE_BITS + 9).unwrap());
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Offsets whose byte length would overflow `len * 8` are refused; the
/// largest allowed offset works and survives a reopen.
#[test]
fn offsets_near_u64_max() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path(), 1 << 20);
        for bad in [u64::MAX, MAX_OFFSET + 1] {
            let r = db.setbit(b"k", bad, true);
            assert!(matches!(r, Err(Error::OffsetOutOfRange { offset }) if offset == bad), "{r:?}");
            let r = db.set_bits(b"k", &[1, bad], true);
            assert!(matches!(r, Err(Error::OffsetOutOfRange { .. })), "{r:?}");
        }
        assert!(!db.exists(b"k").unwrap(), "a refused batch changes nothing");
        db.setbit(b"k", MAX_OFFSET, true).unwrap();
        assert_eq!(db.bitop(BitOp::Or, b"copy", &[b"k"]).unwrap(), MAX_OFFSET / 8 + 1);
        db.flush().unwrap();
    }
    let db = open(dir.path(), 1 << 20);
    assert!(db.getbit(b"k", MAX_OFFSET).unwrap());
    assert_eq!(db.strlen(b"k").unwrap(), MAX_OFFSET / 8 + 1);
    assert_eq!(db.ones(b"copy", ..).unwrap().map(Result::unwrap).collect::<Vec<_>>(), vec![MAX_OFFSET]);
    // BITPOS answers in i64, as Redis does: a position past i64::MAX is an error.
    let r = db.bitpos(b"k", true, Some(-1), None, bitsled::Unit::Bit);
    assert!(matches!(r, Err(Error::OffsetOutOfRange { offset: MAX_OFFSET })), "{r:?}");
    assert!(db.verify().unwrap().is_ok());
}

/// BITOP whose destination is one of its sources does not lose a SETBIT to
/// that key that completed while the BITOP ran (no serial order of the two
/// commands would lose it).
#[test]
fn bitop_into_its_source_keeps_concurrent_setbit() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 1 << 30);
    let big: Vec<u64> = (0..4000u64).map(|p| p * PAGE_BITS + 3).collect();
    db.set_bits(b"b", &big, true).unwrap();
    db.setbit(b"a", 5, true).unwrap();
    let mut lost = 0;
    for round in 0..20u64 {
        let db2 = db.clone();
        let t = std::thread::spawn(move || db2.bitop(BitOp::Or, b"a", &[b"a", b"b"]).unwrap());
        std::thread::sleep(std::time::Duration::from_micros(500 + round * 100));
        db.setbit(b"a", 1, true).unwrap();
        t.join().unwrap();
        if !db.getbit(b"a", 1).unwrap() {
            lost += 1;
        }
        db.setbit(b"a", 1, false).unwrap();
    }
    assert_eq!(lost, 0, "SETBITs lost by a concurrent BITOP into their key");
}
