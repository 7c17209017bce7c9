//! EWAH (enhanced word-aligned hybrid) streams over the 512 words of a page.
//!
//! A stream is a sequence of 64-bit words. A *marker* word holds:
//!
//! * bit 0: the running bit;
//! * bits 1..=32: the run length, the number of clean words (all zeros when
//!   the running bit is 0, all ones when it is 1);
//! * bits 33..=63: the number of literal words that follow the marker.
//!
//! After the literals comes the next marker. Run lengths plus literal counts
//! sum to exactly 512 words. The canonical (greedy) encoder emits, from each
//! position, the run of identical clean words there (possibly empty) and then
//! every following non-clean word as literals; a clean word ends the literal
//! group and starts the next marker. The decoder accepts any valid stream,
//! including empty runs, markers without literals and clean literal words.

use super::{dense, PageError};
use crate::geometry::{word_mask, word_start, PAGE_WORDS};

/// Mask of the run-length field after shifting out the running bit.
const RUN_MASK: u64 = 0xFFFF_FFFF;

/// A marker word.
pub(super) const fn marker(ones: bool, run: usize, lits: usize) -> u64 {
    // Callers pass run and literal counts of at most 512 (they count words of
    // one page), far inside the 32-bit and 31-bit fields; usize -> u64 is
    // lossless on every supported target.
    ones as u64 | ((run as u64 & RUN_MASK) << 1) | ((lits as u64) << 33)
}

const fn run_len(m: u64) -> u64 {
    (m >> 1) & RUN_MASK
}

const fn lit_count(m: u64) -> u64 {
    m >> 33
}

const fn running_bit(m: u64) -> bool {
    m & 1 == 1
}

const fn is_clean(w: u64) -> bool {
    w == 0 || w == u64::MAX
}

/// Runs the greedy encoder over `words`, calling `emit(marker, literals)` for
/// each marker.
fn greedy(words: &[u64; PAGE_WORDS], mut emit: impl FnMut(u64, &[u64])) {
    let mut i = 0;
    while i < PAGE_WORDS {
        let first = words[i];
        let start = i;
        if is_clean(first) {
            while i < PAGE_WORDS && words[i] == first {
                i += 1;
            }
        }
        let run = i - start;
        let lit_start = i;
        while i < PAGE_WORDS && !is_clean(words[i]) {
            i += 1;
        }
        let lits = &words[lit_start..i];
        emit(marker(run > 0 && first == u64::MAX, run, lits.len()), lits);
    }
}

/// Length in words of the canonical stream for `words`.
pub(super) fn stream_len(words: &[u64; PAGE_WORDS]) -> usize {
    let mut n = 0;
    greedy(words, |_, lits| n += 1 + lits.len());
    n
}

/// Appends the canonical stream for `words` to `out`.
pub(super) fn encode_into(words: &[u64; PAGE_WORDS], out: &mut Vec<u64>) {
    greedy(words, |m, lits| {
        out.push(m);
        out.extend_from_slice(lits);
    });
}

#[cfg(any(test, feature = "testing"))]
/// The canonical stream for `words`.
pub(super) fn encode(words: &[u64; PAGE_WORDS]) -> Vec<u64> {
    let mut out = Vec::with_capacity(stream_len(words));
    encode_into(words, &mut out);
    out
}

/// Checks that `stream` is a valid EWAH stream over exactly 512 words and
/// returns its number of set bits.
pub(super) fn validate(stream: &[u64]) -> Result<u32, PageError> {
    let mut i = 0usize;
    let mut covered = 0u64;
    let mut ones = 0u32;
    while i < stream.len() {
        let m = stream[i];
        let run = run_len(m);
        let lits = lit_count(m);
        // covered <= 512 before this marker; run < 2^32 and lits < 2^31, so
        // the sum cannot overflow u64.
        covered += run + lits;
        if covered > PAGE_WORDS as u64 {
            return Err(PageError(format!(
                "ewah words cover {covered} words, expected {PAGE_WORDS} (marker at word {i})"
            )));
        }
        // lits <= covered <= 512 now.
        let Ok(lits) = usize::try_from(lits) else { return Err(PageError("EWAH literal count overflows".into())) };
        let present = stream.len() - i - 1;
        if lits > present {
            return Err(PageError(format!(
                "ewah marker at word {i} announces {lits} literal words, only {present} present"
            )));
        }
        if running_bit(m) {
            ones += word_start(usize::try_from(run).unwrap_or(PAGE_WORDS));
        }
        ones += dense::popcount(&stream[i + 1..i + 1 + lits]);
        i += 1 + lits;
    }
    if covered != PAGE_WORDS as u64 {
        return Err(PageError(format!("ewah words cover {covered} words, expected {PAGE_WORDS}")));
    }
    Ok(ones)
}

/// Whether `stream` (valid) is exactly what the greedy encoder produces.
pub(super) fn is_canonical(stream: &[u64]) -> bool {
    let mut i = 0usize;
    let mut covered = 0u64;
    // The previous marker: (running bit, run length, literal count).
    let mut prev: Option<(bool, u64, u64)> = None;
    while i < stream.len() {
        if covered >= PAGE_WORDS as u64 {
            return false; // trailing markers
        }
        let m = stream[i];
        let (bit, run, lits) = (running_bit(m), run_len(m), lit_count(m));
        if run == 0 && (bit || lits == 0 || prev.is_some()) {
            return false;
        }
        if let Some((pbit, _, plits)) = prev {
            // A marker without literals ends where the clean value changes.
            if plits == 0 && pbit == bit {
                return false;
            }
        }
        // lits <= 512 in a valid stream; a larger count fails the lookup.
        let n = usize::try_from(lits).unwrap_or(usize::MAX - i - 1);
        let Some(literals) = stream.get(i + 1..i + 1 + n) else {
            return false;
        };
        if literals.iter().any(|&w| is_clean(w)) {
            return false;
        }
        covered += run + lits;
        prev = Some((bit, run, lits));
        i += 1 + literals.len();
    }
    covered == PAGE_WORDS as u64
}

/// One stretch of a stream.
pub(super) enum Segment<'a> {
    /// `len` clean words from page word `start`, all ones if `ones`.
    Run { start: usize, len: usize, ones: bool },
    /// Literal words from page word `start`.
    Lits { start: usize, words: &'a [u64] },
}

impl Segment<'_> {
    /// First page word of the segment.
    pub(super) fn start(&self) -> usize {
        match *self {
            Segment::Run { start, .. } | Segment::Lits { start, .. } => start,
        }
    }

    /// One past the last page word of the segment.
    pub(super) fn end(&self) -> usize {
        match *self {
            Segment::Run { start, len, .. } => start + len,
            Segment::Lits { start, words } => start + words.len(),
        }
    }
}

/// The non-empty segments of a stream, in page order. Never panics and never
/// goes past word 512, even on an invalid stream (which it then clips).
pub(super) struct Segments<'a> {
    stream: &'a [u64],
    /// Next stream index to read.
    i: usize,
    /// Next page word.
    word: usize,
    /// Literals of the current marker, not yet returned.
    pending: &'a [u64],
}

impl<'a> Segments<'a> {
    pub(super) fn new(stream: &'a [u64]) -> Segments<'a> {
        Segments { stream, i: 0, word: 0, pending: &[] }
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = Segment<'a>;

    fn next(&mut self) -> Option<Segment<'a>> {
        loop {
            if !self.pending.is_empty() {
                let words = std::mem::take(&mut self.pending);
                let start = self.word;
                self.word += words.len();
                return Some(Segment::Lits { start, words });
            }
            let &m = self.stream.get(self.i)?;
            self.i += 1;
            let room = PAGE_WORDS - self.word;
            let run = usize::try_from(run_len(m)).unwrap_or(usize::MAX).min(room);
            let lits = usize::try_from(lit_count(m)).unwrap_or(usize::MAX).min(self.stream.len() - self.i);
            let take = lits.min(room - run);
            self.pending = self.stream.get(self.i..self.i + take).unwrap_or(&[]);
            self.i += lits;
            if run > 0 {
                let start = self.word;
                self.word += run;
                return Some(Segment::Run { start, len: run, ones: running_bit(m) });
            }
        }
    }
}

/// Bit `bit` of the page.
pub(super) fn get(stream: &[u64], bit: u32) -> bool {
    let (w, m) = word_mask(bit);
    for seg in Segments::new(stream) {
        if w < seg.end() {
            return match seg {
                Segment::Run { ones, .. } => ones,
                Segment::Lits { start, words } => words[w - start] & m != 0,
            };
        }
    }
    false
}

/// Writes all 512 page words into `out`.
pub(super) fn to_words(stream: &[u64], out: &mut [u64; PAGE_WORDS]) {
    out.fill(0);
    for seg in Segments::new(stream) {
        match seg {
            Segment::Run { start, len, ones } => {
                if ones {
                    out[start..start + len].fill(u64::MAX);
                }
            }
            Segment::Lits { start, words } => out[start..start + words.len()].copy_from_slice(words),
        }
    }
}

/// The segments of `stream` that overlap the words `w0 .. w1`, in order.
fn segments_over(stream: &[u64], w0: usize, w1: usize) -> impl Iterator<Item = Segment<'_>> {
    Segments::new(stream).skip_while(move |seg| seg.end() <= w0).take_while(move |seg| seg.start() < w1)
}

/// Number of set bits in `[from, to)`.
pub(super) fn count_range(stream: &[u64], from: u32, to: u32) -> u32 {
    let (w0, w1) = dense::word_span(from, to);
    let mut n = 0;
    for seg in segments_over(stream, w0, w1) {
        match seg {
            Segment::Run { start, len, ones } => {
                if ones {
                    let a = word_start(start).max(from);
                    let b = word_start(start + len).min(to);
                    n += b.saturating_sub(a);
                }
            }
            Segment::Lits { start, words } => {
                let lo = w0.max(start);
                let hi = w1.min(start + words.len());
                n += (lo..hi).map(|w| (words[w - start] & dense::range_mask(w, from, to)).count_ones()).sum::<u32>();
            }
        }
    }
    n
}

/// First bit in `[from, to)` whose value is `value`.
pub(super) fn find(stream: &[u64], value: bool, from: u32, to: u32) -> Option<u32> {
    let (w0, w1) = dense::word_span(from, to);
    for seg in segments_over(stream, w0, w1) {
        match seg {
            Segment::Run { start, len, ones } => {
                if ones == value {
                    let a = word_start(start).max(from);
                    let b = word_start(start + len).min(to);
                    if a < b {
                        return Some(a);
                    }
                }
            }
            Segment::Lits { start, words } => {
                let lo = w0.max(start);
                let hi = w1.min(start + words.len());
                if let Some(p) = dense::find_in(&words[lo - start..hi - start], lo, value, from, to) {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// Set bits in `[from, to)`, ascending.
pub(super) fn ones_in(stream: &[u64], from: u32, to: u32) -> impl Iterator<Item = u32> + '_ {
    let (w0, w1) = dense::word_span(from, to);
    segments_over(stream, w0, w1).flat_map(move |seg| -> Box<dyn Iterator<Item = u32> + '_> {
        match seg {
            Segment::Run { ones: false, .. } => Box::new(std::iter::empty()),
            Segment::Run { start, len, .. } => {
                let a = word_start(start).max(from);
                let b = word_start(start + len).min(to);
                Box::new(a..b)
            }
            Segment::Lits { start, words } => Box::new(dense::ones_in(words, start, from, to)),
        }
    })
}

/// `acc &= page`.
pub(super) fn and_into(stream: &[u64], acc: &mut [u64; PAGE_WORDS]) {
    for seg in Segments::new(stream) {
        match seg {
            Segment::Run { start, len, ones } => {
                if !ones {
                    acc[start..start + len].fill(0);
                }
            }
            Segment::Lits { start, words } => acc[start..].iter_mut().zip(words).for_each(|(a, w)| *a &= w),
        }
    }
}

/// `acc |= page`.
pub(super) fn or_into(stream: &[u64], acc: &mut [u64; PAGE_WORDS]) {
    for seg in Segments::new(stream) {
        match seg {
            Segment::Run { start, len, ones } => {
                if ones {
                    acc[start..start + len].fill(u64::MAX);
                }
            }
            Segment::Lits { start, words } => acc[start..].iter_mut().zip(words).for_each(|(a, w)| *a |= w),
        }
    }
}

/// `acc ^= page`.
pub(super) fn xor_into(stream: &[u64], acc: &mut [u64; PAGE_WORDS]) {
    for seg in Segments::new(stream) {
        match seg {
            Segment::Run { start, len, ones } => {
                if ones {
                    acc[start..start + len].iter_mut().for_each(|a| *a = !*a);
                }
            }
            Segment::Lits { start, words } => acc[start..].iter_mut().zip(words).for_each(|(a, w)| *a ^= w),
        }
    }
}

/// `acc &= !page`.
pub(super) fn andnot_into(stream: &[u64], acc: &mut [u64; PAGE_WORDS]) {
    for seg in Segments::new(stream) {
        match seg {
            Segment::Run { start, len, ones } => {
                if ones {
                    acc[start..start + len].fill(0);
                }
            }
            Segment::Lits { start, words } => acc[start..].iter_mut().zip(words).for_each(|(a, w)| *a &= !w),
        }
    }
}

/// The stream of the complement: running bits and literals flipped. A valid
/// (canonical) stream stays valid (canonical).
pub(super) fn invert(stream: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(stream.len());
    let mut i = 0;
    while i < stream.len() {
        let m = stream[i];
        // An empty run keeps running bit 0, as the greedy encoder writes it.
        out.push(if run_len(m) == 0 { m & !1 } else { m ^ 1 });
        let lits = usize::try_from(lit_count(m)).unwrap_or(usize::MAX).min(stream.len() - i - 1);
        out.extend(stream[i + 1..i + 1 + lits].iter().map(|w| !w));
        i += 1 + lits;
    }
    out
}
