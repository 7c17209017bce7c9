//! Invariants of key expiry, with a controllable clock (no sleeping): an
//! expired key is absent at once for every operation; expiries survive a
//! reopen; expired keys' pages are reclaimed (at open and by the sweeper);
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
        // Opening sweeps keys that expired while closed; their pages go.
        let db = open(dir.path(), &clock);
        assert!(!db.exists(b"a").unwrap());
        assert!(db.exists(b"b").unwrap());
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
