//! End-to-end engine benchmarks on a real on-disk store, each beside a peer
//! measured in the same run: a plain in-memory `Vec<u64>` loop (the memory
//! bandwidth limit) for BITOP and BITCOUNT, roaring-rs for the count of
//! an AND of small bitmaps.
//!
//! `cargo bench --bench engine`; set `BITSLED_BENCH_BITS` to change the
//! bitmap size (default 10^8 bits).

use std::hint::black_box;
use std::time::Duration;

use bitsled::{BitOp, Config, Db, Span};
use criterion::{BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};

fn bits() -> u64 {
    std::env::var("BITSLED_BENCH_BITS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000_000)
}

/// Random bytes in which each bit is set with probability `density`.
fn random_bytes(len: usize, density: f64, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    if (density - 0.5).abs() < 1e-9 {
        let mut v = vec![0u8; len];
        rng.fill(&mut v[..]);
        return v;
    }
    let mut v = vec![0u8; len];
    let total = len as u64 * 8;
    let n = (total as f64 * density) as u64;
    for _ in 0..n {
        let o = rng.gen_range(0..total);
        v[(o / 8) as usize] |= 0x80 >> (o % 8);
    }
    v
}

fn words_of(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_be_bytes(w)
        })
        .collect()
}

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).cache_bytes(1 << 30).open().unwrap()
}

fn setbit(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let n = bits();
    let mut g = c.benchmark_group("setbit");
    g.throughput(Throughput::Elements(1));
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    g.bench_function("random", |b| b.iter(|| db.setbit(b"r", rng.gen_range(0..n), true).unwrap()));
    let mut next = 0u64;
    g.bench_function("sequential", |b| {
        b.iter(|| {
            next = (next + 1) % n;
            db.setbit(b"s", next, true).unwrap()
        });
    });
    let batch: Vec<u64> = (0..1_000_000).map(|_| rng.gen_range(0..n)).collect();
    g.throughput(Throughput::Elements(batch.len() as u64));
    g.sample_size(10);
    g.bench_function("set_bits_1e6_random", |b| b.iter(|| db.set_bits(b"batch", &batch, true).unwrap()));
    g.finish();
}

fn bitcount(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let n = bits();
    let bytes = random_bytes((n / 8) as usize, 0.5, 7);
    let words = words_of(&bytes);
    db.set(b"k", &bytes).unwrap();
    db.flush().unwrap();
    let mut g = c.benchmark_group("bitcount");
    g.throughput(Throughput::Elements(n));
    g.bench_function("bitsled_whole_key", |b| b.iter(|| db.bitcount(black_box(b"k"), None).unwrap()));
    g.bench_function("vec_u64_popcount", |b| {
        b.iter(|| black_box(&words).iter().map(|w| u64::from(w.count_ones())).sum::<u64>());
    });
    let mid = (n / 16) as i64;
    g.bench_function("bitsled_half_range", |b| {
        b.iter(|| db.bitcount(b"k", Some(Span::bytes(mid / 2, mid + mid / 2))).unwrap());
    });
    g.finish();
}

fn bitop_and(c: &mut Criterion) {
    let n = bits();
    let mut g = c.benchmark_group("and7_bitcount");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(7 * n));
    for density in [0.5, 0.01] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let days: Vec<Vec<u8>> = (0..7).map(|d| random_bytes((n / 8) as usize, density, 100 + d)).collect();
        let names: Vec<String> = (0..7).map(|d| format!("checkin:2026010{}", d + 1)).collect();
        for (name, bytes) in names.iter().zip(&days) {
            db.set(name.as_bytes(), bytes).unwrap();
        }
        db.flush().unwrap();
        let srcs: Vec<&[u8]> = names.iter().map(std::string::String::as_bytes).collect();
        g.bench_with_input(BenchmarkId::new("bitsled", density), &density, |b, _| {
            b.iter(|| {
                db.bitop(BitOp::And, b"week", &srcs).unwrap();
                db.bitcount(b"week", None).unwrap()
            });
        });
        let words: Vec<Vec<u64>> = days.iter().map(|d| words_of(d)).collect();
        let mut out = vec![0u64; words[0].len()];
        g.bench_with_input(BenchmarkId::new("vec_u64_and_popcount", density), &density, |b, _| {
            b.iter(|| {
                let mut ones = 0u64;
                for (i, o) in out.iter_mut().enumerate() {
                    let w = words.iter().fold(u64::MAX, |a, d| a & d[i]);
                    *o = w;
                    ones += u64::from(w.count_ones());
                }
                black_box(ones)
            });
        });
    }
    g.finish();
}

/// The count of an AND of two small bitmaps (`Db::bitop_count`, warm
/// cache) beside roaring-rs's `intersection_len` of the same two sets held
/// in memory. Shapes: one value each (in the same page), 12 values each in
/// one page (kept in the key's entry), 300 values each over 3 pages
/// (pages 31-33: offsets from 31 x 32,768 on).
fn small_and_count(c: &mut Criterion) {
    let mut g = c.benchmark_group("small_and_count");
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let shapes: [(&str, usize, u64); 3] = [("one_value", 1, 1), ("12_values", 12, 32_768), ("300_values", 300, 98_304)];
    for (name, values, span) in shapes {
        let mut sets = Vec::new();
        for side in ["a", "b"] {
            let mut v: Vec<u64> = if values == 1 {
                vec![1_000_007]
            } else {
                (0..values).map(|_| 31 * 32_768 + rng.gen_range(0..span)).collect()
            };
            v.sort_unstable();
            v.dedup();
            db.set_bits(format!("{name}:{side}").as_bytes(), &v, true).unwrap();
            sets.push(v);
        }
        let (ka, kb) = (format!("{name}:a"), format!("{name}:b"));
        let srcs: [&[u8]; 2] = [ka.as_bytes(), kb.as_bytes()];
        g.bench_function(BenchmarkId::new("bitsled", name), |b| {
            b.iter(|| db.bitop_count(BitOp::And, black_box(&srcs)).unwrap());
        });
        // The same two bitmaps read into memory once (`Db::bitmap`), as
        // roaring's are held: the count without a lookup per call.
        let (la, lb) = (db.bitmap(ka.as_bytes()).unwrap(), db.bitmap(kb.as_bytes()).unwrap());
        g.bench_function(BenchmarkId::new("bitsled_loaded", name), |b| {
            b.iter(|| black_box(&la).and_count(black_box(&lb)));
        });
        let ra: roaring::RoaringBitmap = sets[0].iter().map(|&x| u32::try_from(x).unwrap()).collect();
        let rb: roaring::RoaringBitmap = sets[1].iter().map(|&x| u32::try_from(x).unwrap()).collect();
        assert_eq!(la.and_count(&lb), ra.intersection_len(&rb));
        g.bench_function(BenchmarkId::new("roaring_intersection_len", name), |b| {
            b.iter(|| black_box(&ra).intersection_len(black_box(&rb)));
        });
    }
    g.finish();
}

/// The count of a 7-day AND and of a 30-day OR (`Db::bitop_count`, warm
/// cache) of sparse daily bitmaps, beside roaring-rs's AND and OR of the
/// same sets held in memory (`MultiOps`, then `len`), at 0.01% and 1%.
fn sparse_days_count(c: &mut Criterion) {
    use roaring::MultiOps;
    let n = bits();
    let mut g = c.benchmark_group("sparse_days_count");
    g.sample_size(20);
    for density in [0.0001, 0.01] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let names: Vec<String> = (0..30).map(|d| format!("sparse:202601{:02}", d + 1)).collect();
        let mut sets: Vec<roaring::RoaringBitmap> = Vec::new();
        for (d, name) in names.iter().enumerate() {
            let bytes = random_bytes((n / 8) as usize, density, 200 + d as u64);
            db.set(name.as_bytes(), &bytes).unwrap();
            let mut r = roaring::RoaringBitmap::new();
            for (i, &byte) in bytes.iter().enumerate().filter(|(_, &b)| b != 0) {
                for k in (0..8).filter(|k| byte & (0x80 >> k) != 0) {
                    r.insert(u32::try_from(i * 8 + k).unwrap());
                }
            }
            sets.push(r);
        }
        db.flush().unwrap();
        let srcs: Vec<&[u8]> = names.iter().map(std::string::String::as_bytes).collect();
        let week = &srcs[..7];
        let want_and = sets[..7].iter().intersection().len();
        let want_or = sets.iter().union().len();
        assert_eq!(db.bitop_count(BitOp::And, week).unwrap().1, want_and, "both sides count the same bits");
        assert_eq!(db.bitop_count(BitOp::Or, &srcs).unwrap().1, want_or, "both sides count the same bits");
        g.bench_with_input(BenchmarkId::new("and7_bitsled_bitop_count", density), &density, |b, _| {
            b.iter(|| db.bitop_count(BitOp::And, black_box(week)).unwrap());
        });
        g.bench_with_input(BenchmarkId::new("and7_roaring_intersection_len", density), &density, |b, _| {
            b.iter(|| black_box(&sets[..7]).iter().intersection().len());
        });
        g.bench_with_input(BenchmarkId::new("or30_bitsled_bitop_count", density), &density, |b, _| {
            b.iter(|| db.bitop_count(BitOp::Or, black_box(&srcs)).unwrap());
        });
        g.bench_with_input(BenchmarkId::new("or30_roaring_union_len", density), &density, |b, _| {
            b.iter(|| black_box(&sets).iter().union().len());
        });
    }
    g.finish();
}

/// Runs every group (criterion's macros would leave `main` undocumented).
fn main() {
    let mut c = Criterion::default().configure_from_args();
    setbit(&mut c);
    bitcount(&mut c);
    bitop_and(&mut c);
    small_and_count(&mut c);
    sparse_days_count(&mut c);
    c.final_summary();
}
