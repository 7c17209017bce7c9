//! A disk that fills up under the server, on a real size-limited
//! filesystem (a tmpfs this test mounts; skipped with a notice where it
//! cannot mount one, e.g. without root).
//!
//! Invariants: writes are refused with `-MISCONF` once the disk has less
//! free space than the reserve and the next write-back need; every write
//! acknowledged before is still read back, INFO persistence says so; once
//! space is freed, writes are accepted again without a restart; after a
//! graceful stop and a restart, every acknowledged write is there; a
//! write queued in MULTI is refused when queued and EXEC aborts. Under
//! `appendfsync always` the space is checked before each write, so a write
//! that could not be made durable is refused with `-MISCONF` before it
//! runs and the connection stays open; a graceful stop while short of
//! space, with accepted writes not yet written, waits for room and then
//! flushes them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "common/server.rs"]
mod server;

use server::Served;

/// A tmpfs mounted for the test, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(mib: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Fills the filesystem at `dir` with a file leaving about `leave` bytes
/// free; returns the file.
fn fill(dir: &Path, leave: u64) -> PathBuf {
    let path = dir.join("filler");
    let free = fs2::available_space(dir).expect("free space");
    let size = free.saturating_sub(leave);
    let chunk = vec![0x5au8; 1 << 20];
    let mut f = std::fs::File::create(&path).expect("filler");
    let mut written = 0;
    while written < size {
        let n = chunk.len().min(usize::try_from(size - written).unwrap());
        std::io::Write::write_all(&mut f, &chunk[..n]).expect("write the filler");
        written += n as u64;
    }
    f.sync_all().expect("sync the filler");
    path
}

fn value(i: u64) -> Vec<u8> {
    (0..65_536u64).map(|j| (j.wrapping_mul(0x9e37_79b9).wrapping_add(i * 7919) >> 11) as u8).collect()
}

fn info(con: &mut redis::Connection) -> String {
    redis::cmd("INFO").arg("persistence").query(con).expect("INFO")
}

/// SETs 64 KiB values under `prefix` until one is refused; returns the
/// numbers acknowledged and the refusal's text.
fn write_until_refused(con: &mut redis::Connection, prefix: &str) -> (Vec<u64>, String) {
    let mut acked = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0.. {
        assert!(Instant::now() < deadline, "no write was refused; {}", info(con));
        match redis::cmd("SET").arg(format!("{prefix}{i}")).arg(value(i)).query::<()>(con) {
            Ok(()) => acked.push(i),
            Err(e) => return (acked, format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    unreachable!()
}

fn check_all(con: &mut redis::Connection, prefix: &str, acked: &[u64]) {
    for &i in acked {
        let got: Option<Vec<u8>> = redis::cmd("GET").arg(format!("{prefix}{i}")).query(con).expect("GET");
        assert_eq!(got, Some(value(i)), "acknowledged key {prefix}{i}");
    }
}

#[test]
fn a_full_disk_refuses_writes_keeps_reads_and_recovers() {
    // Room for the store to grow past what the test fills: sled's log
    // grows by about three times a write-back's bytes (engine/space.rs),
    // and the guard counts that before it lets one run.
    let Some(fs) = Tmpfs::mount(128) else {
        eprintln!("skipping server_disk_full: cannot mount a tmpfs here (needs root)");
        return;
    };
    let db = fs.path().join("db");
    let mut served = Served::start(&db, &["--disk-reserve", "4mb", "--maxmemory", "64mb"]);
    let mut con = served.client();
    for i in 0..8 {
        let () = redis::cmd("SET").arg(format!("before{i}")).arg(value(i)).query(&mut con).unwrap();
    }
    let () = redis::cmd("SAVE").query(&mut con).unwrap();

    // everysec: the background flush finds the shortage within a second.
    let filler = fill(fs.path(), 6 << 20);
    let (acked, refusal) = write_until_refused(&mut con, "during");
    assert!(refusal.starts_with("MISCONF Errors writing to the store: not enough free disk space"), "{refusal}");
    let text = info(&mut con);
    assert!(text.contains("disk_short_of_space:1") && text.contains("aof_last_write_status:err"), "{text}");
    check_all(&mut con, "before", &(0..8).collect::<Vec<_>>());
    check_all(&mut con, "during", &acked);
    // A write queued in MULTI is refused when queued, and EXEC aborts.
    let () = redis::cmd("MULTI").query(&mut con).unwrap();
    let queued = redis::cmd("SET").arg("in-multi").arg("1").query::<()>(&mut con).unwrap_err();
    assert_eq!(queued.code(), Some("MISCONF"), "{queued}");
    let exec = redis::cmd("EXEC").query::<()>(&mut con).unwrap_err();
    assert_eq!(exec.code(), Some("EXECABORT"), "{exec}");
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG", "reads and PING are served");

    // Freed space lifts the refusal at the next write.
    std::fs::remove_file(&filler).unwrap();
    let () = redis::cmd("SET").arg("after").arg(value(99)).query(&mut con).expect("a write after space was freed");
    let () = redis::cmd("SAVE").query(&mut con).unwrap();
    let text = info(&mut con);
    assert!(text.contains("disk_short_of_space:0") && text.contains("aof_last_write_status:ok"), "{text}");

    // always: the write that cannot be made durable gets the error, and
    // the connection stays usable.
    let () = redis::cmd("CONFIG").arg("SET").arg("appendfsync").arg("always").query(&mut con).unwrap();
    // Room for some writes: each needs the reserve, half the reserve
    // again, and its own flush.
    let filler = fill(fs.path(), 8 << 20);
    let (acked_always, refusal) = write_until_refused(&mut con, "always");
    assert!(!acked_always.is_empty(), "writes were acknowledged before the refusal");
    assert!(refusal.starts_with("MISCONF "), "{refusal}");
    let pong: String = redis::cmd("PING").query(&mut con).expect("the connection is still open");
    assert_eq!(pong, "PONG");
    std::fs::remove_file(&filler).unwrap();
    let () = redis::cmd("SET").arg("after-always").arg(value(98)).query(&mut con).unwrap();

    // A graceful stop while short of space, with accepted writes not yet
    // written (everysec), waits for room rather than drop them, and
    // finishes once there is.
    let () = redis::cmd("CONFIG").arg("SET").arg("appendfsync").arg("everysec").query(&mut con).unwrap();
    let filler = fill(fs.path(), 6 << 20);
    let (acked_late, refusal) = write_until_refused(&mut con, "late");
    assert!(refusal.starts_with("MISCONF "), "{refusal}");
    drop(con);
    served.signal("-TERM");
    std::thread::sleep(Duration::from_secs(2));
    assert!(served.child.try_wait().unwrap().is_none(), "the server waits for space to flush");
    std::fs::remove_file(&filler).unwrap();
    assert!(served.wait_exit(Duration::from_secs(30)).success());
    drop(served);
    let served = Served::start(&db, &[]);
    let mut con = served.client();
    check_all(&mut con, "before", &(0..8).collect::<Vec<_>>());
    check_all(&mut con, "during", &acked);
    check_all(&mut con, "always", &acked_always);
    check_all(&mut con, "late", &acked_late);
    for (key, v) in [("after", 99), ("after-always", 98)] {
        let got: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(&mut con).unwrap();
        assert_eq!(got, Some(value(v)), "{key}");
    }
    drop(con);
    drop(served);
}
