//! Shared by the table-driven command tests: short constructors for the
//! expected replies, and the runner that plays rows of redis-cli syntax
//! against a database.
#![allow(dead_code, reason = "each test file uses a different subset of these helpers")]

use bitsled::{Config, Db};
use bitsled_redis::command::{cli_syntax::split_args, execute, format::format_reply, Reply};

pub fn ok() -> Reply {
    Reply::ok()
}
pub fn st(s: &str) -> Reply {
    Reply::Status(s.into())
}
pub fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}
pub fn int(n: i64) -> Reply {
    Reply::Integer(n)
}
pub fn nil() -> Reply {
    Reply::Bulk(None)
}
pub fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Some(b.to_vec()))
}
pub fn arr(v: Vec<Reply>) -> Reply {
    Reply::Array(v)
}

/// Runs `cases` in order on `db`, reopening it (with `config`) every
/// `reopen_every` rows when given; returns one line per row whose reply
/// differs, and the database. Replies are compared as a RESP2 client
/// receives them (a boolean is the integer 1 or 0 there, a map a flat
/// array); RESP3 shapes have tests of their own.
pub fn run(
    mut db: Db,
    cases: &[(&str, Reply)],
    reopen_every: Option<usize>,
    config: impl Fn() -> Config,
) -> (Vec<String>, Db) {
    let mut failures = Vec::new();
    for (i, (line, want)) in cases.iter().enumerate() {
        if reopen_every.is_some_and(|n| i > 0 && i % n == 0) {
            drop(db);
            db = config().open().expect("reopen");
        }
        let args = split_args(line.as_bytes()).unwrap_or_else(|| panic!("row {i}: bad syntax {line}"));
        let got = execute(&db, &args);
        if got.to_resp() != want.to_resp() {
            failures.push(format!(
                "row {i} `{line}`:\n  want {}  got  {}",
                String::from_utf8_lossy(&format_reply(want)),
                String::from_utf8_lossy(&format_reply(&got))
            ));
        }
    }
    (failures, db)
}

/// A small deterministic generator (xorshift64) for table tests that walk
/// random argument lists: each call gives a number below its argument.
pub fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
