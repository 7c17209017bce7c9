//! SCAN, over a database's keys in hash order.
//!
//! The cursor is the library's: a position in the keys' hash order, below
//! 2^33 (so JavaScript clients that read it as a number keep it exact). It
//! stays valid across writes and restarts; every key present for the whole
//! iteration is returned at least once, and every call moves forward, so
//! an iteration always ends.

use super::args::{parse_i64, ERR_INT, ERR_SYNTAX};
use super::{CmdResult, Fail, Reply};
use bitsled::glob::glob_match;
use bitsled::Db;

/// Keys visited per call without COUNT (Redis's default).
const DEFAULT_COUNT: usize = 10;

/// Redis's cursor syntax (`strtoul` in base 10, read up to a NUL byte): no
/// leading blank, an optional sign (a negative number wraps), digits, and
/// nothing after them; the empty string is 0. Out of range is an error.
fn parse_cursor(s: &[u8]) -> Option<u64> {
    let s = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
    let (negative, digits) = match s.split_first() {
        None => return Some(0),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

/// Whether `s`, read as a C string, is `word` in any case.
fn c_is(s: &[u8], word: &str) -> bool {
    s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())].eq_ignore_ascii_case(word.as_bytes())
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: visits up to
/// COUNT keys after the cursor's position and replies the next cursor
/// (`0` when the iteration is complete) and those of them that match
/// MATCH and TYPE (so a reply may hold fewer keys, even none, before the
/// end). An unknown TYPE matches nothing, as in Redis 7.0.
pub(crate) fn scan(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let cursor = parse_cursor(&a[1]).ok_or_else(|| Fail::new("ERR invalid cursor"))?;
    let mut count = DEFAULT_COUNT;
    let mut pattern: Option<&[u8]> = None;
    let mut type_name: Option<&[u8]> = None;
    let mut i = 2;
    while i < a.len() {
        let has_value = i + 1 < a.len();
        if c_is(&a[i], "count") && has_value {
            let n = parse_i64(&a[i + 1]).ok_or_else(|| Fail::new(ERR_INT))?;
            if n < 1 {
                return Err(Fail::new(ERR_SYNTAX));
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if c_is(&a[i], "match") && has_value {
            pattern = Some(&a[i + 1]).filter(|p| p.as_slice() != b"*").map(Vec::as_slice);
        } else if c_is(&a[i], "type") && has_value {
            let t = &a[i + 1];
            type_name = Some(&t[..t.iter().position(|&c| c == 0).unwrap_or(t.len())]);
        } else {
            return Err(Fail::new(ERR_SYNTAX));
        }
        i += 2;
    }
    let (keys, next) = db.scan(cursor, count)?;
    let mut found = Vec::new();
    for k in keys {
        if pattern.is_some_and(|p| !glob_match(p, &k)) {
            continue;
        }
        if let Some(t) = type_name {
            // A key that went away meanwhile ("none") is not reported.
            let actual = db.key_type(&k)?;
            if actual == "none" || !t.eq_ignore_ascii_case(actual.as_bytes()) {
                continue;
            }
        }
        found.push(Reply::Bulk(Some(k)));
    }
    Ok(Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(found)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cursor syntax of Redis 7.0.15 (`strtoul` plus its checks).
    #[test]
    fn cursor_syntax() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+0"), Some(0));
        assert_eq!(parse_cursor(b"-0"), Some(0));
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"5\0x"), Some(5));
        for bad in [&b"x"[..], b" 0", b"0 ", b"\t1", b"+", b"-", b"18446744073709551616", b"1.0", b"0x1", b"+-1"] {
            assert_eq!(parse_cursor(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
