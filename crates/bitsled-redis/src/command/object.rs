//! OBJECT and MEMORY: what Redis reports about a value's representation,
//! answered with Redis's own rules where they apply to the bytes alone.
//!
//! OBJECT ENCODING follows Redis's choice for a value written whole: `int`
//! for an integer (in Redis's form) of at most 20 characters, `embstr` up
//! to 44 bytes, `raw` beyond, and `raw` for HyperLogLogs and Bloom
//! filters; `raw` for a value last changed in place by SETBIT, APPEND or
//! SETRANGE (`Db::changed_in_place`), as Redis says. IDLETIME is the time since the key was last used
//! (`Db::idle_time`; ENCODING and REFCOUNT read the value, so they count as
//! a use, where Redis's do not); frequencies are not tracked: FREQ answers
//! Redis's error for a server without an LFU policy.

use super::args::{int, is, ERR_SYNTAX};
use super::{CmdResult, Fail, Reply};
use bitsled::Db;

/// Redis's shared integers: `0 ..= 9999` have this reference count.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
const SHARED_INTEGERS: i64 = 10_000;

/// How Redis would represent the value of `key`, or `None` if missing.
enum Encoding {
    Int(i64),
    Embstr,
    Raw,
}

fn encoding_of(db: &Db, key: &[u8]) -> Result<Option<Encoding>, Fail> {
    match db.key_type(key)? {
        "none" => return Ok(None),
        "string" => {}
        _ => return Ok(Some(Encoding::Raw)),
    }
    if db.changed_in_place(key)? == Some(true) {
        // Redis's string after SETBIT, SETRANGE or APPEND.
        return Ok(Some(Encoding::Raw));
    }
    let len = db.strlen(key)?;
    if len <= 20 {
        let v = db.get(key)?.unwrap_or_default();
        if let Some(n) = bitsled::parse_integer(&v) {
            return Ok(Some(Encoding::Int(n)));
        }
    }
    if len >= 4 && db.getrange(key, 0, 3)? == b"HYLL" {
        return Ok(Some(Encoding::Raw));
    }
    Ok(Some(if len <= 44 { Encoding::Embstr } else { Encoding::Raw }))
}

/// `OBJECT ENCODING key`.
pub(crate) fn encoding(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Bulk(encoding_of(db, &a[2])?.map(|e| {
        match e {
            Encoding::Int(_) => "int",
            Encoding::Embstr => "embstr",
            Encoding::Raw => "raw",
        }
        .into()
    })))
}

/// `OBJECT REFCOUNT key`: Redis shares the integers 0 to 9999.
pub(crate) fn refcount(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(match encoding_of(db, &a[2])? {
        None => Reply::Bulk(None),
        Some(Encoding::Int(n)) if (0..SHARED_INTEGERS).contains(&n) => Reply::Integer(SHARED_REFCOUNT),
        Some(_) => Reply::Integer(1),
    })
}

/// `OBJECT IDLETIME key`: seconds since the key was last used
/// ([`Db::idle_time`]).
pub(crate) fn idletime(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(match db.idle_time(&a[2])? {
        Some(s) => Reply::Integer(i64::try_from(s).unwrap_or(i64::MAX)),
        None => Reply::Bulk(None),
    })
}

/// `OBJECT FREQ key`: Redis's error for a server without an LFU policy.
pub(crate) fn freq(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    if !db.exists(&a[2])? {
        return Ok(Reply::Bulk(None));
    }
    Err(Fail::new(
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
         switching between policies at runtime LRU and LFU data will take some time to adjust.",
    ))
}

fn help(lines: &[&str]) -> CmdResult {
    Ok(Reply::Array(lines.iter().map(|l| Reply::Status((*l).into())).collect()))
}

/// `OBJECT HELP`.
pub(crate) fn object_help(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    help(&[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ])
}

/// `MEMORY USAGE key [SAMPLES count]`: the bytes the key takes in the
/// store (its metadata entry and encoded pages); nil if missing.
pub(crate) fn memory_usage(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    match &a[3..] {
        [] => {}
        [opt, n] if is(opt, "samples") => {
            int(n)?;
        }
        _ => return Err(Fail::new(ERR_SYNTAX)),
    }
    Ok(match db.memory_usage(&a[2])? {
        Some(n) => Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX)),
        None => Reply::Bulk(None),
    })
}

/// `MEMORY DOCTOR`: what bitsled can say about its memory.
pub(crate) fn memory_doctor(db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    let m = db.memory_stats();
    let text = format!(
        "bitsled keeps its data on disk; memory holds caches within their budgets. Now: {} bytes of cached pages \
         ({} waiting to be written), {} bytes of cached metadata ({} changed since its last fold), a budget of {} \
         bytes (cache, pending writes and the store's cache). No problems to report.",
        m.page_cache_bytes, m.dirty_page_bytes, m.metadata_cache_bytes, m.dirty_metadata_bytes, m.budget_bytes
    );
    Ok(Reply::bulk(text))
}

/// `MEMORY MALLOC-STATS`: as Redis answers without jemalloc.
pub(crate) fn memory_malloc_stats(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::bulk("Stats not supported for the current allocator"))
}

/// `MEMORY PURGE`: writes changes back and evicts the caches down to their
/// budgets ([`Db::release_memory`]).
pub(crate) fn memory_purge(db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    db.release_memory()?;
    Ok(Reply::ok())
}

/// `MEMORY HELP`.
pub(crate) fn memory_help(_db: &Db, _a: &[Vec<u8>]) -> CmdResult {
    help(&[
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
        "HELP",
        "    Prints this help.",
    ])
}
