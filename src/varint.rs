//! Unsigned LEB128 varints (7 bits a byte, least significant first, at
//! most 10 bytes, no trailing zero byte: each number has one encoding), as
//! the metadata bucket and page group records use them.

/// `v`'s encoding: its first [`len`]`(v)` bytes (at most 10).
fn encode(mut v: u64) -> ([u8; 10], usize) {
    let mut out = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        // The low seven bits, with the continuation bit.
        out[n] = v.to_le_bytes()[0] | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v.to_le_bytes()[0];
    (out, n + 1)
}

/// Appends `v`.
pub(crate) fn put(b: &mut Vec<u8>, v: u64) {
    let (bytes, n) = encode(v);
    b.extend_from_slice(&bytes[..n]);
}

/// Writes `v` over `b` as [`put`] writes it, if that takes exactly
/// `b.len()` bytes (an in-place change of a varint that keeps its width);
/// returns whether it did (if not, `b` is unchanged).
pub(crate) fn overwrite(b: &mut [u8], v: u64) -> bool {
    let (bytes, n) = encode(v);
    if n != b.len() {
        return false;
    }
    b.copy_from_slice(&bytes[..n]);
    true
}

/// Why a varint did not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VarintError {
    /// The bytes end inside it.
    Truncated,
    /// It does not fit in 64 bits (or is longer than 10 bytes).
    Overflow,
    /// It ends in a zero byte after a continuation: the same number has a
    /// shorter form, and every number has one encoding only.
    Overlong,
}

impl std::fmt::Display for VarintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VarintError::Truncated => "truncated",
            VarintError::Overflow => "varint overflows 64 bits",
            VarintError::Overlong => "varint longer than its number needs",
        })
    }
}

/// Bytes [`put`] writes for `v`: 1 to 10.
pub(crate) const fn len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads the varint at `*at` of `b` and moves `*at` past it.
pub(crate) fn read(b: &[u8], at: &mut usize) -> Result<u64, VarintError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or(VarintError::Truncated)?;
        *at += 1;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return Err(VarintError::Overflow);
        }
        v |= bits << shift;
        if byte & 0x80 == 0 {
            if byte == 0 && shift > 0 {
                return Err(VarintError::Overlong);
            }
            return Ok(v);
        }
    }
    Err(VarintError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: `len` is the length `put` writes.
    #[test]
    fn len_is_what_put_writes() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX >> 1, u64::MAX] {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(len(v), b.len(), "{v}");
        }
    }

    /// Invariant: `overwrite` writes `put`'s bytes when the width matches
    /// and leaves the bytes alone when it does not.
    #[test]
    fn overwrite_is_put_at_the_same_width() {
        for (old, new) in
            [(0u64, 5u64), (1, 127), (127, 128), (128, 16_383), (16_383, 16_384), (300, 200), (u64::MAX, 1)]
        {
            let mut b = Vec::new();
            put(&mut b, old);
            let before = b.clone();
            let mut want = Vec::new();
            put(&mut want, new);
            let done = overwrite(&mut b, new);
            assert_eq!(done, want.len() == before.len(), "{old} -> {new}");
            assert_eq!(b, if done { want } else { before }, "{old} -> {new}");
        }
    }

    /// Every width round trips; overlong and truncated input is refused.
    #[test]
    fn round_trips_and_refuses_bad_input() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put(&mut b, v);
            let mut at = 0;
            assert_eq!(read(&b, &mut at), Ok(v));
            assert_eq!(at, b.len(), "{v} reads all its bytes");
        }
        assert_eq!(read(&[0xff; 11], &mut 0), Err(VarintError::Overflow));
        assert_eq!(
            read(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02], &mut 0),
            Err(VarintError::Overflow)
        );
        assert_eq!(read(&[0x80], &mut 0), Err(VarintError::Truncated));
        assert_eq!(read(&[0x81, 0x00], &mut 0), Err(VarintError::Overlong), "1 in two bytes");
        assert_eq!(read(&[], &mut 0), Err(VarintError::Truncated));
    }
}
