//! Tests of page delta records and page folds through the public API, with
//! the store opened directly (while the database is closed) to see which
//! records hold the bits.

use super::layout;
use super::store::{SledStore, Store};
use crate::{Config, Db};

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

/// A stored (key, value).
type Record = (Vec<u8>, Vec<u8>);

/// (page delta records, their bytes, page records and group records with
/// their bytes) in the closed store.
fn census(dir: &std::path::Path) -> (usize, usize, Vec<Record>) {
    let store = SledStore::open(dir, 1 << 20).unwrap();
    let deltas: Vec<usize> = store.scan_prefix(&[layout::NS_PAGE_DELTA]).map(|r| r.unwrap().1.len()).collect();
    let pages = [layout::NS_PAGE, layout::NS_GROUP]
        .iter()
        .flat_map(|ns| store.scan_prefix(&[*ns]).map(|r| r.unwrap()).map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect();
    (deltas.len(), deltas.iter().sum(), pages)
}

/// Offsets of a bitmap whose pages are neither tiny nor dense: every 7th
/// bit of pages 0 to 3 (about 4,700 bits a page).
fn base_bits() -> Vec<u64> {
    (0..4 * 32_768).step_by(7).collect()
}

/// Invariant: a write-back stores a few changed bits of stored pages as a
/// page delta record, not as rewritten pages: after the first flush wrote
/// the pages, a second flush of 40 SETBITs (set and cleared) leaves every
/// page record byte for byte as it was and adds delta records of a few
/// hundred bytes; reads see the changes before and after a reopen; the
/// reopen replays the records, folds them (no delta record left, the
/// pages rewritten) and verify is clean.
#[test]
fn changed_bits_are_logged_until_the_open_folds_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut model = crate::model::Model::default();
    for off in base_bits() {
        db.setbit(b"days", off, true).unwrap();
        model.setbit(b"days", off, true);
    }
    db.flush().unwrap();
    drop(db);
    let (deltas, _, pages_before) = census(dir.path());
    assert_eq!(deltas, 0);
    let db = open(dir.path());
    for i in 0..40u64 {
        let (off, value) = (i * 3_271 % (4 * 32_768), i % 3 != 0);
        db.setbit(b"days", off, value).unwrap();
        model.setbit(b"days", off, value);
    }
    db.flush().unwrap();
    let check = |db: &Db| {
        assert_eq!(db.bitcount(b"days", None).unwrap(), model.bitcount(b"days", None));
        assert_eq!(db.get(b"days").unwrap(), model.get(b"days"));
    };
    check(&db);
    drop(db);
    let (deltas, bytes, pages) = census(dir.path());
    assert!(deltas >= 1 && bytes < 400, "{deltas} delta records of {bytes} bytes");
    assert_eq!(pages, pages_before, "no page record was rewritten");
    let db = open(dir.path());
    check(&db);
    drop(db);
    let (deltas, _, pages) = census(dir.path());
    assert_eq!(deltas, 0, "the open folded every page delta");
    assert_ne!(pages, pages_before);
    let db = open(dir.path());
    check(&db);
    assert!(db.verify().unwrap().is_ok());
}

/// Invariant: deltas of one page replay in write-back order and compose:
/// a bit set, cleared and set again over separate flushes, pages emptied
/// and refilled while logged, all read back exactly after a reopen.
#[test]
fn deltas_of_many_write_backs_replay_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut model = crate::model::Model::default();
    let set = |db: &Db, model: &mut crate::model::Model, off: u64, value: bool| {
        db.setbit(b"k", off, value).unwrap();
        model.setbit(b"k", off, value);
    };
    for off in (0..32_768).step_by(50) {
        set(&db, &mut model, off, true);
    }
    db.flush().unwrap();
    for round in 0..30u64 {
        set(&db, &mut model, 5, round % 2 == 0);
        set(&db, &mut model, 1_000 + round, true);
        db.flush().unwrap();
    }
    drop(db);
    assert!(census(dir.path()).0 >= 30, "every write-back logged its bits");
    let db = open(dir.path());
    assert_eq!(db.get(b"k").unwrap(), model.get(b"k"));
    // A logged page emptied, then filled again, in separate write-backs.
    let mut db = db;
    for round in 0..2 {
        for off in (0..32_768).step_by(25) {
            set(&db, &mut model, off, round == 1);
        }
        db.flush().unwrap();
        drop(db);
        db = open(dir.path());
        assert_eq!(db.get(b"k").unwrap(), model.get(b"k"), "round {round}");
    }
    assert!(db.verify().unwrap().is_ok());
}

/// Invariant: a bitmap with logged pages that dies (DEL) makes its
/// write-back fold every logged page, so no delta record outlives the
/// pages the reclaimer deletes: the store is left with no delta record and
/// no page of the deleted key, and a reopen is clean.
#[test]
fn deleting_a_logged_bitmap_folds_the_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for off in base_bits() {
        db.setbit(b"gone", off, true).unwrap();
        db.setbit(b"kept", off, true).unwrap();
    }
    db.flush().unwrap();
    db.setbit(b"gone", 3, true).unwrap();
    db.setbit(b"kept", 3, true).unwrap();
    db.flush().unwrap();
    let logged = db.engine.pages.logged_pages();
    assert_eq!(logged, 2, "one page of each key is logged");
    assert!(db.delete(b"gone").unwrap());
    db.flush().unwrap();
    assert_eq!(db.engine.pages.logged_pages(), 0);
    drop(db);
    let (deltas, _, _) = census(dir.path());
    assert_eq!(deltas, 0);
    let db = open(dir.path());
    assert!(!db.exists(b"gone").unwrap());
    assert!(db.getbit(b"kept", 3).unwrap());
    assert_eq!(db.bitcount(b"kept", None).unwrap(), base_bits().len() as u64 + 1);
    assert!(db.verify().unwrap().is_ok());
}

/// Writes key `wide`: every 9th bit of `pages` pages (dense pages), and
/// flushes; returns the model holding the same.
fn wide(db: &Db, pages: u64) -> crate::model::Model {
    let mut model = crate::model::Model::default();
    for off in (0..pages * 32_768).step_by(9) {
        db.setbit(b"wide", off, true).unwrap();
        model.setbit(b"wide", off, true);
    }
    db.flush().unwrap();
    model
}

/// Invariant: logged pages stay within their share of the cache and half
/// of it again: with a tiny cache, write-backs fold instead of logging
/// past the limit, and the bits survive a reopen.
#[test]
fn logged_pages_stay_within_their_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config::new(dir.path()).flush_interval(None).cache_bytes(64 << 10).dirty_bytes(16 << 10);
    let db = config().open().unwrap();
    let pages = 40u64;
    let mut model = wide(&db, pages);
    let limit = db.engine.logged_limit();
    let mut most = 0;
    for round in 0..20u64 {
        for p in 0..pages {
            let off = p * 32_768 + 1 + round * 9;
            db.setbit(b"wide", off, true).unwrap();
            model.setbit(b"wide", off, true);
        }
        db.flush().unwrap();
        let logged = db.engine.pages.logged_bytes();
        // A fold spread over write-backs lets them pass the limit by half
        // at most (then one write-back folds them all).
        assert!(logged <= limit + limit / 2 + (8 << 10), "round {round}: {logged} bytes logged, limit {limit}");
        most = most.max(logged);
    }
    assert!(most > 0, "some pages were logged");
    drop(db);
    let db = config().open().unwrap();
    assert_eq!(db.get(b"wide").unwrap(), model.get(b"wide"));
    assert!(db.verify().unwrap().is_ok());
}

/// Invariant: `key_stats` describes a key's current pages, logged ones
/// included: the same figures before and after a reopen has folded the
/// page delta records.
#[test]
fn key_stats_count_logged_pages_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for off in (0..2 * 32_768).step_by(50) {
        db.setbit(b"sparse", off, true).unwrap();
    }
    db.flush().unwrap();
    for off in [1, 2, 3, 32_769, 32_770] {
        db.setbit(b"sparse", off, true).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.engine.pages.logged_pages(), 2, "both pages were logged");
    let logged = db.key_stats(b"sparse").unwrap().unwrap();
    drop(db);
    let db = open(dir.path());
    let folded = db.key_stats(b"sparse").unwrap().unwrap();
    assert_eq!(format!("{logged:?}"), format!("{folded:?}"));
}

/// Copies the files of `from` into `to`, recursively (a store's files at
/// one instant: what a crash leaves).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Invariant: a page fold is spread over write-backs: once the page delta
/// records outgrow the logged pages, a fold writes an eighth of the
/// logged pages' limit whole per write-back (so it lasts several), each
/// with a reset entry in that write-back's record, and then deletes the
/// records written before it began, a step's bytes per write-back. A copy of
/// the store taken after any flush (a crash there) opens to the model's
/// bits and verifies clean, and so does the store.
#[test]
fn page_folds_spread_over_write_backs_survive_a_crash_at_every_step() {
    let dir = tempfile::tempdir().unwrap();
    // Logged pages' limit 512 KiB: every page is logged, a step writes
    // 64 KiB of them.
    let config = |p: &std::path::Path| Config::new(p).flush_interval(None).cache_bytes(1 << 20).dirty_bytes(256 << 10);
    let db = config(dir.path()).open().unwrap();
    let pages = 40u64;
    let mut model = wide(&db, pages);
    let (mut fold_flushes, mut folds_ended, mut partly_deleted, mut resets, mut last_records) = (0, 0, 0, 0, 0);
    for round in 0..40u64 {
        // Few changes first, so the pages are logged; then many.
        let changes = if round == 0 { 100 } else { 400 };
        for p in 0..pages {
            for j in 0..changes {
                let off = p * 32_768 + (j * 97 + round * 13) % 32_768;
                db.setbit(b"wide", off, round % 2 == 1).unwrap();
                model.setbit(b"wide", off, round % 2 == 1);
            }
        }
        db.flush().unwrap();
        let (folding, records) = {
            let log = db.engine.page_log.lock();
            (log.folding.is_some(), log.keys.len())
        };
        fold_flushes += usize::from(folding);
        partly_deleted += usize::from(folding && records < last_records);
        // The end of a fold deletes records (writers' own write-backs
        // may have ended it before the flush).
        folds_ended += usize::from(records < last_records);
        last_records = records;
        let copy = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), copy.path());
        {
            let store = SledStore::open(copy.path(), 1 << 20).unwrap();
            for r in store.scan_prefix(&[layout::NS_PAGE_DELTA]) {
                let (_, v) = r.unwrap();
                resets += super::pagedelta::decode("t", &v).unwrap().iter().filter(|d| d.is_reset()).count();
            }
        }
        let crashed = config(copy.path()).open().unwrap();
        assert_eq!(crashed.get(b"wide").unwrap(), model.get(b"wide"), "a crash after round {round}");
        assert!(crashed.verify().unwrap().is_ok(), "round {round}");
    }
    assert!(fold_flushes >= 2, "folds lasted several write-backs: {fold_flushes}");
    assert!(folds_ended >= 1, "a fold ended");
    assert!(partly_deleted >= 1, "a fold deleted its older records over several write-backs");
    assert!(resets > 0, "steps recorded resets");
    drop(db);
    let db = config(dir.path()).open().unwrap();
    assert_eq!(db.get(b"wide").unwrap(), model.get(b"wide"));
    assert!(db.verify().unwrap().is_ok());
}
