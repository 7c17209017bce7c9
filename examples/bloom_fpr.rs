//! Measures Bloom filters end to end: the false-positive rate over fresh
//! items (never inserted) against the configured rate, bits per item, and
//! the throughput of BF.MADD and BF.MEXISTS in batches of 1,000 items.
//!
//! ```text
//! cargo run --release --example bloom_fpr              # 10^6 and 10^8 items
//! cargo run --release --example bloom_fpr -- --quick   # 10^5 and 10^6 items
//! cargo run --release --example bloom_fpr -- --sizes 1000000,10000000
//! ```
//!
//! Each run reserves a filter for exactly the number of items inserted, at
//! error rates 0.01 and 0.001, in a fresh database in a temporary
//! directory. The database keeps the whole filter in memory until the
//! final flush (dirty budget above the filter's size), so the figures are
//! those of the page cache plus one write-back, not of sled's log.

use std::time::Instant;

use bitsled::{BloomAdd, BloomOptions, Config};

const BATCH: usize = 1000;
/// Fresh items probed per run (all of them when fewer were inserted).
const PROBES: u64 = 1_000_000;

fn main() -> bitsled::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sizes: Vec<u64> =
        if args.iter().any(|a| a == "--quick") { vec![100_000, 1_000_000] } else { vec![1_000_000, 100_000_000] };
    if let Some(i) = args.iter().position(|a| a == "--sizes") {
        sizes =
            args.get(i + 1).map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect()).unwrap_or_default();
    }
    println!(
        "{:>11} {:>7} {:>10} {:>9} {:>8} {:>7} {:>9} {:>12} {:>12} {:>8} {:>10}",
        "items",
        "rate",
        "measured",
        "probes",
        "fp/rate",
        "bits/it",
        "disk B/it",
        "MADD it/s",
        "MEXISTS it/s",
        "flush s",
        "false neg"
    );
    for &n in &sizes {
        for rate in [0.01, 0.001] {
            run(n, rate)?;
        }
    }
    Ok(())
}

fn items(prefix: &str, from: u64, to: u64) -> Vec<Vec<u8>> {
    (from..to).map(|i| format!("{prefix}:{i}").into_bytes()).collect()
}

fn run(n: u64, rate: f64) -> bitsled::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Config::new(dir.path()).flush_interval(None).dirty_bytes(8 << 30).cache_bytes(8 << 30).open()?;
    let f = db.bloom(b"seen");
    f.reserve(rate, n, BloomOptions::default())?;

    let start = Instant::now();
    let mut added = 0u64;
    let mut from = 0;
    while from < n {
        let to = (from + BATCH as u64).min(n);
        added += f.add_many(&items("item", from, to))?.iter().filter(|&&r| r == BloomAdd::Added).count() as u64;
        from = to;
    }
    let madd_secs = start.elapsed().as_secs_f64();
    let t = Instant::now();
    db.flush()?;
    let flush_secs = t.elapsed().as_secs_f64();

    let probes = PROBES.min(n);
    let start = Instant::now();
    let mut hits = 0u64;
    let mut from = 0;
    while from < probes {
        let to = (from + BATCH as u64).min(probes);
        hits += f.contains_many(&items("fresh", from, to))?.iter().filter(|&&b| b).count() as u64;
        from = to;
    }
    let mexists_secs = start.elapsed().as_secs_f64();

    // Inserted items must all be found: sample spread over the whole range.
    let step = (n / 100_000).max(1);
    let sample: Vec<Vec<u8>> = (0..n).step_by(step as usize).map(|i| format!("item:{i}").into_bytes()).collect();
    let false_negatives = sample
        .chunks(BATCH)
        .map(|c| f.contains_many(c).map(|v| v.iter().filter(|&&b| !b).count()))
        .sum::<bitsled::Result<usize>>()?;

    let info = f.info()?.expect("the filter exists");
    let stored = db.key_stats(b"seen")?.map_or(0, |s| s.stored_bytes);
    let measured = hits as f64 / probes as f64;
    let bits_per_item = (info.size - 32 - 64 * info.filters) as f64 * 8.0 / n as f64;
    println!(
        "{:>11} {:>7} {:>10.6} {:>9} {:>8.3} {:>7.2} {:>9.2} {:>12.0} {:>12.0} {:>8.2} {:>10}",
        n,
        rate,
        measured,
        probes,
        measured / rate,
        bits_per_item,
        stored as f64 / n as f64,
        n as f64 / madd_secs,
        probes as f64 / mexists_secs,
        flush_secs,
        false_negatives
    );
    assert_eq!(added, info.items, "card equals the adds answered Added");
    assert_eq!(false_negatives, 0, "an inserted item was not found");
    Ok(())
}
