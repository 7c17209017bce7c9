//! HyperLogLog accuracy, size and speed through the library, with Redis's
//! PFADD speed measured in the same run when a `redis-server` is installed.
//!
//! ```text
//! cargo run --release -p bitsled-bench --bin hll_accuracy -- [--quick]
//! ```
//!
//! - Accuracy: for several seeds, one stream of distinct 8-byte elements is
//!   added in batches of 10,000; at 10^3, 10^4, ... distinct elements the
//!   PFCOUNT estimate's relative error is recorded. The table shows the
//!   mean absolute and the largest error per cardinality, next to the
//!   standard error 1.04/sqrt(16384) = 0.81%. Full run: up to 10^8 (3
//!   seeds; 10^3..10^6 with 10 seeds); `--quick`: up to 10^6, 3 seeds.
//! - Size: the stored value's length as elements are added (sparse until
//!   it turns dense at 12,304 bytes), and sled's `size_on_disk` growth per
//!   key for many small and many dense sketches.
//! - Speed: PFADD elements per second, in batches of 1,000 and one element
//!   per call, into a dense sketch; the same against a local `redis-server`
//!   over loopback (`redis` crate, one command per round trip).

use bitsled_testkit::redis_server;

use std::time::Instant;

use bitsled::{Config, Db};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The standard error of Redis's 16,384 registers.
const STD_ERROR: f64 = 0.0081;

/// Element `i` of stream `seed`: distinct across seeds and indexes.
fn element(seed: u64, i: u64) -> [u8; 8] {
    ((seed << 40) | i).to_le_bytes()
}

fn open(dir: &std::path::Path) -> Res<Db> {
    Ok(Config::new(dir).flush_interval(None).open()?)
}

/// Relative errors at each power of ten up to `10^max_exp`, for `seeds`.
fn accuracy(db: &Db, max_exp: u32, seeds: u64, big_seeds: u64) -> Res<()> {
    println!("## Accuracy (relative error of PFCOUNT; standard error {:.2}%)\n", STD_ERROR * 100.0);
    println!("| distinct | seeds | mean abs error | max abs error | max / std error |");
    println!("|---:|---:|---:|---:|---:|");
    let mut errors: Vec<Vec<f64>> = vec![Vec::new(); max_exp as usize + 1];
    for seed in 1..=seeds {
        let key = format!("acc:{seed}");
        let top = if seed <= big_seeds { max_exp } else { max_exp.min(6) };
        let mut added = 0u64;
        let started = Instant::now();
        for exp in 3..=top {
            let target = 10u64.pow(exp);
            while added < target {
                let n = (target - added).min(10_000);
                let batch: Vec<[u8; 8]> = (added..added + n).map(|i| element(seed, i)).collect();
                db.hll(key.as_bytes()).add(&batch)?;
                added += n;
            }
            let est = db.hll(key.as_bytes()).count()? as f64;
            errors[exp as usize].push((est - target as f64) / target as f64);
        }
        eprintln!("seed {seed}: {added} elements in {:.3} s", started.elapsed().as_secs_f64());
        db.delete(key.as_bytes())?;
    }
    for (exp, errs) in errors.iter().enumerate().skip(3) {
        if errs.is_empty() {
            continue;
        }
        let mean = errs.iter().map(|e| e.abs()).sum::<f64>() / errs.len() as f64;
        let max = errs.iter().map(|e| e.abs()).fold(0.0, f64::max);
        println!("| 10^{exp} | {} | {:.3}% | {:.3}% | {:.2} |", errs.len(), mean * 100.0, max * 100.0, max / STD_ERROR);
    }
    println!();
    Ok(())
}

/// Value length as elements are added, and disk growth per key.
fn sizes(dir: &std::path::Path, quick: bool) -> Res<()> {
    println!("## Bytes per key\n");
    let db = open(&dir.join("len"))?;
    println!("| distinct elements | stored value (bytes) | encoding |");
    println!("|---:|---:|---|");
    let mut added = 0u64;
    for target in [0u64, 10, 100, 300, 1000, 1500, 2000, 3000, 5000, 100_000] {
        let batch: Vec<[u8; 8]> = (added..target).map(|i| element(9, i)).collect();
        db.hll(b"len").add(&batch)?;
        added = target;
        let v = db.get(b"len")?.unwrap_or_default();
        let enc = if v.get(4) == Some(&0) { "dense" } else { "sparse" };
        println!("| {target} | {} | {enc} |", v.len());
    }
    println!();
    let (small_keys, dense_keys) = if quick { (1000u64, 100u64) } else { (10_000, 1000) };
    for (label, keys, per_key) in
        [("sparse (100 elements)", small_keys, 100u64), ("dense (20,000 elements)", dense_keys, 20_000)]
    {
        let d = dir.join(format!("disk-{per_key}"));
        let db = open(&d)?;
        db.flush()?;
        let before = db.size_on_disk()?;
        let mut value_bytes = 0u64;
        for k in 0..keys {
            let batch: Vec<[u8; 8]> = (0..per_key).map(|i| element(k + 100, i)).collect();
            let key = format!("k{k}");
            db.hll(key.as_bytes()).add(&batch)?;
            value_bytes += db.strlen(key.as_bytes())?;
        }
        db.flush()?;
        let after = db.size_on_disk()?;
        println!(
            "{label}: {keys} keys, mean value {} bytes, size_on_disk grew {} bytes = {} bytes per key",
            value_bytes / keys,
            after.saturating_sub(before),
            after.saturating_sub(before) / keys
        );
    }
    println!();
    Ok(())
}

/// Elements per second of `f` adding `n` elements.
fn rate(n: u64, f: impl FnOnce() -> Res<()>) -> Res<f64> {
    let t = Instant::now();
    f()?;
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// PFADD throughput of bitsled, and of Redis if available.
fn throughput(dir: &std::path::Path, quick: bool) -> Res<()> {
    println!("## PFADD throughput (elements per second, into a dense sketch)\n");
    let (batched_n, single_n) = if quick { (1_000_000u64, 20_000u64) } else { (10_000_000, 200_000) };
    let db = open(&dir.join("speed"))?;
    let warm: Vec<[u8; 8]> = (0..50_000).map(|i| element(77, i)).collect();
    db.hll(b"speed").add(&warm)?;
    let ours_batched = rate(batched_n, || {
        for start in (0..batched_n).step_by(1000) {
            let batch: Vec<[u8; 8]> = (start..start + 1000).map(|i| element(78, i)).collect();
            db.hll(b"speed").add(&batch)?;
        }
        Ok(())
    })?;
    let ours_single = rate(single_n, || {
        for i in 0..single_n {
            db.hll(b"speed").add(&[element(79, i)])?;
        }
        Ok(())
    })?;
    println!("| system | batches of 1,000 | one per call |");
    println!("|---|---:|---:|");
    println!("| bitsled (library) | {ours_batched:.0} | {ours_single:.0} |");
    let Some(server) = redis_server::start() else {
        println!("\n(no redis-server found: Redis not measured)");
        return Ok(());
    };
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port))?.get_connection()?;
    let mut cmd = redis::cmd("PFADD");
    cmd.arg("speed");
    for e in &warm {
        cmd.arg(&e[..]);
    }
    cmd.query::<i64>(&mut con)?;
    let redis_batched = rate(batched_n, || {
        for start in (0..batched_n).step_by(1000) {
            let mut cmd = redis::cmd("PFADD");
            cmd.arg("speed");
            for i in start..start + 1000 {
                cmd.arg(&element(78, i)[..]);
            }
            cmd.query::<i64>(&mut con)?;
        }
        Ok(())
    })?;
    let redis_single = rate(single_n, || {
        for i in 0..single_n {
            redis::cmd("PFADD").arg("speed").arg(&element(79, i)[..]).query::<i64>(&mut con)?;
        }
        Ok(())
    })?;
    println!("| Redis 7 (loopback round trips) | {redis_batched:.0} | {redis_single:.0} |");
    println!("| bitsled / Redis | {:.2}x | {:.2}x |", ours_batched / redis_batched, ours_single / redis_single);
    let ours = db.get(b"speed")?;
    let theirs: Option<Vec<u8>> = redis::cmd("GET").arg("speed").query(&mut con)?;
    println!("\nSame elements, same bytes as Redis: {}", ours == theirs);
    Ok(())
}

fn main() -> Res<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let dir = tempfile::tempdir()?;
    println!("# HyperLogLog: accuracy, size, speed{}\n", if quick { " (--quick)" } else { "" });
    let db = open(&dir.path().join("acc"))?;
    if quick {
        accuracy(&db, 6, 3, 3)?;
    } else {
        accuracy(&db, 8, 10, 3)?;
    }
    drop(db);
    sizes(dir.path(), quick)?;
    throughput(dir.path(), quick)?;
    Ok(())
}
