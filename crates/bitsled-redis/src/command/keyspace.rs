//! DEL, EXISTS, TYPE, KEYS, DBSIZE, PING, ECHO, RENAME, RENAMENX, COPY,
//! FLUSHALL, FLUSHDB.

use super::args::{int, is, ERR_SYNTAX};
use super::{wrong_arity, CmdResult, Fail, Reply};
use bitsled::Db;

fn count(n: usize) -> Reply {
    Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `DEL key...` and `UNLINK key...`: the number of keys removed.
pub(crate) fn del(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in &a[1..] {
        n += usize::from(db.delete(k)?);
    }
    Ok(count(n))
}

/// `EXISTS key...`: a key named twice counts twice.
pub(crate) fn exists(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in &a[1..] {
        n += usize::from(db.exists(k)?);
    }
    Ok(count(n))
}

/// `TYPE key`: `string` or `none`.
pub(crate) fn type_of(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Status(db.key_type(&a[1])?.into()))
}

/// `KEYS pattern`, in byte order (Redis's order is its hash table's).
pub(crate) fn keys(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(db.keys(&a[1])?.into_iter().map(|k| Reply::Bulk(Some(k))).collect()))
}

/// `DBSIZE`.
pub(crate) fn dbsize(db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(i64::try_from(db.dbsize()?).unwrap_or(i64::MAX)))
}

/// `PING [message]`.
pub(crate) fn ping(_db: &Db, a: &[Vec<u8>]) -> CmdResult {
    match a.len() {
        1 => Ok(Reply::Status("PONG".into())),
        2 => Ok(Reply::Bulk(Some(a[1].clone()))),
        _ => Err(Fail::new(wrong_arity("ping"))),
    }
}

/// `ECHO message`.
pub(crate) fn echo(_db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Bulk(Some(a[1].clone())))
}

/// `RENAME key newkey` and `RENAMENX key newkey`.
fn rename(db: &Db, a: &[Vec<u8>], nx: bool) -> CmdResult {
    let done = db.rename(&a[1], &a[2], nx)?;
    if nx {
        // Redis answers 0 for a rename to the same name.
        Ok(Reply::Integer(i64::from(done && a[1] != a[2])))
    } else {
        Ok(Reply::ok())
    }
}

/// `RENAME key newkey`.
pub(crate) fn rename_cmd(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    rename(db, a, false)
}

/// `RENAMENX key newkey`.
pub(crate) fn renamenx(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    rename(db, a, true)
}

/// `COPY source destination [DB 0] [REPLACE]` (one database: index 0).
pub(crate) fn copy(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let mut replace = false;
    let mut j = 3;
    while j < a.len() {
        if is(&a[j], "replace") {
            replace = true;
        } else if is(&a[j], "db") && j + 1 < a.len() {
            j += 1;
            if int(&a[j])? != 0 {
                return Err(Fail::new("ERR DB index is out of range"));
            }
        } else {
            return Err(Fail::new(ERR_SYNTAX));
        }
        j += 1;
    }
    if a[1] == a[2] {
        return Err(Fail::new("ERR source and destination objects are the same"));
    }
    Ok(Reply::Integer(i64::from(db.copy(&a[1], &a[2], replace)?)))
}

/// `FLUSHALL [ASYNC|SYNC]` and `FLUSHDB [ASYNC|SYNC]`.
pub(crate) fn flushall(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    match a.get(1) {
        _ if a.len() > 2 => return Err(Fail::new(ERR_SYNTAX)),
        Some(opt) if !is(opt, "sync") && !is(opt, "async") => return Err(Fail::new(ERR_SYNTAX)),
        _ => {}
    }
    db.flush_all()?;
    Ok(Reply::ok())
}
