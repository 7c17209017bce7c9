//! Redis 7.0's SETBIT tells the key's watchers only of a change:
//! `setbitCommand` signals the key when it creates it, lengthens it or
//! flips the bit, and not when it writes a bit's own value inside the key.
//! A transaction watching the key then still runs. The replies below are
//! redis-server 7.0.15's.

use bitsled_redis::command::cli_syntax::split_args;
use bitsled_redis::command::{Reply, Session};

fn cmd(line: &str) -> Vec<Vec<u8>> {
    split_args(line.as_bytes()).expect("redis-cli syntax")
}

/// Watches `k` in `a`, runs `line` in `b`, and returns what `a`'s EXEC
/// replies.
fn exec_after(a: &mut Session, b: &mut Session, line: &str, reply: &Reply) -> Reply {
    assert_eq!(a.execute(&cmd("WATCH k")), Reply::ok());
    assert_eq!(&b.execute(&cmd(line)), reply, "{line}");
    assert_eq!(a.execute(&cmd("MULTI")), Reply::ok());
    a.execute(&cmd("EXEC"))
}

#[test]
fn setbit_touches_watches_only_when_it_changes_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(dir.path()).unwrap();
    let (mut a, mut b) = (Session::new(db.clone()), Session::new(db));
    let ran = Reply::Array(vec![]);
    // Creating the key, even with a 0 bit, is a change.
    assert_eq!(exec_after(&mut a, &mut b, "SETBIT k 0 0", &Reply::Integer(0)), Reply::NilArray);
    // The same 0 inside the key changes nothing.
    assert_eq!(exec_after(&mut a, &mut b, "SETBIT k 0 0", &Reply::Integer(0)), ran);
    // Flipping the bit is a change; writing the 1 again is not.
    assert_eq!(exec_after(&mut a, &mut b, "SETBIT k 0 1", &Reply::Integer(0)), Reply::NilArray);
    assert_eq!(exec_after(&mut a, &mut b, "SETBIT k 0 1", &Reply::Integer(1)), ran);
    // A 0 past the end lengthens the key: a change.
    assert_eq!(exec_after(&mut a, &mut b, "SETBIT k 100 0", &Reply::Integer(0)), Reply::NilArray);
    assert_eq!(b.execute(&cmd("STRLEN k")), Reply::Integer(13));
    // In a paged value too (past the 64 bytes kept inline).
    assert_eq!(exec_after(&mut a, &mut b, "SETBIT k 100000 1", &Reply::Integer(0)), Reply::NilArray);
    assert_eq!(exec_after(&mut a, &mut b, "SETBIT k 100000 1", &Reply::Integer(1)), ran);
    assert_eq!(exec_after(&mut a, &mut b, "SETBIT k 99999 0", &Reply::Integer(0)), ran);
}
