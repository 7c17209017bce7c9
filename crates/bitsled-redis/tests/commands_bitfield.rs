//! BITFIELD and BITFIELD_RO answer every case exactly as Redis does.
//!
//! Expected replies were captured from a real **Redis 7.0.15** (Debian's
//! `redis-server`, started with `--save '' --appendonly no`), row by row in
//! this order on an empty database. Each row is a command in redis-cli
//! syntax and the reply Redis gave; rows run in order against one database,
//! so later rows see earlier writes.
//!
//! Invariant: every row's reply equals Redis's, with default settings and
//! with every change written back at once and the database reopened every
//! few rows (so page boundaries, dirty state and stored state all meet the
//! same rows). Afterwards `verify` finds the store sound (the popcounts kept
//! in the metadata match the pages).

use bitsled::Config;
use bitsled_redis::command::{execute, format::format_reply, Reply};

#[path = "common/table.rs"]
mod table;
use table::{arr, bulk, err, int, nil, run, st};

/// Rows captured from Redis 7.0.15.
#[rustfmt::skip]
fn redis7_cases() -> Vec<(&'static str, Reply)> {
    vec![
        // Dispatch and arity.
        (r#"bitfield"#, err("ERR wrong number of arguments for 'bitfield' command")),
        (r#"bitfield_ro"#, err("ERR wrong number of arguments for 'bitfield_ro' command")),
        (r#"BITFIELD nokey"#, arr(vec![])),
        (r#"bitfield_ro nokey"#, arr(vec![])),
        (r#"BiTfIeLd_Ro nokey GeT u8 0"#, arr(vec![int(0)])),
        // GET on a missing key: zeros, and nothing is created.
        (r#"bitfield nokey get u8 0 get i64 100 get u63 4294967295 get i1 #7"#, arr(vec![int(0), int(0), int(0), int(0)])),
        (r#"exists nokey"#, int(0)),
        (r#"bitfield_ro nokey get i64 0"#, arr(vec![int(0)])),
        (r#"exists nokey"#, int(0)),
        // SET replies the old value, INCRBY the new one; default WRAP.
        (r#"bitfield k set u8 0 255 get u8 0 incrby u8 0 1 get u8 0"#, arr(vec![int(0), int(255), int(0), int(0)])),
        (r#"get k"#, bulk(b"\x00")),
        (r#"bitfield k set i8 0 -1 get u8 0 get i8 0 get i4 0 get u4 4 get u1 0"#, arr(vec![int(0), int(255), int(-1), int(-1), int(15), int(1)])),
        (r#"bitfield k incrby i8 0 -128 incrby i8 0 -1"#, arr(vec![int(127), int(126)])),
        (r#"strlen k"#, int(1)),
        // Fields across byte, word (64-bit) and page (32,768-bit) edges.
        (r#"bitfield w set u16 4 43981 get u16 4 get u8 4 get u4 0 get u4 20"#, arr(vec![int(0), int(43981), int(171), int(0), int(0)])),
        (r#"get w"#, bulk(b"\x0a\xbc\xd0")),
        (r#"bitfield w set i64 60 -81985529216486896 get i64 60 get u63 61 get i32 60 get u32 92"#, arr(vec![int(0), int(-81985529216486896), int(9141386507638288912), int(-19088744), int(1985229328)])),
        (r#"strlen w"#, int(16)),
        (r#"bitfield w set u63 32730 6148914691236517205 get u63 32730 get u38 32730 get u25 32768"#, arr(vec![int(0), int(6148914691236517205), int(183251937962), int(22369621)])),
        (r#"bitfield w set i64 32767 -2 get i64 32767 get u1 32767 get u1 32830 get i2 32829"#, arr(vec![int(6148914599610548224), int(-2), int(1), int(0), int(-2)])),
        (r#"strlen w"#, int(4104)),
        (r#"bitcount w"#, int(124)),
        (r#"bitfield w incrby i64 32767 3 incrby u63 32730 -6148914691236517205 get i64 32767"#, arr(vec![int(1), int(9223372036832406187), int(-6148914599610548223)])),
        (r#"bitcount w"#, int(94)),
        (r#"getbit w 32767"#, int(1)),
        // #N offsets multiply by the width.
        (r#"bitfield h set u8 #1 170 set u8 #3 187 get u8 8 get u8 24 get u16 #0 get u16 #1"#, arr(vec![int(0), int(0), int(170), int(187), int(170), int(187)])),
        (r#"get h"#, bulk(b"\x00\xaa\x00\xbb")),
        (r#"bitfield h get i5 #3 set i5 #3 -3 get u5 15 get i5 #3"#, arr(vec![int(0), int(0), int(29), int(-3)])),
        (r##"bitfield h get u8 "#0""##, arr(vec![int(0)])),
        (r#"bitfield h get u16 #1152921504606846977"#, arr(vec![int(53435)])),
        (r#"bitfield h get u8 #1152921504606846977"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield h get u8 #536870911"#, arr(vec![int(0)])),
        (r#"bitfield h get u8 #536870912"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield h get u8 #"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield h get u8 #-1"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield h get u8 #+1"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield h get u8 #01"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield h get u8 ##1"#, err("ERR bit offset is not an integer or out of range")),
        // OVERFLOW WRAP.
        (r#"bitfield o overflow wrap set u8 0 256 set u8 0 -1 get u8 0 set i8 8 128 set i8 8 -129 get i8 8"#, arr(vec![int(0), int(0), int(255), int(0), int(-128), int(127)])),
        (r#"bitfield o overflow wrap incrby u8 0 2 incrby u8 0 -3 incrby i8 8 -1 incrby i8 8 1000"#, arr(vec![int(1), int(254), int(126), int(102)])),
        (r#"bitfield o overflow wrap set i1 16 1 get i1 16 incrby i1 16 1 incrby i1 16 -1 set u1 17 3 incrby u1 17 -1"#, arr(vec![int(0), int(-1), int(0), int(-1), int(0), int(0)])),
        // OVERFLOW SAT.
        (r#"bitfield o overflow sat set u8 0 300 set u8 0 -1 get u8 0 set u8 0 -300 get u8 0"#, arr(vec![int(254), int(255), int(255), int(255), int(255)])),
        (r#"bitfield o overflow sat incrby u8 0 1 incrby u8 0 -1000 incrby u8 0 -1 incrby u8 0 9223372036854775807"#, arr(vec![int(255), int(0), int(0), int(255)])),
        (r#"bitfield o overflow sat set i8 8 200 get i8 8 set i8 8 -200 get i8 8 incrby i8 8 -1 incrby i8 8 255"#, arr(vec![int(102), int(127), int(127), int(-128), int(-128), int(127)])),
        (r#"bitfield o overflow sat set i1 16 5 get i1 16 set i1 16 -5 get i1 16 incrby i1 16 1"#, arr(vec![int(-1), int(0), int(0), int(-1), int(0)])),
        // OVERFLOW FAIL: nil and no write, later operations still run.
        (r#"bitfield o overflow fail set u8 0 256 get u8 0 set u8 0 -1 incrby u8 0 -256 incrby u8 0 1 incrby u8 0 -255"#, arr(vec![nil(), int(255), nil(), nil(), nil(), int(0)])),
        (r#"bitfield o overflow fail set i8 8 127 incrby i8 8 1 incrby i8 8 -255 incrby i8 8 -254 get i8 8"#, arr(vec![int(127), nil(), int(-128), nil(), int(-128)])),
        // The mode changes in the middle of a call and applies to what follows.
        (r#"bitfield o set u8 24 250 incrby u8 24 10 overflow sat incrby u8 24 250 overflow fail incrby u8 24 1 overflow wrap incrby u8 24 1"#, arr(vec![int(0), int(4), int(254), int(255), int(0)])),
        (r#"bitfield o overflow fail overflow sat incrby u8 24 100"#, arr(vec![int(100)])),
        // i64 edges.
        (r#"bitfield e set i64 0 9223372036854775807 incrby i64 0 1 get i64 0"#, arr(vec![int(0), int(-9223372036854775808), int(-9223372036854775808)])),
        (r#"bitfield e overflow sat set i64 0 9223372036854775807 incrby i64 0 1 incrby i64 0 -9223372036854775808 incrby i64 0 -9223372036854775808 incrby i64 0 -9223372036854775808"#, arr(vec![int(-9223372036854775808), int(9223372036854775807), int(-1), int(-9223372036854775808), int(-9223372036854775808)])),
        (r#"bitfield e overflow fail set i64 0 -9223372036854775808 incrby i64 0 -1 incrby i64 0 9223372036854775807 incrby i64 0 9223372036854775807 incrby i64 0 1"#, arr(vec![int(-9223372036854775808), nil(), int(-1), int(9223372036854775806), int(9223372036854775807)])),
        (r#"bitfield e overflow wrap incrby i64 0 -9223372036854775808 incrby i64 0 -9223372036854775808 incrby i64 0 9223372036854775807"#, arr(vec![int(-1), int(9223372036854775807), int(-2)])),
        (r#"bitfield e overflow sat set i64 0 -9223372036854775807 incrby i64 0 -2 incrby i64 0 -1"#, arr(vec![int(-2), int(-9223372036854775808), int(-9223372036854775808)])),
        // u63 edges.
        (r#"bitfield u overflow sat set u63 0 9223372036854775807 incrby u63 0 1 incrby u63 0 -9223372036854775808 get u63 0"#, arr(vec![int(0), int(9223372036854775807), int(0), int(0)])),
        (r#"bitfield u overflow wrap set u63 0 -1 get u63 0 incrby u63 0 -9223372036854775808 incrby u63 0 9223372036854775807"#, arr(vec![int(0), int(9223372036854775807), int(9223372036854775807), int(9223372036854775806)])),
        (r#"bitfield u overflow fail set u63 0 -1 get u63 0 set u63 0 -9223372036854775808 incrby u63 0 2 incrby u63 0 -9223372036854775807 incrby u63 0 -1"#, arr(vec![nil(), int(9223372036854775806), nil(), nil(), nil(), int(9223372036854775805)])),
        (r#"bitfield u overflow sat set u63 0 -9223372036854775808 get u63 0 get i64 0"#, arr(vec![int(9223372036854775805), int(9223372036854775807), int(-2)])),
        (r#"bitfield u overflow wrap set u63 0 -9223372036854775808 get u63 0 get i64 0"#, arr(vec![int(9223372036854775807), int(0), int(0)])),
        // FAIL still grows the string (and creates the key).
        (r#"bitfield g overflow fail set u8 100 300 get u8 0"#, arr(vec![nil(), int(0)])),
        (r#"strlen g"#, int(14)),
        (r#"get g"#, bulk(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")),
        (r#"bitfield g2 overflow fail incrby u8 0 -1"#, arr(vec![nil()])),
        (r#"exists g2"#, int(1)),
        (r#"get g2"#, bulk(b"\x00")),
        // Growth covers the highest bit written; GET never grows.
        (r#"bitfield gr set u1 0 1 get u8 1000"#, arr(vec![int(0), int(0)])),
        (r#"strlen gr"#, int(1)),
        (r#"bitfield gr set i9 8 -1"#, arr(vec![int(0)])),
        (r#"strlen gr"#, int(3)),
        (r#"get gr"#, bulk(b"\x80\xff\x80")),
        (r#"bitfield gr incrby u1 23 0"#, arr(vec![int(0)])),
        (r#"strlen gr"#, int(3)),
        // Offsets up to 2^32 - 1; the field may end past it.
        (r#"bitfield big get u8 4294967295"#, arr(vec![int(0)])),
        (r#"bitfield big get u8 4294967296"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield big set i64 4294967295 -1"#, arr(vec![int(0)])),
        (r#"strlen big"#, int(536870920)),
        (r#"bitfield big get i64 4294967295 get u1 4294967295 get u63 4294967232 get u8 4294967290"#, arr(vec![int(-1), int(1), int(0), int(7)])),
        (r#"bitcount big"#, int(64)),
        (r#"del big"#, int(1)),
        // Errors, in Redis's order (the whole command is parsed first).
        (r#"bitfield x get u64 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get i65 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get i0 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get I8 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get U8 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get i08 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get u 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get "" 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get i8x 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get "i-8" 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x get u8 -1"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield x get u8 x"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield x get u8 01"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield x get u8 " 1""#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield x set u8 0 x"#, err("ERR value is not an integer or out of range")),
        (r#"bitfield x set u8 0 1.5"#, err("ERR value is not an integer or out of range")),
        (r#"bitfield x set u8 0 9223372036854775808"#, err("ERR value is not an integer or out of range")),
        (r#"bitfield x incrby u8 0 -9223372036854775809"#, err("ERR value is not an integer or out of range")),
        (r#"bitfield x set u8 x y"#, err("ERR bit offset is not an integer or out of range")),
        (r#"bitfield x set x x y"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x overflow foo"#, err("ERR Invalid OVERFLOW type specified")),
        (r#"bitfield x overflow"#, err("ERR syntax error")),
        (r#"bitfield x overflow wrapx"#, err("ERR Invalid OVERFLOW type specified")),
        (r#"bitfield x get u8"#, err("ERR syntax error")),
        (r#"bitfield x get"#, err("ERR syntax error")),
        (r#"bitfield x set u8 0"#, err("ERR syntax error")),
        (r#"bitfield x incrby u8 0"#, err("ERR syntax error")),
        (r#"bitfield x foo"#, err("ERR syntax error")),
        (r#"bitfield x get u8 0 foo"#, err("ERR syntax error")),
        (r#"bitfield x get u8 0 get u64 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x set u8 0 1 get u64 0"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield x set u8 0 1 overflow bad"#, err("ERR Invalid OVERFLOW type specified")),
        (r#"bitfield x overflow bad get u64 0"#, err("ERR Invalid OVERFLOW type specified")),
        (r#"bitfield x get u64 0 overflow bad"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"exists x"#, int(0)),
        (r#"bitfield_ro x set u8 0 1"#, err("ERR BITFIELD_RO only supports the GET subcommand")),
        (r#"bitfield_ro x incrby u8 0 1"#, err("ERR BITFIELD_RO only supports the GET subcommand")),
        (r#"bitfield_ro x get u8 0 incrby u8 0 1"#, err("ERR BITFIELD_RO only supports the GET subcommand")),
        (r#"bitfield_ro x set u8 0 x"#, err("ERR value is not an integer or out of range")),
        (r#"bitfield_ro x set u64 0 1"#, err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")),
        (r#"bitfield_ro x overflow fail get u8 0"#, arr(vec![int(0)])),
        (r#"bitfield_ro x overflow bad"#, err("ERR Invalid OVERFLOW type specified")),
        (r#"bitfield_ro x get u8 0 foo"#, err("ERR syntax error")),
        (r#"exists x"#, int(0)),
        // BITFIELD on a string set with SET.
        (r#"set s foobar"#, st("OK")),
        (r#"bitfield s get u8 0 get i8 8 get u16 #1 get u48 0 get i12 3"#, arr(vec![int(102), int(111), int(28514), int(112628796121458), int(823)])),
        (r#"bitfield_ro s get u8 #5 get u8 #6 get i64 0"#, arr(vec![int(114), int(0), int(7381240782615871488)])),
        (r#"bitfield s incrby u8 #0 1 set u8 #5 65"#, arr(vec![int(103), int(114)])),
        (r#"get s"#, bulk(b"goobaA")),
        (r#"strlen s"#, int(6)),
    ]
}

/// Every row gives Redis's reply on a database with default settings.
#[test]
fn bitfield_replies_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config::new(dir.path()).flush_interval(None);
    let (failures, db) = run(config().open().unwrap(), &redis7_cases(), None, config);
    assert!(failures.is_empty(), "{} rows differ:\n{}", failures.len(), failures.join("\n"));
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// The same rows give the same replies when every change is written back
/// at once (tiny budgets) and the database is reopened every 7 rows.
#[test]
fn bitfield_replies_match_redis_across_reopen_and_eviction() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config::new(dir.path()).flush_interval(None).cache_bytes(1).dirty_bytes(1);
    let (failures, db) = run(config().open().unwrap(), &redis7_cases(), Some(7), config);
    assert!(failures.is_empty(), "{} rows differ:\n{}", failures.len(), failures.join("\n"));
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Hostile argument lists never panic and always get a reply.
#[test]
fn hostile_bitfield_arguments_get_replies() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
    let words: [&[u8]; 18] = [
        b"get",
        b"set",
        b"incrby",
        b"overflow",
        b"sat",
        b"fail",
        b"i64",
        b"u63",
        b"i1",
        b"#",
        b"#4294967295",
        b"4294967295",
        b"-9223372036854775808",
        b"9223372036854775807",
        b"\x00",
        b"",
        b"u\x008",
        b"get\x00",
    ];
    let mut next = {
        let mut r = table::xorshift(0x9e37_79b9_7f4a_7c15);
        move |n: usize| r(n as u64) as usize
    };
    for _ in 0..3000 {
        let mut args = vec![if next(2) == 0 { b"bitfield".to_vec() } else { b"bitfield_ro".to_vec() }, b"k".to_vec()];
        for _ in 0..next(9) {
            args.push(words[next(words.len())].to_vec());
        }
        let reply = execute(&db, &args);
        assert!(!format_reply(&reply).is_empty());
    }
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}
