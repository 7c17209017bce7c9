//! The `bitsled` binary prints, for a redis-cli script on stdin, exactly the
//! bytes `redis-cli --no-raw` prints for the same script against a real
//! `redis-server`.
//!
//! The test starts its own `redis-server` on a free loopback port (no
//! persistence) and stops it at the end. If `redis-server` or `redis-cli`
//! is missing, the test prints a notice and passes, unless
//! `BITSLED_REQUIRE_REDIS=1` is set, in which case it fails. Install them
//! with `apt-get install redis-server redis-tools`.
//!
//! The script avoids what legitimately differs: KEYS/SCAN over several keys
//! (Redis's order is its hash table's), commands slow enough for redis-cli
//! to print their time, and the Redis 8.2 BITOP operations (Redis 7 lacks
//! them).

use std::process::Command;

use bitsled_testkit::redis_server;

/// The script: every reply kind, escapes in both directions, wide arrays,
/// errors, redis-cli's own messages (bad quoting, repeat counts), blank
/// lines, and `quit` followed by a line that must not run.
const SCRIPT: &str = r#"PING
ping "hello world"
SETBIT k 7 1
SETBIT k 7 1
setbit k 4294967296 1
setbit k 1 2
GETBIT k 7
GET k
BITCOUNT k
bitcount k 0
bitcount k 0 -1 bit
SET bin "\x00\x01\x7f\x80\xff\n\r\t\a\b\\\"'x"
GET bin
STRLEN bin
set q 'single \'quoted\' "text"'
get q
BITPOS bin 1
BITPOS bin 0 2 -1 bit
bitpos bin 2
BITOP AND and k bin
GET and
BITOP NOT not bin
GET not
bitop not x k bin
bitop diff x

MGET k bin q missing a b c d e f g h
MGET missing
EXISTS k bin missing k
TYPE k
TYPE missing
SET k v NX
SET k v XX GET
GETDEL k
GETDEL k
DEL bin q and not missing
ECHO "tab\there"
3 ECHO again
0 PING
nosuchcommand a "b c"
get "unbalanced
get 'bad'quote
SETRANGE sr 3 "\xffab"
APPEND sr "!"
GETRANGE sr -3 -1
GET sr
RENAME sr sr2
RENAME sr sr3
COPY sr2 sr3
COPY sr2 sr2
RENAMENX sr2 sr3
GET sr3
DEL sr2
FLUSHALL
DBSIZE
SET only one
KEYS *
GET
quit
PING
"#;

/// A private redis-server, when redis-server and redis-cli are installed.
fn start_redis() -> Option<redis_server::Server> {
    if !redis_server::tools_present(&["redis-server", "redis-cli"]) {
        return None;
    }
    redis_server::start()
}

/// Runs `script` through redis-cli (against a fresh redis-server) and through
/// bitsled; asserts redis-cli's output contains every needle (so the script
/// really exercises those kinds of output) and that bitsled's output is
/// byte for byte the same.
fn compare_with_redis_cli(script: &str, needles: &[&str]) {
    let Some(server) = start_redis() else { return };
    let port = server.port;
    let mut redis_cli = Command::new("redis-cli");
    redis_cli.args(["-p", &port.to_string(), "--no-raw"]);
    let want = redis_server::pipe(redis_cli, script);

    let dir = tempfile::tempdir().expect("tempdir");
    let mut bitsled = Command::new(env!("CARGO_BIN_EXE_bitsled"));
    bitsled.arg("--db").arg(dir.path());
    let got = redis_server::pipe(bitsled, script);

    let want_text = String::from_utf8_lossy(&want);
    for needle in needles {
        assert!(want_text.contains(needle), "redis-cli output lacks {needle:?}:\n{want_text}");
    }
    if got != want {
        let got_text = String::from_utf8_lossy(&got);
        for (i, (w, g)) in want_text.lines().zip(got_text.lines()).enumerate() {
            assert!(w == g, "line {} differs:\nredis-cli: {w}\nbitsled:   {g}\n\nbitsled output:\n{got_text}", i + 1);
        }
        panic!("outputs differ in length:\nredis-cli:\n{want_text}\nbitsled:\n{got_text}");
    }
}

/// The binary's output for the script equals redis-cli's, byte for byte.
#[test]
fn script_output_matches_redis_cli() {
    compare_with_redis_cli(SCRIPT, &["(error) ERR unknown command", "Invalid argument(s)", "10) ", "(nil)", "\\xff"]);
}

/// Expiry commands (EXPIRE family with NX/XX/GT/LT, TTL family, PERSIST,
/// SET EX/PX/EXAT/PXAT/KEEPTTL) reply exactly as Redis does.
#[test]
fn expiry_script_matches_redis_cli() {
    compare_with_redis_cli(
        include_str!("scripts/expiry.redis"),
        &["invalid expire time in 'set' command", "(integer) 4102444800000", "(integer) -2"],
    );
}

/// PFADD, PFCOUNT and PFMERGE reply exactly as Redis does, and GET shows
/// Redis's HyperLogLog bytes.
#[test]
fn hyperloglog_script_matches_redis_cli() {
    compare_with_redis_cli(
        include_str!("scripts/hll.redis"),
        &["\"HYLL", "(integer) 6", "Key is not a valid HyperLogLog string value"],
    );
}

/// One command on the command line prints the same reply text; the exit
/// code is 1 exactly when the reply is an error.
#[test]
fn one_command_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_bitsled")).arg("--db").arg(dir.path()).args(args).output().unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.code())
    };
    assert_eq!(run(&["SETBIT", "k", "7", "1"]), ("(integer) 0\n".into(), Some(0)));
    assert_eq!(run(&["bitcount", "k", "-1", "-1"]), ("(integer) 1\n".into(), Some(0)));
    assert_eq!(run(&["get", "k"]), ("\"\\x01\"\n".into(), Some(0)));
    assert_eq!(
        run(&["setbit", "k", "x", "1"]),
        ("(error) ERR bit offset is not an integer or out of range\n".into(), Some(1))
    );
    let (text, code) = run(&["verify"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("ok"), "{text}");
}

/// `-n N import FILE` loads the CSV lines into database N, as `-n N
/// import --roaring` does, and leaves database 0 alone.
#[test]
fn csv_import_honours_the_database_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let csv = dir.path().join("x.csv");
    std::fs::write(&csv, "k,7\nk,100\nk,7,0\nother,3\n").unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_bitsled")).arg("--db").arg(&db).args(args).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (text(&out.stdout), text(&out.stderr), out.status.code())
    };
    let os = std::ffi::OsStr::new;
    let (out, err, code) = run(&[os("-n"), os("3"), os("import"), csv.as_os_str()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("imported 4 lines"), "{out}");
    assert_eq!(run(&[os("-n"), os("3"), os("BITCOUNT"), os("k")]).0, "(integer) 1\n");
    assert_eq!(run(&[os("-n"), os("3"), os("GETBIT"), os("k"), os("100")]).0, "(integer) 1\n");
    assert_eq!(run(&[os("-n"), os("3"), os("GETBIT"), os("other"), os("3")]).0, "(integer) 1\n");
    assert_eq!(run(&[os("-n"), os("3"), os("DBSIZE")]).0, "(integer) 2\n");
    assert_eq!(run(&[os("DBSIZE")]).0, "(integer) 0\n", "database 0 stays empty");
    // Without -n, database 0.
    let (out, err, code) = run(&[os("import"), csv.as_os_str()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(run(&[os("DBSIZE")]).0, "(integer) 2\n");
    // A database that does not exist is refused.
    let (_, err, code) = run(&[os("-n"), os("16"), os("import"), csv.as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("database 16 does not exist"), "{err}");
}

/// `import --roaring FILE KEY` and `export --roaring KEY FILE` (and their
/// `--bits64` forms) round trip a Roaring bitmap through files: the key
/// holds the bitmap's values as bit offsets, and the exported file has
/// roaring-rs's bytes for the set. Unreadable files, bad data and a wrong
/// type fail with exit code 1 and a message naming the problem, leaving
/// the key (and an existing output file) unchanged.
#[test]
fn roaring_import_export_round_trip_through_files() {
    use roaring::{RoaringBitmap, RoaringTreemap};

    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let run = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_bitsled")).arg("--db").arg(&db).args(args).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (text(&out.stdout), text(&out.stderr), out.status.code())
    };
    let path = |name: &str| dir.path().join(name);
    let os = |s: &'static str| std::ffi::OsStr::new(s);

    let bitmap: RoaringBitmap =
        (0..200_000u32).filter(|v| v % 7 == 0).chain(1_000_000..1_070_000).chain([u32::MAX]).collect();
    let mut bytes = Vec::new();
    bitmap.serialize_into(&mut bytes).unwrap();
    std::fs::write(path("in.roar"), &bytes).unwrap();
    let (out, err, code) = run(&[os("import"), os("--roaring"), path("in.roar").as_os_str(), os("k")]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("imported {} bits", bitmap.len())), "{out}");
    assert_eq!(run(&[os("BITCOUNT"), os("k")]).0, format!("(integer) {}\n", bitmap.len()));
    assert_eq!(run(&[os("GETBIT"), os("k"), os("4294967295")]).0, "(integer) 1\n");
    assert_eq!(run(&[os("GETBIT"), os("k"), os("8")]).0, "(integer) 0\n");
    assert_eq!(run(&[os("STRLEN"), os("k")]).0, "(integer) 536870912\n");
    let (out, err, code) = run(&[os("export"), os("--roaring"), os("k"), path("out.roar").as_os_str()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(std::fs::read(path("out.roar")).unwrap() == bytes, "the exported file differs from roaring-rs's bytes");

    // The 64-bit form, with offsets no Redis command can reach.
    let treemap: RoaringTreemap = [3u64, 1 << 33, (1 << 40) + 5].into_iter().collect();
    let mut wide = Vec::new();
    treemap.serialize_into(&mut wide).unwrap();
    std::fs::write(path("in64.roar"), &wide).unwrap();
    let (out, err, code) =
        run(&[os("import"), os("--roaring"), os("--bits64"), path("in64.roar").as_os_str(), os("w")]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(run(&[os("BITCOUNT"), os("w")]).0, "(integer) 3\n");
    let (out, err, code) =
        run(&[os("export"), os("--roaring"), os("--bits64"), os("w"), path("out64.roar").as_os_str()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(std::fs::read(path("out64.roar")).unwrap(), wide);

    // A 32-bit export of that key fails and leaves the file alone.
    let (_, err, code) = run(&[os("export"), os("--roaring"), os("w"), path("out.roar").as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("32-bit") && err.contains("out of range"), "{err}");
    assert!(std::fs::read(path("out.roar")).unwrap() == bytes, "a failed export changed the file");

    // Failures name their cause and change nothing.
    let (_, err, code) = run(&[os("import"), os("--roaring"), path("missing.roar").as_os_str(), os("k")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("reading") && err.contains("missing.roar"), "{err}");
    std::fs::write(path("bad.roar"), &bytes[..bytes.len() - 3]).unwrap();
    let (_, err, code) = run(&[os("import"), os("--roaring"), path("bad.roar").as_os_str(), os("k")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("malformed roaring bitmap: truncated input"), "{err}");
    std::fs::write(path("csv.txt"), "k,5\n").unwrap();
    let (_, err, code) = run(&[os("import"), os("--roaring"), path("csv.txt").as_os_str(), os("k")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("malformed roaring bitmap"), "{err}");
    assert_eq!(run(&[os("BITCOUNT"), os("k")]).0, format!("(integer) {}\n", bitmap.len()));
    assert_eq!(run(&[os("BF.RESERVE"), os("bf"), os("0.01"), os("100")]).0, "OK\n");
    let (_, err, code) = run(&[os("export"), os("--roaring"), os("bf"), path("bf.roar").as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("WRONGTYPE"), "{err}");
    assert!(!path("bf.roar").exists());
    let (_, err, code) = run(&[os("export"), os("k"), path("x").as_os_str()]);
    assert_eq!(code, Some(2), "clap refuses an export without a format: {err}");

    let (text, _, code) = run(&[os("verify")]);
    assert_eq!(code, Some(0), "{text}");
}

/// `import --raw FILE KEY` and `export --raw KEY FILE` round trip a value's
/// bytes through files and through stdin/stdout: GET gives the file's
/// bytes, and the exported file is GET's bytes, zero bytes for absent pages
/// included. A missing key or a wrong type fails with exit code 1 and a
/// message, leaving an existing file as it was; a missing input file leaves
/// the key as it was; clap refuses `--raw` beside `--roaring`.
#[test]
fn raw_import_export_round_trip_through_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let run_with = |args: &[&std::ffi::OsStr], stdin: &[u8]| {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_bitsled"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.stdout, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code())
    };
    let run = |args: &[&std::ffi::OsStr]| run_with(args, b"");
    let path = |name: &str| dir.path().join(name);
    let os = |s: &'static str| std::ffi::OsStr::new(s);

    // Three pages and a bit, the third page all zero.
    let value: Vec<u8> = (0..3 * 4096 + 100)
        .map(|i: u32| if (8192..12288).contains(&i) { 0 } else { i.wrapping_mul(0x9E37_79B1).to_le_bytes()[3] })
        .collect();
    std::fs::write(path("in.bin"), &value).unwrap();
    let (out, err, code) = run(&[os("import"), os("--raw"), path("in.bin").as_os_str(), os("k")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(String::from_utf8_lossy(&out).contains(&format!("imported {} bytes", value.len())));
    let (out, err, code) = run(&[os("export"), os("--raw"), os("k"), path("out.bin").as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(String::from_utf8_lossy(&out).contains(&format!("exported {} bytes", value.len())));
    assert!(std::fs::read(path("out.bin")).unwrap() == value, "the exported bytes differ from the imported ones");
    let ones: u32 = value.iter().map(|b| b.count_ones()).sum();
    assert_eq!(run(&[os("BITCOUNT"), os("k")]).0, format!("(integer) {ones}\n").into_bytes());

    // Through stdin and stdout, onto a key with absent pages.
    let (_, err, code) = run_with(&[os("import"), os("--raw"), os("-"), os("s")], b"\x80");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(run(&[os("SETBIT"), os("s"), os("70001"), os("1")]).2, Some(0));
    let (out, err, code) = run(&[os("export"), os("--raw"), os("s"), os("-")]);
    assert_eq!(code, Some(0), "{err}");
    let mut want = vec![0u8; 70001 / 8 + 1];
    want[0] = 0x80;
    want[70001 / 8] = 0x40;
    assert!(out == want, "stdout export: {} bytes", out.len());

    // Failures name their cause and change nothing.
    let (_, err, code) = run(&[os("export"), os("--raw"), os("missing"), path("out.bin").as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no such key"), "{err}");
    assert!(std::fs::read(path("out.bin")).unwrap() == value, "a failed export changed the file");
    assert!(!path("out.bin.export-tmp").exists(), "the partial file is removed");
    assert_eq!(run(&[os("BF.RESERVE"), os("bf"), os("0.01"), os("100")]).0, b"OK\n");
    let (_, err, code) = run(&[os("export"), os("--raw"), os("bf"), path("out.bin").as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("WRONGTYPE"), "{err}");
    let (_, err, code) = run(&[os("import"), os("--raw"), path("missing.bin").as_os_str(), os("k")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("missing.bin"), "{err}");
    assert_eq!(run(&[os("BITCOUNT"), os("k")]).0, format!("(integer) {ones}\n").into_bytes());
    let (_, err, code) = run(&[os("import"), os("--raw"), os("--roaring"), path("in.bin").as_os_str(), os("k")]);
    assert_eq!(code, Some(2), "clap refuses two formats: {err}");

    let (text, _, code) = run(&[os("verify")]);
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&text));
}
