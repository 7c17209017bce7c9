//! LZF, the compression Redis uses for RDB strings (and so for DUMP
//! payloads), in liblzf's format:
//!
//! - a control byte below 32 starts a run of that many plus one literal
//!   bytes;
//! - any other control byte is a back-reference: its top three bits are
//!   the length minus 2 (7: plus the next byte), its low five bits and the
//!   following byte the distance back minus 1 (at most 8,191).

/// Longest back-reference: 7 + 255 + 2 bytes.
const MAX_MATCH: usize = 264;
/// Farthest back-reference.
const MAX_BACK: usize = 1 << 13;
/// Longest literal run.
const MAX_LITERALS: usize = 32;
/// Hash table size (positions of 3-byte sequences).
const HASH_BITS: u32 = 14;

/// `data` compressed: greedy matching of the last position each 3-byte
/// sequence was seen at. `None` for empty input.
#[cfg(test)]
pub(crate) fn compress(data: &[u8]) -> Option<Vec<u8>> {
    compress_below(data, usize::MAX)
}

/// `data` compressed as [`compress`] does, if that takes fewer than
/// `limit` bytes; `None` otherwise (found as soon as the output reaches
/// the limit, so incompressible data costs no more than it must) and for
/// empty input.
pub(crate) fn compress_below(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    if data.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 2 + 16);
    let mut table = vec![usize::MAX; 1 << HASH_BITS];
    let mut literals = 0;
    let mut i = 0;
    while i + 2 < data.len() {
        let seq = u32::from(data[i]) << 16 | u32::from(data[i + 1]) << 8 | u32::from(data[i + 2]);
        let h = (seq.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize;
        let candidate = std::mem::replace(&mut table[h], i);
        let found =
            candidate != usize::MAX && i - candidate <= MAX_BACK && data[candidate..candidate + 3] == data[i..i + 3];
        if !found {
            i += 1;
            literals += 1;
            // A long run of literals: past the limit, the output cannot
            // get back under it.
            if literals % 4096 == 0 && out.len() + literals >= limit {
                return None;
            }
            continue;
        }
        flush_literals(&mut out, &data[i - literals..i]);
        literals = 0;
        if out.len() >= limit {
            return None;
        }
        let most = MAX_MATCH.min(data.len() - i);
        let mut len = 3;
        while len < most && data[candidate + len] == data[i + len] {
            len += 1;
        }
        let back = i - candidate - 1;
        let code = len - 2;
        // `back` < 8192 and `code` <= 262: the casts keep every bit.
        if code < 7 {
            out.push((code << 5 | back >> 8) as u8);
        } else {
            out.push((7 << 5 | back >> 8) as u8);
            out.push((code - 7) as u8);
        }
        out.push((back & 0xFF) as u8);
        i += len;
    }
    literals += data.len() - i;
    flush_literals(&mut out, &data[data.len() - literals..]);
    (out.len() < limit).then_some(out)
}

/// Writes `bytes` as literal runs.
fn flush_literals(out: &mut Vec<u8>, bytes: &[u8]) {
    for run in bytes.chunks(MAX_LITERALS) {
        // A run has 1..=32 bytes.
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
}

/// LZF decompression (the format liblzf writes): a control byte below 32
/// starts a run of that many plus one literal bytes; otherwise its top
/// three bits are a length (7: plus the next byte) and, with the next
/// byte, its low five bits an offset; the reference copies length + 2
/// bytes from offset + 1 bytes back. `None` unless the data decodes to
/// exactly `len` bytes.
pub(crate) fn decompress(data: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    while i < data.len() {
        let ctrl = usize::from(data[i]);
        i += 1;
        if ctrl < 32 {
            let run = data.get(i..i + ctrl + 1)?;
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*data.get(i)?);
                i += 1;
            }
            let back = ((ctrl & 0x1F) << 8) + usize::from(*data.get(i)?) + 1;
            i += 1;
            let from = out.len().checked_sub(back)?;
            // The copy may overlap what it writes (a run).
            for k in 0..n + 2 {
                out.push(out[from + k]);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

/// `n` bytes of xorshift64 output: data with no 3-byte repeats worth a
/// reference (tests of incompressible input).
#[cfg(test)]
pub(crate) fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[3]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Invariant: what is compressed decompresses to itself, and repetitive
    /// data shrinks.
    #[test]
    fn round_trips_and_shrinks() {
        let sparse = {
            let mut v = vec![0u8; 12_500];
            v[12_499] = 0x40;
            v
        };
        let c = compress(&sparse).unwrap();
        assert!(c.len() < 200, "{} bytes", c.len());
        assert_eq!(decompress(&c, sparse.len()), Some(sparse.clone()));
        let text = b"abcabcabcabcabcabcabcabc the end".repeat(40);
        assert_eq!(decompress(&compress(&text).unwrap(), text.len()), Some(text));
        assert_eq!(compress(b""), None);
        assert_eq!(decompress(&compress(b"ab").unwrap(), 2), Some(b"ab".to_vec()));
        let noise = noise(100_000);
        assert_eq!(compress_below(&noise, noise.len() - 4), None, "incompressible: given up");
        let c = compress_below(&sparse, sparse.len()).unwrap();
        assert_eq!(Some(c), compress(&sparse), "under the limit: the same output");
    }

    proptest! {
        /// Invariant: any input round-trips, whatever its repetitions.
        #[test]
        fn any_input_round_trips(parts in proptest::collection::vec((any::<u8>(), 1usize..300), 1..40)) {
            let data: Vec<u8> = parts.iter().flat_map(|&(b, n)| std::iter::repeat_n(b, n).chain([b ^ 0x5A])).collect();
            let c = compress(&data).unwrap();
            prop_assert_eq!(decompress(&c, data.len()), Some(data));
        }
    }
}
