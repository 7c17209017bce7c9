//! Measures Bloom filters end to end: the false-positive rate over fresh
//! items (never inserted) against the configured rate, bits per item, and
//! the throughput of BF.MADD and BF.MEXISTS in batches of 1,000 items.
//!
//! ```text
//! cargo run --release --example bloom_fpr              # 10^6 and 10^8 items
//! cargo run --release --example bloom_fpr -- --quick   # 10^5 and 10^6 items
//! cargo run --release --example bloom_fpr -- --sizes 1000000,10000000
//! cargo run --release --example bloom_fpr -- --small 10000   # per-user filters
//! ```
//!
//! `--small N` instead creates N default filters (BF.ADD's: capacity 100 at
//! 1%, kept inline), fills each with exactly 100 items, and probes each
//! with 1,000 fresh items: the false-positive rate at capacity over all of
//! them, which must stay below 1%.
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
    if let Some(n) = args.iter().position(|a| a == "--small").and_then(|i| args.get(i + 1)?.parse().ok()) {
        return small(n);
    }
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

/// N default (small, inline) filters at capacity: the false-positive rate
/// over 1,000 fresh probes each.
fn small(n: u64) -> bitsled::Result<()> {
    const FILL: u64 = 100;
    const FRESH: u64 = 1000;
    let dir = tempfile::tempdir()?;
    let db = bitsled::Db::open(dir.path())?;
    let t = Instant::now();
    let mut inline = 0u64;
    for u in 0..n {
        let key = format!("user:{u}:seen");
        let f = db.bloom(&key);
        let answers = f.add_many(&items(&format!("u{u}:item"), 0, FILL))?;
        assert!(answers.iter().all(|&a| a != BloomAdd::Full));
        let info = f.info()?.expect("the filter exists");
        assert_eq!(info.filters, 1, "exactly at capacity: one sub-filter");
        inline += u64::from(db.key_stats(key.as_bytes())?.is_some_and(|s| s.inline));
    }
    let fill_secs = t.elapsed().as_secs_f64();
    let mut hits = 0u64;
    let mut false_negatives = 0usize;
    for u in 0..n {
        let f = db.bloom(format!("user:{u}:seen"));
        hits += f.contains_many(&items(&format!("u{u}:fresh"), 0, FRESH))?.iter().filter(|&&b| b).count() as u64;
        false_negatives += f.contains_many(&items(&format!("u{u}:item"), 0, FILL))?.iter().filter(|&&b| !b).count();
    }
    let measured = hits as f64 / (n * FRESH) as f64;
    println!(
        "{n} small filters (capacity 100, error 0.01), {inline} kept inline, filled in {fill_secs:.2} s: \
         false-positive rate at capacity {measured:.6} over {} probes ({:.3}x the requested 0.01); \
         false negatives {false_negatives}",
        n * FRESH,
        measured / 0.01
    );
    assert_eq!(false_negatives, 0, "an inserted item was not found");
    assert!(measured <= 0.01, "the rate at capacity passes the requested one");
    Ok(())
}
