//! node-redis v4 against `bitsled serve` (`tests/node/scan_iterator.js`):
//! `scanIterator` over 3,068 keys returns each exactly as against Redis
//! (node-redis turns cursors into JavaScript numbers, so they must stay
//! below 2^53), a client bound to database 3, and WATCH/MULTI/EXEC.
//!
//! Needs `node` and `npm`, and the `redis@4` package from the npm registry
//! (installed once under Cargo's target directory); if any is missing or
//! the install fails, the test prints a notice and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

#[allow(dead_code, reason = "only part of the helpers is used here")]
#[path = "../../../tests/common/redis_server.rs"]
mod redis_server;
#[path = "common/server.rs"]
mod server;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node/scan_iterator.js");

/// A directory with `node_modules/redis` (v4), installing it if needed.
fn node_redis() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("node-redis4");
    if dir.join("node_modules/redis/package.json").exists() {
        return Some(dir);
    }
    let have = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !have("node") || !have("npm") {
        eprintln!("NOTICE: node or npm not found; skipping the node-redis test");
        return None;
    }
    std::fs::create_dir_all(&dir).ok()?;
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg("redis@4")
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "NOTICE: npm install redis@4 failed; skipping the node-redis test:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(dir)
}

#[test]
fn node_redis_scan_iterator_databases_and_watch() {
    let Some(modules) = node_redis() else { return };
    let Some(redis) = redis_server::start() else { return };
    let run = |port: u16| {
        let out = Command::new("node")
            .arg(SCRIPT)
            .arg("127.0.0.1")
            .arg(port.to_string())
            .env("NODE_PATH", modules.join("node_modules"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "port {port}:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        stdout
    };
    let expected = ["ok scanIterator", "ok database 3", "ok watch"];
    assert_eq!(run(redis.port).lines().collect::<Vec<_>>(), expected, "the expectations hold on Redis");
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    assert_eq!(run(served.port).lines().collect::<Vec<_>>(), expected, "and on bitsled");
}
