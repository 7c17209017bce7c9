//! BITCOUNT with both indexes negative and start > end replies 0 before it
//! looks at the unit argument, like Redis 7.0 (`bitcountCommand` returns
//! early right after parsing the two indexes), so an invalid unit is no
//! syntax error then. With any other range an invalid unit is one.
//!
//! Found by `tests/differential.rs` against redis-server 7.0.15 (every
//! reply below is Redis's): `BITCOUNT k -5 -18972 BITS` gives 0 in Redis,
//! `ERR syntax error` in bitsled.

use bitsled_redis::command::{execute, Reply};

fn cmd(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|a| a.as_bytes().to_vec()).collect()
}

#[test]

fn reversed_negative_range_wins_over_bad_unit() {
    let dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(dir.path()).unwrap();
    let run = |s: &str| execute(&db, &cmd(s));
    let syntax = Reply::Error("ERR syntax error".into());
    assert_eq!(run("SET k ab"), Reply::ok());
    assert_eq!(run("BITCOUNT k -5 -18972 BITS"), Reply::Integer(0));
    assert_eq!(run("BITCOUNT k -1 -2 x"), Reply::Integer(0));
    // Not reversed-and-negative: the unit is checked.
    assert_eq!(run("BITCOUNT k -2 -1 x"), syntax);
    assert_eq!(run("BITCOUNT k 1 -2 x"), syntax);
    // BITPOS has no such early return.
    assert_eq!(run("BITPOS k 1 -1 -2 x"), syntax);
}
