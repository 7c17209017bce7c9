//! Metadata delta records: the key metadata changed by one write-back in
//! one lock shard, so that a key's change costs the store its own entry
//! rather than a rewrite of its whole bucket.
//!
//! A write-back writes, for each shard with changes, the changed entries
//! (and removals) of that shard as one or more delta records; the buckets
//! those entries belong to stay in the cache, *unfolded* (newer than their
//! stored records), until a *fold* writes the shard's unfolded buckets whole
//! and deletes its delta records in one batch. At open, the stored delta
//! records are replayed into their buckets in sequence order and folded
//! (see DESIGN.md, section 5).
//!
//! The record (key `0x08 | shard | write-back number | part`, see
//! `layout.rs`):
//!
//! ```text
//!  0     1         5
//!  | ver | entries | entry ... | crc32 |
//! ```
//!
//! - 1 byte: version, 1.
//! - 4 bytes: number of entries (u32 LE).
//! - the entries, each:
//!   - 4 bytes: keyspace (u32 LE);
//!   - varint: length of the name, then the name's bytes;
//!   - 1 byte: tag. [`TAG_REMOVED`] alone: the key was removed, nothing
//!     follows. Otherwise a bucket entry's tag and the rest of its entry
//!     exactly as in a bucket (`bucket::put_entry`).
//! - 4 bytes: CRC-32 of everything before.
//!
//! Every name's hash lies in the record's shard. A record holds at most
//! about [`PART_BYTES`] bytes of entries; a write-back whose changes in one
//! shard are larger writes parts 0, 1, ... under the same number.

use super::entry::{read_entry, sealed_body, Reader};
use super::layout::{key_hash, shard_of};
use super::record::Meta;
use crate::error::{Error, Result};
use crate::le::read_u32;
use crate::varint;

const VERSION: u8 = 1;
const HEADER: usize = 5;
/// The tag of a removal (no bucket entry tag has bit 7).
pub(crate) const TAG_REMOVED: u8 = 0x80;
/// Bytes of entries after which a record is closed and the next part
/// begun: records stay far below the size sled moves to blob files.
pub(crate) const PART_BYTES: usize = 8192;

/// One change: a key's new metadata, or `None` for its removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeltaEntry {
    pub(crate) ks: u32,
    pub(crate) name: Vec<u8>,
    pub(crate) meta: Option<Meta>,
}

/// Builds the records of one shard's changes.
#[derive(Default)]
pub(crate) struct DeltaWriter {
    done: Vec<Vec<u8>>,
    /// The part being filled and its number of entries.
    open: Option<(Vec<u8>, u32)>,
}

impl DeltaWriter {
    /// Adds the change of key `name` of keyspace `ks`.
    pub(crate) fn add(&mut self, ks: u32, name: &[u8], entry: Option<&[u8]>) {
        let (p, count) = self.open.get_or_insert_with(|| {
            let mut p = Vec::with_capacity(PART_BYTES + 512);
            p.push(VERSION);
            p.extend_from_slice(&[0; 4]);
            (p, 0)
        });
        p.extend_from_slice(&ks.to_le_bytes());
        varint::put(p, name.len() as u64);
        p.extend_from_slice(name);
        match entry {
            Some(e) => p.extend_from_slice(e),
            None => p.push(TAG_REMOVED),
        }
        *count += 1;
        if p.len() >= PART_BYTES {
            self.seal();
        }
    }

    /// Closes the open part: its entry count and checksum.
    fn seal(&mut self) {
        if let Some((mut p, count)) = self.open.take() {
            p[1..HEADER].copy_from_slice(&count.to_le_bytes());
            let crc = crc32fast::hash(&p);
            p.extend_from_slice(&crc.to_le_bytes());
            self.done.push(p);
        }
    }

    /// The finished records, part 0 first.
    pub(crate) fn finish(mut self) -> Vec<Vec<u8>> {
        self.seal();
        self.done
    }
}

/// Parses and validates a delta record of shard `shard` (`what` names it
/// in errors: its key).
///
/// # Errors
/// [`Error::Corrupted`] for any damage; never panics.
pub(crate) fn decode(shard: usize, what: &str, b: &[u8]) -> Result<Vec<DeltaEntry>> {
    let bad = |reason: String| Error::Corrupted {
        key: format!("<metadata delta {what}>"),
        page: None,
        reason: format!("metadata delta: {reason}"),
    };
    let body = sealed_body(b, HEADER, VERSION, &bad)?;
    let count = read_u32(body, 1);
    if count == 0 {
        return Err(bad("no entries".into()));
    }
    let mut r = Reader { b: body, at: HEADER };
    // Each entry takes at least 6 bytes: no allocation from a bad count.
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(body.len() / 6));
    for _ in 0..count {
        let ks = read_u32(r.take(4, &bad)?, 0);
        let len = r.len(&bad)?;
        let name = r.take(len, &bad)?.to_vec();
        if shard_of(key_hash(&name)) != shard {
            return Err(bad(format!("key {:?} is not of shard {shard}", String::from_utf8_lossy(&name))));
        }
        let tag = r.take(1, &bad)?[0];
        let meta = if tag == TAG_REMOVED { None } else { Some(read_entry(&mut r, &name, tag, &bad)?) };
        out.push(DeltaEntry { ks, name, meta });
    }
    if r.at != body.len() {
        return Err(bad(format!("{} bytes after the last entry", body.len() - r.at)));
    }
    Ok(out)
}

/// Encodes `entries` (all of shard `shard`'s) as records, for tests and
/// the fuzz target's round trip.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn encode(entries: &[DeltaEntry]) -> Vec<Vec<u8>> {
    let mut w = DeltaWriter::default();
    for e in entries {
        let entry = e.meta.as_ref().map(|m| {
            let mut b = Vec::new();
            super::entry::put_entry(&mut b, m);
            b
        });
        w.add(e.ks, &e.name, entry.as_deref());
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::super::record::Kind;
    use super::*;

    /// Changes of keys of one shard: removals, inline and paged values,
    /// expiries, two keyspaces.
    fn sample(n: usize) -> (usize, Vec<DeltaEntry>) {
        let shard = shard_of(key_hash(b"k0"));
        let mut out = Vec::new();
        let mut i = 0;
        while out.len() < n {
            let name = format!("k{i}").into_bytes();
            i += 1;
            if shard_of(key_hash(&name)) != shard {
                continue;
            }
            let meta = match out.len() % 4 {
                0 => None,
                1 => {
                    let mut m = Meta::empty(Kind::String);
                    m.inline[..3].copy_from_slice(&[0xff, 0, 1]);
                    m.len = 3;
                    m.ones = 9;
                    Some(m)
                }
                2 => Some(Meta::paged(Kind::String, 77, 1 << 20, 5, 12345)),
                _ => Some(Meta::paged(Kind::Bloom, 9, 8192, 0, 0)),
            };
            let ks = u32::try_from(out.len() % 2).unwrap_or(0);
            out.push(DeltaEntry { ks, name, meta });
        }
        (shard, out)
    }

    /// Encode then decode gives the entries back, in order, across parts.
    #[test]
    fn round_trips_across_parts() {
        let (shard, entries) = sample(1000);
        let parts = encode(&entries);
        assert!(parts.len() > 1, "1000 entries span several parts");
        assert!(parts.iter().all(|p| p.len() < PART_BYTES + 200), "parts stay near their size");
        let back: Vec<DeltaEntry> = parts.iter().flat_map(|p| decode(shard, "t", p).unwrap()).collect();
        assert_eq!(back, entries);
    }

    /// Every flipped bit and every truncation is an error, never a panic;
    /// a record read as another shard's is refused.
    #[test]
    fn damage_is_detected() {
        let (shard, entries) = sample(12);
        let enc = encode(&entries).remove(0);
        for i in 0..enc.len() {
            for bit in [0x01, 0x80] {
                let mut d = enc.clone();
                d[i] ^= bit;
                assert!(decode(shard, "t", &d).is_err(), "flip {bit:#x} at {i} accepted");
            }
        }
        for n in 0..enc.len() {
            assert!(decode(shard, "t", &enc[..n]).is_err(), "truncation to {n} accepted");
        }
        assert!(decode(shard ^ 1, "t", &enc).is_err(), "a record read as another shard's");
    }
}
