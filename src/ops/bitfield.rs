//! BITFIELD: signed and unsigned integers of 1 to 64 bits at any bit offset
//! of a string, with Redis's overflow rules.

use crate::db::Db;
use crate::engine::{Meta, ReadTx, WriteTx};
use crate::error::{Error, Result};
use crate::geometry::{locate, page_bound, PAGE_BITS};

/// The type of a bit field: signed `i1 ..= i64` or unsigned `u1 ..= u63`
/// (Redis has no `u64`: its replies are signed 64-bit integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BitfieldType {
    /// A two's-complement signed integer of this many bits (1 to 64).
    Signed(u8),
    /// An unsigned integer of this many bits (1 to 63).
    Unsigned(u8),
}

impl BitfieldType {
    /// The width in bits, as given (not checked).
    #[must_use]
    pub fn bits(self) -> u32 {
        match self {
            BitfieldType::Signed(b) | BitfieldType::Unsigned(b) => u32::from(b),
        }
    }

    /// Whether the width is one Redis accepts: 1 to 64 signed, 1 to 63
    /// unsigned.
    #[must_use]
    pub fn is_valid(self) -> bool {
        match self {
            BitfieldType::Signed(b) => (1..=64).contains(&b),
            BitfieldType::Unsigned(b) => (1..=63).contains(&b),
        }
    }

    /// Smallest and largest value of the type, exactly.
    fn limits(self) -> (i128, i128) {
        let bits = self.bits();
        match self {
            BitfieldType::Signed(_) => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
            BitfieldType::Unsigned(_) => (0, (1i128 << bits) - 1),
        }
    }

    /// The low `bits` bits of `raw` read as a value of this type.
    fn decode(self, raw: u64) -> i64 {
        let bits = self.bits();
        let raw = raw & low_mask(bits);
        match self {
            // `bits <= 63`, so the value fits in i64.
            BitfieldType::Unsigned(_) => raw as i64,
            BitfieldType::Signed(_) => {
                let shift = 64 - bits;
                // Moving the field's sign bit to bit 63 and back extends it.
                ((raw << shift) as i64) >> shift
            }
        }
    }

    /// The field bits of `value` (its low `bits` bits).
    fn encode(self, value: i64) -> u64 {
        (value as u64) & low_mask(self.bits())
    }
}

/// A mask of the low `bits` bits (`bits` in 1 ..= 64).
fn low_mask(bits: u32) -> u64 {
    u64::MAX >> (64 - bits)
}

/// What SET and INCRBY do when the result does not fit the field's type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// Keep the low bits: modular arithmetic (the default).
    #[default]
    Wrap,
    /// Clamp to the type's smallest or largest value.
    Sat,
    /// Change nothing and reply nil for this operation.
    Fail,
}

/// One sub-operation of [`Db::bitfield`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BitfieldOp {
    /// Reads the field: replies its value.
    Get {
        /// The field's type.
        ty: BitfieldType,
        /// Bit offset of the field's most significant bit.
        offset: u64,
    },
    /// Writes `value` into the field: replies the old value.
    Set {
        /// The field's type.
        ty: BitfieldType,
        /// Bit offset of the field's most significant bit.
        offset: u64,
        /// The new value, subject to the overflow mode in force. For an
        /// unsigned type a negative value is read as its 64-bit two's
        /// complement (so it always overflows), as Redis does.
        value: i64,
    },
    /// Adds `increment` to the field: replies the new value.
    IncrBy {
        /// The field's type.
        ty: BitfieldType,
        /// Bit offset of the field's most significant bit.
        offset: u64,
        /// The amount added (may be negative).
        increment: i64,
    },
    /// Sets the overflow mode of the SET and INCRBY operations after it.
    Overflow(Overflow),
}

/// The type, offset and width of an operation on a field.
fn field_of(op: &BitfieldOp) -> Option<(BitfieldType, u64)> {
    match *op {
        BitfieldOp::Get { ty, offset } | BitfieldOp::Set { ty, offset, .. } | BitfieldOp::IncrBy { ty, offset, .. } => {
            Some((ty, offset))
        }
        BitfieldOp::Overflow(_) => None,
    }
}

/// The result of writing `exact` (the mathematically exact new value) into a
/// field of type `ty`: itself if it fits, else per `overflow` the wrapped
/// value `wrapped`, the nearest limit, or `None` for FAIL.
fn settle(ty: BitfieldType, overflow: Overflow, exact: i128, wrapped: u64) -> Option<i64> {
    let (min, max) = ty.limits();
    if (min..=max).contains(&exact) {
        // Inside the type's range, which is inside i64.
        return i64::try_from(exact).ok();
    }
    match overflow {
        Overflow::Wrap => Some(ty.decode(wrapped)),
        // Both limits fit in i64.
        Overflow::Sat => i64::try_from(if exact > max { max } else { min }).ok(),
        Overflow::Fail => None,
    }
}

/// Redis's overflow test for signed fields, `value + incr` in a field of
/// `bits` bits: 1 up, -1 down, 0 none. Its intermediate `max - value` wraps
/// in 64 bits, so a SET of a value within `max` of `i64::MIN` counts as an
/// overflow *upwards* (SAT then stores the maximum); bitsled answers as
/// Redis does.
fn signed_overflow(value: i64, incr: i64, bits: u32) -> i8 {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min: i64 = -max - 1;
    // Two's-complement wrapping, as the C code's arithmetic does.
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        1
    } else if value < min || (bits != 64 && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr) {
        -1
    } else {
        0
    }
}

/// `value + incr` stored in a signed field, per `overflow`, by Redis's rules.
fn signed_result(ty: BitfieldType, overflow: Overflow, value: i64, incr: i64) -> Option<i64> {
    let (min, max) = ty.limits();
    let wrapped = (value as u64).wrapping_add(incr as u64);
    match signed_overflow(value, incr, ty.bits()) {
        // No overflow: the sum is inside the field's range.
        0 => Some(ty.decode(wrapped)),
        dir => match overflow {
            Overflow::Wrap => Some(ty.decode(wrapped)),
            // Both limits fit in i64.
            Overflow::Sat => i64::try_from(if dir > 0 { max } else { min }).ok(),
            Overflow::Fail => None,
        },
    }
}

/// The value a SET of `value` stores, or `None` if it fails.
fn set_result(ty: BitfieldType, overflow: Overflow, value: i64) -> Option<i64> {
    match ty {
        // Redis reads the argument of an unsigned SET as a u64.
        BitfieldType::Unsigned(_) => settle(ty, overflow, i128::from(value as u64), value as u64),
        BitfieldType::Signed(_) => signed_result(ty, overflow, value, 0),
    }
}

/// The value an INCRBY of `increment` on `old` stores, or `None` if it fails.
fn incr_result(ty: BitfieldType, overflow: Overflow, old: i64, increment: i64) -> Option<i64> {
    match ty {
        BitfieldType::Unsigned(_) => {
            let exact = i128::from(old) + i128::from(increment);
            settle(ty, overflow, exact, (old as u64).wrapping_add(increment as u64))
        }
        BitfieldType::Signed(_) => signed_result(ty, overflow, old, increment),
    }
}

/// The (page, first page-relative bit, bit count) pieces of the field of
/// `width` bits at `offset`, in bit order: one, or two when it crosses a
/// page boundary. The caller checked that `offset + width - 1` fits in u64.
fn pieces(offset: u64, width: u32) -> impl Iterator<Item = (u64, u32, u32)> {
    let at = locate(offset);
    let first = width.min(page_bound(PAGE_BITS - u64::from(at.bit)));
    let second = (width > first).then_some((at.page + 1, 0, width - first));
    std::iter::once((at.page, at.bit, first)).chain(second)
}

/// The raw bits of the field of `width` bits at `offset` of the value
/// `meta` describes.
fn read_raw(tx: &ReadTx<'_>, key: &[u8], meta: &Meta, offset: u64, width: u32) -> Result<u64> {
    let mut raw = 0u64;
    for (page, bit, n) in pieces(offset, width) {
        let p = tx.page(key, meta, page)?;
        for i in 0..n {
            raw = (raw << 1) | u64::from(p.as_ref().is_some_and(|p| p.get(bit + i)));
        }
    }
    Ok(raw)
}

/// Writes `raw` into the field of `width` bits at `offset` of the value
/// `meta` describes.
fn write_raw(tx: &mut WriteTx<'_>, key: &[u8], meta: &mut Meta, offset: u64, width: u32, raw: u64) -> Result<()> {
    let mut done = 0u32;
    for (page, bit, n) in pieces(offset, width) {
        tx.update_page(key, meta, page, |p| {
            for i in 0..n {
                // Field bit `done + i`, counted from the most significant.
                p.set(bit + i, (raw >> (width - 1 - (done + i))) & 1 == 1);
            }
        })?;
        done += n;
    }
    Ok(())
}

impl Db {
    /// Runs the BITFIELD sub-operations `ops` on string `key`, in order, and
    /// returns one entry per GET, SET and INCRBY: the field's value for GET,
    /// its old value for SET, its new value for INCRBY, and `None` when a
    /// SET or INCRBY overflowed under [`Overflow::Fail`] (that operation
    /// writes nothing). The overflow mode starts as [`Overflow::Wrap`] and
    /// changes at each [`BitfieldOp::Overflow`].
    ///
    /// Fields are big-endian in Redis's bit order: `offset` is the field's
    /// most significant bit. Bits past the end of the string read as zero.
    /// When `ops` holds a SET or INCRBY, the string first grows (zero-filled,
    /// creating a missing key) to cover the highest bit any of them names,
    /// even one that then fails, as in Redis; with only GETs nothing is
    /// created or changed.
    ///
    /// All of `ops` run atomically under the key's lock. The library accepts
    /// any offset whose field ends within `u64`; the Redis command layer
    /// limits offsets to `2^32 - 1`.
    ///
    /// Cost: one or two page reads (usually cached) per operation, and one or
    /// two page changes per SET or INCRBY that changes the field.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a type outside `i1 ..= i64` and
    /// `u1 ..= u63` or a field ending past offset `u64::MAX`;
    /// [`Error::OffsetOutOfRange`] for a SET or INCRBY ending past
    /// [`crate::MAX_OFFSET`] (all checked before anything runs);
    /// [`Error::WrongType`] if `key` is not a string;
    /// [`Error::Corrupted`]; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::{BitfieldOp as Op, BitfieldType::*, Overflow};
    /// let db = bitsled::Db::open(dir.path())?;
    /// let replies = db.bitfield(b"k", &[
    ///     Op::Set { ty: Unsigned(8), offset: 0, value: 200 },
    ///     Op::IncrBy { ty: Unsigned(8), offset: 0, increment: 100 },
    ///     Op::Overflow(Overflow::Sat),
    ///     Op::IncrBy { ty: Signed(8), offset: 0, increment: -200 },
    ///     Op::Overflow(Overflow::Fail),
    ///     Op::IncrBy { ty: Signed(8), offset: 0, increment: -1 },
    /// ])?;
    /// assert_eq!(replies, vec![Some(0), Some(44), Some(-128), None]);
    /// assert_eq!(db.get(b"k")?, Some(vec![0x80]));
    /// # Ok(()) }
    /// ```
    pub fn bitfield(&self, key: &[u8], ops: &[BitfieldOp]) -> Result<Vec<Option<i64>>> {
        // Validate everything first and find the highest bit written.
        let mut highest: Option<u64> = None;
        for op in ops {
            let Some((ty, offset)) = field_of(op) else { continue };
            if !ty.is_valid() {
                return Err(Error::InvalidArgument(format!("invalid bitfield type {ty:?}")));
            }
            let last = offset
                .checked_add(u64::from(ty.bits()) - 1)
                .ok_or_else(|| Error::InvalidArgument("bit field ends past the largest offset".into()))?;
            if !matches!(op, BitfieldOp::Get { .. }) {
                if last > crate::geometry::MAX_OFFSET {
                    return Err(Error::OffsetOutOfRange { offset: last });
                }
                highest = Some(highest.map_or(last, |h| h.max(last)));
            }
        }
        let Some(highest) = highest else {
            // Only GETs: read under the key's lock, write nothing.
            return self.engine.read(self.index, &[key], |tx| {
                let meta = tx.string(key)?;
                let mut out = Vec::new();
                for op in ops {
                    if let Some((ty, offset)) = field_of(op) {
                        let raw = match &meta {
                            Some(m) => read_raw(tx, key, m, offset, ty.bits())?,
                            None => 0,
                        };
                        out.push(Some(ty.decode(raw)));
                    }
                }
                Ok(out)
            });
        };
        self.engine.write(self.index, &[key], |tx| {
            let mut meta = tx.string_or_new(key)?;
            // Read every touched page before changing any, so a page that does
            // not decode fails the call before it writes anything.
            for op in ops {
                if let Some((ty, offset)) = field_of(op) {
                    for (page, _, _) in pieces(offset, ty.bits()) {
                        tx.page(key, &meta, page)?;
                    }
                }
            }
            // Whether the call creates or lengthens the key.
            let grows = meta.len < highest / 8 + 1;
            meta.len = meta.len.max(highest / 8 + 1);
            let mut overflow = Overflow::Wrap;
            let mut out = Vec::new();
            // Changes as Redis counts them: a field written (SET, or INCRBY
            // not failed) while the key grows or to a new value. Only then
            // are the key's watchers told.
            let mut changes = 0usize;
            for op in ops {
                let (ty, offset, new, reply_old) = match *op {
                    BitfieldOp::Overflow(o) => {
                        overflow = o;
                        continue;
                    }
                    BitfieldOp::Get { ty, offset } => {
                        out.push(Some(ty.decode(read_raw(tx, key, &meta, offset, ty.bits())?)));
                        continue;
                    }
                    BitfieldOp::Set { ty, offset, value } => (ty, offset, Err(value), true),
                    BitfieldOp::IncrBy { ty, offset, increment } => (ty, offset, Ok(increment), false),
                };
                let width = ty.bits();
                let old_raw = read_raw(tx, key, &meta, offset, width)?;
                let old = ty.decode(old_raw);
                let new = match new {
                    Err(value) => set_result(ty, overflow, value),
                    Ok(increment) => incr_result(ty, overflow, old, increment),
                };
                let Some(new) = new else {
                    out.push(None);
                    continue;
                };
                let new_raw = ty.encode(new);
                if grows || new_raw != old_raw {
                    changes += 1;
                }
                if new_raw != old_raw {
                    write_raw(tx, key, &mut meta, offset, width, new_raw)?;
                }
                out.push(Some(if reply_old { old } else { new }));
            }
            if changes > 0 {
                tx.set(key, &meta)?;
                // Redis counts each changing write; the record counted one.
                tx.count_changes(changes as u64 - 1);
            } else {
                tx.set_unannounced(key, &meta)?;
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
#[expect(clippy::cast_possible_truncation, reason = "the reference model: fields of at most 64 bits at small offsets")]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use BitfieldType::{Signed as I, Unsigned as U};

    /// A naive model: the string is a `Vec<u8>`, fields are read and written
    /// bit by bit, and overflow is decided by exact arithmetic with the
    /// rules stated in Redis's documentation (plus its one quirk: an
    /// unsigned SET reads a negative value as a huge unsigned one).
    #[derive(Default)]
    struct Model {
        bytes: Option<Vec<u8>>,
    }

    impl Model {
        fn bit(&self, o: u64) -> bool {
            let v = self.bytes.as_deref().unwrap_or(&[]);
            usize::try_from(o / 8).ok().and_then(|i| v.get(i)).is_some_and(|b| b & (0x80 >> (o % 8)) != 0)
        }

        fn get(&self, ty: BitfieldType, o: u64) -> i128 {
            let w = ty.bits();
            let mut u: i128 = 0;
            for i in 0..u64::from(w) {
                u = u * 2 + i128::from(self.bit(o + i));
            }
            match ty {
                I(_) if u >= 1i128 << (w - 1) => u - (1i128 << w),
                _ => u,
            }
        }

        fn put(&mut self, ty: BitfieldType, o: u64, v: i128) {
            let w = u64::from(ty.bits());
            let u = v.rem_euclid(1i128 << w);
            let bytes = self.bytes.get_or_insert_with(Vec::new);
            for i in 0..w {
                let bit = (u >> (w - 1 - i)) & 1 == 1;
                let at = o + i;
                let idx = (at / 8) as usize;
                let m = 0x80u8 >> (at % 8);
                if bit {
                    bytes[idx] |= m;
                } else {
                    bytes[idx] &= !m;
                }
            }
        }

        fn fit(ty: BitfieldType, ow: Overflow, x: i128) -> Option<i128> {
            let w = ty.bits();
            let (lo, hi) = match ty {
                I(_) => (-(1i128 << (w - 1)), (1i128 << (w - 1)) - 1),
                U(_) => (0, (1i128 << w) - 1),
            };
            if x >= lo && x <= hi {
                return Some(x);
            }
            match ow {
                Overflow::Fail => None,
                Overflow::Sat => Some(x.clamp(lo, hi)),
                Overflow::Wrap => Some((x - lo).rem_euclid(1i128 << w) + lo),
            }
        }

        fn run(&mut self, ops: &[BitfieldOp]) -> Vec<Option<i64>> {
            let writes = ops.iter().filter(|o| matches!(o, BitfieldOp::Set { .. } | BitfieldOp::IncrBy { .. }));
            let need = writes.filter_map(field_of).map(|(t, o)| (o + u64::from(t.bits()) - 1) / 8 + 1).max();
            if let Some(need) = need {
                let b = self.bytes.get_or_insert_with(Vec::new);
                if (b.len() as u64) < need {
                    b.resize(need as usize, 0);
                }
            }
            let mut ow = Overflow::Wrap;
            let mut out = Vec::new();
            for op in ops {
                match *op {
                    BitfieldOp::Overflow(o) => ow = o,
                    BitfieldOp::Get { ty, offset } => out.push(Some(self.get(ty, offset) as i64)),
                    BitfieldOp::Set { ty, offset, value } => {
                        let old = self.get(ty, offset);
                        let v = if matches!(ty, U(_)) { i128::from(value as u64) } else { i128::from(value) };
                        // Redis quirk: for a signed field narrower than 64
                        // bits, `max - value` computed in 64 bits wraps for
                        // values within `max` of i64::MIN, which Redis reads
                        // as an overflow upwards: SAT stores the maximum.
                        let hi = |w: u32| (1i128 << (w - 1)) - 1;
                        let quirk = matches!(ty, I(w) if w < 64 && v <= hi(u32::from(w)) - (1i128 << 63));
                        let fitted = match (quirk, ow) {
                            (true, Overflow::Sat) => Some(hi(ty.bits())),
                            _ => Self::fit(ty, ow, v),
                        };
                        match fitted {
                            Some(n) => {
                                self.put(ty, offset, n);
                                out.push(Some(old as i64));
                            }
                            None => out.push(None),
                        }
                    }
                    BitfieldOp::IncrBy { ty, offset, increment } => {
                        let old = self.get(ty, offset);
                        match Self::fit(ty, ow, old + i128::from(increment)) {
                            Some(n) => {
                                self.put(ty, offset, n);
                                out.push(Some(n as i64));
                            }
                            None => out.push(None),
                        }
                    }
                }
            }
            out
        }
    }

    fn open() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Config::new(dir.path()).flush_interval(None).open().unwrap();
        (dir, db)
    }

    /// The overflow rules on the edge values, as Redis 7.0.15 answered them
    /// (`BITFIELD k OVERFLOW <mode> SET/INCRBY ...`).
    #[test]
    fn overflow_edges_match_redis() {
        let w = Overflow::Wrap;
        let s = Overflow::Sat;
        let f = Overflow::Fail;
        // Unsigned SET of a negative value: wraps to its low bits, saturates
        // to the maximum (not 0), fails.
        assert_eq!(set_result(U(8), w, -1), Some(255));
        assert_eq!(set_result(U(8), s, -1), Some(255));
        assert_eq!(set_result(U(8), s, -300), Some(255));
        assert_eq!(set_result(U(8), f, -1), None);
        assert_eq!(set_result(U(63), w, -1), Some(i64::MAX));
        assert_eq!(set_result(U(63), s, i64::MIN), Some(i64::MAX));
        assert_eq!(set_result(I(8), s, -300), Some(-128));
        assert_eq!(set_result(I(8), w, 200), Some(-56));
        assert_eq!(set_result(I(64), f, i64::MIN), Some(i64::MIN));
        assert_eq!(set_result(I(1), w, 1), Some(-1));
        assert_eq!(set_result(U(1), w, 2), Some(0));
        // INCRBY.
        assert_eq!(incr_result(U(8), s, 0, -1000), Some(0));
        assert_eq!(incr_result(U(8), w, 0, -1), Some(255));
        assert_eq!(incr_result(I(64), w, i64::MAX, 1), Some(i64::MIN));
        assert_eq!(incr_result(I(64), s, i64::MAX, 1), Some(i64::MAX));
        assert_eq!(incr_result(I(64), s, i64::MAX, i64::MIN), Some(-1));
        assert_eq!(incr_result(I(64), s, -1, i64::MIN), Some(i64::MIN));
        assert_eq!(incr_result(I(64), f, i64::MIN, -1), None);
        assert_eq!(incr_result(I(64), f, i64::MIN, i64::MAX), Some(-1));
        assert_eq!(incr_result(U(63), s, i64::MAX, 1), Some(i64::MAX));
        assert_eq!(incr_result(U(63), s, i64::MAX, i64::MIN), Some(0));
        assert_eq!(incr_result(U(63), w, i64::MAX, i64::MIN), Some(i64::MAX));
        assert_eq!(incr_result(U(63), w, i64::MAX, i64::MAX), Some(i64::MAX - 1));
    }

    /// A field is read MSB first across bytes, words and pages.
    #[test]
    fn fields_cross_words_and_pages() {
        let (_d, db) = open();
        for offset in [0u64, 60, 63, 64, 32_760, 32_767, 32_768 - 64, 32_768 - 30, 65_530] {
            for ty in [U(63), I(64), U(7), I(33)] {
                let key = format!("k{offset}{ty:?}");
                let v = match ty {
                    I(64) => -0x0123_4567_89ab_cdef,
                    U(63) => 0x5234_5678_9abc_def1,
                    _ => 0x55,
                };
                db.bitfield(key.as_bytes(), &[BitfieldOp::Set { ty, offset, value: v }]).unwrap();
                let got = db.bitfield(key.as_bytes(), &[BitfieldOp::Get { ty, offset }]).unwrap();
                assert_eq!(got, vec![Some(v)], "{key}");
                let width = u64::from(ty.bits());
                assert_eq!(db.strlen(key.as_bytes()).unwrap(), (offset + width - 1) / 8 + 1, "{key}");
                // The same bits, one by one, through GETBIT.
                for i in 0..width {
                    let want = ((v as u64) >> (width - 1 - i)) & 1 == 1;
                    assert_eq!(db.getbit(key.as_bytes(), offset + i).unwrap(), want, "{key} bit {i}");
                }
                assert_eq!(db.bitcount(key.as_bytes(), None).unwrap(), u64::from(ty.encode(v).count_ones()));
            }
        }
        assert!(db.verify().unwrap().is_ok());
    }

    /// GETs alone never create a key; a failing SET still grows the string
    /// (Redis 7.0.15: `BITFIELD k2 OVERFLOW FAIL SET u8 100 300` leaves a
    /// 14-byte string of zeros).
    #[test]
    fn creation_and_growth() {
        let (_d, db) = open();
        let got = db.bitfield(b"g", &[BitfieldOp::Get { ty: I(64), offset: 1 << 40 }]).unwrap();
        assert_eq!(got, vec![Some(0)]);
        assert!(!db.exists(b"g").unwrap());
        assert_eq!(db.bitfield(b"g", &[]).unwrap(), Vec::<Option<i64>>::new());
        assert!(!db.exists(b"g").unwrap());
        let ops = [BitfieldOp::Overflow(Overflow::Fail), BitfieldOp::Set { ty: U(8), offset: 100, value: 300 }];
        assert_eq!(db.bitfield(b"f", &ops).unwrap(), vec![None]);
        assert_eq!(db.get(b"f").unwrap(), Some(vec![0; 14]));
    }

    /// Invalid types and fields ending past u64 are refused before anything
    /// is written; the largest legal field works.
    #[test]
    fn invalid_arguments() {
        let (_d, db) = open();
        let set = |ty, offset| BitfieldOp::Set { ty, offset, value: -1 };
        for bad in [U(64), U(0), I(0), I(65), U(255)] {
            let r = db.bitfield(b"k", &[set(U(8), 0), set(bad, 0)]);
            assert!(matches!(r, Err(Error::InvalidArgument(_))), "{bad:?}");
        }
        let r = db.bitfield(b"k", &[set(U(8), 0), set(I(2), u64::MAX)]);
        assert!(matches!(r, Err(Error::InvalidArgument(_))));
        assert!(!db.exists(b"k").unwrap(), "nothing written");
        let r = db.bitfield(b"k", &[set(I(1), u64::MAX)]);
        assert!(matches!(r, Err(Error::OffsetOutOfRange { .. })), "a write past MAX_OFFSET: {r:?}");
        let max = crate::geometry::MAX_OFFSET;
        assert_eq!(db.bitfield(b"k", &[set(I(1), max)]).unwrap(), vec![Some(0)]);
        assert_eq!(db.bitfield(b"k", &[BitfieldOp::Get { ty: I(1), offset: max }]).unwrap(), vec![Some(-1)]);
        assert_eq!(db.bitfield(b"k", &[BitfieldOp::Get { ty: I(1), offset: u64::MAX }]).unwrap(), vec![Some(0)]);
        assert_eq!(db.strlen(b"k").unwrap(), max / 8 + 1);
        db.set(b"k", b"x").unwrap();
        assert_eq!(db.bitfield(b"k", &[set(I(8), 0)]).unwrap(), vec![Some(i64::from(b'x'))]);
    }

    fn ty_strategy() -> impl Strategy<Value = BitfieldType> {
        prop_oneof![(1u8..=64).prop_map(I), (1u8..=63).prop_map(U)]
    }

    fn offset_strategy() -> impl Strategy<Value = u64> {
        // Near word edges, byte edges and the first two page edges.
        let edges = prop::sample::select(vec![0u64, 64, 128, 32_768, 65_536]);
        (edges, -70i64..70).prop_map(|(e, d)| e.saturating_add_signed(d))
    }

    fn value_strategy() -> impl Strategy<Value = i64> {
        prop_oneof![
            any::<i64>(),
            -300i64..300,
            prop::sample::select(vec![i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1, -1, 0, 1]),
            (0u32..64).prop_map(|s| 1i64 << s),
            (0u32..64).prop_map(|s| (1i64 << s).wrapping_neg()),
        ]
    }

    fn op_strategy() -> impl Strategy<Value = BitfieldOp> {
        prop_oneof![
            (ty_strategy(), offset_strategy()).prop_map(|(ty, offset)| BitfieldOp::Get { ty, offset }),
            (ty_strategy(), offset_strategy(), value_strategy()).prop_map(|(ty, offset, value)| BitfieldOp::Set {
                ty,
                offset,
                value
            }),
            (ty_strategy(), offset_strategy(), value_strategy())
                .prop_map(|(ty, offset, increment)| BitfieldOp::IncrBy { ty, offset, increment }),
            prop::sample::select(vec![Overflow::Wrap, Overflow::Sat, Overflow::Fail]).prop_map(BitfieldOp::Overflow),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        /// Invariant: for any sequence of BITFIELD calls (all widths, all
        /// overflow modes, fields near word and page edges), every reply,
        /// the string's bytes, its existence and the stored popcount equal
        /// those of the naive model, also after a write-back.
        #[test]
        fn matches_naive_model(calls in prop::collection::vec(prop::collection::vec(op_strategy(), 0..8), 1..12)) {
            let (_d, db) = open();
            let mut model = Model::default();
            for ops in &calls {
                let got = db.bitfield(b"k", ops).unwrap();
                let want = model.run(ops);
                prop_assert_eq!(got, want, "ops {:?}", ops);
                prop_assert_eq!(db.get(b"k").unwrap(), model.bytes.clone());
                let ones: u64 = model.bytes.iter().flatten().map(|b| u64::from(b.count_ones())).sum();
                prop_assert_eq!(db.bitcount(b"k", None).unwrap(), ones);
            }
            let report = db.verify().unwrap();
            prop_assert!(report.is_ok(), "{:?}", report.problems);
        }
    }
}
