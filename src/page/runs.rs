//! Helpers over run lists (the run representation): a page as its maximal
//! runs of set bits, in increasing order, each `[first, last]` (inclusive,
//! page positions). Maximal means two runs never touch: a zero separates
//! each run from the next, so the list is a function of the bits alone.
//!
//! Runs win where set bits come in runs of a few bits to a few dozen: a run
//! costs 4 bytes stored, where sparse pays 2 bytes a bit and EWAH 8 bytes a
//! word that is neither all zeros nor all ones.

use crate::geometry::{page_count, position, word_start, PAGE_WORDS};

use super::dense::{range_mask, word_span};
use super::{PageError, BITS};

/// One run: its first and last set position.
pub(super) type Run = [u16; 2];

/// The bits of `words` where a run starts: set, with the bit before (in page
/// order: the next higher bit of the word, or the lowest bit of the word
/// before) clear. `before` is the word before `w` (0 for the first).
fn starts(w: u64, before: u64) -> u64 {
    w & !((w >> 1) | (before << 63))
}

/// The bits of `w` where a run ends: set, with the bit after clear. `after`
/// is the word after `w` (0 for the last).
fn ends(w: u64, after: u64) -> u64 {
    w & !((w << 1) | (after >> 63))
}

/// Number of maximal runs in `words`.
pub(super) fn count(words: &[u64; PAGE_WORDS]) -> u32 {
    // A page holds at most 16,384 runs, always below the cap.
    count_below(words, u32::MAX).unwrap_or(u32::MAX)
}

/// The number of maximal runs in `words` if it is below `cap`; `None` (and
/// the count stops early) if not.
pub(super) fn count_below(words: &[u64; PAGE_WORDS], cap: u32) -> Option<u32> {
    let mut before = 0u64;
    let mut runs = 0u32;
    for block in words.chunks_exact(8) {
        for &w in block {
            runs += starts(w, before).count_ones();
            before = w;
        }
        if runs >= cap {
            return None;
        }
    }
    Some(runs)
}

/// The positions of the set bits of `mask` (word `w`), ascending.
fn push_bits(w: usize, mut mask: u64, out: &mut Vec<u16>) {
    while mask != 0 {
        let lz = mask.leading_zeros();
        out.push(position(word_start(w) + lz));
        mask &= !(1u64 << (63 - lz));
    }
}

/// The maximal runs of `words`, which hold `runs` of them ([`count`]).
pub(super) fn from_words(words: &[u64; PAGE_WORDS], runs: u32) -> Vec<Run> {
    let mut first = Vec::with_capacity(runs as usize);
    let mut last = Vec::with_capacity(runs as usize);
    for (w, &word) in words.iter().enumerate() {
        if word == 0 {
            continue;
        }
        let before = if w == 0 { 0 } else { words[w - 1] };
        let after = words.get(w + 1).copied().unwrap_or(0);
        push_bits(w, starts(word, before), &mut first);
        push_bits(w, ends(word, after), &mut last);
    }
    first.into_iter().zip(last).map(|(a, b)| [a, b]).collect()
}

/// The maximal runs of a strictly increasing position list.
pub(super) fn from_positions(pos: &[u16]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for &p in pos {
        match out.last_mut() {
            Some(run) if u32::from(run[1]) + 1 == u32::from(p) => run[1] = p,
            _ => out.push([p, p]),
        }
    }
    out
}

/// Number of maximal runs of a strictly increasing position list.
pub(super) fn in_positions(pos: &[u16]) -> usize {
    // A run starts at each position not one past the one before: a
    // branch-free sum, which the compiler vectorizes.
    let Some(rest) = pos.get(1..) else { return 0 };
    1 + rest.iter().zip(pos).map(|(&p, &before)| usize::from(u32::from(p) != u32::from(before) + 1)).sum::<usize>()
}

/// Bits in a run.
fn len(run: Run) -> u32 {
    u32::from(run[1]) - u32::from(run[0]) + 1
}

/// Set bits of a run list.
pub(super) fn ones(runs: &[Run]) -> u32 {
    runs.iter().map(|&r| len(r)).sum()
}

/// Checks that `runs` is a valid run list (each run inside the page, runs
/// increasing and separated by at least one clear bit) and returns its set
/// bits.
pub(super) fn validate(runs: &[Run]) -> Result<u32, PageError> {
    let mut next_free = 0u32;
    for (i, &[first, last]) in runs.iter().enumerate() {
        if first > last {
            return Err(PageError(format!("run {i} ends at {last} before its start {first}")));
        }
        if u32::from(last) >= BITS {
            return Err(PageError(format!("run {i} ends at {last}, outside the page ({BITS} bits)")));
        }
        if u32::from(first) < next_free {
            return Err(PageError(format!(
                "run {i} starts at {first}, not after a clear bit past the run before (at least {next_free})"
            )));
        }
        next_free = u32::from(last) + 2;
    }
    Ok(ones(runs))
}

/// Index of the first run that ends at or after `bit`.
fn first_reaching(runs: &[Run], bit: u32) -> usize {
    runs.partition_point(|r| u32::from(r[1]) < bit)
}

/// Whether `bit` is set.
pub(super) fn get(runs: &[Run], bit: u32) -> bool {
    runs.get(first_reaching(runs, bit)).is_some_and(|r| u32::from(r[0]) <= bit)
}

/// The runs overlapping `[from, to)`, clipped to it, as `[first, end)`.
fn clipped(runs: &[Run], from: u32, to: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    runs[first_reaching(runs, from)..]
        .iter()
        .map(move |r| (u32::from(r[0]).max(from), (u32::from(r[1]) + 1).min(to)))
        .take_while(|&(a, b)| a < b)
}

/// Set bits in `[from, to)`.
pub(super) fn count_range(runs: &[Run], from: u32, to: u32) -> u32 {
    clipped(runs, from, to).map(|(a, b)| b - a).sum()
}

/// First bit in `[from, to)` whose value is `value` (`from < to <= 32,768`).
pub(super) fn find(runs: &[Run], value: bool, from: u32, to: u32) -> Option<u32> {
    let run = runs.get(first_reaching(runs, from));
    let bit = match (value, run) {
        (true, Some(r)) => u32::from(r[0]).max(from),
        (true, None) => return None,
        // Runs are maximal: the bit after a run is clear.
        (false, Some(r)) if u32::from(r[0]) <= from => u32::from(r[1]) + 1,
        (false, _) => from,
    };
    (bit < to).then_some(bit)
}

/// The set bits in `[from, to)`, ascending.
pub(super) fn ones_in(runs: &[Run], from: u32, to: u32) -> impl Iterator<Item = u32> + '_ {
    clipped(runs, from, to).flat_map(|(a, b)| a..b)
}

/// What [`apply`] does to the bits of a range.
#[derive(Clone, Copy)]
enum Apply {
    Set,
    Clear,
    Flip,
}

/// Sets, clears or flips the bits `[from, to)` of `words`.
fn apply(words: &mut [u64; PAGE_WORDS], from: u32, to: u32, how: Apply) {
    if from >= to {
        return;
    }
    let (w0, w1) = word_span(from, to);
    for (w, word) in words.iter_mut().enumerate().take(w1).skip(w0) {
        let m = if w > w0 && w + 1 < w1 { u64::MAX } else { range_mask(w, from, to) };
        match how {
            Apply::Set => *word |= m,
            Apply::Clear => *word &= !m,
            Apply::Flip => *word ^= m,
        }
    }
}

/// The clear stretches between the runs, `[first, end)`, including those
/// before the first run and after the last.
fn gaps(runs: &[Run]) -> impl Iterator<Item = (u32, u32)> + '_ {
    let starts = std::iter::once(0).chain(runs.iter().map(|r| u32::from(r[1]) + 1));
    let ends = runs.iter().map(|r| u32::from(r[0])).chain(std::iter::once(BITS));
    starts.zip(ends).filter(|&(a, b)| a < b)
}

/// How many bits the run lists `a` and `b` share: the overlaps of a merge
/// walk over both.
pub(super) fn count_common(a: &[Run], b: &[Run]) -> u32 {
    let (mut i, mut j, mut n) = (0, 0, 0u32);
    while i < a.len() && j < b.len() {
        let ([a0, a1], [b0, b1]) = (a[i], b[j]);
        let (lo, hi) = (a0.max(b0), a1.min(b1));
        if lo <= hi {
            n += u32::from(hi - lo) + 1;
        }
        // The run that ends first has no more overlaps.
        if a1 <= b1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    n
}

/// How many of the positions in `list` (strictly increasing) fall in
/// `runs`: one walk over both.
pub(super) fn count_positions(runs: &[Run], list: &[u16]) -> u32 {
    let (mut r, mut n) = (0, 0u32);
    for &p in list {
        while r < runs.len() && runs[r][1] < p {
            r += 1;
        }
        let Some(&[first, _]) = runs.get(r) else { break };
        n += u32::from(first <= p);
    }
    n
}

/// Writes all 512 words of the page into `out`.
pub(super) fn to_words(runs: &[Run], out: &mut [u64; PAGE_WORDS]) {
    out.fill(0);
    or_into(runs, out);
}

/// `acc |= runs`.
pub(super) fn or_into(runs: &[Run], acc: &mut [u64; PAGE_WORDS]) {
    for &r in runs {
        apply(acc, u32::from(r[0]), u32::from(r[1]) + 1, Apply::Set);
    }
}

/// `acc ^= runs`.
pub(super) fn xor_into(runs: &[Run], acc: &mut [u64; PAGE_WORDS]) {
    for &r in runs {
        apply(acc, u32::from(r[0]), u32::from(r[1]) + 1, Apply::Flip);
    }
}

/// `acc &= !runs`.
pub(super) fn andnot_into(runs: &[Run], acc: &mut [u64; PAGE_WORDS]) {
    for &r in runs {
        apply(acc, u32::from(r[0]), u32::from(r[1]) + 1, Apply::Clear);
    }
}

/// `acc &= runs`: clears the gaps.
pub(super) fn and_into(runs: &[Run], acc: &mut [u64; PAGE_WORDS]) {
    for (a, b) in gaps(runs) {
        apply(acc, a, b, Apply::Clear);
    }
}

/// The runs of the complement (the gaps), for a page that is neither empty
/// nor full.
pub(super) fn invert(runs: &[Run]) -> Vec<Run> {
    gaps(runs).map(|(a, b)| [position(a), position(b - 1)]).collect()
}

/// Drops every bit at or above `bits`; returns the set bits left.
pub(super) fn truncate(runs: &mut Vec<Run>, bits: u32) -> u32 {
    runs.truncate(runs.partition_point(|r| u32::from(r[0]) < bits));
    if let Some(last) = runs.last_mut() {
        if u32::from(last[1]) >= bits {
            // bits > last[0] >= 0, so bits - 1 is a position.
            last[1] = position(bits - 1);
        }
    }
    page_count(runs.iter().map(|&r| len(r) as usize).sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::word_mask;

    fn words_of(bits: &[u32]) -> [u64; PAGE_WORDS] {
        let mut w = [0u64; PAGE_WORDS];
        for &b in bits {
            let (i, m) = word_mask(b);
            w[i] |= m;
        }
        w
    }

    /// Runs found from words are the maximal runs, across word edges and at
    /// the page's ends; counting agrees with listing.
    #[test]
    fn runs_of_words_are_maximal() {
        let bits: Vec<u32> = [0u32, 1, 2, 62, 63, 64, 65, 127, 200]
            .into_iter()
            .chain(300..400)
            .chain([32_700])
            .chain(32_766..32_768)
            .collect();
        let words = words_of(&bits);
        let runs = from_words(&words, count(&words));
        assert_eq!(
            runs,
            vec![[0, 2], [62, 65], [127, 127], [200, 200], [300, 399], [32_700, 32_700], [32_766, 32_767]]
        );
        assert_eq!(count(&words) as usize, runs.len());
        let pos: Vec<u16> = bits.iter().map(|&b| position(b)).collect();
        assert_eq!(from_positions(&pos), runs, "positions give the same runs");
        assert_eq!(validate(&runs), Ok(page_count(bits.len())));
        let mut back = [0u64; PAGE_WORDS];
        to_words(&runs, &mut back);
        assert!(back == words, "to_words gives the bits back");
    }

    /// Lists that are not maximal, not increasing or outside the page are
    /// refused.
    #[test]
    fn invalid_lists_are_refused() {
        assert!(validate(&[[0, 4], [5, 6]]).is_err(), "touching runs");
        assert!(validate(&[[5, 6], [0, 1]]).is_err(), "decreasing");
        assert!(validate(&[[3, 2]]).is_err(), "end before start");
        assert!(validate(&[[32_767, 32_768]]).is_err(), "outside the page");
        assert_eq!(validate(&[[0, 4], [6, 6]]), Ok(6));
    }

    /// Complement, truncation and range queries at run edges.
    #[test]
    fn queries_at_run_edges() {
        let runs = vec![[10, 19], [30, 30]];
        assert_eq!(invert(&runs), vec![[0, 9], [20, 29], [31, 32_767]]);
        assert_eq!(count_range(&runs, 15, 31), 6);
        assert_eq!(find(&runs, false, 10, 100), Some(20));
        assert_eq!(find(&runs, true, 20, 100), Some(30));
        assert_eq!(find(&runs, true, 31, 100), None);
        assert_eq!(find(&runs, false, 5, 100), Some(5));
        assert_eq!(ones_in(&runs, 18, 31).collect::<Vec<_>>(), vec![18, 19, 30]);
        let mut cut = runs.clone();
        assert_eq!(truncate(&mut cut, 15), 5);
        assert_eq!(cut, vec![[10, 14]]);
    }
}
