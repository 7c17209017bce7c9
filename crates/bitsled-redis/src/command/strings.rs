//! GET, SET, STRLEN, MGET, GETDEL, GETRANGE, SETRANGE, APPEND.

use super::args::{int, MAX_STRING_BYTES};
use super::{CmdResult, Fail, Reply};
use bitsled::Db;
use bitsled::Error;

/// `GET key`.
pub(crate) fn get(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Bulk(db.get(&a[1])?))
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
pub(crate) fn set(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let (nx, xx, get, expiry) = super::expiry::set_options(db, &a[3..])?;
    let old = if get { db.get(&a[1])? } else { None };
    let found = if get { old.is_some() } else { db.exists(&a[1])? };
    if (nx && found) || (xx && !found) {
        return Ok(if get { Reply::Bulk(old) } else { Reply::Bulk(None) });
    }
    db.set_with_expiry(&a[1], &a[2], expiry)?;
    Ok(if get { Reply::Bulk(old) } else { Reply::ok() })
}

/// `STRLEN key`.
pub(crate) fn strlen(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(i64::try_from(db.strlen(&a[1])?).unwrap_or(i64::MAX)))
}

/// `MGET key...`: nil for missing keys and keys of other types.
pub(crate) fn mget(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(a.len() - 1);
    for k in &a[1..] {
        out.push(match db.get(k) {
            Ok(v) => Reply::Bulk(v),
            Err(Error::WrongType) => Reply::Bulk(None),
            Err(e) => return Err(e.into()),
        });
    }
    Ok(Reply::Array(out))
}

/// `GETDEL key`.
pub(crate) fn getdel(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let v = db.get(&a[1])?;
    if v.is_some() {
        db.delete(&a[1])?;
    }
    Ok(Reply::Bulk(v))
}

/// Redis's check that a string stays within 512 MiB.
fn check_length(start: u64, add: usize) -> Result<(), Fail> {
    if start.saturating_add(add as u64) > MAX_STRING_BYTES {
        return Err(Fail::new("ERR string exceeds maximum allowed size (proto-max-bulk-len)"));
    }
    Ok(())
}

/// `GETRANGE key start end` (and its old name `SUBSTR`).
pub(crate) fn getrange(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let (start, end) = (int(&a[2])?, int(&a[3])?);
    Ok(Reply::Bulk(Some(db.getrange(&a[1], start, end)?)))
}

/// `SETRANGE key offset value`.
pub(crate) fn setrange(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let offset = u64::try_from(int(&a[2])?).map_err(|_| Fail::new("ERR offset is out of range"))?;
    if !a[3].is_empty() {
        check_length(offset, a[3].len())?;
    }
    Ok(Reply::Integer(i64::try_from(db.setrange(&a[1], offset, &a[3])?).unwrap_or(i64::MAX)))
}

/// `APPEND key value`.
pub(crate) fn append(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    check_length(db.strlen(&a[1])?, a[2].len())?;
    Ok(Reply::Integer(i64::try_from(db.append(&a[1], &a[2])?).unwrap_or(i64::MAX)))
}
