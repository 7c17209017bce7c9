//! COMMAND GETKEYS, COMMAND GETKEYSANDFLAGS and COMMAND LIST FILTERBY
//! against a real redis-server: for calls of the commands both serve
//! (single keys, key ranges, BITOP's destination and sources, MSET's
//! pairs, key counts, subcommands, wrong counts, unknown commands, commands
//! without keys), the RESP2 bytes must be Redis's; a filtered list, cut to
//! the commands Redis has, must be Redis's list cut to the commands bitsled
//! serves. Skips with a notice
//! without redis-server, unless `BITSLED_REQUIRE_REDIS=1`.

use std::collections::BTreeSet;

use bitsled::Config;
use bitsled_redis::command::{execute, Reply};
use bitsled_testkit::wire::words;
use bitsled_testkit::{redis_server, wire};

/// The names in a RESP2 array of bulk strings.
fn names(resp: &[u8]) -> BTreeSet<String> {
    let text = String::from_utf8_lossy(resp);
    let lines: Vec<&str> = text.split("\r\n").collect();
    lines.iter().skip(1).filter(|l| !l.starts_with('$') && !l.is_empty()).map(|l| (*l).to_string()).collect()
}

#[test]
fn getkeys_and_list_filters_like_redis() {
    let Some(server) = redis_server::start() else { return };
    let mut redis = wire::Client::connect(server.port);
    let mut call = |a: &[Vec<u8>]| redis.call(a);
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
    let calls = [
        "SET a b",
        "SET a b EX 10 GET",
        "GET a",
        "SETBIT k 7 1",
        "GETBIT k 7",
        "BITCOUNT k 0 -1 BIT",
        "BITPOS k 1",
        "BITOP AND d s1 s2 s3",
        "BITOP NOT d s1",
        "BITFIELD k GET u8 0",
        "BITFIELD_RO k GET u8 0",
        "BITFIELD k OVERFLOW SAT GET u8 0",
        "BITFIELD k GET u8 0 SET u8 0 1",
        "BITFIELD k INCRBY u8 0",
        "BITFIELD k",
        "SET a b get",
        "MSET a 1 b 2 c 3",
        "MSETNX a 1 b 2",
        "MGET a b c",
        "DEL a b c",
        "EXISTS a b",
        "RENAME a b",
        "COPY a b DB 1",
        "PFADD h x y",
        "PFCOUNT h1 h2",
        "PFMERGE d s1 s2",
        "LCS a b IDX",
        "EXPIRE k 10",
        "GETEX k PERSIST",
        "SET a",
        "GETBIT k",
        "NOSUCH a b",
        "PING x y",
        "CONFIG GET maxmemory",
        "CONFIG NOSUCH x",
        "SELECT 1 2",
        "SORT_RO k",
    ];
    for form in ["GETKEYS", "GETKEYSANDFLAGS"] {
        for line in calls {
            let mut cmd = words(&format!("COMMAND {form}"));
            cmd.extend(words(line));
            let want = call(&cmd);
            let got = execute(&db, &cmd).to_resp();
            // A command bitsled does not serve is unknown to it.
            if line.starts_with("SORT_RO") {
                assert_eq!(got, b"-ERR Invalid command specified\r\n");
                continue;
            }
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want), "COMMAND {form} {line}");
        }
    }
    let Reply::Array(served) = execute(&db, &words("COMMAND LIST")) else { panic!("COMMAND LIST") };
    let served: BTreeSet<String> = served
        .iter()
        .map(|r| match r {
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(served.contains("command|getkeys") && served.contains("lcs"));
    let redis_all = names(&call(&words("COMMAND LIST")));
    for filter in [
        "ACLCAT bitmap",
        "ACLCAT string",
        "ACLCAT connection",
        "ACLCAT hyperloglog",
        "ACLCAT keyspace",
        "ACLCAT WRITE",
        "PATTERN bit*",
        "PATTERN *|*",
        "PATTERN CONFIG*",
        "PATTERN ?et",
        "MODULE x",
    ] {
        let cmd = words(&format!("COMMAND LIST FILTERBY {filter}"));
        let want: BTreeSet<String> = names(&call(&cmd)).intersection(&served).cloned().collect();
        // bitsled's own commands (BITOP.COUNT, BF.*) are not Redis's.
        let got: BTreeSet<String> = names(&execute(&db, &cmd).to_resp()).intersection(&redis_all).cloned().collect();
        assert_eq!(got, want, "FILTERBY {filter}");
    }
    for bad in ["COMMAND LIST FILTERBY FOO x", "COMMAND LIST FILTERBY PATTERN", "COMMAND LIST x"] {
        assert_eq!(execute(&db, &words(bad)).to_resp(), call(&words(bad)), "{bad}");
    }
}
