//! The seed users' scenarios through Python's `redis` client
//! (`tests/python/seed_scenarios.py`): login status, monthly sign-in,
//! 7-day check-in, DAU/MAU/retention, new users (BITOP DIFF), user tags,
//! unique visitors (PF*), dedup (BF.*) and housekeeping (EXPIRE/TTL/PERSIST)
//! all give the answers the script computes itself, against `bitsled
//! serve`. The same script (without the commands Redis 7 lacks) first runs
//! against a real `redis-server`, which checks the script's expectations.
//!
//! Needs `python3` with the `redis` package (Debian: `python3-redis`) and
//! `redis-server`; without them the test prints a notice and passes, unless
//! `BITSLED_REQUIRE_REDIS=1` is set.

use std::process::Command;

#[allow(dead_code, reason = "only part of the helpers is used here")]
use bitsled_testkit::redis_server;
#[path = "common/python.rs"]
mod python;
#[path = "common/server.rs"]
mod server;

use python::python_with_redis;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/seed_scenarios.py");

/// Runs the script against `port`; returns its stdout, failing the test
/// (with the script's output) if it fails.
fn run_script(python: &str, port: u16, extra: &[&str]) -> String {
    let out = Command::new(python).arg(SCRIPT).arg("127.0.0.1").arg(port.to_string()).args(extra).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "seed scenarios failed on port {port} {extra:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn python_client_runs_every_seed_scenario() {
    let Some(python) = python_with_redis() else { return };
    let Some(redis) = redis_server::start() else { return };
    let on_redis = run_script(python, redis.port, &["--redis7"]);
    assert_eq!(on_redis.lines().count(), 7, "{on_redis}");

    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    let on_bitsled = run_script(python, served.port, &[]);
    let expected = [
        "ok login status",
        "ok monthly sign-in",
        "ok 7-day check-in",
        "ok DAU/MAU/retention",
        "ok new users",
        "ok user tags",
        "ok unique visitors",
        "ok dedup",
        "ok housekeeping",
    ];
    assert_eq!(on_bitsled.lines().collect::<Vec<_>>(), expected, "every scenario passes on bitsled");
}

const APP_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/app_client.py");

/// An application's use of redis-py beyond bitmaps
/// (`tests/python/app_client.py`): optimistic transactions with WATCH
/// (`transaction()` retries after a conflicting write), SCAN over 10^4 keys
/// while another client writes (every key returned, cursors below 2^53),
/// databases (db=3, FLUSHDB, MOVE, SWAPDB, COPY DB), the counter and string
/// commands, and INFO/OBJECT/MEMORY/DUMP/RESTORE. The script runs against
/// a real Redis first, then against `bitsled serve`.
#[test]
fn python_client_runs_application_scenarios() {
    let Some(python) = python_with_redis() else { return };
    let Some(redis) = redis_server::start() else { return };
    let run = |port: u16| {
        let out = Command::new(python).arg(APP_SCRIPT).arg("127.0.0.1").arg(port.to_string()).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "port {port}:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        stdout
    };
    let expected = [
        "ok optimistic transactions",
        "ok scan while writing",
        "ok databases",
        "ok counters and strings",
        "ok introspection",
    ];
    assert_eq!(run(redis.port).lines().collect::<Vec<_>>(), expected, "the expectations hold on Redis");
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    assert_eq!(run(served.port).lines().collect::<Vec<_>>(), expected, "and on bitsled");
}
