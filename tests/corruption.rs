//! Invariant: a damaged stored page, as a page record or in its group's
//! record, is reported as `Error::Corrupted` naming the key and page, never
//! a panic; other keys keep working; `verify()` names the damaged key and
//! page (a group by its first page). A damaged metadata bucket is reported
//! naming the key that was looked up (and, by verify, the bucket); a
//! damaged metadata delta record refuses the open, naming the record.

use bitsled::{Config, Db, Error};

const PAGE_NS: u8 = 0x02;
/// Namespace of page groups.
const GROUP_NS: u8 = 0x07;
/// The first bit of page 64, the first page of group 1.
const GROUP_1: u64 = 64 * 32_768;
/// Namespace of metadata buckets.
const BUCKET_NS: u8 = 0x06;
/// Namespace of metadata delta records.
const DELTA_NS: u8 = 0x08;

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

/// Rewrites every stored record of namespace `ns` with `damage` applied, by
/// opening the store directly while bitsled has it closed.
fn damage_records(dir: &std::path::Path, ns: u8, damage: impl Fn(&mut Vec<u8>)) -> usize {
    let store = bitsled::testing::open_raw_store(dir).unwrap();
    let mut n = 0;
    for r in store.scan_prefix([ns]) {
        let (k, v) = r.unwrap();
        let mut v = v.to_vec();
        damage(&mut v);
        store.insert(k, v).unwrap();
        n += 1;
    }
    store.flush().unwrap();
    n
}

/// The victim: page 0 dense (every other bit: a page record of its own)
/// and page 64 with two bits (a member of group 1's record).
fn setup(dir: &std::path::Path) {
    let db = open(dir);
    let dense: Vec<u64> = (0..32_768).step_by(2).collect();
    db.set_bits(b"victim", &dense, true).unwrap();
    db.set_bits(b"victim", &[GROUP_1 + 1, GROUP_1 + 100], true).unwrap();
    db.flush().unwrap();
}

fn assert_corrupted_page<T: std::fmt::Debug>(r: bitsled::Result<T>, page: u64) {
    match r {
        Err(Error::Corrupted { key, page: p, reason }) => {
            assert_eq!(key, "victim");
            assert_eq!(p, Some(page));
            assert!(!reason.is_empty());
        }
        other => panic!("expected Corrupted for page {page}, got {other:?}"),
    }
}

#[test]
fn flipped_page_byte_is_reported_with_key_and_page() {
    for at in [0usize, 1, 2, 5, 9] {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path());
        {
            let db = open(dir.path());
            db.set_bits(b"healthy", &[3, 50_000], true).unwrap();
            db.flush().unwrap();
        }
        // Damage only the victim's records: its bitmap id is the first,
        // and the healthy key (two small pages) has no page record.
        let store = bitsled::testing::open_raw_store(dir.path()).unwrap();
        for ns in [PAGE_NS, GROUP_NS] {
            let (k, v) = store.scan_prefix([ns]).next().unwrap().unwrap();
            let mut v = v.to_vec();
            let i = at.min(v.len() - 1);
            v[i] ^= 0x10;
            store.insert(k, v).unwrap();
        }
        store.flush().unwrap();
        drop(store);

        let db = open(dir.path());
        assert_corrupted_page(db.getbit(b"victim", 1), 0);
        assert_corrupted_page(db.getbit(b"victim", GROUP_1 + 100), 64);
        assert_corrupted_page(db.bitcount(b"victim", Some(bitsled::Span::bytes(0, 3))), 0);
        assert_corrupted_page(db.get(b"victim"), 0);
        assert_corrupted_page(db.bitop(bitsled::BitOp::Or, b"dst", &[b"victim"]), 0);
        // Whole-key BITCOUNT reads only metadata, which is intact.
        assert_eq!(db.bitcount(b"victim", None).unwrap(), 16_386);
        // The healthy key is unaffected.
        assert!(db.getbit(b"healthy", 50_000).unwrap());
        assert_eq!(db.get(b"healthy").unwrap().map(|v| v.len()), Some(6251));
        let report = db.verify().unwrap();
        let named: Vec<(Option<Vec<u8>>, Option<u64>)> =
            report.problems.iter().map(|p| (p.key.clone(), p.page)).collect();
        assert!(named.contains(&(Some(b"victim".to_vec()), Some(0))), "{report:?}");
        assert!(named.contains(&(Some(b"victim".to_vec()), Some(64))), "{report:?}");
        assert!(report.problems.iter().all(|p| p.key.as_deref() == Some(&b"victim"[..])), "{report:?}");
    }
}

#[test]
fn truncated_and_zeroed_pages_are_errors() {
    for damage in [
        (|v: &mut Vec<u8>| v.truncate(3)) as fn(&mut Vec<u8>),
        |v| v.iter_mut().for_each(|b| *b = 0),
        |v| v.clear(),
        |v| v.extend_from_slice(&[0; 8]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path());
        assert_eq!(damage_records(dir.path(), PAGE_NS, damage), 1);
        assert_eq!(damage_records(dir.path(), GROUP_NS, damage), 1);
        let db = open(dir.path());
        assert_corrupted_page(db.getbit(b"victim", 100), 0);
        assert_corrupted_page(db.getbit(b"victim", GROUP_1 + 1), 64);
        assert!(!db.verify().unwrap().is_ok());
    }
}

#[test]
fn damaged_metadata_is_reported_with_key() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    // Opening replays the delta records into the buckets and folds them.
    drop(open(dir.path()));
    assert_eq!(damage_records(dir.path(), DELTA_NS, |_| ()), 0, "no delta record is left after the open");
    assert_eq!(damage_records(dir.path(), BUCKET_NS, |v| v[5] ^= 1), 1, "the victim's bucket");
    let db = open(dir.path());
    let r = db.getbit(b"victim", 1);
    assert!(matches!(&r, Err(Error::Corrupted { key, page: None, .. }) if key == "victim"), "{r:?}");
    let r = db.setbit(b"victim", 1, false);
    assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
    let report = db.verify().unwrap();
    assert!(report.problems[0].reason.contains("metadata bucket"), "{report:?}");
    // Its pages now belong to no readable key: reported once, without a key.
    assert_eq!(report.problems.len(), 2, "{report:?}");
    assert_eq!(report.problems[1].key, None, "{report:?}");
    assert!(report.problems[1].reason.contains("belong to no key"), "{report:?}");
    assert!(report.problems[1].reason.contains("metadata may be damaged"), "{report:?}");
}

/// A bucket whose checksum holds but whose entry does not decode (an
/// unknown tag bit) is damaged metadata too: verify says the pages left
/// without a key may be that key's, although the error names the key, not
/// the bucket.
#[test]
fn damaged_bucket_entry_marks_unowned_pages() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    drop(open(dir.path()));
    let damaged = damage_records(dir.path(), BUCKET_NS, |v| {
        // version, depth, count (4), then the one entry: shared 0, length
        // 6, "victim", its tag.
        assert_eq!(&v[6..14], b"\x00\x06victim", "the victim's entry");
        v[14] |= 0x40;
        let body = v.len() - 4;
        let crc = crc32fast::hash(&v[..body]);
        v[body..].copy_from_slice(&crc.to_le_bytes());
    });
    assert_eq!(damaged, 1, "the victim's bucket");
    let db = open(dir.path());
    let report = db.verify().unwrap();
    assert_eq!(report.problems.len(), 2, "{report:?}");
    assert!(report.problems[0].reason.contains("unknown tag bits"), "{report:?}");
    assert!(!report.problems[0].reason.contains("bucket"), "the error names the key: {report:?}");
    assert!(report.problems[1].reason.contains("belong to no key"), "{report:?}");
    assert!(report.problems[1].reason.contains("metadata may be damaged"), "{report:?}");
}

#[test]
fn damaged_delta_record_refuses_the_open() {
    for damage in [(|v: &mut Vec<u8>| v[6] ^= 0x04) as fn(&mut Vec<u8>), |v| v.truncate(7), |v| v.clear()] {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path());
        assert_eq!(damage_records(dir.path(), BUCKET_NS, |_| ()), 0, "the key's metadata is only in a delta");
        assert_eq!(damage_records(dir.path(), DELTA_NS, damage), 1, "the victim's delta record");
        let r = Config::new(dir.path()).flush_interval(None).open();
        assert!(
            matches!(&r, Err(Error::Corrupted { key, .. }) if key.starts_with("<metadata delta")),
            "{:?}",
            r.as_ref().err()
        );
    }
}

/// Invariant: a paged value whose metadata counts set bits but whose page
/// records are all gone from the store (as when the store loses records)
/// reads as an error naming the key, never as a value of zeros; the other
/// keys still read, and a key written since the open (its pages in memory
/// only) is not taken for one.
#[test]
fn a_value_whose_pages_are_all_lost_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    {
        let db = open(dir.path());
        db.set(b"other", b"fine").unwrap();
        db.flush().unwrap();
    }
    let store = bitsled::testing::open_raw_store(dir.path()).unwrap();
    let mut removed = 0;
    for ns in [PAGE_NS, GROUP_NS] {
        let keys: Vec<_> = store.scan_prefix([ns]).map(|r| r.unwrap().0).collect();
        for k in keys {
            store.remove(k).unwrap();
            removed += 1;
        }
    }
    store.flush().unwrap();
    drop(store);
    assert_eq!(removed, 2, "the victim's page record and its group record");
    let db = open(dir.path());
    for r in [db.get(b"victim").map(|_| ()), db.bitop_count(bitsled::BitOp::Or, &[b"victim"]).map(|_| ())] {
        match r {
            Err(Error::Corrupted { key, page: None, reason }) => {
                assert_eq!(key, "victim");
                assert!(reason.contains("no page"), "{reason}");
            }
            other => panic!("expected Corrupted for the victim, got {other:?}"),
        }
    }
    assert_eq!(db.get(b"other").unwrap().as_deref(), Some(&b"fine"[..]));
    let fresh: Vec<u64> = (0..32_768).step_by(3).collect();
    db.set_bits(b"fresh", &fresh, true).unwrap();
    assert_eq!(db.bitcount(b"fresh", None).unwrap(), fresh.len() as u64);
    assert_eq!(db.get(b"fresh").unwrap().map(|v| v.len()), Some(4096));
}
