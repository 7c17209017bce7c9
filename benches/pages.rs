//! Page codec benchmarks: encode, decode, popcount, and, or for each in-memory
//! encoding across densities and a run-heavy pattern, and the per-page costs
//! of a BITOP column (`column` group).
//!
//! Run with `cargo bench --bench pages`. The encoded size of every case is
//! printed once to stderr.

use std::hint::black_box;

use bitsled::testing::{and_column, BenchPage, Encoding};
use criterion::{BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BITS: u32 = 32_768;

/// Bit patterns: a density name and its positions.
fn patterns(seed: u64) -> Vec<(String, Vec<u16>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for density in [1e-5, 1e-3, 0.01, 0.1, 0.5] {
        let mut pos: Vec<u16> = (0..BITS)
            .filter(|_| rng.gen_bool(density))
            .map(|b| u16::try_from(b).expect("page bit fits in u16"))
            .collect();
        if pos.is_empty() {
            // 1e-5 of 32,768 bits is usually empty: keep one bit so the page
            // can be encoded.
            pos.push(rng.gen_range(0..=u16::MAX >> 1));
        }
        out.push((format!("{density}"), pos));
    }
    // Run-heavy: runs of 1-40 full or empty words with occasional literals.
    let mut runs = Vec::new();
    let mut word = 0u16;
    while word < 512 {
        let len = rng.gen_range(1..=40u16).min(512 - word);
        match rng.gen_range(0..3) {
            0 => runs.extend(word * 64..(word + len) * 64),
            1 => {}
            _ => runs.extend((word * 64..(word + len) * 64).filter(|_| rng.gen_bool(0.3))),
        }
        word += len;
    }
    out.push(("runs".to_owned(), runs));
    out
}

/// Every (encoding, pattern) case with a second page of the same kind for
/// the binary operations.
fn cases() -> Vec<(Encoding, String, BenchPage, BenchPage)> {
    let a = patterns(1);
    let b = patterns(2);
    let mut out = Vec::new();
    for enc in [Encoding::Sparse, Encoding::Runs, Encoding::Ewah, Encoding::Dense] {
        for ((name, pa), (_, pb)) in a.iter().zip(&b) {
            let page = BenchPage::from_positions(pa, enc);
            let other = BenchPage::from_positions(pb, enc);
            eprintln!(
                "page {enc:?}/{name}: {} bits, {:?} encoding {} bytes, smallest {} bytes",
                page.count_ones(),
                enc,
                page.encode_as(enc).len(),
                page.encode().len()
            );
            out.push((enc, name.clone(), page, other));
        }
    }
    out
}

fn id(enc: Encoding, name: &str) -> BenchmarkId {
    BenchmarkId::new(format!("{enc:?}").to_lowercase(), name)
}

fn bench_pages(c: &mut Criterion) {
    let cases = cases();

    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(u64::from(BITS)));
    for (enc, name, page, _) in &cases {
        g.bench_with_input(id(*enc, name), page, |b, p| b.iter(|| p.encode_as(*enc)));
    }
    g.finish();

    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(u64::from(BITS)));
    for (enc, name, page, _) in &cases {
        let bytes = page.encode_as(*enc);
        g.bench_with_input(id(*enc, name), &bytes, |b, bytes| {
            b.iter(|| BenchPage::decode(black_box(bytes)).expect("valid page"));
        });
    }
    g.finish();

    let mut g = c.benchmark_group("popcount");
    g.throughput(Throughput::Elements(u64::from(BITS)));
    for (enc, name, page, _) in &cases {
        // A range one bit short of the page, so the cached count is not used.
        g.bench_with_input(id(*enc, name), page, |b, p| b.iter(|| p.count_range(black_box(0), black_box(BITS - 1))));
    }
    g.finish();

    let mut g = c.benchmark_group("and");
    g.throughput(Throughput::Elements(u64::from(BITS)));
    for (enc, name, page, other) in &cases {
        g.bench_with_input(id(*enc, name), page, |b, p| b.iter(|| p.and(black_box(other))));
    }
    g.finish();

    let mut g = c.benchmark_group("or");
    g.throughput(Throughput::Elements(u64::from(BITS)));
    for (enc, name, page, other) in &cases {
        g.bench_with_input(id(*enc, name), page, |b, p| b.iter(|| p.or(black_box(other))));
    }
    g.finish();
}

/// The per-page costs of a BITOP column: seven 50% pages ANDed (fused and
/// pass by pass), the result (about 0.8% set) encoded, a page CRC.
fn bench_column(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(3);
    let days: Vec<BenchPage> = (0..7)
        .map(|_| {
            let pos: Vec<u16> = (0..BITS)
                .filter(|_| rng.gen_bool(0.5))
                .map(|b| u16::try_from(b).expect("page bit fits in u16"))
                .collect();
            BenchPage::from_positions(&pos, Encoding::Dense)
        })
        .collect();
    let column: Vec<&BenchPage> = days.iter().collect();
    let mut out = [0u64; 512];
    let mut g = c.benchmark_group("column");
    g.throughput(Throughput::Elements(u64::from(BITS)));
    g.bench_function("and7_fused", |b| b.iter(|| and_column(black_box(&column), true, &mut out)));
    g.bench_function("and7_pass_by_pass", |b| b.iter(|| and_column(black_box(&column), false, &mut out)));
    // Encoding is measured over many different result pages in turn: on one
    // page repeated, the branch predictor would learn its bits.
    let results: Vec<[u64; 512]> = (0..64)
        .map(|_| {
            let mut words = [0u64; 512];
            for w in &mut words {
                // Seven 50% words ANDed: each bit set with probability 1/128.
                *w = (0..7).fold(u64::MAX, |acc, _| acc & rng.gen::<u64>());
            }
            words
        })
        .collect();
    let mut next = 0;
    g.bench_function("encode_and7_result", |b| {
        b.iter(|| {
            next = (next + 1) % results.len();
            BenchPage::from_words(black_box(&results[next]))
        });
    });
    let bytes = days[0].encode();
    g.bench_function("crc32_dense_page", |b| b.iter(|| crc32fast::hash(black_box(&bytes))));
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_pages(&mut c);
    bench_column(&mut c);
    c.final_summary();
}
