//! Failed authentications are limited per connection and across the
//! server, counted in INFO stats, and never slow a correct password.
//!
//! The tests count replies and closed connections with limits chosen so
//! that nothing depends on how fast the machine is: a zero per-failure
//! delay where only counts matter, and a server-wide interval of an hour
//! where a failure must be held.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bitsled_redis::server::ServerConfig;

#[path = "common/server.rs"]
mod server;
use bitsled_testkit::wire::{expect, read_to_close};
use server::{start, PATIENCE};

const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";

fn with_password() -> ServerConfig {
    ServerConfig::new().requirepass(Some(b"s3cret".to_vec()))
}

/// INFO stats' field `name` as a number.
fn stat(con: &mut redis::Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).expect("INFO");
    let prefix = format!("{name}:");
    let value = info.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {name} in {info:?}"));
    value.trim().parse().unwrap_or_else(|_| panic!("{name}:{value}"))
}

/// Invariant: with a per-connection maximum of 5, a pipelined burst of 7
/// wrong passwords gets exactly 5 WRONGPASS replies and the connection is
/// closed, the last 2 never run; failures past the free ones (AUTH, HELLO
/// ... AUTH, AUTH inside EXEC) are still answered in order and a correct
/// password after them authenticates; INFO stats counts every failure that
/// ran, under Redis's name and bitsled's, and errorstats counts the
/// `WRONGPASS` replies as Redis does.
#[test]
fn per_connection_limit_closes_at_the_maximum() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = start(dir.path(), with_password().auth_failures_per_client(3, Duration::ZERO, 5));

    let mut guesser = served.raw();
    guesser.write_all(&b"AUTH guess\r\n".repeat(7)).expect("write");
    let (got, closed) = read_to_close(&mut guesser);
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&WRONGPASS.repeat(5)));
    assert!(closed, "the connection stays open after its 5th failure");

    let mut typo = served.raw();
    let mut want = WRONGPASS.repeat(4);
    want.extend_from_slice(b"+OK\r\n+PONG\r\n");
    expect(&mut typo, &[&b"HELLO 2 AUTH default guess\r\n".repeat(4)[..], b"AUTH s3cret\r\nPING\r\n"].concat(), &want);
    // Failures inside a transaction count too: 4 + 1 = the 5th closes.
    expect(&mut typo, b"MULTI\r\nAUTH guess\r\nEXEC\r\n", &[&b"+OK\r\n+QUEUED\r\n*1\r\n"[..], WRONGPASS].concat());
    let (got, closed) = read_to_close(&mut typo);
    assert!(got.is_empty() && closed, "{:?} {closed}", String::from_utf8_lossy(&got));

    let mut con = served.client(Some("s3cret"));
    assert_eq!(stat(&mut con, "acl_access_denied_auth"), 10);
    assert_eq!(stat(&mut con, "auth_failures"), 10);
    let errors: String = redis::cmd("INFO").arg("errorstats").query(&mut con).expect("INFO");
    assert!(errors.contains("\r\nerrorstat_WRONGPASS:count=10\r\n"), "{errors}");
}

/// Invariant: once the server-wide budget (4 failures, then one an hour)
/// is spent, a further failure on any connection is held unanswered, while
/// a correct password on another connection, new or not, is answered at
/// once; a held failure is never answered, even when the server shuts
/// down (its connection is closed without the reply).
#[test]
fn server_budget_holds_failures_but_not_a_correct_password() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = start(dir.path(), with_password().auth_failures_per_server(4, Duration::from_secs(3600)));

    let mut a = served.raw();
    expect(&mut a, &b"AUTH guess\r\n".repeat(3), &WRONGPASS.repeat(3));
    let mut b = served.raw();
    expect(&mut b, b"AUTH guess\r\n", WRONGPASS);
    // The 5th failure of the server: held for an hour.
    b.write_all(b"AUTH guess\r\n").expect("write");

    let mut c = served.raw();
    expect(&mut c, b"AUTH s3cret\r\nPING\r\n", b"+OK\r\n+PONG\r\n");
    let mut con = served.client(Some("s3cret"));
    wait_for_stat(&mut con, "acl_access_denied_auth", 5);
    let mut d = served.raw();
    expect(&mut d, b"AUTH s3cret\r\n", b"+OK\r\n");
    drop(con);

    served.stop();
    let (got, closed) = read_to_close(&mut b);
    assert!(got.is_empty(), "a held failure was answered: {:?}", String::from_utf8_lossy(&got));
    assert!(closed, "the held connection outlived the server");
}

/// Invariant: CLIENT KILL ends a connection held by the server-wide
/// budget, and frees its place among `maxclients`: with a limit of 2, a
/// third client can connect once the held one is killed.
#[test]
fn killing_a_held_client_frees_its_slot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = with_password().max_clients(2).auth_failures_per_server(0, Duration::from_secs(3600));
    let served = start(dir.path(), config);

    let mut held = served.raw();
    held.write_all(b"AUTH guess\r\n").expect("write");
    let mut admin = served.raw();
    expect(&mut admin, b"AUTH s3cret\r\n", b"+OK\r\n");
    // Once the failure ran, the held client is the one other client.
    let deadline = Instant::now() + PATIENCE;
    while raw_stat(&mut admin, "acl_access_denied_auth") < 1 {
        assert!(Instant::now() < deadline, "the failure never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    expect(&mut admin, b"CLIENT KILL TYPE normal\r\n", b":1\r\n");
    let (got, closed) = read_to_close(&mut held);
    assert!(got.is_empty() && closed, "{:?} {closed}", String::from_utf8_lossy(&got));

    // The killed client's thread leaves within its hold's check interval;
    // until then a third client is refused as one too many.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut third = served.raw();
        third.write_all(b"AUTH s3cret\r\n").expect("write");
        let got = read_line(&mut third);
        if got == "+OK" {
            break;
        }
        assert_eq!(got, "-ERR max number of clients reached");
        assert!(Instant::now() < deadline, "the killed client still holds its slot");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls INFO stats until `name` reaches `want` (bounded by [`PATIENCE`]).
fn wait_for_stat(con: &mut redis::Connection, name: &str, want: u64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = stat(con, name);
        if got == want {
            return;
        }
        assert!(got < want && Instant::now() < deadline, "{name} is {got}, waiting for {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One line of a reply on a raw connection, without its line end.
fn read_line(s: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut byte).expect("read a reply line");
        line.push(byte[0]);
    }
    line.truncate(line.len() - 2);
    String::from_utf8_lossy(&line).into_owned()
}

/// INFO stats' field `name` as a number, asked on a raw connection.
fn raw_stat(s: &mut TcpStream, name: &str) -> u64 {
    s.write_all(b"INFO stats\r\n").expect("write");
    let len: usize = read_line(s).strip_prefix('$').and_then(|n| n.parse().ok()).expect("a bulk reply");
    let mut info = vec![0; len + 2];
    s.read_exact(&mut info).expect("read INFO");
    let info = String::from_utf8_lossy(&info);
    let prefix = format!("{name}:");
    let value = info.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {name} in {info:?}"));
    value.trim().parse().unwrap_or_else(|_| panic!("{name}:{value}"))
}
