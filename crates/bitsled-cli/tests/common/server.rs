//! Starting `bitsled serve` (the built binary) on a free loopback port for
//! a test (the raw-socket helpers are `bitsled_testkit::wire`).

#![allow(dead_code, reason = "each test file uses a different part")]

use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running `bitsled serve`; killed (SIGKILL) on drop if still running.
pub struct Served {
    pub child: Child,
    /// Its loopback port.
    pub port: u16,
    pub dir: PathBuf,
}

impl Served {
    /// Starts `bitsled --db dir serve --port 0 EXTRA...` (the port EXTRA
    /// names, if it does) and waits until it listens (it prints the
    /// address on stderr).
    pub fn start(dir: &Path, extra: &[&str]) -> Served {
        Served::start_with_env(dir, extra, &[])
    }

    /// [`Served::start`] with `env` (name, value) added to its environment.
    pub fn start_with_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Served {
        Served::try_start_with_env(dir, extra, env).unwrap_or_else(|said| panic!("bitsled serve did not start: {said}"))
    }

    /// [`Served::start_with_env`], or, if the server exits before it says
    /// where it listens, all it wrote to its standard error (an error's
    /// causes follow its first line). Lines before the listening one (a
    /// note about open files or malloc's tunables) are passed over.
    fn try_start_with_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Result<Served, String> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bitsled"))
            .arg("--db")
            .arg(dir)
            .arg("serve")
            .args(if extra.contains(&"--port") { &[][..] } else { &["--port", "0"][..] })
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bitsled serve");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut said = String::new();
        let port = loop {
            let mut line = String::new();
            if stderr.read_line(&mut line).expect("read the server's standard error") == 0 {
                let _ = child.wait();
                return Err(said);
            }
            let port = line
                .split("listening on 127.0.0.1:")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|p| p.parse::<u16>().ok());
            if let Some(port) = port {
                break port;
            }
            said.push_str(&line);
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
        });
        Ok(Served { child, port, dir: dir.to_path_buf() })
    }

    /// A `redis` crate connection.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .expect("client")
            .get_connection()
            .expect("connect")
    }

    /// A raw socket with a 10 s read timeout.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        s
    }

    /// Sends SIGTERM (or SIGKILL) through `kill`.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status().expect("kill");
        assert!(ok.success());
    }

    /// Waits for the process to exit (at most `limit`).
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                return st;
            }
            assert!(Instant::now() < deadline, "bitsled serve did not exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
