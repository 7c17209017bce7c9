//! CLIENT KILL through `bitsled serve`, side by side with a private Redis:
//! the same replies and errors for each form and filter, and the same
//! clients cut off (a killed connection's next command fails; the caller
//! killing itself gets its reply first).
//!
//! Needs `redis-server` on the PATH: without it the test prints a notice and
//! passes, unless `BITSLED_REQUIRE_REDIS=1`.

use redis::Value;

#[allow(dead_code, reason = "only part of the helpers is used here")]
use bitsled_testkit::redis_server;
#[path = "common/server.rs"]
mod server;

fn run(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con)
}

/// A reply as text, errors included; a closed connection is "closed".
fn show(r: redis::RedisResult<Value>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() => "closed".into(),
        Err(e) => format!("error {} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// A connection, its client id and its address as the server sees it.
fn connect(port: u16) -> (redis::Connection, i64, String) {
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
    let Ok(Value::Int(id)) = run(&mut con, &["CLIENT", "ID"]) else { panic!("CLIENT ID") };
    let Ok(Value::BulkString(info)) = run(&mut con, &["CLIENT", "INFO"]) else { panic!("CLIENT INFO") };
    let info = String::from_utf8(info).unwrap();
    let addr = info.split(' ').find_map(|f| f.strip_prefix("addr=")).unwrap().to_string();
    (con, id, addr)
}

/// Everything the test does on one server, as text to compare.
fn session(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let (mut me, my_id, my_addr) = connect(port);
    let mut note = |what: &str, r: redis::RedisResult<Value>| out.push(format!("{what}: {}", show(r)));
    for bad in [
        &["CLIENT", "KILL"][..],
        &["CLIENT", "KILL", "1.2.3.4:5"],
        &["CLIENT", "KILL", "ID", "0"],
        &["CLIENT", "KILL", "ID", "x"],
        &["CLIENT", "KILL", "TYPE", "foo"],
        &["CLIENT", "KILL", "TYPE", "master", "ID", "0"],
        &["CLIENT", "KILL", "USER", "bob"],
        &["CLIENT", "KILL", "ID", "99999", "SKIPME", "maybe"],
        &["CLIENT", "KILL", "ID", "99999", "NOPE", "1"],
        &["CLIENT", "KILL", "ID", "99999", "TYPE"],
        &["CLIENT", "KILL", "TYPE", "pubsub"],
        &["CLIENT", "KILL", "USER", "default", "ID", "99999"],
    ] {
        note(&bad.join(" "), run(&mut me, bad));
    }
    // The caller is skipped unless SKIPME no.
    note("kill own id", run(&mut me, &["CLIENT", "KILL", "ID", &my_id.to_string()]));
    // By id; the victim's next command finds its connection closed.
    let (mut a, a_id, _) = connect(port);
    note("kill by id", run(&mut me, &["CLIENT", "KILL", "ID", &a_id.to_string()]));
    note("victim by id", run(&mut a, &["PING"]));
    // The old form, by address.
    let (mut b, _, b_addr) = connect(port);
    note("kill by address (old form)", run(&mut me, &["CLIENT", "KILL", &b_addr]));
    note("victim by address", run(&mut b, &["PING"]));
    note("the same address again", run(&mut me, &["CLIENT", "KILL", &b_addr]));
    // Filters together: TYPE normal and USER default match every client,
    // the caller skipped.
    let (mut c, _, c_addr) = connect(port);
    let (mut d, _, _) = connect(port);
    note("kill by addr and type", run(&mut me, &["CLIENT", "KILL", "ADDR", &c_addr, "TYPE", "normal"]));
    note("victim c", run(&mut c, &["PING"]));
    note("kill every normal client", run(&mut me, &["CLIENT", "KILL", "TYPE", "normal", "USER", "default"]));
    note("victim d", run(&mut d, &["PING"]));
    note("the caller lives", run(&mut me, &["PING"]));
    // The caller itself, old form: OK first, then the connection closes.
    note("kill self (old form)", run(&mut me, &["CLIENT", "KILL", &my_addr]));
    note("after killing self", run(&mut me, &["PING"]));
    out
}

#[test]
fn client_kill_like_redis() {
    let Some(redis) = redis_server::start() else { return };
    let want = session(redis.port);
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    let got = session(served.port);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "bitsled (left) and Redis (right)");
    }
    assert_eq!(got.len(), want.len());
    // The expectations themselves, on Redis.
    for line in [
        "kill by id: int(1)",
        "victim by id: closed",
        "after killing self: closed",
        "the caller lives: simple-string(\"PONG\")",
    ] {
        assert!(want.iter().any(|l| l == line), "{line:?} in {want:#?}");
    }
}
