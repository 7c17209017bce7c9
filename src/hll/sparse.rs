//! The sparse encoding: a run-length list of opcodes after the header.
//!
//! - ZERO `00xxxxxx`: `xxxxxx + 1` (1..=64) registers at 0.
//! - XZERO `01xxxxxx yyyyyyyy`: the 14-bit `xxxxxxyyyyyyyy + 1`
//!   (1..=16,384) registers at 0.
//! - VAL `1vvvvvxx`: `xx + 1` (1..=4) registers at `vvvvv + 1` (1..=32).
//!
//! Updates follow Redis's `hllSparseSet` step for step (split the opcode
//! holding the register into at most five bytes, then merge equal
//! neighbouring VALs among the next five opcodes), because the resulting
//! bytes are visible to GET and must be Redis's.
//!
//! Everything here works on the whole value (header included). An XZERO
//! that is the value's last byte takes its second byte from past the end,
//! as Redis reads the byte after its string: the NUL terminator for a value
//! as stored (0), but a split of such a cut-short opcode writes its last
//! byte there (see [`set`]), and later updates of the same PFADD read it.
//! That byte is carried as `past_end`. Redis keeps it in memory until the
//! string is copied or reloaded; bitsled stores only the value, so a later
//! command reads 0, as Redis does after a restart.

use super::{dense, Corrupt, Histogram, DENSE, DENSE_LEN, HEADER_LEN, REGISTERS};

/// The largest value a VAL opcode holds; larger registers need the dense
/// encoding.
pub(crate) const VAL_MAX_VALUE: u8 = 32;
/// The longest run of one VAL opcode.
const VAL_MAX_LEN: usize = 4;
/// The longest run of one ZERO opcode.
const ZERO_MAX_LEN: usize = 64;
/// The longest run of one XZERO opcode.
pub(crate) const XZERO_MAX_LEN: usize = 16384;

/// One decoded opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// A run of zero registers, from a ZERO (1 byte) or XZERO (2 bytes).
    Zeros { len: usize, xzero: bool },
    /// A run of registers at `value`.
    Val { value: u8, len: usize },
}

impl Op {
    /// Registers covered.
    fn span(self) -> usize {
        match self {
            Op::Zeros { len, .. } | Op::Val { len, .. } => len,
        }
    }

    /// Bytes of the opcode.
    fn bytes(self) -> usize {
        match self {
            Op::Zeros { xzero: true, .. } => 2,
            _ => 1,
        }
    }
}

/// Byte `at` of `v`, or `past_end` for the one after the last.
fn byte_at(v: &[u8], at: usize, past_end: u8) -> u8 {
    v.get(at).copied().unwrap_or(if at == v.len() { past_end } else { 0 })
}

/// The opcode at byte `at` of `v` (`at` is within `v`).
fn op_at(v: &[u8], at: usize, past_end: u8) -> Op {
    let b = byte_at(v, at, past_end);
    if b & 0x80 != 0 {
        Op::Val { value: ((b >> 2) & 0x1f) + 1, len: usize::from(b & 0x3) + 1 }
    } else if b & 0x40 != 0 {
        let len = (usize::from(b & 0x3f) << 8 | usize::from(byte_at(v, at + 1, past_end))) + 1;
        Op::Zeros { len, xzero: true }
    } else {
        Op::Zeros { len: usize::from(b & 0x3f) + 1, xzero: false }
    }
}

/// The VAL opcode byte for `len` (1..=4) registers at `value` (1..=32).
fn val_byte(value: u8, len: usize) -> u8 {
    let len_bits = u8::try_from(len.saturating_sub(1) & 0x3).unwrap_or(0);
    0x80 | (value.saturating_sub(1) & 0x1f) << 2 | len_bits
}

/// Appends the shortest zero-run opcode for `len` (1..=16,384) registers.
fn push_zeros(seq: &mut Vec<u8>, len: usize) {
    let l = len.saturating_sub(1);
    if len > ZERO_MAX_LEN {
        let [lo, hi, ..] = l.to_le_bytes();
        seq.push(0x40 | (hi & 0x3f));
        seq.push(lo);
    } else {
        seq.push(u8::try_from(l & 0x3f).unwrap_or(0));
    }
}

/// The body of an empty sketch: XZERO runs covering every register.
pub(crate) fn empty_body() -> Vec<u8> {
    let mut body = Vec::new();
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        push_zeros(&mut body, n);
        left -= n;
    }
    body
}

/// What [`set`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetOutcome {
    /// The register already held at least the count.
    Unchanged,
    /// The register was raised; the value is still sparse.
    Raised,
    /// The value was converted to the dense encoding and the register
    /// raised there.
    Promoted,
}

/// Raises register `index` to `count` if lower (Redis's `hllSparseSet`),
/// converting `v` to the dense encoding when `count` does not fit a VAL
/// opcode or the value would grow past `max_bytes`. On `Raised`, the
/// cached cardinality is marked invalid.
///
/// `past_end` is the byte after the value as Redis's string holds it (0
/// for a value as stored) and is updated as Redis's would be: a split
/// writes the NUL terminator there, except that a split of a cut-short last
/// XZERO leaves the sequence's last byte there; a merge of two VALs moves
/// the terminator.
///
/// # Errors
/// [`Corrupt`] if the opcodes do not cover `index`, or the value cannot be
/// converted to dense; `v` is then unchanged.
pub(crate) fn set(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
    past_end: &mut u8,
) -> Result<SetOutcome, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count, *past_end);
    }
    let end = v.len();
    // Find the opcode covering `index`.
    let mut p = HEADER_LEN;
    let mut first = 0usize;
    let mut prev: Option<usize> = None;
    let mut found: Option<Op> = None;
    while p < end {
        let op = op_at(v, p, *past_end);
        found = Some(op);
        if index < first + op.span() {
            break;
        }
        prev = Some(p);
        p += op.bytes();
        first += op.span();
    }
    let Some(op) = found.filter(|_| p < end) else { return Err(Corrupt) };
    let span = op.span();
    match op {
        Op::Val { value, .. } if value >= count => return Ok(SetOutcome::Unchanged),
        // A run of one register (VAL or ZERO) becomes a VAL of one.
        Op::Val { len: 1, .. } | Op::Zeros { len: 1, xzero: false } => {
            v[p] = val_byte(count, 1);
        }
        _ => {
            // Split the opcode into up to three: before, the register, after.
            let last = first + span - 1;
            let mut seq = Vec::with_capacity(5);
            match op {
                Op::Zeros { .. } => {
                    if index != first {
                        push_zeros(&mut seq, index - first);
                    }
                    seq.push(val_byte(count, 1));
                    if index != last {
                        push_zeros(&mut seq, last - index);
                    }
                }
                Op::Val { value, .. } => {
                    if index != first {
                        seq.push(val_byte(value, index - first));
                    }
                    seq.push(val_byte(count, 1));
                    if index != last {
                        seq.push(val_byte(value, last - index));
                    }
                }
            }
            let old_len = op.bytes();
            if seq.len() > old_len && end + (seq.len() - old_len) > max_bytes {
                return promote(v, index, count, *past_end);
            }
            // Redis's new length is `end + seq - old`; when the opcode is the
            // last and cut short (an XZERO missing its second byte), the
            // sequence's last byte falls past the new end, where it stays.
            let new_len = end + seq.len() - old_len;
            let stop = (p + old_len).min(end);
            v.splice(p..stop, seq);
            *past_end = v.get(new_len).copied().unwrap_or(0);
            v.truncate(new_len);
        }
    }
    merge_vals(v, prev.unwrap_or(HEADER_LEN), past_end);
    super::invalidate_cache(v);
    Ok(SetOutcome::Raised)
}

/// Merges neighbouring VAL opcodes of one value (up to 4 registers) among
/// the five opcodes starting at byte `from`, as Redis does after an update.
/// A merge shortens the value, and the terminator Redis writes then is the
/// new byte past the end.
fn merge_vals(v: &mut Vec<u8>, from: usize, past_end: &mut u8) {
    let mut p = from;
    let mut budget = 5;
    while p < v.len() && budget > 0 {
        budget -= 1;
        let op = op_at(v, p, *past_end);
        let Op::Val { value, len } = op else {
            p += op.bytes();
            continue;
        };
        if p + 1 < v.len() {
            if let Op::Val { value: v2, len: len2 } = op_at(v, p + 1, *past_end) {
                if v2 == value && len + len2 <= VAL_MAX_LEN {
                    v[p + 1] = val_byte(value, len + len2);
                    v.remove(p);
                    *past_end = 0;
                    // Try again from the merged opcode.
                    continue;
                }
            }
        }
        p += 1;
    }
}

/// Walks the opcodes, calling `f(index, value, len)` for each run. Valid
/// only if the runs cover exactly the 16,384 registers: a run past the last
/// register stops the walk with an error (Redis 7.0.15 as patched for
/// CVE-2025-32023 checks every opcode so; earlier builds let zero runs and
/// a trailing VAL slip by), and so does a total short of it.
fn walk(v: &[u8], past_end: u8, mut f: impl FnMut(usize, u8, usize)) -> Result<(), Corrupt> {
    let mut idx = 0usize;
    let mut p = HEADER_LEN;
    while p < v.len() {
        let op = op_at(v, p, past_end);
        let (value, len) = match op {
            Op::Zeros { len, .. } => (0, len),
            Op::Val { value, len } => (value, len),
        };
        if idx + len > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, value, len);
        idx += len;
        p += op.bytes();
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// The dense form of sparse value `v` (followed by `past_end`): same
/// header (and cached cardinality), encoding byte 0.
///
/// # Errors
/// [`Corrupt`] if the opcodes do not cover exactly the 16,384 registers.
pub(crate) fn to_dense(v: &[u8], past_end: u8) -> Result<Vec<u8>, Corrupt> {
    let mut out = vec![0u8; DENSE_LEN];
    let header = v.get(..HEADER_LEN).ok_or(Corrupt)?;
    out[..HEADER_LEN].copy_from_slice(header);
    out[super::ENCODING_AT] = DENSE;
    let regs = &mut out[HEADER_LEN..];
    walk(v, past_end, |at, value, len| {
        if value > 0 {
            (at..at + len).for_each(|i| dense::set(regs, i, value));
        }
    })?;
    Ok(out)
}

/// Converts `v` to dense and raises register `index` to `count` there.
fn promote(v: &mut Vec<u8>, index: usize, count: u8, past_end: u8) -> Result<SetOutcome, Corrupt> {
    let mut d = to_dense(v, past_end)?;
    dense::set_max(&mut d[HEADER_LEN..], index, count);
    *v = d;
    Ok(SetOutcome::Promoted)
}

/// Raises each of `max` to the matching register of sparse value `v`.
///
/// # Errors
/// [`Corrupt`] as [`to_dense`] (`max` may then be partly raised).
pub(crate) fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), Corrupt> {
    walk(v, 0, |at, value, len| {
        for m in max.iter_mut().skip(at).take(len) {
            *m = (*m).max(value);
        }
    })
}

/// Adds every register value of sparse value `v` to `hist`.
///
/// # Errors
/// [`Corrupt`] as [`to_dense`] (`hist` may then be partly filled).
pub(crate) fn histogram(v: &[u8], hist: &mut Histogram) -> Result<(), Corrupt> {
    walk(v, 0, |_, value, len| {
        // `len` is at most 16,384.
        hist[usize::from(value)] += len as u32;
    })
}

#[cfg(test)]
mod tests {
    use super::super::{new_sparse, registers};
    use super::*;

    /// The empty body is Redis's: one XZERO of 16,384 (`0x7f 0xff`).
    #[test]
    fn empty_is_one_xzero() {
        assert_eq!(empty_body(), vec![0x7f, 0xff]);
    }

    /// The example from Redis's documentation: registers 1000, 1020 and
    /// 1021 at 2, 3, 3 are XZERO:1000 VAL:2,1 ZERO:19 VAL:3,2 XZERO:15362.
    #[test]
    fn documented_example_bytes() {
        let mut v = new_sparse();
        for (i, c) in [(1000, 2), (1020, 3), (1021, 3)] {
            assert_eq!(set(&mut v, i, c, 3000, &mut 0), Ok(SetOutcome::Raised));
        }
        let xz = |n: usize| {
            let mut s = Vec::new();
            push_zeros(&mut s, n);
            s
        };
        let mut want = xz(1000);
        want.push(val_byte(2, 1));
        want.extend(xz(19));
        want.push(val_byte(3, 2));
        want.extend(xz(15362));
        assert_eq!(&v[HEADER_LEN..], &want[..]);
    }

    /// Random updates against a plain register array: the sparse value
    /// always decodes to the model, and each update reports whether it
    /// raised the register.
    #[test]
    fn random_updates_match_model() {
        let mut x = 99u64;
        for round in 0..20 {
            let mut v = new_sparse();
            let mut model = [0u8; REGISTERS];
            for _ in 0..400 {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                // Cluster indexes so that runs touch and merge.
                let i = ((x >> 20) as usize % 64) + (round * 800) % 16000 + ((x >> 40) as usize % 3) * 200;
                let c = ((x >> 33) % 34) as u8 + 1;
                let changed = if super::super::is_dense(&v) {
                    super::super::set_register(&mut v, i, c, &mut 0).unwrap()
                } else {
                    set(&mut v, i, c, 3000, &mut 0).unwrap() != SetOutcome::Unchanged
                };
                assert_eq!(changed, c > model[i], "index {i} count {c}");
                model[i] = model[i].max(c);
                assert_eq!(registers(&v).unwrap(), model, "round {round}");
            }
        }
    }

    /// Past the size limit, or above 32, the value turns dense with the
    /// same registers.
    #[test]
    fn promotion_keeps_registers() {
        let mut v = new_sparse();
        set(&mut v, 5, 3, 3000, &mut 0).unwrap();
        assert_eq!(set(&mut v, 9, 40, 3000, &mut 0), Ok(SetOutcome::Promoted));
        assert_eq!(v.len(), DENSE_LEN);
        let regs = registers(&v).unwrap();
        assert_eq!((regs[5], regs[9]), (3, 40));
        let mut v = new_sparse();
        assert_eq!(set(&mut v, 100, 1, 20, &mut 0), Ok(SetOutcome::Promoted));
        assert_eq!(registers(&v).unwrap()[100], 1);
    }

    /// Opcodes not covering the register, or not adding up to 16,384, are
    /// reported, not panicked on.
    #[test]
    fn corrupt_bodies_are_errors() {
        let mut v = new_sparse();
        v.truncate(HEADER_LEN);
        assert_eq!(set(&mut v, 0, 1, 3000, &mut 0), Err(Corrupt));
        v.push(0x05); // ZERO:6
        assert_eq!(set(&mut v, 10, 1, 3000, &mut 0), Err(Corrupt));
        assert_eq!(set(&mut v, 2, 1, 3000, &mut 0), Ok(SetOutcome::Raised));
        assert_eq!(to_dense(&v, 0), Err(Corrupt));
        let mut h = [0u32; 64];
        assert_eq!(histogram(&v, &mut h), Err(Corrupt));
        // An XZERO missing its second byte reads it as 0.
        let mut v = new_sparse();
        v.truncate(HEADER_LEN + 1);
        assert_eq!(set(&mut v, 16000, 1, 3000, &mut 0), Ok(SetOutcome::Raised));
    }
}
