//! `bitsled compact`: the command-line wrapper around `Db::compact_into`
//! swaps the compacted copy in place of the database and cleans up after
//! itself.

use std::time::{SystemTime, UNIX_EPOCH};

use bitsled::{Config, Db, ExpireCondition, Expiry};

const PAGE: usize = 4096;

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

/// `bitsled compact`: swaps the compacted copy in place and cleans up; it
/// refuses to run over a leftover `DIR.compact-tmp`.
#[test]
fn cli_compact_swaps_directories() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_bitsled");
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("data");
    {
        let db = open(&db_dir);
        for i in 0..40u32 {
            db.set(format!("k{i}").as_bytes(), &vec![0xa5; 3 * PAGE]).unwrap();
        }
        db.flush().unwrap();
        for i in 0..30u32 {
            db.delete(format!("k{i}").as_bytes()).unwrap();
        }
        assert!(db.expire_at(b"k35", now_ms() + 3_600_000, ExpireCondition::Always).unwrap());
    }
    // A trailing slash names the same directory.
    let out = Command::new(bin).arg("--db").arg(format!("{}/", db_dir.display())).arg("compact").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("compacted 10 keys, 30 pages"), "{stdout}");
    assert!(stdout.contains("bytes before"), "{stdout}");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["data"]);
    {
        let db = open(&db_dir);
        assert_eq!(db.keys(b"*").unwrap().len(), 10);
        assert_eq!(db.get(b"k31").unwrap(), Some(vec![0xa5; 3 * PAGE]));
        assert!(matches!(db.expiry(b"k35").unwrap(), Expiry::At(_)));
        assert!(db.verify().unwrap().is_ok());
    }

    std::fs::create_dir(dir.path().join("data.compact-tmp")).unwrap();
    let out = Command::new(bin).arg("--db").arg(&db_dir).arg("compact").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("data.compact-tmp exists"));
    assert_eq!(open(&db_dir).keys(b"*").unwrap().len(), 10, "left alone");

    let out = Command::new(bin).arg("--db").arg(dir.path().join("missing")).arg("compact").output().unwrap();
    assert!(!out.status.success());
    assert!(!dir.path().join("missing").exists());
}
