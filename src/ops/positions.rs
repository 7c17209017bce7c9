//! AND, OR and XOR of flat position lists (the set bits of sparse bitmaps,
//! ascending; see `engine/flat.rs`), handing the result over a page at a
//! time as page-relative positions, as the page kernels do.

use crate::error::Result;
use crate::geometry::{locate, page_bit, position, word_mask, PAGE_WORDS, WORD_BITS};

/// The index of the first element of `list` (ascending) that is at least
/// `x`, galloping from the front: a walk of ascending `x` over a list costs
/// about the logarithm of each step, not of the list.
fn gallop(list: &[u64], x: u64) -> usize {
    crate::search::partition_from(list.len(), 0, |i| list[i] < x)
}

/// The elements common to every list (none for no lists).
pub(crate) fn and(lists: &[&[u64]]) -> Vec<u64> {
    let mut order: Vec<&[u64]> = lists.to_vec();
    order.sort_by_key(|l| l.len());
    let Some((smallest, others)) = order.split_first() else { return Vec::new() };
    let mut acc = smallest.to_vec();
    for other in others {
        let mut rest: &[u64] = other;
        acc.retain(|&x| {
            rest = &rest[gallop(rest, x)..];
            rest.first() == Some(&x)
        });
        if acc.is_empty() {
            break;
        }
    }
    acc
}

/// Calls `f` with each page of `list` (ascending) that holds an element
/// below `bits`, and the page-relative positions of those elements.
pub(crate) fn each_page(list: &[u64], bits: u64, mut f: impl FnMut(u64, &[u16]) -> Result<()>) -> Result<()> {
    let mut out = Vec::new();
    let mut rest = list;
    while let Some(&first) = rest.first().filter(|&&x| x < bits) {
        let page = locate(first).page;
        out.clear();
        let n = rest.iter().take_while(|&&x| x < bits && locate(x).page == page).count();
        out.extend(rest[..n].iter().map(|&x| position(locate(x).bit)));
        f(page, &out)?;
        rest = &rest[n..];
    }
    Ok(())
}

/// Calls `f` with each non-empty page of the union of `lists` (with `xor`,
/// of the elements in an odd number of them) below `bits`, in page order,
/// and the page-relative positions of its elements. Each page gathers its
/// elements into words, touching only the words they fall in.
pub(crate) fn each_page_of_union(
    lists: &[&[u64]],
    xor: bool,
    bits: u64,
    mut f: impl FnMut(u64, &[u16]) -> Result<()>,
) -> Result<()> {
    let mut cursors: Vec<&[u64]> = lists.iter().copied().filter(|l| !l.is_empty()).collect();
    let mut words = [0u64; PAGE_WORDS];
    // Bit `w` (most significant first) marks word `w` as touched, so the
    // touched words are visited in order without sorting them.
    let mut touched = [0u64; PAGE_WORDS / WORD_BITS as usize];
    let mut out: Vec<u16> = Vec::new();
    while let Some(page) = cursors.iter().filter_map(|l| l.first()).map(|&x| locate(x).page).min() {
        for l in &mut cursors {
            let n = l.iter().take_while(|&&x| locate(x).page == page).count();
            for &x in &l[..n] {
                if x >= bits {
                    continue;
                }
                let (w, mask) = word_mask(locate(x).bit);
                touched[w / WORD_BITS as usize] |= 1 << (WORD_BITS as usize - 1 - w % WORD_BITS as usize);
                if xor {
                    words[w] ^= mask;
                } else {
                    words[w] |= mask;
                }
            }
            *l = &l[n..];
        }
        cursors.retain(|l| !l.is_empty());
        out.clear();
        for (group, marks) in touched.iter_mut().enumerate() {
            let mut marks = std::mem::take(marks);
            while marks != 0 {
                let first = marks.leading_zeros();
                marks &= !(1u64 << (WORD_BITS - 1 - first));
                let w = group * WORD_BITS as usize + first as usize;
                let mut word = std::mem::take(&mut words[w]);
                while word != 0 {
                    let lz = word.leading_zeros();
                    // w < 512 and lz < 64: below 32,768.
                    out.push(position(page_bit(w as u64 * u64::from(WORD_BITS) + u64::from(lz))));
                    word &= !(1u64 << (WORD_BITS - 1 - lz));
                }
            }
        }
        if !out.is_empty() {
            f(page, &out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// Page-by-page output of a kernel, flattened back to offsets.
    fn offsets(run: impl FnOnce(&mut dyn FnMut(u64, &[u16]) -> Result<()>) -> Result<()>) -> Vec<u64> {
        let mut out = Vec::new();
        let mut last_page = None;
        run(&mut |page, positions| {
            assert!(last_page.is_none_or(|l| l < page), "pages ascend");
            assert!(!positions.is_empty() && positions.windows(2).all(|w| w[0] < w[1]), "positions ascend");
            last_page = Some(page);
            out.extend(positions.iter().map(|&p| page * crate::geometry::PAGE_BITS + u64::from(p)));
            Ok(())
        })
        .unwrap();
        out
    }

    /// Invariant: AND, OR and XOR of sorted lists equal the naive set
    /// operations (by counting each element's lists), for lists dense in a
    /// few pages, spread over many, empty, and sharing the last offsets;
    /// and `bits` cuts every result.
    #[test]
    fn kernels_match_counting() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for round in 0..60 {
            let k = rng.gen_range(1..8);
            let span: u64 = [40_000, 1 << 20, 1 << 33][round % 3];
            let lists: Vec<Vec<u64>> = (0..k)
                .map(|_| {
                    let n = rng.gen_range(0..400);
                    let mut l: Vec<u64> = (0..n).map(|_| rng.gen_range(0..span)).collect();
                    if rng.gen_bool(0.3) {
                        l.extend([span - 1, 0, 32_767, 32_768]);
                    }
                    l.sort_unstable();
                    l.dedup();
                    l
                })
                .collect();
            let refs: Vec<&[u64]> = lists.iter().map(Vec::as_slice).collect();
            let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
            for l in &lists {
                for &x in l {
                    *seen.entry(x).or_default() += 1;
                }
            }
            let bits = if round % 4 == 0 { span / 2 } else { u64::MAX };
            let want_and: Vec<u64> = seen.iter().filter(|&(&x, &c)| c == k && x < bits).map(|(&x, _)| x).collect();
            let want_or: Vec<u64> = seen.keys().copied().filter(|&x| x < bits).collect();
            let want_xor: Vec<u64> = seen.iter().filter(|&(&x, &c)| c % 2 == 1 && x < bits).map(|(&x, _)| x).collect();
            let anded = and(&refs);
            assert_eq!(offsets(|f| each_page(&anded, bits, f)), want_and, "AND, round {round}");
            assert_eq!(offsets(|f| each_page_of_union(&refs, false, bits, f)), want_or, "OR, round {round}");
            assert_eq!(offsets(|f| each_page_of_union(&refs, true, bits, f)), want_xor, "XOR, round {round}");
        }
    }
}
