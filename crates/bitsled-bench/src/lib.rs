//! What bitsled's measurement runners share: starting a server process
//! (`bitsled serve` or a private `redis-server`) on a free loopback port,
//! waiting for it, reading its memory from `/proc`, and the size of a
//! directory. Not published.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The runners' result type.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A server process (Redis or bitsled) on a loopback port.
pub struct Proc {
    /// The process.
    pub child: Child,
    /// Its loopback port.
    pub port: u16,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Its resident memory now, in bytes.
    #[must_use]
    pub fn rss(&self) -> u64 {
        status_kb(self.child.id(), "VmRSS") * 1024
    }

    /// Its peak resident memory, in bytes.
    #[must_use]
    pub fn hwm(&self) -> u64 {
        status_kb(self.child.id(), "VmHWM") * 1024
    }

    /// The bytes it has caused to be written to storage so far
    /// (`write_bytes` of `/proc/PID/io`; 0 if unreadable).
    #[must_use]
    pub fn written(&self) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/io", self.child.id())).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix("write_bytes:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    }

    /// A new connection to it.
    ///
    /// # Errors
    /// If it does not accept one.
    pub fn con(&self) -> Res<redis::Connection> {
        Ok(redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()?)
    }

    /// SIGTERM (or another signal), then the seconds until the process exits.
    ///
    /// # Errors
    /// If `kill` cannot be run or the wait fails.
    pub fn signal_and_wait(&mut self, sig: &str) -> Res<f64> {
        let t = Instant::now();
        Command::new("kill").args([sig, &self.child.id().to_string()]).status()?;
        self.child.wait()?;
        Ok(t.elapsed().as_secs_f64())
    }
}

/// A `/proc/PID/status` figure in KiB (`VmRSS`, `VmHWM`); 0 if absent.
#[must_use]
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A free loopback port.
///
/// # Errors
/// If no port can be bound.
pub fn free_port() -> Res<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits (up to 300 s) until `p` answers PING.
///
/// # Errors
/// If it never does.
pub fn wait_ready(p: &Proc) -> Res<()> {
    // Generous: a restart at 10^6 keys and more replays delta records first.
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        if let Ok(mut c) = p.con() {
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("no server answered on port {}", p.port).into())
}

/// A private `redis-server` (no persistence) working in `dir`.
///
/// # Errors
/// If it does not start or answer.
pub fn start_redis(dir: &Path) -> Res<Proc> {
    let port = free_port()?;
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir"])
        .arg(dir);
    spawn_server(cmd, port)
}

/// Starts `cmd`, a server that will listen on `port`, and waits until it
/// answers.
///
/// # Errors
/// If it does not start or answer.
pub fn spawn_server(mut cmd: Command, port: u16) -> Res<Proc> {
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    let p = Proc { child, port };
    wait_ready(&p)?;
    Ok(p)
}

/// The release `bitsled` binary: beside this runner in the target directory.
///
/// # Errors
/// If it is not built.
pub fn bitsled_bin() -> Res<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe.parent().map(|d| d.join("bitsled")).ok_or("no target directory")?;
    if !bin.exists() {
        return Err(format!("{} not found: run `cargo build --release -p bitsled-cli` first", bin.display()).into());
    }
    Ok(bin)
}

/// `bitsled --db DB serve` on a free port, with `extra` arguments.
///
/// # Errors
/// If it does not start or answer.
pub fn start_bitsled(db: &Path, extra: &[&str]) -> Res<Proc> {
    let port = free_port()?;
    let mut cmd = Command::new(bitsled_bin()?);
    cmd.arg("--db").arg(db).args(["serve", "--port", &port.to_string()]).args(extra);
    spawn_server(cmd, port)
}

/// The bytes of the files under `dir`, recursively (0 if it is missing).
#[must_use]
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
