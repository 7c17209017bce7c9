//! Node.js clients against `bitsled serve`, each script run against Redis
//! first (the expectations hold there) and then against bitsled:
//!
//! - node-redis v4 (`tests/node/scan_iterator.js`): `scanIterator` over
//!   3,068 keys returns each exactly as against Redis (node-redis turns
//!   cursors into JavaScript numbers, so they must stay below 2^53), a
//!   client bound to database 3, and WATCH/MULTI/EXEC.
//! - ioredis v5 (`tests/node/ioredis_app.js`): a sign-in statistics
//!   application (pipelined SETBITs, BITOP AND/OR/XOR with BITCOUNT and
//!   BITPOS against a model, `getBuffer` bytes, HyperLogLog counts,
//!   `scanStream`, string commands, error texts, `keyPrefix`, WATCH with a
//!   second client, `db` and `connectionName` on connect); every line it
//!   prints is the same on both servers.
//!
//! Needs `node` and `npm`, and the packages from the npm registry
//! (installed once under Cargo's target directory); if any is missing or
//! an install fails, the test prints a notice and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

#[allow(dead_code, reason = "only part of the helpers is used here")]
use bitsled_testkit::redis_server;
#[path = "common/node.rs"]
mod node;
#[path = "common/server.rs"]
mod server;

use node::node_modules;

/// A script under `tests/node`.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node").join(name)
}

/// Runs `script` with the modules in `modules` against the server on
/// `port`; asserts it succeeds and returns its output.
fn run(script: &Path, modules: &Path, port: u16) -> String {
    let out = Command::new("node")
        .arg(script)
        .arg("127.0.0.1")
        .arg(port.to_string())
        .env("NODE_PATH", modules)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "port {port}:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn node_redis_scan_iterator_databases_and_watch() {
    let Some(modules) = node_modules("node-redis4", "redis@4") else { return };
    let Some(redis) = redis_server::start() else { return };
    let script = script("scan_iterator.js");
    let expected = ["ok scanIterator", "ok database 3", "ok watch"];
    assert_eq!(
        run(&script, &modules, redis.port).lines().collect::<Vec<_>>(),
        expected,
        "the expectations hold on Redis"
    );
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    assert_eq!(run(&script, &modules, served.port).lines().collect::<Vec<_>>(), expected, "and on bitsled");
}

#[test]
fn ioredis_sign_in_application() {
    let Some(modules) = node_modules("ioredis5", "ioredis@5") else { return };
    let Some(redis) = redis_server::start() else { return };
    let script = script("ioredis_app.js");
    let want = run(&script, &modules, redis.port);
    assert!(want.ends_with("ok done\n"), "the application runs to its end on Redis:\n{want}");
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    let got = run(&script, &modules, served.port);
    assert_eq!(got.lines().collect::<Vec<_>>(), want.lines().collect::<Vec<_>>(), "bitsled prints what Redis does");
}
