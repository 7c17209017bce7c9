//! A key's metadata entry in record form, the codec metadata buckets and
//! delta records share: the record frame (version, body, CRC-32), an
//! entry's tag, length, expiry and value or bitmap id (the layout is in
//! `bucket.rs`'s documentation), and a reader over a record's body.

use super::record::{bad_meta, Body, Kind, Meta};
use crate::error::{Error, Result};
use crate::geometry::PAGE_BITS;
use crate::le::read_u32;
use crate::page::{decode_lone, LONE_MAX};
use crate::varint;

/// An entry tag's bits: the type.
const TAG_KIND: u8 = 0b11;
/// An entry tag's bit: the value is inline.
pub(super) const TAG_INLINE: u8 = 0b100;
/// An entry tag's bit: an expiry follows the length.
pub(super) const TAG_EXPIRY: u8 = 0b1000;
/// An entry tag's bit: the value is one small page kept in the entry
/// (format 9).
pub(super) const TAG_PAGE: u8 = 0b1_0000;

/// How many leading bytes `a` and `b` share: how names share prefixes in
/// buckets and delta records.
pub(crate) fn shared_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Closes a record whose header is a version byte and an entry count
/// (u32 LE, bytes 1 to 4): writes `count` there and appends the CRC-32.
pub(crate) fn seal_counted(mut p: Vec<u8>, count: u32) -> Vec<u8> {
    p[1..5].copy_from_slice(&count.to_le_bytes());
    let crc = crc32fast::hash(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// The bytes of a record (`header` bytes, at least one, starting with the
/// version, then a body, then a CRC-32 of everything before it) before its
/// checksum, once its length, checksum and version (`version`) are
/// checked: the frame buckets and delta records share.
///
/// # Errors
/// What `bad` makes of the first failure.
pub(crate) fn sealed_body<'a>(
    b: &'a [u8],
    header: usize,
    version: u8,
    bad: &dyn Fn(String) -> Error,
) -> Result<&'a [u8]> {
    if b.len() < header + 4 {
        return Err(bad(format!("record is {} bytes", b.len())));
    }
    let body = &b[..b.len() - 4];
    let (stored, computed) = (read_u32(b, b.len() - 4), crc32fast::hash(body));
    if stored != computed {
        return Err(bad(format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")));
    }
    if body[0] != version {
        return Err(bad(format!("version {}", body[0])));
    }
    Ok(body)
}

/// Writes an entry's tag and everything after it (the name goes before,
/// written by the caller): the entry format buckets and delta records
/// share.
pub(crate) fn put_entry(b: &mut Vec<u8>, m: &Meta) {
    let mut tag = m.kind as u8;
    match m.body {
        Body::Inline => tag |= TAG_INLINE,
        Body::Page { .. } => tag |= TAG_PAGE,
        Body::Paged(_) => {}
    }
    if m.expire_at_ms != 0 {
        tag |= TAG_EXPIRY;
    }
    b.push(tag);
    varint::put(b, m.len);
    if m.expire_at_ms != 0 {
        b.extend_from_slice(&m.expire_at_ms.to_le_bytes());
    }
    match m.body {
        Body::Inline => b.extend_from_slice(m.inline_value()),
        Body::Paged(id) => {
            varint::put(b, id);
            varint::put(b, m.ones);
        }
        Body::Page { page, bytes } => {
            varint::put(b, page);
            varint::put(b, u64::from(bytes));
            b.extend_from_slice(&m.inline[..usize::from(bytes)]);
        }
    }
}

/// The offset just past the entry [`put_entry`] wrote at `at` of `b` (a
/// bucket's own arena: its entries were validated when they came in). A
/// damaged entry ends at the end of `b`.
pub(super) fn entry_end(b: &[u8], at: usize) -> usize {
    entry_expiry_end(b, at).1
}

/// The expiry (0: none) of the entry [`put_entry`] wrote at `at` of `b`
/// and the offset just past it, read without decoding the rest: what
/// replacing an entry needs to know of the old one. As [`entry_end`] for
/// a damaged entry, whose expiry reads as 0.
pub(super) fn entry_expiry_end(b: &[u8], at: usize) -> (u64, usize) {
    let mut r = at;
    let Some(&tag) = b.get(r) else { return (0, b.len()) };
    r += 1;
    let Ok(len) = varint::read(b, &mut r) else { return (0, b.len()) };
    let mut expiry = 0;
    if tag & TAG_EXPIRY != 0 {
        expiry = b.get(r..r + 8).and_then(|e| e.try_into().ok()).map_or(0, u64::from_le_bytes);
        r += 8;
    }
    if tag & TAG_INLINE != 0 {
        return (expiry, r.saturating_add(usize::try_from(len).unwrap_or(usize::MAX)));
    }
    if tag & TAG_PAGE != 0 {
        let (Ok(_), Ok(bytes)) = (varint::read(b, &mut r), varint::read(b, &mut r)) else { return (expiry, b.len()) };
        return (expiry, r.saturating_add(usize::try_from(bytes).unwrap_or(usize::MAX)).min(b.len()));
    }
    for _ in 0..2 {
        if varint::read(b, &mut r).is_err() {
            return (expiry, b.len());
        }
    }
    (expiry, r)
}

/// Where the value of the entry [`put_entry`] wrote at `at` of `b` lies,
/// if the entry holds a value of kind `kind` inline, and its expiry (0:
/// none): the bytes a read may borrow and an in-place change of the value
/// may rewrite (keeping their length).
pub(super) fn inline_span(b: &[u8], at: usize, kind: Kind) -> Option<(std::ops::Range<usize>, u64)> {
    let &tag = b.get(at)?;
    if tag & TAG_INLINE == 0 || tag & TAG_KIND != kind as u8 {
        return None;
    }
    let mut r = at + 1;
    let len = usize::try_from(varint::read(b, &mut r).ok()?).ok()?;
    let mut expiry = 0;
    if tag & TAG_EXPIRY != 0 {
        expiry = u64::from_le_bytes(b.get(r..r + 8)?.try_into().ok()?);
        r += 8;
    }
    let end = r.checked_add(len)?;
    (end <= b.len()).then_some((r..end, expiry))
}

/// Reads what [`put_entry`] wrote after the tag `tag` (already read) of
/// key `name`, validating every field.
///
/// # Errors
/// [`Error::Corrupted`] naming `name` (or, for truncation, what `bad`
/// names).
pub(crate) fn read_entry(r: &mut Reader<'_>, name: &[u8], tag: u8, bad: &dyn Fn(String) -> Error) -> Result<Meta> {
    if tag & !(TAG_KIND | TAG_INLINE | TAG_EXPIRY | TAG_PAGE) != 0
        || tag & (TAG_INLINE | TAG_PAGE) == TAG_INLINE | TAG_PAGE
    {
        return Err(bad_meta(name, format!("unknown tag bits {tag:#04x}")));
    }
    let kind = Kind::try_from(tag & TAG_KIND).map_err(|e| bad_meta(name, e))?;
    let len = r.varint(bad)?;
    let expire_at_ms = if tag & TAG_EXPIRY != 0 {
        let at = u64::from_le_bytes(r.take(8, bad)?.try_into().unwrap_or_default());
        if at == 0 {
            return Err(bad_meta(name, "expiry flag with expiry 0"));
        }
        at
    } else {
        0
    };
    if tag & TAG_INLINE != 0 {
        if len > kind.inline_max() {
            return Err(bad_meta(name, format!("inline value of {len} bytes")));
        }
        let mut meta = Meta::empty(kind);
        let bytes = r.take(usize::try_from(len).unwrap_or(0), bad)?;
        meta.inline.room(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        meta.len = len;
        meta.ones = bytes.iter().map(|b| u64::from(b.count_ones())).sum();
        meta.expire_at_ms = expire_at_ms;
        Ok(meta)
    } else if tag & TAG_PAGE != 0 {
        read_lone_page(r, name, kind, len, expire_at_ms, bad)
    } else {
        let id = r.varint(bad)?;
        let ones = r.varint(bad)?;
        if len.checked_mul(8).is_none_or(|bits| ones > bits) {
            return Err(bad_meta(name, format!("{ones} set bits do not fit in {len} bytes")));
        }
        Ok(Meta::paged(kind, id, len, ones, expire_at_ms))
    }
}

/// Reads the rest of an entry whose value is one page kept in it (the
/// page number, the member form's length and the member form), validating
/// the page and that the value's `len` bytes hold it.
fn read_lone_page(
    r: &mut Reader<'_>,
    name: &[u8],
    kind: Kind,
    len: u64,
    expire_at_ms: u64,
    bad: &dyn Fn(String) -> Error,
) -> Result<Meta> {
    if kind != Kind::String {
        return Err(bad_meta(name, format!("a page kept in the entry of a {kind:?} value")));
    }
    let page = r.varint(bad)?;
    let bytes = r.varint(bad)?;
    let n = usize::try_from(bytes)
        .ok()
        .filter(|&n| n <= LONE_MAX)
        .ok_or_else(|| bad_meta(name, format!("a page kept in the entry in {bytes} bytes (at most {LONE_MAX})")))?;
    let member = r.take(n, bad)?;
    let p = decode_lone(member).map_err(|e| bad_meta(name, e))?;
    // The value's bytes must reach the page's last set bit.
    let last = p.last_set().map(|bit| page.checked_mul(PAGE_BITS).and_then(|b| b.checked_add(u64::from(bit))));
    if last.flatten().is_none_or(|bit| len.checked_mul(8).is_none_or(|bits| bit >= bits)) {
        return Err(bad_meta(name, format!("page {page} kept in the entry does not fit in {len} bytes")));
    }
    let mut meta = Meta::empty(kind);
    meta.body = Body::Page { page, bytes: u8::try_from(n).unwrap_or(u8::MAX) };
    meta.inline.room(n)[..n].copy_from_slice(member);
    meta.len = len;
    meta.ones = u64::from(p.count_ones());
    meta.expire_at_ms = expire_at_ms;
    Ok(meta)
}

/// A cursor over a record's bytes.
pub(crate) struct Reader<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize, bad: &dyn Fn(String) -> Error) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| bad("truncated".into()))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(crate) fn varint(&mut self, bad: &dyn Fn(String) -> Error) -> Result<u64> {
        varint::read(self.b, &mut self.at).map_err(|e| bad(e.to_string()))
    }

    /// A varint that counts bytes of this record.
    pub(crate) fn len(&mut self, bad: &dyn Fn(String) -> Error) -> Result<usize> {
        let v = self.varint(bad)?;
        usize::try_from(v).ok().filter(|&n| n <= self.b.len()).ok_or_else(|| bad(format!("length {v} too large")))
    }
}
