//! Item hashing: MurmurHash64A and the double-hashing bit positions.
//!
//! An item's two hashes `a` and `b` are RedisBloom's (MurmurHash64A of the
//! item seeded with the multiplier, then seeded with `a`). Its bit for hash
//! function `i` is `fmix64(a + i * b) mod bits`, not RedisBloom's plain
//! `(a + i * b) mod bits`: the bit counts are multiples of 64 with many
//! small divisors, and when `b mod bits` shares a large factor with `bits`
//! the plain positions cycle through fewer than `k` distinct bits. Measured
//! (simulation, 10^6 probes): a 100-item sub-filter at 0.5% gave 0.458%
//! plain against 0.404% mixed (0.395% in theory), and a 200-item one at
//! 0.25% gave 0.274% against 0.253%; a chain grown from 100 to 30,000
//! items measured 1.06% plain, above its configured 1%. Mixing makes the
//! `k` positions behave as independent, which the sizing formula assumes.

use crate::murmur::{murmur64a, M};

/// The two 64-bit hashes of an item: `a` seeded with MurmurHash64A's
/// multiplier, `b` seeded with `a` (RedisBloom's 64-bit scheme).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ItemHash {
    pub(crate) a: u64,
    pub(crate) b: u64,
}

impl ItemHash {
    /// Hashes `item`.
    pub(crate) fn of(item: &[u8]) -> ItemHash {
        let a = murmur64a(item, M);
        ItemHash { a, b: murmur64a(item, a) }
    }

    /// The bit of hash function `i` in a filter of `bits` bits (`bits > 0`):
    /// `fmix64(a + i * b) mod bits`, in wrapping 64-bit arithmetic.
    pub(crate) fn position(self, i: u32, bits: u64) -> u64 {
        fmix64(self.a.wrapping_add(u64::from(i).wrapping_mul(self.b))) % bits.max(1)
    }
}

/// MurmurHash3's 64-bit finaliser: a bijection that spreads every input
/// bit over the output.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    const POSITIONS_OF_HELLO: [u64; 4] = [214_756, 856_303, 407_009, 662_480];

    /// The two hashes equal those of RedisBloom's 64-bit hashing (reference
    /// values computed with its C MurmurHash64A), including every tail
    /// length class exercised by these inputs.
    #[test]
    fn hashes_match_reference_values() {
        let cases: [(&[u8], u64, u64); 6] = [
            (b"", 0x1ab1_1ea5_a7b2_c56e, 0xbbdd_cb5a_b56d_d547),
            (b"a", 0x4292_cee2_27b9_150a, 0x7e9b_5270_31f5_0c11),
            (b"hello", 0x5ba5_b8a5_9803_e699, 0xa7d4_51d5_88a0_c2a4),
            (b"12345678", 0x700b_ea34_3394_41c4, 0x94cc_ce09_94c5_c064),
            (b"123456789abcdef", 0x9991_a1a1_1e76_b0ef, 0xaf99_1b19_7240_5b73),
            (b"item:1000000", 0xf6f1_d57c_b76c_92de, 0xf3e1_c78f_6b49_506e),
        ];
        for (item, a, b) in cases {
            assert_eq!(ItemHash::of(item), ItemHash { a, b }, "{:?}", String::from_utf8_lossy(item));
        }
    }

    /// Positions stay below the filter size and wrap instead of overflowing.
    #[test]
    fn positions_are_in_range() {
        let h = ItemHash { a: u64::MAX, b: u64::MAX - 1 };
        for i in 0..64 {
            assert!(h.position(i, 1_000_003) < 1_000_003);
        }
        assert_eq!(h.position(0, 1), 0);
        assert_eq!(h.position(3, 0), 0, "a zero size never divides by zero");
    }

    /// The positions are part of the format: the same item must map to the
    /// same bits in every build (reference values of this scheme).
    #[test]
    fn positions_are_stable() {
        let h = ItemHash::of(b"hello");
        let got: Vec<u64> = (0..4).map(|i| h.position(i, 1_000_000)).collect();
        assert_eq!(got, POSITIONS_OF_HELLO);
    }

    /// A hash `b` sharing a large factor with the size still gives `k`
    /// distinct positions (the plain `a + i * b` would give 2 here).
    #[test]
    fn positions_do_not_cycle() {
        let h = ItemHash { a: 5, b: 576 };
        let mut got: Vec<u64> = (0..8).map(|i| h.position(i, 1152)).collect();
        got.sort_unstable();
        got.dedup();
        assert!(got.len() >= 7, "{got:?}");
    }
}
