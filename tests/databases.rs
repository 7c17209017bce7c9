//! Databases (SELECT), FLUSHDB / FLUSHALL / SWAPDB / MOVE, the per-database
//! key counts behind DBSIZE, and inline values.
//!
//! Invariants:
//! - DBSIZE equals the number of keys a full listing finds, after any mix
//!   of writes, deletes, expiries, flushes, swaps, moves and reopens;
//! - a flushed database stays empty across reopen and its records are
//!   reclaimed; the other databases keep theirs;
//! - a value moved to another database survives a flush of the database it
//!   left, even when neither change was written back yet;
//! - a value of at most 64 bytes is kept inline and a longer one in pages,
//!   whichever way it got there, with the same bytes either way.

use bitsled::{BitOp, Config, Db, ExpireCondition};
use rand::{Rng, SeedableRng};

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

fn listed(db: &Db) -> u64 {
    db.keys(b"*").unwrap().len() as u64
}

#[test]
fn dbsize_is_the_true_count_through_random_operations_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let seed: u64 = rand::random();
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    let mut now = 1_000_000u64;
    let clock = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(now));
    let open_clocked = |dir: &std::path::Path| {
        let c = std::sync::Arc::clone(&clock);
        Config::new(dir)
            .flush_interval(None)
            .databases(4)
            .clock(move || c.load(std::sync::atomic::Ordering::SeqCst))
            .open()
            .unwrap()
    };
    let mut db = open_clocked(dir.path());
    let mut log: Vec<String> = Vec::new();
    for step in 0..3000 {
        let d = db.select(r.gen_range(0..4)).unwrap();
        let key = format!("k{}", r.gen_range(0..40)).into_bytes();
        let what = r.gen_range(0..100);
        log.push(format!("db{} {} {what}", d.index(), String::from_utf8_lossy(&key)));
        match what {
            0..=39 => {
                d.setbit(&key, r.gen_range(0..70_000), r.gen_bool(0.8)).unwrap();
            }
            40..=49 => d.set(&key, &vec![7u8; r.gen_range(0..100)]).unwrap(),
            50..=59 => {
                d.delete(&key).unwrap();
            }
            60..=69 => {
                let at = now + r.gen_range(1..5_000);
                d.expire_at(&key, at, ExpireCondition::Always).unwrap();
            }
            70..=74 => {
                now += r.gen_range(0..3_000);
                clock.store(now, std::sync::atomic::Ordering::SeqCst);
            }
            75..=79 => {
                d.move_key(&key, (d.index() + 1) % 4).unwrap();
            }
            80..=84 => {
                let other = format!("k{}", r.gen_range(0..40)).into_bytes();
                d.bitop(BitOp::Or, &key, &[&key, &other]).unwrap();
            }
            85 => {
                d.flush_db().unwrap();
            }
            86 => {
                d.flush_all().unwrap();
            }
            87..=89 => d.swap_db(r.gen_range(0..4), r.gen_range(0..4)).unwrap(),
            90..=94 => d.flush().unwrap(),
            95 => {
                d.persist(&key).unwrap();
            }
            _ => {
                drop(d);
                drop(db);
                db = open_clocked(dir.path());
                continue;
            }
        }
        for i in 0..4 {
            let d = db.select(i).unwrap();
            // Like Redis's DBSIZE, the count includes keys whose expiry
            // passed but that nothing deleted yet; a lookup deletes them.
            for k in 0..40 {
                d.exists(format!("k{k}").as_bytes()).unwrap();
            }
            let n = listed(&d);
            assert_eq!(
                d.dbsize().unwrap(),
                n,
                "seed {seed}, step {step}, db {i}; last steps: {:?}",
                &log[log.len().saturating_sub(12)..]
            );
        }
    }
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "seed {seed}: {report:?}");
}

/// Regression: FLUSHDB dropped the cached, not yet written buckets of the
/// flushed database, so the reclaimer worked from their older stored
/// versions, which still named a value MOVE had taken to another database,
/// and deleted its pages.
#[test]
fn a_moved_value_survives_a_flush_of_the_database_it_left() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.setbit(b"k", 1_000_000, true).unwrap();
    db.flush().unwrap();
    assert!(db.move_key(b"k", 1).unwrap());
    assert_eq!(db.flush_db().unwrap(), 0);
    db.flush().unwrap();
    db.flush().unwrap();
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
    drop(db);
    let db = open(dir.path()).select(1).unwrap();
    assert!(db.getbit(b"k", 1_000_000).unwrap());
    assert_eq!(db.bitcount(b"k", None).unwrap(), 1);
}

#[test]
fn flushed_databases_stay_empty_and_their_records_are_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let one = db.select(1).unwrap();
    for i in 0..2000u64 {
        // Two pages each: stored as pages, not kept in the entry.
        db.set_bits(format!("a{i}").as_bytes(), &[1, (i + 1) * 40_000], true).unwrap();
        one.setbit(format!("b{i}").as_bytes(), 3, true).unwrap();
    }
    db.flush().unwrap();
    let pages_before = db.verify().unwrap().pages;
    assert_eq!(db.flush_db().unwrap(), 2000);
    assert_eq!(db.dbsize().unwrap(), 0);
    db.flush().unwrap();
    drop((db, one));
    let db = open(dir.path());
    assert_eq!(db.dbsize().unwrap(), 0);
    assert!(db.keys(b"*").unwrap().is_empty());
    assert_eq!(db.select(1).unwrap().dbsize().unwrap(), 2000);
    // Open reclaims for up to a second, the rest goes on with write-backs.
    for _ in 0..100 {
        if db.verify().unwrap().pages == 0 {
            break;
        }
        db.flush().unwrap();
    }
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert!(pages_before >= 2000);
    assert_eq!(report.pages, 0, "the flushed database's pages are gone");
    assert_eq!(report.keys, 2000);
}

#[test]
fn swapdb_swaps_every_handle_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let two = db.select(2).unwrap();
    db.set(b"x", b"zero").unwrap();
    two.set(b"x", b"two").unwrap();
    db.swap_db(0, 2).unwrap();
    assert_eq!(db.get(b"x").unwrap().as_deref(), Some(&b"two"[..]));
    assert_eq!(two.get(b"x").unwrap().as_deref(), Some(&b"zero"[..]));
    db.flush().unwrap();
    drop((db, two));
    let db = open(dir.path());
    assert_eq!(db.get(b"x").unwrap().as_deref(), Some(&b"two"[..]));
    assert!(db.swap_db(0, 16).is_err(), "16 databases by default: 0..=15");
    assert!(db.select(16).is_err());
}

#[test]
fn small_values_are_inline_and_grow_into_pages() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let inline = |db: &Db, k: &[u8]| db.key_stats(k).unwrap().unwrap().inline;
    // A month of sign-ins: 31 bits.
    for day in [0, 5, 30] {
        db.setbit(b"sign", day, true).unwrap();
    }
    assert!(inline(&db, b"sign"));
    db.setbit(b"sign", 511, true).unwrap();
    assert!(inline(&db, b"sign"), "512 bits still fit");
    db.setbit(b"sign", 512, true).unwrap();
    let st = db.key_stats(b"sign").unwrap().unwrap();
    assert!(st.inline && st.records == 0, "bit 512 needs a 65th byte: page 0 is kept in the entry: {st:?}");
    db.setbit(b"sign", 40_000, true).unwrap();
    assert!(!inline(&db, b"sign"), "a second page: pages");
    assert_eq!(db.bitcount(b"sign", None).unwrap(), 6);
    // Whole-value writes of at most 64 bytes go back inline.
    db.set(b"sign", &[0xff; 64]).unwrap();
    assert!(inline(&db, b"sign"));
    db.bitop(BitOp::Not, b"not", &[b"sign"]).unwrap();
    assert!(inline(&db, b"not"));
    assert_eq!(db.get(b"not").unwrap().unwrap(), vec![0u8; 64]);
    db.set(b"long", &[1; 65]).unwrap();
    assert!(!inline(&db, b"long"));
    db.flush().unwrap();
    drop(db);
    let db = open(dir.path());
    assert_eq!(db.get(b"sign").unwrap().unwrap(), vec![0xff; 64]);
    assert_eq!(db.get(b"long").unwrap().unwrap(), vec![1; 65]);
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.pages, 1, "only the 65-byte value has a page");
}

/// Invariant: `all_key_stats` is the sum of `key_stats` over the
/// database's live keys (inline and paged, a Bloom filter, a key deleted
/// and one expired not counted), and counts only this database.
#[test]
fn all_key_stats_is_the_sum_over_the_live_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for i in 0..500u64 {
        let k = format!("k{i}").into_bytes();
        db.set_bits(&k, &[i, i * 977 * (i % 5)], true).unwrap();
    }
    db.set(b"s", b"a string").unwrap();
    db.bloom(b"bf").add(b"item").unwrap();
    db.delete(b"k3").unwrap();
    db.set(b"gone", b"x").unwrap();
    assert!(db.expire_at(b"gone", 1, bitsled::ExpireCondition::Always).unwrap());
    db.select(1).unwrap().set(b"other", b"db 1").unwrap();
    let (n, total) = db.all_key_stats().unwrap();
    let keys = db.keys(b"*").unwrap();
    assert_eq!(n, keys.len() as u64);
    assert_eq!(n, 501);
    let (mut stored, mut records, mut pages, mut ones, mut len) = (0, 0, 0, 0, 0);
    for k in &keys {
        let st = db.key_stats(k).unwrap().unwrap();
        stored += st.stored_bytes;
        records += st.records;
        pages += st.pages();
        ones += st.ones;
        len += st.len;
    }
    assert_eq!(
        (total.stored_bytes, total.records, total.pages(), total.ones, total.len),
        (stored, records, pages, ones, len)
    );
    assert!(total.pages() > 0 && total.stored_bytes > 0);
}
