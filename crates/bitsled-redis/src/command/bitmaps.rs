//! SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP.

use super::args::{bit_offset, int, is, slices, ERR_SYNTAX};
use super::notify::{collecting, emit, GENERIC, STRING};
use super::{CmdResult, Fail, Reply};
use bitsled::Db;
use bitsled::{BitOp, Span, Unit};

fn to_int(n: u64) -> Reply {
    Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `SETBIT key offset 0|1`: offset checked first, then the bit.
pub(crate) fn setbit(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let offset = bit_offset(&a[2], None)?;
    let bit = match super::args::parse_i64(&a[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(Fail::new("ERR bit is not an integer or out of range")),
    };
    let old = db.setbit(&a[1], offset, bit)?;
    emit(STRING, "setbit", &a[1]);
    Ok(Reply::Integer(i64::from(old)))
}

/// `GETBIT key offset`.
pub(crate) fn getbit(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let offset = bit_offset(&a[2], None)?;
    Ok(Reply::Integer(i64::from(db.getbit(&a[1], offset)?)))
}

/// `BYTE` or `BIT`, else a syntax error.
fn unit(s: &[u8]) -> Result<Unit, Fail> {
    if is(s, "bit") {
        Ok(Unit::Bit)
    } else if is(s, "byte") {
        Ok(Unit::Byte)
    } else {
        Err(Fail::new(ERR_SYNTAX))
    }
}

/// `BITCOUNT key [start end [BYTE|BIT]]`. As in Redis 7.0, a missing key
/// answers 0 before the other arguments are looked at.
pub(crate) fn bitcount(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    if !db.exists(&a[1])? {
        return Ok(Reply::Integer(0));
    }
    let span = match a.len() {
        2 => None,
        4 | 5 => {
            let (start, end) = (int(&a[2])?, int(&a[3])?);
            // Redis 7.0 answers a reversed all-negative range before it
            // reads the unit, so a bad unit goes unnoticed there.
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Integer(0));
            }
            let unit = if a.len() == 5 { unit(&a[4])? } else { Unit::Byte };
            Some(Span { start, end, unit })
        }
        _ => return Err(Fail::new(ERR_SYNTAX)),
    };
    Ok(to_int(db.bitcount(&a[1], span)?))
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`: the bit is checked first; a
/// missing key answers before the range is parsed (Redis 7.0's order).
pub(crate) fn bitpos(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let bit = match int(&a[2])? {
        0 => false,
        1 => true,
        _ => return Err(Fail::new("ERR The bit argument must be 1 or 0.")),
    };
    if !db.exists(&a[1])? {
        return Ok(Reply::Integer(if bit { -1 } else { 0 }));
    }
    let (start, end, unit) = match a.len() {
        3 => (None, None, Unit::Byte),
        4..=6 => {
            let start = int(&a[3])?;
            let u = if a.len() == 6 { unit(&a[5])? } else { Unit::Byte };
            let end = if a.len() >= 5 { Some(int(&a[4])?) } else { None };
            (Some(start), end, u)
        }
        _ => return Err(Fail::new(ERR_SYNTAX)),
    };
    Ok(Reply::Integer(db.bitpos(&a[1], bit, start, end, unit)?))
}

/// `BITOP op dest src...` with the 8.2 operations (DIFF, DIFF1, ANDOR, ONE).
/// The BITOP operation named `name`.
fn bitop_named(name: &[u8]) -> Result<BitOp, Fail> {
    let ops = [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Not, BitOp::Diff, BitOp::Diff1, BitOp::AndOr, BitOp::One];
    ops.into_iter().find(|op| is(name, op.name())).ok_or_else(|| Fail::new(ERR_SYNTAX))
}

pub(crate) fn bitop(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let op = bitop_named(&a[1])?;
    let sources = slices(&a[3..]);
    let existed = collecting() && db.exists(&a[2])?;
    let len = db.bitop(op, &a[2], &sources)?;
    if len > 0 {
        emit(STRING, "set", &a[2]);
    } else if existed {
        emit(GENERIC, "del", &a[2]);
    }
    Ok(to_int(len))
}

/// `BITOP.COUNT op key [key ...]` (an extension): the number of set bits
/// `BITOP op dest key...` would store, without storing anything.
pub(crate) fn bitop_count(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let op = bitop_named(&a[1])?;
    let sources = slices(&a[2..]);
    Ok(to_int(db.bitop_count(op, &sources)?.1))
}
