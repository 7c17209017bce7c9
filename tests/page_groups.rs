//! Page groups (format 3): a page whose encoding is small lives in its
//! group's record (pages 64g ..= 64g + 63), any other page in a record of
//! its own, and every write-back keeps it so, whatever the pages' history.
//!
//! Checked here: the record count and bytes of sparse keys; pages moving
//! between their group and a record of their own as they grow and shrink;
//! a property test against a model over mixed densities with write-backs,
//! reopens and a small cache (members loaded with their group); and the
//! upgrade of a format 2 store, whose small pages are page records.

use std::collections::BTreeSet;
use std::path::Path;

use bitsled::{BitOp, Config, Db};
use proptest::prelude::*;

/// Bits per page.
const P: u64 = 32_768;

fn open(dir: &Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

fn listed(db: &Db, key: &[u8]) -> Vec<u64> {
    db.ones(key, ..).unwrap().map(Result::unwrap).collect()
}

/// `verify` is clean and every page is where format 3 puts it.
fn assert_sound(db: &Db) -> bitsled::VerifyReport {
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.misplaced_pages, 0, "{report:?}");
    report
}

/// 100 pages of two bits each are 100 members of 2 group records (pages
/// 0-63 and 64-99): a few bytes a page, where page records of their own
/// cost a 17-byte key, 8 bytes of header and checksum and 4 of positions.
#[test]
fn small_pages_share_their_group_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let bits: Vec<u64> = (0..100).flat_map(|p| [p * P + 5, p * P + 900]).collect();
    db.set_bits(b"k", &bits, true).unwrap();
    let st = db.key_stats(b"k").unwrap().unwrap();
    assert_eq!((st.pages(), st.sparse_pages, st.records), (100, 100, 2), "{st:?}");
    // Per page: a 2-byte member head and 4 bytes of positions; per group:
    // a 17-byte key, 2 bytes of header and a 4-byte checksum; then the
    // key's metadata entry (under 48 bytes).
    let pages = 100 * (2 + 4) + 2 * (17 + 2 + 4);
    assert!(st.stored_bytes >= pages && st.stored_bytes < pages + 48, "{st:?}");
    let report = assert_sound(&db);
    assert_eq!(report.pages, 100);
    assert_eq!(listed(&db, b"k"), bits);
}

/// A page that grows past a member's size leaves its group for a record of
/// its own, comes back when it shrinks, and a group whose pages are all
/// cleared is removed; the bits survive each step and a reopen.
#[test]
fn pages_move_between_group_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut model: BTreeSet<u64> = [3, P + 7, 2 * P + 11].into();
    let records = |db: &Db| db.key_stats(b"k").unwrap().unwrap().records;
    {
        let db = open(dir.path());
        db.set_bits(b"k", &model.iter().copied().collect::<Vec<_>>(), true).unwrap();
        assert_eq!(records(&db), 1, "three small pages, one group");
        // Page 1 grows: 2,000 scattered bits are 4,000 bytes of positions.
        let many: Vec<u64> = (0..2_000).map(|i| P + i * 16).collect();
        db.set_bits(b"k", &many, true).unwrap();
        model.extend(&many);
        assert_eq!(records(&db), 2, "page 1 is a record of its own");
        assert_sound(&db);
    }
    {
        let db = open(dir.path());
        assert_eq!(listed(&db, b"k"), model.iter().copied().collect::<Vec<_>>());
        // Page 1 shrinks back to two bits: it rejoins the group.
        let drop: Vec<u64> = (0..2_000).map(|i| P + i * 16).filter(|&o| o != P + 16).collect();
        db.set_bits(b"k", &drop, false).unwrap();
        for o in &drop {
            model.remove(o);
        }
        assert_eq!(records(&db), 1, "page 1 is back in its group");
        assert_sound(&db);
        assert_eq!(listed(&db, b"k"), model.iter().copied().collect::<Vec<_>>());
        // Clearing every bit removes the group record; the key stays, all zero.
        let all: Vec<u64> = model.iter().copied().collect();
        db.set_bits(b"k", &all, false).unwrap();
        let st = db.key_stats(b"k").unwrap().unwrap();
        assert_eq!((st.records, st.pages(), st.ones), (0, 0, 0), "{st:?}");
        assert_sound(&db);
    }
    let db = open(dir.path());
    assert!(listed(&db, b"k").is_empty());
    assert_eq!(db.strlen(b"k").unwrap(), 2 * P / 8 + 2);
}

/// What one step of the property test does to pages `page ..= page + 2`.
#[derive(Clone, Debug)]
enum Step {
    /// Sets (or clears) `n` bits spread over the pages, from `seed`.
    Bits { page: u64, n: u16, seed: u16, value: bool },
    /// Writes everything back (and makes it durable).
    Flush,
    /// Closes and reopens the database with a small cache.
    Reopen,
    /// Reads one page's bits (loading its group into the cache).
    Read { page: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..140u64, prop_oneof![1..8u16, 40..70u16, 200..600u16], any::<u16>(), any::<bool>())
            .prop_map(|(page, n, seed, value)| Step::Bits { page, n, seed, value }),
        2 => Just(Step::Flush),
        1 => Just(Step::Reopen),
        2 => (0..140u64).prop_map(|page| Step::Read { page }),
    ]
}

/// The offsets step `Bits` touches: `n` bits over pages `page ..= page +
/// 2`, spread by a multiplicative hash of `seed`.
fn offsets(page: u64, n: u16, seed: u16) -> Vec<u64> {
    (0..u64::from(n))
        .map(|i| {
            let x = (u64::from(seed) << 16 | i).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
            page * P + x % (3 * P)
        })
        .collect()
}

fn reopen_small(dir: &Path) -> Db {
    Config::new(dir).flush_interval(None).cache_bytes(64 << 10).open().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Invariant: whatever the mix of page sizes, write-backs, reopens and
    /// cache evictions, the key holds the model's bits, BITOP over it
    /// agrees, verify is clean and every page is where the format puts it.
    #[test]
    fn groups_keep_the_model(steps in prop::collection::vec(step(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut model: BTreeSet<u64> = BTreeSet::new();
        let mut db = reopen_small(dir.path());
        for s in &steps {
            match *s {
                Step::Bits { page, n, seed, value } => {
                    let offs = offsets(page, n, seed);
                    db.set_bits(b"k", &offs, value).unwrap();
                    for o in offs {
                        if value { model.insert(o); } else { model.remove(&o); }
                    }
                }
                Step::Flush => db.flush().unwrap(),
                Step::Reopen => {
                    drop(db);
                    db = reopen_small(dir.path());
                }
                Step::Read { page } => {
                    let got = db.count_in(b"k", page * P..(page + 1) * P).unwrap();
                    prop_assert_eq!(got, model.range(page * P..(page + 1) * P).count() as u64);
                }
            }
        }
        prop_assert_eq!(listed(&db, b"k"), model.iter().copied().collect::<Vec<_>>());
        db.bitop(BitOp::Or, b"copy", &[b"k"]).unwrap();
        prop_assert_eq!(listed(&db, b"copy"), model.iter().copied().collect::<Vec<_>>());
        assert_sound(&db);
        drop(db);
        let db = reopen_small(dir.path());
        prop_assert_eq!(listed(&db, b"k"), model.iter().copied().collect::<Vec<_>>());
        prop_assert_eq!(listed(&db, b"copy"), model.iter().copied().collect::<Vec<_>>());
    }
}

/// Rewrites the store in `dir` (closed, its metadata folded into buckets:
/// no delta record) as format 2 wrote it: every group member becomes a
/// page record of its own and the superblock says 2.
fn downgrade_to_format_2(dir: &Path) {
    let store = bitsled::testing::open_raw_store(dir).unwrap();
    for r in store.scan_prefix([0x07u8]) {
        let (key, value) = r.unwrap();
        let group = u64::from_be_bytes(key[9..17].try_into().unwrap());
        for (slot, record) in bitsled::testing::split_group_record(&value).unwrap() {
            let mut page_key = key.to_vec();
            page_key[0] = 0x02;
            page_key[9..17].copy_from_slice(&(group * 64 + u64::from(slot)).to_be_bytes());
            store.insert(page_key, record).unwrap();
        }
        store.remove(&key).unwrap();
    }
    let mut superblock = store.get([0u8]).unwrap().unwrap().to_vec();
    assert!(store.scan_prefix([0x08u8]).next().is_none(), "no metadata delta record");
    assert_eq!(superblock[8], bitsled::testing::FORMAT_VERSION, "written in the current format");
    superblock[8] = 2;
    let crc = crc32fast::hash(&superblock[..11]);
    superblock[11..15].copy_from_slice(&crc.to_le_bytes());
    store.insert([0u8], superblock).unwrap();
    store.flush().unwrap();
}

/// A format 2 store opens as format 4 with every bit where it was: its
/// small pages, page records of their own, read as they are and are
/// reported as misplaced, not as problems; a page written again joins its
/// group, and a compaction moves them all.
#[test]
fn format_2_stores_open_and_regroup() {
    let dir = tempfile::tempdir().unwrap();
    let bits: Vec<u64> = (0..70).map(|p| p * P + p).collect();
    {
        let db = open(dir.path());
        db.set_bits(b"sparse", &bits, true).unwrap();
        db.set_bits(b"dense", &(0..P).step_by(3).collect::<Vec<_>>(), true).unwrap();
        // Folds the metadata into buckets, as format 2 kept it.
        assert!(db.verify().unwrap().is_ok());
    }
    downgrade_to_format_2(dir.path());
    {
        let db = open(dir.path());
        assert_eq!(listed(&db, b"sparse"), bits);
        let st = db.key_stats(b"sparse").unwrap().unwrap();
        assert_eq!((st.pages(), st.records), (70, 70), "{st:?}");
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{report:?}");
        assert_eq!(report.misplaced_pages, 70, "the dense page is where it belongs");
        // Page 5 is written again: it joins group 0; the other pages stay.
        db.setbit(b"sparse", 5 * P + 100, true).unwrap();
        let st = db.key_stats(b"sparse").unwrap().unwrap();
        assert_eq!(st.records, 70, "69 page records and the new group: {st:?}");
        assert_eq!(db.verify().unwrap().misplaced_pages, 69);
        assert_eq!(db.count_in(b"sparse", ..).unwrap(), 71);
        let out = tempfile::tempdir().unwrap();
        db.compact_into(&out.path().join("c")).unwrap();
        let compacted = open(&out.path().join("c"));
        assert_sound(&compacted);
        assert_eq!(compacted.key_stats(b"sparse").unwrap().unwrap().records, 2);
        assert_eq!(listed(&compacted, b"sparse").len(), 71);
        assert_eq!(compacted.bitcount(b"dense", None).unwrap(), P.div_ceil(3));
    }
    // The superblock was rewritten: the store is in the current format.
    let store = bitsled::testing::open_raw_store(dir.path()).unwrap();
    assert_eq!(store.get([0u8]).unwrap().unwrap()[8], bitsled::testing::FORMAT_VERSION);
}
