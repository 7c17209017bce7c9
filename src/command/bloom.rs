//! BF.RESERVE, BF.ADD, BF.MADD, BF.EXISTS, BF.MEXISTS, BF.INSERT, BF.INFO,
//! BF.CARD.

use super::{CmdResult, Fail};
use crate::db::Db;

fn todo() -> CmdResult {
    Err(Fail::new("ERR Bloom filters are not available yet"))
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]`.
pub(crate) fn reserve(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    todo()
}

/// `BF.ADD key item`.
pub(crate) fn add(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    todo()
}

/// `BF.MADD key item [item ...]`.
pub(crate) fn madd(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    todo()
}

/// `BF.EXISTS key item`.
pub(crate) fn exists(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    todo()
}

/// `BF.MEXISTS key item [item ...]`.
pub(crate) fn mexists(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    todo()
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item [item ...]`.
pub(crate) fn insert(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    todo()
}

/// `BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION]`.
pub(crate) fn info(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    todo()
}

/// `BF.CARD key`.
pub(crate) fn card(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    todo()
}
