//! Redis's HyperLogLog, byte for byte: the algorithm on a value's bytes.
//!
//! A sketch is an ordinary string value laid out as Redis 7 lays it out:
//!
//! ```text
//! 0      4          5          8                   16
//! +------+----------+----------+-------------------+----------------+
//! | HYLL | encoding | 3 unused | cached cardinality | registers ...  |
//! +------+----------+----------+-------------------+----------------+
//! ```
//!
//! - 4 bytes: the magic `HYLL`.
//! - 1 byte: the encoding, 0 dense, 1 sparse.
//! - 3 bytes: unused (zero in values bitsled or Redis create).
//! - 8 bytes: the cached cardinality, little-endian; the top bit of the
//!   last byte set means the cache is stale.
//! - dense: 12,288 bytes of 16,384 packed 6-bit registers ([`dense`]);
//!   sparse: run-length opcodes ([`sparse`]).
//!
//! An element is hashed with MurmurHash64A (seed `0xadc83b19`); the low 14
//! bits pick the register, and the register is raised to one plus the
//! number of trailing zeros of the remaining 50 bits (at most 51).
//!
//! Every function takes untrusted bytes: malformed input gives an error,
//! never a panic.

#[cfg(any(test, feature = "testing"))]
pub(crate) mod check;
pub(crate) mod dense;
mod estimate;
mod sparse;

/// Bytes of the header.
pub(crate) const HEADER_LEN: usize = 16;
/// Number of registers.
pub(crate) const REGISTERS: usize = 1 << 14;
/// Largest value a 6-bit register holds.
pub(crate) const REGISTER_MAX: u8 = 63;
/// Length of a dense value: header and packed registers (12,304).
pub(crate) const DENSE_LEN: usize = HEADER_LEN + dense::REGISTER_BYTES;
/// Redis's default `hll-sparse-max-bytes`: a sparse value that would grow
/// past this many bytes (header included) turns dense.
pub(crate) const SPARSE_MAX_BYTES: usize = 3000;
/// The MurmurHash64A seed Redis uses.
const SEED: u64 = 0xadc8_3b19;

const MAGIC: &[u8; 4] = b"HYLL";
/// Offset of the encoding byte.
const ENCODING_AT: usize = 4;
/// Offset of the cached cardinality.
const CARD_AT: usize = 8;
/// Encoding byte of the dense form.
const DENSE: u8 = 0;
/// Encoding byte of the sparse form.
const SPARSE: u8 = 1;

/// Registers per value: `hist[v]` is how many registers hold `v`.
pub(crate) type Histogram = [u32; 64];

/// The opcodes of a sparse value do not describe 16,384 registers (Redis's
/// `INVALIDOBJ Corrupted HLL object detected`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Corrupt;

/// Why bytes are not a usable sketch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HllError {
    /// The header is not a HyperLogLog's (Redis's `WRONGTYPE Key is not a
    /// valid HyperLogLog string value.`).
    NotHll,
    /// The header is, the registers are not ([`Corrupt`]).
    Corrupt,
}

impl From<Corrupt> for HllError {
    fn from(_: Corrupt) -> HllError {
        HllError::Corrupt
    }
}

/// The two encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Packed 6-bit registers.
    Dense,
    /// Run-length opcodes.
    Sparse,
}

/// Checks the header as Redis does before any HyperLogLog command: at
/// least 16 bytes, the magic, a known encoding, and exactly 12,304 bytes
/// if dense. The registers are not checked here.
///
/// # Errors
/// [`HllError::NotHll`].
pub(crate) fn check_header(v: &[u8]) -> Result<Encoding, HllError> {
    check_prefix(v, v.len() as u64)
}

/// [`check_header`] for a value of `len` bytes that starts with `head`
/// (at least its first 16 bytes), so that a long string is judged without
/// reading it whole.
///
/// # Errors
/// [`HllError::NotHll`].
pub(crate) fn check_prefix(head: &[u8], len: u64) -> Result<Encoding, HllError> {
    if len < HEADER_LEN as u64 || head.get(..4) != Some(&MAGIC[..]) {
        return Err(HllError::NotHll);
    }
    match head.get(ENCODING_AT) {
        Some(&DENSE) if len == DENSE_LEN as u64 => Ok(Encoding::Dense),
        Some(&SPARSE) => Ok(Encoding::Sparse),
        _ => Err(HllError::NotHll),
    }
}

/// The cached cardinality of a value starting with `head`, if valid.
pub(crate) fn cached(head: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = head.get(CARD_AT..CARD_AT + 8)?.try_into().ok()?;
    (bytes[7] & 0x80 == 0).then(|| u64::from_le_bytes(bytes))
}

/// The value of a new, empty sketch: sparse, one XZERO opcode, cached
/// cardinality 0 (valid).
pub(crate) fn new_sparse() -> Vec<u8> {
    let mut v = vec![0u8; HEADER_LEN];
    v[..4].copy_from_slice(MAGIC);
    v[ENCODING_AT] = SPARSE;
    v.extend(sparse::empty_body());
    v
}

/// Marks the cached cardinality stale.
pub(crate) fn invalidate_cache(v: &mut [u8]) {
    if let Some(b) = v.get_mut(CARD_AT + 7) {
        *b |= 0x80;
    }
}

/// The register and count an element sets: the register is the hash's low
/// 14 bits, the count one plus the trailing zeros of the other 50 (with a
/// sentinel bit, so at most 51).
pub(crate) fn hash_element(element: &[u8]) -> (usize, u8) {
    let hash = crate::murmur::murmur64a(element, SEED);
    // Below 2^14.
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> 14) | (1 << 50);
    // At most 50 trailing zeros.
    let count = rest.trailing_zeros() as u8 + 1;
    (index, count)
}

/// Raises register `index` to `count` in value `v` of either encoding;
/// returns whether it changed. `past_end` is the byte Redis's string holds
/// after a sparse value, kept across the updates of one command (see
/// [`sparse::set`]); start it at 0.
///
/// # Errors
/// [`Corrupt`] for a sparse value whose opcodes do not cover `index`;
/// [`HllError::NotHll`] for an unknown encoding.
fn set_register(v: &mut Vec<u8>, index: usize, count: u8, past_end: &mut u8) -> Result<bool, HllError> {
    match v.get(ENCODING_AT) {
        Some(&DENSE) => Ok(dense::set_max(v.get_mut(HEADER_LEN..).unwrap_or_default(), index, count)),
        Some(&SPARSE) => Ok(sparse::set(v, index, count, SPARSE_MAX_BYTES, past_end)? != sparse::SetOutcome::Unchanged),
        _ => Err(HllError::NotHll),
    }
}

/// PFADD on value `v` (already checked with [`check_header`]): raises the
/// registers of every element, in order; returns how many raised one. If
/// any did, the cached cardinality is marked stale.
///
/// # Errors
/// [`HllError::NotHll`] for a bad header; [`HllError::Corrupt`] at the first element a corrupt sparse value
/// cannot take. As in Redis, `v` then keeps the changes of the elements
/// before it, without the cache marked stale.
pub(crate) fn add<E: AsRef<[u8]>>(v: &mut Vec<u8>, elements: &[E]) -> Result<usize, HllError> {
    check_header(v)?;
    let mut raised = 0;
    let mut past_end = 0;
    for e in elements {
        let (index, count) = hash_element(e.as_ref());
        if set_register(v, index, count, &mut past_end)? {
            raised += 1;
        }
    }
    if raised > 0 {
        invalidate_cache(v);
    }
    Ok(raised)
}

/// The histogram of register values of `v`.
///
/// # Errors
/// [`HllError::Corrupt`] for sparse opcodes not adding up to 16,384
/// registers; [`HllError::NotHll`] for a bad header.
fn histogram(v: &[u8]) -> Result<Histogram, HllError> {
    let mut hist = [0u32; 64];
    match check_header(v)? {
        Encoding::Dense => dense::histogram(&v[HEADER_LEN..], &mut hist),
        Encoding::Sparse => sparse::histogram(v, &mut hist)?,
    }
    Ok(hist)
}

/// PFCOUNT of one value: the cached cardinality if valid, else the
/// estimate, which is then cached in `v` (Redis writes it back too).
/// Returns the count and whether `v` changed.
///
/// # Errors
/// As [`histogram`].
pub(crate) fn count(v: &mut [u8]) -> Result<(u64, bool), HllError> {
    check_header(v)?;
    if let Some(c) = cached(v) {
        return Ok((c, false));
    }
    let c = estimate::estimate(&histogram(v)?);
    if let Some(card) = v.get_mut(CARD_AT..CARD_AT + 8) {
        card.copy_from_slice(&c.to_le_bytes());
    }
    Ok((c, true))
}

/// Raises each of `max` to the matching register of value `v`.
///
/// # Errors
/// As [`histogram`].
pub(crate) fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), HllError> {
    match check_header(v)? {
        Encoding::Dense => dense::merge_into(max, &v[HEADER_LEN..]),
        Encoding::Sparse => sparse::merge_into(max, v)?,
    }
    Ok(())
}

/// The estimate for a set of registers (PFCOUNT of several keys).
pub(crate) fn estimate_registers(regs: &[u8; REGISTERS]) -> u64 {
    let mut hist = [0u32; 64];
    for &r in regs {
        hist[usize::from(r & REGISTER_MAX)] += 1;
    }
    estimate::estimate(&hist)
}

/// PFMERGE's write into destination value `v` (already checked and merged
/// into `max`): converts it to dense if `use_dense`, raises every register
/// to `max` in register order (a sparse destination may turn dense on the
/// way, and a register a corrupt one cannot take is skipped, as in Redis),
/// and marks the cache stale.
///
/// # Errors
/// [`HllError::Corrupt`] if the conversion to dense fails.
pub(crate) fn merge_write(v: &mut Vec<u8>, max: &[u8; REGISTERS], use_dense: bool) -> Result<(), HllError> {
    if use_dense && check_header(v)? == Encoding::Sparse {
        *v = sparse::to_dense(v, 0)?;
    }
    let mut past_end = 0;
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            // Redis ignores the result, errors included.
            let _ = set_register(v, i, m, &mut past_end);
        }
    }
    invalidate_cache(v);
    Ok(())
}

/// Whether value `v` (checked) is dense.
pub(crate) fn is_dense(v: &[u8]) -> bool {
    v.get(ENCODING_AT) == Some(&DENSE)
}

#[cfg(any(test, feature = "testing"))]
/// All 16,384 registers of value `v`.
///
/// # Errors
/// As [`histogram`].
pub(crate) fn registers(v: &[u8]) -> Result<[u8; REGISTERS], HllError> {
    let mut regs = [0u8; REGISTERS];
    merge_into(&mut regs, v)?;
    Ok(regs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new sketch is Redis's 18-byte empty value with count 0.
    #[test]
    fn new_sketch_bytes_and_count() {
        let mut v = new_sparse();
        assert_eq!(v, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff".to_vec());
        assert_eq!(count(&mut v), Ok((0, false)));
    }

    /// A sparse value whose last byte starts an XZERO (found by the
    /// `hll_decode` fuzz target): the first split there leaves the
    /// sequence's last byte past the end, and the later elements of the same
    /// PFADD read it as Redis does. Redis 7.0.15 answers 1 and leaves these
    /// bytes; reading 0 past the end instead loses register coverage and
    /// fails the fourth element as corrupt.
    #[test]
    fn add_past_a_cut_short_xzero_matches_redis() {
        let body =
            b"\xe8\x31\x00\xf1\xff\xff\xff\xff\x00\xff\x2e\xff\xff\xff\xff\xff\xff\xff\x26\x2c\xff\x08\xff\xff\x7f";
        let mut v = new_sparse();
        v.truncate(HEADER_LEN);
        v.extend_from_slice(body);
        let elements: Vec<[u8; 2]> = (0..5).map(|i| [0x55, i]).collect();
        assert_eq!(add(&mut v, &elements), Ok(5), "every element raises a register");
        let mut want = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        want.extend_from_slice(&body[..body.len() - 1]);
        want.extend_from_slice(b"\x44\x83\x88\x6b\x94\x88\x40\x78\x84\x45\x93\x8c\x47\x65\x80\x40");
        assert_eq!(v, want);
    }

    /// Header rules: short, wrong magic, unknown encoding and a dense value
    /// of the wrong length are not sketches; a sparse value of any length
    /// passes the header check.
    #[test]
    fn header_checks() {
        assert_eq!(check_header(b"HYLL"), Err(HllError::NotHll));
        let mut v = new_sparse();
        assert_eq!(check_header(&v), Ok(Encoding::Sparse));
        v[4] = 2;
        assert_eq!(check_header(&v), Err(HllError::NotHll));
        v[4] = 0;
        assert_eq!(check_header(&v), Err(HllError::NotHll));
        v.resize(DENSE_LEN, 0);
        assert_eq!(check_header(&v), Ok(Encoding::Dense));
        v[0] = b'h';
        assert_eq!(check_header(&v), Err(HllError::NotHll));
    }

    /// Adding many elements grows the sketch into dense and the count
    /// stays within a few standard errors.
    #[test]
    fn add_and_count_many() {
        let mut v = new_sparse();
        let elems: Vec<String> = (0..100_000).map(|i| format!("e{i}")).collect();
        assert!(add(&mut v, &elems).unwrap() > 0);
        assert!(is_dense(&v));
        let (c, wrote) = count(&mut v).unwrap();
        assert!(wrote);
        assert!((c as f64 - 100_000.0).abs() < 100_000.0 * 0.0081 * 4.0, "count {c}");
        assert_eq!(add(&mut v, &elems), Ok(0), "re-adding changes nothing");
    }

    /// Arbitrary bytes never panic the operations.
    #[test]
    fn check_survives_samples() {
        use super::check::check_hll_value;
        check_hll_value(b"");
        check_hll_value(b"\x07HYLL\x01");
        check_hll_value(b"\x03\x7f");
        check_hll_value(b"\x05\x80\x80\x80\x7f\xff\x00");
        let mut dense = vec![0u8];
        dense.extend(b"HYLL\0\0\0\0\0\0\0\0\0\0\0\0");
        dense.resize(1 + DENSE_LEN, 0xff);
        check_hll_value(&dense);
    }
}
