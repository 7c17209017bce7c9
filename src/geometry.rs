//! Page geometry and bit numbering.
//!
//! This module is the one place that maps a Redis bit offset to a page, a
//! word inside the page and a bit inside the word. Redis numbers bits
//! most-significant first: offset 0 is the bit `0x80` of byte 0. bitsled keeps
//! that order inside each 64-bit word, so word `w` of a page holds the eight
//! Redis bytes `8w .. 8w + 8` in big-endian order and the page-relative bit
//! `b` is the bit `1 << (63 - b % 64)` of word `b / 64`.

#![deny(clippy::cast_possible_truncation)]

/// 64-bit words per page.
pub const PAGE_WORDS: usize = 512;
/// Bits per word.
pub const WORD_BITS: u32 = 64;
/// Bits per page (32,768).
pub const PAGE_BITS: u64 = PAGE_WORDS as u64 * WORD_BITS as u64;
/// Bytes of a bitmap covered by one page (4,096).
pub const PAGE_BYTES: u64 = PAGE_BITS / 8;
/// [`PAGE_BYTES`] as a `usize`, for buffers.
pub const PAGE_LEN: usize = PAGE_WORDS * 8;

/// The largest bit offset a bitmap may use: its byte length, `offset / 8 +
/// 1`, must keep `length * 8` within `u64`.
pub const MAX_OFFSET: u64 = (u64::MAX / 8 - 1) * 8 + 7;

/// Where one bit of a bitmap lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitAddr {
    /// Page number: `offset / PAGE_BITS`.
    pub page: u64,
    /// Bit inside the page, `0 .. PAGE_BITS`.
    pub bit: u32,
}

/// Maps a bitmap bit offset to its page and page-relative bit.
#[must_use]
pub const fn locate(offset: u64) -> BitAddr {
    BitAddr { page: offset / PAGE_BITS, bit: page_bit(offset % PAGE_BITS) }
}

// Page-relative quantities are bounded by the page: bits and positions
// below PAGE_BITS (32,768), counts of at most PAGE_BITS, word indices below
// PAGE_WORDS (512). These are the only narrowing conversions of the engine
// and page code; each checks its bound in debug builds.

/// The pages a value of `len` bytes spans, first and last (none for an
/// empty value).
#[must_use]
pub const fn value_pages(len: u64) -> Option<(u64, u64)> {
    if len == 0 {
        None
    } else {
        Some((0, (len * 8 - 1) / PAGE_BITS))
    }
}

/// The pages holding bits `first ..= last`, first and last.
#[must_use]
pub const fn bit_pages((first, last): (u64, u64)) -> (u64, u64) {
    (locate(first).page, locate(last).page)
}

/// A page-relative bit (`< PAGE_BITS`) as a `u32`.
#[must_use]
#[expect(clippy::cast_possible_truncation, reason = "the bit is below PAGE_BITS = 32,768")]
pub const fn page_bit(bit: u64) -> u32 {
    debug_assert!(bit < PAGE_BITS);
    bit as u32
}

/// A page-relative bound of a bit range (`<= PAGE_BITS`: an exclusive end,
/// or a number of bits) as a `u32`.
#[must_use]
#[expect(clippy::cast_possible_truncation, reason = "the bound is at most PAGE_BITS = 32,768")]
pub const fn page_bound(bound: u64) -> u32 {
    debug_assert!(bound <= PAGE_BITS);
    bound as u32
}

/// A page-relative bit (`< PAGE_BITS`) as a sparse page's `u16` position.
#[must_use]
#[expect(clippy::cast_possible_truncation, reason = "the bit is below PAGE_BITS = 32,768")]
pub const fn position(bit: u32) -> u16 {
    debug_assert!((bit as u64) < PAGE_BITS);
    bit as u16
}

/// A count of bits or positions within one page (`<= PAGE_BITS`) as a
/// `u32`.
#[must_use]
#[expect(clippy::cast_possible_truncation, reason = "a page holds at most PAGE_BITS = 32,768 bits")]
pub const fn page_count(n: usize) -> u32 {
    debug_assert!(n as u64 <= PAGE_BITS);
    n as u32
}

/// The first page-relative bit of word `w` (`<= PAGE_WORDS`).
#[must_use]
#[expect(clippy::cast_possible_truncation, reason = "word indices are at most PAGE_WORDS = 512")]
pub const fn word_start(w: usize) -> u32 {
    debug_assert!(w <= PAGE_WORDS);
    w as u32 * WORD_BITS
}

/// Maps a page-relative bit to its word index and the mask selecting it.
///
/// Bit `b` is word `b / 64`, mask `1 << (63 - b % 64)`: the most significant
/// bit of a word comes first, as in Redis's byte order.
#[must_use]
pub const fn word_mask(bit: u32) -> (usize, u64) {
    ((bit / WORD_BITS) as usize, 1u64 << (WORD_BITS - 1 - bit % WORD_BITS))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis offset 0 is the MSB of byte 0; a dense page's words written
    /// big-endian must reproduce Redis's bytes.
    #[test]
    fn offset_zero_is_msb_of_first_byte() {
        let a = locate(0);
        assert_eq!(a, BitAddr { page: 0, bit: 0 });
        let (w, m) = word_mask(a.bit);
        let mut words = [0u64; 2];
        words[w] |= m;
        assert_eq!(words[0].to_be_bytes()[0], 0x80);
    }

    #[test]
    fn every_bit_of_a_word_maps_to_its_redis_byte_and_bit() {
        for off in 0..128u32 {
            let (w, m) = word_mask(off);
            let mut words = [0u64; 2];
            words[w] |= m;
            let mut bytes = Vec::new();
            for word in words {
                bytes.extend_from_slice(&word.to_be_bytes());
            }
            let byte = (off / 8) as usize;
            let expect = 0x80u8 >> (off % 8);
            for (i, b) in bytes.iter().enumerate() {
                assert_eq!(*b, if i == byte { expect } else { 0 }, "offset {off} byte {i}");
            }
        }
    }

    #[test]
    fn page_edges() {
        assert_eq!(locate(PAGE_BITS - 1), BitAddr { page: 0, bit: 32_767 });
        assert_eq!(locate(PAGE_BITS), BitAddr { page: 1, bit: 0 });
        assert_eq!(locate(999_999_999), BitAddr { page: 30_517, bit: 18_943 });
        assert_eq!(locate(u64::MAX).page, u64::MAX / PAGE_BITS);
        assert_eq!(word_mask(32_767), (511, 1));
    }
}
