//! The small form of a filter: a chain of one sub-filter whose compact
//! header and bits are short enough to live inline in the key's metadata
//! entry, as a tiny string does (DESIGN.md, "Small Bloom filters"). A small
//! filter costs its bits plus about a dozen bytes, and a BF.ADD changes one
//! metadata entry and no page. When the chain grows a second sub-filter,
//! the filter moves to pages (`ops::bloom`); its first sub-filter keeps its
//! place, page 1, so the move copies the bits as they are.
//!
//! ```text
//!  0     1       2              10
//!  | ver | flags | error (f64)  | capacity | expansion | items | bits |
//! ```
//!
//! Version `1`; flags bit 0 = non-scaling; the first sub-filter's error
//! rate as IEEE-754 binary64 bits (little-endian); capacity, expansion and
//! items as varints; then exactly `m / 8` bytes of bits, bit `j` of the
//! array being bit `0x80 >> (j % 8)` of byte `j / 8` (the order of the
//! bitmap's own bytes). The metadata entry's checksum covers it all.

use super::header::{Header, SubFilter};
use super::MAX_EXPANSION;
use crate::bloom::HEADER_PAGE;
use crate::varint;

/// The layout version this build writes and reads.
const VERSION: u8 = 1;
/// Flag bit: the chain never grows.
const FLAG_NONSCALING: u8 = 1;
/// Bytes before the varints.
const FIXED: usize = 10;

/// A filter in its small form: its header (one sub-filter) and that
/// sub-filter's bits.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Small {
    pub(crate) header: Header,
    /// `m / 8` bytes; see the module's bit order.
    pub(crate) bits: Vec<u8>,
}

/// Bytes of the small form of `header` (whose chain must be one
/// sub-filter long) at its largest, when it holds its capacity: the size
/// to compare with the inline limit, so that a filter kept inline stays
/// within it as its item count's varint grows.
pub(crate) fn encoded_len(header: &Header) -> usize {
    let f = header.newest();
    let varints = [f.capacity, u64::from(header.expansion), f.capacity].iter().map(|&v| varint::len(v)).sum::<usize>();
    FIXED + varints + usize::try_from(f.bits / 8).unwrap_or(usize::MAX)
}

/// Whether bit `pos` of a small filter's `bits` is set (false past them).
pub(crate) fn bit(bits: &[u8], pos: u64) -> bool {
    usize::try_from(pos / 8).ok().and_then(|i| bits.get(i)).is_some_and(|b| b & (0x80 >> (pos % 8)) != 0)
}

/// The small form of `header` (one sub-filter) with its `bits`.
pub(crate) fn encode(header: &Header, bits: &[u8]) -> Vec<u8> {
    let f = header.filters[0];
    let mut b = Vec::with_capacity(encoded_len(header));
    b.push(VERSION);
    b.push(if header.nonscaling { FLAG_NONSCALING } else { 0 });
    b.extend_from_slice(&f.error.to_bits().to_le_bytes());
    varint::put(&mut b, f.capacity);
    varint::put(&mut b, u64::from(header.expansion));
    varint::put(&mut b, f.items);
    b.extend_from_slice(bits);
    b
}

/// Sets bit `pos` of a small filter's `bits` (a position past them is
/// ignored: positions come from the sizing, which keeps them in).
pub(crate) fn set_bit(bits: &mut [u8], pos: u64) {
    if let Some(b) = usize::try_from(pos / 8).ok().and_then(|i| bits.get_mut(i)) {
        *b |= 0x80 >> (pos % 8);
    }
}

impl Small {
    /// A new empty filter with `header`'s one sub-filter.
    pub(crate) fn empty(header: Header) -> Small {
        let bytes = usize::try_from(header.newest().bits / 8).unwrap_or(0);
        Small { header, bits: vec![0; bytes] }
    }

    /// The small form's bytes (operations encode with [`encode`]).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn encode(&self) -> Vec<u8> {
        encode(&self.header, &self.bits)
    }

    /// Parses and validates a small form (see [`peek`]).
    ///
    /// # Errors
    /// As [`peek`].
    pub(crate) fn decode(b: &[u8]) -> Result<Small, String> {
        let p = peek(b)?;
        let header = Header { expansion: p.expansion, nonscaling: p.nonscaling, filters: vec![p.filter] };
        Ok(Small { header, bits: b[p.bits_at..].to_vec() })
    }
}

/// A small form read where it lies, without copying it: what one BF.ADD or
/// BF.EXISTS needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peeked {
    /// The one sub-filter, with its item count.
    pub(crate) filter: SubFilter,
    pub(crate) expansion: u32,
    pub(crate) nonscaling: bool,
    /// Where the bits start in the small form's bytes.
    pub(crate) bits_at: usize,
}

/// Parses and validates a small form: version, flags, a valid sizing for
/// the capacity and rate, the expansion range (a scaling chain has a
/// non-zero one), items at most the capacity, and exactly the bytes of
/// bits the sizing gives.
///
/// # Errors
/// A description of the first check that failed; never panics.
pub(crate) fn peek(b: &[u8]) -> Result<Peeked, String> {
    if b.len() < FIXED {
        return Err(format!("{} bytes are too few for a small filter", b.len()));
    }
    if b[0] != VERSION {
        return Err(format!("unknown small filter version {}", b[0]));
    }
    if b[1] & !FLAG_NONSCALING != 0 {
        return Err(format!("unknown flags {:#04x}", b[1]));
    }
    let nonscaling = b[1] & FLAG_NONSCALING != 0;
    let error = f64::from_bits(u64::from_le_bytes(b[2..FIXED].try_into().unwrap_or_default()));
    let mut at = FIXED;
    let mut next = |what: &str| varint::read(b, &mut at).map_err(|e| format!("{what}: {e}"));
    let capacity = next("capacity")?;
    let expansion = next("expansion")?;
    let items = next("items")?;
    let expansion = u32::try_from(expansion)
        .ok()
        .filter(|&x| x <= MAX_EXPANSION)
        .ok_or_else(|| format!("expansion {expansion} is above {MAX_EXPANSION}"))?;
    if !nonscaling && expansion == 0 {
        return Err("a scaling filter with expansion 0".into());
    }
    let mut f = SubFilter::new(capacity, error, HEADER_PAGE + 1)?;
    if items > capacity {
        return Err(format!("{items} items exceed the capacity {capacity}"));
    }
    f.items = items;
    let bits = &b[at..];
    if bits.len() as u64 * 8 != f.bits {
        return Err(format!("{} bytes of bits, the sizing gives {}", bits.len(), f.bits / 8));
    }
    Ok(Peeked { filter: f, expansion, nonscaling, bits_at: at })
}

/// The small form `b` (read by `p`) after items were added: it counts
/// `items` and the bits at `positions` of the array are set. The same
/// bytes as [`encode`] of the grown header and bits, made in one pass.
pub(crate) fn with_items(b: &[u8], p: &Peeked, items: u64, positions: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len() + 1);
    out.extend_from_slice(&b[..FIXED]);
    varint::put(&mut out, p.filter.capacity);
    varint::put(&mut out, u64::from(p.expansion));
    varint::put(&mut out, items);
    let start = out.len();
    out.extend_from_slice(&b[p.bits_at..]);
    for &pos in positions {
        set_bit(&mut out[start..], pos);
    }
    out
}

/// Whether the small form `p` describes can count `items` in place: the
/// count's varint keeps its width (see [`add_in_place`]).
pub(crate) fn fits_in_place(p: &Peeked, items: u64) -> bool {
    varint::len(items) == varint::len(p.filter.items)
}

/// [`with_items`] done on `b` where it lies, if the new count's varint is
/// as long as the old one (all but the additions that cross a varint
/// width: 128 items, 16,384): returns whether it was done (if not, `b` is
/// unchanged).
pub(crate) fn add_in_place(b: &mut [u8], p: &Peeked, items: u64, positions: &[u64]) -> bool {
    let Some(at) = p.bits_at.checked_sub(varint::len(p.filter.items)) else { return false };
    let Some(count) = b.get_mut(at..p.bits_at) else { return false };
    if !varint::overwrite(count, items) {
        return false;
    }
    for &pos in positions {
        set_bit(&mut b[p.bits_at..], pos);
    }
    true
}

/// The small form `b` after a delta record's Bloom bit change: it counts
/// `items` and the bits at `positions` are set.
///
/// # Errors
/// A description of what does not fit, never a panic: `b` is no small
/// form, the count falls below the stored one or passes the capacity, or
/// a position lies past the bits.
pub(crate) fn with_recorded_bits(b: &[u8], items: u64, positions: &[u64]) -> Result<Vec<u8>, String> {
    let p = peek(b)?;
    let f = p.filter;
    if items < f.items || items > f.capacity {
        return Err(format!("{items} items against {} stored and a capacity of {}", f.items, f.capacity));
    }
    if let Some(&far) = positions.iter().find(|&&x| x >= f.bits) {
        return Err(format!("bit {far} of a {}-bit filter", f.bits));
    }
    Ok(with_items(b, &p, items, positions))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Small {
        let mut s = Small::empty(Header::new(0.01, 100, 2, false).unwrap());
        for pos in [0, 7, 8, 500, 1151] {
            set_bit(&mut s.bits, pos);
        }
        s.header.count_added();
        s
    }

    /// Invariant: a delta record's Bloom bits apply to the filter they
    /// were taken from (count replaced, bits set, nothing else changed);
    /// a count below the stored one or above the capacity, a position past
    /// the bits, or bytes that are no small filter are refused.
    #[test]
    fn recorded_bits_apply_or_are_refused() {
        let s = sample();
        let b = s.encode();
        let mut grown = s.clone();
        grown.header.filters[0].items = 3;
        for pos in [1, 1151] {
            set_bit(&mut grown.bits, pos);
        }
        assert_eq!(with_recorded_bits(&b, 3, &[1, 1151]).unwrap(), grown.encode());
        assert_eq!(with_recorded_bits(&b, 1, &[]).unwrap(), b, "no change");
        for (items, positions, why) in [
            (0, vec![1], "items"),
            (101, vec![1], "items"),
            (2, vec![1152], "bit 1152"),
            (2, vec![u64::MAX - 1], "bit"),
        ] {
            let e = with_recorded_bits(&b, items, &positions).unwrap_err();
            assert!(e.contains(why), "{items} {positions:?}: {e}");
        }
        assert!(with_recorded_bits(&b[..20], 2, &[1]).is_err(), "a truncated filter");
    }

    /// Invariant: a small filter decodes to what was encoded, and its size
    /// is what `encoded_len` says; a default filter (100 items at 1%,
    /// tightened to 0.5%) is 144 bytes of bits and 13 of header.
    /// Invariant: an addition made in place gives the bytes
    /// [`with_items`] gives, whenever the count's varint keeps its width;
    /// across a width (127 to 128 items) it is refused and the bytes stay
    /// as they were.
    #[test]
    fn additions_in_place_match_a_rewrite() {
        let s = sample();
        let b = s.encode();
        let p = peek(&b).unwrap();
        let positions = [0, 3, p.filter.bits - 1];
        let mut in_place = b.clone();
        assert!(add_in_place(&mut in_place, &p, p.filter.items + 1, &positions));
        assert_eq!(in_place, with_items(&b, &p, p.filter.items + 1, &positions));
        let mut wide = Small { header: s.header.clone(), bits: s.bits.clone() };
        wide.header.filters[0].capacity = 1000;
        wide.header.filters[0].items = 127;
        let wb = encode(&wide.header, &wide.bits);
        let wp = Peeked { filter: wide.header.filters[0], bits_at: wb.len() - wide.bits.len(), ..p };
        let mut crossed = wb.clone();
        assert!(!add_in_place(&mut crossed, &wp, 128, &positions));
        assert_eq!(crossed, wb);
        let mut same = wb.clone();
        assert!(add_in_place(&mut same, &wp, 127, &positions[..1]));
        assert_eq!(same, with_items(&wb, &wp, 127, &positions[..1]));
    }

    #[test]
    fn round_trips_at_its_size() {
        let s = sample();
        let b = s.encode();
        assert_eq!(b.len(), encoded_len(&s.header), "100 items and 1 take one varint byte each");
        assert_eq!(b.len(), 144 + 13);
        assert_eq!(Small::decode(&b).unwrap(), s);
        let got = |p| bit(&s.bits, p);
        assert!(got(0) && got(7) && got(8) && got(1151) && !got(1) && !got(1152));
    }

    /// Invariant: the bits are in the bitmap's byte order, so that moving
    /// to pages can copy them: bit 0 is the top bit of byte 0.
    #[test]
    fn bits_are_in_bitmap_order() {
        let s = sample();
        assert_eq!(s.bits[0], 0x81);
        assert_eq!(s.bits[1], 0x80);
    }

    /// Invariant: damage never panics, and every cut-short form and every
    /// change of a header byte is refused (the bits themselves are covered
    /// by the metadata entry's checksum).
    #[test]
    fn damage_is_refused() {
        let b = sample().encode();
        for n in 0..b.len() {
            assert!(Small::decode(&b[..n]).is_err(), "cut at {n} accepted");
        }
        let header = b.len() - 144;
        for i in 0..header {
            for flip in [0x01u8, 0x40, 0x80] {
                let mut d = b.clone();
                d[i] ^= flip;
                // What decodes is canonical: one encoding per filter.
                if let Ok(s) = Small::decode(&d) {
                    assert_eq!(s.encode(), d, "flip {flip:#x} at {i} decoded to a non-canonical form");
                }
            }
        }
        let mut d = b.clone();
        d[0] ^= 0x02;
        assert!(Small::decode(&d).is_err(), "another version accepted");
        let mut scaling_zero = b.clone();
        scaling_zero[FIXED + 1] = 0;
        assert!(Small::decode(&scaling_zero).is_err(), "a scaling filter with expansion 0");
        let mut longer = b.clone();
        longer.push(0);
        assert!(Small::decode(&longer).is_err(), "a byte past the bits");
    }
}
