//! Deterministic bitmap generators. A bitmap is a `Vec<u64>` of words in
//! Redis bit order: offset `o` is bit `63 - o % 64` of word `o / 64`, so the
//! Redis string is the words' big-endian bytes.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roaring::RoaringBitmap;

/// How the set bits of a generated bitmap are placed.
#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    /// Each bit set independently with this probability.
    Random(f64),
    /// Runs of set bits (lengths geometric, mean `run`) separated by gaps
    /// (geometric, mean `gap`).
    Clustered {
        /// Mean run length in bits.
        run: f64,
        /// Mean gap length in bits.
        gap: f64,
    },
}

impl Pattern {
    /// Short label used in table rows and key names.
    pub fn label(self) -> String {
        match self {
            Pattern::Random(p) => density_label(p),
            Pattern::Clustered { run, gap } => {
                format!("clustered (runs ~{run:.0} bits, {:.0}% set)", 100.0 * run / (run + gap))
            }
        }
    }
}

/// "50%", "1%", "0.01%", "1e-6".
pub fn density_label(p: f64) -> String {
    if p >= 1e-4 {
        let s = format!("{:.4}", p * 100.0);
        let s = s.trim_end_matches('0').trim_end_matches('.');
        format!("{s}%")
    } else {
        format!("{p:.0e}")
    }
}

/// Number of words holding `bits` bits.
pub fn words_for(bits: u64) -> usize {
    usize::try_from(bits.div_ceil(64)).expect("bitmap fits in memory")
}

/// A bitmap of `bits` bits following `pattern`, the same for the same `seed`.
pub fn generate(pattern: Pattern, seed: u64, bits: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut words = vec![0u64; words_for(bits)];
    match pattern {
        Pattern::Random(p) if p >= 0.5 => {
            // Exactly 0.5 (or more, approximated by OR-ing) from raw random words.
            for w in &mut words {
                *w = rng.gen();
            }
            if p > 0.5 {
                for w in &mut words {
                    *w |= rng.gen::<u64>() & rng.gen::<u64>();
                }
            }
        }
        Pattern::Random(p) if p > 0.05 => {
            for (i, w) in words.iter_mut().enumerate() {
                for b in 0..64u64 {
                    if (i as u64) * 64 + b < bits && rng.gen::<f64>() < p {
                        *w |= 1u64 << (63 - b);
                    }
                }
            }
        }
        Pattern::Random(p) => {
            // Geometric skips: only the set bits cost anything.
            let mut pos = geometric(&mut rng, p);
            while pos < bits {
                set(&mut words, pos);
                pos += 1 + geometric(&mut rng, p);
            }
        }
        Pattern::Clustered { run, gap } => {
            let mut pos = geometric(&mut rng, 1.0 / gap);
            while pos < bits {
                let len = 1 + geometric(&mut rng, 1.0 / run);
                let end = (pos + len).min(bits);
                set_range(&mut words, pos, end);
                pos = end + 1 + geometric(&mut rng, 1.0 / gap);
            }
        }
    }
    clear_tail(&mut words, bits);
    words
}

/// Number of failures before the first success of a Bernoulli(p) process.
fn geometric(rng: &mut StdRng, p: f64) -> u64 {
    if p >= 1.0 {
        return 0;
    }
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    // Truncation toward zero is the floor of a non-negative value.
    (u.ln() / (1.0 - p).ln()) as u64
}

/// Sets bit `pos` (Redis order).
pub fn set(words: &mut [u64], pos: u64) {
    words[usize::try_from(pos / 64).expect("in memory")] |= 1u64 << (63 - pos % 64);
}

fn set_range(words: &mut [u64], from: u64, to: u64) {
    // Runs are short next to the bitmap; a bit loop is fast enough here.
    for pos in from..to {
        set(words, pos);
    }
}

/// Clears the bits at or past `bits` (they do not exist).
fn clear_tail(words: &mut [u64], bits: u64) {
    let rem = bits % 64;
    if rem != 0 {
        if let Some(last) = words.last_mut() {
            *last &= u64::MAX << (64 - rem);
        }
    }
}

/// The Redis string of a bitmap of `bits` bits.
pub fn to_bytes(words: &[u64], bits: u64) -> Vec<u8> {
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    bytes.truncate(usize::try_from(bits.div_ceil(8)).expect("in memory"));
    bytes
}

/// The same bitmap as a roaring bitmap (positions = Redis offsets).
pub fn to_roaring(words: &[u64]) -> RoaringBitmap {
    // Redis numbers bits from the most significant bit of each byte; roaring's
    // byte constructor from the least significant one.
    let lsb0: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).map(u8::reverse_bits).collect();
    RoaringBitmap::from_lsb0_bytes(0, &lsb0)
}

/// Set positions inside each 32,768-bit page: `(page number, positions)`
/// for every non-empty page.
pub fn page_positions(words: &[u64]) -> Vec<(u64, Vec<u16>)> {
    let mut out = Vec::new();
    for (page, chunk) in words.chunks(512).enumerate() {
        let mut pos = Vec::new();
        for (i, &w) in chunk.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                let lz = w.leading_zeros();
                // i < 512 and lz < 64, so the position is below 32,768.
                pos.push(u16::try_from(i * 64).expect("page position") + u16::try_from(lz).expect("bit"));
                w &= !(1u64 << (63 - lz));
            }
        }
        if !pos.is_empty() {
            out.push((page as u64, pos));
        }
    }
    out
}

/// Number of set bits.
pub fn count(words: &[u64]) -> u64 {
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

/// Random offsets below `bits`.
pub fn random_offsets(seed: u64, n: usize, bits: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(0..bits)).collect()
}

/// The days (0-based, below 30) a user signed in during one month: one to
/// five of them.
pub fn sign_in_days(rng: &mut StdRng) -> Vec<u64> {
    let n = rng.gen_range(1..=5);
    let mut days: Vec<u64> = (0..n).map(|_| rng.gen_range(0..30)).collect();
    days.sort_unstable();
    days.dedup();
    days
}
