//! BF.RESERVE, BF.ADD, BF.MADD, BF.EXISTS, BF.MEXISTS, BF.INSERT, BF.INFO,
//! BF.CARD, BF.SCANDUMP, BF.LOADCHUNK, with RedisBloom's argument rules and error texts (its
//! `src/rebloom.c`): some of its texts have no `ERR` code (`Bad capacity`,
//! `Nonscaling filters cannot expand`, ...) and are kept that way.

use super::args::{is, parse_i64};
use super::{wrong_arity, CmdResult, Fail, Reply};
use bitsled::bloom::{BloomAdd, BloomOptions, DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, DEFAULT_EXPANSION};
use bitsled::bloom::{ERROR_RATE_CAP, MAX_CAPACITY, MAX_EXPANSION};
use bitsled::Db;
use bitsled::Error;

const ERR_FULL: &str = "ERR non scaling filter is full";
const ERR_RATE_RANGE: &str = "ERR error rate must be in the range (0.000000, 1.000000)";

/// A double as Redis's `getDoubleFromObject` takes it: no leading blank,
/// the whole argument, not NaN.
fn parse_f64(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    if t.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    t.parse::<f64>().ok().filter(|v| !v.is_nan())
}

fn in_rate_range(e: f64) -> bool {
    e > 0.0 && e < 1.0
}

fn int(n: u64) -> Reply {
    Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The reply element of one add.
fn add_reply(r: BloomAdd) -> Reply {
    match r {
        BloomAdd::Added => Reply::Bool(true),
        BloomAdd::Exists => Reply::Bool(false),
        BloomAdd::Full => Reply::Error(ERR_FULL.into()),
    }
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]`.
///
/// As RedisBloom: 4 to 7 arguments; the rate is checked, then the capacity;
/// `NONSCALING` and `EXPANSION` are found anywhere in the arguments (the
/// first `EXPANSION` counts and its value follows it); `EXPANSION 0` means
/// non-scaling; extra arguments are ignored.
pub(crate) fn reserve(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 7 {
        return Err(Fail::new(wrong_arity("bf.reserve")));
    }
    let error_rate = parse_f64(&a[2]).ok_or_else(|| Fail::new("ERR bad error rate"))?;
    if !in_rate_range(error_rate) {
        return Err(Fail::new(ERR_RATE_RANGE));
    }
    let capacity = parse_i64(&a[3]).ok_or_else(|| Fail::new("ERR bad capacity"))?;
    let capacity = u64::try_from(capacity)
        .ok()
        .filter(|c| (1..=MAX_CAPACITY).contains(c))
        .ok_or_else(|| Fail::new(format!("ERR capacity must be in the range [1, {MAX_CAPACITY}]")))?;
    let mut nonscaling = a.iter().any(|x| is(x, "nonscaling"));
    let mut expansion = DEFAULT_EXPANSION;
    if let Some(at) = a.iter().position(|x| is(x, "expansion")) {
        let value = a.get(at + 1).ok_or_else(|| Fail::new("ERR no expansion"))?;
        let n = parse_i64(value).ok_or_else(|| Fail::new("ERR bad expansion"))?;
        if n == 0 {
            nonscaling = true;
        } else if nonscaling {
            return Err(Fail::new("Nonscaling filters cannot expand"));
        }
        expansion = u32::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_EXPANSION)
            .ok_or_else(|| Fail::new(format!("ERR expansion must be in the range [0, {MAX_EXPANSION}]")))?;
    }
    let options = BloomOptions { expansion, nonscaling };
    if db.bloom(&a[1]).reserve(error_rate, capacity, options)? {
        Ok(Reply::ok())
    } else {
        Err(Fail::new("ERR item exists"))
    }
}

/// `BF.ADD key item`: 1 if the item was new, 0 if it may exist.
pub(crate) fn add(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    match db.bloom(&a[1]).add(&a[2])? {
        BloomAdd::Full => Err(Fail::new(ERR_FULL)),
        r => Ok(add_reply(r)),
    }
}

/// `BF.MADD key item [item ...]`: one answer per item; a full non-scaling
/// filter ends the array with an error element.
pub(crate) fn madd(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(db.bloom(&a[1]).add_many(&a[2..])?.into_iter().map(add_reply).collect()))
}

/// RedisBloom's BF.EXISTS and BF.MEXISTS answer 0 for a key of another
/// type (its `BFCheck` treats any lookup failure as an empty filter).
fn contains_many(db: &Db, key: &[u8], items: &[Vec<u8>]) -> Result<Vec<bool>, Fail> {
    match db.bloom(key).contains_many(items) {
        Err(Error::WrongType) => Ok(vec![false; items.len()]),
        r => Ok(r?),
    }
}

/// `BF.EXISTS key item`.
pub(crate) fn exists(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let found = contains_many(db, &a[1], &a[2..3])?;
    Ok(Reply::Bool(found.first().copied().unwrap_or(false)))
}

/// `BF.MEXISTS key item [item ...]`.
pub(crate) fn mexists(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let found = contains_many(db, &a[1], &a[2..])?;
    Ok(Reply::Array(found.into_iter().map(Reply::Bool).collect()))
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item [item ...]`.
///
/// Options are told apart as RedisBloom's parser does, by their first
/// letters: `i…` starts the items, `er…` is the error rate, another `e…`
/// the expansion, `c…` the capacity, `n?c…` NOCREATE and another `n…`
/// NONSCALING; anything else is `Unknown argument received`.
pub(crate) fn insert(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let arity = || Fail::new(wrong_arity("bf.insert"));
    let mut error_rate = DEFAULT_ERROR_RATE;
    let mut capacity = DEFAULT_CAPACITY;
    let mut expansion = DEFAULT_EXPANSION;
    let mut nonscaling = false;
    let mut create = true;
    let mut items_at = None;
    let mut pos = 2;
    while pos < a.len() && items_at.is_none() {
        let arg = &a[pos];
        let letter = |i: usize| arg.get(i).map_or(0, u8::to_ascii_lowercase);
        match letter(0) {
            b'i' => {
                pos += 1;
                items_at = Some(pos);
            }
            b'e' => {
                let value = a.get(pos + 1).ok_or_else(arity)?;
                if letter(1) == b'r' {
                    error_rate = parse_f64(value)
                        .filter(|&e| in_rate_range(e))
                        .ok_or_else(|| Fail::new("Bad error rate"))?
                        .min(ERROR_RATE_CAP);
                } else {
                    expansion = parse_i64(value)
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|&n| n <= MAX_EXPANSION)
                        .ok_or_else(|| Fail::new("Bad expansion"))?;
                }
                pos += 2;
            }
            b'c' => {
                let value = a.get(pos + 1).ok_or_else(arity)?;
                capacity = parse_i64(value)
                    .and_then(|n| u64::try_from(n).ok())
                    .filter(|c| (1..=MAX_CAPACITY).contains(c))
                    .ok_or_else(|| Fail::new("Bad capacity"))?;
                pos += 2;
            }
            b'n' => {
                if letter(2) == b'c' {
                    create = false;
                } else {
                    nonscaling = true;
                }
                pos += 1;
            }
            _ => return Err(Fail::new("Unknown argument received")),
        }
    }
    let items = match items_at {
        Some(at) if at < a.len() => &a[at..],
        _ => return Err(arity()),
    };
    let options = BloomOptions { expansion, nonscaling: nonscaling || expansion == 0 };
    let added = db.bloom(&a[1]).insert(items, create.then_some((error_rate, capacity, options)))?;
    Ok(Reply::Array(added.into_iter().map(add_reply).collect()))
}

/// `BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION]`: the five figures
/// with their names (a map in RESP3, a flat array in RESP2, as RedisBloom
/// answers), or one of them as a one-element array. The expansion of a
/// non-scaling filter is nil.
pub(crate) fn info(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    if a.len() > 3 {
        return Err(Fail::new(wrong_arity("bf.info")));
    }
    let Some(i) = db.bloom(&a[1]).info()? else { return Err(Fail::new("ERR not found")) };
    let expansion = i.expansion.map_or(Reply::Bulk(None), |e| Reply::Integer(i64::from(e)));
    let fields = [
        ("Capacity", "capacity", int(i.capacity)),
        ("Size", "size", int(i.size)),
        ("Number of filters", "filters", int(i.filters)),
        ("Number of items inserted", "items", int(i.items)),
        ("Expansion rate", "expansion", expansion),
    ];
    if let Some(which) = a.get(2) {
        return match fields.into_iter().find(|(_, word, _)| is(which, word)) {
            Some((_, _, v)) => Ok(Reply::Array(vec![v])),
            None => Err(Fail::new("Invalid information value")),
        };
    }
    Ok(Reply::Map(fields.into_iter().map(|(name, _, v)| (Reply::Status(name.into()), v)).collect()))
}

/// `BF.CARD key`: items added; 0 for a missing key.
pub(crate) fn card(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    Ok(int(db.bloom(&a[1]).card()?))
}

/// `BF.SCANDUMP key iterator`: the next `[iterator, chunk]` pair of a
/// dump (`[0, ""]` when done; a negative iterator is past the end).
pub(crate) fn scandump(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let iter = parse_i64(&a[2]).ok_or_else(|| Fail::new("Second argument must be numeric"))?;
    let step = match u64::try_from(iter) {
        Ok(iter) => db.bloom(&a[1]).scandump(iter)?,
        Err(_) => db.bloom(&a[1]).info()?.map(|_| (0, Vec::new())),
    };
    let Some((next, chunk)) = step else { return Err(Fail::new("ERR not found")) };
    Ok(Reply::Array(vec![int(next), Reply::Bulk(Some(chunk))]))
}

/// `BF.LOADCHUNK key iterator chunk`: restores one chunk of a dump.
pub(crate) fn loadchunk(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let iter = parse_i64(&a[2]).ok_or_else(|| Fail::new("ERR Second argument must be numeric"))?;
    let iter = u64::try_from(iter).map_err(|_| Fail::new("ERR received bad data"))?;
    db.bloom(&a[1]).loadchunk(iter, &a[3])?;
    Ok(Reply::Status("OK".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rates parse as Redis's strtod-based parser takes them.
    #[test]
    fn doubles() {
        assert_eq!(parse_f64(b"0.01"), Some(0.01));
        assert_eq!(parse_f64(b"1e-3"), Some(0.001));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        for bad in [&b""[..], b" 0.1", b"0.1 ", b"nan", b"x", b"\xff"] {
            assert_eq!(parse_f64(bad), None, "{bad:?}");
        }
    }
}
