//! Helpers over plain word arrays (the dense representation, and literal
//! words inside EWAH streams).

use crate::geometry::{position, word_mask, word_start, PAGE_WORDS, WORD_BITS};

/// Number of set bits.
pub(super) fn popcount(words: &[u64]) -> u32 {
    words.iter().map(|w| w.count_ones()).sum()
}

/// Mask of the bits of word `w` that lie in page bits `[from, to)`.
pub(super) fn range_mask(w: usize, from: u32, to: u32) -> u64 {
    let base = word_start(w);
    let a = from.saturating_sub(base).min(WORD_BITS);
    let b = to.saturating_sub(base).min(WORD_BITS);
    if a >= b {
        return 0;
    }
    // a < b <= 64, so the first shift is below 64.
    (u64::MAX >> a) & !u64::MAX.checked_shr(b).unwrap_or(0)
}

/// The word indices touching `[from, to)`: `from / 64 .. ceil(to / 64)`.
pub(super) fn word_span(from: u32, to: u32) -> (usize, usize) {
    // Both are below or equal to 32,768 / 64 + 1, tiny.
    ((from / WORD_BITS) as usize, to.div_ceil(WORD_BITS) as usize)
}

/// Number of set bits of `words` (the whole page) in `[from, to)`, with
/// `from < to <= 32,768`.
pub(super) fn count_range(words: &[u64; PAGE_WORDS], from: u32, to: u32) -> u32 {
    let (w0, w1) = word_span(from, to);
    let edge = |w: usize| (words[w] & range_mask(w, from, to)).count_ones();
    if w0 + 1 >= w1 {
        return edge(w0);
    }
    edge(w0) + popcount(&words[w0 + 1..w1 - 1]) + edge(w1 - 1)
}

/// First bit in `[from, to)` whose value is `value`.
pub(super) fn find(words: &[u64; PAGE_WORDS], value: bool, from: u32, to: u32) -> Option<u32> {
    let (w0, w1) = word_span(from, to);
    find_in(&words[w0..w1], w0, value, from, to)
}

/// First bit in `[from, to)` whose value is `value`, looking only at `words`,
/// which are the page words starting at index `first`.
pub(super) fn find_in(words: &[u64], first: usize, value: bool, from: u32, to: u32) -> Option<u32> {
    for (i, &word) in words.iter().enumerate() {
        let w = first + i;
        let x = if value { word } else { !word } & range_mask(w, from, to);
        if x != 0 {
            return Some(word_start(w) + x.leading_zeros());
        }
    }
    None
}

/// Set bits of `words` (page words starting at index `first`) in `[from, to)`.
pub(super) fn ones_in(words: &[u64], first: usize, from: u32, to: u32) -> impl Iterator<Item = u32> + '_ {
    let (w0, w1) = word_span(from, to);
    let lo = w0.max(first).min(first + words.len());
    let hi = w1.min(first + words.len()).max(lo);
    words[lo - first..hi - first]
        .iter()
        .enumerate()
        .flat_map(move |(i, &word)| WordBits::new(lo + i, word & range_mask(lo + i, from, to)))
}

/// The set bits of one word, as page positions.
pub(super) struct WordBits {
    base: u32,
    word: u64,
}

impl WordBits {
    pub(super) fn new(w: usize, word: u64) -> WordBits {
        WordBits { base: word_start(w), word }
    }
}

impl Iterator for WordBits {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.word == 0 {
            return None;
        }
        let lz = self.word.leading_zeros();
        self.word &= !(1u64 << (63 - lz));
        Some(self.base + lz)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.word.count_ones() as usize;
        (n, Some(n))
    }
}

/// The set positions of a whole page with `ones` set bits.
pub(super) fn positions(words: &[u64; PAGE_WORDS], ones: u32) -> Vec<u16> {
    let mut out = Vec::with_capacity(ones as usize);
    for (w, &word) in words.iter().enumerate() {
        let mut rest = word;
        // A plain loop: most words of a sparse page hold 0 or 1 bit.
        let base = word_start(w);
        while rest != 0 {
            let lz = rest.leading_zeros();
            out.push(position(base + lz));
            rest ^= 1u64 << (63 - lz);
        }
    }
    out
}

/// Writes the Redis (big-endian) bytes of `words` into `out`, which may be
/// shorter than `words` (the tail is cut).
pub(super) fn write_bytes(words: &[u64], out: &mut [u8]) {
    for (chunk, word) in out.chunks_mut(8).zip(words) {
        let be = word.to_be_bytes();
        chunk.copy_from_slice(&be[..chunk.len()]);
    }
}

/// Clears every bit at or above `bits` (below 32,768).
pub(super) fn truncate(words: &mut [u64; PAGE_WORDS], bits: u32) {
    let (w, _) = word_mask(bits);
    words[w] &= !range_mask(w, bits, u32::MAX);
    words[w + 1..].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// range_mask selects exactly the bits of a word inside [from, to), MSB first.
    #[test]
    fn range_mask_matches_bitwise_definition() {
        for w in [0usize, 1, 511] {
            for from in [0u32, 1, 63, 64, 65, 127, 128, 32_703, 32_767] {
                for to in [0u32, 1, 63, 64, 65, 128, 32_704, 32_767, 32_768] {
                    let mut expect = 0u64;
                    for o in 0..64u32 {
                        let b = word_start(w) + o;
                        if b >= from && b < to {
                            expect |= 1 << (63 - o);
                        }
                    }
                    assert_eq!(range_mask(w, from, to), expect, "w {w} [{from}, {to})");
                }
            }
        }
    }
}
