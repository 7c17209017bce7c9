//! RedisBloom's BF.SCANDUMP and BF.LOADCHUNK: a filter saved and restored
//! a chunk at a time, in bitsled's own chunk format (clients treat the
//! chunks as opaque bytes and hand them back to BF.LOADCHUNK with the
//! iterator they came with). A slot migration of the server moves Bloom
//! filters this way.
//!
//! The chunks (DESIGN.md section 7, "Saving a filter in chunks"):
//!
//! - the **header chunk**, from iterator 0 (returned with iterator 1):
//!   `H`, version `1`, then the header as its page 0 holds it (section 3,
//!   "Bloom filter header", which carries its own CRC-32);
//! - **page chunks**, from iterator `k >= 1` (the next page to look at):
//!   `P`, version `1`, a u16 count `n`, then `n` times a u64 page number,
//!   a u16 length `m` and the page's first `m` bytes (Redis bit order; the
//!   rest of its 4,096 are zero, so a small filter sends its bits only),
//!   then a CRC-32 of all before it. Pages without a set bit are left out; a chunk holds at
//!   most [`PAGES_PER_CHUNK`] pages and looks at most [`PAGES_PER_STEP`];
//!   the iterator returned is the page after the last one looked at, and
//!   `(0, "")` ends the dump.
//!
//! A small filter (kept inline) dumps as the paged filter it would become:
//! its bits are the page its sub-filter starts on. Loading rebuilds the
//! same form (small or paged) from the header, so a filter loaded in
//! another store takes the form that store would give it.

use super::{read_header, store_filter, Filter};
use crate::bloom::small::{self, Small};
use crate::bloom::{Header, HEADER_PAGE, MAX_CAPACITY};
use crate::db::Db;
use crate::engine::idhash::FastSet;
use crate::engine::{Kind, Meta, ReadTx};
use crate::error::{Error, Result};
use crate::geometry::{PAGE_BITS, PAGE_LEN};
use crate::le::{read_u32, read_u64};
use crate::page::Page;

/// The first byte of a header chunk.
const HEADER_CHUNK: u8 = b'H';
/// The first byte of a page chunk.
const PAGE_CHUNK: u8 = b'P';
/// The chunk format's version (second byte).
const CHUNK_VERSION: u8 = 1;
/// Pages with set bits in one chunk at most (256 KiB of bits).
pub(crate) const PAGES_PER_CHUNK: usize = 64;
/// Pages one step looks at, at most (so a call over a filter of empty
/// pages still returns soon).
pub(crate) const PAGES_PER_STEP: u64 = 16_384;
/// Bytes before a page's own in a page chunk: its number and length.
const ENTRY_HEAD: usize = 8 + 2;

/// RedisBloom's reply to a chunk it cannot use.
fn bad_data(why: &str) -> Error {
    Error::InvalidArgument(format!("received bad data ({why})"))
}

/// The bytes of page `page` of the filter `meta` describes (the value of
/// `key`, small or paged), if it has a set bit.
fn page_bytes(tx: &ReadTx<'_>, key: &[u8], meta: &Meta, filter: &Filter, page: u64) -> Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; PAGE_LEN];
    if let Some(bits) = &filter.small {
        if page != filter.header.filters[0].first_page || bits.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        buf[..bits.len()].copy_from_slice(bits);
        return Ok(Some(buf));
    }
    match tx.page(key, meta, page)? {
        Some(p) if !p.is_empty() => {
            p.write_bytes(&mut buf);
            Ok(Some(buf))
        }
        _ => Ok(None),
    }
}

/// Bits of page `page` that belong to a sub-filter of `header`; `None`
/// for a page outside every sub-filter (the header page included).
fn bits_in_page(header: &Header, page: u64) -> Option<u64> {
    let f = header.filters.iter().find(|f| page >= f.first_page && page - f.first_page < f.pages())?;
    Some((f.bits - (page - f.first_page) * PAGE_BITS).min(PAGE_BITS))
}

/// The pages of a page chunk, checked: its framing, its checksum, and
/// that every page lies in a sub-filter of `header` with no bit set past
/// the sub-filter's end.
fn parse_pages<'a>(header: &Header, data: &'a [u8]) -> Result<Vec<(u64, &'a [u8])>> {
    if data.len() < 8 || data[0] != PAGE_CHUNK || data[1] != CHUNK_VERSION {
        return Err(bad_data("not a page chunk"));
    }
    let body = &data[..data.len() - 4];
    if read_u32(data, data.len() - 4) != crc32fast::hash(body) {
        return Err(bad_data("checksum mismatch"));
    }
    let n = usize::from(u16::from_le_bytes([data[2], data[3]]));
    let mut pages = Vec::with_capacity(n.min(PAGES_PER_CHUNK));
    let mut rest = &body[4..];
    for _ in 0..n {
        let Some((head, tail)) = rest.split_first_chunk::<ENTRY_HEAD>() else {
            return Err(bad_data("cut short"));
        };
        let page = read_u64(head, 0);
        let len = usize::from(u16::from_le_bytes([head[8], head[9]]));
        if len > PAGE_LEN || len > tail.len() {
            return Err(bad_data(&format!("page {page}: {len} bytes")));
        }
        let (bytes, after) = tail.split_at(len);
        rest = after;
        let Some(bits) = bits_in_page(header, page) else {
            return Err(bad_data(&format!("page {page} is outside the filter")));
        };
        // A sub-filter's size is a multiple of 64 bits: whole bytes.
        let used = usize::try_from(bits / 8).unwrap_or(PAGE_LEN);
        if bytes.iter().skip(used).any(|&b| b != 0) {
            return Err(bad_data(&format!("page {page} has bits past its sub-filter")));
        }
        pages.push((page, bytes));
    }
    if !rest.is_empty() {
        return Err(bad_data("bytes after the last page"));
    }
    Ok(pages)
}

/// Decodes arbitrary bytes as the chunks BF.LOADCHUNK takes (a header
/// chunk, and a page chunk for a filter of a few pages); neither may
/// panic, and a header that decodes encodes to one that decodes the same.
#[cfg(feature = "testing")]
pub(crate) fn check_chunk_decode(data: &[u8]) {
    if let Ok(h) = Header::decode(data.get(2..).unwrap_or_default()) {
        assert_eq!(Header::decode(&h.encode()), Ok(h), "header round trip");
    }
    if let Ok(header) = Header::new(0.01, 20_000, 2, false) {
        let _ = parse_pages(&header, data);
    }
}

impl Db {
    /// BF.SCANDUMP; see [`crate::Bloom::scandump`].
    pub(crate) fn bf_scandump(&self, key: &[u8], iter: u64) -> Result<Option<(u64, Vec<u8>)>> {
        self.engine.read(self.index, &[key], |tx| {
            let Some(meta) = tx.typed(key, Kind::Bloom)? else { return Ok(None) };
            let filter = Filter::load(tx, key, &meta)?;
            if iter == 0 {
                let mut out = vec![HEADER_CHUNK, CHUNK_VERSION];
                out.extend_from_slice(&filter.header.encode());
                return Ok(Some((1, out)));
            }
            let end = filter.header.end_page();
            let mut out = vec![PAGE_CHUNK, CHUNK_VERSION, 0, 0];
            let (mut page, mut n) = (iter.max(HEADER_PAGE + 1), 0u16);
            let stop = page.saturating_add(PAGES_PER_STEP).min(end);
            while page < stop && usize::from(n) < PAGES_PER_CHUNK {
                if let Some(bytes) = page_bytes(tx, key, &meta, &filter, page)? {
                    let len = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                    out.extend_from_slice(&page.to_le_bytes());
                    out.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_le_bytes());
                    out.extend_from_slice(&bytes[..len]);
                    n += 1;
                }
                page += 1;
            }
            if n == 0 && page >= end {
                return Ok(Some((0, Vec::new())));
            }
            out[2..4].copy_from_slice(&n.to_le_bytes());
            let crc = crc32fast::hash(&out);
            out.extend_from_slice(&crc.to_le_bytes());
            Ok(Some((page, out)))
        })
    }

    /// BF.LOADCHUNK; see [`crate::Bloom::loadchunk`].
    pub(crate) fn bf_loadchunk(&self, key: &[u8], iter: u64, data: &[u8]) -> Result<()> {
        self.engine.write(self.index, &[key], |tx| {
            let stored = tx.typed(key, Kind::Bloom)?;
            // As RedisBloom: iterator 1 on a missing key is the header;
            // anything on an existing key is pages.
            if iter == 1 && stored.is_none() {
                if data.len() < 2 || data[0] != HEADER_CHUNK || data[1] != CHUNK_VERSION {
                    return Err(bad_data("not a header chunk"));
                }
                let header = Header::decode(&data[2..]).map_err(|why| bad_data(&why))?;
                // What BF.RESERVE would never make is not loaded either: a
                // scaling chain must be able to grow, and its first
                // sub-filter be within BF.RESERVE's bounds.
                let first = header.filters[0];
                if !header.nonscaling && header.expansion == 0 {
                    return Err(bad_data("a scaling filter with expansion 0"));
                }
                if first.capacity > MAX_CAPACITY {
                    return Err(bad_data(&format!("capacity {} above {MAX_CAPACITY}", first.capacity)));
                }
                let mut filter = Filter::create(tx, header)?;
                return store_filter(tx, key, &mut filter, FastSet::default());
            }
            let Some(meta) = stored else { return Err(Error::InvalidArgument("not found".into())) };
            if meta.is_inline() {
                let mut s = Small::decode(meta.inline_value()).map_err(|why| super::small_damage(key, &why))?;
                for (page, bytes) in parse_pages(&s.header, data)? {
                    if page != s.header.filters[0].first_page {
                        return Err(bad_data(&format!("page {page} is outside the filter")));
                    }
                    let n = s.bits.len().min(bytes.len());
                    s.bits.fill(0);
                    s.bits[..n].copy_from_slice(&bytes[..n]);
                }
                return tx.rewrite_inline(key, &meta, &small::encode(&s.header, &s.bits));
            }
            let header = read_header(tx, key, &meta)?;
            let pages = parse_pages(&header, data)?;
            let mut meta = meta;
            for (page, bytes) in pages {
                let mut whole = bytes.to_vec();
                whole.resize(PAGE_LEN, 0);
                let new = Page::from_bytes(&whole);
                tx.update_page(key, &mut meta, page, |p| *p = new)?;
            }
            tx.set(key, &meta)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{BloomOptions, Config, Db, Error};

    fn open(dir: &std::path::Path) -> Db {
        Config::new(dir).flush_interval(None).open().unwrap()
    }

    /// Every (iterator, chunk) pair of a dump of `key`.
    fn dump(db: &Db, key: &[u8]) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut iter = 0;
        loop {
            let (next, data) = db.bloom(key).scandump(iter).unwrap().expect("the filter exists");
            if next == 0 {
                assert!(data.is_empty(), "the last pair is (0, empty)");
                return out;
            }
            out.push((next, data));
            iter = next;
        }
    }

    fn load(db: &Db, key: &[u8], chunks: &[(u64, Vec<u8>)]) {
        for (iter, data) in chunks {
            db.bloom(key).loadchunk(*iter, data).unwrap();
        }
    }

    /// Invariant: a filter dumped and loaded under another key (in another
    /// store) answers every membership question as the original, has the
    /// same BF.INFO, and keeps its form: small filters stay inline, paged
    /// and grown chains stay paged; the loaded copy survives a reopen.
    #[test]
    fn dump_and_load_give_the_same_filter() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let src = open(a.path());
        let small: Vec<String> = (0..60).map(|i| format!("s{i}")).collect();
        src.bloom(b"small").add_many(&small).unwrap();
        src.bloom(b"paged").reserve(0.001, 50_000, BloomOptions::default()).unwrap();
        let many: Vec<String> = (0..20_000).map(|i| format!("p{i}")).collect();
        src.bloom(b"paged").add_many(&many).unwrap();
        // Grown: three sub-filters.
        src.bloom(b"grown").reserve(0.01, 100, BloomOptions::default()).unwrap();
        let grown: Vec<String> = (0..600).map(|i| format!("g{i}")).collect();
        src.bloom(b"grown").add_many(&grown).unwrap();
        src.bloom(b"empty").reserve(0.01, 1_000_000, BloomOptions::default()).unwrap();
        assert!(src.bloom(b"grown").info().unwrap().unwrap().filters > 1);
        let dst = open(b.path());
        let keys: [&[u8]; 4] = [b"small", b"paged", b"grown", b"empty"];
        for key in keys {
            load(&dst, key, &dump(&src, key));
        }
        drop(dst);
        let dst = open(b.path());
        let probes: Vec<String> = (0..30_000).map(|i| format!("{}{i}", ["s", "p", "g", "x"][i % 4])).collect();
        for key in keys {
            assert_eq!(dst.bloom(key).info().unwrap(), src.bloom(key).info().unwrap(), "{key:?}");
            let want = src.bloom(key).contains_many(&probes).unwrap();
            assert_eq!(dst.bloom(key).contains_many(&probes).unwrap(), want, "{key:?}");
        }
        assert!(src.bloom(b"small").info().unwrap().unwrap().span_bytes < 4096, "the source keeps it inline");
        assert_eq!(dst.bloom(b"small").info().unwrap(), src.bloom(b"small").info().unwrap());
        assert_eq!(dump(&src, b"empty").len(), 1, "an empty filter is its header alone");
        assert!(dst.verify().unwrap().is_ok());
    }

    /// Invariant: damaged or misplaced chunks are refused with an error and
    /// change nothing; a missing key dumps as `None`; a header chunk for a
    /// key that exists is refused as bad data; a page chunk for a missing
    /// key is "not found"; another type is WRONGTYPE.
    #[test]
    fn bad_chunks_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.bloom(b"f").reserve(0.01, 10_000, BloomOptions::default()).unwrap();
        db.bloom(b"f").add_many(&["a", "b", "c"]).unwrap();
        let chunks = dump(&db, b"f");
        assert_eq!(db.bloom(b"nope").scandump(0).unwrap(), None);
        let (iter, header) = &chunks[0];
        assert!(db.bloom(b"f").loadchunk(*iter, header).unwrap_err().to_string().contains("received bad data"));
        let (piter, pages) = &chunks[1];
        let e = db.bloom(b"g").loadchunk(*piter, pages).unwrap_err();
        assert!(e.to_string().contains("not found"), "{e}");
        db.bloom(b"g").loadchunk(*iter, header).unwrap();
        for i in 0..pages.len() {
            let mut bad = pages.clone();
            bad[i] ^= 0x04;
            assert!(db.bloom(b"g").loadchunk(*piter, &bad).is_err(), "flip at {i} accepted");
        }
        for n in [0, 1, 7, pages.len() - 1] {
            assert!(db.bloom(b"g").loadchunk(*piter, &pages[..n]).is_err(), "cut to {n} accepted");
        }
        assert_eq!(db.bloom(b"g").contains_many(&["a", "b", "c"]).unwrap(), vec![false; 3], "nothing loaded");
        let mut bad_header = header.clone();
        bad_header[5] ^= 1;
        assert!(db.bloom(b"h").loadchunk(1, &bad_header).is_err());
        assert_eq!(db.bloom(b"h").info().unwrap(), None);
        // Headers that decode but that BF.RESERVE would never make: a
        // scaling chain that cannot grow, a first capacity past its bound.
        let decoded = crate::bloom::Header::decode(&header[2..]).unwrap();
        let mut no_growth = decoded.clone();
        no_growth.expansion = 0;
        let mut huge = crate::bloom::Header::new(0.01, crate::bloom::MAX_CAPACITY * 2, 2, false).unwrap();
        huge.filters[0].items = 0;
        for h in [no_growth, huge] {
            let mut chunk = vec![b'H', 1];
            chunk.extend_from_slice(&h.encode());
            let e = db.bloom(b"h").loadchunk(1, &chunk).unwrap_err().to_string();
            assert!(e.contains("received bad data"), "{e}");
            assert_eq!(db.bloom(b"h").info().unwrap(), None);
        }
        db.set(b"s", b"x").unwrap();
        assert!(matches!(db.bloom(b"s").scandump(0), Err(Error::WrongType)));
        assert!(matches!(db.bloom(b"s").loadchunk(1, header), Err(Error::WrongType)));
        db.bloom(b"g").loadchunk(*piter, pages).unwrap();
        assert_eq!(db.bloom(b"g").contains_many(&["a", "b", "c"]).unwrap(), vec![true; 3]);
    }
}
