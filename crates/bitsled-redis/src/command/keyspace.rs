//! DEL, EXISTS, TOUCH, TYPE, KEYS, RANDOMKEY, DBSIZE, PING, ECHO, TIME,
//! RENAME, RENAMENX, COPY, MOVE, SWAPDB, FLUSHALL, FLUSHDB.

use super::args::{int32, is, ERR_SYNTAX};
use super::notify::{emit, emit_in, GENERIC};
use super::{wrong_arity, CmdResult, Fail, Reply};
use bitsled::Db;

fn count(n: usize) -> Reply {
    Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `DEL key...` and `UNLINK key...`: the number of keys removed.
pub(crate) fn del(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in &a[1..] {
        if db.delete(k)? {
            n += 1;
            emit(GENERIC, "del", k);
        }
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

/// `KEYS pattern`, in key hash order (Redis's order is its hash table's).
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
    if done && a[1] != a[2] {
        emit(GENERIC, "rename_from", &a[1]);
        emit(GENERIC, "rename_to", &a[2]);
    }
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

/// A database index argument (SELECT, MOVE, COPY DB, SWAPDB): an
/// integer within 32 bits (`range_err` replaces that error's text), then an
/// existing database ("DB index is out of range").
pub(crate) fn db_index(db: &Db, arg: &[u8], range_err: Option<&str>) -> Result<u32, Fail> {
    let n = int32(arg, range_err)?;
    u32::try_from(n).ok().filter(|&n| n < db.databases()).ok_or_else(|| Fail::new("ERR DB index is out of range"))
}

/// `COPY source destination [DB destination-db] [REPLACE]`.
pub(crate) fn copy(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let mut replace = false;
    let mut dest = db.index();
    let mut j = 3;
    while j < a.len() {
        if is(&a[j], "replace") {
            replace = true;
        } else if is(&a[j], "db") && j + 1 < a.len() {
            j += 1;
            dest = db_index(db, &a[j], None)?;
        } else {
            return Err(Fail::new(ERR_SYNTAX));
        }
        j += 1;
    }
    if dest == db.index() && a[1] == a[2] {
        return Err(Fail::new("ERR source and destination objects are the same"));
    }
    let copied = db.copy_to(&a[1], &db.select(dest)?, &a[2], replace)?;
    if copied {
        emit_in(GENERIC, "copy_to", &a[2], Some(dest));
    }
    Ok(Reply::Integer(i64::from(copied)))
}

/// `MOVE key db`: 1 if moved; 0 if missing here or present there.
pub(crate) fn move_key(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let to = db_index(db, &a[2], None)?;
    if to == db.index() {
        return Err(Fail::new("ERR source and destination objects are the same"));
    }
    let moved = db.move_key(&a[1], to)?;
    if moved {
        emit(GENERIC, "move_from", &a[1]);
        emit_in(GENERIC, "move_to", &a[1], Some(to));
    }
    Ok(Reply::Integer(i64::from(moved)))
}

/// `SWAPDB index1 index2`.
pub(crate) fn swapdb(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let first = int32(&a[1], None).map_err(|_| Fail::new("ERR invalid first DB index"))?;
    let second = int32(&a[2], None).map_err(|_| Fail::new("ERR invalid second DB index"))?;
    let valid = |n: i64| u32::try_from(n).ok().filter(|&n| n < db.databases());
    let (Some(first), Some(second)) = (valid(first), valid(second)) else {
        return Err(Fail::new("ERR DB index is out of range"));
    };
    db.swap_db(first, second)?;
    Ok(Reply::ok())
}

/// The flush mode argument of FLUSHALL and FLUSHDB (both modes are O(1)
/// here: the old keys are reclaimed in the background either way).
fn flush_mode(a: &[Vec<u8>]) -> Result<(), Fail> {
    match a.get(1) {
        _ if a.len() > 2 => Err(Fail::new(ERR_SYNTAX)),
        Some(opt) if !is(opt, "sync") && !is(opt, "async") => Err(Fail::new(ERR_SYNTAX)),
        _ => Ok(()),
    }
}

/// `FLUSHALL [ASYNC|SYNC]`: every database.
pub(crate) fn flushall(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    flush_mode(a)?;
    db.flush_all()?;
    Ok(Reply::ok())
}

/// `FLUSHDB [ASYNC|SYNC]`: the selected database.
pub(crate) fn flushdb(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    flush_mode(a)?;
    db.flush_db()?;
    Ok(Reply::ok())
}

/// `TOUCH key...`: how many exist; each counts as used (OBJECT IDLETIME).
pub(crate) fn touch(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let mut n = 0i64;
    for k in &a[1..] {
        n += i64::from(db.touch(k)?);
    }
    Ok(Reply::Integer(n))
}

/// `RANDOMKEY`: a key of the database, nil if it is empty.
pub(crate) fn randomkey(db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Bulk(db.random_key()?))
}

/// `TIME`: Unix seconds and microseconds.
pub(crate) fn time(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Ok(Reply::Array(vec![Reply::bulk(now.as_secs().to_string()), Reply::bulk(now.subsec_micros().to_string())]))
}
