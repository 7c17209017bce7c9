//! CONFIG SET, the `-OOM` refusals of `maxmemory` under `noeviction`, and
//! CLIENT LIST's fields, against a real redis-server: the same commands
//! must get the same replies (byte for byte) from both servers. Skips with
//! a notice without redis-server, unless `BITSLED_REQUIRE_REDIS=1`.

#[path = "common/server.rs"]
mod server;

use bitsled_redis::server::ServerConfig;
use bitsled_testkit::wire::words;
use bitsled_testkit::{redis_server, wire};

/// A redis-server and a bitsled server, one client connected to each
/// (`None`, and the test skips, without redis-server).
struct Pair {
    redis: bitsled_testkit::redis_server::Server,
    served: server::Served,
    _dir: tempfile::TempDir,
    theirs: wire::Client,
    ours: wire::Client,
}

impl Pair {
    fn start() -> Option<Pair> {
        let redis = redis_server::start()?;
        let dir = tempfile::tempdir().unwrap();
        let served = server::start(dir.path(), ServerConfig::new());
        let theirs = wire::Client::connect(redis.port);
        let ours = wire::Client::connect(served.addr.port());
        Some(Pair { redis, served, _dir: dir, theirs, ours })
    }
}

/// Runs `lines` on one connection to each server; every reply must match.
fn same_replies(theirs: &mut wire::Client, ours: &mut wire::Client, lines: &[&str]) {
    for line in lines {
        let cmd = words(line);
        let (r, o) = (theirs.call(&cmd), ours.call(&cmd));
        assert_eq!(String::from_utf8_lossy(&o), String::from_utf8_lossy(&r), "{line}");
    }
}

/// Invariant: every value CONFIG SET takes or refuses for the parameters
/// Redis changes at run time gets Redis's reply, and CONFIG GET then
/// reads back what Redis reads back.
#[test]
fn config_set_answers_as_redis() {
    let Some(mut p) = Pair::start() else { return };
    let (theirs, ours) = (&mut p.theirs, &mut p.ours);
    same_replies(
        theirs,
        ours,
        &[
            "CONFIG GET maxmemory",
            "CONFIG SET maxmemory bla",
            "CONFIG SET maxmemory -1",
            "CONFIG SET maxmemory 1.5mb",
            "CONFIG SET maxmemory 100MB",
            "CONFIG GET maxmemory",
            "CONFIG SET maxmemory 2gb",
            "CONFIG GET maxmemory",
            "CONFIG SET maxmemory 0",
            "CONFIG SET maxmemory-policy foo",
            "CONFIG SET maxmemory-policy ALLKEYS-LRU",
            "CONFIG GET maxmemory-policy",
            "CONFIG SET maxmemory-policy noeviction",
            "CONFIG SET timeout -1",
            "CONFIG SET timeout 2147483648",
            "CONFIG SET timeout x",
            "CONFIG SET timeout 300",
            "CONFIG GET timeout",
            "CONFIG SET timeout 0",
            "CONFIG SET maxclients 0",
            "CONFIG SET maxclients 4294967296",
            "CONFIG SET maxclients 5000",
            "CONFIG GET maxclients",
            "CONFIG SET maxclients 10000",
            "CONFIG SET appendfsync x",
            "CONFIG SET appendfsync always",
            "CONFIG GET appendfsync",
            "CONFIG SET appendfsync everysec",
            "CONFIG SET databases 3",
            "CONFIG GET tcp-backlog",
            "CONFIG SET tcp-backlog 100",
            "CONFIG SET nosuch 1",
            "CONFIG SET timeout 1 timeout 2",
            "CONFIG SET timeout 5 maxclients 0",
            "CONFIG GET timeout",
            "CONFIG SET slowlog-max-len 64 slowlog-log-slower-than 5",
            "CONFIG GET slowlog-max-len",
            "CONFIG GET slowlog-log-slower-than",
            "CONFIG SET slowlog-max-len 128 slowlog-log-slower-than 10000",
        ],
    );
}

/// Invariant: with `maxmemory` 1, writes are refused
/// with Redis's `-OOM`, reads still run, a command queued in MULTI is
/// refused (and the transaction aborts), DISCARD still works, an EXEC with
/// only reads runs and one with a write aborts; `maxmemory 0` lifts it.
/// Each case as in Redis's unit/multi.
#[test]
fn out_of_memory_refuses_as_redis() {
    let Some(mut p) = Pair::start() else { return };
    let (mut theirs2, mut ours2) = (wire::Client::connect(p.redis.port), wire::Client::connect(p.served.addr.port()));
    let (theirs, ours) = (&mut p.theirs, &mut p.ours);
    same_replies(theirs, ours, &["SET x value", "SETBIT b 7 1", "CONFIG SET maxmemory 1"]);
    same_replies(
        theirs,
        ours,
        &[
            "SET y 1",
            "SETBIT b 9 1",
            "GET x",
            "GETBIT b 7",
            "DEL x",
            "MULTI",
            "SET z 1",
            "DISCARD",
            "PING",
            "MULTI",
            "GET x",
            "EXEC",
        ],
    );
    // Queued before the limit, run after it.
    same_replies(theirs, ours, &["CONFIG SET maxmemory 0", "MULTI", "GET x", "PING"]);
    same_replies(&mut theirs2, &mut ours2, &["CONFIG SET maxmemory 1"]);
    same_replies(theirs, ours, &["EXEC", "MULTI", "SET x 1", "GET x"]);
    same_replies(&mut theirs2, &mut ours2, &["CONFIG SET maxmemory-policy allkeys-lru"]);
    same_replies(theirs, ours, &["SET w 1"]);
    same_replies(&mut theirs2, &mut ours2, &["CONFIG SET maxmemory-policy noeviction"]);
    same_replies(theirs, ours, &["EXEC", "EXEC", "CONFIG SET maxmemory 0", "SET y 1", "GET y"]);
}

/// The fields of a CLIENT LIST line, in order, with their values.
fn fields(line: &str) -> Vec<(String, String)> {
    line.split_whitespace().filter_map(|f| f.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Invariant: CLIENT INFO names the same fields in the same order as
/// Redis 7.0, and the fields that do not depend on the implementation's
/// buffers agree: `cmd` is the command running (`client|info`),
/// `argv-mem` its arguments' bytes, `qbuf` the request's bytes, and
/// `multi-mem` counts queued commands. A connection's memory is counted in
/// INFO `used_memory`.
#[test]
fn client_info_fields_are_redis_fields() {
    let Some(mut p) = Pair::start() else { return };
    let (theirs, ours) = (&mut p.theirs, &mut p.ours);
    let info = words("CLIENT INFO");
    let bulk = |reply: Vec<u8>| String::from_utf8_lossy(&reply).lines().nth(1).unwrap_or_default().to_string();
    let (r, o) = (fields(&bulk(theirs.call(&info))), fields(&bulk(ours.call(&info))));
    let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&o), names(&r), "the same fields in the same order");
    let value = |f: &[(String, String)], k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
    for k in ["cmd", "argv-mem", "qbuf", "multi-mem", "obl", "oll", "omem", "flags", "multi", "resp", "db"] {
        assert_eq!(value(&o, k), value(&r, k), "{k}");
    }
    let qbuf_free: usize = value(&o, "qbuf-free").parse().unwrap();
    let qbuf: usize = value(&o, "qbuf").parse().unwrap();
    assert!(qbuf + qbuf_free >= 16384, "the input buffer is at least one read: {qbuf} + {qbuf_free}");
    // In a transaction: queued commands count in multi-mem on both.
    same_replies(theirs, ours, &["MULTI", "SET k vvvv"]);
    theirs.call(&words("DISCARD"));
    ours.call(&words("DISCARD"));
    let used = |c: &mut wire::Client| -> u64 {
        let text = String::from_utf8_lossy(&c.call(&words("INFO memory"))).to_string();
        text.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap()
    };
    let tot: u64 = value(&o, "tot-mem").parse().unwrap();
    assert!(used(ours) >= tot, "used_memory counts the connection's tot-mem ({tot})");
}

/// Invariant: DUMP compresses where Redis does: a sparse 12.5 KB bitmap's
/// payload is within twice the size of Redis's (both LZF), and Redis
/// restores bitsled's payload to the same value.
#[test]
fn dump_payloads_are_compressed_like_redis() {
    let Some(mut p) = Pair::start() else { return };
    let (theirs, ours) = (&mut p.theirs, &mut p.ours);
    same_replies(theirs, ours, &["SETBIT k 100000 1", "SETBIT k 7 1"]);
    let payload = |reply: Vec<u8>| -> Vec<u8> {
        let header_end = reply.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        reply[header_end..reply.len() - 2].to_vec()
    };
    let (r, o) = (payload(theirs.call(&words("DUMP k"))), payload(ours.call(&words("DUMP k"))));
    assert!(o.len() <= 2 * r.len() && o.len() < 1000, "bitsled {} bytes, Redis {} bytes", o.len(), r.len());
    let restore = vec![b"RESTORE".to_vec(), b"copy".to_vec(), b"0".to_vec(), o];
    assert_eq!(theirs.call(&restore), b"+OK\r\n");
    assert_eq!(theirs.call(&words("GET copy")), theirs.call(&words("GET k")));
}

/// Invariant: MEMORY STATS names Redis 7.0's fields in Redis's order (the
/// per-database entry included), so clients that read it by name work;
/// `keys.count` agrees.
#[test]
fn memory_stats_has_redis_fields() {
    let Some(mut p) = Pair::start() else { return };
    let (theirs, ours) = (&mut p.theirs, &mut p.ours);
    same_replies(theirs, ours, &["SET a b", "SETBIT c 9 1", "MEMORY PURGE"]);
    // The names: every bulk line that is followed by a value line, read
    // off the flat RESP2 reply (values here are integers, bulk numbers or
    // the nested map of db.0).
    let names = |reply: Vec<u8>| -> Vec<String> {
        let text = String::from_utf8_lossy(&reply).to_string();
        let lines: Vec<&str> = text.split("\r\n").collect();
        let mut out = Vec::new();
        let mut i = 1;
        let mut expect_name = true;
        while i < lines.len() {
            let l = lines[i];
            if let Some(_len) = l.strip_prefix('$') {
                let word = lines[i + 1];
                if expect_name && !word.chars().all(|c| c.is_ascii_digit() || c == '.' || c == '-') {
                    out.push(word.to_string());
                    expect_name = false;
                } else {
                    expect_name = true;
                }
                i += 2;
            } else {
                // An array header or a value line.
                expect_name = true;
                i += 1;
            }
        }
        out
    };
    let (r, o) = (names(theirs.call(&words("MEMORY STATS"))), names(ours.call(&words("MEMORY STATS"))));
    assert!(r.len() > 25, "the field names were read: {r:?}");
    assert_eq!(o, r);
    let count = |reply: Vec<u8>| -> String {
        let text = String::from_utf8_lossy(&reply).to_string();
        let at = text.find("keys.count\r\n").unwrap();
        text[at..].lines().nth(1).unwrap().to_string()
    };
    assert_eq!(count(ours.call(&words("MEMORY STATS"))), count(theirs.call(&words("MEMORY STATS"))));
}

/// Invariant: OBJECT ENCODING follows how a value was last written, as in
/// Redis: `raw` after SETRANGE, APPEND or SETBIT changed it in place (an
/// empty SETRANGE changes nothing), back to `int`/`embstr` after a whole
/// write (SET, INCR), kept through EXPIRE and RENAME.
#[test]
fn object_encoding_follows_in_place_writes() {
    let Some(mut p) = Pair::start() else { return };
    let (theirs, ours) = (&mut p.theirs, &mut p.ours);
    let mut lines = Vec::new();
    for step in [
        "SET k 1234",
        "SETRANGE k 0 2",
        "SET k 1234",
        "SETRANGE k 0 ",
        "SET k hello",
        "APPEND k x",
        "SET k 5",
        "SETBIT k 0 1",
        "SET k 7",
        "INCR k",
        "EXPIRE k 100",
        "SETRANGE k 1 3",
        "EXPIRE k 100",
        "RENAME k k2",
        "BITFIELD k2 SET u8 0 65",
        "APPEND new hello",
        "APPEND new2 123",
        "SETBIT missing 0 0",
    ] {
        lines.push(step.to_string());
        let key = step.split(' ').nth(1).unwrap_or("k");
        lines.push(format!("OBJECT ENCODING {key}"));
    }
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    same_replies(theirs, ours, &lines);
}
