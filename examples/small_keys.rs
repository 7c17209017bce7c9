//! Many small keys through the embedded library: one `Db::set_bits` call per
//! monthly sign-in key `uid:sign:<uid>:202611` (three random days), then a
//! flush. Prints keys per second, the bytes the process wrote and read
//! (Linux `/proc/self/io`), bytes per key on disk and peak resident memory.
//!
//! ```text
//! cargo run --release --example small_keys -- [KEYS] [--cache MIB] [--dirty MIB] [--store MIB] [--no-background-flush]
//! ```
//!
//! KEYS defaults to 10^6; the budgets default to the library's defaults.
//! `--no-background-flush` turns the timed write-back off; with a dirty
//! budget above the load (`--dirty 4000` for 10^7 keys) nothing is written
//! until the final flush, which separates the cost of the in-memory index
//! from that of the write-backs.
//! The database lives in a temporary directory under the current one.

use std::time::Instant;

use rand::{Rng, SeedableRng};

/// A counter of `/proc/self/io` (0 where there is none).
fn io_counter(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Peak resident memory in MiB (0 where unknown).
fn peak_rss_mib() -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut keys: u64 = 1_000_000;
    let mut config_of = Vec::new();
    let mut background_flush = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cache" | "--dirty" | "--store" => {
                let mib: u64 = args.next().ok_or("a budget in MiB")?.parse()?;
                config_of.push((a, mib << 20));
            }
            "--no-background-flush" => background_flush = false,
            n => keys = n.parse().map_err(|_| format!("unknown argument {n:?}"))?,
        }
    }
    let dir = tempfile::tempdir_in(".")?;
    let mut config = bitsled::Config::new(dir.path());
    for (flag, bytes) in config_of {
        config = match flag.as_str() {
            "--cache" => config.cache_bytes(bytes),
            "--dirty" => config.dirty_bytes(bytes),
            _ => config.store_cache_bytes(bytes),
        };
    }
    if !background_flush {
        config = config.flush_interval(None);
    }
    let db = config.open()?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let start = Instant::now();
    let mut lap = Instant::now();
    for uid in 0..keys {
        let key = format!("uid:sign:{uid}:202611");
        let days = [rng.gen_range(0..30), rng.gen_range(0..30), rng.gen_range(0..30)];
        db.set_bits(key.as_bytes(), &days, true)?;
        if uid % 1_000_000 == 999_999 {
            let m = db.memory_stats();
            println!(
                "{:>9} keys: +{:.1} s, {} MiB written so far; metadata cache {} MiB ({} MiB pinned)",
                uid + 1,
                lap.elapsed().as_secs_f64(),
                io_counter("write_bytes") >> 20,
                m.metadata_cache_bytes >> 20,
                m.dirty_metadata_bytes >> 20
            );
            lap = Instant::now();
        }
    }
    let load = start.elapsed().as_secs_f64();
    db.flush()?;
    let all = start.elapsed().as_secs_f64();
    println!(
        "{keys} keys: {:.0}k keys/s ({:.0}k incl. the final flush); written {} MiB, read {} MiB; \
         {:.1} B/key on disk; peak RSS {} MiB",
        keys as f64 / load / 1e3,
        keys as f64 / all / 1e3,
        io_counter("write_bytes") >> 20,
        io_counter("rchar") >> 20,
        db.size_on_disk()? as f64 / keys as f64,
        peak_rss_mib()
    );
    Ok(())
}
