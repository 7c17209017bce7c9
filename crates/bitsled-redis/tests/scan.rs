//! SCAN: cursors are positions in the keys' hash order.
//!
//! The guarantees tested here: a full iteration returns every key exactly
//! once when nothing changes; when keys are added and removed during the
//! iteration (from the same thread or another one, with write-backs in
//! between), every key present for the whole iteration is still returned,
//! and no key is returned twice; a cursor survives a restart; cursors stay
//! below 2^53 (exact in JavaScript); any cursor ends; MATCH and TYPE
//! filter what COUNT visits.
//! Argument errors and the replies that do not depend on the order of keys
//! were captured from a real **Redis 7.0.15** (see `redis7_rows`).

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bitsled::{Config, Db};
use bitsled_redis::command::{execute, format::format_reply, Reply};

#[path = "common/table.rs"]
mod table;

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

fn cmd(db: &Db, args: &[&[u8]]) -> Reply {
    execute(db, &args.iter().map(|a| a.to_vec()).collect::<Vec<_>>())
}

/// One SCAN call: the next cursor and the keys of the reply.
fn scan_once(db: &Db, cursor: &[u8], extra: &[&[u8]]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut args: Vec<&[u8]> = vec![b"SCAN", cursor];
    args.extend_from_slice(extra);
    match cmd(db, &args) {
        Reply::Array(parts) => match parts.as_slice() {
            [Reply::Bulk(Some(next)), Reply::Array(keys)] => {
                let keys = keys
                    .iter()
                    .map(|k| match k {
                        Reply::Bulk(Some(k)) => k.clone(),
                        other => panic!("key reply {other:?}"),
                    })
                    .collect();
                (next.clone(), keys)
            }
            other => panic!("scan reply {other:?}"),
        },
        other => panic!("scan reply {other:?}"),
    }
}

/// A whole iteration; `between` runs after every call. Returns the keys in
/// the order returned and the number of calls.
fn scan_all(db: &Db, extra: &[&[u8]], mut between: impl FnMut(usize)) -> (Vec<Vec<u8>>, usize) {
    let mut cursor = b"0".to_vec();
    let mut out = Vec::new();
    let mut calls = 0;
    loop {
        let (next, keys) = scan_once(db, &cursor, extra);
        calls += 1;
        out.extend(keys);
        if next == b"0" {
            return (out, calls);
        }
        assert!(calls < 100_000, "scan does not end");
        between(calls);
        cursor = next;
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key:{i:05}").into_bytes()
}

/// With nothing changing, COUNT 1, 3 and 10 (default) and a COUNT larger
/// than the keyspace each return every key exactly once; each call visits
/// at least COUNT keys (whole buckets), so the number of calls is at most
/// one more than the keys over COUNT.
#[test]
fn full_iteration_returns_every_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut want = BTreeSet::new();
    for i in 0..250 {
        db.setbit(&key(i), u64::from(i), true).unwrap();
        want.insert(key(i));
    }
    db.flush().unwrap();
    // Some keys only in memory, some deleted only in memory.
    for i in 250..300 {
        db.setbit(&key(i), 1, true).unwrap();
        want.insert(key(i));
    }
    for i in (0..300).step_by(7) {
        db.delete(&key(i)).unwrap();
        want.remove(&key(i));
    }
    for (count, n) in [(&b"1"[..], 1), (b"3", 3), (b"1000", 1000)] {
        let (got, calls) = scan_all(&db, &[b"COUNT", count], |_| {});
        let unique: BTreeSet<_> = got.iter().cloned().collect();
        assert_eq!(unique.len(), got.len(), "a key came twice with COUNT {count:?}");
        assert_eq!(unique, want, "COUNT {count:?}");
        assert!(calls <= want.len().div_ceil(n) + 1, "{calls} calls with COUNT {count:?}");
    }
    let (got, _) = scan_all(&db, &[], |_| {});
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
}

/// Keys are added and removed between calls (before and after the
/// cursor's position), with write-backs in between: every key that exists
/// for the whole iteration is returned, none twice, and every key
/// returned existed at some point.
#[test]
fn changes_during_a_scan_keep_the_guarantee() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).dirty_bytes(64 << 10).open().unwrap();
    let mut live: BTreeSet<Vec<u8>> = BTreeSet::new();
    for i in (0..2000).step_by(2) {
        db.setbit(&key(i), 5, true).unwrap();
        live.insert(key(i));
    }
    let mut ever = live.clone();
    let mut throughout = live.clone();
    let mut rnd = {
        let mut r = table::xorshift(0x1234_5678_9abc_def1);
        move |n: u32| r(u64::from(n)) as u32
    };
    let (got, calls) = scan_all(&db, &[b"COUNT", b"7"], |call| {
        for _ in 0..5 {
            let k = key(rnd(2000));
            if live.contains(&k) {
                db.delete(&k).unwrap();
                live.remove(&k);
                throughout.remove(&k);
            } else {
                db.setbit(&k, 9, true).unwrap();
                live.insert(k.clone());
                ever.insert(k);
            }
        }
        if call % 10 == 0 {
            db.flush().unwrap();
        }
    });
    assert!(calls > 100, "the scan must span many changes ({calls} calls)");
    let returned: HashSet<Vec<u8>> = got.iter().cloned().collect();
    assert_eq!(returned.len(), got.len(), "a key was returned twice");
    let missing: Vec<_> = throughout.iter().filter(|k| !returned.contains(*k)).collect();
    assert!(missing.is_empty(), "{} keys present throughout were not returned", missing.len());
    assert!(returned.iter().all(|k| ever.contains(k)), "a key that never existed was returned");
}

/// The same guarantee while another thread adds and deletes keys at the
/// same time, and a background flush writes changes back.
#[test]
fn concurrent_writers_do_not_hide_stable_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(Some(std::time::Duration::from_millis(5))).open().unwrap();
    // Stable keys: even numbers, never touched by the writer.
    let stable: BTreeSet<Vec<u8>> = (0..3000).step_by(2).map(key).collect();
    for k in &stable {
        db.setbit(k, 0, true).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let k = key((i.wrapping_mul(7919) % 3000) | 1);
                if i % 3 == 0 {
                    db.delete(&k).unwrap();
                } else {
                    db.setbit(&k, 3, true).unwrap();
                }
                i = i.wrapping_add(1);
            }
        })
    };
    for _ in 0..3 {
        let (got, _) = scan_all(&db, &[b"COUNT", b"13"], |_| std::thread::yield_now());
        let returned: HashSet<Vec<u8>> = got.iter().cloned().collect();
        assert_eq!(returned.len(), got.len(), "a key was returned twice");
        assert!(stable.iter().all(|k| returned.contains(k)), "a stable key was skipped");
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}

/// MATCH filters the keys COUNT visits (so a call may return none before
/// the end); TYPE string keeps every key, other types none; any cursor is
/// a position, and a scan from it ends.
#[test]
fn match_type_and_unknown_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for k in ["user:1", "user:2", "user:10", "item:1", "item:2", "user\\x", "u?er"] {
        db.setbit(k.as_bytes(), 0, true).unwrap();
    }
    let set = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<BTreeSet<_>>();
    let all = |extra: &[&[u8]]| scan_all(&db, extra, |_| {}).0.into_iter().collect::<BTreeSet<_>>();
    assert_eq!(all(&[b"MATCH", b"user:*", b"COUNT", b"1"]), set(&["user:1", "user:2", "user:10"]));
    assert_eq!(all(&[b"MATCH", b"user:?"]), set(&["user:1", "user:2"]));
    assert_eq!(all(&[b"MATCH", b"*:[12]"]), set(&["user:1", "user:2", "item:1", "item:2"]));
    assert_eq!(all(&[b"MATCH", b"user\\\\*"]), set(&["user\\x"]));
    assert_eq!(all(&[b"MATCH", b"u\\?er"]), set(&["u?er"]));
    assert_eq!(all(&[b"MATCH", b"nothing*"]), set(&[]));
    assert_eq!(all(&[b"TYPE", b"string"]).len(), 7);
    assert_eq!(all(&[b"type", b"StRiNg", b"match", b"item:*"]), set(&["item:1", "item:2"]));
    for other in [&b"list"[..], b"hash", b"none", b"foo", b""] {
        assert_eq!(all(&[b"TYPE", other]), set(&[]), "{:?}", String::from_utf8_lossy(other));
    }
    // MATCH applies after COUNT: COUNT 1 visits keys one bucket at a time
    // even when none matches.
    let (got, calls) = scan_all(&db, &[b"MATCH", b"nothing*", b"COUNT", b"1"], |_| {});
    assert!(got.is_empty() && calls > 1, "{calls} calls");
    // A cursor past the hash space ends the scan at once; any other one
    // continues from its position and ends.
    for past in [&b"-1"[..], b"18446744073709551615", b"4294967297"] {
        let (next, keys) = scan_once(&db, past, &[b"COUNT", b"100"]);
        assert_eq!((next.as_slice(), keys.len()), (&b"0"[..], 0), "cursor {:?}", String::from_utf8_lossy(past));
    }
    let (next, keys) = scan_once(&db, b"12345", &[b"COUNT", b"100"]);
    assert!(next == b"0" && keys.len() <= 7);
    // A cursor handed out stays valid when reused (a client retrying).
    let (c1, k1) = scan_once(&db, b"0", &[b"COUNT", b"2"]);
    let (_, k2) = scan_once(&db, &c1, &[b"COUNT", b"2"]);
    let (_, k3) = scan_once(&db, &c1, &[b"COUNT", b"2"]);
    assert_eq!(k2, k3);
    assert!(k1.iter().all(|k| !k2.contains(k)));
}

/// A cursor handed out before a restart continues the same scan after
/// it: together the two halves return every key exactly once. Every
/// cursor is below 2^53.
#[test]
fn cursors_survive_a_restart_and_stay_below_2_to_53() {
    let dir = tempfile::tempdir().unwrap();
    let want: BTreeSet<Vec<u8>> = (0..5000).map(key).collect();
    let mut got = Vec::new();
    let cursor = {
        let db = open(dir.path());
        for k in &want {
            db.setbit(k, 2, true).unwrap();
        }
        let mut cursor = b"0".to_vec();
        for _ in 0..20 {
            let (next, keys) = scan_once(&db, &cursor, &[b"COUNT", b"100"]);
            got.extend(keys);
            cursor = next;
        }
        cursor
    };
    assert_ne!(cursor, b"0", "the scan is not over yet");
    let db = open(dir.path());
    let (rest, ()) = {
        let mut out = Vec::new();
        let mut cursor = cursor;
        loop {
            let n: u64 = String::from_utf8(cursor.clone()).unwrap().parse().unwrap();
            assert!(n < 1 << 53, "cursor {n}");
            let (next, keys) = scan_once(&db, &cursor, &[b"COUNT", b"100"]);
            out.extend(keys);
            if next == b"0" {
                break (out, ());
            }
            cursor = next;
        }
    };
    got.extend(rest);
    let unique: BTreeSet<_> = got.iter().cloned().collect();
    assert_eq!(unique.len(), got.len(), "a key came twice");
    assert_eq!(unique, want);
}

/// Rows captured from Redis 7.0.15 on an empty database, in order. Only
/// replies that do not depend on Redis's hash-table order are kept (one
/// key at most); Redis also answered `SCAN 0 MATCH o* COUNT 1 TYPE string`
/// with cursor `1` where bitsled, having visited every bucket, answers
/// `0`.
#[rustfmt::skip]
fn redis7_rows() -> Vec<(&'static str, Reply)> {
    let err = |s: &str| Reply::Error(s.into());
    let bulk = |b: &[u8]| Reply::Bulk(Some(b.to_vec()));
    let arr = Reply::Array;
    let none = || arr(vec![bulk(b"0"), arr(vec![])]);
    let only = || arr(vec![bulk(b"0"), arr(vec![bulk(b"only")])]);
    vec![
        (r#"scan"#, err("ERR wrong number of arguments for 'scan' command")),
        (r#"scan 0"#, none()),
        (r#"set only 1"#, Reply::Status("OK".into())),
        (r#"scan 0"#, only()),
        (r#"scan 0 count 0"#, err("ERR syntax error")),
        (r#"scan 0 count -1"#, err("ERR syntax error")),
        (r#"scan 0 count x"#, err("ERR value is not an integer or out of range")),
        (r#"scan 0 count 1.5"#, err("ERR value is not an integer or out of range")),
        (r#"scan 0 count 9223372036854775807"#, only()),
        (r#"scan 0 count 9223372036854775808"#, err("ERR value is not an integer or out of range")),
        (r#"scan x"#, err("ERR invalid cursor")),
        (r#"scan " 0""#, err("ERR invalid cursor")),
        (r#"scan "0 ""#, err("ERR invalid cursor")),
        (r#"scan 18446744073709551616"#, err("ERR invalid cursor")),
        (r#"scan 1.0"#, err("ERR invalid cursor")),
        (r#"scan 0x1"#, err("ERR invalid cursor")),
        (r#"scan """#, only()),
        (r#"scan +0"#, only()),
        (r#"scan -0"#, only()),
        (r#"scan 00"#, only()),
        (r#"scan 0 match"#, err("ERR syntax error")),
        (r#"scan 0 count"#, err("ERR syntax error")),
        (r#"scan 0 type"#, err("ERR syntax error")),
        (r#"scan 0 foo bar"#, err("ERR syntax error")),
        (r#"scan 0 match * foo"#, err("ERR syntax error")),
        (r#"scan 0 type foo"#, none()),
        (r#"scan 0 type STRING"#, only()),
        (r#"scan 0 TYPE list"#, none()),
        (r#"scan 0 MATCH x*"#, none()),
        (r#"scan 0 count 1 count 100 match nope match only"#, only()),
        (r#"scan x count 0"#, err("ERR invalid cursor")),
        (r#"scan 0 count 0 foo"#, err("ERR syntax error")),
        (r#"scan 0 foo count 0"#, err("ERR syntax error")),
        (r#"scan 0 count x match"#, err("ERR value is not an integer or out of range")),
    ]
}

/// Every captured row gives Redis's reply.
#[test]
fn replies_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let (failures, _) = table::run(open(dir.path()), &redis7_rows(), None, || Config::new(dir.path()));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Hostile argument lists never panic and always get a reply.
#[test]
fn hostile_scan_arguments_get_replies() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for i in 0..20 {
        db.setbit(&key(i), 0, true).unwrap();
    }
    let words: [&[u8]; 14] = [
        b"0",
        b"-1",
        b"18446744073709551615",
        b"count",
        b"match",
        b"type",
        b"1",
        b"9223372036854775807",
        b"[",
        b"\\",
        b"*",
        b"",
        b"\x00",
        b"string",
    ];
    let mut next = {
        let mut r = table::xorshift(0x2545_f491_4f6c_dd1d);
        move |n: usize| r(n as u64) as usize
    };
    for _ in 0..2000 {
        let mut args = vec![b"scan".to_vec()];
        for _ in 0..next(7) {
            args.push(words[next(words.len())].to_vec());
        }
        let reply = execute(&db, &args);
        assert!(!format_reply(&reply).is_empty());
    }
}
