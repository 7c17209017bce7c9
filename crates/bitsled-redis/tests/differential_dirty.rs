//! INFO persistence `rdb_changes_since_last_save` against a real
//! redis-server: after each command of a sequence covering the write
//! commands bitsled serves (writes that change something, writes that
//! change nothing, multi-key writes, expiry changes, FLUSHDB, SWAPDB and
//! SAVE, which starts the count again), the counter must have moved by
//! the same amount on both servers. Skips with a notice without
//! redis-server, unless `BITSLED_REQUIRE_REDIS=1`.

#[path = "common/server.rs"]
mod server;

use bitsled_redis::server::ServerConfig;
use bitsled_testkit::wire::words;
use bitsled_testkit::{redis_server, wire};

/// The counter in a RESP2 reply to `INFO persistence`.
fn changes(reply: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(reply);
    text.split("\r\n")
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .unwrap_or_else(|| panic!("no rdb_changes_since_last_save in {text:?}"))
        .parse()
        .expect("a number")
}

#[test]
fn changes_since_last_save_move_as_in_redis() {
    let Some(redis) = redis_server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let served = server::start(dir.path(), ServerConfig::new());
    let mut theirs = wire::Client::connect(redis.port);
    let mut ours = wire::Client::connect(served.addr.port());
    let info = words("INFO persistence");
    let sequence = [
        "SAVE",
        "SETBIT a 0 0",
        "SETBIT a 0 0",
        "SETBIT a 0 1",
        "SETBIT a 90 0",
        "BITFIELD b SET i5 0 0",
        "BITFIELD b SET i5 0 0",
        "BITFIELD b SET i5 0 1",
        "BITFIELD b INCRBY i5 0 1",
        "BITFIELD b GET i5 0",
        "BITFIELD b SET i5 0 3 SET i5 5 7 INCRBY i5 10 1",
        "BITFIELD b SET i5 0 3 SET i5 5 7",
        "MSET m1 1 m1 2",
        "SET s v",
        "SET s v",
        "SET s w NX",
        "SETNX s x",
        "MSET m1 1 m2 2",
        "MSETNX m1 1 m3 3",
        "MSETNX n1 1 n2 2",
        "INCR m1",
        "INCRBY m1 5",
        "DECR m1",
        "INCRBYFLOAT m1 1.5",
        "APPEND s tail",
        "SETRANGE s 0 X",
        "SETRANGE s 0 X",
        "GETSET s y",
        "GETDEL s",
        "GETDEL s",
        "DEL m1 m2 missing",
        "DEL missing",
        "UNLINK n1",
        "SET t v",
        "EXPIRE t 100",
        "EXPIRE t 100 NX",
        "PEXPIRE t 50000",
        "PERSIST t",
        "PERSIST t",
        "GETEX t EX 100",
        "GETEX t",
        "SETEX u 100 v",
        "RENAME t t2",
        "COPY t2 t3",
        "BITOP OR d a b",
        "BITOP AND d a missing",
        "PFADD h x y",
        "PFADD h x",
        "PFMERGE h2 h",
        "GET a",
        "BITCOUNT a",
        "DBSIZE",
        "FLUSHDB",
        "SET x 1",
        "SET y 2",
        "SWAPDB 0 1",
        "SWAPDB 0 1",
        "SWAPDB 0 0",
        "SET mv 1",
        "MOVE mv 1",
        "MOVE mv 1",
        "SAVE",
        "SET z 3",
    ];
    let mut before = (changes(&theirs.call(&info)), changes(&ours.call(&info)));
    for line in sequence {
        let cmd = words(line);
        let (r, o) = (theirs.call(&cmd), ours.call(&cmd));
        assert_eq!(
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&r),
            "{line}: the replies differ, so the counts cannot be compared"
        );
        let after = (changes(&theirs.call(&info)), changes(&ours.call(&info)));
        assert_eq!(
            after.1.wrapping_sub(before.1),
            after.0.wrapping_sub(before.0),
            "{line}: Redis went {} -> {}, bitsled {} -> {}",
            before.0,
            after.0,
            before.1,
            after.1
        );
        before = after;
    }
    assert_eq!(before.1, before.0, "the counts end equal (both since the last SAVE)");
}
