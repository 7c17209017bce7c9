//! Helpers over sorted position lists (the sparse representation).

use crate::geometry::{page_count, word_mask, PAGE_WORDS};

use super::{dense, BITS};

/// Whether `pos` is strictly increasing with every position below 32,768.
pub(super) fn is_valid(pos: &[u16]) -> bool {
    pos.windows(2).all(|w| w[0] < w[1]) && pos.last().is_none_or(|&p| u32::from(p) < BITS)
}

/// Number of positions below `bit`.
pub(super) fn rank(pos: &[u16], bit: u32) -> usize {
    pos.partition_point(|&p| u32::from(p) < bit)
}

/// Number of positions in `[from, to)`.
pub(super) fn count_range(pos: &[u16], from: u32, to: u32) -> u32 {
    page_count(rank(pos, to) - rank(pos, from))
}

/// First bit in `[from, to)` whose value is `value` (`from < to <= 32,768`).
pub(super) fn find(pos: &[u16], value: bool, from: u32, to: u32) -> Option<u32> {
    let i = rank(pos, from);
    if value {
        return pos.get(i).map(|&p| u32::from(p)).filter(|&p| p < to);
    }
    let mut p = from;
    for &q in &pos[i..] {
        if u32::from(q) != p {
            break;
        }
        p += 1;
    }
    (p < to).then_some(p)
}

/// The page words of a position list.
pub(super) fn to_words(pos: &[u16]) -> [u64; PAGE_WORDS] {
    let mut words = [0u64; PAGE_WORDS];
    or_into(pos, &mut words);
    words
}

/// `acc |= pos`.
pub(super) fn or_into(pos: &[u16], acc: &mut [u64; PAGE_WORDS]) {
    for &p in pos {
        let (w, m) = word_mask(u32::from(p));
        acc[w] |= m;
    }
}

/// `acc ^= pos`.
pub(super) fn xor_into(pos: &[u16], acc: &mut [u64; PAGE_WORDS]) {
    for &p in pos {
        let (w, m) = word_mask(u32::from(p));
        acc[w] ^= m;
    }
}

/// `acc &= !pos`.
pub(super) fn andnot_into(pos: &[u16], acc: &mut [u64; PAGE_WORDS]) {
    for &p in pos {
        let (w, m) = word_mask(u32::from(p));
        acc[w] &= !m;
    }
}

/// `acc &= pos`.
pub(super) fn and_into(pos: &[u16], acc: &mut [u64; PAGE_WORDS]) {
    let mut next = 0usize;
    for group in pos.chunk_by(|a, b| a / 64 == b / 64) {
        let (w, _) = word_mask(u32::from(group[0]));
        let mask = group.iter().fold(0u64, |m, &p| m | word_mask(u32::from(p)).1);
        acc[next..w].fill(0);
        acc[w] &= mask;
        next = w + 1;
    }
    acc[next..].fill(0);
}

/// The positions of `list` whose bit in `words` equals `keep`.
#[cfg(any(test, feature = "testing"))]
pub(super) fn filter_words(list: &[u16], words: &[u64; PAGE_WORDS], keep: bool) -> Vec<u16> {
    list.iter().copied().filter(|&p| dense::get(words, u32::from(p)) == keep).collect()
}

#[cfg(any(test, feature = "testing"))]
/// Which elements a [`merge`] keeps: those only in `a`, in both, only in `b`.
#[derive(Clone, Copy)]
pub(super) struct Keep {
    a_only: bool,
    both: bool,
    b_only: bool,
}

#[cfg(any(test, feature = "testing"))]
impl Keep {
    pub(super) const AND: Keep = Keep { a_only: false, both: true, b_only: false };
    pub(super) const OR: Keep = Keep { a_only: true, both: true, b_only: true };
    pub(super) const XOR: Keep = Keep { a_only: true, both: false, b_only: true };
    pub(super) const ANDNOT: Keep = Keep { a_only: true, both: false, b_only: false };
}

/// Keeps in `list` the elements that are also in `set` (both strictly
/// increasing), in place. A list much shorter than the other side is
/// searched for in its shrinking rest; lists of similar length are merged
/// with steps that do not branch on the data (the comparisons of two random
/// lists are unpredictable, so branches would mostly mispredict).
pub(super) fn retain_common(list: &mut Vec<u16>, set: &[u16]) {
    if list.len() * 8 < set.len() {
        let mut rest = set;
        list.retain(|x| match rest.binary_search(x) {
            Ok(i) => {
                rest = &rest[i + 1..];
                true
            }
            Err(i) => {
                rest = &rest[i..];
                false
            }
        });
        return;
    }
    // Both other ways write element k only after reading past index k.
    let mut k = 0;
    if set.len() * 8 < list.len() {
        let mut from = 0;
        for &y in set {
            match list[from..].binary_search(&y) {
                Ok(i) => {
                    list[k] = y;
                    k += 1;
                    from += i + 1;
                }
                Err(i) => from += i,
            }
        }
    } else {
        let (mut i, mut j) = (0, 0);
        while i < list.len() && j < set.len() {
            let (x, y) = (list[i], set[j]);
            list[k] = x;
            k += usize::from(x == y);
            i += usize::from(x <= y);
            j += usize::from(y <= x);
        }
    }
    list.truncate(k);
}

/// How many elements `a` and `b` (both strictly increasing) share, by the
/// first way that applies: a list more than 8 times shorter than the other
/// is searched for in the other's shrinking rest; lists whose lengths
/// multiply to at most [`ALL_PAIRS_UP_TO`] compare every pair; from
/// [`MARK_FROM`] elements in the shorter list, it is marked in words and
/// the other looked up; otherwise the two are merged without branching on
/// the data.
pub(super) fn count_common(a: &[u16], b: &[u16]) -> u32 {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let mut n = 0u32;
    if short.len() * 8 < long.len() {
        let mut rest = long;
        for x in short {
            match rest.binary_search(x) {
                Ok(i) => {
                    n += 1;
                    rest = &rest[i + 1..];
                }
                Err(i) => rest = &rest[i..],
            }
        }
        return n;
    }
    if short.len() * long.len() <= ALL_PAIRS_UP_TO {
        // Every pair compared: the inner count runs as wide vector
        // compares, fewer steps than a merge of such short lists.
        return short.iter().map(|&x| page_count(long.iter().filter(|&&y| y == x).count())).sum();
    }
    if short.len() >= MARK_FROM {
        // Mark one list's bits in words, then look the other's up: two
        // passes of independent steps instead of a merge whose every step
        // waits on the last comparison.
        let mut words = [0u64; PAGE_WORDS];
        for &p in short {
            let (w, m) = word_mask(u32::from(p));
            words[w] |= m;
        }
        return count_in_words(long, &words);
    }
    let (mut i, mut j) = (0, 0);
    while i < short.len() && j < long.len() {
        let (x, y) = (short[i], long[j]);
        n += u32::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    n
}

/// From this many elements in the shorter list, [`count_common`] marks
/// words rather than merging.
const MARK_FROM: usize = 32;

/// Up to this many pairs, [`count_common`] compares every pair.
const ALL_PAIRS_UP_TO: usize = 512;

/// How many of the positions in `list` are set in `words`.
pub(super) fn count_in_words(list: &[u16], words: &[u64; PAGE_WORDS]) -> u32 {
    list.iter().map(|&p| u32::from(dense::get(words, u32::from(p)))).sum()
}

/// Keeps in `list` the positions whose bit is set in `words`, in place.
pub(super) fn retain_in_words(list: &mut Vec<u16>, words: &[u64; PAGE_WORDS]) {
    list.retain(|&p| dense::get(words, u32::from(p)));
}

#[cfg(any(test, feature = "testing"))]
/// Merges two sorted lists keeping the elements selected by `keep`.
pub(super) fn merge(a: &[u16], b: &[u16], keep: Keep) -> Vec<u16> {
    let cap = if keep.b_only { a.len() + b.len() } else { a.len() };
    let mut out = Vec::with_capacity(cap);
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                if keep.a_only {
                    out.push(a[i]);
                }
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                if keep.b_only {
                    out.push(b[j]);
                }
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                if keep.both {
                    out.push(a[i]);
                }
                i += 1;
                j += 1;
            }
        }
    }
    if keep.a_only {
        out.extend_from_slice(&a[i..]);
    }
    if keep.b_only {
        out.extend_from_slice(&b[j..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// retain_common keeps exactly the common elements, whichever side is
    /// much shorter (search either way) or both are alike (merge).
    #[test]
    fn retain_common_matches_merge() {
        let large: Vec<u16> = (0..3000u16).map(|i| i * 7 + 3).collect();
        for small in [
            vec![],
            vec![3u16],
            vec![0, 3, 10, 17, 18, 20_992],
            (0..400u16).map(|i| i * 50).collect::<Vec<_>>(),
            (0..3000u16).map(|i| i * 5).collect::<Vec<_>>(),
        ] {
            let expect = merge(&small, &large, Keep::AND);
            let mut list = small.clone();
            retain_common(&mut list, &large);
            assert_eq!(list, expect, "{small:?} within the large list");
            let mut list = large.clone();
            retain_common(&mut list, &small);
            assert_eq!(list, expect, "the large list within {small:?}");
        }
    }
}
