//! The server follows the durability policy of the database it serves
//! (`bitsled::Durability`), not a copy of its own: a database opened with
//! `Durability::Always` gets a flush before each reply to a write, even when
//! the server's configuration was left at its default, and INFO and CONFIG
//! GET report the database's policy.

use bitsled::{Config, Durability};
use bitsled_redis::server::{Server, ServerConfig};

/// INFO persistence's field `name`.
fn info_field(con: &mut redis::Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(con).expect("INFO");
    let prefix = format!("{name}:");
    info.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {name} in {info:?}")).to_string()
}

/// Runs `check` against a server (default configuration) over a database
/// opened with `durability` and no background flush.
fn with_server(durability: Durability, check: impl FnOnce(&mut redis::Connection)) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Config::new(dir.path()).durability(durability).flush_interval(None).open().expect("open");
    assert_eq!(db.durability(), durability);
    let server = Server::bind(db, ServerConfig::new().port(0)).expect("bind");
    let addr = server.local_addr();
    let stop = server.shutdown_handle();
    let running = std::thread::spawn(move || server.run());
    let client = redis::Client::open(format!("redis://{addr}/")).expect("client");
    let mut con = client.get_connection().expect("connect");
    check(&mut con);
    drop(con);
    stop.shutdown();
    running.join().expect("server thread").expect("server run");
}

#[test]
fn always_from_the_database_flushes_before_each_reply_to_a_write() {
    with_server(Durability::Always, |con| {
        let policy: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("appendfsync").query(con).expect("CONFIG GET");
        assert_eq!(policy, ["appendfsync", "always"]);
        assert_eq!(info_field(con, "fsync_policy"), "always");
        assert_eq!(info_field(con, "server_flushes"), "0");
        let _: i64 = redis::cmd("SETBIT").arg("k").arg(7).arg(1).query(con).expect("SETBIT");
        assert_eq!(info_field(con, "server_flushes"), "1", "one group commit for the write");
        let _: i64 = redis::cmd("BITCOUNT").arg("k").query(con).expect("BITCOUNT");
        assert_eq!(info_field(con, "server_flushes"), "1", "a read commits nothing");
    });
}

#[test]
fn lazy_from_the_database_commits_nothing_per_request() {
    with_server(Durability::Lazy, |con| {
        assert_eq!(info_field(con, "fsync_policy"), "no");
        let _: i64 = redis::cmd("SETBIT").arg("k").arg(7).arg(1).query(con).expect("SETBIT");
        assert_eq!(info_field(con, "server_flushes"), "0");
    });
}
