//! Replication between `bitsled serve` processes on loopback: a master
//! with two replicas (one started with `--replicaof`, one told with
//! REPLICAOF) under a concurrent writer. Checked: what `WAIT 2`
//! acknowledged is on both replicas; replicas refuse writes with Redis's
//! READONLY; a replica killed with SIGKILL restarts and catches up; the
//! replicas hold the master's keys (DUMP per key) once the writer stops;
//! after the master is killed, `REPLICAOF NO ONE` makes a replica a
//! writable master holding every write `WAIT` acknowledged, and the other
//! replica follows it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/server.rs"]
mod server;

use server::Served;

/// Waits up to 30 s for `f` to hold.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn info_field(con: &mut redis::Connection, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg("replication").query(con).ok()?;
    info.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

/// Every key of database 0 with its DUMP payload.
fn dump_all(con: &mut redis::Connection) -> Vec<(String, Vec<u8>)> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let d: Vec<u8> = redis::cmd("DUMP").arg(&k).query(con).unwrap();
            (k, d)
        })
        .collect()
}

/// The writer: SETBIT batches into `w:{n}` keys; every tenth batch,
/// `WAIT want 10000`. Returns the batches WAIT acknowledged (every
/// batch before the last acknowledged WAIT) and how many replicas each
/// WAIT counted.
fn write_and_wait(port: u16, want: usize, stop: &AtomicBool) -> (u64, Vec<i64>) {
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    let mut batch = 0u64;
    let mut acked = 0u64;
    let mut counts = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let mut pipe = redis::pipe();
        for i in 0..50u64 {
            pipe.cmd("SETBIT").arg(format!("w:{}", batch % 40)).arg(batch * 50 + i).arg(1).ignore();
        }
        if pipe.query::<()>(&mut con).is_err() {
            break;
        }
        batch += 1;
        if batch % 10 == 0 {
            match redis::cmd("WAIT").arg(want).arg(10_000).query::<i64>(&mut con) {
                Ok(n) => {
                    counts.push(n);
                    if n >= want as i64 {
                        acked = batch;
                    }
                }
                Err(_) => break,
            }
        }
    }
    (acked, counts)
}

/// Whether every bit of the first `batches` batches is set on `con`.
fn holds_batches(con: &mut redis::Connection, batches: u64) -> bool {
    (0..batches).all(|b| {
        let key = format!("w:{}", b % 40);
        let ones: u64 = redis::cmd("BITCOUNT").arg(&key).arg(b * 50).arg(b * 50 + 49).arg("BIT").query(con).unwrap();
        ones == 50
    })
}

#[test]
fn replicas_follow_wait_and_take_over() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut master = Served::start(dirs[0].path(), &[]);
    let mut m = master.client();
    // Keys before any replica: they come with the full sync.
    for i in 0..500u64 {
        redis::cmd("SETBIT").arg(format!("pre:{}", i % 50)).arg(i * 997).arg(1).query::<i64>(&mut m).unwrap();
    }
    redis::cmd("SET").arg("s").arg("hello").query::<()>(&mut m).unwrap();
    let master_at = format!("127.0.0.1 {}", master.port);
    let r1 = Served::start(dirs[1].path(), &["--replicaof", &master_at]);
    let mut r2 = Served::start(dirs[2].path(), &[]);
    let mut c1 = r1.client();
    let mut c2 = r2.client();
    let reply: String = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(master.port).query(&mut c2).unwrap();
    assert_eq!(reply, "OK");
    for c in [&mut c1, &mut c2] {
        eventually("the link to come up", || info_field(c, "master_link_status").as_deref() == Some("up"));
        let got: Option<String> = redis::cmd("GET").arg("s").query(c).unwrap();
        assert_eq!(got.as_deref(), Some("hello"));
        let err = redis::cmd("SET").arg("x").arg("1").query::<()>(c).unwrap_err();
        assert_eq!(err.code(), Some("READONLY"), "{err}");
    }

    // A writer, with WAIT 2.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, port) = (Arc::clone(&stop), master.port);
        std::thread::spawn(move || write_and_wait(port, 2, &stop))
    };
    std::thread::sleep(Duration::from_secs(2));
    // A replica killed under load restarts and catches up.
    r2.signal("-KILL");
    let _ = r2.wait_exit(Duration::from_secs(10));
    drop(r2);
    let r2 = Served::start(dirs[2].path(), &["--replicaof", &master_at]);
    let mut c2 = r2.client();
    eventually("the restarted replica's link", || info_field(&mut c2, "master_link_status").as_deref() == Some("up"));
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let (acked, counts) = writer.join().unwrap();
    assert!(acked > 0 && counts.iter().filter(|&&n| n == 2).count() > 0, "WAIT counts {counts:?}");
    assert!(holds_batches(&mut c1, acked) && holds_batches(&mut c2, acked));

    // Once the writer stops, the replicas hold the master's keys.
    let n: i64 = redis::cmd("WAIT").arg(2).arg(10_000).query(&mut m).unwrap();
    assert_eq!(n, 2);
    let expected = dump_all(&mut m);
    assert!(expected.len() > 50);
    assert_eq!(dump_all(&mut c1), expected);
    assert_eq!(dump_all(&mut c2), expected);
    let role: redis::Value = redis::cmd("ROLE").query(&mut m).unwrap();
    let redis::Value::Array(role) = role else { panic!("{role:?}") };
    assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));
    assert!(matches!(&role[2], redis::Value::Array(r) if r.len() == 2), "{role:?}");

    // The master dies; replica 1 takes over with everything WAIT saw.
    master.signal("-KILL");
    let _ = master.wait_exit(Duration::from_secs(10));
    let reply: String = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut c1).unwrap();
    assert_eq!(reply, "OK");
    assert_eq!(dump_all(&mut c1), expected);
    redis::cmd("SETBIT").arg("after").arg(12_345).arg(1).query::<i64>(&mut c1).unwrap();
    // Replica 2 follows the new master.
    let reply: String = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(r1.port).query(&mut c2).unwrap();
    assert_eq!(reply, "OK");
    eventually("replica 2 to follow the new master", || {
        info_field(&mut c2, "master_link_status").as_deref() == Some("up")
            && redis::cmd("GETBIT").arg("after").arg(12_345).query::<i64>(&mut c2).unwrap_or(0) == 1
    });
    let mut now = expected.clone();
    now.push(("after".into(), redis::cmd("DUMP").arg("after").query(&mut c1).unwrap()));
    now.sort();
    assert_eq!(dump_all(&mut c2), now);
}
