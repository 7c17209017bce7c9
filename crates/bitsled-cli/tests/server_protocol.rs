//! `bitsled serve` speaks Redis's protocol as Redis does: pipelines,
//! concurrent clients, authentication, transactions, RESP3, and Redis's
//! protocol errors, after which only the offending connection is closed.
//! A stop by SHUTDOWN or SIGTERM exits with status 0 and keeps every write.

use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

#[path = "common/server.rs"]
mod server;

use bitsled_testkit::wire::{read_exact, send_and_read_to_close};
use server::Served;

/// Sends `request` and asserts the next bytes are exactly `want`.
fn expect(s: &mut TcpStream, request: &[u8], want: &[u8]) {
    s.write_all(request).expect("write");
    let got = read_exact(s, want.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(want),
        "reply to {:?}",
        String::from_utf8_lossy(request)
    );
}

fn start() -> (tempfile::TempDir, Served) {
    start_with(&[])
}

fn start_with(extra: &[&str]) -> (tempfile::TempDir, Served) {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = Served::start(dir.path(), extra);
    (dir, served)
}

/// A pipeline of 100,000 commands gets 100,000 replies in order, and every
/// write took effect.
#[test]
fn pipeline_of_100k_commands() {
    let (_dir, served) = start();
    let mut con = served.client();
    let mut pipe = redis::pipe();
    for i in 0..100_000u64 {
        pipe.cmd("SETBIT").arg("p").arg(i * 7).arg(1);
    }
    let replies: Vec<i64> = pipe.query(&mut con).expect("pipeline");
    assert_eq!(replies.len(), 100_000);
    assert!(replies.iter().all(|&r| r == 0), "every bit was new");
    let count: i64 = redis::cmd("BITCOUNT").arg("p").query(&mut con).expect("bitcount");
    assert_eq!(count, 100_000);
    let last: i64 = redis::cmd("GETBIT").arg("p").arg(99_999 * 7).query(&mut con).expect("getbit");
    assert_eq!(last, 1);
}

/// 50 clients at once, each setting bits in its own key and in a shared
/// one: no update is lost, each sees its own count.
#[test]
fn fifty_concurrent_clients() {
    let (_dir, served) = start();
    let port = served.port;
    let threads: Vec<_> = (0..50u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .expect("client")
                    .get_connection()
                    .expect("connect");
                for i in 0..200u64 {
                    let _: i64 =
                        redis::cmd("SETBIT").arg(format!("own:{t}")).arg(i * 3).arg(1).query(&mut con).expect("setbit");
                    let _: i64 =
                        redis::cmd("SETBIT").arg("shared").arg(t * 200 + i).arg(1).query(&mut con).expect("setbit");
                }
                let own: i64 = redis::cmd("BITCOUNT").arg(format!("own:{t}")).query(&mut con).expect("bitcount");
                assert_eq!(own, 200, "client {t}");
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    let mut con = served.client();
    let shared: i64 = redis::cmd("BITCOUNT").arg("shared").query(&mut con).expect("bitcount");
    assert_eq!(shared, 50 * 200);
}

/// With a password, everything but AUTH/HELLO/QUIT is refused until the
/// client authenticates; a wrong password is refused with WRONGPASS.
#[test]
fn auth_required_and_refused() {
    let (_dir, served) = start_with(&["--requirepass", "s3cret"]);
    let mut s = served.raw();
    expect(&mut s, b"PING\r\n", b"-NOAUTH Authentication required.\r\n");
    expect(&mut s, b"AUTH nope\r\n", b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    expect(&mut s, b"AUTH someone s3cret\r\n", b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    expect(&mut s, b"GET k\r\n", b"-NOAUTH Authentication required.\r\n");
    expect(&mut s, b"HELLO 3\r\n", b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n");
    expect(&mut s, b"AUTH s3cret\r\n", b"+OK\r\n");
    expect(&mut s, b"PING\r\n", b"+PONG\r\n");

    let mut s = served.raw();
    expect(&mut s, b"AUTH default s3cret\r\nPING\r\n", b"+OK\r\n+PONG\r\n");
    let mut s = served.raw();
    expect(
        &mut s,
        b"HELLO 2 AUTH default wrong\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    s.write_all(b"HELLO 2 AUTH default s3cret\r\n").expect("write");
    assert_eq!(read_exact(&mut s, 4), b"*14\r");

    // Before authentication, a request of more than 10 arguments is a
    // protocol error.
    let mut s = served.raw();
    let (got, closed) = send_and_read_to_close(&mut s, b"*11\r\n");
    assert_eq!(got, b"-ERR Protocol error: unauthenticated multibulk length\r\n");
    assert!(closed);

    // The redis crate authenticates from the URL.
    let mut con = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", served.port))
        .expect("client")
        .get_connection()
        .expect("connect with password");
    let pong: String = redis::cmd("PING").query(&mut con).expect("ping");
    assert_eq!(pong, "PONG");
    let bad =
        redis::Client::open(format!("redis://:wrong@127.0.0.1:{}/", served.port)).expect("client").get_connection();
    assert!(bad.is_err(), "a wrong password must not connect");
}

/// Failed AUTHs are rate-limited: a pipelined burst of wrong passwords
/// gets 10 replies at once, then one per 50 ms, and the connection is
/// closed after the 100th; INFO stats counts every failure. A correct
/// password after a few failures, even past the first 10, still works.
#[test]
fn auth_guessing_is_slowed_then_disconnected() {
    const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    let (_dir, served) = start_with(&["--requirepass", "s3cret"]);
    let mut s = served.raw();
    expect(&mut s, &b"AUTH guess\r\n".repeat(3), &WRONGPASS.repeat(3));
    expect(&mut s, b"AUTH s3cret\r\nPING\r\n", b"+OK\r\n+PONG\r\n");
    let mut s = served.raw();
    expect(&mut s, &b"HELLO 2 AUTH default guess\r\n".repeat(12), &WRONGPASS.repeat(12));
    expect(&mut s, b"AUTH default s3cret\r\nPING\r\n", b"+OK\r\n+PONG\r\n");

    let mut burst = served.raw();
    burst.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let t = Instant::now();
    let (got, closed) = send_and_read_to_close(&mut burst, &b"AUTH guess\r\n".repeat(150));
    let took = t.elapsed();
    assert!(closed, "the guesser stays connected");
    assert_eq!(got.len(), WRONGPASS.len() * 100, "{}", String::from_utf8_lossy(&got));
    assert_eq!(got, WRONGPASS.repeat(100));
    assert!(took >= Duration::from_millis(90 * 50 - 200), "90 failures past the first 10 took only {took:?}");

    let mut con = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", served.port))
        .expect("client")
        .get_connection()
        .expect("connect with password");
    let info: String = redis::cmd("INFO").arg("stats").query(&mut con).expect("info");
    assert!(info.contains("\r\nauth_failures:115\r\n"), "{info}");
}

/// MULTI queues, EXEC runs the queue, DISCARD drops it, and an error at
/// queue time makes EXEC abort the whole transaction.
#[test]
fn multi_exec_discard_execabort() {
    let (_dir, served) = start();
    let mut s = served.raw();
    expect(&mut s, b"EXEC\r\n", b"-ERR EXEC without MULTI\r\n");
    expect(&mut s, b"DISCARD\r\n", b"-ERR DISCARD without MULTI\r\n");
    expect(&mut s, b"MULTI\r\n", b"+OK\r\n");
    expect(&mut s, b"MULTI\r\n", b"-ERR MULTI calls can not be nested\r\n");
    expect(&mut s, b"SETBIT t 1 1\r\nGETBIT t 1\r\nSETBIT t x 1\r\n", b"+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n");
    expect(&mut s, b"EXEC\r\n", b"*3\r\n:0\r\n:1\r\n-ERR bit offset is not an integer or out of range\r\n");

    expect(&mut s, b"MULTI\r\nSETBIT d 1 1\r\nDISCARD\r\nGETBIT d 1\r\n", b"+OK\r\n+QUEUED\r\n+OK\r\n:0\r\n");

    expect(&mut s, b"MULTI\r\nSETBIT a 1 1\r\n", b"+OK\r\n+QUEUED\r\n");
    expect(&mut s, b"SETBIT a 1\r\n", b"-ERR wrong number of arguments for 'setbit' command\r\n");
    expect(&mut s, b"NOSUCH\r\n", b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n");
    expect(&mut s, b"EXEC\r\n", b"-EXECABORT Transaction discarded because of previous errors.\r\n");
    expect(&mut s, b"GETBIT a 1\r\n", b":0\r\n");

    // SHUTDOWN cannot be queued (Redis's no-multi flag): the transaction is
    // aborted and the server keeps running.
    expect(
        &mut s,
        b"MULTI\r\nSETBIT a 1 1\r\nSHUTDOWN\r\n",
        b"+OK\r\n+QUEUED\r\n-ERR Command not allowed inside a transaction\r\n",
    );
    expect(
        &mut s,
        b"EXEC\r\nGETBIT a 1\r\n",
        b"-EXECABORT Transaction discarded because of previous errors.\r\n:0\r\n",
    );

    // The redis crate's atomic pipeline.
    let mut con = served.client();
    let (old, count): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("SETBIT")
        .arg("m")
        .arg(5)
        .arg(1)
        .cmd("BITCOUNT")
        .arg("m")
        .query(&mut con)
        .expect("tx");
    assert_eq!((old, count), (0, 1));
}

/// A transaction is isolated: another client never sees the state between
/// two of its commands.
#[test]
fn exec_is_isolated() {
    let (_dir, served) = start();
    let port = served.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = std::sync::Arc::clone(&stop);
    let reader = std::thread::spawn(move || {
        let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap();
        let mut reads = 0u64;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            let bit: i64 = redis::cmd("GETBIT").arg("iso").arg(0).query(&mut con).expect("getbit");
            assert_eq!(bit, 0, "saw the middle of a transaction");
            reads += 1;
        }
        reads
    });
    let mut con = served.client();
    for _ in 0..1500 {
        let _: (i64, i64) = redis::pipe()
            .atomic()
            .cmd("SETBIT")
            .arg("iso")
            .arg(0)
            .arg(1)
            .cmd("SETBIT")
            .arg("iso")
            .arg(0)
            .arg(0)
            .query(&mut con)
            .expect("tx");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().expect("reader");
    assert!(reads > 0);
}

/// Malformed frames get Redis's protocol error and the connection is
/// closed; requests before the bad one in the same packet are answered;
/// other connections carry on.
#[test]
fn malformed_frames_close_only_that_connection() {
    let (_dir, served) = start();
    let mut good = served.raw();
    expect(&mut good, b"SETBIT g 3 1\r\n", b":0\r\n");
    let cases: &[(&[u8], &[u8])] = &[
        (b"*1\r\nx\r\n", b"-ERR Protocol error: expected '$', got 'x'\r\n"),
        (b"*1\r\n$-5\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$abc\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$536870913\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*99999999999\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1048577\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*x\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"GET \"unbalanced\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n"),
        (b"PING\r\n*1\r\n$3\r\nGET\r\n*1\r\n?\r\n", b"+PONG\r\n-ERR wrong number of arguments for 'get' command\r\n-ERR Protocol error: expected '$', got '?'\r\n"),
    ];
    for (request, want) in cases {
        let mut bad = served.raw();
        let (got, closed) = send_and_read_to_close(&mut bad, request);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "for {:?}",
            String::from_utf8_lossy(request)
        );
        assert!(closed, "connection left open after {:?}", String::from_utf8_lossy(request));
    }
    let mut long_inline = vec![b'a'; 70 * 1024];
    long_inline.extend_from_slice(b"\r\n");
    let (got, closed) = send_and_read_to_close(&mut served.raw(), &long_inline);
    assert_eq!(got, b"-ERR Protocol error: too big inline request\r\n");
    assert!(closed);
    expect(&mut good, b"GETBIT g 3\r\n", b":1\r\n");
}

/// An inline request with a NUL byte before its newline is never run, as
/// in Redis 7.0 (whose `strchr` finds no line end): neither the part before
/// the NUL (`DEL important`, `SET k v` without the `EX 1`) nor the whole.
/// The connection answers nothing more until over 64 KiB are pending, then
/// gets `too big inline request` and is closed.
#[test]
fn inline_request_with_a_nul_byte_is_never_run() {
    let (_dir, served) = start();
    let mut s = served.raw();
    expect(&mut s, b"SET important 1\r\n", b"+OK\r\n");
    for line in [&b"DEL important\0-suffix\r\nPING\r\n"[..], b"SET k v\0 EX 1\r\nPING\r\n"] {
        let mut bad = served.raw();
        bad.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
        let (got, closed) = send_and_read_to_close(&mut bad, line);
        assert!(
            got.is_empty() && !closed,
            "{:?} got {:?}",
            String::from_utf8_lossy(line),
            String::from_utf8_lossy(&got)
        );
        bad.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let (got, closed) = send_and_read_to_close(&mut bad, &vec![b'x'; 64 * 1024]);
        assert_eq!(String::from_utf8_lossy(&got), "-ERR Protocol error: too big inline request\r\n");
        assert!(closed);
    }
    expect(&mut s, b"EXISTS important\r\nEXISTS k\r\n", b":1\r\n:0\r\n");
    // As a bulk argument, a NUL is part of the key.
    expect(&mut s, b"*2\r\n$3\r\nDEL\r\n$16\r\nimportant\0-suffix\r\nEXISTS important\r\n", b":0\r\n:1\r\n");
}

/// The server's resident memory in bytes, from INFO memory.
fn rss(s: &mut TcpStream) -> u64 {
    s.write_all(b"INFO memory\r\n").expect("write");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n") {
        head.extend(read_exact(s, 1));
    }
    let len: usize = std::str::from_utf8(&head[1..head.len() - 2]).unwrap().parse().unwrap();
    let text = String::from_utf8(read_exact(s, len + 2)).unwrap();
    let line = text.lines().find(|l| l.starts_with("used_memory_rss:")).expect("used_memory_rss");
    line["used_memory_rss:".len()..].trim().parse().unwrap()
}

/// Declaring a 512 MiB bulk (the maximum) and sending a few bytes makes the
/// server allocate nothing like it (four such clients add less than 64 MiB
/// of resident memory), and other clients are served meanwhile.
#[test]
fn huge_declared_bulk_is_not_preallocated() {
    let (_dir, served) = start();
    let mut probe = served.raw();
    let before = rss(&mut probe);
    let mut hogs = Vec::new();
    for _ in 0..4 {
        let mut s = served.raw();
        s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\nonly a few bytes").expect("write");
        hogs.push(s);
    }
    std::thread::sleep(Duration::from_millis(200));
    expect(&mut probe, b"PING\r\n", b"+PONG\r\n");
    let after = rss(&mut probe);
    assert!(after < before + (64 << 20), "RSS grew from {before} to {after} bytes for 4 declared 512 MiB bulks");
}

/// A client that sends a pipeline and disconnects before reading does not
/// disturb the server: the complete requests it sent are applied (at most
/// all of them) and others are served.
#[test]
fn client_disconnecting_mid_pipeline() {
    let (_dir, served) = start();
    for round in 0..3 {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, served.port)).expect("connect");
        let mut req = Vec::new();
        for i in 0..20_000u64 {
            req.extend_from_slice(
                format!("*4\r\n$6\r\nSETBIT\r\n$2\r\nd{round}\r\n${}\r\n{i}\r\n$1\r\n1\r\n", i.to_string().len())
                    .as_bytes(),
            );
        }
        req.extend_from_slice(b"*3\r\n$6\r\nSETBIT\r\n$2\r\nd"); // cut in the middle
        s.write_all(&req).expect("write");
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut con = served.client();
    for round in 0..3 {
        let n: i64 = redis::cmd("BITCOUNT").arg(format!("d{round}")).query(&mut con).expect("bitcount");
        assert!((0..=20_000).contains(&n), "{n}");
    }
    let pong: String = redis::cmd("PING").query(&mut con).expect("ping");
    assert_eq!(pong, "PONG");
}

/// HELLO 3 switches to RESP3: a map reply, `_` nulls, maps for CONFIG GET;
/// HELLO 2 switches back; unknown versions get NOPROTO.
#[test]
fn hello_3_replies() {
    let (_dir, served) = start();
    let mut s = served.raw();
    expect(&mut s, b"HELLO 4\r\n", b"-NOPROTO unsupported protocol version\r\n");
    expect(&mut s, b"HELLO x\r\n", b"-ERR Protocol version is not an integer or out of range\r\n");
    expect(
        &mut s,
        b"HELLO 3 SETNAME app\r\n",
        b"%7\r\n$6\r\nserver\r\n$7\r\nbitsled\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n",
    );
    // The id's digits, then the rest of the map.
    let mut id = Vec::new();
    while !id.ends_with(b"\r\n") {
        id.extend(read_exact(&mut s, 1));
    }
    assert!(id.starts_with(b":"), "{id:?}");
    let rest = b"$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n";
    assert_eq!(read_exact(&mut s, rest.len()), rest.to_vec());
    expect(&mut s, b"GET missing\r\n", b"_\r\n");
    expect(&mut s, b"CLIENT GETNAME\r\n", b"$3\r\napp\r\n");
    expect(
        &mut s,
        b"CONFIG GET port\r\n",
        format!("%1\r\n$4\r\nport\r\n${}\r\n{}\r\n", served.port.to_string().len(), served.port).as_bytes(),
    );
    expect(&mut s, b"MGET missing\r\n", b"*1\r\n_\r\n");
    s.write_all(b"HELLO 2\r\n").expect("write");
    assert_eq!(read_exact(&mut s, 5), b"*14\r\n");
    // Skip the rest of the flat array, then check RESP2 nulls.
    let mut tail = Vec::new();
    while !tail.ends_with(b"$7\r\nmodules\r\n*0\r\n") {
        tail.extend(read_exact(&mut s, 1));
    }
    expect(&mut s, b"GET missing\r\n", b"$-1\r\n");
}

/// Inline (telnet-style) commands, SELECT, CLIENT and INFO.
#[test]
fn inline_and_connection_commands() {
    let (_dir, served) = start();
    let mut s = served.raw();
    expect(&mut s, b"PING\r\nSET a \"b c\"\nGET a\r\n\r\n", b"+PONG\r\n+OK\r\n$3\r\nb c\r\n");
    expect(
        &mut s,
        b"SELECT 0\r\nSELECT 16\r\nSELECT x\r\n",
        b"+OK\r\n-ERR DB index is out of range\r\n-ERR value is not an integer or out of range\r\n",
    );
    expect(&mut s, b"CLIENT GETNAME\r\nCLIENT SETNAME x\r\nCLIENT GETNAME\r\n", b"$-1\r\n+OK\r\n$1\r\nx\r\n");
    expect(
        &mut s,
        b"CLIENT SETNAME \"a b\"\r\n",
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    expect(&mut s, b"CLIENT NOPE\r\n", b"-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n");
    expect(&mut s, b"CONFIG GET nothing-like-this\r\n", b"*0\r\n");
    let mut con = served.client();
    let info: String = redis::cmd("INFO").query(&mut con).expect("info");
    for section in ["# Server", "# Clients", "# Memory", "# Persistence", "# Stats", "# Keyspace", "db0:keys=1"] {
        assert!(info.contains(section), "INFO lacks {section}:\n{info}");
    }
    let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut con).expect("info");
    assert!(stats.contains("cmdstat_set:calls=1,"), "{stats}");
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut con).expect("client id");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).expect("client list");
    assert!(list.contains(&format!("id={id} ")), "{list}");
    expect(&mut s, b"QUIT\r\n", b"+OK\r\n");
    let (rest, closed) = send_and_read_to_close(&mut s, b"");
    assert!(rest.is_empty() && closed);
}

/// Past --maxclients, a new connection gets Redis's error and is closed.
#[test]
fn maxclients_refuses_extra_connections() {
    let (_dir, served) = start_with(&["--maxclients", "2"]);
    let mut a = served.raw();
    let mut b = served.raw();
    expect(&mut a, b"PING\r\n", b"+PONG\r\n");
    expect(&mut b, b"PING\r\n", b"+PONG\r\n");
    let (got, closed) = send_and_read_to_close(&mut served.raw(), b"");
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    assert!(closed);
    drop(a);
    std::thread::sleep(Duration::from_millis(100));
    expect(&mut served.raw(), b"PING\r\n", b"+PONG\r\n");
}

/// --timeout closes a client idle that long; an active one stays.
#[test]
fn idle_timeout_closes_the_connection() {
    let (_dir, served) = start_with(&["--timeout", "1"]);
    let mut idle = served.raw();
    expect(&mut idle, b"PING\r\n", b"+PONG\r\n");
    let start = Instant::now();
    let (got, closed) = send_and_read_to_close(&mut idle, b"");
    assert!(got.is_empty() && closed, "{got:?}");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(900) && waited < Duration::from_secs(5), "{waited:?}");
}

/// SHUTDOWN flushes and exits 0 (no reply, the connection closes); the
/// data is there after a restart, even with `--fsync no`.
#[test]
fn shutdown_flushes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut served = Served::start(dir.path(), &["--fsync", "no"]);
    let mut s = served.raw();
    expect(&mut s, b"SETBIT k 100 1\r\nSET s hello\r\n", b":0\r\n+OK\r\n");
    expect(&mut s, b"SHUTDOWN BOGUS\r\n", b"-ERR syntax error\r\n");
    let (got, closed) = send_and_read_to_close(&mut s, b"SHUTDOWN NOSAVE\r\n");
    assert!(got.is_empty() && closed, "{got:?}");
    assert_eq!(served.wait_exit(Duration::from_secs(15)).code(), Some(0));
    let restarted = Served::start(dir.path(), &[]);
    let mut con = restarted.client();
    let bit: i64 = redis::cmd("GETBIT").arg("k").arg(100).query(&mut con).expect("getbit");
    let s: String = redis::cmd("GET").arg("s").query(&mut con).expect("get");
    assert_eq!((bit, s.as_str()), (1, "hello"));
}

/// SIGTERM while clients are connected: exit status 0, and everything
/// acknowledged is on disk (checked by the CLI on the same directory).
#[test]
fn sigterm_exits_zero_with_data_flushed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut served = Served::start(dir.path(), &["--fsync", "no"]);
    let mut con = served.client();
    let mut pipe = redis::pipe();
    for i in 0..5000u64 {
        pipe.cmd("SETBIT").arg("t").arg(i * 11).arg(1);
    }
    let _: Vec<i64> = pipe.query(&mut con).expect("pipeline");
    let _idle = served.raw();
    served.signal("-TERM");
    assert_eq!(served.wait_exit(Duration::from_secs(15)).code(), Some(0));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bitsled"))
        .arg("--db")
        .arg(dir.path())
        .args(["BITCOUNT", "t"])
        .output()
        .expect("bitsled");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "(integer) 5000\n");
}

/// A client that keeps sending without reading its replies is disconnected
/// once its pending replies exceed the limit; others are unaffected. (In
/// process, to set a small limit.)
#[test]
fn pending_reply_limit_disconnects_a_client_that_does_not_read() {
    use bitsled_redis::server::{Server, ServerConfig};
    let dir = tempfile::tempdir().expect("tempdir");
    let config = ServerConfig::new().port(0).max_pending_reply_bytes(4 << 20);
    let db = config.db_config(bitsled::Config::new(dir.path())).open().expect("open");
    let server = Server::bind(db, config).expect("bind");
    let addr = server.local_addr();
    let stop = server.shutdown_handle();
    let running = std::thread::spawn(move || server.run());

    let mut good = TcpStream::connect(addr).expect("connect");
    good.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let value = "v".repeat(100_000);
    let set = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n{value}\r\n", value.len());
    expect(&mut good, set.as_bytes(), b"+OK\r\n");

    let mut hog = TcpStream::connect(addr).expect("connect");
    hog.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    // 100 KB per GET: far more than 4 MiB of replies plus socket buffers.
    let mut closed = hog.write_all(&b"GET big\r\n".repeat(2000)).is_err();
    if !closed {
        // The server closed its end; reading shows it.
        hog.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (_, c) = send_and_read_to_close(&mut hog, b"");
        closed = c;
    }
    assert!(closed, "the hog was not disconnected");
    expect(&mut good, b"STRLEN big\r\n", b":100000\r\n");
    stop.shutdown();
    running.join().expect("server thread").expect("server run");
}
