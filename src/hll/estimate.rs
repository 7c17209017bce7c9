//! The cardinality estimator Redis 7 uses: Otmar Ertl's improved raw
//! estimator ("New cardinality estimation algorithms for HyperLogLog
//! sketches", arXiv:1702.01284) over the histogram of register values,
//! computed with the same double-precision steps so the results are
//! bit-identical.

use super::{Histogram, REGISTERS};

/// `0.5 / ln 2`, the bias constant for an infinite number of registers.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// The largest register value a hash can produce: 64 - 14 + 1.
const Q_PLUS_1: usize = 51;

/// Ertl's sigma function; infinite at 1.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            return z;
        }
    }
}

/// Ertl's tau function; zero at 0 and 1.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if before == z {
            return z / 3.0;
        }
    }
}

/// The estimate from a histogram of register values (`hist[v]` registers
/// hold `v`). Values above 51, which only a hand-made dense value can
/// hold, count only through the number of zero and non-saturated
/// registers, as in Redis.
///
/// Like Redis's `llroundl`, a result that does not fit in an `i64`
/// (a sketch whose registers are all saturated) is `2^63`.
pub(crate) fn estimate(hist: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(hist[Q_PLUS_1])) / m);
    for &n in hist[1..Q_PLUS_1].iter().rev() {
        z += f64::from(n);
        z *= 0.5;
    }
    z += m * sigma(f64::from(hist[0]) / m);
    let e = ALPHA_INF * m * m / z;
    // 2^63 as an f64 is exact.
    if e.is_finite() && e < 9_223_372_036_854_775_808.0 {
        // In range and finite: the conversion is exact after rounding
        // (half away from zero, like llroundl).
        e.round() as u64
    } else {
        1 << 63
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist_of(values: &[(usize, u32)]) -> Histogram {
        let mut h = [0u32; 64];
        for &(v, n) in values {
            h[v] = n;
        }
        h
    }

    /// An empty sketch counts 0; a saturated one gives llroundl's
    /// out-of-range value.
    #[test]
    fn extremes() {
        assert_eq!(estimate(&hist_of(&[(0, 16384)])), 0);
        assert_eq!(estimate(&hist_of(&[(51, 16384)])), 1 << 63);
        assert_eq!(estimate(&hist_of(&[(63, 16384)])), 1 << 63);
    }

    /// One register at 1 is one element; the estimate grows with the
    /// number of non-zero registers.
    #[test]
    fn small_counts_are_near_exact_and_monotone() {
        assert_eq!(estimate(&hist_of(&[(0, 16383), (1, 1)])), 1);
        let mut last = 0;
        for k in 1..5000u32 {
            let e = estimate(&hist_of(&[(0, 16384 - k), (1, k)]));
            assert!(e >= last, "estimate fell at {k}: {e} < {last}");
            last = e;
        }
    }
}
