//! `Db::idle_time` (Redis OBJECT IDLETIME): seconds since a key was last
//! used, by the database's clock. The databases here have no background
//! thread, so every use reads the clock (with one, the thread's reading of
//! a tenth of a second ago is used).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bitsled::Config;

/// Invariant: reads and writes reset a key's idle time; `exists`,
/// `key_type`, `expiry`, `memory_usage` and `idle_time` itself do not;
/// `touch` does; a missing key has none; each key keeps its own time.
#[test]
fn reads_and_writes_reset_the_idle_time_and_lookups_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(1_800_000_000_000));
    let clock = Arc::clone(&now);
    let db = Config::new(dir.path()).clock(move || clock.load(Ordering::Relaxed)).flush_interval(None).open().unwrap();
    let later = |secs: u64| {
        now.fetch_add(secs * 1000, Ordering::Relaxed);
    };
    db.set(b"a", b"1").unwrap();
    db.setbit(b"b", 3, true).unwrap();
    assert_eq!(db.idle_time(b"a").unwrap(), Some(0));
    assert_eq!(db.idle_time(b"missing").unwrap(), None);
    later(5);
    assert!(db.exists(b"a").unwrap());
    assert_eq!(db.key_type(b"a").unwrap(), "string");
    db.expiry(b"a").unwrap();
    db.memory_usage(b"a").unwrap();
    assert_eq!(db.idle_time(b"a").unwrap(), Some(5), "lookups are not uses");
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.idle_time(b"a").unwrap(), Some(0), "a read is a use");
    assert_eq!(db.idle_time(b"b").unwrap(), Some(5), "each key has its own time");
    later(7);
    assert!(db.touch(b"b").unwrap());
    assert!(!db.touch(b"missing").unwrap());
    assert_eq!(db.idle_time(b"b").unwrap(), Some(0));
    assert_eq!(db.idle_time(b"a").unwrap(), Some(7));
    db.setbit(b"a", 100, true).unwrap();
    assert_eq!(db.idle_time(b"a").unwrap(), Some(0), "a write is a use");
}

/// Invariant: after a reopen (nothing is written for idle times) every
/// key counts from when its metadata was loaded.
#[test]
fn a_reopened_database_counts_from_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(1_800_000_000_000));
    let open = || {
        let clock = Arc::clone(&now);
        Config::new(dir.path()).clock(move || clock.load(Ordering::Relaxed)).flush_interval(None).open().unwrap()
    };
    let db = open();
    db.set(b"a", b"1").unwrap();
    drop(db);
    now.fetch_add(100_000, Ordering::Relaxed);
    let db = open();
    assert_eq!(db.idle_time(b"a").unwrap(), Some(0));
    now.fetch_add(3_000, Ordering::Relaxed);
    assert_eq!(db.idle_time(b"a").unwrap(), Some(3));
}
