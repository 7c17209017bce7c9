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
//! - 1 byte: version, 3 (2: format 6 stores, the same without Bloom bit
//!   entries; 1: format 5 stores; both still read).
//! - 4 bytes: number of entries (u32 LE).
//! - the entries, each:
//!   - versions 2 and 3: varint keyspace; varint, the bytes the name shares with
//!     the previous entry's name (0 for the first); varint, the length of
//!     the rest of the name, then those bytes;
//!   - version 1: 4 bytes keyspace (u32 LE); varint, the length of the
//!     name, then the name's bytes;
//!   - 1 byte: tag. [`TAG_REMOVED`] alone: the key was removed, nothing
//!     follows. [`TAG_BLOOM_BITS`] (version 3): the key's small Bloom
//!     filter gained items since the last record that holds it; then
//!     varint, its item count now; varint, how many bits were set (at
//!     least 1); the first bit's position, then each next one's distance
//!     from the one before less 1 (positions strictly rise), as varints.
//!     Otherwise a bucket entry's tag and the rest of its entry exactly as
//!     in a bucket (`bucket::put_entry`).
//! - 4 bytes: CRC-32 of everything before.
//!
//! Every name's hash lies in the record's shard. A record holds at most
//! about [`PART_BYTES`] bytes of entries; a write-back whose changes in one
//! shard are larger writes parts 0, 1, ... under the same number. The
//! writer sorts a write-back's changes by keyspace and name (a removal
//! before a new entry of the same name, which is the order they apply in),
//! so that neighbouring names share their prefixes: a sign-in key's change
//! costs about 20 bytes instead of about 33, and a BF.ADD to a filter
//! that was already stored about 20 bytes instead of its whole ~170-byte
//! entry.

use super::entry::{read_entry, seal_counted, sealed_body, shared_len, Reader};
#[cfg(test)]
use super::layout::key_hash;
use super::layout::{shard_of, KeyHash};
use super::record::Meta;
use crate::error::{Error, Result};
use crate::le::read_u32;
use crate::varint;

const VERSION: u8 = 3;
/// The version format 6 stores wrote: version 3 without Bloom bit entries.
const VERSION_2: u8 = 2;
/// The version format 5 stores wrote (names whole, keyspace in 4 bytes).
const VERSION_1: u8 = 1;
const HEADER: usize = 5;
/// The tag of a removal (no bucket entry tag has bit 7).
pub(crate) const TAG_REMOVED: u8 = 0x80;
/// The tag of bits set in a small Bloom filter (version 3).
pub(crate) const TAG_BLOOM_BITS: u8 = 0x81;
/// Bytes of entries after which a record is closed and the next part
/// begun: records stay far below the size sled moves to blob files.
pub(crate) const PART_BYTES: usize = 8192;
/// The most bytes of names a version 2 record may decode to per byte of
/// record read so far: shared prefixes make names longer than their
/// bytes, and without a bound a small crafted record would decode to
/// gigabytes. The writer starts a new part (where nothing is shared)
/// before a name would pass it.
const NAME_EXPANSION: usize = 16;

/// One change of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeltaEntry {
    pub(crate) ks: u32,
    pub(crate) name: Vec<u8>,
    pub(crate) change: Change,
}

/// What a delta record says of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The key was removed.
    Removed,
    /// The key's whole metadata entry.
    Entry(Meta),
    /// The key's small Bloom filter (stored before, in an entry or a
    /// record the key's bucket applies first) now counts `items` and has
    /// the bits at `positions` (strictly rising, at least one) set.
    BloomBits { items: u64, positions: Vec<u64> },
}

/// One change held by a [`DeltaWriter`]: where its name and its encoded
/// change (tag first) lie in the writer's arena.
struct Held {
    ks: u32,
    name: (usize, usize),
    change: (usize, usize),
}

/// Collects the changes of one shard in one write-back and encodes them
/// as records, sorted so that names share prefixes.
#[derive(Default)]
pub(crate) struct DeltaWriter {
    arena: Vec<u8>,
    held: Vec<Held>,
}

impl DeltaWriter {
    /// Adds the change of key `name` of keyspace `ks`: its entry in record
    /// form, or `None` for its removal. A removal of a name must come
    /// before a new entry of the same name (the order they happened in).
    pub(crate) fn add(&mut self, ks: u32, name: &[u8], entry: Option<&[u8]>) {
        self.hold(ks, name, |arena| match entry {
            Some(e) => arena.extend_from_slice(e),
            None => arena.push(TAG_REMOVED),
        });
    }

    /// Adds the change of key `name` of keyspace `ks` whose small Bloom
    /// filter, as the store last held it, gained the bits at `positions`
    /// (sorted, no repeats, at least one) and now counts `items`.
    pub(crate) fn add_bloom_bits(&mut self, ks: u32, name: &[u8], items: u64, positions: &[u64]) {
        self.hold(ks, name, |arena| put_bloom_bits(arena, items, positions));
    }

    fn hold(&mut self, ks: u32, name: &[u8], put: impl FnOnce(&mut Vec<u8>)) {
        let at = self.arena.len();
        self.arena.extend_from_slice(name);
        let name = (at, self.arena.len());
        put(&mut self.arena);
        self.held.push(Held { ks, name, change: (name.1, self.arena.len()) });
    }

    /// The indexes of the held changes in (keyspace, name) order, a
    /// removal before an entry of the same name (the order they were
    /// added in). The sort compares integers first: the keyspace, then the
    /// eight bytes of the name that follow the prefix every held name
    /// shares (zero-padded), so names are compared whole only where those
    /// tie.
    fn sorted(&self) -> Vec<usize> {
        let name = |h: &Held| &self.arena[h.name.0..h.name.1];
        let first = self.held.first().map_or(&[][..], name);
        let common = self.held.iter().fold(first.len(), |c, h| c.min(shared_len(&first[..c], name(h))));
        let mut order: Vec<(u32, u64, usize)> = (self.held.iter().enumerate())
            .map(|(i, h)| {
                let rest = &name(h)[common..];
                let mut word = [0u8; 8];
                let n = rest.len().min(8);
                word[..n].copy_from_slice(&rest[..n]);
                (h.ks, u64::from_be_bytes(word), i)
            })
            .collect();
        order.sort_unstable_by(|a, b| {
            (a.0, a.1)
                .cmp(&(b.0, b.1))
                .then_with(|| name(&self.held[a.2]).cmp(name(&self.held[b.2])))
                .then(a.2.cmp(&b.2))
        });
        order.into_iter().map(|(_, _, i)| i).collect()
    }

    /// The finished records, part 0 first: the changes in (keyspace, name)
    /// order, a removal before an entry of the same name.
    pub(crate) fn finish(self) -> Vec<Vec<u8>> {
        let arena = &self.arena;
        let name = |h: &Held| &arena[h.name.0..h.name.1];
        let mut done = Vec::new();
        let mut open: Option<(Vec<u8>, u32)> = None;
        let mut prev: &[u8] = &[];
        // Bytes of names the open part decodes to.
        let mut names = 0;
        for h in self.sorted().into_iter().map(|i| &self.held[i]) {
            let n = name(h);
            let mut shared = shared_len(prev, n);
            if let Some((p, _)) = &open {
                // What the record will have been read up to after this
                // entry, at least: its keyspace, lengths and the rest.
                let read = p.len() + 3 + n.len() - shared;
                if names + n.len() > NAME_EXPANSION * read {
                    done.extend(open.take().map(seal));
                }
            }
            let (p, count) = open.get_or_insert_with(|| {
                prev = &[];
                shared = 0;
                names = 0;
                let mut p = Vec::with_capacity(PART_BYTES + 512);
                p.push(VERSION);
                p.extend_from_slice(&[0; 4]);
                (p, 0)
            });
            names += n.len();
            varint::put(p, u64::from(h.ks));
            varint::put(p, shared as u64);
            varint::put(p, (n.len() - shared) as u64);
            p.extend_from_slice(&n[shared..]);
            p.extend_from_slice(&arena[h.change.0..h.change.1]);
            prev = n;
            *count += 1;
            if p.len() >= PART_BYTES {
                done.extend(open.take().map(seal));
            }
        }
        done.extend(open.map(seal));
        done
    }
}

/// Writes a [`TAG_BLOOM_BITS`] change: the tag, the item count, the
/// number of positions and their gaps.
fn put_bloom_bits(b: &mut Vec<u8>, items: u64, positions: &[u64]) {
    b.push(TAG_BLOOM_BITS);
    varint::put(b, items);
    varint::put(b, positions.len() as u64);
    let mut next = 0;
    for &p in positions {
        varint::put(b, p - next);
        next = p + 1;
    }
}

/// Reads a [`TAG_BLOOM_BITS`] change after its tag.
fn read_bloom_bits(r: &mut Reader<'_>, bad: &dyn Fn(String) -> Error) -> Result<Change> {
    let items = r.varint(bad)?;
    // Each position takes at least a byte: no allocation from a bad count.
    let n = r.len(bad)?;
    if n == 0 {
        return Err(bad("Bloom bits with no position".into()));
    }
    let mut positions = Vec::with_capacity(n);
    let mut next = 0u64;
    for _ in 0..n {
        let p = next
            .checked_add(r.varint(bad)?)
            .filter(|&p| p < u64::MAX)
            .ok_or_else(|| bad("a Bloom bit position past 64 bits".into()))?;
        positions.push(p);
        next = p + 1;
    }
    Ok(Change::BloomBits { items, positions })
}

/// Closes a part: its entry count and checksum.
fn seal((p, count): (Vec<u8>, u32)) -> Vec<u8> {
    seal_counted(p, count)
}

/// Parses and validates a delta record of shard `shard` of a store hashing
/// names by `hash` (`what` names it
/// in errors: its key).
///
/// # Errors
/// [`Error::Corrupted`] for any damage; never panics.
pub(crate) fn decode(hash: KeyHash, shard: usize, what: &str, b: &[u8]) -> Result<Vec<DeltaEntry>> {
    let bad = |reason: String| Error::Corrupted {
        key: format!("<metadata delta {what}>"),
        page: None,
        reason: format!("metadata delta: {reason}"),
    };
    // Any version: the check of the version byte is the one below.
    let version = match b.first() {
        Some(&VERSION_1) => VERSION_1,
        Some(&VERSION_2) => VERSION_2,
        _ => VERSION,
    };
    let body = sealed_body(b, HEADER, version, &bad)?;
    let count = read_u32(body, 1);
    if count == 0 {
        return Err(bad("no entries".into()));
    }
    let mut r = Reader { b: body, at: HEADER };
    // Each entry takes at least 4 bytes: no allocation from a bad count.
    let mut out: Vec<DeltaEntry> = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(body.len() / 4));
    let mut names = 0usize;
    for _ in 0..count {
        let (ks, name) = if version == VERSION_1 {
            let ks = read_u32(r.take(4, &bad)?, 0);
            let len = r.len(&bad)?;
            (ks, r.take(len, &bad)?.to_vec())
        } else {
            let ks = u32::try_from(r.varint(&bad)?).map_err(|_| bad("keyspace beyond 32 bits".into()))?;
            let shared = r.len(&bad)?;
            let prev = out.last().map_or(&[][..], |e| &e.name[..]);
            if shared > prev.len() {
                return Err(bad(format!("name shares {shared} bytes with a {}-byte name", prev.len())));
            }
            let rest = r.len(&bad)?;
            let tail = r.take(rest, &bad)?;
            names += shared + rest;
            if names > NAME_EXPANSION * r.at {
                return Err(bad(format!("{names} bytes of names from {} bytes of record", r.at)));
            }
            let mut name = prev[..shared].to_vec();
            name.extend_from_slice(tail);
            (ks, name)
        };
        if shard_of(hash.of(&name)) != shard {
            return Err(bad(format!("key {:?} is not of shard {shard}", String::from_utf8_lossy(&name))));
        }
        let tag = r.take(1, &bad)?[0];
        let change = match tag {
            TAG_REMOVED => Change::Removed,
            TAG_BLOOM_BITS if version == VERSION => read_bloom_bits(&mut r, &bad)?,
            _ => Change::Entry(read_entry(&mut r, &name, tag, &bad)?),
        };
        out.push(DeltaEntry { ks, name, change });
    }
    if r.at != body.len() {
        return Err(bad(format!("{} bytes after the last entry", body.len() - r.at)));
    }
    Ok(out)
}

/// `entries` in the order records keep them: by keyspace and name, equal
/// names in the order given (which keeps what they mean: a removal and an
/// entry of one name apply in turn, and changes of different names
/// commute).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn in_record_order(entries: &[DeltaEntry]) -> Vec<DeltaEntry> {
    let mut out = entries.to_vec();
    out.sort_by(|a, b| (a.ks, &a.name).cmp(&(b.ks, &b.name)));
    out
}

/// Encodes `entries` (all of shard `shard`'s) as records, for tests and
/// the fuzz target's round trip; they come back [`in_record_order`].
#[cfg(any(test, feature = "testing"))]
pub(crate) fn encode(entries: &[DeltaEntry]) -> Vec<Vec<u8>> {
    let mut w = DeltaWriter::default();
    for e in entries {
        match &e.change {
            Change::Removed => w.add(e.ks, &e.name, None),
            Change::Entry(m) => {
                let mut b = Vec::new();
                super::entry::put_entry(&mut b, m);
                w.add(e.ks, &e.name, Some(&b));
            }
            Change::BloomBits { items, positions } => w.add_bloom_bits(e.ks, &e.name, *items, positions),
        }
    }
    w.finish()
}

/// `entries` as one version 1 record, in their order.
#[cfg(test)]
pub(crate) fn encode_v1(entries: &[DeltaEntry]) -> Vec<u8> {
    let mut p = vec![VERSION_1];
    p.extend_from_slice(&u32::try_from(entries.len()).unwrap().to_le_bytes());
    for e in entries {
        p.extend_from_slice(&e.ks.to_le_bytes());
        varint::put(&mut p, e.name.len() as u64);
        p.extend_from_slice(&e.name);
        match &e.change {
            Change::Entry(m) => super::entry::put_entry(&mut p, m),
            Change::Removed => p.push(TAG_REMOVED),
            Change::BloomBits { .. } => panic!("version 1 records hold no Bloom bits"),
        }
    }
    let crc = crc32fast::hash(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
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
            let change = match out.len() % 4 {
                0 => Change::Removed,
                1 => {
                    let mut m = Meta::empty(Kind::String);
                    m.inline[..3].copy_from_slice(&[0xff, 0, 1]);
                    m.len = 3;
                    m.ones = 9;
                    Change::Entry(m)
                }
                2 => Change::Entry(Meta::paged(Kind::String, 77, 1 << 20, 5, 12345)),
                _ => Change::Entry(Meta::paged(Kind::Bloom, 9, 8192, 0, 0)),
            };
            let ks = u32::try_from(out.len() % 2).unwrap_or(0);
            out.push(DeltaEntry { ks, name, change });
        }
        (shard, out)
    }

    /// Encode then decode gives the entries back in record order (sorted
    /// by keyspace and name, a removal before a new entry of the same
    /// name), across parts; names share prefixes.
    #[test]
    fn round_trips_across_parts() {
        let (shard, mut entries) = sample(1000);
        // A key removed and set again in one write-back.
        let again = DeltaEntry { change: Change::Entry(Meta::paged(Kind::String, 5, 100, 1, 0)), ..entries[0].clone() };
        entries.push(again);
        let v1 = encode_v1(&entries).len();
        // Bloom bits: one position, a run of neighbours, wide gaps.
        for (i, e) in entries.iter_mut().enumerate().skip(1).step_by(7) {
            let positions = match i % 3 {
                0 => vec![1151],
                1 => (40..47).collect(),
                _ => vec![0, 1 << 20, (1 << 40) + 3, u64::MAX - 1],
            };
            e.change = Change::BloomBits { items: u64::try_from(i).unwrap(), positions };
        }
        let parts = encode(&entries);
        assert!(parts.len() > 1, "1000 entries span several parts");
        assert!(parts.iter().all(|p| p.len() < PART_BYTES + 200), "parts stay near their size");
        let back: Vec<DeltaEntry> = parts.iter().flat_map(|p| decode(KeyHash::NEW, shard, "t", p).unwrap()).collect();
        assert_eq!(back, in_record_order(&entries));
        let i = back.iter().position(|e| e.name == entries[0].name).unwrap();
        assert!(
            back[i].change == Change::Removed && matches!(back[i + 1].change, Change::Entry(_)),
            "the removal applies first"
        );
        let bytes: usize = parts.iter().map(Vec::len).sum();
        assert!(bytes * 10 < v1 * 8, "{bytes} bytes against {v1} in version 1");
    }

    /// The writer's order is (keyspace, name), byte-wise, a removal before
    /// an entry of the same name, for names that tie in the eight bytes
    /// the sort compares first: prefixes of one another, zero bytes,
    /// names shorter than the shared prefix would suggest, the empty name.
    #[test]
    fn the_order_is_by_keyspace_and_whole_name() {
        let names: Vec<&[u8]> = vec![
            b"user:12345678:a",
            b"user:12345678",
            b"user:12345678\0",
            b"user:12345678\0\0",
            b"user:1234567",
            b"user:",
            b"user:\0",
            b"user:12345678:b",
            b"user:\xff",
            b"",
        ];
        let mut entries = Vec::new();
        for (i, n) in names.iter().enumerate() {
            for ks in [1u32, 0] {
                entries.push(DeltaEntry { ks, name: n.to_vec(), change: Change::Removed });
                let meta = Meta::paged(Kind::String, u64::try_from(i).unwrap() + 1, 10, 1, 0);
                entries.push(DeltaEntry { ks, name: n.to_vec(), change: Change::Entry(meta) });
            }
        }
        // The writer's order itself (the names span every shard, so its
        // records would not decode as one shard's).
        let mut w = DeltaWriter::default();
        for e in &entries {
            w.add(e.ks, &e.name, matches!(e.change, Change::Entry(_)).then_some(&b"x"[..]));
        }
        let key = |e: &DeltaEntry| (e.ks, e.name.clone(), e.change != Change::Removed);
        let got: Vec<(u32, Vec<u8>, bool)> = w.sorted().into_iter().map(|i| key(&entries[i])).collect();
        let want: Vec<(u32, Vec<u8>, bool)> = in_record_order(&entries).iter().map(key).collect();
        assert_eq!(got, want);
    }

    /// Names that share long prefixes round-trip: the writer starts new
    /// parts so that no record decodes to more than its bound of name
    /// bytes. A crafted record whose entries repeat a long name from a few
    /// bytes each is refused instead of decoded to that many copies.
    #[test]
    fn shared_prefixes_are_bounded() {
        let long = vec![b'x'; 4000];
        let mut entries = Vec::new();
        let mut i = 0u32;
        while entries.len() < 300 {
            let mut name = long.clone();
            name.extend_from_slice(format!("{i:06}").as_bytes());
            i += 1;
            if shard_of(key_hash(&name)) == 0 {
                entries.push(DeltaEntry { ks: 0, name, change: Change::Removed });
            }
        }
        let parts = encode(&entries);
        let back: Vec<DeltaEntry> = parts.iter().flat_map(|p| decode(KeyHash::NEW, 0, "t", p).unwrap()).collect();
        assert_eq!(back, in_record_order(&entries));
        // One 4,006-byte name, then 1,000 entries sharing all of it.
        let first = &entries[0].name;
        let mut p = vec![VERSION];
        p.extend_from_slice(&1001u32.to_le_bytes());
        for k in 0..1001 {
            p.push(0);
            let (shared, rest) = if k == 0 { (0, &first[..]) } else { (first.len(), &[][..]) };
            varint::put(&mut p, shared as u64);
            varint::put(&mut p, rest.len() as u64);
            p.extend_from_slice(rest);
            p.push(TAG_REMOVED);
        }
        let crc = crc32fast::hash(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        let e = decode(KeyHash::NEW, 0, "t", &p).unwrap_err().to_string();
        assert!(e.contains("bytes of names"), "{e}");
    }

    /// Records of format 5 stores (version 1: whole names, 4-byte
    /// keyspaces) still decode, to the entries they hold in their order.
    #[test]
    fn version_1_records_decode() {
        let (shard, entries) = sample(40);
        let mut p = encode_v1(&entries);
        assert_eq!(decode(KeyHash::NEW, shard, "t", &p).unwrap(), entries);
        p[0] = 4;
        assert!(decode(KeyHash::NEW, shard, "t", &p).is_err(), "an unknown version");
    }

    /// A record as the writer makes it, with its version byte and
    /// checksum set to `version`.
    fn as_version(mut p: Vec<u8>, version: u8) -> Vec<u8> {
        p.truncate(p.len() - 4);
        p[0] = version;
        let crc = crc32fast::hash(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        p
    }

    /// Bloom bit entries are version 3's only: a version 2 record holding
    /// one is refused (its tag is no bucket entry's), as are bits with no
    /// position; a version 2 record of whole entries still decodes.
    #[test]
    fn bloom_bits_need_version_3() {
        let (shard, mut entries) = sample(4);
        let whole = encode(&entries).remove(0);
        assert_eq!(decode(KeyHash::NEW, shard, "t", &as_version(whole, VERSION_2)).unwrap(), in_record_order(&entries));
        entries[1].change = Change::BloomBits { items: 3, positions: vec![5, 9] };
        let p = encode(&entries).remove(0);
        assert_eq!(decode(KeyHash::NEW, shard, "t", &p).unwrap(), in_record_order(&entries));
        assert!(decode(KeyHash::NEW, shard, "t", &as_version(p, VERSION_2)).is_err());
        let one = vec![DeltaEntry { change: Change::BloomBits { items: 1, positions: vec![7] }, ..entries[1].clone() }];
        let p = encode(&one).remove(0);
        // The record ends: tag, items 1, one position, position 7, crc.
        let at = p.len() - 4 - 3;
        assert_eq!(&p[at - 1..p.len() - 4], &[TAG_BLOOM_BITS, 1, 1, 7]);
        let mut none = p[..at].to_vec();
        none.extend_from_slice(&[1, 0]);
        none.extend_from_slice(&[0; 4]);
        let e = decode(KeyHash::NEW, shard, "t", &as_version(none, VERSION)).unwrap_err().to_string();
        assert!(e.contains("no position"), "{e}");
    }

    /// Bloom bit positions that would pass 64 bits are refused (the
    /// checksum is right: only the decoding's own check stands).
    #[test]
    fn bloom_bits_past_64_bits_are_refused() {
        let (shard, entries) = sample(1);
        let one = vec![DeltaEntry { change: Change::BloomBits { items: 1, positions: vec![7] }, ..entries[0].clone() }];
        let p = encode(&one).remove(0);
        // Replace the one position (7) by two: u64::MAX - 1, then one more.
        let at = p.len() - 4 - 2;
        assert_eq!(&p[at..p.len() - 4], &[1, 7]);
        let mut far = p[..at].to_vec();
        varint::put(&mut far, 2);
        varint::put(&mut far, u64::MAX - 1);
        varint::put(&mut far, 0);
        far.extend_from_slice(&[0; 4]);
        let e = decode(KeyHash::NEW, shard, "t", &as_version(far, VERSION)).unwrap_err().to_string();
        assert!(e.contains("past 64 bits"), "{e}");
    }

    /// Every flipped bit and every truncation is an error, never a panic;
    /// a record read as another shard's is refused.
    #[test]
    fn damage_is_detected() {
        let (shard, mut entries) = sample(12);
        entries[5].change = Change::BloomBits { items: 9, positions: vec![3, 4, 700] };
        let enc = encode(&entries).remove(0);
        for i in 0..enc.len() {
            for bit in [0x01, 0x80] {
                let mut d = enc.clone();
                d[i] ^= bit;
                assert!(decode(KeyHash::NEW, shard, "t", &d).is_err(), "flip {bit:#x} at {i} accepted");
            }
        }
        for n in 0..enc.len() {
            assert!(decode(KeyHash::NEW, shard, "t", &enc[..n]).is_err(), "truncation to {n} accepted");
        }
        assert!(decode(KeyHash::NEW, shard ^ 1, "t", &enc).is_err(), "a record read as another shard's");
    }
}
