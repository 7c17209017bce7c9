//! A Python interpreter with the `redis` client, for the Python client
//! tests.

use std::process::Command;

/// A Python interpreter that can import `redis` and its cluster client
/// (redis-py 4.1 and later): the system's (where Debian's `python3-redis`
/// installs it) or the first `python3` on the PATH. Under
/// `BITSLED_REQUIRE_REDIS=1` its absence fails the test; otherwise it
/// prints a notice and the test skips.
pub fn python_with_redis() -> Option<&'static str> {
    let found = ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        Command::new(py).args(["-c", "import redis, redis.cluster"]).output().is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        assert!(
            std::env::var("BITSLED_REQUIRE_REDIS").as_deref() != Ok("1"),
            "BITSLED_REQUIRE_REDIS=1 but no python3 can import redis (apt-get install python3-redis)"
        );
        eprintln!("NOTICE: python3 with the redis package not found; skipping the Python client test");
    }
    found
}
