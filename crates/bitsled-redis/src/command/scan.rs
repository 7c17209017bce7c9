//! SCAN, over keys in byte order.
//!
//! A cursor names the last key a previous call returned. bitsled keeps the
//! key itself in a small in-process table under an opaque number, and hands
//! out the number: the next call continues strictly after that key, so
//! every key that exists during the whole iteration is returned exactly
//! once whatever is added or removed meanwhile (byte order does not move
//! when the keyspace changes, unlike a hash table).
//!
//! The table is bounded (oldest cursors are forgotten first) and does not
//! survive a restart. A cursor it does not know, such as a forgotten one or
//! one made up by the client, starts the iteration over: keys may then be
//! returned twice, which SCAN allows, but none is skipped.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use parking_lot::Mutex;

use super::args::{parse_i64, ERR_INT, ERR_SYNTAX};
use super::{CmdResult, Fail, Reply};
use bitsled::glob::glob_match;
use bitsled::Db;

/// At most this many cursors are remembered.
const MAX_CURSORS: usize = 65_536;
/// At most this many bytes of key names are remembered (a single longer
/// key is still kept, alone).
const MAX_CURSOR_BYTES: usize = 64 << 20;
/// Keys visited per call without COUNT (Redis's default).
const DEFAULT_COUNT: usize = 10;

/// Where a cursor continues: after key `after` of the database at `db`.
struct Position {
    db: PathBuf,
    after: Vec<u8>,
}

/// The cursor table: positions by number, and the numbers oldest first.
struct Cursors {
    positions: HashMap<u64, Position>,
    order: VecDeque<u64>,
    bytes: usize,
    next: u64,
}

impl Cursors {
    fn new() -> Cursors {
        // Start at a random number, so that a cursor from an earlier process
        // is very unlikely to name a position of this one.
        let seed = RandomState::new().hash_one(std::process::id());
        Cursors { positions: HashMap::new(), order: VecDeque::new(), bytes: 0, next: seed }
    }

    /// The position of cursor `n` in database `db`, if known.
    fn get(&self, n: u64, db: &Path) -> Option<Vec<u8>> {
        self.positions.get(&n).filter(|p| p.db == db).map(|p| p.after.clone())
    }

    /// Remembers a position and returns its cursor: a number in
    /// `1 .. 2^63` (so clients reading it as a signed integer are fine)
    /// that names no other remembered position.
    fn insert(&mut self, db: &Path, after: Vec<u8>) -> u64 {
        let size = after.len() + db.as_os_str().len();
        while !self.order.is_empty() && (self.order.len() >= MAX_CURSORS || self.bytes + size > MAX_CURSOR_BYTES) {
            if let Some(old) = self.order.pop_front() {
                if let Some(p) = self.positions.remove(&old) {
                    self.bytes -= p.after.len() + p.db.as_os_str().len();
                }
            }
        }
        let n = loop {
            self.next = self.next.wrapping_add(1) & (u64::MAX >> 1);
            if self.next != 0 && !self.positions.contains_key(&self.next) {
                break self.next;
            }
        };
        self.positions.insert(n, Position { db: db.to_path_buf(), after });
        self.order.push_back(n);
        self.bytes += size;
        n
    }
}

fn cursors() -> &'static Mutex<Cursors> {
    static CURSORS: OnceLock<Mutex<Cursors>> = OnceLock::new();
    CURSORS.get_or_init(|| Mutex::new(Cursors::new()))
}

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
    let after = if cursor == 0 { None } else { cursors().lock().get(cursor, db.path()) };
    let (keys, next) = db.scan(after.as_deref(), count)?;
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
    let next = match next {
        Some(after) => cursors().lock().insert(db.path(), after),
        None => 0,
    };
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

    /// The table forgets the oldest cursors first and never reuses a
    /// remembered number; a cursor of another database is unknown.
    #[test]
    fn table_is_bounded() {
        let mut t = Cursors::new();
        let db = Path::new("/db");
        let first = t.insert(db, b"k0".to_vec());
        assert_eq!(t.get(first, db), Some(b"k0".to_vec()));
        assert_eq!(t.get(first, Path::new("/other")), None);
        for i in 1..=MAX_CURSORS {
            let n = t.insert(db, format!("k{i}").into_bytes());
            assert!(n != 0 && n < 1 << 63);
        }
        assert_eq!(t.positions.len(), MAX_CURSORS);
        assert_eq!(t.order.len(), MAX_CURSORS);
        assert_eq!(t.get(first, db), None, "oldest forgotten");
        let huge = vec![b'x'; MAX_CURSOR_BYTES];
        let n = t.insert(db, huge);
        assert_eq!(t.positions.len(), 1, "a huge key evicts everything else");
        assert!(t.get(n, db).is_some());
        assert!(t.bytes <= MAX_CURSOR_BYTES + 3);
    }
}
