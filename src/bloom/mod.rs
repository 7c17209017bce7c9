//! Scalable Bloom filters, the parts that need no store: sizing, hashing,
//! the filter header and its byte format, and the public option and
//! answer types. The store side (pages, locking) is in `ops::bloom`.
//!
//! A filter is a chain of sub-filters. The first has the reserved capacity
//! and, when the chain may scale, half the requested error rate; when the
//! newest sub-filter holds as many items as its capacity, the next item
//! goes to a new sub-filter with `expansion` times the capacity and half
//! the error rate, so the chain's total false-positive rate stays below the
//! requested one (`e/2 + e/4 + ... < e`). These are RedisBloom's rules
//! (`SB_NewChain`, `SBChain_Add` in its `src/sb.c`).

pub(crate) mod hash;
mod header;
pub(crate) mod small;

pub(crate) use header::{Header, HEADER_PAGE};

use crate::geometry::PAGE_BYTES;
use crate::page::Page;

/// Default error rate of a filter created by BF.ADD/BF.MADD/BF.INSERT:
/// 0.01 (RedisBloom's `bf-error-rate`).
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
/// Default capacity of a filter created by BF.ADD/BF.MADD/BF.INSERT: 100
/// (RedisBloom's `bf-initial-size`).
pub const DEFAULT_CAPACITY: u64 = 100;
/// Default expansion: each new sub-filter has twice the capacity of the
/// previous one (RedisBloom's `bf-expansion-factor`).
pub const DEFAULT_EXPANSION: u32 = 2;
/// Largest capacity a filter may be reserved with: 2^30 (RedisBloom's
/// bound of `bf-initial-size`).
pub const MAX_CAPACITY: u64 = 1 << 30;
/// Largest expansion: 32,768 (RedisBloom's bound).
pub const MAX_EXPANSION: u32 = 32_768;
/// Error rates above this are lowered to it: 0.25 (RedisBloom's
/// `BF_ERROR_RATE_CAP`).
pub const ERROR_RATE_CAP: f64 = 0.25;
/// Most sub-filters a chain may have (they must all fit in the header
/// page). With the error rate halving at each step, the 64th has an error
/// rate below 10^-19.
pub const MAX_FILTERS: usize = 64;

/// Each new sub-filter's error rate is the previous one's times this.
pub(crate) const TIGHTENING: f64 = 0.5;
/// ln(2)^2, as RedisBloom writes it.
const LN2_SQUARED: f64 = 0.480_453_013_918_201;
/// ln(2), as RedisBloom writes it.
#[expect(clippy::approx_constant, reason = "RedisBloom's own truncated value, so hash counts match exactly")]
const LN2: f64 = 0.693_147_180_559_945;
/// Largest bit array of one sub-filter: 2^60 bits (128 PiB).
const MAX_BITS: f64 = (1u64 << 60) as f64;

/// Size of one sub-filter's bit array and its number of hash functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sizing {
    /// Bits in the array, a multiple of 64.
    pub(crate) bits: u64,
    /// Hash functions (bits set per item).
    pub(crate) hashes: u32,
}

/// The sizing of a sub-filter for `capacity` items at `error` rate, as
/// RedisBloom's `bloom_init` with `BLOOM_OPT_NOROUND` computes it: bits per
/// entry `bpe = -ln(error) / ln(2)^2`; bits = `capacity * bpe` (truncated,
/// at least 1) rounded up to a multiple of 64; hashes = `ceil(ln(2) * bpe)`.
/// The same sizes as RedisBloom give the same figures in BF.INFO.
///
/// `None` for an error rate outside `(0, 1)`, a zero capacity or an array
/// above 2^60 bits.
pub(crate) fn sizing(capacity: u64, error: f64) -> Option<Sizing> {
    if capacity == 0 || !(error > 0.0 && error < 1.0) {
        return None;
    }
    let bpe = (error.ln() / LN2_SQUARED).abs();
    #[expect(clippy::cast_precision_loss, reason = "capacities are far below 2^53")]
    let exact = capacity as f64 * bpe;
    if !exact.is_finite() || exact >= MAX_BITS {
        return None;
    }
    // In range (checked above): the cast truncates toward zero, as C does.
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "checked to be in 0..2^60")]
    let bits = (exact as u64).max(1);
    let bits = bits.div_ceil(64) * 64;
    let hashes = (LN2 * bpe).ceil();
    if !(1.0..=f64::from(u32::MAX)).contains(&hashes) {
        return None;
    }
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "checked to be in 1..=u32::MAX")]
    let hashes = hashes as u32;
    Some(Sizing { bits, hashes })
}

/// How a new filter scales; see [`crate::Bloom::reserve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct BloomOptions {
    /// Capacity factor of each new sub-filter (1 ..= [`MAX_EXPANSION`]; 0
    /// means non-scaling). Default [`DEFAULT_EXPANSION`].
    pub expansion: u32,
    /// Whether the filter stays one sub-filter and refuses new items when
    /// full. Default `false`.
    pub nonscaling: bool,
}

impl Default for BloomOptions {
    fn default() -> BloomOptions {
        BloomOptions { expansion: DEFAULT_EXPANSION, nonscaling: false }
    }
}

impl BloomOptions {
    /// Options with an expansion of `n` (0 makes the filter non-scaling).
    pub fn expansion(mut self, n: u32) -> BloomOptions {
        self.expansion = n;
        self
    }

    /// Options for a non-scaling filter.
    pub fn nonscaling(mut self) -> BloomOptions {
        self.nonscaling = true;
        self
    }
}

/// What adding one item to a filter did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BloomAdd {
    /// The item was in no sub-filter (so certainly never added) and is now
    /// in the newest one (BF.ADD replies 1).
    Added,
    /// Every bit of the item was already set in some sub-filter: it was
    /// probably added before (BF.ADD replies 0).
    Exists,
    /// The filter is non-scaling and full: the item was not added
    /// (RedisBloom's `non scaling filter is full`).
    Full,
}

/// A filter's figures, as BF.INFO reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BloomInfo {
    /// Sum of the sub-filters' capacities.
    pub capacity: u64,
    /// Bytes of the filter as RedisBloom counts its memory: 32 bytes for the
    /// chain, 64 per sub-filter and the bit arrays.
    pub size: u64,
    /// Number of sub-filters.
    pub filters: u64,
    /// Items added (counted when an add found the item absent).
    pub items: u64,
    /// Expansion factor, `None` for a non-scaling filter.
    pub expansion: Option<u32>,
    /// Bytes of bitmap pages the filter spans (header page included);
    /// absent (all-zero) pages take no space on disk.
    pub span_bytes: u64,
}

/// Checks a Bloom key's stored header page `page` against the key's length
/// `len` in bytes (for `verify`): a description of what is wrong, if
/// anything.
pub(crate) fn check_stored_header(len: u64, page: &Page) -> Option<String> {
    let mut buf = vec![0u8; PAGE_BYTES as usize];
    page.write_bytes(&mut buf);
    match Header::decode(&buf) {
        Err(e) => Some(format!("Bloom filter header: {e}")),
        Ok(h) if h.end_page().checked_mul(PAGE_BYTES) != Some(len) => Some(format!(
            "Bloom filter header: the key's length of {} bytes is not the {} pages the filter spans",
            len,
            h.end_page()
        )),
        Ok(_) => None,
    }
}

/// Checks the inline bytes of a small Bloom key (for `verify`): a
/// description of what is wrong, if anything.
pub(crate) fn check_small(value: &[u8]) -> Option<String> {
    small::Small::decode(value).err().map(|e| format!("small Bloom filter: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RedisBloom's documented figures: 1% needs 7 hashes and ~9.6 bits
    /// per item, 0.1% 10 hashes, 0.01% 14 hashes; a default filter (100
    /// items at 0.5%, the tightened first rate) has 18 words (the 240-byte
    /// `Size` of RedisBloom's BF.INFO is 32 + 64 + 144).
    #[test]
    fn sizing_matches_redisbloom() {
        assert_eq!(sizing(1_000_000, 0.01).map(|s| s.hashes), Some(7));
        assert_eq!(sizing(1_000_000, 0.001).map(|s| s.hashes), Some(10));
        assert_eq!(sizing(1_000_000, 0.0001).map(|s| s.hashes), Some(14));
        let s = sizing(100, 0.005).unwrap();
        assert_eq!(s.bits, 18 * 64);
        let s = sizing(1_000_000, 0.01).unwrap();
        assert_eq!(s.bits % 64, 0);
        assert!((9_585_000..9_586_000).contains(&s.bits), "{}", s.bits);
    }

    /// Out-of-domain arguments give `None`, never a panic or a zero size.
    #[test]
    fn sizing_rejects_bad_arguments() {
        for (c, e) in [(0, 0.01), (1, 0.0), (1, 1.0), (1, -0.5), (1, f64::NAN), (1, f64::INFINITY), (u64::MAX, 0.01)] {
            assert_eq!(sizing(c, e), None, "{c} {e}");
        }
        assert_eq!(sizing(1, 0.999), Some(Sizing { bits: 64, hashes: 1 }));
        assert_eq!(sizing(1, f64::MIN_POSITIVE).map(|s| s.hashes), Some(1023));
    }
}
