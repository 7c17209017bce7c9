//! A connection storm and a crowd of idle clients, against `bitsled serve`
//! and a private `redis-server` in the same run: how long N new
//! connections take to be accepted and answered, and what N idle clients
//! cost the server in memory and threads.
//!
//! ```text
//! cargo build --release -p bitsled-cli
//! cargo run --release -p bitsled-bench --bin storm -- [--clients N] [--idle SECS]
//! ```
//!
//! For each server: N connections opened one after the other (N = 5,000 by
//! default), each sending `PING` at once; then every `+PONG` read. It
//! reports the time until all are answered, the slowest connect (a connect
//! of a second or more is a connection attempt the server's accept queue
//! dropped, retried by the kernel) and how many took that long; then, with
//! the N clients left idle for `--idle` seconds (5 by default, past
//! bitsled's 2 s release of idle input buffers), the server's resident
//! memory and threads against its own figures before the storm.
//!
//! The runner holds N sockets at once: the open-file limit (`ulimit -n`)
//! must exceed N by some margin, which it checks first.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bitsled_bench::{start_bitsled, start_redis, status_kb, Proc, Res};

/// What one server did.
struct Storm {
    /// Seconds until every client was connected and answered.
    answered_secs: f64,
    /// The slowest single connect, seconds.
    slowest_connect: f64,
    /// Connects that took a second or more.
    retried: usize,
    rss_before: u64,
    rss_idle: u64,
    threads_idle: u64,
}

/// The soft open-file limit of this process (`u64::MAX` if unlimited or
/// unknown).
fn open_file_limit() -> u64 {
    let text = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

fn storm(server: &Proc, clients: usize, idle: Duration) -> Res<Storm> {
    let rss_before = server.rss();
    let start = Instant::now();
    let mut socks = Vec::with_capacity(clients);
    let (mut slowest_connect, mut retried) = (0f64, 0);
    for _ in 0..clients {
        let t = Instant::now();
        let mut s = TcpStream::connect(("127.0.0.1", server.port))?;
        let took = t.elapsed().as_secs_f64();
        slowest_connect = slowest_connect.max(took);
        retried += usize::from(took >= 1.0);
        s.write_all(b"PING\r\n")?;
        socks.push(s);
    }
    for s in &mut socks {
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut reply = [0u8; 7];
        s.read_exact(&mut reply)?;
        if &reply != b"+PONG\r\n" {
            return Err(format!("a client got {:?}, not +PONG", String::from_utf8_lossy(&reply)).into());
        }
    }
    let answered_secs = start.elapsed().as_secs_f64();
    std::thread::sleep(idle);
    let rss_idle = server.rss();
    let threads_idle = status_kb(server.child.id(), "Threads");
    drop(socks);
    Ok(Storm { answered_secs, slowest_connect, retried, rss_before, rss_idle, threads_idle })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

fn main() -> Res<()> {
    let (mut clients, mut idle) = (5000usize, 5u64);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--clients" => clients = value()?.parse()?,
            "--idle" => idle = value()?.parse()?,
            other => return Err(format!("unknown argument {other:?} (--clients N, --idle SECS)").into()),
        }
    }
    let need = clients as u64 + 64;
    if open_file_limit() < need {
        return Err(format!(
            "the open-file limit is {}; {clients} clients need {need} (`ulimit -n {need}`)",
            open_file_limit()
        )
        .into());
    }
    let tmp = tempfile::tempdir()?;
    let idle = Duration::from_secs(idle);
    let max = (clients + 16).to_string();
    let redis = {
        let server = start_redis(tmp.path())?;
        let mut con = server.con()?;
        redis::cmd("CONFIG").arg("SET").arg("maxclients").arg(&max).query::<()>(&mut con)?;
        drop(con);
        storm(&server, clients, idle)?
    };
    let ours = {
        let server = start_bitsled(&tmp.path().join("db"), &["--maxclients", &max])?;
        storm(&server, clients, idle)?
    };
    println!("{clients} clients opened one after the other, each sending PING; then idle {} s", idle.as_secs());
    println!("| figure | bitsled | Redis | bitsled/Redis |");
    println!("|---|---|---|---|");
    let row = |name: &str, b: f64, r: f64, unit: &str| {
        let ratio = if r > 0.0 { format!("{:.2}x", b / r) } else { "-".into() };
        println!("| {name} | {b:.2}{unit} | {r:.2}{unit} | {ratio} |");
    };
    row("all connected and answered", ours.answered_secs, redis.answered_secs, " s");
    row("slowest connect", ours.slowest_connect, redis.slowest_connect, " s");
    println!(
        "| connects of 1 s or more (dropped by a full accept queue, retried) | {} | {} | - |",
        ours.retried, redis.retried
    );
    row("resident memory before", mib(ours.rss_before), mib(redis.rss_before), " MiB");
    row("resident memory with the clients idle", mib(ours.rss_idle), mib(redis.rss_idle), " MiB");
    let per = |s: &Storm| (s.rss_idle.saturating_sub(s.rss_before)) as f64 / clients as f64 / 1024.0;
    row("resident memory per idle client", per(&ours), per(&redis), " KiB");
    println!("| threads with the clients idle | {} | {} | - |", ours.threads_idle, redis.threads_idle);
    Ok(())
}
