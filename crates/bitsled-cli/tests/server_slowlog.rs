//! SLOWLOG, ROLE and `CONFIG SET` of the slow log's two settings through
//! `bitsled serve`, side by side with a private Redis: every reply is the
//! same, and so are the slow log's entries (their ids, times, durations
//! and client ports differ by nature, so those are checked for shape and
//! order, and the rest compared).
//!
//! Needs `redis-server` on the PATH: without it the test prints a notice and
//! passes, unless `BITSLED_REQUIRE_REDIS=1`.

use std::time::{SystemTime, UNIX_EPOCH};

use redis::Value;

#[allow(dead_code, reason = "only part of the helpers is used here")]
use bitsled_testkit::redis_server;
#[path = "common/server.rs"]
mod server;

/// A reply as text, errors included, for comparing the two servers.
fn show(r: redis::RedisResult<Value>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error {} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

fn run(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con)
}

/// The slow log's entries with what differs by nature checked and
/// dropped: ids count down by one from the newest, times are within a
/// minute of now, the address is the loopback with some port. Keeps each
/// entry's arguments and client name.
fn entries(v: Value) -> Vec<(Vec<String>, String)> {
    let Value::Array(list) = v else { panic!("SLOWLOG GET replies an array: {v:?}") };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let mut last_id = None;
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("a bulk string: {other:?}"),
    };
    list.into_iter()
        .map(|e| {
            let Value::Array(f) = e else { panic!("an entry is an array") };
            assert_eq!(f.len(), 6, "id, time, duration, arguments, address, name: {f:?}");
            let (Value::Int(id), Value::Int(time), Value::Int(usec)) = (&f[0], &f[1], &f[2]) else {
                panic!("integers first: {f:?}")
            };
            if let Some(last) = last_id {
                assert_eq!(*id, last - 1, "newest first, ids counting up");
            }
            last_id = Some(*id);
            assert!(time.unsigned_abs().abs_diff(now) < 60, "the Unix time in seconds: {time}");
            assert!(*usec >= 0);
            assert!(text(&f[4]).starts_with("127.0.0.1:"), "the client's address: {:?}", f[4]);
            let Value::Array(args) = &f[3] else { panic!("the arguments are an array") };
            (args.iter().map(text).collect(), text(&f[5]))
        })
        .collect()
}

/// Runs `args` and notes the command and its reply in `out`.
fn step(out: &mut Vec<String>, con: &mut redis::Connection, args: &[&str]) {
    let r = show(run(con, args));
    out.push(format!("{args:?} -> {r}"));
}

/// Everything the test does on one server, as text to compare.
fn session(port: u16) -> Vec<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut con = client.get_connection().expect("connect");
    let mut out = Vec::new();
    step(&mut out, &mut con, &["CONFIG", "GET", "slowlog-max-len"]);
    step(&mut out, &mut con, &["CONFIG", "GET", "slowlog-log-slower-than"]);
    // Refused settings: none of them changes anything.
    for bad in [
        &["CONFIG", "SET", "slowlog-max-len", "abc"][..],
        &["CONFIG", "SET", "slowlog-max-len", "-1"],
        &["CONFIG", "SET", "slowlog-max-len", "1.5"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "5", "slowlog-max-len"],
        &["CONFIG", "SET", "Slowlog-Max-Len", "1", "slowlog-max-len", "2"],
        &["CONFIG", "SET", "slowlog-max-len", "5", "no-such-option", "1"],
        &["CONFIG", "SET", "slowlog-max-len", "1", "slowlog-max-len", "2", "no-such-option", "1"],
        &["CONFIG", "SET", "no-such-option", "1", "slowlog-max-len", "1", "slowlog-max-len", "2"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "x"],
        &["SLOWLOG", "GET", "-2"],
        &["SLOWLOG", "GET", "x"],
        &["SLOWLOG", "GET", "1", "2"],
        &["SLOWLOG", "LEN", "x"],
        &["SLOWLOG", "NOPE"],
        &["ROLE", "x"],
    ] {
        step(&mut out, &mut con, bad);
    }
    step(&mut out, &mut con, &["CONFIG", "GET", "slowlog-log-slower-than"]);
    step(&mut out, &mut con, &["ROLE"]);
    step(&mut out, &mut con, &["SLOWLOG", "HELP"]);
    // Log every command, keep the last eight.
    step(&mut out, &mut con, &["CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "8"]);
    step(&mut out, &mut con, &["SLOWLOG", "RESET"]);
    step(&mut out, &mut con, &["SETBIT", "bm", "7", "1"]);
    let long = "x".repeat(200);
    step(&mut out, &mut con, &["SET", "long", &long]);
    let mut mset = vec!["MSET"];
    let pairs: Vec<String> = (0..20).flat_map(|i| [format!("k{i}"), format!("v{i}")]).collect();
    mset.extend(pairs.iter().map(String::as_str));
    step(&mut out, &mut con, &mset);
    step(&mut out, &mut con, &["CLIENT", "SETNAME", "app"]);
    // HELLO's reply names the server and the client id, which differ.
    run(&mut con, &["HELLO", "2", "AUTH", "default", "nopass-accepts-any", "SETNAME", "app2"]).expect("HELLO");
    // Refused by both (bitsled names `requirepass` as unknown, Redis the
    // other parameter), and the password is redacted in the log all the
    // same.
    assert!(run(&mut con, &["CONFIG", "SET", "requirepass", "secret", "no-such-option", "1"]).is_err());
    step(&mut out, &mut con, &["MULTI"]);
    step(&mut out, &mut con, &["SET", "a", "1"]);
    step(&mut out, &mut con, &["EXEC"]);
    step(&mut out, &mut con, &["SLOWLOG", "LEN"]);
    let log = run(&mut con, &["SLOWLOG", "GET", "-1"]).expect("SLOWLOG GET");
    out.push(format!("entries {:?}", entries(log)));
    let two = run(&mut con, &["SLOWLOG", "GET", "2"]).expect("SLOWLOG GET 2");
    out.push(format!("two {:?}", entries(two)));
    // A shorter log is cut right after the CONFIG SET, even with a
    // threshold nothing reaches.
    step(&mut out, &mut con, &["CONFIG", "SET", "slowlog-log-slower-than", "100000000"]);
    step(&mut out, &mut con, &["CONFIG", "SET", "slowlog-max-len", "6"]);
    step(&mut out, &mut con, &["SLOWLOG", "LEN"]);
    // A negative threshold logs nothing; a shorter log drops the oldest
    // at the next entry.
    step(&mut out, &mut con, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    step(&mut out, &mut con, &["SET", "unlogged", "1"]);
    step(&mut out, &mut con, &["SLOWLOG", "LEN"]);
    step(&mut out, &mut con, &["CONFIG", "SET", "slowlog-max-len", "2", "slowlog-log-slower-than", "0"]);
    step(&mut out, &mut con, &["SLOWLOG", "LEN"]);
    step(&mut out, &mut con, &["GET", "a"]);
    step(&mut out, &mut con, &["SLOWLOG", "LEN"]);
    let log = run(&mut con, &["SLOWLOG", "GET"]).expect("SLOWLOG GET");
    out.push(format!("entries {:?}", entries(log)));
    step(&mut out, &mut con, &["CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128"]);
    out
}

#[test]
fn slowlog_role_and_config_set_like_redis() {
    let Some(redis) = redis_server::start() else { return };
    let want = session(redis.port);
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &[]);
    let got = session(served.port);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "bitsled (left) and Redis (right)");
    }
    assert_eq!(got.len(), want.len());
    // The expectations themselves: the log kept the newest eight, with the
    // long argument cut and the password redacted.
    let entries = want.iter().find(|l| l.starts_with("entries")).unwrap();
    assert!(entries.contains("... (72 more bytes)") && entries.contains("(redacted)"), "{entries}");
    assert!(!entries.contains("secret") && entries.contains(r#""requirepass", "(redacted)""#), "{entries}");
    assert!(want.iter().any(|l| l.contains(r#"["SLOWLOG", "LEN"] -> int(6)"#)), "cut at once: {want:#?}");
    assert!(entries.contains("... (10 more arguments)"), "{entries}");
}

/// The settings given on the command line are the log's from the start.
#[test]
fn slowlog_settings_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(dir.path(), &["--slowlog-log-slower-than", "0", "--slowlog-max-len", "3"]);
    let mut con = served.client();
    let got = run(&mut con, &["CONFIG", "GET", "slowlog-*"]).unwrap();
    let want = Value::Array(
        ["slowlog-log-slower-than", "0", "slowlog-max-len", "3"]
            .iter()
            .map(|s| Value::BulkString(s.as_bytes().to_vec()))
            .collect(),
    );
    assert_eq!(got, want);
    for k in ["a", "b", "c", "d"] {
        run(&mut con, &["SET", k, "1"]).unwrap();
    }
    let log = entries(run(&mut con, &["SLOWLOG", "GET"]).unwrap());
    let args: Vec<Vec<String>> = log.into_iter().map(|(a, _)| a).collect();
    assert_eq!(args, [["SET", "d", "1"], ["SET", "c", "1"], ["SET", "b", "1"]], "every command, the newest three");
}
