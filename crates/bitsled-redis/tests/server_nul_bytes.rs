//! NUL bytes in requests, over the server's socket.
//!
//! Inline requests follow Redis 7.0.15, checked with raw bytes against a
//! real `redis-server`: Redis looks for an inline line's end with `strchr`,
//! which stops at a NUL, so a NUL before the newline means the line never
//! ends. Such a request is never run, neither cut at the NUL nor whole; the
//! connection answers nothing more until over 64 KiB are pending, then
//! replies `too big inline request` and closes. A NUL written as `\x00`
//! inside quotes is an escape, and the argument keeps it. In multibulk
//! requests a NUL is an ordinary byte of keys and values.

use std::io::Write;

use bitsled_redis::server::ServerConfig;
use redis::Commands;

#[path = "common/server.rs"]
mod server;
use bitsled_testkit::wire::{expect, read_to_close};
use server::start;

/// Invariant: an inline request with a NUL before its newline never runs,
/// not even the part before the NUL (`DEL important`, `SET k v` without its
/// `EX 1`), and neither do the requests after it on that connection; the
/// connection ends with `too big inline request` and nothing else.
#[test]
fn inline_request_with_a_nul_never_runs_even_in_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = start(dir.path(), ServerConfig::new());
    let mut s = served.raw();
    expect(&mut s, b"SET important 1\r\n", b"+OK\r\n");
    for line in [
        &b"DEL important\0-suffix\r\nPING\r\n"[..],
        b"SET k v\0 EX 1\r\nPING\r\n",
        b"\0\r\nDEL important\r\n",
        b"DEL important\r\0\nPING\r\n",
    ] {
        let mut bad = served.raw();
        bad.write_all(line).expect("write");
        // Pushes what is pending past 64 KiB: the server must read every
        // byte before it can answer, so whatever it ran shows up first.
        bad.write_all(&vec![b'x'; 64 * 1024]).expect("write");
        let (got, closed) = read_to_close(&mut bad);
        assert_eq!(
            String::from_utf8_lossy(&got),
            "-ERR Protocol error: too big inline request\r\n",
            "after {:?}",
            String::from_utf8_lossy(line)
        );
        assert!(closed, "the connection stays open after {:?}", String::from_utf8_lossy(line));
    }
    expect(&mut s, b"EXISTS important\r\nEXISTS k\r\n", b":1\r\n:0\r\n");
    // The whole 16-byte name as a bulk argument: a different key.
    expect(&mut s, b"*2\r\n$6\r\nEXISTS\r\n$16\r\nimportant\0-suffix\r\n", b":0\r\n");
}

/// Invariant: `\x00` inside quotes in an inline request is a NUL byte of
/// the argument, kept whole (Redis 7.0.15 gives the same replies).
#[test]
fn quoted_nul_escape_in_an_inline_request_is_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = start(dir.path(), ServerConfig::new());
    let mut s = served.raw();
    expect(
        &mut s,
        b"SET \"k\\x00\" \"a\\x00b\"\r\nSTRLEN \"k\\x00\"\r\nGET \"k\\x00\"\r\nEXISTS k\r\n",
        b"+OK\r\n:3\r\n$3\r\na\0b\r\n:0\r\n",
    );
    expect(&mut s, b"SETBIT \"\\x00\" 7 1\r\nBITCOUNT \"\\x00\"\r\nEXISTS \"\"\r\n", b":0\r\n:1\r\n:0\r\n");
}

/// Invariant: keys and values with NUL bytes, sent as multibulk, are kept
/// whole through every layer: names that differ only after a NUL (or by a
/// trailing NUL) are different keys for reads, writes, TTLs, renames,
/// patterns and HyperLogLog elements, and all of it is the same after the
/// server is stopped and a new one opens the database.
#[test]
fn nul_bytes_in_keys_and_values_work_end_to_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let names: [&[u8]; 6] = [b"a", b"a\0", b"a\0b", b"\0", b"\0\0", b"b\0"];
    let value = |i: usize| vec![b'v', 0, u8::try_from(i).expect("small"), 0];
    {
        let served = start(dir.path(), ServerConfig::new());
        let mut con = served.client(None);
        for (i, name) in names.iter().enumerate().take(5) {
            let () = con.set(*name, value(i)).expect("SET");
        }
        for (i, name) in names.iter().enumerate().take(5) {
            let got: Vec<u8> = con.get(*name).expect("GET");
            assert_eq!(got, value(i), "GET {name:?}");
        }
        let mut keys: Vec<Vec<u8>> = con.keys("*").expect("KEYS");
        keys.sort();
        let mut want: Vec<Vec<u8>> = names[..5].iter().map(|n| n.to_vec()).collect();
        want.sort();
        assert_eq!(keys, want);
        let mut matched: Vec<Vec<u8>> = con.keys(&b"a\0*"[..]).expect("KEYS a\\0*");
        matched.sort();
        assert_eq!(matched, vec![b"a\0".to_vec(), b"a\0b".to_vec()]);

        let () = con.rename(&b"a\0b"[..], &b"b\0"[..]).expect("RENAME");
        let n: i64 = con.del(&b"\0\0"[..]).expect("DEL");
        assert_eq!(n, 1);
        let n: i64 = con.exists(&b"\0"[..]).expect("EXISTS");
        assert_eq!(n, 1, "deleting \\0\\0 removed \\0");
        let set: bool = con.expire(&b"a\0"[..], 100_000).expect("EXPIRE");
        assert!(set);
        let old: i64 = con.setbit(&b"bits\0"[..], 9, true).expect("SETBIT");
        assert_eq!(old, 0);
        let added: i64 =
            redis::cmd("PFADD").arg(&b"h\0"[..]).arg(&b"x"[..]).arg(&b"x\0"[..]).query(&mut con).expect("PFADD");
        assert_eq!(added, 1);
        drop(con);
        served.stop();
    }
    let served = start(dir.path(), ServerConfig::new());
    let mut con = served.client(None);
    let get = |con: &mut redis::Connection, name: &[u8]| -> Option<Vec<u8>> { con.get(name).expect("GET") };
    assert_eq!(get(&mut con, b"a"), Some(value(0)));
    assert_eq!(get(&mut con, b"a\0"), Some(value(1)));
    assert_eq!(get(&mut con, b"a\0b"), None, "renamed away");
    assert_eq!(get(&mut con, b"b\0"), Some(value(2)));
    assert_eq!(get(&mut con, b"b"), None);
    assert_eq!(get(&mut con, b"\0"), Some(value(3)));
    assert_eq!(get(&mut con, b"\0\0"), None, "deleted");
    let ttl: i64 = con.ttl(&b"a\0"[..]).expect("TTL");
    assert!(ttl > 0 && ttl <= 100_000, "{ttl}");
    let ttl: i64 = con.ttl(&b"a"[..]).expect("TTL");
    assert_eq!(ttl, -1, "the TTL went to the key without the NUL");
    let bit: i64 = con.getbit(&b"bits\0"[..], 9).expect("GETBIT");
    assert_eq!(bit, 1);
    let count: i64 = con.bitcount(&b"bits"[..]).expect("BITCOUNT");
    assert_eq!(count, 0);
    let count: i64 = redis::cmd("PFCOUNT").arg(&b"h\0"[..]).query(&mut con).expect("PFCOUNT");
    assert_eq!(count, 2, "x and x\\0 are two elements");
}
