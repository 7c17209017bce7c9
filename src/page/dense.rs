//! Helpers over plain word arrays (the dense representation, and literal
//! words inside EWAH streams).

use crate::geometry::{position, word_mask, word_start, PAGE_WORDS, WORD_BITS};

/// Whether page-relative bit `bit` is set in `words`.
pub(super) fn get(words: &[u64; PAGE_WORDS], bit: u32) -> bool {
    let (w, m) = word_mask(bit);
    words[w] & m != 0
}

/// Number of set bits.
pub(super) fn popcount(words: &[u64]) -> u32 {
    words.iter().map(|w| w.count_ones()).sum()
}

/// Set bits and dirty words (neither 0 nor all ones), in one pass.
pub(super) fn census(words: &[u64; PAGE_WORDS]) -> (u32, u32) {
    // Sums of at most 512 per word and 512 words: far below u32::MAX.
    words.iter().fold((0u32, 0u32), |(ones, dirty), &w| {
        // w + 1 wraps all ones to 0 and maps 0 to 1; every dirty word lands
        // at 2 or above.
        (ones + w.count_ones(), dirty + u32::from(w.wrapping_add(1) >= 2))
    })
}

/// Words per block of [`fold`]: one cache line.
const BLOCK: usize = 8;
/// Pages [`fold`] reads side by side: more streams than the hardware
/// prefetchers follow would make it slower than page by page (30 sources
/// at once measured 1.3x slower than one at a time).
const GROUP: usize = 8;

/// `out = sources[0] op sources[1] op ...`, a block of words at a time
/// across up to [`GROUP`] sources at once (all zero for no sources).
pub(super) fn fold(sources: &[&[u64; PAGE_WORDS]], out: &mut [u64; PAGE_WORDS], op: impl Fn(u64, u64) -> u64) {
    let Some((first, rest)) = sources.split_first() else {
        out.fill(0);
        return;
    };
    out.copy_from_slice(&first[..]);
    for group in rest.chunks(GROUP) {
        for (b, block) in out.chunks_exact_mut(BLOCK).enumerate() {
            let at = b * BLOCK;
            let mut acc = [0u64; BLOCK];
            acc.copy_from_slice(block);
            for s in group {
                for (a, &w) in acc.iter_mut().zip(&s[at..at + BLOCK]) {
                    *a = op(*a, w);
                }
            }
            block.copy_from_slice(&acc);
        }
    }
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
///
/// Two passes, neither of which branches on the data for most words: the
/// first lists the non-zero words (every word is written to the list, the
/// list only advances past non-zero ones), the second writes each listed
/// word's first positions unconditionally. Encoding a page of 0.8% density
/// (`column/encode_and7_result` in benches/pages.rs) takes 1.8 µs this way
/// against 3.1 µs with a loop that branches on each word and bit, whose
/// branches mispredict.
pub(super) fn positions(words: &[u64; PAGE_WORDS], ones: u32) -> Vec<u16> {
    let mut nonzero = [0u16; PAGE_WORDS];
    let mut listed = 0usize;
    for (w, &word) in words.iter().enumerate() {
        // w < 512.
        nonzero[listed] = u16::try_from(w).unwrap_or(0);
        listed += usize::from(word != 0);
    }
    // Each word writes its first FIRST positions unconditionally: slots past
    // the word's bits hold junk that the next word overwrites. That needs
    // up to 64 slots of room; the last words, within 64 slots of the end,
    // take a plain loop instead, so the list is allocated at its exact size.
    const FIRST: usize = 2;
    const ROOM: usize = WORD_BITS as usize;
    let mut out = vec![0u16; ones as usize];
    let mut n = 0usize;
    for &w in &nonzero[..listed] {
        let w = usize::from(w);
        let base = word_start(w);
        let Some(dst) = out.get_mut(n..n + ROOM) else {
            for p in WordBits::new(w, words[w]) {
                // Past the end only if `ones` undercounted the words.
                match out.get_mut(n) {
                    Some(slot) => *slot = position(p),
                    None => out.push(position(p)),
                }
                n += 1;
            }
            continue;
        };
        // Reversed, the page's bit order runs from the low end, so each
        // step clears the lowest bit (a short dependency chain).
        let mut rest = words[w].reverse_bits();
        let mut count = 0;
        for slot in &mut dst[..FIRST] {
            *slot = junk_or_position(base + rest.trailing_zeros());
            count += usize::from(rest != 0);
            rest &= rest.wrapping_sub(1);
        }
        while rest != 0 {
            dst[count] = junk_or_position(base + rest.trailing_zeros());
            count += 1;
            rest &= rest.wrapping_sub(1);
        }
        n += count;
    }
    // Shorter only if `ones` overcounted the words.
    out.truncate(n);
    out
}

/// A page position, or for a slot past a word's bits a junk value (at most
/// 32,704 + 64) that is overwritten or dropped later.
fn junk_or_position(value: u32) -> u16 {
    u16::try_from(value).unwrap_or(u16::MAX)
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
