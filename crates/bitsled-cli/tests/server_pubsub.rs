//! Pub/sub through `bitsled serve`, byte for byte against a private Redis:
//! SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE and their UN- forms, PUBLISH and
//! SPUBLISH across clients, PUBSUB introspection, the RESP2 subscribed
//! state (which commands may run, PING's shape), RESP3 pushes, CLIENT
//! REPLY OFF/SKIP (pushes still go out), RESET, EXEC with SUBSCRIBE
//! queued, CLIENT KILL TYPE pubsub, keyspace notifications, and client-side
//! caching (CLIENT TRACKING in its default, BCAST, REDIRECT, NOLOOP and
//! OPTIN modes, invalidations after FLUSHALL, a broken redirect). Then
//! bitsled alone: a subscriber
//! that never reads is disconnected when its backlog passes the pub/sub
//! output limit, while the publisher and other clients carry on.
//!
//! The comparisons need `redis-server` on the PATH: without it they print
//! a notice and pass, unless `BITSLED_REQUIRE_REDIS=1`.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use bitsled_testkit::redis_server;
#[path = "common/server.rs"]
mod server;

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(150))).expect("timeout");
    s
}

fn send(s: &mut TcpStream, args: &[&str]) {
    let mut req = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    s.write_all(&req).expect("send");
}

/// Everything the server sends until it has been quiet for a read
/// timeout (at most a few seconds).
fn drain(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => {
                out.extend_from_slice(b"<closed>");
                break;
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One client's script: each line a command, then what came back.
fn script(port: u16, lines: &[&[&str]]) -> Vec<String> {
    let mut s = connect(port);
    lines
        .iter()
        .map(|args| {
            send(&mut s, args);
            format!("{}: {}", args.join(" "), drain(&mut s))
        })
        .collect()
}

/// The single-client scenarios, RESP2 then RESP3 (HELLO's own reply, which
/// names the server, left out).
fn single_client(port: u16) -> Vec<String> {
    let mut out = script(
        port,
        &[
            &["MULTI"],
            &["SUBSCRIBE", "a", "b"],
            &["PING"],
            &["EXEC"],
            &["PING"],
            &["PING", "hi"],
            &["GET", "x"],
            &["CLIENT", "ID"],
            &["RESET"],
            &["CLIENT", "REPLY", "OFF"],
            &["SUBSCRIBE", "c"],
            &["PING"],
            &["UNSUBSCRIBE"],
            &["CLIENT", "REPLY", "ON"],
            &["CLIENT", "REPLY", "SKIP"],
            &["PING"],
            &["PING"],
            &["UNSUBSCRIBE"],
            &["PUNSUBSCRIBE"],
            &["SUNSUBSCRIBE"],
            &["SSUBSCRIBE", "s1", "s2"],
            &["SUBSCRIBE", "x", "x"],
            &["PSUBSCRIBE", "x*"],
            &["SUNSUBSCRIBE", "s1", "s2"],
            &["UNSUBSCRIBE", "x", "nope"],
            &["PUNSUBSCRIBE"],
            &["PING"],
            &["PUBSUB", "CHANNELS", "a", "b"],
            &["PUBSUB", "NUMPAT", "x"],
            &["PUBSUB", "FOO"],
            &["PUBSUB", "NUMSUB"],
            &["PUBLISH", "a"],
            &["CLIENT", "REPLY", "FOO"],
        ],
    );
    let mut s = connect(port);
    send(&mut s, &["HELLO", "3"]);
    drain(&mut s);
    for args in [
        &["SUBSCRIBE", "a"][..],
        &["PUBLISH", "a", "to myself"],
        &["PSUBSCRIBE", "a*"],
        &["PUBLISH", "a", "twice"],
        &["PING"],
        &["GET", "x"],
        &["PUBSUB", "NUMSUB", "a", "b"],
        &["PUBSUB", "CHANNELS"],
        &["PUBSUB", "NUMPAT"],
        &["CLIENT", "REPLY", "SKIP"],
        &["PUBLISH", "a", "skipped reply"],
        &["UNSUBSCRIBE"],
        &["PUNSUBSCRIBE"],
    ] {
        send(&mut s, args);
        out.push(format!("resp3 {}: {}", args.join(" "), drain(&mut s)));
    }
    out
}

/// Several clients: subscribers of each kind, a publisher, introspection,
/// then CLIENT KILL TYPE pubsub.
fn several_clients(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let (mut a, mut b, mut c, mut p) = (connect(port), connect(port), connect(port), connect(port));
    send(&mut a, &["SUBSCRIBE", "ch1", "ch2"]);
    // One pattern that matches: Redis delivers to matching patterns in its
    // hash table's order, which varies from run to run.
    send(&mut b, &["PSUBSCRIBE", "ch*", "zz?"]);
    send(&mut c, &["HELLO", "3"]);
    drain(&mut c);
    send(&mut c, &["SSUBSCRIBE", "sh"]);
    out.extend([drain(&mut a), drain(&mut b), drain(&mut c)]);
    for args in [
        &["PUBLISH", "ch1", "hello"][..],
        &["PUBLISH", "other", "nobody"],
        &["SPUBLISH", "sh", "shard"],
        &["PUBLISH", "sh", "not the shard channel"],
        &["PUBSUB", "NUMSUB", "ch1", "ch2", "sh"],
        &["PUBSUB", "SHARDNUMSUB", "sh", "ch1"],
        &["PUBSUB", "SHARDCHANNELS"],
        &["PUBSUB", "NUMPAT"],
        &["PUBSUB", "CHANNELS", "ch1"],
        &["PUBSUB", "CHANNELS", "zz*"],
    ] {
        send(&mut p, args);
        out.push(format!("{}: {}", args.join(" "), drain(&mut p)));
    }
    out.extend([drain(&mut a), drain(&mut b), drain(&mut c)]);
    send(&mut p, &["CLIENT", "KILL", "TYPE", "pubsub"]);
    out.push(format!("kill pubsub: {}", drain(&mut p)));
    out.push(format!("a after kill: {}", drain(&mut a)));
    send(&mut p, &["PUBSUB", "NUMPAT"]);
    out.push(format!("numpat after kill: {}", drain(&mut p)));
    send(&mut p, &["PUBLISH", "ch1", "anyone?"]);
    out.push(format!("publish after kill: {}", drain(&mut p)));
    out
}

/// Keyspace notifications: CONFIG SET/GET of the classes, then what a
/// pattern subscriber receives while another client runs the string,
/// bitmap, HyperLogLog and generic commands, with the `new` class, and an
/// expiry found by a lookup.
fn keyspace_events(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let (mut sub, mut c) = (connect(port), connect(port));
    for flags in ["gKE", "$lshzxeKE", "KA", "EA", "Kq", "KEA"] {
        send(&mut c, &["CONFIG", "SET", "notify-keyspace-events", flags]);
        let set = drain(&mut c);
        send(&mut c, &["CONFIG", "GET", "notify-keyspace-events"]);
        out.push(format!("{flags}: {set} {}", drain(&mut c)));
    }
    send(&mut c, &["FLUSHALL"]);
    drain(&mut c);
    send(&mut sub, &["PSUBSCRIBE", "__key*__:*"]);
    out.push(drain(&mut sub));
    let script: &[&[&str]] = &[
        &["SET", "s", "v"],
        &["SET", "s", "w", "NX"],
        &["SET", "s", "x", "EX", "100"],
        &["SETNX", "s", "y"],
        &["SETEX", "e", "100", "v"],
        &["APPEND", "s", "tail"],
        &["SETRANGE", "s", "1", "ZZ"],
        &["SETRANGE", "s", "1", ""],
        &["INCR", "n"],
        &["INCRBYFLOAT", "n", "1.5"],
        &["MSET", "a", "1", "b", "2"],
        &["MSETNX", "a", "1", "c", "3"],
        &["GETSET", "a", "9"],
        &["GETDEL", "b"],
        &["GETDEL", "b"],
        &["GETEX", "a", "PX", "100000"],
        &["GETEX", "a", "PERSIST"],
        &["SETBIT", "bits", "7", "1"],
        &["BITFIELD", "bits", "SET", "u8", "0", "255"],
        &["BITFIELD", "bits", "GET", "u8", "0"],
        &["BITOP", "OR", "dest", "bits", "nothing"],
        &["BITOP", "AND", "dest", "nothing"],
        &["PFADD", "h", "x", "y"],
        &["PFADD", "h", "x"],
        &["PFMERGE", "h2", "h"],
        &["EXPIRE", "s", "100"],
        &["EXPIRE", "s", "100", "NX"],
        &["PERSIST", "s"],
        &["PERSIST", "s"],
        &["EXPIRE", "e", "-1"],
        &["DEL", "a", "missing", "c"],
        &["RENAME", "s", "s2"],
        &["RENAME", "s2", "s2"],
        &["COPY", "s2", "s3"],
        &["COPY", "s2", "s4", "DB", "1"],
        &["MOVE", "s3", "2"],
        &["CONFIG", "SET", "notify-keyspace-events", "En$g"],
        &["SET", "fresh", "1"],
        &["SET", "fresh", "2"],
        &["SETBIT", "fresh-bits", "1", "1"],
        &["CONFIG", "SET", "notify-keyspace-events", "Ex"],
        &["PSETEX", "short", "30", "v"],
    ];
    // Pipelined: the events come in the commands' order all the same.
    for args in script {
        send(&mut c, args);
    }
    drain(&mut c);
    std::thread::sleep(Duration::from_millis(200));
    send(&mut c, &["GET", "short"]);
    drain(&mut c);
    let messages = drain(&mut sub);
    assert!(messages.matches("pmessage").count() > 40, "events arrived: {messages}");
    out.extend(messages.split("*4\r\n").map(str::to_string));
    send(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    drain(&mut c);
    out
}

/// A connection that speaks RESP3.
fn connect3(port: u16) -> TcpStream {
    let mut s = connect(port);
    send(&mut s, &["HELLO", "3"]);
    drain(&mut s);
    s
}

/// This connection's client id.
fn client_id(s: &mut TcpStream) -> String {
    send(s, &["CLIENT", "ID"]);
    drain(s).trim_start_matches(':').trim_end().to_string()
}

/// CLIENT TRACKING: what tracking clients (and a redirect target) receive
/// while another client writes. Client ids are replaced by `<id>`.
fn tracking(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let (mut a, mut w, mut r, mut b) = (connect3(port), connect(port), connect(port), connect(port));
    send(&mut w, &["FLUSHALL"]);
    drain(&mut w);
    let mut note = |what: &str, s: &mut TcpStream| out.push(format!("{what}: {}", drain(s)));
    // Default mode: keys read are invalidated once, at their next write.
    send(&mut a, &["CLIENT", "TRACKING", "on"]);
    send(&mut a, &["GET", "k1"]);
    send(&mut a, &["MGET", "k2", "k3"]);
    note("a tracks", &mut a);
    send(&mut w, &["SET", "k1", "v"]);
    send(&mut w, &["MSET", "k2", "x", "k9", "y"]);
    send(&mut w, &["SET", "k3", "z", "XX"]);
    drain(&mut w);
    note("a invalidated", &mut a);
    send(&mut w, &["SET", "k1", "again"]);
    drain(&mut w);
    note("a once only", &mut a);
    // BCAST with prefixes, redirected to a RESP2 subscriber.
    let rid = client_id(&mut r);
    send(&mut r, &["SUBSCRIBE", "__redis__:invalidate"]);
    drain(&mut r);
    send(&mut b, &["CLIENT", "TRACKING", "on", "REDIRECT", &rid, "BCAST", "PREFIX", "user:"]);
    note("b", &mut b);
    send(&mut w, &["MULTI"]);
    send(&mut w, &["SET", "user:1", "x"]);
    send(&mut w, &["SET", "other", "x"]);
    send(&mut w, &["DEL", "user:2", "user:1"]);
    send(&mut w, &["EXEC"]);
    drain(&mut w);
    note("r broadcast", &mut r);
    // The writer's own invalidation follows its reply; NOLOOP drops it.
    let mut o = connect3(port);
    send(&mut o, &["CLIENT", "TRACKING", "on"]);
    send(&mut o, &["GET", "mine"]);
    send(&mut o, &["SET", "mine", "1"]);
    send(&mut o, &["GET", "mine"]);
    note("o own write", &mut o);
    send(&mut o, &["CLIENT", "TRACKING", "on", "NOLOOP"]);
    send(&mut o, &["GET", "mine"]);
    send(&mut o, &["SET", "mine", "2"]);
    note("o noloop", &mut o);
    // FLUSHALL: a nil key list for every tracking client.
    send(&mut a, &["GET", "z"]);
    drain(&mut a);
    send(&mut w, &["FLUSHALL"]);
    drain(&mut w);
    note("a flush", &mut a);
    note("r flush", &mut r);
    // OPTIN: only the read after CLIENT CACHING yes is tracked.
    send(&mut a, &["CLIENT", "TRACKING", "off"]);
    send(&mut a, &["CLIENT", "TRACKING", "on", "OPTIN"]);
    send(&mut a, &["GET", "q1"]);
    send(&mut a, &["CLIENT", "CACHING", "yes"]);
    send(&mut a, &["GET", "q2"]);
    drain(&mut a);
    send(&mut w, &["MSET", "q1", "1", "q2", "2"]);
    drain(&mut w);
    note("a optin", &mut a);
    // A redirect to a client that has gone: told once.
    let mut gone = connect(port);
    let gid = client_id(&mut gone);
    let mut c = connect3(port);
    send(&mut c, &["CLIENT", "TRACKING", "on", "REDIRECT", &gid]);
    send(&mut c, &["GET", "rb"]);
    drain(&mut c);
    send(&mut gone, &["QUIT"]);
    drain(&mut gone);
    send(&mut w, &["SET", "rb", "1"]);
    drain(&mut w);
    note("c broken", &mut c);
    send(&mut c, &["CLIENT", "TRACKINGINFO"]);
    note("c info", &mut c);
    out.into_iter().map(|line| line.replace(&format!(":{gid}\r\n"), ":<id>\r\n")).collect()
}

/// Invariant: every reply and every delivered message is byte for byte
/// Redis's, in the same order, for the scripted scenarios.
#[test]
fn pubsub_matches_redis() {
    let Some(redis) = redis_server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(&dir.path().join("db"), &[]);
    assert_eq!(single_client(served.port), single_client(redis.port));
    assert_eq!(several_clients(served.port), several_clients(redis.port));
    assert_eq!(keyspace_events(served.port), keyspace_events(redis.port));
    assert_eq!(tracking(served.port), tracking(redis.port));
}

/// Invariant: a subscriber that never reads is disconnected once its
/// backlog passes the pub/sub hard limit (32 MiB), the publisher is never
/// blocked by it, and the server keeps answering other clients.
#[test]
fn a_subscriber_that_does_not_read_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(&dir.path().join("db"), &[]);
    let mut sub = connect(served.port);
    send(&mut sub, &["SUBSCRIBE", "flood"]);
    assert!(drain(&mut sub).contains("subscribe"), "subscribed");
    let mut publisher = served.client();
    let message = "x".repeat(64 << 10);
    let mut delivered_to = Vec::new();
    // 64 MiB of messages: twice the hard limit.
    for _ in 0..1024 {
        let n: i64 = redis::cmd("PUBLISH").arg("flood").arg(&message).query(&mut publisher).unwrap();
        delivered_to.push(n);
    }
    assert_eq!(delivered_to.first(), Some(&1), "the subscriber got the first message");
    assert_eq!(delivered_to.last(), Some(&0), "the subscriber was gone by the last one");
    let n: i64 = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("flood")
        .query::<Vec<redis::Value>>(&mut publisher)
        .map(|v| match v.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("NUMSUB reply {other:?}"),
        })
        .unwrap();
    assert_eq!(n, 0, "no subscriber left");
    let pong: String = redis::cmd("PING").query(&mut publisher).unwrap();
    assert_eq!(pong, "PONG");
    // What the subscriber can still read ends with the connection closed.
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        match sub.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    assert!(total < 40 << 20, "the backlog sent stayed near the limit: {total} bytes");
}

/// Invariant: a subscriber whose client has closed its connection (cleanly,
/// after reading its confirmations, or with them unread, which resets the
/// connection) is not counted by PUBSUB NUMSUB,
/// NUMPAT or CHANNELS, nor delivered to by PUBLISH, in requests another
/// connection sends right after the close, even while the closed
/// connections' threads have not yet seen the close. Redis, when present,
/// answers the same.
#[test]
fn closed_subscribers_are_not_counted_by_the_next_request() {
    const SUBSCRIBERS: usize = 64;
    const WANT: &str = "*2\r\n$4\r\nnews\r\n:0\r\n:0\r\n*0\r\n:0\r\n:0\r\n";
    let dir = tempfile::tempdir().unwrap();
    let served = server::Served::start(&dir.path().join("db"), &[]);
    let run = |port: u16, clean: bool| {
        let mut subscribers: Vec<TcpStream> = (0..SUBSCRIBERS).map(|_| connect(port)).collect();
        for s in &mut subscribers {
            send(s, &["SUBSCRIBE", "news"]);
            send(s, &["PSUBSCRIBE", "user:*"]);
        }
        let mut other = connect(port);
        let all = format!("*2\r\n$4\r\nnews\r\n:{SUBSCRIBERS}\r\n");
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            send(&mut other, &["PUBSUB", "NUMSUB", "news"]);
            if drain(&mut other) == all {
                break;
            }
            assert!(Instant::now() < until, "the subscriptions did not all arrive");
        }
        if clean {
            let confirmations = b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n\
                                  *3\r\n$10\r\npsubscribe\r\n$6\r\nuser:*\r\n:2\r\n";
            for s in &mut subscribers {
                let mut got = vec![0u8; confirmations.len()];
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s.read_exact(&mut got).unwrap();
                assert_eq!(got, confirmations);
            }
        }
        drop(subscribers);
        // One write, so every request follows the close at once.
        let requests: [&[&str]; 5] = [
            &["PUBSUB", "NUMSUB", "news"],
            &["PUBSUB", "NUMPAT"],
            &["PUBSUB", "CHANNELS"],
            &["PUBLISH", "news", "hello"],
            &["PUBLISH", "user:7", "hi"],
        ];
        let mut bytes = Vec::new();
        for args in requests {
            bytes.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                bytes.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
        }
        other.write_all(&bytes).unwrap();
        drain(&mut other)
    };
    for clean in [true, false] {
        assert_eq!(run(served.port, clean), WANT, "closed cleanly: {clean}");
    }
    let Some(redis) = redis_server::start() else { return };
    for clean in [true, false] {
        assert_eq!(run(redis.port, clean), WANT, "Redis, closed cleanly: {clean}");
    }
}
