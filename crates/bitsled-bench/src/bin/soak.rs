//! A mixed load held for a long time against `bitsled serve` with a memory
//! budget, sampled at intervals: does resident memory stay inside the
//! budget, does the store stay near the size of its live data, does
//! throughput hold?
//!
//! ```text
//! cargo build --release -p bitsled-cli
//! cargo run --release -p bitsled-bench --bin soak -- [--secs N] [--maxmemory 256mb] [--every S] [--quick] [--out DIR]
//! ```
//!
//! Four clients (`--clients` picks some), each its own connection, one
//! command at a time:
//! - bitmaps: SETBIT on 30 daily sign-in bitmaps of 10^7 users, a BITCOUNT
//!   every 100 writes;
//! - strings: SET and GET of 10^6 profile keys (16-byte values);
//! - HyperLogLog: PFADD of random visitors to 30 daily sketches, a PFCOUNT
//!   every 100;
//! - expiry: SET EX of session keys living 5 to 30 s (so keys expire and
//!   are swept all the time).
//!
//! Every `--every` seconds (10 by default) it records the server's
//! resident memory, INFO's `used_memory`, the database directory's size, the
//! bytes the server wrote to storage in the interval (`/proc/PID/io`),
//! DBSIZE, the operations done in the interval and the 99th percentile of
//! their round trips (a client's step: its command, and every 100th step
//! the BITCOUNT or PFCOUNT after it). At the end it prints
//! the table (and writes `soak.md` under `--out`), then the figures the
//! targets name: peak RSS against the budget + 64 MiB, throughput of the
//! last fifth of the run against the first fifth, and, after a SIGTERM,
//! the directory against the bytes of the live keys' records (`bitsled
//! stats`). `--quick` is a 60 s run for CI; any failed command or a server
//! that dies fails the run, and so does, with `--quick`, a peak RSS above
//! the budget + 64 MiB.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bitsled_bench::{dir_bytes, start_bitsled, Proc, Res};
use rand::{Rng, SeedableRng};

struct Opts {
    /// The workloads run (0 bitmaps, 1 strings, 2 HyperLogLog, 3 expiry).
    clients: Vec<usize>,
    secs: u64,
    every: u64,
    maxmemory: String,
    out: Option<PathBuf>,
    /// Fail the run when the peak RSS passes the budget + 64 MiB.
    enforce: bool,
}

fn opts() -> Res<Opts> {
    let mut o =
        Opts { clients: vec![0, 1, 2, 3], secs: 1800, every: 10, maxmemory: "256mb".into(), out: None, enforce: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--secs" => o.secs = value()?.parse()?,
            "--every" => o.every = value()?.parse()?,
            "--maxmemory" => o.maxmemory = value()?,
            "--clients" => {
                o.clients = value()?
                    .split(',')
                    .map(|c| WORKLOADS.iter().position(|w| *w == c).ok_or_else(|| format!("no workload {c:?}")))
                    .collect::<Result<_, _>>()?;
            }
            "--out" => o.out = Some(PathBuf::from(value()?)),
            "--quick" => {
                o.secs = 60;
                o.every = 5;
                o.enforce = true;
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: soak [--secs N] [--every S] [--maxmemory SIZE] \
                     [--clients bitmaps,strings,hll,expiry] [--quick] [--out DIR]"
                )
                .into())
            }
        }
    }
    if o.every == 0 || o.secs < o.every {
        return Err("--every must be at least 1 and at most --secs".into());
    }
    Ok(o)
}

/// The workloads, by the names `--clients` takes.
const WORKLOADS: [&str; 4] = ["bitmaps", "strings", "hll", "expiry"];

/// Round trips of the current interval, in microseconds, from every client.
type Latencies = Mutex<Vec<u32>>;

/// One client's loop: `kind` picks the workload; counts into `ops` and
/// records each round trip (a step's commands) into `lat` until `stop`;
/// the first failure ends it and is returned.
fn client(p: &Proc, kind: usize, ops: &AtomicU64, lat: &Latencies, stop: &AtomicBool) -> Res<()> {
    let mut con = p.con()?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(kind as u64 + 1);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let day = rng.gen_range(0..30);
        let began = Instant::now();
        match kind {
            0 => {
                let user: u64 = rng.gen_range(0..10_000_000);
                let _: i64 = redis::cmd("SETBIT").arg(format!("sign:{day}")).arg(user).arg(1).query(&mut con)?;
                if n % 100 == 0 {
                    let _: i64 = redis::cmd("BITCOUNT").arg(format!("sign:{day}")).query(&mut con)?;
                }
            }
            1 => {
                let id: u64 = rng.gen_range(0..1_000_000);
                if n % 2 == 0 {
                    let value: [u8; 16] = rng.gen();
                    let _: () = redis::cmd("SET").arg(format!("profile:{id}")).arg(&value[..]).query(&mut con)?;
                } else {
                    let _: Option<Vec<u8>> = redis::cmd("GET").arg(format!("profile:{id}")).query(&mut con)?;
                }
            }
            2 => {
                let visitor: u64 = rng.gen();
                let _: i64 = redis::cmd("PFADD").arg(format!("uv:{day}")).arg(visitor).query(&mut con)?;
                if n % 100 == 0 {
                    let _: i64 = redis::cmd("PFCOUNT").arg(format!("uv:{day}")).query(&mut con)?;
                }
            }
            _ => {
                let id: u64 = rng.gen_range(0..1_000_000);
                let ttl = rng.gen_range(5..=30);
                let _: () =
                    redis::cmd("SET").arg(format!("session:{id}")).arg("x").arg("EX").arg(ttl).query(&mut con)?;
            }
        }
        n += 1;
        let micros = u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX);
        lat.lock().map_err(|_| "a client panicked")?.push(micros);
        ops.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// One sample of the run.
struct Sample {
    at: u64,
    rss: u64,
    used: u64,
    /// The allocator's bytes allocated and held (INFO `allocator_allocated`,
    /// `allocator_active`); 0 where the server does not say.
    heap: u64,
    held: u64,
    disk: u64,
    /// Bytes the server wrote to storage since the last sample.
    written: u64,
    keys: u64,
    ops: u64,
    /// The 99th percentile round trip of the interval, microseconds.
    p99: u32,
}

fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> Res<Option<u64>> {
    let text: String = redis::cmd("INFO").arg(section).query(con)?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().parse().ok()))
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / f64::from(1 << 20))
}

fn main() -> Res<()> {
    let o = opts()?;
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("db");
    let server = Arc::new(start_bitsled(&dir, &["--maxmemory", &o.maxmemory])?);
    let stop = Arc::new(AtomicBool::new(false));
    let ops: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    let lat: Arc<Latencies> = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = o
        .clients
        .iter()
        .map(|&kind| {
            let (server, stop, ops, lat) = (Arc::clone(&server), Arc::clone(&stop), Arc::clone(&ops), Arc::clone(&lat));
            std::thread::spawn(move || client(&server, kind, &ops[kind], &lat, &stop).map_err(|e| e.to_string()))
        })
        .collect();
    let mut con = server.con()?;
    // The server's own reading of --maxmemory.
    let budget = info_field(&mut con, "memory", "maxmemory")?.ok_or("INFO memory gives no maxmemory")?;
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut last_ops = 0;
    let mut last_written = server.written();
    let mut peak_rss = 0;
    while start.elapsed().as_secs() < o.secs {
        std::thread::sleep(Duration::from_secs(o.every));
        if workers.iter().any(std::thread::JoinHandle::is_finished) {
            break;
        }
        let total: u64 = ops.iter().map(|n| n.load(Ordering::Relaxed)).sum();
        let rss = server.rss();
        peak_rss = peak_rss.max(rss);
        let written = server.written();
        let mut round_trips = std::mem::take(&mut *lat.lock().map_err(|_| "a client panicked")?);
        round_trips.sort_unstable();
        let p99 = round_trips.get(round_trips.len() * 99 / 100).copied().unwrap_or(0);
        samples.push(Sample {
            at: start.elapsed().as_secs(),
            rss,
            used: info_field(&mut con, "memory", "used_memory")?.unwrap_or(0),
            heap: info_field(&mut con, "allocator", "allocator_allocated")?.unwrap_or(0),
            held: info_field(&mut con, "allocator", "allocator_active")?.unwrap_or(0),
            disk: dir_bytes(&dir),
            written: written - last_written.min(written),
            keys: redis::cmd("DBSIZE").query(&mut con)?,
            ops: total - last_ops,
            p99,
        });
        last_ops = total;
        last_written = written;
        eprintln!(
            "soak: {} s, {} ops/s, RSS {}",
            start.elapsed().as_secs(),
            total / start.elapsed().as_secs().max(1),
            mib(rss)
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().map_err(|_| "a client panicked")?.map_err(|e| format!("a client failed: {e}"))?;
    }
    let peak = server.hwm().max(peak_rss);
    drop(con);
    let mut server = Arc::into_inner(server).ok_or("the server handle is still shared")?;
    let stop_secs = server.signal_and_wait("-TERM")?;
    report(&o, budget, &samples, peak, stored_bytes(&dir)?, stop_secs)
}

/// The bytes bitsled stores for the live keys of `dir` (`bitsled stats`).
fn stored_bytes(dir: &Path) -> Res<u64> {
    let out = std::process::Command::new(bitsled_bench::bitsled_bin()?).arg("--db").arg(dir).arg("stats").output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("stored bytes:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no stored bytes in `bitsled stats`: {text}").into())
}

fn report(o: &Opts, budget: u64, samples: &[Sample], peak: u64, stored: u64, stop_secs: f64) -> Res<()> {
    if samples.len() < 2 {
        return Err("the run ended before two samples".into());
    }
    let mut text = format!(
        "# Soak: {} s, `bitsled serve --maxmemory {}`, clients: {}\n\n| s | ops/s | p99 | RSS | used_memory | heap allocated / held | on disk | written/s | keys |\n|---|---|---|---|---|---|---|---|---|\n",
        o.secs,
        o.maxmemory,
        o.clients.iter().map(|&c| WORKLOADS[c]).collect::<Vec<_>>().join(", ")
    );
    for s in samples {
        text.push_str(&format!(
            "| {} | {:.0} | {:.2} ms | {} | {} | {} / {} | {} | {:.1} MiB | {} |\n",
            s.at,
            s.ops as f64 / o.every as f64,
            f64::from(s.p99) / 1000.0,
            mib(s.rss),
            mib(s.used),
            mib(s.heap),
            mib(s.held),
            mib(s.disk),
            s.written as f64 / o.every as f64 / f64::from(1 << 20),
            s.keys
        ));
    }
    let fifth = (samples.len() / 5).max(1);
    let rate = |ss: &[Sample]| ss.iter().map(|s| s.ops).sum::<u64>() as f64 / ss.len() as f64;
    let (first, last) = (rate(&samples[..fifth]), rate(&samples[samples.len() - fifth..]));
    let disk = samples.last().map_or(0, |s| s.disk);
    text.push_str(&format!(
        "\npeak RSS {} against the budget + 64 MiB = {}; throughput of the last fifth / the first: {:.2}; \
         on disk at the end {} for {} of live records ({:.2}x); SIGTERM to exit {:.2} s\n",
        mib(peak),
        mib(budget + (64 << 20)),
        last / first.max(1.0),
        mib(disk),
        mib(stored),
        disk as f64 / stored.max(1) as f64,
        stop_secs,
    ));
    print!("{text}");
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(Path::new(dir).join("soak.md"), &text)?;
    }
    if o.enforce && peak > budget + (64 << 20) {
        return Err(format!("peak RSS {} passed the budget + 64 MiB ({})", mib(peak), mib(budget + (64 << 20))).into());
    }
    Ok(())
}
