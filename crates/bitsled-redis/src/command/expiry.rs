//! EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME, PEXPIRETIME,
//! PERSIST, and the expiry options of SET.

use super::args::{int, is, ERR_SYNTAX};
use super::{CmdResult, Fail, Reply};
use bitsled::Db;
use bitsled::{ExpireCondition, Expiry};

/// How an expiry argument is given.
#[derive(Clone, Copy)]
pub(crate) enum TimeArg {
    /// Seconds from now (EXPIRE, SET EX).
    Seconds,
    /// Milliseconds from now (PEXPIRE, SET PX).
    Millis,
    /// Unix seconds (EXPIREAT, SET EXAT).
    UnixSeconds,
    /// Unix milliseconds (PEXPIREAT, SET PXAT).
    UnixMillis,
}

fn invalid_time(command: &str) -> Fail {
    Fail::new(format!("ERR invalid expire time in '{command}' command"))
}

/// The absolute time in Unix milliseconds of `when` given as `unit`, with
/// Redis's overflow checks; may be negative (already expired).
fn absolute_ms(db: &Db, when: i64, unit: TimeArg, command: &str) -> Result<i64, Fail> {
    let ms = match unit {
        TimeArg::Seconds | TimeArg::UnixSeconds => when.checked_mul(1000).ok_or_else(|| invalid_time(command))?,
        TimeArg::Millis | TimeArg::UnixMillis => when,
    };
    let base = match unit {
        TimeArg::Seconds | TimeArg::Millis => i64::try_from(db.now_ms()).unwrap_or(i64::MAX),
        TimeArg::UnixSeconds | TimeArg::UnixMillis => 0,
    };
    ms.checked_add(base).ok_or_else(|| invalid_time(command))
}

fn expire_generic(db: &Db, a: &[Vec<u8>], unit: TimeArg, command: &str) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &a[3..] {
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if is(opt, "gt") {
            gt = true;
        } else if is(opt, "lt") {
            lt = true;
        } else {
            let mut text = b"ERR Unsupported option ".to_vec();
            text.extend_from_slice(super::c_str(opt, usize::MAX));
            return Err(Fail(super::sanitize(text)));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Fail::new("ERR NX and XX, GT or LT options at the same time are not compatible"));
    }
    if gt && lt {
        return Err(Fail::new("ERR GT and LT options at the same time are not compatible"));
    }
    let when = absolute_ms(db, int(&a[2])?, unit, command)?;
    let condition = if nx {
        ExpireCondition::IfNone
    } else if xx && gt {
        // XX and GT together: GT already requires an expiry.
        ExpireCondition::IfLater
    } else if xx && lt {
        ExpireCondition::IfEarlier
    } else if xx {
        ExpireCondition::IfSome
    } else if gt {
        ExpireCondition::IfLater
    } else if lt {
        ExpireCondition::IfEarlier
    } else {
        ExpireCondition::Always
    };
    if xx && lt && matches!(db.expiry(&a[1])?, Expiry::Never) {
        return Ok(Reply::Integer(0));
    }
    // A negative time is in the past: the key is deleted, like any time
    // not after now.
    let at = u64::try_from(when).unwrap_or(0);
    let done = db.expire_at(&a[1], at, condition)?;
    if done {
        // A time not after now deletes the key.
        let event = if at <= db.now_ms() { "del" } else { "expire" };
        super::notify::emit(super::notify::GENERIC, event, &a[1]);
    }
    Ok(Reply::Integer(i64::from(done)))
}

/// `EXPIRE key seconds [NX|XX|GT|LT]`.
pub(crate) fn expire(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(db, a, TimeArg::Seconds, "expire")
}

/// `PEXPIRE key milliseconds [NX|XX|GT|LT]`.
pub(crate) fn pexpire(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(db, a, TimeArg::Millis, "pexpire")
}

/// `EXPIREAT key unix-seconds [NX|XX|GT|LT]`.
pub(crate) fn expireat(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(db, a, TimeArg::UnixSeconds, "expireat")
}

/// `PEXPIREAT key unix-milliseconds [NX|XX|GT|LT]`.
pub(crate) fn pexpireat(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(db, a, TimeArg::UnixMillis, "pexpireat")
}

/// Redis's TTL family: -2 missing, -1 no expiry, else the remaining time
/// (or the absolute time), in milliseconds or rounded seconds.
fn ttl_generic(db: &Db, key: &[u8], millis: bool, absolute: bool) -> CmdResult {
    let at = match db.expiry(key)? {
        Expiry::Missing => return Ok(Reply::Integer(-2)),
        Expiry::Never => return Ok(Reply::Integer(-1)),
        Expiry::At(at) => at,
    };
    let ms = if absolute { at } else { at.saturating_sub(db.now_ms()) };
    let out = if millis { ms } else { ms.saturating_add(500) / 1000 };
    Ok(Reply::Integer(i64::try_from(out).unwrap_or(i64::MAX)))
}

/// `TTL key`.
pub(crate) fn ttl(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(db, &a[1], false, false)
}

/// `PTTL key`.
pub(crate) fn pttl(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(db, &a[1], true, false)
}

/// `EXPIRETIME key`.
pub(crate) fn expiretime(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(db, &a[1], false, true)
}

/// `PEXPIRETIME key`.
pub(crate) fn pexpiretime(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(db, &a[1], true, true)
}

/// `PERSIST key`.
pub(crate) fn persist(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let removed = db.persist(&a[1])?;
    if removed {
        super::notify::emit(super::notify::GENERIC, "persist", &a[1]);
    }
    Ok(Reply::Integer(i64::from(removed)))
}

/// An expiry argument of SET, SETEX, PSETEX or GETEX checked like Redis
/// (`<= 0` or an overflow is "invalid expire time in '<command>'
/// command"), as Unix ms.
pub(crate) fn expiry_ms(db: &Db, value: &[u8], unit: TimeArg, command: &str) -> Result<u64, Fail> {
    let when = int(value)?;
    if when <= 0 {
        return Err(invalid_time(command));
    }
    let at = absolute_ms(db, when, unit, command)?;
    u64::try_from(at).map_err(|_| invalid_time(command))
}

/// The options of SET (after `key value`) or GETEX (after `key`).
#[derive(Default)]
pub(crate) struct StringOptions {
    pub(crate) nx: bool,
    pub(crate) xx: bool,
    pub(crate) get: bool,
    pub(crate) keepttl: bool,
    pub(crate) persist: bool,
    /// EX/PX/EXAT/PXAT and its argument, not yet checked.
    time: Option<(TimeArg, Vec<u8>)>,
}

impl StringOptions {
    /// The EX/PX/EXAT/PXAT time as Unix ms, checked (Redis checks it
    /// before SET's lookup, but after GETEX's).
    pub(crate) fn at(&self, db: &Db, command: &str) -> Result<Option<u64>, Fail> {
        self.time.as_ref().map(|(unit, value)| expiry_ms(db, value, *unit, command)).transpose()
    }
}

/// Parses SET's options (`getex`: GETEX's) with Redis's rules: NX, XX,
/// GET and KEEPTTL only for SET, PERSIST only for GETEX, one time unit
/// (repeatable, the last wins) and not with KEEPTTL or PERSIST.
pub(crate) fn string_options(opts: &[Vec<u8>], getex: bool) -> Result<StringOptions, Fail> {
    let mut o = StringOptions::default();
    let mut timed: Option<(TimeArg, &[u8])> = None;
    let mut i = 0;
    while i < opts.len() {
        let opt = &opts[i];
        let next = opts.get(i + 1);
        let unit = if is(opt, "ex") {
            Some(TimeArg::Seconds)
        } else if is(opt, "px") {
            Some(TimeArg::Millis)
        } else if is(opt, "exat") {
            Some(TimeArg::UnixSeconds)
        } else if is(opt, "pxat") {
            Some(TimeArg::UnixMillis)
        } else {
            None
        };
        if is(opt, "nx") && !o.xx && !getex {
            o.nx = true;
        } else if is(opt, "xx") && !o.nx && !getex {
            o.xx = true;
        } else if is(opt, "get") && !getex {
            o.get = true;
        } else if is(opt, "keepttl") && timed.is_none() && !getex {
            o.keepttl = true;
        } else if is(opt, "persist") && timed.is_none() && getex {
            o.persist = true;
        } else if let (Some(unit), Some(value)) = (unit, next) {
            // The same unit may repeat (the last wins); two units may not.
            let same = timed.is_none_or(|(u, _)| std::mem::discriminant(&u) == std::mem::discriminant(&unit));
            if o.keepttl || o.persist || !same {
                return Err(Fail::new(ERR_SYNTAX));
            }
            timed = Some((unit, value));
            i += 1;
        } else {
            return Err(Fail::new(ERR_SYNTAX));
        }
        i += 1;
    }
    o.time = timed.map(|(unit, value)| (unit, value.to_vec()));
    Ok(o)
}
