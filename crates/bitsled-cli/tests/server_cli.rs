//! Every redis-cli script in `tests/scripts/` prints the same bytes through
//! `redis-cli --no-raw` against `bitsled serve` as through `bitsled --db
//! DIR` reading the script directly: the server adds nothing to and loses
//! nothing from the command layer's replies.
//!
//! Needs `redis-cli`; without it the test prints a notice and passes,
//! unless `BITSLED_REQUIRE_REDIS=1` is set.

use std::process::Command;

#[allow(dead_code, reason = "only tools_present is used here")]
use bitsled_testkit::redis_server;
#[path = "common/server.rs"]
mod server;

/// Connection and server commands whose replies the CLI gives as well,
/// plus every reply kind, escapes and a pipeline-sized array.
const SCRIPT: &str = r#"PING
ECHO "a\x00b\r\n"
SETBIT k 7 1
SETBIT k 4294967296 1
GET k
MGET k missing k
BITCOUNT k 0 -1 bit
SET bin "\x00\xff\n"
GET bin
nosuchcommand x
GET
DEL k bin
EXISTS k
"#;

/// The script's output through the server equals the CLI's, line by line.
fn compare(name: &str, script: &str) {
    let served_dir = tempfile::tempdir().expect("tempdir");
    let served = server::Served::start(served_dir.path(), &[]);
    let mut cli = Command::new("redis-cli");
    cli.args(["-p", &served.port.to_string(), "--no-raw"]);
    let through_server = redis_server::pipe(cli, script);

    let direct_dir = tempfile::tempdir().expect("tempdir");
    let mut direct = Command::new(env!("CARGO_BIN_EXE_bitsled"));
    direct.arg("--db").arg(direct_dir.path());
    let want = redis_server::pipe(direct, script);

    let (got, want) = (String::from_utf8_lossy(&through_server), String::from_utf8_lossy(&want));
    assert!(!want.is_empty(), "{name}: no output");
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        assert_eq!(g, w, "{name}: line {} differs (server vs direct)\nserver output:\n{got}", i + 1);
    }
    assert_eq!(
        got.lines().count(),
        want.lines().count(),
        "{name}: line counts differ\nserver:\n{got}\ndirect:\n{want}"
    );
}

#[test]
fn scripts_match_through_the_server() {
    if !redis_server::tools_present(&["redis-cli"]) {
        return;
    }
    let mut scripts: Vec<_> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts"))
        .expect("tests/scripts")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "redis"))
        .collect();
    scripts.sort();
    assert!(!scripts.is_empty(), "no scripts in tests/scripts");
    for path in &scripts {
        let script = std::fs::read_to_string(path).expect("read script");
        compare(&path.display().to_string(), &script);
    }
    compare("inline script", SCRIPT);
}
