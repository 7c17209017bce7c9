//! PFADD, PFCOUNT, PFMERGE.

use super::{CmdResult, Fail, Reply};
use bitsled::Db;
use bitsled::Error;

/// Redis's reply for a string that is not a HyperLogLog.
const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// Redis's reply for a HyperLogLog with corrupt registers.
const ERR_INVALID_HLL: &str = "INVALIDOBJ Corrupted HLL object detected";

/// The error reply for a library error, with Redis's HyperLogLog texts.
fn fail(e: Error) -> Fail {
    match e {
        Error::NotHyperLogLog { .. } => Fail::new(ERR_NOT_HLL),
        Error::InvalidHyperLogLog { .. } => Fail::new(ERR_INVALID_HLL),
        other => Fail::from(other),
    }
}

/// `PFADD key [element ...]`.
pub(crate) fn pfadd(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let changed = db.hll(&a[1]).add(&a[2..]).map_err(fail)?;
    if changed {
        super::notify::emit(super::notify::STRING, "pfadd", &a[1]);
    }
    Ok(Reply::Integer(i64::from(changed)))
}

/// `PFCOUNT key [key ...]`.
pub(crate) fn pfcount(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let card = db.hll(&a[1]).count_with(&a[2..]).map_err(fail)?;
    // Redis replies the 64 bits as a signed integer: a saturated sketch's
    // 2^63 comes out as i64::MIN.
    Ok(Reply::Integer(i64::from_le_bytes(card.to_le_bytes())))
}

/// `PFMERGE destkey [sourcekey ...]`.
pub(crate) fn pfmerge(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    db.hll(&a[1]).merge_from(&a[2..]).map_err(fail)?;
    super::notify::emit(super::notify::STRING, "pfadd", &a[1]);
    Ok(Reply::ok())
}
