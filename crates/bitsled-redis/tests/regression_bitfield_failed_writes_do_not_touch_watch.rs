//! Redis 7's BITFIELD tells the key's watchers only of changes: a field
//! written (SET, or INCRBY not failed under OVERFLOW FAIL) while the call
//! creates or lengthens the key, or to a new value (`bitfieldGeneric`
//! counts `changes` so and signals the key only if there are any). A call
//! whose every write fails still creates the key, and one that writes a
//! field's own value still runs; a transaction watching the key then still
//! runs. bitsled used to abort it.
//!
//! Found by `tests/differential.rs` (seed 8545 of the long run); the
//! replies below are redis-server 7.0.15's.

use bitsled_redis::command::cli_syntax::split_args;
use bitsled_redis::command::{Reply, Session};

fn cmd(line: &str) -> Vec<Vec<u8>> {
    split_args(line.as_bytes()).expect("redis-cli syntax")
}

#[test]
fn failed_bitfield_writes_leave_watches_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(dir.path()).unwrap();
    let (mut a, mut b) = (Session::new(db.clone()), Session::new(db));
    // Every write fails: the key is created, ten bytes long, and EXEC runs.
    assert_eq!(a.execute(&cmd("WATCH k")), Reply::ok());
    assert_eq!(
        b.execute(&cmd("BITFIELD k OVERFLOW FAIL INCRBY i1 #72 -60 GET u42 #78")),
        Reply::Array(vec![Reply::Bulk(None), Reply::Integer(0)])
    );
    assert_eq!(b.execute(&cmd("STRLEN k")), Reply::Integer(10));
    assert_eq!(a.execute(&cmd("MULTI")), Reply::ok());
    assert_eq!(a.execute(&cmd("EXEC")), Reply::Array(vec![]), "the transaction runs");
    // A field written with the value it had, inside the key: EXEC runs.
    assert_eq!(a.execute(&cmd("WATCH k")), Reply::ok());
    assert_eq!(b.execute(&cmd("BITFIELD k OVERFLOW FAIL SET u8 0 0")), Reply::Array(vec![Reply::Integer(0)]));
    assert_eq!(a.execute(&cmd("MULTI")), Reply::ok());
    assert_eq!(a.execute(&cmd("EXEC")), Reply::Array(vec![]), "the transaction runs");
    // The same value past the end (the key grows): EXEC aborts.
    assert_eq!(a.execute(&cmd("WATCH k")), Reply::ok());
    assert_eq!(b.execute(&cmd("BITFIELD k SET u8 80 0")), Reply::Array(vec![Reply::Integer(0)]));
    assert_eq!(a.execute(&cmd("MULTI")), Reply::ok());
    assert_eq!(a.execute(&cmd("EXEC")), Reply::NilArray, "a lengthened key aborts it");
    // A new value inside the key: EXEC aborts.
    assert_eq!(a.execute(&cmd("WATCH k")), Reply::ok());
    assert_eq!(b.execute(&cmd("BITFIELD k INCRBY u8 0 1")), Reply::Array(vec![Reply::Integer(1)]));
    assert_eq!(a.execute(&cmd("MULTI")), Reply::ok());
    assert_eq!(a.execute(&cmd("EXEC")), Reply::NilArray, "a changed field aborts it");
}
