//! BITFIELD and BITFIELD_RO.

use super::args::{parse_i64, ERR_INT, ERR_OFFSET, ERR_SYNTAX, MAX_STRING_BYTES};
use super::{CmdResult, Fail, Reply};
use bitsled::Db;
use bitsled::{BitfieldOp, BitfieldType, Overflow};

const ERR_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const ERR_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
const ERR_RO: &str = "ERR BITFIELD_RO only supports the GET subcommand";

/// `s` up to its first NUL byte: Redis compares subcommand names and reads
/// types as C strings.
fn c_str(s: &[u8]) -> &[u8] {
    &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
}

/// `s` as a C string equals `word`, ignoring ASCII case (`strcasecmp`).
fn c_is(s: &[u8], word: &str) -> bool {
    c_str(s).eq_ignore_ascii_case(word.as_bytes())
}

/// A type argument: `i1 ..= i64` or `u1 ..= u63`, lower-case letter.
fn field_type(s: &[u8]) -> Result<BitfieldType, Fail> {
    let err = || Fail::new(ERR_TYPE);
    let (signed, digits) = match c_str(s).split_first() {
        Some((b'i', rest)) => (true, rest),
        Some((b'u', rest)) => (false, rest),
        _ => return Err(err()),
    };
    let bits = parse_i64(digits).ok_or_else(err)?;
    match (signed, u8::try_from(bits)) {
        (true, Ok(b @ 1..=64)) => Ok(BitfieldType::Signed(b)),
        (false, Ok(b @ 1..=63)) => Ok(BitfieldType::Unsigned(b)),
        _ => Err(err()),
    }
}

/// An offset argument: a bit offset, or `#N` for `N * width`. As in Redis,
/// the product wraps in 64 bits before the range check, and the offset must
/// be below 2^32 (the field may end past it).
fn field_offset(s: &[u8], width: u32) -> Result<u64, Fail> {
    let err = || Fail::new(ERR_OFFSET);
    let (hash, digits) = match s.split_first() {
        Some((b'#', rest)) => (true, rest),
        _ => (false, s),
    };
    let mut n = parse_i64(digits).ok_or_else(err)?;
    if hash {
        n = n.wrapping_mul(i64::from(width));
    }
    let n = u64::try_from(n).map_err(|_| err())?;
    if n >> 3 >= MAX_STRING_BYTES {
        return Err(err());
    }
    Ok(n)
}

/// Parses the sub-operations after the key, with Redis's checks in Redis's
/// order; the second value says whether any writes (SET or INCRBY).
fn parse(a: &[Vec<u8>]) -> Result<(Vec<BitfieldOp>, bool), Fail> {
    let mut ops = Vec::new();
    let mut writes = false;
    let mut j = 2;
    while j < a.len() {
        let rest = a.len() - j - 1;
        let sub = &a[j];
        if c_is(sub, "overflow") && rest >= 1 {
            let mode = &a[j + 1];
            let mode = if c_is(mode, "wrap") {
                Overflow::Wrap
            } else if c_is(mode, "sat") {
                Overflow::Sat
            } else if c_is(mode, "fail") {
                Overflow::Fail
            } else {
                return Err(Fail::new(ERR_OVERFLOW));
            };
            ops.push(BitfieldOp::Overflow(mode));
            j += 2;
            continue;
        }
        let get = c_is(sub, "get") && rest >= 2;
        let set = c_is(sub, "set") && rest >= 3;
        let incr = c_is(sub, "incrby") && rest >= 3;
        if !(get || set || incr) {
            return Err(Fail::new(ERR_SYNTAX));
        }
        let ty = field_type(&a[j + 1])?;
        let offset = field_offset(&a[j + 2], ty.bits())?;
        if get {
            ops.push(BitfieldOp::Get { ty, offset });
            j += 3;
            continue;
        }
        writes = true;
        let value = parse_i64(&a[j + 3]).ok_or_else(|| Fail::new(ERR_INT))?;
        ops.push(if set {
            BitfieldOp::Set { ty, offset, value }
        } else {
            BitfieldOp::IncrBy { ty, offset, increment: value }
        });
        j += 4;
    }
    Ok((ops, writes))
}

fn reply(values: Vec<Option<i64>>) -> Reply {
    Reply::Array(values.into_iter().map(|v| v.map_or(Reply::Bulk(None), Reply::Integer)).collect())
}

/// `BITFIELD key [GET type offset] [SET type offset value] [INCRBY type
/// offset increment] [OVERFLOW WRAP|SAT|FAIL] ...`: every argument is
/// checked before anything runs; the reply has one integer (or nil, for an
/// overflow under FAIL) per GET, SET and INCRBY.
pub(crate) fn bitfield(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let (ops, writes) = parse(a)?;
    let values = db.bitfield(&a[1], &ops)?;
    if writes {
        super::notify::emit(super::notify::STRING, "setbit", &a[1]);
    }
    Ok(reply(values))
}

/// `BITFIELD_RO key [GET type offset] ...`: the same parser (so a bad
/// argument anywhere is reported first), then SET or INCRBY is refused.
pub(crate) fn bitfield_ro(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let (ops, writes) = parse(a)?;
    if writes {
        return Err(Fail::new(ERR_RO));
    }
    Ok(reply(db.bitfield(&a[1], &ops)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Types: lower-case `i`/`u`, a `string2ll` width in range, read up to
    /// a NUL byte as Redis does.
    #[test]
    fn types() {
        assert_eq!(field_type(b"i64").ok(), Some(BitfieldType::Signed(64)));
        assert_eq!(field_type(b"u63").ok(), Some(BitfieldType::Unsigned(63)));
        assert_eq!(field_type(b"i1\0junk").ok(), Some(BitfieldType::Signed(1)));
        for bad in [&b"u64"[..], b"i65", b"i0", b"I8", b"U8", b"i08", b"i", b"", b"i-1", b"i 8", b"i256", b"u\x008"] {
            assert!(field_type(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// `#N` multiplies by the width with 64-bit wrap-around, then the
    /// result must be in `0 .. 2^32`.
    #[test]
    fn offsets() {
        assert_eq!(field_offset(b"#3", 16).ok(), Some(48));
        assert_eq!(field_offset(b"#0", 16).ok(), Some(0));
        assert_eq!(field_offset(b"4294967295", 64).ok(), Some(4_294_967_295));
        assert!(field_offset(b"4294967296", 1).is_err());
        // 1152921504606846977 * 16 = 2^64 + 16 wraps to 16 (Redis 7.0.15 too).
        assert_eq!(field_offset(b"#1152921504606846977", 16).ok(), Some(16));
        assert!(field_offset(b"#1152921504606846977", 8).is_err());
        for bad in [&b"#"[..], b"#-1", b"-1", b"x", b"##1", b"#01", b""] {
            assert!(field_offset(bad, 8).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
