//! Metadata buckets: the keys of a keyspace are grouped by the top bits of
//! their hash, and each group (a bucket) is one store record, so a small
//! key costs a share of a record rather than records of its own. A bucket
//! covers the hashes whose top `depth` bits equal those of its first hash;
//! it splits in two (one more bit) when it grows past [`SPLIT_BYTES`].
//! Every keyspace's buckets partition the hash space of each region they
//! occupy; a bucket never covers less than [`MIN_DEPTH`] bits, so it lies
//! within one lock shard (the shard is the top [`MIN_DEPTH`] bits).
//!
//! The record (key `0x06 | keyspace | first hash`, see `layout.rs`):
//!
//! ```text
//!  0     1       2         6
//!  | ver | depth | entries | entry ... | crc32 |
//! ```
//!
//! - 1 byte: version, 2.
//! - 1 byte: depth, `8 ..= 32`.
//! - 4 bytes: number of entries, u32 LE.
//! - the entries, in strictly increasing name order, each:
//!   - varint: bytes of the name shared with the previous entry's name;
//!   - varint: length of the rest of the name, then those bytes;
//!   - 1 byte: tag: bits 0-1 type (1 string, 2 Bloom filter), bit 2
//!     inline, bit 3 has an expiry; other bits zero;
//!   - varint: logical length in bytes;
//!   - if it has an expiry: 8 bytes, Unix milliseconds, LE;
//!   - inline: the value's bytes (as many as the length, at most 64); its
//!     set bits are counted, not stored;
//!   - paged: varint bitmap id, varint number of set bits.
//! - 4 bytes: CRC-32 of everything before.
//!
//! Varints are unsigned LEB128 (7 bits a byte, least significant first).

use super::layout::key_hash;
use super::record::{bad_meta, Body, Kind, Meta, INLINE_MAX};
use crate::error::{Error, Result};
use crate::le::read_u32;

/// The least number of hash bits a bucket covers: buckets then lie within
/// one of `2^MIN_DEPTH` lock shards.
pub(crate) const MIN_DEPTH: u8 = 8;
/// The most: past it, keys with equal hashes share one bucket however large.
pub(crate) const MAX_DEPTH: u8 = 32;
/// A bucket whose record would exceed this many bytes splits in two.
pub(crate) const SPLIT_BYTES: usize = 4096;

const VERSION: u8 = 2;
const HEADER: usize = 6;
const TAG_KIND: u8 = 0b11;
const TAG_INLINE: u8 = 0b100;
const TAG_EXPIRY: u8 = 0b1000;

/// One key in a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) name: Box<[u8]>,
    pub(crate) meta: Meta,
}

impl Entry {
    /// Bytes the entry takes in a record, at most (prefix compression
    /// only saves).
    pub(crate) fn record_bytes(&self) -> usize {
        self.name.len() + self.meta.inline_value().len() + 32
    }
}

/// A decoded bucket: its depth and its entries by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub(crate) depth: u8,
    pub(crate) entries: Vec<Entry>,
    /// Upper bound of the record's size (see [`Entry::record_bytes`]).
    pub(crate) bytes: usize,
}

/// The first hash of the bucket of depth `depth` holding hash `h`.
pub(crate) fn bucket_start(h: u32, depth: u8) -> u32 {
    match depth {
        0 => 0,
        d if d >= 32 => h,
        d => h & (u32::MAX << (32 - u32::from(d))),
    }
}

/// Whether the bucket starting at `start` with `depth` holds hash `h`.
pub(crate) fn covers(start: u32, depth: u8, h: u32) -> bool {
    bucket_start(h, depth) == start
}

impl Bucket {
    /// An empty bucket of `depth`.
    pub(crate) fn new(depth: u8) -> Bucket {
        Bucket { depth, entries: Vec::new(), bytes: HEADER + 4 }
    }

    /// The position of `name`, or where it would go.
    pub(crate) fn find(&self, name: &[u8]) -> std::result::Result<usize, usize> {
        self.entries.binary_search_by(|e| (*e.name).cmp(name))
    }

    /// Inserts or replaces the entry of `e.name`.
    pub(crate) fn put(&mut self, e: Entry) {
        self.bytes += e.record_bytes();
        match self.find(&e.name) {
            Ok(i) => {
                self.bytes -= self.entries[i].record_bytes();
                self.entries[i] = e;
            }
            Err(i) => self.entries.insert(i, e),
        }
    }

    /// Removes the entry of `name`; returns it.
    pub(crate) fn remove(&mut self, name: &[u8]) -> Option<Entry> {
        let i = self.find(name).ok()?;
        let e = self.entries.remove(i);
        self.bytes -= e.record_bytes();
        Some(e)
    }

    /// Whether the bucket should split.
    pub(crate) fn wants_split(&self) -> bool {
        self.bytes > SPLIT_BYTES && self.depth < MAX_DEPTH
    }

    /// Splits the bucket starting at `start` into its two halves (one more
    /// hash bit): the lower half keeps `start`; the upper one starts at the
    /// returned hash.
    pub(crate) fn split(self, start: u32) -> (Bucket, u32, Bucket) {
        let depth = self.depth + 1;
        let upper_start = start | (1u32 << (32 - u32::from(depth)));
        let (mut lo, mut hi) = (Bucket::new(depth), Bucket::new(depth));
        for e in self.entries {
            if covers(upper_start, depth, key_hash(&e.name)) {
                hi.bytes += e.record_bytes();
                hi.entries.push(e);
            } else {
                lo.bytes += e.record_bytes();
                lo.entries.push(e);
            }
        }
        (lo, upper_start, hi)
    }

    /// The bucket starting at `start` split until every part fits (or
    /// cannot split further), as (first hash, bucket) in hash order.
    pub(crate) fn partition(self, start: u32) -> Vec<(u32, Bucket)> {
        let mut out = Vec::new();
        let mut todo = vec![(start, self)];
        while let Some((s, b)) = todo.pop() {
            if b.wants_split() {
                let (lo, upper, hi) = b.split(s);
                todo.push((upper, hi));
                todo.push((s, lo));
            } else {
                out.push((s, b));
            }
        }
        out
    }

    /// The record of this bucket.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.bytes);
        b.push(VERSION);
        b.push(self.depth);
        b.extend_from_slice(&u32::try_from(self.entries.len()).unwrap_or(u32::MAX).to_le_bytes());
        let mut prev: &[u8] = &[];
        for e in &self.entries {
            let shared = prev.iter().zip(e.name.iter()).take_while(|(a, b)| a == b).count();
            put_varint(&mut b, shared as u64);
            put_varint(&mut b, (e.name.len() - shared) as u64);
            b.extend_from_slice(&e.name[shared..]);
            let m = &e.meta;
            let mut tag = m.kind as u8;
            if m.body == Body::Inline {
                tag |= TAG_INLINE;
            }
            if m.expire_at_ms != 0 {
                tag |= TAG_EXPIRY;
            }
            b.push(tag);
            put_varint(&mut b, m.len);
            if m.expire_at_ms != 0 {
                b.extend_from_slice(&m.expire_at_ms.to_le_bytes());
            }
            match m.body {
                Body::Inline => b.extend_from_slice(m.inline_value()),
                Body::Paged(id) => {
                    put_varint(&mut b, id);
                    put_varint(&mut b, m.ones);
                }
            }
            prev = &e.name;
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and validates the record of the bucket of keyspace `ks`
    /// starting at hash `start`.
    ///
    /// # Errors
    /// [`Error::Corrupted`] naming the bucket (or the key whose entry is
    /// bad) for any damage; never panics.
    pub(crate) fn decode(ks: u32, start: u32, b: &[u8]) -> Result<Bucket> {
        let bad = |reason: String| Error::Corrupted {
            key: format!("<bucket {ks}/{start:#010x}>"),
            page: None,
            reason: format!("metadata bucket: {reason}"),
        };
        if b.len() < HEADER + 4 {
            return Err(bad(format!("record is {} bytes", b.len())));
        }
        let body = &b[..b.len() - 4];
        let (stored, computed) = (read_u32(b, b.len() - 4), crc32fast::hash(body));
        if stored != computed {
            return Err(bad(format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")));
        }
        if body[0] != VERSION {
            return Err(bad(format!("version {}", body[0])));
        }
        let depth = body[1];
        if !(MIN_DEPTH..=MAX_DEPTH).contains(&depth) || bucket_start(start, depth) != start {
            return Err(bad(format!("depth {depth} does not fit first hash {start:#010x}")));
        }
        let count = read_u32(body, 2);
        let mut r = Reader { b: body, at: HEADER };
        let mut bucket = Bucket::new(depth);
        let mut prev: Vec<u8> = Vec::new();
        for _ in 0..count {
            let shared = r.len(&bad)?;
            let rest = r.len(&bad)?;
            if shared > prev.len() {
                return Err(bad(format!("name shares {shared} bytes with a {}-byte name", prev.len())));
            }
            let mut name = prev[..shared].to_vec();
            name.extend_from_slice(r.take(rest, &bad)?);
            if !bucket.entries.is_empty() && name <= prev {
                return Err(bad("names not in increasing order".into()));
            }
            if !covers(start, depth, key_hash(&name)) {
                return Err(bad_meta(
                    &name,
                    format!("stored in bucket {ks}/{start:#010x} that does not hold its hash"),
                ));
            }
            let tag = r.take(1, &bad)?[0];
            if tag & !(TAG_KIND | TAG_INLINE | TAG_EXPIRY) != 0 {
                return Err(bad_meta(&name, format!("unknown tag bits {tag:#04x}")));
            }
            let kind = Kind::try_from(tag & TAG_KIND).map_err(|e| bad_meta(&name, e))?;
            let len = r.varint(&bad)?;
            let expire_at_ms = if tag & TAG_EXPIRY != 0 {
                let at = u64::from_le_bytes(r.take(8, &bad)?.try_into().unwrap_or_default());
                if at == 0 {
                    return Err(bad_meta(&name, "expiry flag with expiry 0".into()));
                }
                at
            } else {
                0
            };
            let meta = if tag & TAG_INLINE != 0 {
                if len > INLINE_MAX {
                    return Err(bad_meta(&name, format!("inline value of {len} bytes")));
                }
                let mut meta = Meta::empty(kind);
                let bytes = r.take(usize::try_from(len).unwrap_or(0), &bad)?;
                meta.inline[..bytes.len()].copy_from_slice(bytes);
                meta.len = len;
                meta.ones = bytes.iter().map(|b| u64::from(b.count_ones())).sum();
                meta.expire_at_ms = expire_at_ms;
                meta
            } else {
                let id = r.varint(&bad)?;
                let ones = r.varint(&bad)?;
                if len.checked_mul(8).is_none_or(|bits| ones > bits) {
                    return Err(bad_meta(&name, format!("{ones} set bits do not fit in {len} bytes")));
                }
                Meta::paged(kind, id, len, ones, expire_at_ms)
            };
            prev.clone_from(&name);
            let e = Entry { name: name.into_boxed_slice(), meta };
            bucket.bytes += e.record_bytes();
            bucket.entries.push(e);
        }
        if r.at != body.len() {
            return Err(bad(format!("{} bytes after the last entry", body.len() - r.at)));
        }
        Ok(bucket)
    }
}

/// Appends `v` as an unsigned LEB128 varint.
fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        // The low seven bits, with the continuation bit.
        b.push(v.to_le_bytes()[0] | 0x80);
        v >>= 7;
    }
    b.push(v.to_le_bytes()[0]);
}

/// A cursor over a record's bytes.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, bad: &dyn Fn(String) -> Error) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| bad("truncated".into()))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn varint(&mut self, bad: &dyn Fn(String) -> Error) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1, bad)?[0];
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(bad("varint overflows 64 bits".into()));
            }
            v |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint longer than 10 bytes".into()))
    }

    /// A varint that counts bytes of this record.
    fn len(&mut self, bad: &dyn Fn(String) -> Error) -> Result<usize> {
        let v = self.varint(bad)?;
        usize::try_from(v).ok().filter(|&n| n <= self.b.len()).ok_or_else(|| bad(format!("length {v} too large")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, meta: Meta) -> Entry {
        Entry { name: name.as_bytes().into(), meta }
    }

    /// A bucket holding `names`: the depth-8 bucket of the first, with
    /// every name that falls in it.
    fn sample() -> (u32, Bucket) {
        let start = bucket_start(key_hash(b"k0"), MIN_DEPTH);
        let mut b = Bucket::new(MIN_DEPTH);
        let mut i = 0;
        while b.entries.len() < 12 {
            let name = format!("k{i}");
            i += 1;
            if !covers(start, MIN_DEPTH, key_hash(name.as_bytes())) {
                continue;
            }
            let meta = match b.entries.len() % 3 {
                0 => {
                    let mut m = Meta::empty(Kind::String);
                    m.inline[..2].copy_from_slice(&[0xff, 0x01]);
                    m.len = 3;
                    m.ones = 9;
                    m
                }
                1 => Meta::paged(Kind::String, 77, 1 << 20, 5, 12345),
                _ => Meta::paged(Kind::Bloom, 9, 8192, 0, 0),
            };
            b.put(entry(&name, meta));
        }
        (start, b)
    }

    /// Encode then decode gives the bucket back, with inline counts
    /// recomputed.
    #[test]
    fn round_trips() {
        let (start, b) = sample();
        let back = Bucket::decode(1, start, &b.encode()).unwrap();
        assert_eq!(back, b);
        assert!(b.encode().len() <= b.bytes, "the size bound holds");
    }

    /// Every flipped bit and every truncation is an error, never a panic.
    #[test]
    fn damage_is_detected() {
        let (start, b) = sample();
        let enc = b.encode();
        for i in 0..enc.len() {
            for bit in [0x01, 0x80] {
                let mut d = enc.clone();
                d[i] ^= bit;
                assert!(Bucket::decode(1, start, &d).is_err(), "flip {bit:#x} at {i} accepted");
            }
        }
        for n in 0..enc.len() {
            assert!(Bucket::decode(1, start, &enc[..n]).is_err(), "truncation to {n} accepted");
        }
        assert!(Bucket::decode(1, start ^ 0x0100_0000, &enc).is_err(), "a bucket read at the wrong hash");
    }

    /// Splitting keeps every entry, each in the half holding its hash.
    #[test]
    fn split_partitions_by_the_next_bit() {
        let (start, b) = sample();
        let all = b.entries.clone();
        let (lo, upper, hi) = b.split(start);
        assert_eq!((lo.depth, hi.depth), (MIN_DEPTH + 1, MIN_DEPTH + 1));
        assert_eq!(lo.entries.len() + hi.entries.len(), all.len());
        assert!(lo.entries.iter().all(|e| covers(start, lo.depth, key_hash(&e.name))));
        assert!(hi.entries.iter().all(|e| covers(upper, hi.depth, key_hash(&e.name))));
        assert_eq!(Bucket::decode(0, upper, &hi.encode()).unwrap(), hi);
    }

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let bad = |r: String| Error::InvalidArgument(r);
            assert_eq!(Reader { b: &b, at: 0 }.varint(&bad).unwrap(), v);
        }
        let bad = |r: String| Error::InvalidArgument(r);
        assert!(Reader { b: &[0xff; 11], at: 0 }.varint(&bad).is_err());
        assert!(Reader { b: &[0x80], at: 0 }.varint(&bad).is_err());
    }
}
