//! RESP3 through the client libraries that speak it, against `bitsled
//! serve`: node-redis v5 (`RESP: 3`) and v6 (its default and `RESP: 3`)
//! running `tests/node/resp3_bloom.js`, and redis-py 5 in RESP2 and RESP3
//! running `tests/python/resp3_bloom.py` (and `tests/python/pubsub.py`,
//! compared with a real redis-server). Each prints what the client made
//! of the replies (RedisBloom's booleans and BF.INFO map, bitmap integers,
//! INFO, CLIENT INFO, CONFIG GET, MEMORY STATS); the lines must be the
//! client types RedisBloom and Redis give (Redis 7.0.15 has no Bloom
//! filters to run them against: the expected lines are RedisBloom's
//! documented replies as each client converts them).
//!
//! The packages come from the npm registry and PyPI, installed once under
//! Cargo's target directory; without node, npm, python3's venv or the
//! registries, the test prints a notice and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/node.rs"]
mod node;
#[path = "common/server.rs"]
mod server;

use node::node_modules;

/// A Python interpreter with redis-py 5 or 6 (a venv under Cargo's target
/// directory).
fn python_with_redis5() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("redis-py5");
    let python = venv.join("bin/python");
    let ready = || {
        Command::new(&python)
            .args(["-c", "import redis, sys; sys.exit(int(redis.__version__.split('.')[0]) < 5)"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ready() {
        return Some(python);
    }
    let made = Command::new("python3").args(["-m", "venv"]).arg(&venv).output().is_ok_and(|o| o.status.success());
    let installed = made
        && Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "redis>=5,<7"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !installed || !ready() {
        eprintln!(
            "NOTICE: no python3 venv with redis-py 5 (venv or PyPI unavailable); skipping the redis-py RESP3 test"
        );
        return None;
    }
    Some(python)
}

/// Runs `cmd`, asserting success; its output lines.
fn lines_of(cmd: &mut Command) -> Vec<String> {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{cmd:?}:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_string).collect()
}

/// The lines node-redis prints, in either protocol: it turns RedisBloom's
/// RESP2 integers into booleans itself, and RESP3 sends them.
const NODE_LINES: &[&str] = &[
    "bf.add true false",
    "bf.exists true false",
    "bf.mAdd [false,true]",
    "bf.mExists [true,false]",
    r#"bf.info {"Capacity":100,"Size":240,"Number of filters":1,"Number of items inserted":2,"Expansion rate":2}"#,
    "setBit 0 1 1",
    "info string true",
];

/// Invariant: node-redis v5 and v6 read every reply into the types they
/// give RedisBloom and Redis, in RESP3 and in v6's default protocol.
#[test]
fn node_redis_5_and_6_read_resp3_replies() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/resp3_bloom.js");
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    for (modules, spec, protocols) in
        [("node-redis5", "redis@5", &["3"][..]), ("node-redis6", "redis@6", &["", "3"][..])]
    {
        let Some(modules) = node_modules(modules, spec) else { continue };
        for resp in protocols {
            let mut cmd = Command::new("node");
            cmd.arg(&script).arg("127.0.0.1").arg(served.port.to_string());
            if !resp.is_empty() {
                cmd.arg(resp);
            }
            cmd.env("NODE_PATH", &modules);
            assert_eq!(lines_of(&mut cmd), NODE_LINES, "{spec}, RESP {resp:?}");
        }
    }
}

/// Invariant: redis-py 5 reads RedisBloom's replies as RedisBloom's: 1/0
/// and a `BFInfo` in RESP2, booleans and a map in RESP3; INFO, CLIENT
/// INFO, CONFIG GET and MEMORY STATS as dictionaries in both.
#[test]
fn redis_py_reads_resp2_and_resp3_replies() {
    let Some(python) = python_with_redis5() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/resp3_bloom.py");
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    let tail = [
        "setbit 0 1 1",
        "info dict True",
        "client info dict client|info",
        "config get {'maxmemory': '0'}",
        "memory stats dict 2",
    ];
    let resp2 = ["bf.add 1 0", "bf.exists 1 0", "bf.madd [0, 1]", "bf.mexists [1, 0]", "bf.info BFInfo 100 2"];
    let resp3 = [
        "bf.add True False",
        "bf.exists True False",
        "bf.madd [False, True]",
        "bf.mexists [True, False]",
        "bf.info ['Capacity', 'Expansion rate', 'Number of filters', 'Number of items inserted', 'Size'] 100 2",
    ];
    for (proto, head) in [("2", resp2), ("3", resp3)] {
        let got = lines_of(Command::new(&python).arg(&script).arg(served.port.to_string()).arg(proto));
        let want: Vec<&str> = head.iter().chain(&tail).copied().collect();
        assert_eq!(got, want, "RESP{proto}");
    }
}

/// Invariant: redis-py's pub/sub (get_message, patterns, a subscriber
/// thread) in RESP2 and RESP3, and a keyspace `expired` event, give the
/// same lines against bitsled as against a real redis-server.
#[test]
fn redis_py_pubsub_matches_redis() {
    let Some(python) = python_with_redis5() else { return };
    let Some(redis) = bitsled_testkit::redis_server::start() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/pubsub.py");
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    let run = |port: u16| lines_of(Command::new(&python).arg(&script).arg(port.to_string()));
    let on_redis = run(redis.port);
    assert_eq!(on_redis.len(), 11, "{on_redis:?}");
    assert_eq!(run(served.port), on_redis);
}
