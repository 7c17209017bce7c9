//! Page delta records: the bits of stored pages that one write-back changed,
//! so that a page touched by a few SETBITs costs the store those bits
//! rather than a rewrite of the whole page (or of its group's record).
//!
//! A page whose changes since its stored record are few is *logged*: the
//! write-back writes the bits that differ from the version the store and
//! the earlier delta records already give (their XOR) instead of the page.
//! A logged page stays in the cache (it cannot be evicted: the store alone
//! would give an old version) until a *page fold* writes it whole. A fold
//! is spread over write-backs: each writes some of the pages that were
//! logged when the fold began, and records a *reset* of each in its own
//! delta record; later steps delete the records written before the fold
//! began, oldest first. Replay applies, for each page, only the flips recorded after its
//! last reset, onto the stored page (see DESIGN.md, section 5, "Page
//! deltas").
//!
//! The record (key `0x09 | write-back number | part`, see `layout.rs`):
//!
//! ```text
//!  0     1         5
//!  | ver | entries | entry ... | crc32 |
//! ```
//!
//! - 1 byte: version, 2 (version 1, written by format 10 and earlier, has
//!   no resets).
//! - 4 bytes: number of entries (u32 LE), at least 1.
//! - the entries, each: varint bitmap id; varint page number; varint, how
//!   many bits changed (0 to 32,768; 0, in version 2 only, is a reset: the
//!   store holds the page whole as of this write-back); the first changed
//!   bit's position in the page, then each next one's distance from the
//!   one before less 1 (positions strictly rise and stay below 32,768), as
//!   varints.
//! - 4 bytes: CRC-32 of everything before.
//!
//! Replaying an entry flips its bits in the page; one page appears at most
//! once in a record. A record holds at most about [`PART_BYTES`] bytes of
//! entries; a write-back with more writes parts 0, 1, ... under its number.

use super::entry::{seal_counted, sealed_body, Reader};
use super::layout::PAGE_DELTA_KEY_LEN;
use super::pages::PageId;
use crate::error::{Error, Result};
use crate::geometry::PAGE_BITS;
use crate::le::read_u32;
use crate::varint;

const VERSION: u8 = 2;
/// The version of format 10 and earlier: no resets.
const VERSION_1: u8 = 1;
const HEADER: usize = 5;
/// Bytes of entries after which a record is closed and the next part begun:
/// records stay far below the size sled moves to blob files.
pub(crate) const PART_BYTES: usize = 8192;

/// The page delta records in the store: all written since the last page
/// fold that deleted them.
#[derive(Default)]
pub(crate) struct PageLog {
    /// Their keys, in write-back order, and the bytes of each.
    pub(crate) keys: Vec<([u8; PAGE_DELTA_KEY_LEN], usize)>,
    /// Their bytes.
    pub(crate) bytes: usize,
    /// A page fold spread over write-backs, under way.
    pub(crate) folding: Option<Folding>,
    /// The records were replayed at open into pages that are dirty, not
    /// logged: the next write-back must fold (it could not log those
    /// pages against these records).
    pub(crate) fold_owed: bool,
    /// A caller that reads page records from the store (`key_stats`)
    /// asked the next write-back to fold, so the records are current.
    pub(crate) fold_asked: bool,
}

/// A page fold under way: the pages logged when it began that are still
/// to be written whole, and the records it deletes when they all are.
#[derive(Debug)]
pub(crate) struct Folding {
    /// Still to be written whole, the next one last.
    pub(crate) owed: Vec<PageId>,
    /// The records written before the fold began and not yet deleted: the
    /// first `older` of [`PageLog::keys`]. Once `owed` is empty, each step
    /// deletes some, oldest first; the fold ends when none is left.
    pub(crate) older: usize,
}

/// The changed bits of one page, or its reset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PageDelta {
    pub(crate) id: PageId,
    /// Page-relative positions, strictly rising, below [`PAGE_BITS`];
    /// none for a reset (the page was written whole by this write-back).
    pub(crate) flips: Vec<u16>,
}

impl PageDelta {
    /// Whether this entry is a reset: the store holds the page whole as of
    /// the record's write-back, so earlier flips no longer apply.
    pub(crate) fn is_reset(&self) -> bool {
        self.flips.is_empty()
    }
}

/// Collects the page deltas of one write-back into records.
#[derive(Default)]
pub(crate) struct PageDeltaWriter {
    done: Vec<Vec<u8>>,
    open: Vec<u8>,
    entries: u32,
}

impl PageDeltaWriter {
    /// Adds the flipped positions `flips` (strictly rising) of page `id`;
    /// none is a reset of the page (it is written whole by this
    /// write-back).
    pub(crate) fn add(&mut self, id: PageId, flips: &[u16]) {
        debug_assert!(flips.windows(2).all(|w| w[0] < w[1]));
        if self.open.is_empty() {
            self.open.push(VERSION);
            self.open.extend_from_slice(&[0; 4]);
        }
        varint::put(&mut self.open, id.0);
        varint::put(&mut self.open, id.1);
        varint::put(&mut self.open, flips.len() as u64);
        let mut prev: Option<u16> = None;
        for &f in flips {
            varint::put(&mut self.open, u64::from(prev.map_or(f, |p| f - p - 1)));
            prev = Some(f);
        }
        self.entries += 1;
        if self.open.len() >= PART_BYTES {
            self.close();
        }
    }

    fn close(&mut self) {
        if self.entries == 0 {
            return;
        }
        self.done.push(seal_counted(std::mem::take(&mut self.open), self.entries));
        self.entries = 0;
    }

    /// The records, in part order.
    pub(crate) fn finish(mut self) -> Vec<Vec<u8>> {
        self.close();
        self.done
    }
}

/// Parses and validates a page delta record (`what` names it in errors:
/// its key).
///
/// # Errors
/// [`Error::Corrupted`] for any damage; never panics.
pub(crate) fn decode(what: &str, b: &[u8]) -> Result<Vec<PageDelta>> {
    let bad = |reason: String| Error::Corrupted {
        key: format!("<page delta {what}>"),
        page: None,
        reason: format!("page delta: {reason}"),
    };
    // The version byte is checked after the checksum.
    let version = if b.first() == Some(&VERSION_1) { VERSION_1 } else { VERSION };
    let body = sealed_body(b, HEADER, version, &bad)?;
    let count = read_u32(body, 1);
    if count == 0 {
        return Err(bad("no entries".into()));
    }
    let mut r = Reader { b: body, at: HEADER };
    // Each entry takes at least 4 bytes: no allocation from a bad count.
    let mut out: Vec<PageDelta> = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(body.len() / 4));
    for _ in 0..count {
        let id = (r.varint(&bad)?, r.varint(&bad)?);
        if out.iter().rev().take_while(|d| d.id.0 == id.0).any(|d| d.id == id) {
            return Err(bad(format!("page {id:?} twice")));
        }
        let n = r.varint(&bad)?;
        if (n == 0 && version == VERSION_1) || n > PAGE_BITS {
            return Err(bad(format!("page {id:?}: {n} changed bits")));
        }
        // Each position takes at least a byte: no allocation beyond the record.
        let mut flips = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(body.len() - r.at));
        let mut next = 0u64;
        for _ in 0..n {
            let pos = next.checked_add(r.varint(&bad)?).filter(|&p| p < PAGE_BITS);
            let Some(pos) = pos else {
                return Err(bad(format!("page {id:?}: a position past the page")));
            };
            flips.push(u16::try_from(pos).map_err(|_| bad("position beyond 16 bits".into()))?);
            next = pos + 1;
        }
        out.push(PageDelta { id, flips });
    }
    if r.at != body.len() {
        return Err(bad(format!("{} bytes after the last entry", body.len() - r.at)));
    }
    Ok(out)
}

/// Encodes `deltas` as records (for tests and the fuzz target's round trip).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn encode(deltas: &[PageDelta]) -> Vec<Vec<u8>> {
    let mut w = PageDeltaWriter::default();
    for d in deltas {
        w.add(d.id, &d.flips);
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries of `pages` pages, every eleventh a reset.
    fn sample(pages: u64) -> Vec<PageDelta> {
        (0..pages)
            .map(|i| PageDelta {
                id: (i / 3 + 1, i * 7),
                flips: (0..(i % 40 + 1))
                    .filter(|_| i % 11 != 5)
                    .map(|j| u16::try_from((j * 811 + i) % 32_768).unwrap())
                    .collect(),
            })
            .map(|mut d| {
                d.flips.sort_unstable();
                d.flips.dedup();
                d
            })
            .collect()
    }

    /// What is written decodes back to the same entries, in order, split
    /// into parts once a record passes its size.
    #[test]
    fn page_deltas_round_trip_across_parts() {
        let deltas = sample(2000);
        let records = encode(&deltas);
        assert!(records.len() > 1, "{} records", records.len());
        assert!(records.iter().all(|r| r.len() < PART_BYTES + 200));
        let back: Vec<PageDelta> = records.iter().flat_map(|r| decode("t", r).unwrap()).collect();
        assert_eq!(back, deltas);
        let edge = vec![
            PageDelta { id: (u64::MAX, u64::MAX), flips: vec![0, 1, 32_767] },
            PageDelta { id: (7, 3), flips: vec![] },
        ];
        assert_eq!(decode("t", &encode(&edge)[0]).unwrap(), edge);
    }

    /// Every flipped bit and every truncation of a record is an error,
    /// never a panic or a wrong answer.
    #[test]
    fn damaged_page_deltas_are_errors() {
        let record = encode(&sample(30)).remove(0);
        for i in 0..record.len() * 8 {
            let mut b = record.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(decode("t", &b).is_err(), "bit {i}");
        }
        for n in 0..record.len() {
            assert!(decode("t", &record[..n]).is_err(), "{n} bytes");
        }
    }

    /// Records that carry a valid checksum but break a rule are refused.
    #[test]
    fn malformed_page_deltas_are_errors() {
        let seal = |mut b: Vec<u8>| {
            let crc = crc32fast::hash(&b);
            b.extend_from_slice(&crc.to_le_bytes());
            b
        };
        let versioned = |version: u8, count: u32, body: &[u8]| {
            let mut b = vec![version];
            b.extend_from_slice(&count.to_le_bytes());
            b.extend_from_slice(body);
            seal(b)
        };
        let entry = |count: u32, body: &[u8]| versioned(VERSION, count, body);
        // No bits is a reset in version 2 and damage in version 1.
        assert_eq!(decode("t", &entry(1, &[1, 2, 0])).unwrap(), vec![PageDelta { id: (1, 2), flips: vec![] }]);
        assert!(decode("t", &versioned(VERSION_1, 1, &[1, 2, 0])).is_err());
        assert_eq!(
            decode("t", &versioned(VERSION_1, 1, &[1, 2, 1, 5])).unwrap(),
            vec![PageDelta { id: (1, 2), flips: vec![5] }],
            "version 1 records still decode"
        );
        assert!(decode("t", &versioned(3, 1, &[1, 2, 1, 5])).is_err(), "an unknown version");
        // No entries; a page twice (a reset and flips too); a position
        // past the page; a count beyond the entries.
        for (count, body) in [
            (0, &[][..]),
            (2, &[1, 2, 1, 5, 1, 2, 1, 6][..]),
            (2, &[1, 2, 0, 1, 2, 1, 6][..]),
            (1, &[1, 2, 2, 0xff, 0xff, 0x01, 0][..]),
            (1, &[1, 2, 2, 0x80, 0x80, 0x02, 0][..]),
            (2, &[1, 2, 1, 5][..]),
        ] {
            assert!(decode("t", &entry(count, body)).is_err(), "{count} {body:?}");
        }
        assert_eq!(
            decode("t", &entry(1, &[1, 2, 2, 5, 0])).unwrap(),
            vec![PageDelta { id: (1, 2), flips: vec![5, 6] }]
        );
    }
}
