//! A range whose start and end are both negative with start > end selects
//! nothing, like Redis 7: `getrangeCommand` and `bitcountCommand` return
//! `""` and `0` early in that case, before clamping (without the early
//! return both indexes would clamp to 0 and select the first byte or bit).
//!
//! Found by `tests/differential.rs` against redis-server 7.0.15:
//! `APPEND k a`, `GETRANGE k -8 -18` gives `""` in Redis, `"a"` in bitsled;
//! `SETBIT k 127 1`, `BITOP NOT k k`, `BITCOUNT k -199 -4112 BYTE` gives 0
//! in Redis, 8 in bitsled. Note that `bitsled::model::Model::bitcount`
//! has the same gap, so the model tests cannot see it.

use bitsled_redis::command::{execute, Reply};

fn cmd(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|a| a.as_bytes().to_vec()).collect()
}

#[test]

fn getrange_negative_reversed_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(dir.path()).unwrap();
    assert_eq!(execute(&db, &cmd("SET k a")), Reply::ok());
    assert_eq!(execute(&db, &cmd("GETRANGE k -8 -18")), Reply::bulk(Vec::new()));
    assert_eq!(execute(&db, &cmd("SET k hello")), Reply::ok());
    assert_eq!(execute(&db, &cmd("GETRANGE k -10 -20")), Reply::bulk(Vec::new()));
    assert_eq!(execute(&db, &cmd("GETRANGE k -1 -2")), Reply::bulk(Vec::new()));
    // Not the case: both negative with start <= end, or only one negative.
    assert_eq!(execute(&db, &cmd("GETRANGE k -20 -10")), Reply::bulk(b"h".to_vec()));
    assert_eq!(execute(&db, &cmd("GETRANGE k 0 -20")), Reply::bulk(b"h".to_vec()));
}

#[test]

fn bitcount_negative_reversed_is_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(dir.path()).unwrap();
    assert_eq!(execute(&db, &cmd("SET k \u{7f}\u{7f}")), Reply::ok());
    assert_eq!(execute(&db, &cmd("BITCOUNT k -199 -4112")), Reply::Integer(0));
    assert_eq!(execute(&db, &cmd("BITCOUNT k -199 -4112 BYTE")), Reply::Integer(0));
    assert_eq!(execute(&db, &cmd("BITCOUNT k -1 -2 BIT")), Reply::Integer(0));
    assert_eq!(execute(&db, &cmd("BITCOUNT k -100 -200 BIT")), Reply::Integer(0));
    // Not the case: both negative with start <= end, or only one negative.
    assert_eq!(execute(&db, &cmd("BITCOUNT k -200 -100 BIT")), Reply::Integer(0));
    assert_eq!(execute(&db, &cmd("BITCOUNT k -20 -2")), Reply::Integer(7));
    assert_eq!(execute(&db, &cmd("BITCOUNT k 0 -20")), Reply::Integer(7));
}
