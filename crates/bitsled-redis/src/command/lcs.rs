//! `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`: the longest
//! common subsequence of two strings, as Redis 7.0 computes and reports it.
//!
//! The table is Redis's: `(len1 + 1) x (len2 + 1)` 32-bit lengths, refused
//! (as Redis refuses it) when it would pass `proto-max-bulk-len` (512 MiB).
//! The subsequence and the matched ranges come from one walk back from the
//! table's last cell, with Redis's tie-break (up when the cell above is
//! larger, else left), so the subsequence chosen, the ranges and their
//! order (from the strings' ends back to their starts) are Redis's.

use bitsled::{Db, Error};

use super::args::int;
use super::{CmdResult, Fail, Reply};

/// Redis's default `proto-max-bulk-len`: the largest table LCS builds.
const MAX_TABLE_BYTES: u64 = 512 << 20;

/// What LCS is asked to reply.
#[derive(Default)]
struct Options {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn options(a: &[Vec<u8>]) -> Result<Options, Fail> {
    let mut o = Options::default();
    let mut i = 3;
    while i < a.len() {
        let word = a[i].as_slice();
        if word.eq_ignore_ascii_case(b"IDX") {
            o.idx = true;
        } else if word.eq_ignore_ascii_case(b"LEN") {
            o.len = true;
        } else if word.eq_ignore_ascii_case(b"WITHMATCHLEN") {
            o.with_match_len = true;
        } else if word.eq_ignore_ascii_case(b"MINMATCHLEN") && i + 1 < a.len() {
            // A negative length means no minimum, as in Redis.
            o.min_match_len = u64::try_from(int(&a[i + 1])?).unwrap_or(0);
            i += 1;
        } else {
            return Err(Fail::new(super::args::ERR_SYNTAX));
        }
        i += 1;
    }
    Ok(o)
}

/// The value of `key` for LCS: empty when missing, refused when not a string.
fn string(db: &Db, key: &[u8]) -> Result<Vec<u8>, Fail> {
    match db.get(key) {
        Ok(v) => Ok(v.unwrap_or_default()),
        Err(Error::WrongType) => Err(Fail::new("ERR The specified keys must contain string values")),
        Err(e) => Err(e.into()),
    }
}

/// One matched range: inclusive byte ranges in each string.
#[derive(Debug, PartialEq, Eq)]
struct Match {
    a: (usize, usize),
    b: (usize, usize),
}

impl Match {
    fn len(&self) -> usize {
        self.a.1 - self.a.0 + 1
    }
}

/// The table of LCS lengths: `cell(i, j)` is the length for the first `i`
/// bytes of `a` and the first `j` of `b`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * width];
        for (i, &x) in a.iter().enumerate() {
            let (done, row) = cells.split_at_mut((i + 1) * width);
            let above = &done[i * width..];
            for (j, &y) in b.iter().enumerate() {
                row[j + 1] = if x == y { above[j] + 1 } else { above[j + 1].max(row[j]) };
            }
        }
        Table { cells, width }
    }

    fn cell(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }
}

/// The subsequence and the matched ranges (last first, as Redis lists
/// them), walking back from the table's last cell.
fn walk(table: &Table, a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Match>) {
    let mut seq = Vec::with_capacity(table.cell(a.len(), b.len()) as usize);
    let mut matches = Vec::new();
    let mut open: Option<Match> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let mut close = false;
        if a[i - 1] == b[j - 1] {
            seq.push(a[i - 1]);
            match &mut open {
                // Contiguous in both strings: the range grows backwards.
                Some(m) if m.a.0 == i && m.b.0 == j => {
                    m.a.0 -= 1;
                    m.b.0 -= 1;
                }
                Some(_) => close = true,
                None => open = Some(Match { a: (i - 1, i - 1), b: (j - 1, j - 1) }),
            }
            // A range reaching either string's first byte ends the walk.
            if open.as_ref().is_some_and(|m| m.a.0 == 0 || m.b.0 == 0) {
                close = true;
            }
            i -= 1;
            j -= 1;
        } else {
            if table.cell(i - 1, j) > table.cell(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            close = open.is_some();
        }
        if close {
            matches.extend(open.take());
        }
    }
    seq.reverse();
    (seq, matches)
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`.
pub(crate) fn lcs(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let (x, y) = (string(db, &a[1])?, string(db, &a[2])?);
    let o = options(a)?;
    if o.len && o.idx {
        return Err(Fail::new("ERR If you want both the length and indexes, please just use IDX."));
    }
    let cells = (x.len() as u64 + 1).saturating_mul(y.len() as u64 + 1);
    if cells.saturating_mul(4) > MAX_TABLE_BYTES {
        return Err(Fail::new("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"));
    }
    let table = Table::build(&x, &y);
    let total = i64::from(table.cell(x.len(), y.len()));
    if o.len {
        return Ok(Reply::Integer(total));
    }
    let (seq, matches) = walk(&table, &x, &y);
    if !o.idx {
        return Ok(Reply::bulk(seq));
    }
    let int = |n: usize| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    let ranges = matches
        .iter()
        .filter(|m| m.len() as u64 >= o.min_match_len)
        .map(|m| {
            let mut r = vec![Reply::Array(vec![int(m.a.0), int(m.a.1)]), Reply::Array(vec![int(m.b.0), int(m.b.1)])];
            if o.with_match_len {
                r.push(int(m.len()));
            }
            Reply::Array(r)
        })
        .collect();
    Ok(Reply::Map(vec![(Reply::bulk("matches"), Reply::Array(ranges)), (Reply::bulk("len"), Reply::Integer(total))]))
}

#[cfg(test)]
mod tests {
    use super::{walk, Match, Table};

    /// Redis's documented example: `ohmytext` and `mynewtext` share
    /// `mytext`, matched as `text` (4..7 / 5..8) and `my` (2..3 / 0..1).
    #[test]
    fn redis_example() {
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        let t = Table::build(a, b);
        assert_eq!(t.cell(a.len(), b.len()), 6);
        let (seq, matches) = walk(&t, a, b);
        assert_eq!(seq, b"mytext");
        assert_eq!(matches, [Match { a: (4, 7), b: (5, 8) }, Match { a: (2, 3), b: (0, 1) }]);
    }

    /// Empty inputs have an empty subsequence and no ranges.
    #[test]
    fn empty() {
        let t = Table::build(b"", b"abc");
        assert_eq!(walk(&t, b"", b"abc"), (Vec::new(), Vec::new()));
    }
}
