//! Test and fuzz support for bitsled's internals.
//!
//! **Not a stable API**: hidden from the documentation and used only by the
//! integration tests, the benchmarks and the fuzz targets, which cannot reach
//! crate-private types. The `check_*` functions panic with a message naming
//! the broken invariant; that is what the fuzzers look for.

use crate::geometry::{PAGE_BYTES, PAGE_WORDS};

/// The page geometry, for tests and benchmarks that place offsets at page
/// edges.
pub use crate::geometry::PAGE_BITS;
use crate::page::check::{self, Words};
use crate::page::{peek_header, Page};

pub use crate::page::{Encoding, PageError};

/// A database over a store that fails on command (see
/// `crates/bitsled-testkit`'s `fault_check`).
pub use crate::engine::fault::{open_faulty, open_with_faults, Faults};

/// The on-disk format version this build writes (byte 8 of the
/// superblock, DESIGN.md section 3).
pub const FORMAT_VERSION: u8 = crate::engine::record::FORMAT_VERSION;

/// Opens the sled database of a closed store directly (to damage or
/// inspect its records), waiting up to 2 s for a handle just dropped to let
/// go of the directory's lock.
///
/// # Errors
/// sled's error if it does not open.
pub fn open_raw_store(dir: &std::path::Path) -> Result<sled::Db, sled::Error> {
    crate::engine::store::open_raw(dir)
}

/// Runs every HyperLogLog sketch operation on arbitrary bytes (byte 0 picks
/// the elements added; the rest is a stored value, as is and behind a valid
/// header): each must return `Ok` or `Err` and keep its invariants. Panics
/// only on a bug.
pub fn check_hll_value(data: &[u8]) {
    crate::hll::check::check_hll_value(data);
}

/// Reads arbitrary bytes as a serialized Roaring bitmap of both formats:
/// must never panic, and a 32-bit bitmap accepted must be the one the
/// `roaring` crate reads. Panics only on a bug.
#[cfg(feature = "roaring")]
pub fn check_roaring_parse(data: &[u8]) {
    crate::ops::roaring::check_parse(data);
}

/// Decodes arbitrary bytes as a metadata bucket, a keyspace catalog and
/// the other records of `engine::check_record_decode`, as the chunks of
/// BF.LOADCHUNK, and as a small Bloom filter; must never panic, and what
/// decodes must round trip.
pub fn check_record_decode(data: &[u8]) {
    crate::engine::check_record_decode(data);
    // The chunks of BF.LOADCHUNK, as they come and with their CRC trailer
    // recomputed.
    let mut sealed = data.to_vec();
    crate::page::check::reseal(&mut sealed);
    for bytes in [data, &sealed[..]] {
        crate::ops::bloom::dump::check_chunk_decode(bytes);
    }
    if let Ok(s) = crate::bloom::small::Small::decode(data) {
        assert_eq!(s.encode(), data, "a small Bloom filter decodes from one form only");
    }
}

/// Decodes arbitrary bytes as a stored page and as a page group record;
/// must never panic.
///
/// If the bytes decode as a page, the page must satisfy its invariants,
/// agree with `peek_header`, and round trip through every encoding; if
/// they decode as a group, every member must too (`check_group_once`). The bytes are then
/// tried again with their checksum trailer recomputed, so that random input
/// also reaches the structural validation behind the checksum.
pub fn check_page_decode(bytes: &[u8]) {
    check_decode_once(bytes);
    check_group_once(bytes);
    if bytes.len() >= 6 {
        let mut sealed = bytes.to_vec();
        reseal(&mut sealed);
        check_decode_once(&sealed);
        check_group_once(&sealed);
    }
}

/// The members of a page group record as (slot, page record) pairs, each
/// page record as a page of its own would be stored.
///
/// # Errors
/// If the group record or a member does not decode.
pub fn split_group_record(bytes: &[u8]) -> Result<Vec<(u8, Vec<u8>)>, PageError> {
    crate::page::decode_group(bytes).map(|pages| pages.into_iter().map(|(slot, p)| (slot, p.encode())).collect())
}

/// A group record holding `members`: (slot, page record) pairs with
/// strictly increasing slots below 64, each record small enough to join a
/// group.
///
/// # Panics
/// If a record does not decode or is too large to join a group.
pub fn encode_group_record(members: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let members: Vec<_> = members
        .iter()
        .map(|(slot, record)| {
            crate::page::Member::of_record(*slot, record).expect("a page record").expect("small enough to join")
        })
        .collect();
    crate::page::encode_group(&members)
}

/// A group record that splits must decode member by member to what
/// `decode_group` gives, re-encode to the same bytes, and list its slots
/// in increasing order; one that does not split must not decode either.
fn check_group_once(bytes: &[u8]) {
    use crate::page::{decode_group, encode_group, split_group};
    let Ok(members) = split_group(bytes) else {
        assert!(decode_group(bytes).is_err(), "a group that does not split does not decode");
        return;
    };
    assert!(members.windows(2).all(|w| w[0].slot < w[1].slot), "slots increase");
    // Re-encoding writes the current group version; all else is the same
    // bytes (a version 1 record differs in its version byte and checksum).
    let again = encode_group(&members);
    assert_eq!(again[0], crate::page::GROUP_FORMAT_VERSION, "a group is written in the current version");
    let body = |b: &[u8]| b.get(1..b.len().saturating_sub(4)).map(<[u8]>::to_vec);
    assert_eq!(body(&again), body(bytes), "a group's members re-encode to its bytes");
    let decoded: Result<Vec<_>, _> = members.iter().map(|m| m.page().map(|p| (m.slot, p))).collect();
    match (decoded, decode_group(bytes)) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "member by member decodes as the whole group");
            for (_, page) in &a {
                check::check_invariants(page, "group member");
                assert!(!page.is_empty(), "an empty page is never a member");
            }
        }
        (Err(_), Err(_)) => {}
        (a, b) => panic!("member decoding and group decoding disagree: {a:?} vs {b:?}"),
    }
}

fn check_decode_once(bytes: &[u8]) {
    let header = peek_header(bytes);
    match Page::decode(bytes) {
        Ok(page) => {
            let ctx = "decoded page";
            check::check_invariants(&page, ctx);
            assert_eq!(header, Ok((page.encoding(), page.count_ones())), "{ctx}: peek_header agrees with decode");
            assert!(!page.is_empty(), "{ctx}: an empty page never decodes");
            check::check_codec(&page, ctx);
        }
        Err(e) => {
            assert!(!e.0.is_empty(), "decode errors carry a message");
        }
    }
}

pub use crate::page::check::reseal;

/// Interprets `data` as a recipe for two pages and some probe bits, then
/// checks every page operation in every representation against a plain
/// word-array model, including encode/decode round trips.
///
/// Recipe: byte 0 selects how each page is built (bits 0-1 for the first,
/// bits 2-3 for the second: positions, scattered words, word runs or Redis
/// bytes; bit 4 starts scattered words from a full page). The rest is split in
/// two halves, one per page; the first 16 bytes of it also give probe bits.
pub fn check_page_roundtrip(data: &[u8]) {
    let Some((&select, rest)) = data.split_first() else {
        return;
    };
    let (da, db) = rest.split_at(rest.len() / 2);
    let full_base = select & 0x10 != 0;
    let ma = model_from_recipe(select & 3, full_base, da);
    let mb = model_from_recipe((select >> 2) & 3, full_base, db);
    let probes: Vec<u32> = rest
        .chunks_exact(2)
        .take(8)
        .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])) % (crate::geometry::PAGE_BITS as u32 + 1))
        .collect();
    check::check_all(&ma, &mb, &probes, &format!("recipe {select:#04x}"));
}

/// A word chosen by one recipe byte.
fn word_from(k: u8) -> u64 {
    let shift = u32::from(k / 6) % 64;
    match k % 6 {
        0 => 0,
        1 => u64::MAX,
        2 => 1u64 << shift,
        3 => !(1u64 << shift),
        4 => u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        _ => 0xAAAA_AAAA_AAAA_AAAA,
    }
}

fn model_from_recipe(kind: u8, full_base: bool, data: &[u8]) -> Box<Words> {
    match kind {
        0 => {
            let pos: Vec<u16> = data.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7FFF).collect();
            check::model_from_positions(&pos)
        }
        1 => {
            let mut m = Box::new([if full_base { u64::MAX } else { 0 }; PAGE_WORDS]);
            for c in data.chunks_exact(3) {
                let i = usize::from(u16::from_le_bytes([c[0], c[1]])) % PAGE_WORDS;
                m[i] = word_from(c[2]);
            }
            m
        }
        2 => {
            let mut m = Box::new([0u64; PAGE_WORDS]);
            let mut i = 0;
            for c in data.chunks_exact(2) {
                let end = (i + usize::from(c[0]) + 1).min(PAGE_WORDS);
                m[i..end].fill(word_from(c[1]));
                i = end;
            }
            m
        }
        _ => {
            let page = Page::from_bytes(data);
            check::page_words(&page)
        }
    }
}

/// Encodes the page with these bits set (any order; duplicates ignored) in
/// its smallest encoding.
///
/// # Panics
///
/// If `positions` is empty (empty pages are never stored) or holds a
/// position of 32,768 or more.
pub fn encode_page_from_positions(positions: &[u16]) -> Vec<u8> {
    let mut pos = positions.to_vec();
    pos.sort_unstable();
    pos.dedup();
    assert!(!pos.is_empty(), "empty pages are never stored");
    assert!(pos.iter().all(|&p| u64::from(p) < PAGE_BYTES * 8), "positions must be below 32768");
    Page::from_positions(&pos).encode()
}

/// Decodes stored page bytes to their set positions.
pub fn decode_page_positions(bytes: &[u8]) -> Result<Vec<u16>, String> {
    let page = Page::decode(bytes).map_err(|e| e.0)?;
    // Positions are below 32,768 and fit in u16.
    Ok(page.ones_in(0, 32_768).map(|p| p as u16).collect())
}

/// The encoding name ("dense", "sparse", "ewah") in a stored page's header,
/// after validating the header and checksum.
pub fn page_encoding_name(bytes: &[u8]) -> Result<&'static str, String> {
    peek_header(bytes).map(|(e, _)| e.name()).map_err(|e| e.0)
}

/// A page for the benchmarks, forced into one in-memory representation.
#[derive(Clone, Debug)]
pub struct BenchPage(Page);

impl BenchPage {
    /// The page with these bits set (any order, duplicates ignored, each
    /// below 32,768), held in `encoding`.
    pub fn from_positions(positions: &[u16], encoding: Encoding) -> BenchPage {
        let mut pos: Vec<u16> = positions.iter().map(|&p| p & 0x7FFF).collect();
        pos.sort_unstable();
        pos.dedup();
        BenchPage(Page::from_positions(&pos).with_encoding(encoding))
    }

    /// The in-memory representation.
    pub fn encoding(&self) -> Encoding {
        self.0.encoding()
    }

    /// Number of set bits (cached).
    pub fn count_ones(&self) -> u32 {
        self.0.count_ones()
    }

    /// Set bits in `[from, to)`, computed from the representation.
    pub fn count_range(&self, from: u32, to: u32) -> u32 {
        self.0.count_range(from, to)
    }

    /// Stored bytes in the smallest encoding.
    pub fn encode(&self) -> Vec<u8> {
        self.0.encode()
    }

    /// Stored bytes in the given encoding.
    pub fn encode_as(&self, encoding: Encoding) -> Vec<u8> {
        self.0.encode_as(encoding)
    }

    /// Decodes stored bytes.
    pub fn decode(bytes: &[u8]) -> Result<BenchPage, PageError> {
        Page::decode(bytes).map(BenchPage)
    }

    /// `self & other`.
    #[must_use]
    pub fn and(&self, other: &BenchPage) -> BenchPage {
        BenchPage(self.0.and(&other.0))
    }

    /// `self | other`.
    #[must_use]
    pub fn or(&self, other: &BenchPage) -> BenchPage {
        BenchPage(self.0.or(&other.0))
    }

    /// The page of these words in its smallest representation (what a
    /// computed BITOP result page costs to encode in memory).
    pub fn from_words(words: &[u64; PAGE_WORDS]) -> BenchPage {
        BenchPage(Page::from_words(words))
    }
}

/// The AND of a column of pages into `out`, returning its set bits: with
/// `fused`, BITOP's own kernel (`page::fold_pages`); otherwise the first
/// page is copied and each other page is applied in its own pass over `out`.
pub fn and_column(pages: &[&BenchPage], fused: bool, out: &mut [u64; PAGE_WORDS]) -> u32 {
    if fused {
        crate::page::fold_pages(crate::page::Fold::And, pages.iter().map(|p| &p.0), out);
    } else if let Some((first, rest)) = pages.split_first() {
        first.0.to_words(out);
        for p in rest {
            p.0.and_into(out);
        }
    }
    crate::page::Census::of(out).ones
}
