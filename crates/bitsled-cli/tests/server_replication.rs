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
fn eventually(what: &str, f: impl FnMut() -> bool) {
    eventually_within(Duration::from_secs(30), what, f);
}

/// Waits up to `limit` for `f` to hold.
fn eventually_within(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
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

/// A new connection to the server on `port`.
fn m_con(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap()
}

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `redis-server` in Sentinel mode on `port`, monitoring `mymaster` at
/// `master` (quorum 2, down after 1 s); killed on drop.
struct Sentinel(std::process::Child, u16);

impl Sentinel {
    fn start(dir: &std::path::Path, port: u16, master: u16) -> Sentinel {
        let conf = dir.join(format!("sentinel-{port}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n",
                dir.display()
            ),
        )
        .unwrap();
        let child = std::process::Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Sentinel(child, port)
    }

    /// A connection, once the sentinel listens.
    fn client(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.1)).unwrap();
        let mut con = None;
        eventually("the sentinel to listen", || {
            con = client.get_connection().ok();
            con.is_some()
        });
        con.unwrap()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `redis-server` (for Sentinel) and a Python with redis-py are
/// here; under `BITSLED_REQUIRE_REDIS=1` they must be.
fn sentinel_tools() -> Option<&'static str> {
    let redis = std::process::Command::new("redis-server").arg("--version").output().is_ok_and(|o| o.status.success());
    let python = ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        std::process::Command::new(py).args(["-c", "import redis.sentinel"]).output().is_ok_and(|o| o.status.success())
    });
    if redis && python.is_some() {
        return python;
    }
    assert!(
        std::env::var("BITSLED_REQUIRE_REDIS").as_deref() != Ok("1"),
        "BITSLED_REQUIRE_REDIS=1 but redis-server or python3 with redis is missing"
    );
    eprintln!("NOTICE: redis-server or python3 with redis not found; skipping the Sentinel test");
    None
}

/// The address Sentinel gives for `mymaster`.
fn sentinel_master(s: &mut redis::Connection) -> Option<u16> {
    let addr: Vec<String> = redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg("mymaster").query(s).ok()?;
    addr.get(1)?.parse().ok()
}

/// Invariant: three unchanged Redis Sentinels (`redis-server --sentinel`,
/// down after 1 s) watching a bitsled master with two bitsled replicas
/// promote a replica when the master is killed with SIGKILL; redis-py's
/// Sentinel client, writing throughout, follows to the new master; every
/// write `WAIT 2` acknowledged before the kill, and every write the new
/// master took, is on the new master; the other replica follows it; the
/// old master, restarted as a master, is turned into its replica.
#[test]
fn sentinel_fails_over_to_a_replica() {
    let Some(python) = sentinel_tools() else { return };
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut master = Served::start(dirs[0].path(), &[]);
    let old_port = master.port;
    let master_at = format!("127.0.0.1 {old_port}");
    let replicas: Vec<Served> = (1..3).map(|i| Served::start(dirs[i].path(), &["--replicaof", &master_at])).collect();
    let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(dirs[3].path(), free_port(), old_port)).collect();
    let mut s = sentinels[0].client();
    eventually("the sentinels to see both replicas and each other", || {
        let info: Vec<String> = redis::cmd("SENTINEL").arg("master").arg("mymaster").query(&mut s).unwrap_or_default();
        let field = |name: &str| info.iter().position(|f| f == name).and_then(|i| info.get(i + 1)).cloned();
        field("num-slaves").as_deref() == Some("2") && field("num-other-sentinels").as_deref() == Some("2")
    });

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/sentinel_writer.py");
    let ports: Vec<String> = sentinels.iter().map(|s| s.1.to_string()).collect();
    let writer = std::process::Command::new(python)
        .arg(script)
        .arg("16")
        .args(&ports)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until both replicas have acknowledged some of the writes.
    eventually("a write acknowledged by both replicas", || {
        info_field(&mut m_con(old_port), "slave1").is_some_and(|l| !l.contains("offset=0,"))
            && redis::cmd("BITCOUNT").arg("sentinel:bits").query::<u64>(&mut m_con(old_port)).unwrap_or(0) > 100
    });
    std::thread::sleep(Duration::from_secs(1));
    master.signal("-KILL");
    let _ = master.wait_exit(Duration::from_secs(10));
    let killed = Instant::now();
    let mut failover = None;
    eventually("Sentinel to promote a replica", || {
        let promoted = sentinel_master(&mut s).is_some_and(|p| p != old_port);
        if promoted && failover.is_none() {
            failover = Some(killed.elapsed());
        }
        promoted
    });
    println!("failover: the sentinels named a new master {:?} after the kill", failover.unwrap());
    let out = writer.wait_with_output().unwrap();
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{line}{}", String::from_utf8_lossy(&out.stderr));
    let words: Vec<&str> = line.split_whitespace().collect();
    let (written, replicated, switched): (u64, u64, u64) =
        (words[1].parse().unwrap(), words[3].parse().unwrap(), words[5].parse().unwrap());
    let new_port = sentinel_master(&mut s).unwrap();
    assert_eq!(words[7].split(',').next_back(), Some(new_port.to_string().as_str()), "{line}");
    assert!(replicated > 0, "no write was acknowledged by WAIT 2 before the kill: {line}");
    assert!(switched >= replicated, "{line}");
    assert!(written > switched, "nothing was written to the new master: {line}");

    let new = replicas.iter().find(|r| r.port == new_port).expect("a replica was promoted");
    let mut c = new.client();
    let role: redis::Value = redis::cmd("ROLE").query(&mut c).unwrap();
    assert!(matches!(&role, redis::Value::Array(r) if r[0] == redis::Value::BulkString(b"master".to_vec())));
    let count = |c: &mut redis::Connection, from: u64, to: u64| -> u64 {
        redis::cmd("BITCOUNT").arg("sentinel:bits").arg(from).arg(to - 1).arg("BIT").query(c).unwrap()
    };
    assert_eq!(count(&mut c, 0, replicated), replicated, "{line}");
    assert_eq!(count(&mut c, switched, written), written - switched, "{line}");
    let other = replicas.iter().find(|r| r.port != new_port).unwrap();
    let mut o = other.client();
    eventually("the other replica to follow the new master", || {
        info_field(&mut o, "master_port").as_deref() == Some(new_port.to_string().as_str())
            && info_field(&mut o, "master_link_status").as_deref() == Some("up")
    });

    // The old master comes back as a master; Sentinel makes it a replica.
    let back = Served::start(dirs[0].path(), &["--port", &old_port.to_string()]);
    // Sentinel reconfigures an instance it finds reporting the wrong role
    // after 8 s, and refreshes a down instance's INFO every 10 s.
    let rejoin = Instant::now();
    // Sentinel ends the clients of an instance it reconfigures (CLIENT
    // KILL TYPE normal): each look takes a new connection.
    let look = |field: &str| info_field(&mut back.client(), field);
    eventually_within(Duration::from_secs(60), "the old master to become a replica of the new one", || {
        look("role").as_deref() == Some("slave")
            && look("master_port").as_deref() == Some(new_port.to_string().as_str())
            && look("master_link_status").as_deref() == Some("up")
    });
    println!("the old master rejoined as a replica {:?} after its restart", rejoin.elapsed());
    eventually("the old master to hold the new master's writes", || {
        redis::cmd("BITCOUNT").arg("sentinel:bits").query::<u64>(&mut back.client()).unwrap_or(0)
            == redis::cmd("BITCOUNT").arg("sentinel:bits").query::<u64>(&mut c).unwrap()
    });
}
