//! Idle connections wait without a thread (parked) and come back whole:
//! their session state survives, the idle timeout and CLIENT KILL still
//! end them, a shutdown closes them, and a subscriber is never parked.

#[path = "common/server.rs"]
mod server;

use std::io::Write;
use std::time::{Duration, Instant};

use bitsled_redis::server::ServerConfig;
use bitsled_testkit::wire::{self, words};

/// An INFO clients field of the server on `port`, read through a new
/// connection.
fn clients_field(port: u16, field: &str) -> u64 {
    let mut c = wire::Client::connect(port);
    let reply = String::from_utf8(c.call(&words("INFO clients"))).expect("INFO is text");
    reply
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO clients has no {field}: {reply}"))
}

/// Waits (bounded) until `cond` holds; false if it never did.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Invariant: clients idle past a tick are parked (INFO counts them, and
/// the threads that served them go back, so far fewer threads than
/// clients remain), and each parked client's session survives: its
/// database, its name, and a transaction it had begun.
#[test]
fn idle_clients_are_parked_and_resume_with_their_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let s = server::start(dir.path(), ServerConfig::new());
    let port = s.addr.port();
    let mut clients: Vec<wire::Client> = (0..40).map(|_| wire::Client::connect(port)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.call(&words("SELECT 3")), b"+OK\r\n");
        assert_eq!(c.call(&words(&format!("CLIENT SETNAME c{i}"))), b"+OK\r\n");
        assert_eq!(c.call(&words("MULTI")), b"+OK\r\n");
        assert_eq!(c.call(&words(&format!("SET k{i} v{i}"))), b"+QUEUED\r\n");
    }
    assert!(eventually(|| clients_field(port, "bitsled_parked_clients") >= 40), "the idle clients were not parked");
    // Parked clients hold no thread: those that served them exit.
    assert!(
        eventually(|| clients_field(port, "bitsled_client_threads") < 10),
        "threads stayed with parked clients: {}",
        clients_field(port, "bitsled_client_threads")
    );
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.call(&words("EXEC")), b"*1\r\n+OK\r\n", "client {i}");
        let bulk = |s: String| format!("${}\r\n{s}\r\n", s.len()).into_bytes();
        assert_eq!(c.call(&words("CLIENT GETNAME")), bulk(format!("c{i}")));
        assert_eq!(c.call(&words(&format!("GET k{i}"))), bulk(format!("v{i}")));
    }
    // The writes went to database 3, where each client had selected.
    let mut other = wire::Client::connect(port);
    assert_eq!(other.call(&words("GET k0")), b"$-1\r\n");
    assert_eq!(other.call(&words("SELECT 3")), b"+OK\r\n");
    assert_eq!(other.call(&words("DBSIZE")), b":40\r\n");
    s.stop();
}

/// Invariant: a parked client is still ended by the idle timeout and by
/// CLIENT KILL (it sees its connection closed, and leaves the client
/// list), and a shutdown closes parked clients and finishes.
#[test]
fn parked_clients_time_out_are_killed_and_closed_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let s = server::start(dir.path(), ServerConfig::new());
    let port = s.addr.port();
    let mut admin = wire::Client::connect(port);
    let mut victim = s.raw();
    wire::expect(&mut victim, b"CLIENT ID\r\n", b":2\r\n");
    assert!(eventually(|| clients_field(port, "bitsled_parked_clients") >= 1));
    assert_eq!(admin.call(&words("CLIENT KILL ID 2")), b":1\r\n");
    let (_, closed) = wire::read_to_close(&mut victim);
    assert!(closed, "a killed parked client was not closed");
    assert!(eventually(|| clients_field(port, "bitsled_parked_clients") == 0));

    // The idle timeout reaches parked clients; the admin connection keeps
    // busy so that only the idle one goes.
    let mut idle = s.raw();
    wire::expect(&mut idle, b"PING\r\n", b"+PONG\r\n");
    assert_eq!(admin.call(&words("CONFIG SET timeout 2")), b"+OK\r\n");
    let started = Instant::now();
    let closed = eventually(|| {
        assert_eq!(admin.call(&words("PING")), b"+PONG\r\n");
        idle.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        wire::read_to_close(&mut idle).1
    });
    assert!(closed && started.elapsed() >= Duration::from_secs(1), "the idle timeout did not close a parked client");
    assert_eq!(admin.call(&words("CONFIG SET timeout 0")), b"+OK\r\n");

    // A shutdown closes what is parked, and the server stops.
    let mut parked = s.raw();
    wire::expect(&mut parked, b"PING\r\n", b"+PONG\r\n");
    assert!(eventually(|| clients_field(port, "bitsled_parked_clients") >= 1));
    drop(admin);
    let stopping = Instant::now();
    s.stop();
    assert!(stopping.elapsed() < Duration::from_secs(10), "shutdown waited on a parked client");
    let (_, closed) = wire::read_to_close(&mut parked);
    assert!(closed, "a parked client stayed open after the shutdown");
}

/// Invariant: a subscriber idle for seconds is not parked (a message
/// published to it arrives without any request of its own).
#[test]
fn subscribers_are_not_parked() {
    let dir = tempfile::tempdir().unwrap();
    let s = server::start(dir.path(), ServerConfig::new());
    let port = s.addr.port();
    let mut sub = s.raw();
    wire::expect(&mut sub, b"SUBSCRIBE news\r\n", b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(clients_field(port, "bitsled_parked_clients"), 0);
    let mut publisher = wire::Client::connect(port);
    assert_eq!(publisher.call(&words("PUBLISH news hi")), b":1\r\n");
    let want = b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n";
    assert_eq!(wire::read_exact(&mut sub, want.len()), want);
    sub.write_all(b"UNSUBSCRIBE\r\n").unwrap();
    s.stop();
}

/// Invariant: a parked client that others redirect their invalidations to
/// (CLIENT TRACKING ... REDIRECT, RESP3) receives every invalidation even
/// when they are more than its socket takes at once, without sending
/// anything itself: the rest is sent by a thread the parked client is
/// resumed on.
#[test]
fn a_parked_redirect_target_receives_every_invalidation() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let s = server::start(dir.path(), ServerConfig::new());
    let port = s.addr.port();
    let mut target = s.raw();
    target.write_all(b"HELLO 3\r\nCLIENT ID\r\n").unwrap();
    // HELLO's map, then the id.
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !seen.ends_with(b"\r\n") || !seen.windows(3).any(|w| w == b"\r\n:") {
        let n = target.read(&mut chunk).unwrap();
        assert!(n > 0, "the target was closed");
        seen.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&seen).to_string();
    let id: u64 = text.rsplit("\r\n:").next().and_then(|t| t.trim_end().parse().ok()).expect("CLIENT ID");
    assert!(eventually(|| clients_field(port, "bitsled_parked_clients") >= 1));

    let mut writer = wire::Client::connect(port);
    assert_eq!(writer.call(&words(&format!("CLIENT TRACKING on REDIRECT {id} BCAST"))), b"+OK\r\n");
    let keys: Vec<String> = (0..1700).map(|i| format!("{i:04}{}", "k".repeat(3996))).collect();
    let mut want = 0usize;
    for k in &keys {
        assert_eq!(writer.call(&[b"SET".to_vec(), k.as_bytes().to_vec(), b"v".to_vec()]), b"+OK\r\n");
        want += format!(">2\r\n$10\r\ninvalidate\r\n*1\r\n${}\r\n{k}\r\n", k.len()).len();
    }
    // The target only reads.
    target.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    while got < want {
        match target.read(&mut buf) {
            Ok(0) => panic!("the target was closed after {got} of {want} bytes"),
            Ok(n) => got += n,
            Err(e) => panic!("after {got} of {want} bytes: {e}"),
        }
    }
    assert_eq!(got, want);
    s.stop();
}
