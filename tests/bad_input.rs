//! Invariant: bad arguments through the library API return a clear error
//! (the documented variant, with Redis's text where Redis has one), never a
//! panic, and leave the store exactly as it was; odd but valid inputs
//! (empty and binary key names) work like any other key.

use bitsled::{BitOp, BitfieldOp, BitfieldType, Config, Db, Error};

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).max_value_bytes(1 << 20).open().unwrap()
}

fn snapshot(db: &Db) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    db.keys(b"*").unwrap().into_iter().map(|k| (k.clone(), db.get(&k).unwrap())).collect()
}

#[test]
fn bad_arguments_are_errors_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.set(b"a", b"\x0f\xf0").unwrap();
    db.setbit(b"b", 70_000, true).unwrap();
    let before = snapshot(&db);

    let r = db.setbit(b"a", u64::MAX, true);
    assert!(matches!(r, Err(Error::OffsetOutOfRange { offset: u64::MAX })), "{r:?}");
    let r = db.set_bits(b"new", &[3, u64::MAX - 1], true);
    assert!(matches!(r, Err(Error::OffsetOutOfRange { .. })), "{r:?}");

    let r = db.bitop(BitOp::And, b"d", &[]);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let r = db.bitop(BitOp::Not, b"d", &[b"a", b"b"]);
    assert!(
        matches!(&r, Err(Error::InvalidArgument(t)) if t == "BITOP NOT must be called with a single source key."),
        "{r:?}"
    );
    let r = db.bitop(BitOp::Diff, b"d", &[b"a"]);
    assert!(
        matches!(&r, Err(Error::InvalidArgument(t)) if t == "BITOP DIFF must be called with at least two source keys."),
        "{r:?}"
    );

    let bad_types = [BitfieldType::Signed(0), BitfieldType::Signed(65), BitfieldType::Unsigned(64)];
    for ty in bad_types {
        let r = db.bitfield(b"a", &[BitfieldOp::Set { ty, offset: 0, value: 1 }]);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{ty:?}: {r:?}");
    }

    // A value above max_value_bytes is refused by GET, not built in memory.
    db.setbit(b"big", (2 << 20) * 8, true).unwrap();
    let r = db.get(b"big");
    assert!(matches!(r, Err(Error::TooLarge { len, limit, .. }) if len == (2 << 20) + 1 && limit == 1 << 20), "{r:?}");
    db.delete(b"big").unwrap();

    assert!(!db.expire_at(b"missing", db.now_ms() + 1000, bitsled::ExpireCondition::Always).unwrap());
    assert_eq!(snapshot(&db), before, "the store is unchanged by refused calls");
    assert!(db.verify().unwrap().is_ok());
}

#[test]
fn empty_and_binary_key_names_are_keys_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let names: [&[u8]; 4] = [b"", b"\x00", b"\xff\xfe\x00x", b"a b\r\n"];
    {
        let db = open(dir.path());
        for (i, name) in names.iter().enumerate() {
            db.setbit(name, i as u64 * 40_000, true).unwrap();
        }
        db.flush().unwrap();
    }
    let db = open(dir.path());
    let mut want: Vec<Vec<u8>> = names.iter().map(|n| n.to_vec()).collect();
    want.sort();
    let mut got = db.keys(b"*").unwrap();
    got.sort();
    assert_eq!(got, want, "every name is a key (KEYS lists them in hash order)");
    for (i, name) in names.iter().enumerate() {
        assert!(db.getbit(name, i as u64 * 40_000).unwrap(), "{name:?}");
        assert_eq!(db.bitcount(name, None).unwrap(), 1);
    }
    assert!(db.verify().unwrap().is_ok());
}
