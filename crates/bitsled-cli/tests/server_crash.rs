//! Under `--fsync always`, no write that `bitsled serve` acknowledged is
//! lost when the server is killed with SIGKILL under load: every client
//! records which of its writes got a reply, and after a restart each of
//! them is there. Under `--fsync everysec` the same run measures how many
//! acknowledged writes a kill loses (printed, not asserted: the policy
//! allows about a second of them).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[path = "common/server.rs"]
mod server;

use server::Served;

/// Clients writing at once.
const CLIENTS: u64 = 6;

/// One cycle: start the server on `dir`, let `CLIENTS` clients write for
/// `run_for` (client `t` sets offsets 0, 1, 2, ... of key `{cycle}:{t}` in
/// pipelined batches of 1 to 16), kill -9 the server, restart it, and count
/// the acknowledged offsets that are missing. Returns (acknowledged, lost).
fn load_and_kill(dir: &std::path::Path, fsync: &str, cycle: u64, run_for: Duration) -> (u64, u64) {
    let mut served = Served::start(dir, &["--fsync", fsync]);
    let port = served.port;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let key = format!("{cycle}:{t}");
                let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .expect("client")
                    .get_connection()
                    .expect("connect");
                // Offsets below `acked` were all acknowledged, in order.
                let mut acked = 0u64;
                let mut batch = 1 + t % 16;
                while !stop.load(Ordering::Relaxed) {
                    let mut pipe = redis::pipe();
                    for i in acked..acked + batch {
                        pipe.cmd("SETBIT").arg(&key).arg(i).arg(1);
                    }
                    match pipe.query::<Vec<i64>>(&mut con) {
                        Ok(r) if r.len() as u64 == batch => acked += batch,
                        _ => break,
                    }
                    batch = batch % 16 + 1;
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(run_for);
    served.signal("-KILL");
    let _ = served.wait_exit(Duration::from_secs(10));
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<u64> = clients.into_iter().map(|c| c.join().expect("client")).collect();
    drop(served);

    let restarted = Served::start(dir, &[]);
    let mut con = restarted.client();
    let mut lost = 0;
    for (t, &n) in acked.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let have: u64 = redis::cmd("BITCOUNT")
            .arg(format!("{cycle}:{t}"))
            .arg(0)
            .arg(n - 1)
            .arg("BIT")
            .query(&mut con)
            .expect("bitcount");
        lost += n - have.min(n);
    }
    (acked.iter().sum(), lost)
}

#[test]
fn fsync_always_loses_no_acknowledged_write_on_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut total = 0;
    for cycle in 0..3 {
        let (acked, lost) = load_and_kill(dir.path(), "always", cycle, Duration::from_millis(1200));
        println!("fsync always, cycle {cycle}: {acked} writes acknowledged, {lost} lost");
        assert_eq!(lost, 0, "cycle {cycle}: {lost} of {acked} acknowledged writes lost");
        total += acked;
    }
    assert!(total > 0, "no write was acknowledged: the test checked nothing");
}

#[test]
fn fsync_everysec_loss_window_is_measured() {
    let dir = tempfile::tempdir().expect("tempdir");
    for cycle in 0..2 {
        let (acked, lost) = load_and_kill(dir.path(), "everysec", cycle, Duration::from_millis(2500));
        println!("fsync everysec, cycle {cycle}: {acked} writes acknowledged, {lost} lost on kill -9");
        assert!(acked > 0, "no write was acknowledged");
    }
}

/// Invariant: under `--fsync always`, once FLUSHALL (or FLUSHDB) has
/// replied, a kill -9 brings none of the flushed keys back, whether the
/// kill comes at once or after the background reclamation started; keys
/// written after the flush and acknowledged survive, and FLUSHDB leaves
/// the other databases alone.
#[test]
fn flushed_keys_never_come_back_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    for (cycle, pause_ms) in [0u64, 5, 300].into_iter().enumerate() {
        let mut served = Served::start(dir.path(), &["--fsync", "always"]);
        let mut con = served.client();
        let mut p = redis::pipe();
        p.cmd("SET").arg("keep0").arg(1).ignore().cmd("SELECT").arg(3).ignore();
        for i in 0..20_000 {
            p.cmd("SETBIT").arg(format!("k{cycle}:{i}")).arg(i % 4000).arg(1).ignore();
        }
        p.query::<()>(&mut con).unwrap();
        let flush = if cycle == 1 { "FLUSHDB" } else { "FLUSHALL" };
        redis::cmd(flush).query::<()>(&mut con).unwrap();
        redis::cmd("SET").arg("after").arg(cycle).query::<()>(&mut con).unwrap();
        std::thread::sleep(Duration::from_millis(pause_ms));
        served.signal("-KILL");
        served.wait_exit(Duration::from_secs(10));
        let served = Served::start(dir.path(), &[]);
        let mut con = served.client();
        redis::cmd("SELECT").arg(3).query::<()>(&mut con).unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
        assert_eq!(keys, vec!["after".to_string()], "cycle {cycle} ({flush}): only the key written after it");
        redis::cmd("SELECT").arg(0).query::<()>(&mut con).unwrap();
        let kept: bool = redis::cmd("EXISTS").arg("keep0").query(&mut con).unwrap();
        assert_eq!(kept, flush == "FLUSHDB", "cycle {cycle}: {flush} and database 0");
        redis::cmd("FLUSHALL").query::<()>(&mut con).unwrap();
    }
}
