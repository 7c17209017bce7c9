//! Redis index ranges: negative indexes count from the end, then clamp.

/// Unit of a range's indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Unit {
    /// Indexes count bytes (Redis's default).
    #[default]
    Byte,
    /// Indexes count bits.
    Bit,
}

/// An inclusive range `start ..= end` in Redis's convention: negative indexes
/// count from the end (`-1` is the last byte or bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First index, inclusive.
    pub start: i64,
    /// Last index, inclusive.
    pub end: i64,
    /// Whether the indexes count bytes or bits.
    pub unit: Unit,
}

impl Span {
    /// A byte range, as `BITCOUNT key start end`.
    #[must_use]
    pub const fn bytes(start: i64, end: i64) -> Span {
        Span { start, end, unit: Unit::Byte }
    }

    /// A bit range, as `BITCOUNT key start end BIT`.
    #[must_use]
    pub const fn bits(start: i64, end: i64) -> Span {
        Span { start, end, unit: Unit::Bit }
    }
}

/// Redis's index normalisation for a string of `total` units: negative
/// indexes count from the end, then both are clamped to `0 ..= total - 1`.
/// Returns `None` when the range is empty.
pub(crate) fn clamp(start: i64, end: i64, total: u64) -> Option<(u64, u64)> {
    let total = i128::from(total);
    let (mut s, mut e) = (i128::from(start), i128::from(end));
    if s < 0 {
        s += total;
    }
    if e < 0 {
        e += total;
    }
    s = s.max(0);
    e = e.max(0);
    if e >= total {
        e = total - 1;
    }
    if s > e {
        return None;
    }
    // 0 <= s <= e < total <= u64::MAX here.
    Some((u64::try_from(s).ok()?, u64::try_from(e).ok()?))
}

/// [`clamp`] as BITCOUNT and GETRANGE apply it: a range whose ends are both
/// negative with `start > end` selects nothing, before any clamping
/// (clamping alone would turn it into the first unit). BITPOS has no such
/// check.
pub(crate) fn clamp_nonreversed(start: i64, end: i64, total: u64) -> Option<(u64, u64)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    clamp(start, end, total)
}

/// Total units of a string of `len` bytes.
pub(crate) fn total_units(len: u64, unit: Unit) -> u64 {
    match unit {
        Unit::Byte => len,
        // Lengths come from offsets below 2^64, so len * 8 fits unless the
        // key ends at the very last offset; saturate rather than wrap.
        Unit::Bit => len.saturating_mul(8),
    }
}

/// The inclusive bit range of a clamped range in `unit`.
pub(crate) fn to_bits(first: u64, last: u64, unit: Unit) -> (u64, u64) {
    match unit {
        Unit::Byte => (first.saturating_mul(8), last.saturating_mul(8).saturating_add(7)),
        Unit::Bit => (first, last),
    }
}

/// The inclusive bit range of `span` over a string of `len` bytes, or
/// `None` when it selects nothing.
pub(crate) fn span_bits(span: Span, len: u64) -> Option<(u64, u64)> {
    let (first, last) = clamp_nonreversed(span.start, span.end, total_units(len, span.unit))?;
    Some(to_bits(first, last, span.unit))
}

/// The bits of a bitmap `len` bytes long that `range` (bit offsets) covers,
/// as an inclusive pair, or `None` when it covers none of them.
pub(crate) fn bit_range(range: &impl std::ops::RangeBounds<u64>, len: u64) -> Option<(u64, u64)> {
    use std::ops::Bound;
    let first = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let last = match range.end_bound() {
        Bound::Included(&e) => e,
        Bound::Excluded(&e) => e.checked_sub(1)?,
        Bound::Unbounded => u64::MAX,
    };
    let last = last.min(len.checked_mul(8)?.checked_sub(1)?);
    (first <= last).then_some((first, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases from Redis's BITCOUNT documentation and its clamping rules.
    #[test]
    fn clamps_like_redis() {
        assert_eq!(clamp(0, -1, 6), Some((0, 5)));
        assert_eq!(clamp(-2, -1, 6), Some((4, 5)));
        assert_eq!(clamp(1, 1, 6), Some((1, 1)));
        assert_eq!(clamp(5, 100, 6), Some((5, 5)));
        assert_eq!(clamp(-100, 2, 6), Some((0, 2)));
        assert_eq!(clamp(3, 2, 6), None);
        assert_eq!(clamp(-1, -3, 6), None);
        assert_eq!(clamp(0, -1, 0), None);
        assert_eq!(clamp(0, 0, 0), None);
        assert_eq!(clamp(i64::MIN, i64::MAX, 10), Some((0, 9)));
    }

    #[test]
    fn spans_become_bit_ranges() {
        assert_eq!(span_bits(Span::bytes(1, 1), 3), Some((8, 15)));
        assert_eq!(span_bits(Span::bits(5, 30), 3), Some((5, 23)));
        assert_eq!(span_bits(Span::bits(-1, -1), 3), Some((23, 23)));
        assert_eq!(span_bits(Span::bytes(2, 1), 3), None);
        // Both negative and reversed: nothing, although clamping alone
        // would give the first byte.
        assert_eq!(clamp(-199, -4112, 16), Some((0, 0)));
        assert_eq!(span_bits(Span::bytes(-199, -4112), 16), None);
    }
}
