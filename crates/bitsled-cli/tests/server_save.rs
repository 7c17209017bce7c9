//! SAVE and BGSAVE make every write so far durable, whatever the fsync
//! policy: under `--fsync no` (write-backs every 30 s), writes followed by
//! SAVE, or by a BGSAVE that has finished, are there after a SIGKILL and a
//! restart, while a write after the last save is not. LASTSAVE and INFO
//! persistence follow the saves.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "common/server.rs"]
mod server;

use server::Served;

fn int(con: &mut redis::Connection, args: &[&str]) -> i64 {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn status(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(redis::Value::SimpleString(s)) => s,
        Ok(redis::Value::Okay) => "OK".into(),
        other => panic!("{args:?}: {other:?}"),
    }
}

/// Sets bits 0..n of `key`, one SETBIT each.
fn set_bits(con: &mut redis::Connection, key: &str, n: u64) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("SETBIT").arg(key).arg(i).arg(1).ignore();
    }
    pipe.query::<()>(con).expect("SETBITs");
}

/// Kills the server with SIGKILL and starts it again on the same data.
fn kill_and_restart(served: Served) -> Served {
    let mut served = served;
    served.signal("-KILL");
    let _ = served.wait_exit(Duration::from_secs(10));
    let dir = served.dir.clone();
    drop(served);
    Served::start(&dir, &["--fsync", "no"])
}

#[test]
fn save_and_bgsave_survive_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), &["--fsync", "no"]);
    let mut con = served.client();
    let started = int(&mut con, &["LASTSAVE"]);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    assert!(started.unsigned_abs().abs_diff(now) < 60, "LASTSAVE starts at the server's start");

    set_bits(&mut con, "saved", 1000);
    assert_eq!(status(&mut con, &["SAVE"]), "OK");
    set_bits(&mut con, "unsaved", 10);
    let served = kill_and_restart(served);
    let mut con = served.client();
    assert_eq!(int(&mut con, &["BITCOUNT", "saved"]), 1000, "SAVE made the writes before it durable");
    assert_eq!(int(&mut con, &["EXISTS", "unsaved"]), 0, "a write after the last save is lost under --fsync no");

    set_bits(&mut con, "background", 500);
    let before = int(&mut con, &["LASTSAVE"]);
    assert_eq!(status(&mut con, &["BGSAVE"]), "Background saving started");
    // Wait for it: INFO persistence says when it is done.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut con).unwrap();
        if info.contains("rdb_bgsave_in_progress:0") {
            assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
            break;
        }
        assert!(Instant::now() < deadline, "BGSAVE did not finish: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(int(&mut con, &["LASTSAVE"]) >= before);
    let served = kill_and_restart(served);
    let mut con = served.client();
    assert_eq!(int(&mut con, &["BITCOUNT", "background"]), 500, "BGSAVE made the writes before it durable");
    assert_eq!(int(&mut con, &["BITCOUNT", "saved"]), 1000);
}
