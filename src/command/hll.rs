//! PFADD, PFCOUNT, PFMERGE.

use super::{CmdResult, Fail};
use crate::db::Db;

/// `PFADD key [element ...]`.
pub(crate) fn pfadd(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    Err(Fail::new("ERR PFADD is not available yet"))
}

/// `PFCOUNT key [key ...]`.
pub(crate) fn pfcount(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    Err(Fail::new("ERR PFCOUNT is not available yet"))
}

/// `PFMERGE destkey [sourcekey ...]`.
pub(crate) fn pfmerge(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    Err(Fail::new("ERR PFMERGE is not available yet"))
}
