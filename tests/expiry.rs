//! Invariants of key expiry, with a controllable clock (no sleeping): an
//! expired key is absent at once for every operation; expiries survive a
//! reopen; the sweeper deletes exactly the keys that are due, those set in
//! this session and those found at open, and their pages are reclaimed;
//! NX/XX/GT/LT conditions and which writes keep or clear an expiry follow
//! Redis.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bitsled::{BitOp, Config, Db, ExpireCondition as C, Expiry, SetExpiry};

const T0: u64 = 1_800_000_000_000;

fn open(dir: &std::path::Path, clock: &Arc<AtomicU64>) -> Db {
    let c = Arc::clone(clock);
    Config::new(dir).flush_interval(None).clock(move || c.load(Ordering::SeqCst)).open().unwrap()
}

#[test]
fn expired_keys_are_absent_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicU64::new(T0));
    let db = open(dir.path(), &clock);
    db.set_bits(b"day", &[1, 40_000], true).unwrap();
    db.setbit(b"keep", 3, true).unwrap();
    assert!(db.expire_at(b"day", T0 + 1000, C::Always).unwrap());
    assert_eq!(db.expiry(b"day").unwrap(), Expiry::At(T0 + 1000));
    clock.store(T0 + 999, Ordering::SeqCst);
    assert!(db.getbit(b"day", 1).unwrap(), "alive 1 ms before its expiry");
    clock.store(T0 + 1000, Ordering::SeqCst);
    assert!(!db.exists(b"day").unwrap());
    assert!(!db.getbit(b"day", 1).unwrap());
    assert_eq!(db.bitcount(b"day", None).unwrap(), 0);
    assert_eq!(db.get(b"day").unwrap(), None);
    assert_eq!(db.expiry(b"day").unwrap(), Expiry::Missing);
    assert_eq!(db.keys(b"*").unwrap(), vec![b"keep".to_vec()]);
    // A write to an expired key starts a fresh one.
    assert!(!db.setbit(b"day", 1, true).unwrap());
    assert_eq!(db.bitcount(b"day", None).unwrap(), 1);
    assert_eq!(db.expiry(b"day").unwrap(), Expiry::Never);
    assert!(db.verify().unwrap().is_ok());
}

#[test]
fn expiry_survives_reopen_and_expired_pages_are_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicU64::new(T0));
    {
        let db = open(dir.path(), &clock);
        db.set_bits(b"a", &[5, 70_000, 200_000], true).unwrap();
        db.set_bits(b"b", &[6], true).unwrap();
        assert!(db.expire_at(b"a", T0 + 10_000, C::Always).unwrap());
        assert!(db.expire_at(b"b", T0 + 50_000, C::Always).unwrap());
        db.flush().unwrap();
    }
    {
        let db = open(dir.path(), &clock);
        assert_eq!(db.expiry(b"a").unwrap(), Expiry::At(T0 + 10_000));
        // a's three pages; b, one bit, is kept inline.
        assert_eq!(db.verify().unwrap().pages, 3);
    }
    clock.store(T0 + 20_000, Ordering::SeqCst);
    {
        // Keys that expired while closed are invisible at once, and the
        // sweeper deletes them untouched; their pages go.
        let db = open(dir.path(), &clock);
        assert_eq!(db.dbsize().unwrap(), 2, "not swept yet");
        let sweep = db.sweep_expired(u64::MAX).unwrap();
        assert_eq!((sweep.deleted, sweep.done), (1, true), "{sweep:?}");
        assert_eq!(db.dbsize().unwrap(), 1);
        assert!(!db.exists(b"a").unwrap());
        assert!(db.exists(b"b").unwrap());
        db.flush().unwrap();
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{report:?}");
        assert_eq!(report.pages, 0, "a's pages are gone (b has none): {report:?}");
    }
}

#[test]
fn conditions_and_which_writes_keep_the_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicU64::new(T0));
    let db = open(dir.path(), &clock);
    db.setbit(b"k", 1, true).unwrap();
    assert!(!db.expire_at(b"missing", T0 + 5, C::Always).unwrap());
    assert!(!db.expire_at(b"k", T0 + 100, C::IfSome).unwrap(), "XX without expiry");
    assert!(!db.expire_at(b"k", T0 + 100, C::IfLater).unwrap(), "GT: no expiry counts as infinite");
    assert!(db.expire_at(b"k", T0 + 100, C::IfEarlier).unwrap(), "LT: no expiry counts as infinite");
    assert!(!db.expire_at(b"k", T0 + 200, C::IfNone).unwrap());
    assert!(db.expire_at(b"k", T0 + 200, C::IfLater).unwrap());
    assert!(!db.expire_at(b"k", T0 + 150, C::IfLater).unwrap());
    assert!(db.expire_at(b"k", T0 + 150, C::IfEarlier).unwrap());
    assert_eq!(db.expiry(b"k").unwrap(), Expiry::At(T0 + 150));
    // SETBIT keeps the expiry, SET clears it, KEEPTTL keeps it.
    db.setbit(b"k", 2, true).unwrap();
    assert_eq!(db.expiry(b"k").unwrap(), Expiry::At(T0 + 150));
    db.set_with_expiry(b"k", b"x", SetExpiry::Keep).unwrap();
    assert_eq!(db.expiry(b"k").unwrap(), Expiry::At(T0 + 150));
    db.set(b"k", b"y").unwrap();
    assert_eq!(db.expiry(b"k").unwrap(), Expiry::Never);
    db.set_with_expiry(b"k", b"z", SetExpiry::At(T0 + 300)).unwrap();
    assert_eq!(db.expiry(b"k").unwrap(), Expiry::At(T0 + 300));
    // A BITOP destination loses its expiry.
    db.bitop(BitOp::Or, b"k", &[b"k"]).unwrap();
    assert_eq!(db.expiry(b"k").unwrap(), Expiry::Never);
    assert!(db.expire_at(b"k", T0 + 300, C::Always).unwrap());
    assert!(db.persist(b"k").unwrap());
    assert!(!db.persist(b"k").unwrap());
    // A time not after now deletes the key at once.
    assert!(db.expire_at(b"k", T0, C::Always).unwrap());
    assert!(!db.exists(b"k").unwrap());
    assert!(db.verify().unwrap().is_ok());
}

/// Invariant: the sweeper deletes exactly the keys whose expiry has passed
/// (as a model of the expiries says), whatever happened to a key's expiry
/// since it was set (moved later or earlier, removed by PERSIST or SET,
/// the key deleted), in this session and after a reopen; a bounded call
/// says whether work is left; DBSIZE then counts only live keys.
#[test]
fn the_sweeper_deletes_exactly_the_keys_that_are_due() {
    use std::collections::BTreeMap;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicU64::new(T0));
    let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new(); // key -> expiry (0: none)
    let n = 3000u64;
    {
        let db = open(dir.path(), &clock);
        for i in 0..n {
            let k = format!("user:{i}").into_bytes();
            if i % 7 == 0 {
                db.set_bits(&k, &[i * 100_003], true).unwrap(); // paged
            } else {
                db.set(&k, b"v").unwrap();
            }
            let at = if i % 3 == 0 { 0 } else { T0 + 1000 * (i % 50 + 1) };
            if at != 0 {
                assert!(db.expire_at(&k, at, C::Always).unwrap());
            }
            model.insert(k, at);
        }
        // Changes after the expiry was set.
        for i in (1..n).step_by(11) {
            let k = format!("user:{i}").into_bytes();
            match i % 4 {
                0 => {
                    db.persist(&k).unwrap();
                    model.insert(k, 0);
                }
                1 => {
                    db.set(&k, b"w").unwrap();
                    model.insert(k, 0);
                }
                2 => {
                    assert!(db.expire_at(&k, T0 + 200_000, C::Always).unwrap());
                    model.insert(k, T0 + 200_000);
                }
                _ => {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
            }
        }
        let mut check = |db: &Db, now: u64| {
            clock.store(now, Ordering::SeqCst);
            // A budget of one bucket at a time: the calls add up.
            let mut deleted = 0;
            loop {
                let s = db.sweep_expired(1).unwrap();
                deleted += s.deleted;
                if s.done {
                    break;
                }
            }
            let due: Vec<Vec<u8>> =
                model.iter().filter(|(_, &at)| at != 0 && at <= now).map(|(k, _)| k.clone()).collect();
            assert_eq!(deleted, due.len() as u64, "at {now}");
            for k in &due {
                model.remove(k);
            }
            assert_eq!(db.dbsize().unwrap(), model.len() as u64, "at {now}");
            let mut live = db.keys(b"*").unwrap();
            live.sort();
            assert_eq!(live, model.keys().cloned().collect::<Vec<_>>(), "at {now}");
        };
        check(&db, T0 + 10_500);
        check(&db, T0 + 30_000);
        let swept = (n - model.len() as u64) - (1..n).step_by(11).filter(|i| i % 4 == 3).count() as u64;
        assert_eq!(db.expired_keys(), swept, "INFO expired_keys counts each swept key once");
        db.flush().unwrap();
    }
    // After a reopen the sweeper starts with every region due.
    let db = open(dir.path(), &clock);
    clock.store(T0 + 60_000, Ordering::SeqCst);
    assert!(!db.sweep_expired(1).unwrap().done, "one bucket is not the whole keyspace");
    while !db.sweep_expired(64).unwrap().done {}
    let left = model.iter().filter(|(_, &at)| at == 0 || at > T0 + 60_000).count() as u64;
    assert_eq!(db.dbsize().unwrap(), left);
    assert_eq!(db.keys(b"*").unwrap().len() as u64, left);
    db.flush().unwrap();
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Invariant: the directory can be reopened at once after the last handle
/// is dropped while the background sweeper works (dropping the last handle
/// waits for that thread; a store it still held would refuse the reopen),
/// and the sweep resumes after each reopen until only the live key is
/// left. The drops land at spread moments; whether one meets the sweeper
/// mid-call depends on timing, so this exercises the race, it cannot force
/// it.
#[test]
fn the_last_handle_waits_for_a_busy_sweeper_and_reopen_works_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicU64::new(T0));
    let with_thread = |clock: &Arc<AtomicU64>| {
        let c = Arc::clone(clock);
        Config::new(dir.path()).clock(move || c.load(Ordering::SeqCst)).open().unwrap()
    };
    {
        let db = with_thread(&clock);
        for i in 0..20_000u64 {
            let k = format!("session:{i}").into_bytes();
            db.set_with_expiry(&k, b"v", SetExpiry::At(T0 + 1_000)).unwrap();
        }
        db.set(b"stay", b"v").unwrap();
    }
    clock.store(T0 + 2_000, Ordering::SeqCst);
    for i in 0..12u64 {
        // Every region is due at open: the background sweeper runs 25 ms of
        // every 100 ms from 100 ms on; the drops land at spread moments.
        let db = with_thread(&clock);
        std::thread::sleep(std::time::Duration::from_millis(100 + 9 * i));
        assert!(db.exists(b"stay").unwrap());
        drop(db);
    }
    let db = with_thread(&clock);
    while !db.sweep_expired(1024).unwrap().done {}
    assert_eq!(db.dbsize().unwrap(), 1);
}

/// Invariant: the expired listener hears each key deleted because it
/// expired exactly once, with its database, whether a lookup or the sweeper
/// found it; keys deleted otherwise, and keys not yet due, are not heard.
#[test]
fn the_expired_listener_hears_every_expired_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicU64::new(T0));
    let db = open(dir.path(), &clock);
    type Heard = parking_lot::Mutex<Vec<(u32, Vec<u8>)>>;
    let heard: Arc<Heard> = Arc::default();
    let log = Arc::clone(&heard);
    db.set_expired_listener(Some(Arc::new(move |index, key| log.lock().push((index, key.to_vec())))));
    let db3 = db.select(3).unwrap();
    db.set_with_expiry(b"looked-up", b"v", SetExpiry::At(T0 + 10)).unwrap();
    db3.set_with_expiry(b"swept", b"v", SetExpiry::At(T0 + 10)).unwrap();
    db.set_with_expiry(b"later", b"v", SetExpiry::At(T0 + 10_000)).unwrap();
    db.set_with_expiry(b"deleted", b"v", SetExpiry::At(T0 + 10)).unwrap();
    assert!(db.delete(b"deleted").unwrap());
    clock.store(T0 + 10, Ordering::SeqCst);
    assert_eq!(db.get(b"looked-up").unwrap(), None);
    assert_eq!(db.get(b"looked-up").unwrap(), None);
    while !db.sweep_expired(1 << 20).unwrap().done {}
    let mut got = heard.lock().clone();
    got.sort();
    assert_eq!(got, vec![(0, b"looked-up".to_vec()), (3, b"swept".to_vec())]);
    assert_eq!(db.expired_keys(), 2);
    db.set_expired_listener(None);
}
