//! Side-by-side comparison of bitsled with Redis, roaring-rs and a plain
//! in-memory word loop (the memory-bandwidth limit), on the same generated
//! data, in one process run.
//!
//! ```text
//! cargo run --release -p bitsled-bench --bin compare -- [--quick] [--no-redis] [--users N] [--repeats N] [--out DIR]
//! ```
//!
//! - bitsled: a real on-disk store in a temporary directory, public API only.
//! - Redis: a `redis-server` started here on a free 127.0.0.1 port (without
//!   persistence), loaded with pipelined SETs of whole values; timings are
//!   client round trips over loopback.
//! - roaring: `RoaringBitmap` in memory; sizes are `serialized_size()`.
//! - limit: fused AND/OR + popcount over `Vec<u64>` in memory.
//!
//! Writes `results.md`, `bytes_per_bit.png` and `times.png` to `--out`
//! (default `bench-results/`, or `target/compare-quick/` with `--quick`).
//! Timings are medians of `--repeats` runs (after one warm-up) with min-max.
//! `--quick` uses 10^6 users and 2 repeats and is the CI smoke test.
//! Every answer (counts, BITPOS) is checked against the in-memory limit, so
//! a wrong result fails the run instead of producing a figure.

mod chart;
mod data;
mod redis_peer;

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use bitsled::testing::{BenchPage, Encoding};
use bitsled::{BitOp, Config, Db, Unit};
use rand::SeedableRng;
use redis::Connection;
use roaring::{MultiOps, RoaringBitmap};

use data::Pattern;
use redis_peer::RedisServer;

/// Result type of the runner.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Daily bitmaps per pattern (the 30-day OR uses all of them, the 7-day AND
/// the first seven).
const DAYS: usize = 30;
/// Column order of the table.
const SYSTEMS: [&str; 4] = ["bitsled", "Redis", "roaring", "Vec<u64> loop"];
const BITSLED: usize = 0;
const REDIS: usize = 1;
const ROARING: usize = 2;
const LIMIT: usize = 3;

/// Command-line options.
struct Opts {
    quick: bool,
    no_redis: bool,
    users: u64,
    repeats: usize,
    out: PathBuf,
    signin_keys: u64,
    setbits: usize,
    rss_cache: u64,
    args: Vec<String>,
}

impl Opts {
    fn parse() -> Res<Opts> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let value = |name: &str| -> Option<String> {
            args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
        };
        for (i, a) in args.iter().enumerate() {
            let known = ["--quick", "--no-redis", "--users", "--repeats", "--out"];
            let is_value = i > 0 && ["--users", "--repeats", "--out"].contains(&args[i - 1].as_str());
            if !known.contains(&a.as_str()) && !is_value {
                return Err(format!(
                    "unknown argument {a:?}; usage: compare [--quick] [--no-redis] [--users N] [--repeats N] [--out DIR]"
                )
                .into());
            }
        }
        let quick = args.iter().any(|a| a == "--quick");
        let users =
            value("--users").map(|s| s.parse()).transpose()?.unwrap_or(if quick { 1_000_000 } else { 100_000_000 });
        if users < 64 {
            return Err("--users must be at least 64".into());
        }
        let repeats = value("--repeats").map(|s| s.parse()).transpose()?.unwrap_or(if quick { 2 } else { 5 });
        if repeats == 0 {
            return Err("--repeats must be at least 1".into());
        }
        let out = value("--out")
            .map_or_else(|| PathBuf::from(if quick { "target/compare-quick" } else { "bench-results" }), PathBuf::from);
        Ok(Opts {
            quick,
            no_redis: args.iter().any(|a| a == "--no-redis"),
            users,
            repeats,
            out,
            signin_keys: if quick { 10_000 } else { 1_000_000 },
            setbits: if quick { 100_000 } else { 1_000_000 },
            rss_cache: if quick { 1 << 20 } else { 64 << 20 },
            args,
        })
    }
}

/// What a row measures, which decides formatting and the sense of ratios.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Seconds; lower is better.
    Time,
    /// Bytes; lower is better.
    Bytes,
    /// Operations per second; higher is better.
    Rate,
}

/// Repeated measurements of one figure.
#[derive(Clone)]
struct Fig(Vec<f64>);

impl Fig {
    fn one(v: f64) -> Fig {
        Fig(vec![v])
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    fn median(&self) -> f64 {
        let v = self.sorted();
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            f64::midpoint(v[n / 2 - 1], v[n / 2])
        }
    }

    fn min(&self) -> f64 {
        self.sorted()[0]
    }

    fn max(&self) -> f64 {
        *self.sorted().last().expect("a figure has a value")
    }
}

/// One line of the table.
struct Row {
    name: String,
    kind: Kind,
    cells: [Option<Fig>; 4],
    note: String,
    /// Short label if the row goes into the time chart.
    chart: Option<String>,
}

impl Row {
    fn new(name: impl Into<String>, kind: Kind) -> Row {
        Row { name: name.into(), kind, cells: [None, None, None, None], note: String::new(), chart: None }
    }
}

/// One density of the size chart.
struct SizePoint {
    density: f64,
    ones: u64,
    dense: u64,
    ewah: u64,
    sparse: u64,
    chosen: u64,
    stored: u64,
    roaring: u64,
    redis: Option<u64>,
}

/// Everything measured in a run.
#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    server_side: Vec<(String, Option<f64>, Option<f64>)>,
    sizes: Vec<SizePoint>,
    encodings: Vec<(String, u64, u64, u64, u64)>,
    redis_version: Option<String>,
}

impl Report {
    fn push(&mut self, row: Row) {
        eprintln!(
            "  {:<70} {}",
            row.name,
            SYSTEMS
                .iter()
                .zip(&row.cells)
                .filter_map(|(s, c)| c.as_ref().map(|f| format!("{s}={}", fmt(row.kind, f.median()))))
                .collect::<Vec<_>>()
                .join("  ")
        );
        self.rows.push(row);
    }
}

/// Runs `f` once to warm up, then `repeats` times, timing each.
fn time<F: FnMut() -> Res<()>>(repeats: usize, mut f: F) -> Res<Fig> {
    f()?;
    let mut v = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64());
    }
    Ok(Fig(v))
}

fn check(what: &str, got: u64, want: u64) -> Res<()> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got}, expected {want}").into())
    }
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--rss-child") {
        return rss_child(&args[2..]);
    }
    let opts = Opts::parse()?;
    let started = Instant::now();
    let server = if opts.no_redis { None } else { Some(RedisServer::start()?) };
    let mut con = server.as_ref().map(RedisServer::connect).transpose()?;
    let mut rep = Report::default();
    if let Some(c) = con.as_mut() {
        rep.redis_version = redis_peer::info(c, "server")?.get("redis_version").cloned();
    }
    eprintln!(
        "compare: {} users, {} repeats, Redis {}",
        opts.users,
        opts.repeats,
        rep.redis_version.as_deref().unwrap_or("skipped")
    );

    let patterns = [
        Pattern::Random(0.5),
        Pattern::Random(0.01),
        Pattern::Random(0.0001),
        Pattern::Clustered { run: 512.0, gap: 4608.0 },
    ];
    for (i, &p) in patterns.iter().enumerate() {
        density_section(&opts, p, i, con.as_mut(), &mut rep)?;
    }
    bitpos_section(&opts, con.as_mut(), &mut rep)?;
    single_bit_section(&opts, 999_999_999, con.as_mut(), &mut rep)?;
    if !opts.quick {
        single_bit_section(&opts, u64::from(u32::MAX), con.as_mut(), &mut rep)?;
    }
    signin_section(&opts, con.as_mut(), &mut rep)?;
    setbit_section(&opts, con.as_mut(), &mut rep)?;
    size_curve(&opts, con.as_mut(), &mut rep)?;
    drop(con);
    drop(server);

    write_outputs(&opts, &rep, started.elapsed().as_secs_f64())?;
    eprintln!("compare: done in {:.0} s, results in {}", started.elapsed().as_secs_f64(), opts.out.display());
    Ok(())
}

/// Fused AND of the bitmaps + popcount, in cache-sized blocks.
fn and_count(days: &[Vec<u64>]) -> u64 {
    fused(days, |a, b| *a &= b)
}

/// Fused OR of the bitmaps + popcount, in cache-sized blocks.
fn or_count(days: &[Vec<u64>]) -> u64 {
    fused(days, |a, b| *a |= b)
}

fn fused(days: &[Vec<u64>], op: impl Fn(&mut u64, u64)) -> u64 {
    // A 1 MiB accumulator (in L2) and one sequential stream per source at a
    // time: measured faster than 8 KiB blocks for 30 sources on this machine.
    const BLOCK: usize = 1 << 17;
    let len = days[0].len();
    let mut acc = vec![0u64; BLOCK.min(len)];
    let mut total = 0u64;
    let mut start = 0;
    while start < len {
        let end = (start + BLOCK).min(len);
        let acc = &mut acc[..end - start];
        acc.copy_from_slice(&days[0][start..end]);
        for d in &days[1..] {
            for (a, &b) in acc.iter_mut().zip(&d[start..end]) {
                op(a, b);
            }
        }
        total += acc.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        start = end;
    }
    total
}

/// The 7-day AND and the 30-day OR, load time and sizes, for one pattern.
fn density_section(o: &Opts, pat: Pattern, idx: usize, con: Option<&mut Connection>, rep: &mut Report) -> Res<()> {
    let n = o.users;
    let label = pat.label();
    let short = match pat {
        Pattern::Random(p) => data::density_label(p),
        Pattern::Clustered { .. } => "clust".to_string(),
    };
    eprintln!("== {label}: {DAYS} days x {n} bits");
    let days: Vec<Vec<u64>> = (0..DAYS).map(|d| data::generate(pat, 1000 * idx as u64 + d as u64, n)).collect();
    let keys: Vec<String> = (0..DAYS).map(|d| format!("active:{idx}:202611{:02}", d + 1)).collect();
    let kb: Vec<&[u8]> = keys.iter().map(std::string::String::as_bytes).collect();
    let want_and = and_count(&days[..7]);
    let want_or = or_count(&days);
    let mean_ones = days.iter().map(|d| data::count(d)).sum::<u64>() as f64 / DAYS as f64;
    let dense_bytes = n.div_ceil(8) as f64;

    let mut load = Row::new(format!("{label}: load {DAYS} days (whole values; bitsled incl. flush)"), Kind::Time);
    let mut size = Row::new(format!("{label}: bytes per daily bitmap ({mean_ones:.0} bits set)"), Kind::Bytes);
    let mut and = Row::new(format!("{label}: 7-day BITOP AND + BITCOUNT"), Kind::Time);
    let mut or = Row::new(format!("{label}: {DAYS}-day BITOP OR + BITCOUNT"), Kind::Time);
    and.chart = Some(format!("AND7 {short}"));
    or.chart = Some(format!("OR{DAYS} {short}"));
    // The count alone, which bitsled computes without storing a result
    // (BITOP.COUNT); Redis has no such command, so its cells repeat BITOP +
    // BITCOUNT, and roaring and the loop repeat the rows above.
    let mut and_only = Row::new(format!("{label}: 7-day AND, count only (bitsled BITOP.COUNT)"), Kind::Time);
    let mut or_only = Row::new(format!("{label}: {DAYS}-day OR, count only (bitsled BITOP.COUNT)"), Kind::Time);
    let mut whole = Row::new(format!("whole-key BITCOUNT, {n} bits at {label}"), Kind::Time);
    if idx == 0 {
        whole.chart = Some("BITCOUNT".into());
    }

    // The limit: plain loops over the words in memory.
    size.cells[LIMIT] = Some(Fig::one(dense_bytes));
    and.cells[LIMIT] =
        Some(time(o.repeats, || check("limit AND", black_box(and_count(black_box(&days[..7]))), want_and))?);
    or.cells[LIMIT] = Some(time(o.repeats, || check("limit OR", black_box(or_count(black_box(&days))), want_or))?);
    let want_day0 = data::count(&days[0]);
    whole.cells[LIMIT] = Some(time(o.repeats, || check("limit count", data::count(black_box(&days[0])), want_day0))?);

    // bitsled, on disk, default configuration.
    let dir = tempfile::tempdir()?;
    {
        let db = Db::open(dir.path())?;
        let mut spent = 0.0;
        for (d, key) in days.iter().zip(&kb) {
            let bytes = data::to_bytes(d, n);
            let t = Instant::now();
            db.set(key, &bytes)?;
            spent += t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        db.flush()?;
        spent += t.elapsed().as_secs_f64();
        load.cells[BITSLED] = Some(Fig::one(spent));
        let (mut stored, mut dense, mut sparse, mut ewah, mut runs) = (0u64, 0u64, 0u64, 0u64, 0u64);
        for key in &kb {
            let s = db.key_stats(key)?.ok_or("loaded key missing")?;
            stored += s.stored_bytes;
            dense += s.dense_pages;
            sparse += s.sparse_pages;
            ewah += s.ewah_pages;
            runs += s.runs_pages;
        }
        size.cells[BITSLED] = Some(Fig::one(stored as f64 / DAYS as f64));
        size.note =
            format!("bitsled pages over {DAYS} days: {dense} dense, {sparse} sparse, {ewah} EWAH, {runs} run lists");
        rep.encodings.push((label.clone(), dense, sparse, ewah, runs));
        and.cells[BITSLED] = Some(time(o.repeats, || {
            db.bitop(BitOp::And, b"dest:and", &kb[..7])?;
            check("bitsled AND", db.bitcount(b"dest:and", None)?, want_and)
        })?);
        or.cells[BITSLED] = Some(time(o.repeats, || {
            db.bitop(BitOp::Or, b"dest:or", &kb)?;
            check("bitsled OR", db.bitcount(b"dest:or", None)?, want_or)
        })?);
        // The stored results above leave write-backs behind: finish them, so
        // the count-only rows time the count alone.
        db.flush()?;
        and_only.cells[BITSLED] =
            Some(time(o.repeats, || check("bitsled AND count", db.bitop_count(BitOp::And, &kb[..7])?.1, want_and))?);
        or_only.cells[BITSLED] =
            Some(time(o.repeats, || check("bitsled OR count", db.bitop_count(BitOp::Or, &kb)?.1, want_or))?);
        whole.cells[BITSLED] = Some(time(o.repeats, || check("bitsled count", db.bitcount(kb[0], None)?, want_day0))?);
        db.flush()?;
    }
    let rss = if idx == 0 { Some(rss_section(o, dir.path(), &keys, want_or, &days)?) } else { None };
    drop(dir);

    // roaring, in memory.
    {
        let t = Instant::now();
        let rbs: Vec<RoaringBitmap> = days.iter().map(|d| data::to_roaring(d)).collect();
        load.cells[ROARING] = Some(Fig::one(t.elapsed().as_secs_f64()));
        size.cells[ROARING] = Some(Fig::one(rbs.iter().map(|r| r.serialized_size() as f64).sum::<f64>() / DAYS as f64));
        check("roaring day 0", rbs[0].len(), want_day0)?;
        and.cells[ROARING] =
            Some(time(o.repeats, || check("roaring AND", black_box(rbs[..7].iter().intersection()).len(), want_and))?);
        or.cells[ROARING] =
            Some(time(o.repeats, || check("roaring OR", black_box(rbs.iter().union()).len(), want_or))?);
        whole.cells[ROARING] = Some(time(o.repeats, || check("roaring len", black_box(&rbs[0]).len(), want_day0))?);
    }

    // Redis, over loopback.
    if let Some(c) = con {
        redis::cmd("FLUSHALL").query::<()>(c)?;
        let m0 = redis_peer::used_memory(c)?;
        let mut spent = 0.0;
        for (chunk_days, chunk_keys) in days.chunks(6).zip(keys.chunks(6)) {
            let values: Vec<Vec<u8>> = chunk_days.iter().map(|d| data::to_bytes(d, n)).collect();
            let mut p = redis::pipe();
            for (k, v) in chunk_keys.iter().zip(&values) {
                p.cmd("SET").arg(k).arg(&v[..]).ignore();
            }
            let t = Instant::now();
            p.query::<()>(c)?;
            spent += t.elapsed().as_secs_f64();
        }
        load.cells[REDIS] = Some(Fig::one(spent));
        let m1 = redis_peer::used_memory(c)?;
        let mut usage = 0u64;
        for k in &keys {
            usage += redis::cmd("MEMORY").arg("USAGE").arg(k).query::<u64>(c)?;
        }
        size.cells[REDIS] = Some(Fig::one(usage as f64 / DAYS as f64));
        let _ = write!(
            size.note,
            "; Redis used_memory grew {:.0} B per bitmap",
            (m1.saturating_sub(m0)) as f64 / DAYS as f64
        );

        // Warm up (the first BITOP allocates the destination) before the
        // commandstats snapshot, so the server-side figures are warm too.
        redis::cmd("BITOP").arg("AND").arg("dest:and").arg(&keys[..7]).query::<u64>(c)?;
        redis::cmd("BITOP").arg("OR").arg("dest:or").arg(&keys).query::<u64>(c)?;
        let s0 = redis_peer::command_stats(c)?;
        and.cells[REDIS] = Some(time(o.repeats, || {
            redis::cmd("BITOP").arg("AND").arg("dest:and").arg(&keys[..7]).query::<u64>(c)?;
            check("Redis AND", redis::cmd("BITCOUNT").arg("dest:and").query(c)?, want_and)
        })?);
        let s1 = redis_peer::command_stats(c)?;
        or.cells[REDIS] = Some(time(o.repeats, || {
            redis::cmd("BITOP").arg("OR").arg("dest:or").arg(&keys).query::<u64>(c)?;
            check("Redis OR", redis::cmd("BITCOUNT").arg("dest:or").query(c)?, want_or)
        })?);
        let s2 = redis_peer::command_stats(c)?;
        whole.cells[REDIS] =
            Some(time(o.repeats, || check("Redis count", redis::cmd("BITCOUNT").arg(&keys[0]).query(c)?, want_day0))?);
        let s3 = redis_peer::command_stats(c)?;
        rep.server_side.push((
            and.name.clone(),
            redis_peer::usec_per_call(&s0, &s1, "bitop"),
            redis_peer::usec_per_call(&s0, &s1, "bitcount"),
        ));
        rep.server_side.push((
            or.name.clone(),
            redis_peer::usec_per_call(&s1, &s2, "bitop"),
            redis_peer::usec_per_call(&s1, &s2, "bitcount"),
        ));
        if idx == 0 {
            rep.server_side.push((whole.name.clone(), None, redis_peer::usec_per_call(&s2, &s3, "bitcount")));
        }
        redis::cmd("FLUSHALL").query::<()>(c)?;
    }

    for (only, full) in [(&mut and_only, &and), (&mut or_only, &or)] {
        for cell in [REDIS, ROARING, LIMIT] {
            only.cells[cell].clone_from(&full.cells[cell]);
        }
        only.note = "Redis: BITOP + BITCOUNT (no count-only command); roaring and the loop: as the row above".into();
    }
    rep.push(load);
    rep.push(size);
    rep.push(and);
    rep.push(or);
    rep.push(and_only);
    rep.push(or_only);
    if idx == 0 {
        rep.push(whole);
    }
    if let Some(row) = rss {
        rep.push(row);
    }
    Ok(())
}

/// Peak RSS of a child process that opens the store with a small cache and
/// runs a BITOP OR over all days (more data than the cache).
fn rss_section(o: &Opts, dir: &Path, keys: &[String], want_or: u64, days: &[Vec<u64>]) -> Res<Row> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .arg("--rss-child")
        .arg(dir)
        .arg(o.rss_cache.to_string())
        .arg(want_or.to_string())
        .args(keys)
        .output()?;
    if !out.status.success() {
        return Err(format!("RSS child failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let text = String::from_utf8(out.stdout)?;
    let nums: Vec<f64> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [hwm_before, hwm_after, secs] = nums[..] else {
        return Err(format!("RSS child printed {text:?}").into());
    };
    let source_bytes: f64 = days.len() as f64 * o.users.div_ceil(8) as f64;
    let mut row = Row::new(
        format!(
            "peak RSS of a process running {}-day BITOP OR at 50% ({:.0} MiB of sources), cache_bytes {} MiB",
            days.len(),
            source_bytes / f64::from(1 << 20),
            o.rss_cache >> 20
        ),
        Kind::Bytes,
    );
    row.cells[BITSLED] = Some(Fig::one(hwm_after));
    row.cells[LIMIT] = Some(Fig::one(source_bytes));
    row.note = format!(
        "bitsled: VmHWM {:.1} MiB after open, {:.1} MiB after the BITOP ({:.0} ms, cold cache); limit column = the sources held in RAM",
        hwm_before / f64::from(1 << 20),
        hwm_after / f64::from(1 << 20),
        secs * 1e3
    );
    Ok(row)
}

/// Child side of [`rss_section`]: prints VmHWM before and after the BITOP
/// (bytes) and the BITOP's seconds.
fn rss_child(args: &[String]) -> Res<()> {
    let [dir, cache, want, keys @ ..] = args else {
        return Err("usage: --rss-child DIR CACHE_BYTES WANT KEYS...".into());
    };
    // The parent's handle is dropped, but its background flush thread can
    // still hold the store's lock for a moment: retry for a while.
    let cache: u64 = cache.parse()?;
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    let db = loop {
        match Config::new(dir).cache_bytes(cache).open() {
            Ok(db) => break db,
            Err(e) if e.to_string().contains("lock") && Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => return Err(e.into()),
        }
    };
    let before = vm_hwm()?;
    let srcs: Vec<&[u8]> = keys.iter().map(std::string::String::as_bytes).collect();
    let t = Instant::now();
    db.bitop(BitOp::Or, b"rss:or", &srcs)?;
    check("RSS child OR", db.bitcount(b"rss:or", None)?, want.parse()?)?;
    let secs = t.elapsed().as_secs_f64();
    let after = vm_hwm()?;
    println!("{before} {after} {secs}");
    Ok(())
}

/// Peak resident set size of this process, in bytes.
fn vm_hwm() -> Res<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).ok_or("no VmHWM in /proc/self/status")?;
    let kib: u64 = line.split_whitespace().nth(1).ok_or("bad VmHWM line")?.parse()?;
    Ok(kib * 1024)
}

/// BITPOS 1 over a whole key with about 100 set bits per 10^8.
fn bitpos_section(o: &Opts, con: Option<&mut Connection>, rep: &mut Report) -> Res<()> {
    let n = o.users;
    let mut words = data::generate(Pattern::Random(1e-6), 77, n);
    if data::count(&words) == 0 {
        data::set(&mut words, n / 2);
    }
    let first = words.iter().position(|&w| w != 0).expect("a bit is set");
    let want = first as u64 * 64 + u64::from(words[first].leading_zeros());
    let bytes = data::to_bytes(&words, n);
    let mut row = Row::new(
        format!("BITPOS 1 over a whole sparse key ({} bits set in {n}; first at {want})", data::count(&words)),
        Kind::Time,
    );
    row.chart = Some("BITPOS".into());
    let want_i = i64::try_from(want)?;
    row.cells[LIMIT] = Some(time(o.repeats, || {
        let w = black_box(&words);
        let i = w.iter().position(|&x| x != 0).ok_or("no bit")?;
        check("limit BITPOS", i as u64 * 64 + u64::from(w[i].leading_zeros()), want)
    })?);
    let dir = tempfile::tempdir()?;
    {
        let db = Db::open(dir.path())?;
        db.set(b"sparse", &bytes)?;
        db.flush()?;
        row.cells[BITSLED] = Some(time(o.repeats, || {
            let got = db.bitpos(b"sparse", true, None, None, Unit::Byte)?;
            check("bitsled BITPOS", u64::try_from(got)?, want)
        })?);
    }
    let rb = data::to_roaring(&words);
    row.cells[ROARING] = Some(time(o.repeats, || check("roaring min", u64::from(rb.min().ok_or("empty")?), want))?);
    if let Some(c) = con {
        redis::cmd("SET").arg("sparse").arg(&bytes[..]).query::<()>(c)?;
        row.cells[REDIS] = Some(time(o.repeats, || {
            let got: i64 = redis::cmd("BITPOS").arg("sparse").arg(1).query(c)?;
            check("Redis BITPOS", u64::try_from(got)?, u64::try_from(want_i)?)
        })?);
        redis::cmd("FLUSHALL").query::<()>(c)?;
    }
    rep.push(row);
    Ok(())
}

/// One bit at a large offset on a new key: time, bytes stored, growth.
fn single_bit_section(o: &Opts, offset: u64, con: Option<&mut Connection>, rep: &mut Report) -> Res<()> {
    let mut set = Row::new(format!("SETBIT {offset} 1 on a new key"), Kind::Time);
    let mut stored = Row::new(
        format!("SETBIT {offset}: bytes stored for the key (key_stats / MEMORY USAGE / serialized_size)"),
        Kind::Bytes,
    );
    let mut growth = Row::new(
        format!("SETBIT {offset}: store growth per key (size_on_disk delta after flush / used_memory delta)"),
        Kind::Bytes,
    );
    let mut pos = Row::new(format!("SETBIT {offset}: BITPOS 1 on that key"), Kind::Time);
    if offset == 999_999_999 {
        set.chart = Some("SETBIT 1e9".into());
    }
    let dir = tempfile::tempdir()?;
    {
        let db = Db::open(dir.path())?;
        db.flush()?;
        let disk0 = db.size_on_disk()?;
        let mut r = 0;
        set.cells[BITSLED] = Some(time(o.repeats, || {
            r += 1;
            db.setbit(format!("bit:{r}").as_bytes(), offset, true)?;
            Ok(())
        })?);
        db.flush()?;
        let disk1 = db.size_on_disk()?;
        growth.cells[BITSLED] = Some(Fig::one(disk1.saturating_sub(disk0) as f64 / f64::from(r)));
        stored.cells[BITSLED] = Some(Fig::one(db.key_stats(b"bit:1")?.ok_or("key missing")?.stored_bytes as f64));
        pos.cells[BITSLED] = Some(time(o.repeats, || {
            check("bitsled BITPOS", u64::try_from(db.bitpos(b"bit:1", true, None, None, Unit::Byte)?)?, offset)
        })?);
    }
    let o32 = u32::try_from(offset)?;
    set.cells[ROARING] = Some(time(o.repeats, || {
        let mut rb = RoaringBitmap::new();
        rb.insert(o32);
        black_box(rb);
        Ok(())
    })?);
    let mut rb = RoaringBitmap::new();
    rb.insert(o32);
    stored.cells[ROARING] = Some(Fig::one(rb.serialized_size() as f64));
    if let Some(c) = con {
        redis::cmd("FLUSHALL").query::<()>(c)?;
        let mut times = Vec::new();
        let mut deltas = Vec::new();
        for r in 0..=o.repeats {
            let m0 = redis_peer::used_memory(c)?;
            let t = Instant::now();
            redis::cmd("SETBIT").arg("bit").arg(offset).arg(1).query::<u64>(c)?;
            let el = t.elapsed().as_secs_f64();
            let m1 = redis_peer::used_memory(c)?;
            if r > 0 {
                times.push(el);
                deltas.push(m1.saturating_sub(m0) as f64);
            }
            if r == o.repeats {
                stored.cells[REDIS] =
                    Some(Fig::one(redis::cmd("MEMORY").arg("USAGE").arg("bit").query::<u64>(c)? as f64));
                pos.cells[REDIS] = Some(time(o.repeats, || {
                    check("Redis BITPOS", redis::cmd("BITPOS").arg("bit").arg(1).query(c)?, offset)
                })?);
            }
            redis::cmd("DEL").arg("bit").query::<u64>(c)?;
        }
        set.cells[REDIS] = Some(Fig(times));
        growth.cells[REDIS] = Some(Fig(deltas));
    }
    rep.push(set);
    rep.push(stored);
    rep.push(growth);
    rep.push(pos);
    Ok(())
}

/// Per-user monthly sign-in keys, a few bits each: bytes per key.
fn signin_section(o: &Opts, con: Option<&mut Connection>, rep: &mut Report) -> Res<()> {
    let k = o.signin_keys;
    let kf = k as f64;
    let key = |uid: u64| format!("uid:sign:{uid}:202611");
    let users = || {
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        (0..k).map(move |uid| (uid, data::sign_in_days(&mut rng)))
    };
    let mut load = Row::new(format!("{k} sign-in keys uid:sign:<uid>:202611 (1-5 bits each): load rate"), Kind::Rate);
    let mut growth =
        Row::new("sign-in keys: bytes per key: store growth (size_on_disk delta / used_memory delta)", Kind::Bytes);
    let mut files = Row::new(
        "sign-in keys: bytes per key: files on disk (sum of file sizes in the store directory, delta)",
        Kind::Bytes,
    );
    let mut records = Row::new(
        "sign-in keys: bytes per key: records (key_stats stored_bytes / MEMORY USAGE / serialized_size)",
        Kind::Bytes,
    );
    load.note =
        "bitsled: set_bits per key, then flush (included); Redis: SET of the 4-byte value, pipelined 1,000 a batch"
            .into();
    records.note = "roaring: value only, no key".into();
    let dir = tempfile::tempdir()?;
    {
        let db = Db::open(dir.path())?;
        db.flush()?;
        let disk0 = db.size_on_disk()?;
        let files0 = dir_size(dir.path())?;
        let t = Instant::now();
        for (uid, days) in users() {
            db.set_bits(key(uid).as_bytes(), &days, true)?;
        }
        db.flush()?;
        load.cells[BITSLED] = Some(Fig::one(kf / t.elapsed().as_secs_f64()));
        growth.cells[BITSLED] = Some(Fig::one(db.size_on_disk()?.saturating_sub(disk0) as f64 / kf));
        files.cells[BITSLED] = Some(Fig::one(dir_size(dir.path())?.saturating_sub(files0) as f64 / kf));
        let mut sum = 0u64;
        for uid in 0..k {
            sum += db.key_stats(key(uid).as_bytes())?.ok_or("sign-in key missing")?.stored_bytes;
        }
        records.cells[BITSLED] = Some(Fig::one(sum as f64 / kf));
    }
    let t = Instant::now();
    let rbs: Vec<RoaringBitmap> = users().map(|(_, d)| d.iter().map(|&x| x as u32).collect()).collect();
    load.cells[ROARING] = Some(Fig::one(kf / t.elapsed().as_secs_f64()));
    records.cells[ROARING] = Some(Fig::one(rbs.iter().map(|r| r.serialized_size() as f64).sum::<f64>() / kf));
    drop(rbs);
    if let Some(c) = con {
        redis::cmd("FLUSHALL").query::<()>(c)?;
        let m0 = redis_peer::used_memory(c)?;
        let all: Vec<(u64, Vec<u64>)> = users().collect();
        let t = Instant::now();
        for chunk in all.chunks(1000) {
            let mut p = redis::pipe();
            for (uid, days) in chunk {
                let mut v = [0u8; 4];
                for &d in days {
                    v[usize::try_from(d / 8)?] |= 0x80 >> (d % 8);
                }
                p.cmd("SET").arg(key(*uid)).arg(&v[..]).ignore();
            }
            p.query::<()>(c)?;
        }
        load.cells[REDIS] = Some(Fig::one(kf / t.elapsed().as_secs_f64()));
        growth.cells[REDIS] = Some(Fig::one(redis_peer::used_memory(c)?.saturating_sub(m0) as f64 / kf));
        let sample = k.min(1000);
        let mut sum = 0u64;
        for uid in 0..sample {
            sum += redis::cmd("MEMORY").arg("USAGE").arg(key(uid)).query::<u64>(c)?;
        }
        records.cells[REDIS] = Some(Fig::one(sum as f64 / sample as f64));
        records.note.push_str(&format!("; Redis: MEMORY USAGE of the first {sample} keys"));
        redis::cmd("FLUSHALL").query::<()>(c)?;
    }
    rep.push(load);
    rep.push(growth);
    rep.push(files);
    rep.push(records);
    Ok(())
}

/// Total size of the files under `dir`.
fn dir_size(dir: &Path) -> Res<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() { dir_size(&entry.path())? } else { meta.len() };
    }
    Ok(total)
}

/// Random SETBIT throughput.
fn setbit_section(o: &Opts, con: Option<&mut Connection>, rep: &mut Report) -> Res<()> {
    let n = o.users;
    let m = o.setbits;
    let offsets = data::random_offsets(9, m, n);
    let mf = m as f64;
    let mut single = Row::new(format!("random SETBIT throughput, {m} offsets below {n} (one at a time)"), Kind::Rate);
    let mut batch = Row::new(format!("random bits via set_bits batches of 65,536 ({m} offsets)"), Kind::Rate);
    let mut flush = Row::new(format!("flush after {m} random SETBITs (durability barrier)"), Kind::Time);
    single.note = "bitsled embedded, one thread, no flush inside the timing; Redis pipelined 16 per round trip; roaring/Vec in memory".into();
    let dir = tempfile::tempdir()?;
    {
        let db = Db::open(dir.path())?;
        let mut r = 0;
        let fig = time(o.repeats, || {
            r += 1;
            let key = format!("rand:{r}");
            for &off in &offsets {
                db.setbit(key.as_bytes(), off, true)?;
            }
            Ok(())
        })?;
        single.cells[BITSLED] = Some(Fig(fig.0.iter().map(|s| mf / s).collect()));
        let t = Instant::now();
        db.flush()?;
        flush.cells[BITSLED] = Some(Fig::one(t.elapsed().as_secs_f64()));
        let fig = time(o.repeats, || {
            r += 1;
            let key = format!("batch:{r}");
            for chunk in offsets.chunks(65_536) {
                db.set_bits(key.as_bytes(), chunk, true)?;
            }
            Ok(())
        })?;
        batch.cells[BITSLED] = Some(Fig(fig.0.iter().map(|s| mf / s).collect()));
    }
    let fig = time(o.repeats, || {
        let mut rb = RoaringBitmap::new();
        for &off in &offsets {
            rb.insert(u32::try_from(off)?);
        }
        black_box(rb);
        Ok(())
    })?;
    single.cells[ROARING] = Some(Fig(fig.0.iter().map(|s| mf / s).collect()));
    let fig = time(o.repeats, || {
        let mut words = vec![0u64; data::words_for(n)];
        for &off in &offsets {
            data::set(&mut words, off);
        }
        black_box(words);
        Ok(())
    })?;
    single.cells[LIMIT] = Some(Fig(fig.0.iter().map(|s| mf / s).collect()));
    if let Some(c) = con {
        redis::cmd("FLUSHALL").query::<()>(c)?;
        let fig = time(o.repeats, || {
            for chunk in offsets.chunks(16) {
                let mut p = redis::pipe();
                for &off in chunk {
                    p.cmd("SETBIT").arg("rand").arg(off).arg(1).ignore();
                }
                p.query::<()>(c)?;
            }
            Ok(())
        })?;
        single.cells[REDIS] = Some(Fig(fig.0.iter().map(|s| mf / s).collect()));
        redis::cmd("FLUSHALL").query::<()>(c)?;
    }
    rep.push(single);
    rep.push(batch);
    rep.push(flush);
    Ok(())
}

/// Bytes per set bit against density for each encoding and system.
fn size_curve(o: &Opts, mut con: Option<&mut Connection>, rep: &mut Report) -> Res<()> {
    let n = o.users.min(100_000_000);
    eprintln!("== size curve over {n} bits");
    let densities = [1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.2, 0.3, 0.5];
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path())?;
    for (i, &p) in densities.iter().enumerate() {
        let words = data::generate(Pattern::Random(p), 5000 + i as u64, n);
        let ones = data::count(&words);
        if ones == 0 {
            continue;
        }
        let (mut dense, mut ewah, mut sparse, mut chosen) = (0u64, 0u64, 0u64, 0u64);
        for (_, pos) in data::page_positions(&words) {
            let page = BenchPage::from_positions(&pos, Encoding::Dense);
            dense += page.encode_as(Encoding::Dense).len() as u64;
            ewah += page.encode_as(Encoding::Ewah).len() as u64;
            sparse += page.encode_as(Encoding::Sparse).len() as u64;
            chosen += page.encode().len() as u64;
        }
        let bytes = data::to_bytes(&words, n);
        let key = format!("curve:{i}");
        db.set(key.as_bytes(), &bytes)?;
        let stored = db.key_stats(key.as_bytes())?.ok_or("curve key missing")?.stored_bytes;
        db.delete(key.as_bytes())?;
        let roaring = data::to_roaring(&words).serialized_size() as u64;
        let redis = match con.as_deref_mut() {
            Some(c) => {
                redis::cmd("SET").arg(&key).arg(&bytes[..]).query::<()>(c)?;
                let u = redis::cmd("MEMORY").arg("USAGE").arg(&key).query::<u64>(c)?;
                redis::cmd("DEL").arg(&key).query::<u64>(c)?;
                Some(u)
            }
            None => None,
        };
        rep.sizes.push(SizePoint { density: p, ones, dense, ewah, sparse, chosen, stored, roaring, redis });
    }
    Ok(())
}

fn fmt(kind: Kind, v: f64) -> String {
    // Three significant digits.
    let sig = |x: f64| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else if x >= 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.2}")
        }
    };
    match kind {
        Kind::Time if v >= 1.0 => format!("{} s", sig(v)),
        Kind::Time if v >= 1e-3 => format!("{} ms", sig(v * 1e3)),
        Kind::Time => format!("{} µs", sig(v * 1e6)),
        Kind::Bytes if v >= f64::from(1 << 20) => format!("{} MiB", sig(v / f64::from(1 << 20))),
        Kind::Bytes if v >= 10_240.0 => format!("{} KiB", sig(v / 1024.0)),
        Kind::Bytes => format!("{v:.1} B"),
        Kind::Rate if v >= 1e6 => format!("{}M/s", sig(v / 1e6)),
        Kind::Rate => format!("{}k/s", sig(v / 1e3)),
    }
}

fn cell(kind: Kind, f: Option<&Fig>) -> String {
    match f {
        None => "-".into(),
        Some(f) if f.0.len() == 1 || f.min() == f.max() => fmt(kind, f.median()),
        Some(f) => format!("{} ({}–{})", fmt(kind, f.median()), fmt(kind, f.min()), fmt(kind, f.max())),
    }
}

fn ratio(row: &Row, peer: usize) -> String {
    match (&row.cells[BITSLED], &row.cells[peer]) {
        (Some(a), Some(b)) if b.median() > 0.0 => {
            let r = a.median() / b.median();
            if r >= 100.0 {
                format!("{r:.0}x")
            } else if r >= 0.01 {
                format!("{r:.2}x")
            } else {
                format!("{r:.1e}x")
            }
        }
        _ => "-".into(),
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_string())
        })
        .and_then(|k| k.parse::<f64>().ok())
        .map_or_else(|| "unknown".into(), |k| format!("{:.1} GiB", k / 1024.0 / 1024.0));
    let nproc = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!("{nproc} CPUs ({cpu}), {mem} RAM")
}

fn shell(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn write_outputs(o: &Opts, rep: &Report, secs: f64) -> Res<()> {
    std::fs::create_dir_all(&o.out)?;
    let mut md = String::new();
    let date = shell("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default();
    let commit = shell("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = shell("git", &["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    let command = if o.args.is_empty() {
        "cargo run --release -p bitsled-bench --bin compare".to_string()
    } else {
        format!("cargo run --release -p bitsled-bench --bin compare -- {}", o.args.join(" "))
    };
    writeln!(md, "# bitsled comparison run\n")?;
    writeln!(md, "- command: `{command}`")?;
    writeln!(
        md,
        "- date: {date}; commit {commit}{}; run took {secs:.0} s",
        if dirty { " (with uncommitted changes)" } else { "" }
    )?;
    writeln!(md, "- machine: {}; shared with other builds, so timings are noisy", machine())?;
    writeln!(
        md,
        "- Redis: {}",
        rep.redis_version.as_deref().map_or("skipped (--no-redis)".to_string(), |v| format!(
            "redis-server {v}, no persistence, client over 127.0.0.1 (times include the loopback round trip)"
        ))
    )?;
    writeln!(md, "- {} users (bits per daily bitmap); timings: median (min–max) of {} runs after one warm-up; single-run figures have no range", o.users, o.repeats)?;
    writeln!(md, "- ratios are bitsled/peer of the medians: below 1 means bitsled is faster/smaller for times and bytes; for rates (/s) above 1 means bitsled is faster")?;
    writeln!(md)?;
    writeln!(
        md,
        "| figure | bitsled | Redis | roaring | Vec<u64> loop | bitsled/Redis | bitsled/roaring | bitsled/loop |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    for row in &rep.rows {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.name.trim(),
            cell(row.kind, row.cells[BITSLED].as_ref()),
            cell(row.kind, row.cells[REDIS].as_ref()),
            cell(row.kind, row.cells[ROARING].as_ref()),
            cell(row.kind, row.cells[LIMIT].as_ref()),
            ratio(row, REDIS),
            ratio(row, ROARING),
            ratio(row, LIMIT),
        )?;
    }
    writeln!(md, "\nNotes per row:\n")?;
    for row in rep.rows.iter().filter(|r| !r.note.is_empty()) {
        writeln!(md, "- {}: {}", row.name.trim(), row.note)?;
    }
    if !rep.server_side.is_empty() {
        writeln!(md, "\nRedis's own time per call (`INFO commandstats` deltas, no network):\n")?;
        writeln!(md, "| workload | BITOP usec/call | BITCOUNT usec/call |")?;
        writeln!(md, "|---|---|---|")?;
        let f = |v: &Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
        for (name, bitop, bitcount) in &rep.server_side {
            writeln!(md, "| {name} | {} | {} |", f(bitop), f(bitcount))?;
        }
    }
    writeln!(md, "\nBytes per set bit by density ({} random bits; page encodings count page records only, \"bitsled stored\" is `key_stats().stored_bytes` of the loaded key including its key and metadata records):\n", o.users.min(100_000_000))?;
    writeln!(md, "| density | bits set | dense | EWAH | sparse | smallest (bitsled's choice) | bitsled stored | roaring | Redis MEMORY USAGE |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|")?;
    for p in &rep.sizes {
        let b = |v: u64| format!("{:.3}", v as f64 / p.ones as f64);
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            data::density_label(p.density),
            p.ones,
            b(p.dense),
            b(p.ewah),
            b(p.sparse),
            b(p.chosen),
            b(p.stored),
            b(p.roaring),
            p.redis.map_or("-".into(), b)
        )?;
    }
    let charts = if chart::load_font() {
        let curves = |name: &str, f: &dyn Fn(&SizePoint) -> Option<u64>| chart::Curve {
            name: name.to_string(),
            points: rep.sizes.iter().filter_map(|p| f(p).map(|v| (p.density, v as f64 / p.ones as f64))).collect(),
        };
        let mut cs = vec![
            curves("dense pages", &|p| Some(p.dense)),
            curves("EWAH pages", &|p| Some(p.ewah)),
            curves("sparse pages", &|p| Some(p.sparse)),
            curves("smallest page (bitsled's choice)", &|p| Some(p.chosen)),
            curves("bitsled stored (key_stats)", &|p| Some(p.stored)),
            curves("roaring serialized", &|p| Some(p.roaring)),
        ];
        if rep.sizes.iter().any(|p| p.redis.is_some()) {
            cs.push(curves("Redis MEMORY USAGE", &|p| p.redis));
        }
        chart::sizes(
            &o.out.join("bytes_per_bit.png"),
            &format!("Bytes per set bit, {} random bits", o.users.min(100_000_000)),
            &cs,
        )?;
        let timed: Vec<&Row> = rep.rows.iter().filter(|r| r.chart.is_some() && r.kind == Kind::Time).collect();
        let names: Vec<String> = timed.iter().map(|r| r.chart.clone().unwrap_or_default()).collect();
        let systems: Vec<&str> =
            if rep.redis_version.is_some() { SYSTEMS.to_vec() } else { vec![SYSTEMS[0], SYSTEMS[2], SYSTEMS[3]] };
        let cols: Vec<usize> = if rep.redis_version.is_some() { vec![0, 1, 2, 3] } else { vec![0, 2, 3] };
        let values: Vec<Vec<Option<f64>>> = timed
            .iter()
            .map(|r| cols.iter().map(|&c| r.cells[c].as_ref().map(|f| f.median() * 1e3)).collect())
            .collect();
        chart::times(
            &o.out.join("times.png"),
            &format!("Median time per workload, {} users", o.users),
            &names,
            &systems,
            &values,
        )?;
        "\n![bytes per set bit](bytes_per_bit.png)\n\n![time per workload](times.png)\n"
    } else {
        eprintln!("compare: no font found (install fonts-dejavu-core); charts skipped");
        "\n(charts skipped: no font file found; install fonts-dejavu-core)\n"
    };
    md.push_str(charts);
    std::fs::write(o.out.join("results.md"), &md)?;
    println!("{md}");
    Ok(())
}
