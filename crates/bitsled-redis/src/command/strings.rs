//! GET, SET, SETNX, SETEX, PSETEX, GETSET, GETEX, MSET, MSETNX, STRLEN,
//! MGET, GETDEL, GETRANGE, SETRANGE, APPEND, INCR, DECR, INCRBY, DECRBY,
//! INCRBYFLOAT.

use super::args::{int, MAX_STRING_BYTES};
use super::expiry::{expiry_ms, string_options, TimeArg};
use super::notify::{emit, GENERIC, STRING};
use super::{longdouble, wrong_arity, CmdResult, Fail, Reply};
use bitsled::{Current, Db, Error, GetExpiry, SetCondition, SetExpiry, SetOptions};

/// `GET key`.
pub(crate) fn get(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Bulk(db.get(&a[1])?))
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

/// `GETDEL key`, atomically.
pub(crate) fn getdel(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let old = db.get_del(&a[1])?;
    if old.is_some() {
        emit(GENERIC, "del", &a[1]);
    }
    Ok(Reply::Bulk(old))
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
    let len = db.setrange(&a[1], offset, &a[3])?;
    if !a[3].is_empty() {
        emit(STRING, "setrange", &a[1]);
    }
    Ok(Reply::Integer(i64::try_from(len).unwrap_or(i64::MAX)))
}

/// `APPEND key value`.
pub(crate) fn append(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    check_length(db.strlen(&a[1])?, a[2].len())?;
    let len = db.append(&a[1], &a[2])?;
    emit(STRING, "append", &a[1]);
    Ok(Reply::Integer(i64::try_from(len).unwrap_or(i64::MAX)))
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`: the
/// check, the write and the old value (GET) are one atomic step.
pub(crate) fn set(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let o = string_options(&a[3..], false)?;
    let at = o.at(db, "set")?;
    let condition = if o.nx {
        SetCondition::IfAbsent
    } else if o.xx {
        SetCondition::IfPresent
    } else {
        SetCondition::Always
    };
    let expiry = match at {
        Some(at) => SetExpiry::At(at),
        None if o.keepttl => SetExpiry::Keep,
        None => SetExpiry::Clear,
    };
    let out = db.set_with(&a[1], &a[2], SetOptions { condition, expiry, get: o.get })?;
    if out.written {
        emit(STRING, "set", &a[1]);
        if at.is_some() {
            emit(GENERIC, "expire", &a[1]);
        }
    }
    Ok(match (o.get, out.written) {
        (true, _) => Reply::Bulk(out.old),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Bulk(None),
    })
}

/// `SETNX key value`: 1 if it set the key, 0 if the key existed.
pub(crate) fn setnx(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let opts = SetOptions { condition: SetCondition::IfAbsent, ..SetOptions::default() };
    let written = db.set_with(&a[1], &a[2], opts)?.written;
    if written {
        emit(STRING, "set", &a[1]);
    }
    Ok(Reply::Integer(i64::from(written)))
}

fn setex_generic(db: &Db, a: &[Vec<u8>], unit: TimeArg, command: &str) -> CmdResult {
    let at = expiry_ms(db, &a[2], unit, command)?;
    db.set_with_expiry(&a[1], &a[3], SetExpiry::At(at))?;
    emit(STRING, "set", &a[1]);
    emit(GENERIC, "expire", &a[1]);
    Ok(Reply::ok())
}

/// `SETEX key seconds value`.
pub(crate) fn setex(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    setex_generic(db, a, TimeArg::Seconds, "setex")
}

/// `PSETEX key milliseconds value`.
pub(crate) fn psetex(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    setex_generic(db, a, TimeArg::Millis, "psetex")
}

/// `GETSET key value`: SET with GET.
pub(crate) fn getset(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let opts = SetOptions { get: true, ..SetOptions::default() };
    let old = db.set_with(&a[1], &a[2], opts)?.old;
    emit(STRING, "set", &a[1]);
    Ok(Reply::Bulk(old))
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`.
pub(crate) fn getex(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let o = string_options(&a[2..], true)?;
    // Redis looks the key up before it checks the time.
    match db.key_type(&a[1])? {
        "none" => return Ok(Reply::Bulk(None)),
        "string" => {}
        _ => return Err(Error::WrongType.into()),
    }
    let expiry = match o.at(db, "getex")? {
        Some(at) => GetExpiry::At(at),
        None if o.persist => GetExpiry::Persist,
        None => GetExpiry::Keep,
    };
    let value = db.get_ex(&a[1], expiry)?;
    match expiry {
        GetExpiry::At(_) if value.is_some() => emit(GENERIC, "expire", &a[1]),
        GetExpiry::Persist if value.is_some() => emit(GENERIC, "persist", &a[1]),
        _ => {}
    }
    Ok(Reply::Bulk(value))
}

/// MSET and MSETNX: the pairs after the name, or the arity error for an
/// odd count.
/// (key, value) pairs.
type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

fn pairs<'a>(a: &'a [Vec<u8>], command: &str) -> Result<Pairs<'a>, Fail> {
    if a.len() % 2 == 0 {
        return Err(Fail::new(wrong_arity(command)));
    }
    Ok(a[1..].chunks_exact(2).map(|p| (p[0].as_slice(), p[1].as_slice())).collect())
}

/// `MSET key value [key value ...]`, atomically.
pub(crate) fn mset(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let pairs = pairs(a, "mset")?;
    db.set_many(&pairs, false)?;
    for (k, _) in &pairs {
        emit(STRING, "set", k);
    }
    Ok(Reply::ok())
}

/// `MSETNX key value [key value ...]`: all or none, 1 or 0.
pub(crate) fn msetnx(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let pairs = pairs(a, "msetnx")?;
    let written = db.set_many(&pairs, true)?;
    if written {
        for (k, _) in &pairs {
            emit(STRING, "set", k);
        }
    }
    Ok(Reply::Integer(i64::from(written)))
}

fn incr_generic(db: &Db, key: &[u8], delta: i64) -> CmdResult {
    let n = db.incr_by(key, delta)?;
    emit(STRING, "incrby", key);
    Ok(Reply::Integer(n))
}

/// `INCR key`.
pub(crate) fn incr(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    incr_generic(db, &a[1], 1)
}

/// `DECR key`.
pub(crate) fn decr(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    incr_generic(db, &a[1], -1)
}

/// `INCRBY key increment`.
pub(crate) fn incrby(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    incr_generic(db, &a[1], int(&a[2])?)
}

/// `DECRBY key decrement`.
pub(crate) fn decrby(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let d = int(&a[2])?;
    let neg = d.checked_neg().ok_or_else(|| Fail::new("ERR decrement would overflow"))?;
    incr_generic(db, &a[1], neg)
}

/// `INCRBYFLOAT key increment`, in Redis's `long double` arithmetic.
pub(crate) fn incrbyfloat(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    const NOT_A_FLOAT: &str = "value is not a valid float";
    let invalid = || Error::InvalidArgument(NOT_A_FLOAT.into());
    let incr = &a[2];
    let value = db.update_string(&a[1], 4096, |current| {
        let value = match current {
            Current::Missing => longdouble::parse(b"0"),
            Current::Value(v) => longdouble::parse(v),
            Current::TooLong => None,
        };
        let (Some(value), Some(incr)) = (value, longdouble::parse(incr)) else { return Err(invalid()) };
        let sum = match (value, incr) {
            (Ok(v), Ok(i)) => v.add(&i),
            _ => None,
        };
        let sum = sum.ok_or_else(|| Error::InvalidArgument("increment would produce NaN or Infinity".into()))?;
        let text = sum.to_human().into_bytes();
        Ok((text.clone(), text))
    })?;
    emit(STRING, "incrbyfloat", &a[1]);
    Ok(Reply::Bulk(Some(value)))
}
