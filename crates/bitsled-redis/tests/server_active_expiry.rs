//! Active expiry through the server, as Redis's own test "expired key ...
//! should be deleted by active expiry" checks it: a key set with a 1 ms
//! expiry and never touched again is deleted by the background sweeper,
//! INFO stats `expired_keys` goes up by exactly one, and DBSIZE drops,
//! while keys without an expiry stay.

use std::time::{Duration, Instant};

use bitsled::Config;
use bitsled_redis::server::{Server, ServerConfig};

/// How long the test waits for the sweeper (10 runs a second) before it
/// fails: a bound against hanging, not a measured time.
const PATIENCE: Duration = Duration::from_secs(30);

fn expired_keys(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .unwrap_or_else(|| panic!("no expired_keys in {info:?}"))
        .trim()
        .parse()
        .expect("a number")
}

#[test]
fn untouched_expired_keys_are_deleted_by_the_background_sweeper() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The default configuration: the background thread runs the sweeper.
    let db = Config::new(dir.path()).open().expect("open");
    let server = Server::bind(db, ServerConfig::new().port(0)).expect("bind");
    let addr = server.local_addr();
    let stop = server.shutdown_handle();
    let running = std::thread::spawn(move || server.run());
    let mut con = redis::Client::open(format!("redis://{addr}/")).expect("client").get_connection().expect("connect");

    let before = expired_keys(&mut con);
    for i in 0..50 {
        let _: () = redis::cmd("SET").arg(format!("stay:{i}")).arg("v").query(&mut con).expect("SET");
    }
    let _: () = redis::cmd("SET").arg("foo").arg("bar").arg("PX").arg(1).query(&mut con).expect("SET PX");
    let start = Instant::now();
    // Only INFO and DBSIZE from here on: neither looks `foo` up.
    loop {
        let size: u64 = redis::cmd("DBSIZE").query(&mut con).expect("DBSIZE");
        if size == 50 {
            break;
        }
        assert_eq!(size, 51, "only foo may go");
        assert!(start.elapsed() < PATIENCE, "foo was not swept within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(expired_keys(&mut con), before + 1);
    let foo: Option<String> = redis::cmd("GET").arg("foo").query(&mut con).expect("GET");
    assert_eq!(foo, None);
    let stay: Option<String> = redis::cmd("GET").arg("stay:7").query(&mut con).expect("GET");
    assert_eq!(stay.as_deref(), Some("v"));
    assert_eq!(expired_keys(&mut con), before + 1, "the GET of a swept key counts nothing");

    drop(con);
    stop.shutdown();
    running.join().expect("server thread").expect("server run");
}
