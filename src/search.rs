//! A search that starts from a guess: where an answer's place can be
//! estimated (hash tags spread evenly, a cursor that moves forward), it
//! costs about twice the logarithm of the guess's error, not of the length.

/// The first index in `0 .. n` at which `below` is false, for a `below`
/// that is true on a prefix of the indices and false after it. The search
/// gallops from `guess` (clamped to `n`) by doubling steps towards the
/// answer, then bisects the bracket found.
pub(crate) fn partition_from(n: usize, guess: usize, below: impl Fn(usize) -> bool) -> usize {
    let guess = guess.min(n);
    let (mut lo, mut hi);
    let mut step = 1;
    if guess < n && below(guess) {
        // The answer is past `guess`: gallop up.
        lo = guess + 1;
        hi = lo;
        while hi < n && below(hi) {
            lo = hi + 1;
            hi += step;
            step *= 2;
        }
        hi = hi.min(n);
    } else {
        // The answer is at most `guess`: gallop down.
        hi = guess;
        lo = 0;
        while hi > 0 {
            let p = hi.saturating_sub(step);
            if below(p) {
                lo = p + 1;
                break;
            }
            hi = p;
            step *= 2;
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Invariant: from every guess (in range and past it), the answer is
    /// the slice's partition point, for lists with runs of equal values.
    #[test]
    fn every_guess_finds_the_partition_point() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for n in [0usize, 1, 2, 7, 64, 300] {
            let mut list: Vec<u32> = (0..n).map(|_| rng.gen_range(0..40)).collect();
            list.sort_unstable();
            for x in 0..42 {
                let want = list.partition_point(|&y| y < x);
                for guess in 0..=n + 2 {
                    assert_eq!(partition_from(n, guess, |i| list[i] < x), want, "n {n} x {x} guess {guess}");
                }
            }
        }
    }
}
