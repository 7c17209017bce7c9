//! MIGRATE against a real redis-server: the same calls made on a Redis
//! source and on a bitsled source, each moving keys into its own database
//! of one Redis target, must get the same replies, leave the same keys at
//! both sources and the same values (and times to live) in the two target
//! databases. Skips with a notice without redis-server, unless
//! `BITSLED_REQUIRE_REDIS=1`.

#[path = "common/server.rs"]
mod server;

use bitsled_redis::server::ServerConfig;
use bitsled_testkit::wire::words;
use bitsled_testkit::{redis_server, wire};

/// Invariant: every MIGRATE form (one key, KEYS, COPY, REPLACE, a key
/// that exists at the target, no key, bad arguments, an unreachable
/// target) answers as Redis does, and moves what Redis moves.
#[test]
fn migrate_moves_keys_as_redis_does() {
    let Some(target) = redis_server::start() else { return };
    let Some(redis) = redis_server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let served = server::start(dir.path(), ServerConfig::new());
    let mut theirs = wire::Client::connect(redis.port);
    let mut ours = wire::Client::connect(served.addr.port());
    let mut t = wire::Client::connect(target.port);
    let tp = target.port;
    // Each source's line, with `DB` standing for its own target database.
    let both = |theirs: &mut wire::Client, ours: &mut wire::Client, line: &str| {
        let (r, o) = (theirs.call(&words(&line.replace("DB", "1"))), ours.call(&words(&line.replace("DB", "2"))));
        assert_eq!(String::from_utf8_lossy(&o), String::from_utf8_lossy(&r), "{line}");
    };
    let long = "x".repeat(300);
    for line in [
        "SETBIT bits 100000 1".to_string(),
        "SET s hello".into(),
        format!("SET long {long}"),
        "SET n 12345".into(),
        "SET ttl v PX 500000".into(),
        "SET keep v".into(),
        "SET a1 1".into(),
        "SET a2 2".into(),
    ] {
        both(&mut theirs, &mut ours, &line);
    }
    // `busy` exists at the target already, in both databases.
    for db in ["1", "2"] {
        t.call(&words(&format!("SELECT {db}")));
        t.call(&words("SET busy old"));
    }
    both(&mut theirs, &mut ours, "SET busy new");
    for line in [
        format!("MIGRATE 127.0.0.1 {tp} bits DB 5000"),
        format!("MIGRATE 127.0.0.1 {tp} s DB 5000"),
        format!("MIGRATE 127.0.0.1 {tp} long DB 5000"),
        format!("MIGRATE 127.0.0.1 {tp} n DB 5000"),
        format!("MIGRATE 127.0.0.1 {tp} keep DB 5000 COPY"),
        format!("MIGRATE 127.0.0.1 {tp} missing DB 5000"),
        format!("MIGRATE 127.0.0.1 {tp} busy DB 5000"),
        format!("MIGRATE 127.0.0.1 {tp} busy DB 5000 REPLACE"),
        // Two spaces: an empty key argument, as the KEYS form wants.
        format!("MIGRATE 127.0.0.1 {tp}  DB 5000 KEYS a1 a2 missing"),
        format!("MIGRATE 127.0.0.1 {tp} s DB 5000 KEYS a1"),
        format!("MIGRATE 127.0.0.1 {tp} s DB 5000 BOGUS"),
        format!("MIGRATE 127.0.0.1 {tp} s DB 5000 AUTH"),
        format!("MIGRATE 127.0.0.1 {tp} keep DB x"),
        format!("MIGRATE 127.0.0.1 {tp} keep x 5000"),
        format!("MIGRATE 127.0.0.1 {tp} keep DB 5000 AUTH wrong"),
        "EXISTS bits s long n keep busy a1 a2".into(),
        "GET keep".into(),
        "COMMAND GETKEYS MIGRATE h 1  0 5 KEYS k1 k2".into(),
        "COMMAND GETKEYS MIGRATE h 1 k 0 5 KEYS k1 k2".into(),
        "COMMAND GETKEYS MIGRATE h 1 k 0 5 COPY".into(),
    ] {
        both(&mut theirs, &mut ours, &line);
    }
    // What the two sources moved is the same.
    let dump_of = |t: &mut wire::Client, db: &str| -> Vec<String> {
        t.call(&words(&format!("SELECT {db}")));
        let mut out = Vec::new();
        for k in ["bits", "s", "long", "n", "keep", "busy", "a1", "a2", "ttl"] {
            let v = t.call(&words(&format!("GET {k}")));
            let ttl = t.call(&words(&format!("PTTL {k}")));
            let ttl = String::from_utf8_lossy(&ttl).to_string();
            let has_ttl = !ttl.starts_with(":-");
            out.push(format!("{k}={} ttl={has_ttl}", String::from_utf8_lossy(&v)));
        }
        out
    };
    assert_eq!(dump_of(&mut t, "2"), dump_of(&mut t, "1"));
    // A time to live moves with its key.
    both(&mut theirs, &mut ours, &format!("MIGRATE 127.0.0.1 {tp} ttl DB 5000"));
    t.call(&words("SELECT 2"));
    let pttl: i64 =
        String::from_utf8_lossy(&t.call(&words("PTTL ttl"))).trim_start_matches(':').trim().parse().unwrap();
    assert!((400_000..=500_000).contains(&pttl), "the time to live moved: {pttl}");
    // An unreachable target: nothing listens on the port of a closed
    // listener.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    both(&mut theirs, &mut ours, "SET gone v");
    both(&mut theirs, &mut ours, &format!("MIGRATE 127.0.0.1 {closed} gone DB 200"));
    both(&mut theirs, &mut ours, "EXISTS gone");
}

/// Invariant: a target that answers garbage (an empty line, a huge bulk
/// length, an array) gets MIGRATE an error reply, never a panic or an
/// allocation of what it claims; the key stays, and the server answers
/// the next command.
#[test]
fn a_target_answering_garbage_gets_an_error() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let served = server::start(dir.path(), ServerConfig::new());
    let mut ours = wire::Client::connect(served.addr.port());
    ours.call(&words("SET k v"));
    for garbage in [&b"\r\n"[..], b"$100000000000\r\n", b"*2\r\n+OK\r\n+OK\r\n", b"+OK\r\n:1\r\n"] {
        let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = target.local_addr().unwrap().port();
        let answer = garbage.to_vec();
        let fake = std::thread::spawn(move || {
            let (mut s, _) = target.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(&answer);
            // Hold the connection until the client is done with it.
            let _ = s.read(&mut buf);
        });
        let reply = ours.call(&words(&format!("MIGRATE 127.0.0.1 {port} k 0 2000")));
        assert!(reply.starts_with(b"-IOERR"), "{:?}: {}", garbage, String::from_utf8_lossy(&reply));
        assert_eq!(ours.call(&words("GET k")), b"$1\r\nv\r\n", "the key stays");
        drop(fake);
    }
}
