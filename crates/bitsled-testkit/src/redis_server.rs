//! Shared by the tests that compare with a real Redis: starting a private
//! `redis-server` on a free loopback port, and what to do when there is none
//! (fail under `BITSLED_REQUIRE_REDIS=1`, else skip with a notice).

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` a test started; killed on drop.
pub struct Server {
    child: Child,
    /// Its loopback port.
    pub port: u16,
    /// Its working directory, private: a SAVE or BGSAVE writes `dump.rdb`
    /// here, never where another server would load it at start.
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `tool --version` runs.
pub fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Whether every one of `tools` is installed; if not, fails the test under
/// `BITSLED_REQUIRE_REDIS=1`, else prints a notice (the test then skips).
pub fn tools_present(tools: &[&str]) -> bool {
    if tools.iter().all(|t| have(t)) {
        return true;
    }
    let names = tools.join("/");
    assert!(
        std::env::var("BITSLED_REQUIRE_REDIS").as_deref() != Ok("1"),
        "BITSLED_REQUIRE_REDIS=1 but {names} not installed"
    );
    eprintln!("NOTICE: {names} not found; skipping the comparison with real Redis");
    false
}

/// Starts `redis-server` (no persistence) on a free loopback port and waits
/// until it accepts connections; `None` if it is not installed (see
/// [`tools_present`]).
///
/// A port found free can be taken by another test's server before this one
/// binds it; the server that answers is therefore asked for its process id,
/// and a server that is not ours means another try on another port.
pub fn start() -> Option<Server> {
    start_with(&[])
}

/// [`start`] with `extra` arguments for `redis-server` (for example
/// `--cluster-enabled yes`).
pub fn start_with(extra: &[&str]) -> Option<Server> {
    if !tools_present(&["redis-server"]) {
        return None;
    }
    for _attempt in 0..10 {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind").local_addr().expect("addr").port();
        let dir = tempfile::tempdir().expect("tempdir");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(extra)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let mut server = Server { child, port, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if server.child.try_wait().ok().flatten().is_some() {
                break; // it exited: the port was taken
            }
            if let Some(pid) = process_id(port) {
                if pid == server.child.id() {
                    return Some(server);
                }
                break; // another test's server answers on this port
            }
            assert!(Instant::now() < deadline, "redis-server did not start on port {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("could not start a private redis-server on a free port");
}

/// The `process_id` the server on `port` reports in `INFO server`.
fn process_id(port: u16) -> Option<u32> {
    use std::io::{Read, Write};
    let mut conn = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    conn.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&reply).contains("process_id:") || !reply.ends_with(b"\r\n") {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&reply);
    let line = text.lines().find(|l| l.starts_with("process_id:"))?;
    line["process_id:".len()..].trim().parse().ok()
}

/// Runs `cmd` with `input` on its stdin; its stdout, asserting it succeeded.
#[allow(dead_code, reason = "not every test that includes this file pipes a script")]
pub fn pipe(mut cmd: Command, input: &str) -> Vec<u8> {
    use std::io::Write;
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write script");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}
