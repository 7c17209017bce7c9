//! The scale runner: bitsled's server and Redis side by side on millions of
//! small keys, and bitsled alone on data many times its memory budget.
//!
//! ```text
//! cargo build --release -p bitsled-cli
//! cargo run --release -p bitsled-bench --bin scale -- [--quick] [--keys N] [--maxmemory MIB] [--big] [--out DIR]
//! ```
//!
//! Needs `redis-server`, `redis-cli` and `redis-benchmark` on the PATH and
//! the release `bitsled` binary (built by the first command). For `--keys
//! N` (default 10^6) monthly sign-in keys `uid:sign:<uid>:202611` with
//! three SETBITs each, loaded with `redis-cli --pipe` into each server:
//!
//! - load time, resident memory after the load (and Redis's `used_memory`),
//!   bytes per key on disk for bitsled after a graceful stop;
//! - DBSIZE and default INFO round trips at that size (median of 50);
//! - SIGTERM to exit at that size;
//! - random GETBITs of the loaded keys from 50 clients, no pipelining
//!   (bitsled freshly restarted, so its caches are cold): ops/s, p50, p99;
//! - SETBIT latency from `redis-benchmark` with 50 clients, no pipelining,
//!   on up to 10^6 other keys (one 4 KiB page each) of database 1;
//! - FLUSHALL time, and how many keys a kill -9 two seconds after
//!   FLUSHALL's reply brings back (must be 0; `--fsync everysec`);
//! - embedded: `Db::set_bits` per key for the same keys (keys per second).
//!
//! `--maxmemory MIB` starts every `bitsled serve` with `--maxmemory
//! MIBmb` and gives the embedded run the same budgets (cache three
//! quarters, dirty changes and sled's cache an eighth each); Redis runs
//! without a limit either way.
//!
//! `--quick` (the CI smoke run) uses 10^5 keys and 5 x 10^4 SETBITs.
//! `--big` adds bitsled alone with a 256 MiB `--maxmemory`-style budget:
//! 32 keys of 10^9 bits at 50% density (4 GB of bits) loaded whole, then a
//! cold BITOP OR of all 32: rates and peak resident memory.
//!
//! `--bloom USERS` runs only the per-user Bloom filter section (bitsled
//! alone: the Debian Redis has no RedisBloom module): USERS users in blocks
//! of up to 10^6, each block 20 rounds of one `BF.ADD user:<uid>:seen
//! <item>` per user (default filter: capacity 100, error 0.01), loaded with
//! `redis-cli --pipe`; the time of each block, the peak RSS, the bytes on
//! disk per filter after a graceful stop, then on a restarted server (cold
//! caches) `redis-benchmark` BF.EXISTS of random users against GET of
//! random small strings loaded beside them (every server with
//! `--maxmemory` if given). Writes `DIR/scale-bloom.md`.
//!
//! Prints the table and writes it to `DIR/scale.md` (default
//! `bench-results/`, or `target/scale-quick/` with `--quick`).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

use bitsled_bench::{start_bitsled, start_redis, status_kb, Res};

struct Opts {
    keys: u64,
    /// `--maxmemory` of bitsled's server and embedded budgets, MiB.
    maxmemory_mib: Option<u64>,
    bloom: Option<u64>,
    requests: u64,
    big: bool,
    out: PathBuf,
}

fn parse_opts() -> Res<Opts> {
    let mut o = Opts {
        keys: 1_000_000,
        maxmemory_mib: None,
        bloom: None,
        requests: 500_000,
        big: false,
        out: PathBuf::from("bench-results"),
    };
    let mut out_given = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--keys" => o.keys = args.next().ok_or("--keys N")?.parse()?,
            "--big" => o.big = true,
            "--maxmemory" => o.maxmemory_mib = Some(args.next().ok_or("--maxmemory MIB")?.parse()?),
            "--bloom" => o.bloom = Some(args.next().ok_or("--bloom USERS")?.parse()?),
            "--quick" => {
                o.keys = 100_000;
                o.requests = 50_000;
                if !out_given {
                    o.out = PathBuf::from("target/scale-quick");
                }
            }
            "--out" => {
                o.out = PathBuf::from(args.next().ok_or("--out DIR")?);
                out_given = true;
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: scale [--quick] [--keys N] [--maxmemory MIB] [--big] [--bloom USERS] [--out DIR]"
                )
                .into())
            }
        }
    }
    Ok(o)
}

/// The sign-in workload as RESP: three SETBITs per key.
fn signin_file(path: &Path, keys: u64) -> Res<u64> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut r = rand::rngs::StdRng::seed_from_u64(1);
    let mut n = 0;
    for uid in 0..keys {
        let k = format!("uid:sign:{uid}:202611");
        for _ in 0..3 {
            let d = r.gen_range(0..30).to_string();
            write!(f, "*4\r\n$6\r\nSETBIT\r\n${}\r\n{k}\r\n${}\r\n{d}\r\n$1\r\n1\r\n", k.len(), d.len())?;
            n += 1;
        }
    }
    f.flush()?;
    Ok(n)
}

/// `redis-cli --pipe` of `file` into `port`: seconds.
fn pipe(port: u16, file: &Path) -> Res<f64> {
    let mut f = std::fs::File::open(file)?;
    pipe_from(port, move |w| std::io::copy(&mut f, w).map(|_| ()))
}

/// Median round trip of `cmd` over 50 calls, in milliseconds.
fn round_trip(con: &mut redis::Connection, cmd: &str) -> Res<f64> {
    let mut v = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        redis::cmd(cmd).query::<redis::Value>(con)?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

/// Random GETBITs of the loaded sign-in keys (`keys` of them) from 50
/// clients, one request in flight each, `requests` in all: (requests/s,
/// p50 ms, p99 ms), every reply checked to be an integer (a missing key
/// would answer 0 too: the names are those `signin_file` writes). A client
/// of our own: `redis-benchmark` pads its random numbers to 12 digits,
/// which names no loaded key.
fn random_reads(port: u16, keys: u64, requests: u64) -> Res<(f64, f64, f64)> {
    const CLIENTS: u64 = 50;
    if keys == 0 {
        return Err("no loaded keys to read".into());
    }
    let per_client = requests.div_ceil(CLIENTS).max(1);
    let start = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || -> Result<Vec<f64>, String> {
                let mut con = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
                con.set_nodelay(true).map_err(|e| e.to_string())?;
                let mut r = rand::rngs::StdRng::seed_from_u64(1000 + c);
                let mut times = Vec::with_capacity(usize::try_from(per_client).unwrap_or(0));
                let mut reply = [0u8; 4];
                for _ in 0..per_client {
                    let k = format!("uid:sign:{}:202611", r.gen_range(0..keys));
                    let d = r.gen_range(0..30).to_string();
                    let req = format!("*3\r\n$6\r\nGETBIT\r\n${}\r\n{k}\r\n${}\r\n{d}\r\n", k.len(), d.len());
                    let t = Instant::now();
                    con.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
                    // `:0` or `:1` and the line end.
                    con.read_exact(&mut reply).map_err(|e| e.to_string())?;
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                    if !matches!(&reply, b":0\r\n" | b":1\r\n") {
                        return Err(format!("GETBIT replied {:?}", String::from_utf8_lossy(&reply)));
                    }
                }
                Ok(times)
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.join().map_err(|_| "a reader thread panicked")??);
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Ok((all.len() as f64 / secs, at(0.5), at(0.99)))
}

/// `redis-benchmark` SETBIT with 50 clients: (requests/s, p50 ms, p99 ms).
fn setbit_latency(port: u16, requests: u64) -> Res<(f64, f64, f64)> {
    benchmark(port, 1, requests, 1_000_000, &["SETBIT", "bench:__rand_int__", "100000", "1"])
}

/// `redis-benchmark` of `command` in database `db` with 50 clients and
/// `__rand_int__` below `range`: (requests/s, p50 ms, p99 ms).
fn benchmark(port: u16, db: u32, requests: u64, range: u64, command: &[&str]) -> Res<(f64, f64, f64)> {
    let out = Command::new("redis-benchmark")
        .args([
            "-p",
            &port.to_string(),
            "--dbnum",
            &db.to_string(),
            "-c",
            "50",
            "-n",
            &requests.to_string(),
            "-r",
            &range.to_string(),
            "--csv",
        ])
        .args(command)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().ok_or("no redis-benchmark output")?;
    let f: Vec<f64> = line.split(',').skip(1).filter_map(|x| x.trim_matches('"').parse().ok()).collect();
    match f[..] {
        [rps, _avg, _min, p50, _p95, p99, _max] => Ok((rps, p50, p99)),
        _ => Err(format!("unexpected redis-benchmark output: {line}").into()),
    }
}

fn du(path: &Path) -> u64 {
    fn walk(p: &Path) -> u64 {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                std::fs::read_dir(p).map_or(0, |rd| rd.filter_map(Result::ok).map(|e| walk(&e.path())).sum())
            }
            Ok(m) => m.len(),
            Err(_) => 0,
        }
    }
    walk(path)
}

/// A table row: a name and the bitsled and Redis figures as text.
struct Row(String, String, String, String);

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / f64::from(1 << 20))
}

fn main() -> Res<()> {
    if let Ok(phase) = std::env::var("SCALE_BIG_CHILD") {
        return big_child(&phase, Path::new(&std::env::var("SCALE_BIG_DIR")?));
    }
    let o = parse_opts()?;
    if let Some(users) = o.bloom {
        let limit = o.maxmemory_mib.map(|m| format!("{m}mb"));
        let serve_args: Vec<&str> = limit.as_deref().map_or_else(Vec::new, |l| vec!["--maxmemory", l]);
        return bloom_section(users, o.requests, &o.out, &serve_args);
    }
    let tmp = tempfile::tempdir()?;
    let mut rows: Vec<Row> = Vec::new();
    let n = o.keys;
    eprintln!("scale: {n} sign-in keys");
    let file = tmp.path().join("signin.resp");
    let commands = signin_file(&file, n)?;

    // Redis.
    let rdir = tempfile::tempdir()?;
    let mut redis = start_redis(rdir.path())?;
    let r_load = pipe(redis.port, &file)?;
    let mut rc = redis.con()?;
    let info: String = redis::cmd("INFO").arg("memory").query(&mut rc)?;
    let used: u64 =
        info.lines().find_map(|l| l.strip_prefix("used_memory:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    let r_rss = redis.rss();
    let r_dbsize = round_trip(&mut rc, "DBSIZE")?;
    let r_info = round_trip(&mut rc, "INFO")?;
    let r_reads = random_reads(redis.port, n, o.requests / 5)?;
    let r_bench = setbit_latency(redis.port, o.requests)?;
    let t = Instant::now();
    redis::cmd("FLUSHALL").query::<()>(&mut rc)?;
    let r_flush = t.elapsed().as_secs_f64();
    drop(rc);
    let r_stop = redis.signal_and_wait("-TERM")?;

    // bitsled: the load, its figures, a graceful stop (then the disk), the
    // latency run on a restarted server, FLUSHALL and a kill -9 after it.
    let bdir = tmp.path().join("bitsled-data");
    let limit = o.maxmemory_mib.map(|m| format!("{m}mb"));
    let serve_args: Vec<&str> = limit.as_deref().map_or_else(Vec::new, |l| vec!["--maxmemory", l]);
    let mut b = start_bitsled(&bdir, &serve_args)?;
    let b_load = pipe(b.port, &file)?;
    let b_rss = b.rss();
    let mut bc = b.con()?;
    let b_dbsize = round_trip(&mut bc, "DBSIZE")?;
    let b_info = round_trip(&mut bc, "INFO")?;
    drop(bc);
    let b_hwm = b.hwm();
    let b_stop = b.signal_and_wait("-TERM")?;
    let disk = du(&bdir);
    let mut b = start_bitsled(&bdir, &serve_args)?;
    let b_reads = random_reads(b.port, n, o.requests / 5)?;
    let b_bench = setbit_latency(b.port, o.requests)?;
    let mut bc = b.con()?;
    let t = Instant::now();
    redis::cmd("FLUSHALL").query::<()>(&mut bc)?;
    let b_flush = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(2));
    b.signal_and_wait("-KILL")?;
    let b2 = start_bitsled(&bdir, &serve_args)?;
    let back: u64 = redis::cmd("DBSIZE").query(&mut b2.con()?)?;
    drop(b2);

    if let Some(m) = o.maxmemory_mib {
        rows.push(Row(
            "bitsled's memory limit".into(),
            format!("serve --maxmemory {m}mb; embedded budgets the same"),
            "no limit".into(),
            "-".into(),
        ));
    }
    let keys_per_s =
        |s: f64| format!("{s:.2} s ({:.0}k keys/s, {:.0}k cmds/s)", n as f64 / s / 1e3, commands as f64 / s / 1e3);
    rows.push(Row(
        format!("load {n} sign-in keys with redis-cli --pipe"),
        keys_per_s(b_load),
        keys_per_s(r_load),
        ratio(b_load, r_load),
    ));
    rows.push(Row(
        "resident memory after the load".into(),
        mib(b_rss),
        format!("{} (used_memory {})", mib(r_rss), mib(used)),
        ratio(b_rss as f64, r_rss as f64),
    ));
    rows.push(Row(
        "on disk after a graceful stop".into(),
        format!("{} ({:.1} B/key)", mib(disk), disk as f64 / n as f64),
        format!("in memory: {:.1} B/key (used_memory)", used as f64 / n as f64),
        ratio(disk as f64, used as f64),
    ));
    rows.push(Row(
        format!("DBSIZE round trip at {n} keys"),
        format!("{b_dbsize:.3} ms"),
        format!("{r_dbsize:.3} ms"),
        ratio(b_dbsize, r_dbsize),
    ));
    rows.push(Row(
        format!("INFO round trip at {n} keys"),
        format!("{b_info:.3} ms"),
        format!("{r_info:.3} ms"),
        ratio(b_info, r_info),
    ));
    let bench = |x: (f64, f64, f64)| format!("{:.0} req/s, p50 {:.3} ms, p99 {:.3} ms", x.0, x.1, x.2);
    rows.push(Row(
        format!(
            "GETBIT of random loaded keys, 50 clients, {} requests (bitsled restarted: cold caches)",
            o.requests / 5
        ),
        bench(b_reads),
        bench(r_reads),
        format!("p99 {}", ratio(b_reads.2, r_reads.2)),
    ));
    rows.push(Row(
        format!("SETBIT, 50 clients, {} requests on paged keys (redis-benchmark)", o.requests),
        bench(b_bench),
        bench(r_bench),
        format!("p99 {}", ratio(b_bench.2, r_bench.2)),
    ));
    rows.push(Row(
        format!("SIGTERM to exit at {n} keys"),
        format!("{b_stop:.2} s (peak RSS until then: {})", mib(b_hwm)),
        format!("{r_stop:.2} s (after its latency run)"),
        ratio(b_stop, r_stop),
    ));
    rows.push(Row(
        format!("FLUSHALL at {n}+ keys"),
        format!("{:.1} ms; kill -9 2 s later brings back {back} keys", b_flush * 1e3),
        format!("{:.1} ms", r_flush * 1e3),
        ratio(b_flush, r_flush),
    ));
    if back != 0 {
        return Err(format!("{back} flushed keys came back after kill -9").into());
    }

    // Embedded: set_bits per key.
    {
        let dir = tempfile::tempdir()?;
        let mut config = bitsled::Config::new(dir.path());
        if let Some(m) = o.maxmemory_mib {
            let budget = m << 20;
            config = config.cache_bytes(budget / 4 * 3).dirty_bytes(budget / 8).store_cache_bytes(budget / 8);
        }
        let db = config.open()?;
        let mut r = rand::rngs::StdRng::seed_from_u64(1);
        let t = Instant::now();
        for uid in 0..n {
            let k = format!("uid:sign:{uid}:202611");
            let days = [r.gen_range(0..30), r.gen_range(0..30), r.gen_range(0..30)];
            db.set_bits(k.as_bytes(), &days, true)?;
        }
        let load = t.elapsed().as_secs_f64();
        db.flush()?;
        let all = t.elapsed().as_secs_f64();
        rows.push(Row(
            format!("embedded Db::set_bits, one call per key, {n} keys"),
            format!("{:.0}k keys/s ({:.0}k incl. the final flush)", n as f64 / load / 1e3, n as f64 / all / 1e3),
            "-".into(),
            "-".into(),
        ));
    }

    if o.big {
        big_section(&mut rows, tmp.path())?;
    }

    let mut md = String::from("| measurement | bitsled | Redis 7 | bitsled / Redis |\n|---|---|---|---|\n");
    for Row(name, b, r, q) in &rows {
        md.push_str(&format!("| {name} | {b} | {r} | {q} |\n"));
    }
    println!("{md}");
    std::fs::create_dir_all(&o.out)?;
    std::fs::write(o.out.join("scale.md"), &md)?;
    Ok(())
}

/// 32 keys of 10^9 bits at 50% with a 256 MiB budget: load and a cold OR.
fn big_section(rows: &mut Vec<Row>, tmp: &Path) -> Res<()> {
    // A child process per phase, so each peak RSS is its own.
    let dir = tmp.join("big");
    let exe = std::env::current_exe()?;
    for phase in ["load", "or"] {
        let mut child = Command::new(&exe)
            .stdout(Stdio::piped())
            .env("SCALE_BIG_CHILD", phase)
            .env("SCALE_BIG_DIR", &dir)
            .spawn()?;
        let mut text = String::new();
        child.stdout.take().ok_or("stdout")?.read_to_string(&mut text)?;
        if !child.wait()?.success() {
            return Err(format!("big {phase} failed: {text}").into());
        }
        let f: HashMap<&str, f64> = text
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect();
        let gbs = f.get("bytes").copied().unwrap_or(0.0) / f.get("secs").copied().unwrap_or(1.0) / 1e9;
        rows.push(Row(
            format!(
                "32 x 10^9-bit keys at 50% (4 GB), 256 MiB budget: {}",
                if phase == "load" { "whole-value load from a reader incl. flush" } else { "cold BITOP OR of all 32" }
            ),
            format!(
                "{:.2} s, {gbs:.2} GB/s, peak RSS {}",
                f.get("secs").copied().unwrap_or(0.0),
                mib(f.get("hwm").copied().unwrap_or(0.0) as u64)
            ),
            "- (would hold 4 GB in RAM)".into(),
            "-".into(),
        ));
    }
    Ok(())
}

/// Keys of the big section.
const BIG_KEYS: usize = 32;
/// Bytes per big key: 10^9 bits.
const BIG_BYTES: usize = 125_000_000;

/// One phase of the big section in its own process; prints `secs=`,
/// `bytes=` and `hwm=` (peak resident bytes).
fn big_child(phase: &str, dir: &Path) -> Res<()> {
    let budget: u64 = 256 << 20;
    let db = bitsled::Config::new(dir)
        .cache_bytes(budget / 4 * 3)
        .dirty_bytes(budget / 8)
        .store_cache_bytes(budget / 8)
        .open()?;
    let keys: Vec<Vec<u8>> = (0..BIG_KEYS).map(|i| format!("big:{i}").into_bytes()).collect();
    let mut secs = 0.0;
    if phase == "load" {
        // Each value streams from its generator a page at a time: the
        // process holds none of it beyond bitsled's own memory.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for k in &keys {
            let t = Instant::now();
            let mut value = XorShiftBytes { x: &mut x, left: BIG_BYTES };
            db.set_from_reader(k, &mut value)?;
            secs += t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        db.flush()?;
        secs += t.elapsed().as_secs_f64();
    } else {
        let srcs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let t = Instant::now();
        db.bitop(bitsled::BitOp::Or, b"big:or", &srcs)?;
        db.flush()?;
        secs = t.elapsed().as_secs_f64();
    }
    let hwm = status_kb(std::process::id(), "VmHWM") * 1024;
    println!("secs={secs} bytes={} hwm={hwm}", BIG_KEYS * BIG_BYTES);
    Ok(())
}

/// `left` pseudo-random bytes (xorshift64, each step's 8 bytes little
/// endian) as a reader.
struct XorShiftBytes<'a> {
    x: &'a mut u64,
    left: usize,
}

impl Read for XorShiftBytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.left) / 8 * 8;
        let n = if n == 0 { buf.len().min(self.left) } else { n };
        for chunk in buf[..n].chunks_mut(8) {
            let x = &mut *self.x;
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        self.left -= n;
        Ok(n)
    }
}

/// Adds per user in the Bloom section.
const BLOOM_ADDS: u64 = 20;
/// Users per timed block of the Bloom section.
const BLOOM_BLOCK: u64 = 1_000_000;

/// `redis-cli --pipe` into `port` of the commands `write` produces (in a
/// thread, so no file holds them): seconds.
fn pipe_from(port: u16, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()> + Send + 'static) -> Res<f64> {
    let t = Instant::now();
    let mut child = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let stdin = child.stdin.take().ok_or("stdin")?;
    let writer = std::thread::spawn(move || {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, stdin);
        write(&mut w).and_then(|()| w.flush())
    });
    let out = child.wait_with_output()?;
    writer.join().map_err(|_| "the command writer panicked")??;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.contains("errors: 0") {
        return Err(format!("redis-cli --pipe failed: {text}").into());
    }
    Ok(t.elapsed().as_secs_f64())
}

/// One RESP command.
fn resp(w: &mut dyn Write, parts: &[&[u8]]) -> std::io::Result<()> {
    write!(w, "*{}\r\n", parts.len())?;
    for p in parts {
        write!(w, "${}\r\n", p.len())?;
        w.write_all(p)?;
        w.write_all(b"\r\n")?;
    }
    Ok(())
}

/// Per-user Bloom filters: load blocks of users, disk per filter, and cold
/// BF.EXISTS against cold GET on one server.
fn bloom_section(users: u64, requests: u64, out: &Path, serve_args: &[&str]) -> Res<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("bitsled-data");
    let mut b = start_bitsled(&dir, serve_args)?;
    let mut rows: Vec<Row> = Vec::new();
    let mut blocks = Vec::new();
    let mut from = 0;
    while from < users {
        let to = (from + BLOOM_BLOCK).min(users);
        let secs = pipe_from(b.port, move |w| {
            for round in 0..BLOOM_ADDS {
                for uid in from..to {
                    let key = format!("user:{uid}:seen");
                    let item = format!("news:{}", uid.wrapping_mul(7919).wrapping_add(round * 104_729) % 1_000_003);
                    resp(w, &[b"BF.ADD", key.as_bytes(), item.as_bytes()])?;
                }
            }
            Ok(())
        })?;
        eprintln!("bloom: users {from}..{to}: {secs:.2} s");
        blocks.push(((to - from) * BLOOM_ADDS, secs));
        from = to;
    }
    // Small strings beside the filters, for the GET baseline.
    let strings = users.min(BLOOM_BLOCK);
    pipe_from(b.port, move |w| {
        for uid in 0..strings {
            resp(w, &[b"SET", format!("str:{uid}").as_bytes(), b"0123456789"])?;
        }
        Ok(())
    })?;
    let rss = b.rss();
    let hwm = b.hwm();
    let stop = b.signal_and_wait("-TERM")?;
    let disk = du(&dir);
    let b = start_bitsled(&dir, serve_args)?;
    let exists = benchmark(b.port, 0, requests, users, &["BF.EXISTS", "user:__rand_int__:seen", "news:1"])?;
    drop(b);
    let b = start_bitsled(&dir, serve_args)?;
    let get = benchmark(b.port, 0, requests, strings, &["GET", "str:__rand_int__"])?;
    drop(b);

    let total: f64 = blocks.iter().map(|b| b.1).sum();
    let commands = users * BLOOM_ADDS;
    let first = blocks[0].1 / blocks[0].0 as f64;
    let worst = blocks.iter().map(|b| b.1 / b.0 as f64).fold(0.0, f64::max);
    let per_block: Vec<String> = blocks.iter().map(|b| format!("{:.2}", b.1)).collect();
    rows.push(Row(
        format!("{users} users x {BLOOM_ADDS} BF.ADD (redis-cli --pipe, blocks of 10^6 users)"),
        format!("{total:.2} s ({:.0}k cmds/s); per block: {} s", commands as f64 / total / 1e3, per_block.join(", ")),
        "-".into(),
        format!("slowest block / first: {:.2}x", worst / first),
    ));
    // A default filter's one sub-filter: capacity 100 at 0.5% (the
    // tightened first rate), 1,152 bits; BF.INFO's Size of 240 adds
    // RedisBloom's 96 bytes of structs.
    let bits_bytes = 144.0;
    rows.push(Row(
        "on disk after a graceful stop (filters + small strings)".into(),
        format!(
            "{} ({:.0} B/filter; {:.2}x the 144 bytes of bits)",
            mib(disk),
            disk as f64 / users as f64,
            disk as f64 / users as f64 / bits_bytes
        ),
        "-".into(),
        "-".into(),
    ));
    rows.push(Row(
        "resident memory after the load / peak".into(),
        format!("{} / {}", mib(rss), mib(hwm)),
        "-".into(),
        "-".into(),
    ));
    rows.push(Row(format!("SIGTERM to exit at {users} filters"), format!("{stop:.2} s"), "-".into(), "-".into()));
    let bench = |x: (f64, f64, f64)| format!("{:.0} req/s, p50 {:.3} ms, p99 {:.3} ms", x.0, x.1, x.2);
    rows.push(Row(
        format!("cold BF.EXISTS of random users vs cold GET of random small strings, 50 clients, {requests} requests"),
        bench(exists),
        format!("GET: {}", bench(get)),
        format!("p99 {}", ratio(exists.2, get.2)),
    ));
    let mut md = String::from("| measurement | bitsled | peer (same server) | ratio |\n|---|---|---|---|\n");
    for Row(name, b, r, q) in &rows {
        md.push_str(&format!("| {name} | {b} | {r} | {q} |\n"));
    }
    println!("{md}");
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("scale-bloom.md"), &md)?;
    Ok(())
}
