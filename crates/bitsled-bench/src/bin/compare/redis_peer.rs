//! A private `redis-server` child process on a free loopback port, killed
//! when the guard is dropped (also on error paths), and helpers to read its
//! statistics.

use std::collections::HashMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::Connection;

use super::Res;

/// A running `redis-server` owned by this process.
pub struct RedisServer {
    child: Child,
    port: u16,
    // Working directory of the server; removed after the server is killed.
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts `redis-server` without persistence on a free port of
    /// 127.0.0.1 and waits until it answers PING.
    pub fn start() -> Res<RedisServer> {
        match Command::new("redis-server").arg("--version").output() {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err("redis-server is not on PATH: install it (apt-get update && apt-get install -y \
                            redis-server) or pass --no-redis to skip the Redis column"
                    .into());
            }
            Err(e) => return Err(format!("cannot run redis-server: {e}").into()),
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = tempfile::tempdir()?;
        let log = std::fs::File::create(dir.path().join("redis.log"))?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--dir"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut server = RedisServer { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = server.child.try_wait()? {
                let log = std::fs::read_to_string(server.dir.path().join("redis.log")).unwrap_or_default();
                return Err(format!("redis-server exited with {status}:\n{log}").into());
            }
            if let Ok(mut con) = server.connect() {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return Ok(server);
                }
            }
            if Instant::now() > deadline {
                return Err(format!("redis-server did not answer PING on port {port} within 10 s").into());
            }
            sleep(Duration::from_millis(50));
        }
    }

    /// A new client connection.
    pub fn connect(&self) -> Res<Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        Ok(client.get_connection()?)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `INFO section` as field -> value.
pub fn info(con: &mut Connection, section: &str) -> Res<HashMap<String, String>> {
    let text: String = redis::cmd("INFO").arg(section).query(con)?;
    Ok(text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.trim().to_string())).collect())
}

/// `used_memory` in bytes.
pub fn used_memory(con: &mut Connection) -> Res<u64> {
    let m = info(con, "memory")?;
    Ok(m.get("used_memory").ok_or("INFO memory has no used_memory")?.parse()?)
}

/// `(calls, usec)` of each command from `INFO commandstats`.
pub fn command_stats(con: &mut Connection) -> Res<HashMap<String, (u64, u64)>> {
    let mut out = HashMap::new();
    for (k, v) in info(con, "commandstats")? {
        let Some(cmd) = k.strip_prefix("cmdstat_") else { continue };
        let field = |name: &str| -> Option<u64> {
            v.split(',')
                .find_map(|kv| kv.strip_prefix(name).and_then(|x| x.strip_prefix('=')))
                .and_then(|x| x.parse().ok())
        };
        if let (Some(calls), Some(usec)) = (field("calls"), field("usec")) {
            out.insert(cmd.to_string(), (calls, usec));
        }
    }
    Ok(out)
}

/// Server-side microseconds per call of `cmd` between two `command_stats`
/// snapshots.
pub fn usec_per_call(
    before: &HashMap<String, (u64, u64)>,
    after: &HashMap<String, (u64, u64)>,
    cmd: &str,
) -> Option<f64> {
    let (c1, u1) = after.get(cmd).copied()?;
    let (c0, u0) = before.get(cmd).copied().unwrap_or((0, 0));
    (c1 > c0).then(|| (u1 - u0) as f64 / (c1 - c0) as f64)
}
