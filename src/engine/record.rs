//! Record formats: key metadata as operations see it, the superblock, the
//! write-back sequence record, the keyspace catalog, and format 1's
//! metadata record (read only to upgrade a store). Buckets, which hold the
//! metadata on disk, are in `bucket.rs`.

use super::layout::KeyHash;
use crate::error::{Error, Result};
use crate::geometry::PAGE_WORDS as WORDS_PER_PAGE;
use crate::le::{read_u32, read_u64};

/// The on-disk format version this build writes.
pub(crate) const FORMAT_VERSION: u8 = 11;
/// Format 10: format 11 whose page delta records are of version 1 (no
/// resets: page folds were never spread over write-backs). This build
/// reads both versions, so opening a format 10 store only rewrites the
/// superblock.
pub(crate) const FORMAT_V10: u8 = 10;
/// Format 9: format 10 whose catalog is of version 2 (no key hash byte):
/// its names hash by [`KeyHash::Murmur`], which this build keeps using for
/// such a store, so opening one only rewrites the superblock.
pub(crate) const FORMAT_V9: u8 = 9;
/// Format 8: format 9 without run lists (page and group records of
/// version 1 only). This build reads both record versions, so opening a
/// format 8 store only rewrites the superblock.
pub(crate) const FORMAT_V8: u8 = 8;
/// Format 7: format 8 without page delta records. Every format 7 store is
/// a valid format 8 store, so opening one only rewrites the superblock.
pub(crate) const FORMAT_V7: u8 = 7;
/// Format 6: format 7 whose metadata delta records are of version 2 (no Bloom bit
/// changes). This build reads them, so opening a format 6 store only
/// rewrites the superblock.
pub(crate) const FORMAT_V6: u8 = 6;
/// Format 5: format 6 with metadata delta records of version 1 only
/// (whole names). This build reads both versions, so opening a format 5
/// store only rewrites the superblock.
pub(crate) const FORMAT_V5: u8 = 5;
/// Format 4: format 5 without small Bloom filters kept inline. Every
/// format 4 store is a valid format 5 store, so opening one only rewrites
/// the superblock.
pub(crate) const FORMAT_V4: u8 = 4;
/// Format 3: format 4 without metadata delta records. Every format 3
/// store is a valid format 4 store, so opening one only rewrites the
/// superblock.
pub(crate) const FORMAT_V3: u8 = 3;
/// The oldest format this build can upgrade from (metadata records per
/// key, see `upgrade.rs`).
pub(crate) const FORMAT_V1: u8 = 1;
/// Format 2: format 3 without page groups. Every format 2 store is a valid
/// format 3 store, so opening one only rewrites the superblock.
pub(crate) const FORMAT_V2: u8 = 2;
/// The catalog record's own version: 3 since format 10 (the key hash
/// byte).
const CATALOG_VERSION: u8 = 3;
/// The catalog version of format 9 and earlier stores (no key hash byte:
/// their names hash by [`KeyHash::Murmur`]); read, never written.
const CATALOG_VERSION_2: u8 = 2;

/// The longest string kept inline in its key's metadata entry instead of
/// in pages: 64 bytes (512 bits; a month of daily sign-ins needs 4).
pub(crate) const INLINE_MAX: u64 = 64;
/// The longest small Bloom filter (its compact header and one sub-filter's
/// bits, `crate::bloom::small`) kept inline: 512 bytes, a default filter
/// (capacity 100 at 1%: 144 bytes of bits) with room for capacities up to
/// about 350 at 1%.
pub(crate) const INLINE_BLOOM_MAX: u64 = 512;

/// What a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// A Redis string, stored as a paged bitmap or inline.
    String = 1,
    /// A scalable Bloom filter: header and bit arrays in the bitmap's pages.
    Bloom = 2,
}

impl Kind {
    /// The longest value of this type kept inline.
    pub(crate) const fn inline_max(self) -> u64 {
        match self {
            Kind::String => INLINE_MAX,
            Kind::Bloom => INLINE_BLOOM_MAX,
        }
    }
}

impl TryFrom<u8> for Kind {
    type Error = String;
    fn try_from(b: u8) -> Result<Self, String> {
        match b {
            1 => Ok(Kind::String),
            2 => Ok(Kind::Bloom),
            other => Err(format!("unknown key type {other}")),
        }
    }
}

/// Where a key's value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    /// In pages stored under this bitmap id (never reused).
    Paged(u64),
    /// In the key's metadata entry itself (at most [`Kind::inline_max`]
    /// bytes).
    Inline,
    /// One small page of a string, page number `page`, kept in the key's
    /// metadata entry: the inline bytes hold its member form (`bytes` of
    /// them, at most [`crate::page::LONE_MAX`]; `page::encode_lone`).
    Page { page: u64, bytes: u8 },
}

/// Bytes of an inline value of any type (the largest limit), as a `usize`.
#[expect(clippy::cast_possible_truncation, reason = "512")]
pub(crate) const INLINE_BYTES: usize = INLINE_BLOOM_MAX as usize;
const _: () = assert!(INLINE_MAX <= INLINE_BLOOM_MAX);

/// Metadata of one key.
#[derive(Clone, Debug)]
pub(crate) struct Meta {
    /// What the key holds.
    pub(crate) kind: Kind,
    /// Where the value lives. Private to the engine: operations reach
    /// values through a transaction.
    pub(super) body: Body,
    /// Logical length in bytes (Redis STRLEN).
    pub(crate) len: u64,
    /// Number of set bits. Private to the engine, which keeps it as pages
    /// and inline bytes change: operations read it with [`Meta::ones`].
    pub(super) ones: u64,
    /// Expiry as Unix time in milliseconds; 0 means none.
    pub(crate) expire_at_ms: u64,
    /// An inline body's bytes (the first `len`; the rest zero); all zero
    /// for a paged body.
    pub(super) inline: InlineBytes,
    /// The value was last changed in place (SETBIT, SETRANGE, APPEND...),
    /// not written whole: Redis's `raw` encoding of a short string. Kept in
    /// the cache only (never stored: Redis too forgets it on a reload) and
    /// left out of comparisons.
    pub(crate) changed_in_place: bool,
}

impl PartialEq for Meta {
    fn eq(&self, other: &Meta) -> bool {
        self.kind == other.kind
            && self.body == other.body
            && self.len == other.len
            && self.ones == other.ones
            && self.expire_at_ms == other.expire_at_ms
            && self.inline == other.inline
    }
}

impl Eq for Meta {}

/// Bytes kept in place for an inline value: a string's limit, so a string's
/// metadata copies in a few cache lines; longer inline values (small Bloom
/// filters) move to a box.
const INLINE_SHORT: usize = 64;
const _: () = assert!(INLINE_SHORT as u64 >= INLINE_MAX);

/// An inline value's bytes, zero past its length: [`INLINE_SHORT`] in
/// place, or [`INLINE_BYTES`] in a box once more are needed. As a slice it
/// is its whole buffer (64 or 512 bytes).
#[derive(Clone, Debug)]
pub(crate) struct InlineBytes {
    short: [u8; INLINE_SHORT],
    long: Option<Box<[u8]>>,
}

impl InlineBytes {
    /// All zero, in place.
    pub(crate) fn zeroed() -> InlineBytes {
        InlineBytes { short: [0; INLINE_SHORT], long: None }
    }

    /// The buffer, grown to hold at least `n` bytes (at most
    /// [`INLINE_BYTES`]), keeping its bytes.
    pub(crate) fn room(&mut self, n: usize) -> &mut [u8] {
        if n > INLINE_SHORT && self.long.is_none() {
            let mut long = vec![0; INLINE_BYTES].into_boxed_slice();
            long[..INLINE_SHORT].copy_from_slice(&self.short);
            self.long = Some(long);
        }
        self
    }
}

impl std::ops::Deref for InlineBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.long.as_deref().unwrap_or(&self.short)
    }
}

impl std::ops::DerefMut for InlineBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.long {
            Some(long) => long,
            None => &mut self.short,
        }
    }
}

impl PartialEq for InlineBytes {
    /// The same bytes, the shorter buffer read as zero past its end.
    fn eq(&self, other: &InlineBytes) -> bool {
        let (a, b): (&[u8], &[u8]) = (self, other);
        let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
        long[..short.len()] == *short && long[short.len()..].iter().all(|&x| x == 0)
    }
}

impl Eq for InlineBytes {}

impl Meta {
    /// The bitmap id of a paged value.
    pub(super) fn id(&self) -> Option<u64> {
        match self.body {
            Body::Paged(id) => Some(id),
            Body::Inline | Body::Page { .. } => None,
        }
    }

    /// The page kept in the entry, with its number, for a value of one
    /// page kept there (`Body::Page`).
    ///
    /// # Errors
    /// [`Error::Corrupted`] naming `key` if the member form does not
    /// decode (it was validated when the entry was read, so only a bug
    /// reaches this).
    pub(crate) fn lone_page(&self, key: &[u8]) -> Result<Option<(u64, crate::page::Page)>> {
        let Body::Page { page, bytes } = self.body else { return Ok(None) };
        let member = &self.inline[..usize::from(bytes).min(self.inline.len())];
        crate::page::decode_lone(member).map(|p| Some((page, p))).map_err(|e| bad_meta(key, e))
    }

    /// Bytes the entry keeps beside its name, length and expiry for its
    /// value: the inline value, or a kept page's member form with its page
    /// number and length (at most 11 bytes of varints); 0 for a paged value.
    pub(crate) fn inline_len(&self) -> usize {
        match self.body {
            Body::Inline => self.inline_value().len(),
            Body::Page { bytes, .. } => usize::from(bytes) + 11,
            Body::Paged(_) => 0,
        }
    }

    /// The number of set bits of the value.
    pub(crate) fn ones(&self) -> u64 {
        self.ones
    }

    /// Whether the value is in pages of the store (not kept in its entry).
    pub(crate) fn is_paged(&self) -> bool {
        matches!(self.body, Body::Paged(_))
    }

    /// Whether the value is kept inline (it has no pages).
    pub(crate) fn is_inline(&self) -> bool {
        self.body == Body::Inline
    }

    /// The metadata of a new empty value of `kind` kept inline.
    pub(super) fn empty(kind: Kind) -> Meta {
        Meta {
            kind,
            body: Body::Inline,
            len: 0,
            ones: 0,
            expire_at_ms: 0,
            inline: InlineBytes::zeroed(),
            changed_in_place: false,
        }
    }

    /// The metadata of a paged value.
    pub(super) fn paged(kind: Kind, id: u64, len: u64, ones: u64, expire_at_ms: u64) -> Meta {
        Meta {
            kind,
            body: Body::Paged(id),
            len,
            ones,
            expire_at_ms,
            inline: InlineBytes::zeroed(),
            changed_in_place: false,
        }
    }

    /// An inline body's value (its `len` bytes); empty for a paged body.
    pub(crate) fn inline_value(&self) -> &[u8] {
        match self.body {
            // len <= INLINE_MAX for an inline body.
            Body::Inline => &self.inline[..usize::try_from(self.len).unwrap_or(0).min(self.inline.len())],
            Body::Paged(_) | Body::Page { .. } => &[],
        }
    }
}

/// Byte offsets of format 1's metadata record fields.
mod meta_v1_layout {
    pub(super) const VERSION: usize = 0;
    pub(super) const KIND: usize = 1;
    // 2..4: reserved flags, zero.
    pub(super) const ID: usize = 4;
    pub(super) const LEN: usize = 12;
    pub(super) const ONES: usize = 20;
    pub(super) const EXPIRE: usize = 28;
    pub(super) const CRC: usize = 36;
    pub(super) const SIZE: usize = 40;
}

/// The error for damaged metadata of key `name`.
pub(crate) fn bad_meta(name: &[u8], reason: impl std::fmt::Display) -> Error {
    Error::Corrupted {
        key: String::from_utf8_lossy(name).into_owned(),
        page: None,
        reason: format!("metadata: {reason}"),
    }
}

/// Parses and validates format 1's 40-byte metadata record of key `name`
/// (a paged value).
///
/// # Errors
/// [`Error::Corrupted`] naming `name` for a bad length, checksum, version,
/// type or field.
pub(crate) fn decode_meta_v1(name: &[u8], b: &[u8]) -> Result<Meta> {
    use meta_v1_layout::{CRC, EXPIRE, ID, KIND, LEN, ONES, SIZE, VERSION};
    if b.len() != SIZE {
        return Err(bad_meta(name, format!("record is {} bytes, expected {SIZE}", b.len())));
    }
    let stored = read_u32(b, CRC);
    let computed = crc32fast::hash(&b[..CRC]);
    if stored != computed {
        return Err(bad_meta(name, format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")));
    }
    if b[VERSION] != FORMAT_V1 {
        return Err(bad_meta(name, format!("format 1 record with version {}", b[VERSION])));
    }
    let kind = Kind::try_from(b[KIND]).map_err(|r| bad_meta(name, r))?;
    let meta = Meta::paged(kind, read_u64(b, ID), read_u64(b, LEN), read_u64(b, ONES), read_u64(b, EXPIRE));
    if meta.len.checked_mul(8).is_none_or(|bits| meta.ones > bits) {
        return Err(bad_meta(name, format!("{} set bits do not fit in {} bytes", meta.ones, meta.len)));
    }
    Ok(meta)
}

/// Format 1's record of a paged `meta` (to build format 1 stores in tests).
#[cfg(test)]
pub(crate) fn encode_meta_v1(meta: &Meta) -> Vec<u8> {
    use meta_v1_layout::*;
    let mut b = vec![0u8; SIZE];
    b[VERSION] = FORMAT_V1;
    b[KIND] = meta.kind as u8;
    b[ID..ID + 8].copy_from_slice(&meta.id().unwrap_or(0).to_le_bytes());
    b[LEN..LEN + 8].copy_from_slice(&meta.len.to_le_bytes());
    b[ONES..ONES + 8].copy_from_slice(&meta.ones.to_le_bytes());
    b[EXPIRE..EXPIRE + 8].copy_from_slice(&meta.expire_at_ms.to_le_bytes());
    let crc = crc32fast::hash(&b[..CRC]);
    b[CRC..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The write-back sequence record: the number (u64 LE) and its CRC-32.
pub(crate) fn encode_sequence(n: u64) -> Vec<u8> {
    let mut b = n.to_le_bytes().to_vec();
    b.extend_from_slice(&crc32fast::hash(&n.to_le_bytes()).to_le_bytes());
    b
}

/// What a store knows of the master it follows or followed (key
/// `0x00 0x03`): `state | offset u64 | id floor u64 | n u8 | replid (n bytes) | crc32`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FollowerRecord {
    /// 0: following, consistent at `offset`; 1: loading a master's
    /// snapshot (the store is not yet consistent); 2: no longer following
    /// (promoted), kept for the id floor.
    pub(crate) state: u8,
    /// The master's replication offset the store holds everything up to.
    pub(crate) offset: u64,
    /// Bitmap ids up to this one may be in use: a master handed them out.
    pub(crate) id_floor: u64,
    /// The master's replication id.
    pub(crate) replid: String,
}

/// [`FollowerRecord::state`] values.
pub(crate) const FOLLOW_CONSISTENT: u8 = 0;
pub(crate) const FOLLOW_LOADING: u8 = 1;
pub(crate) const FOLLOW_PROMOTED: u8 = 2;

impl FollowerRecord {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let id = self.replid.as_bytes();
        let n = id.len().min(usize::from(u8::MAX));
        let mut b = Vec::with_capacity(22 + n);
        b.push(self.state);
        b.extend_from_slice(&self.offset.to_le_bytes());
        b.extend_from_slice(&self.id_floor.to_le_bytes());
        b.push(u8::try_from(n).unwrap_or(u8::MAX));
        b.extend_from_slice(&id[..n]);
        b.extend_from_slice(&crc32fast::hash(&b).to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Result<FollowerRecord> {
        let bad = |why: &str| Error::Corrupted {
            key: "<follower position>".into(),
            page: None,
            reason: format!("bad follower position record ({why})"),
        };
        if b.len() < 22 {
            return Err(bad(&format!("{} bytes", b.len())));
        }
        let n = usize::from(b[17]);
        if b.len() != 22 + n {
            return Err(bad(&format!("{} bytes for a {n}-byte id", b.len())));
        }
        if read_u32(b, 18 + n) != crc32fast::hash(&b[..18 + n]) {
            return Err(bad("checksum mismatch"));
        }
        if b[0] > FOLLOW_PROMOTED {
            return Err(bad(&format!("state {}", b[0])));
        }
        let replid = String::from_utf8(b[18..18 + n].to_vec()).map_err(|_| bad("replication id is not UTF-8"))?;
        Ok(FollowerRecord { state: b[0], offset: read_u64(b, 1), id_floor: read_u64(b, 9), replid })
    }
}

/// Parses a write-back sequence record (from the store or the side file);
/// `source` names where the bytes came from, for the error.
pub(crate) fn decode_sequence(b: &[u8], source: &str) -> Result<u64> {
    let bad = |why: &str| Error::Corrupted {
        key: source.into(),
        page: None,
        reason: format!("bad write-back sequence record ({why}): {:02x?}", &b[..b.len().min(16)]),
    };
    if b.len() != 12 {
        return Err(bad(&format!("{} bytes", b.len())));
    }
    let n = read_u64(b, 0);
    if read_u32(b, 8) != crc32fast::hash(&b[..8]) {
        return Err(bad("checksum mismatch"));
    }
    Ok(n)
}

/// Byte offsets of the superblock fields.
mod super_layout {
    pub(super) const MAGIC: &[u8; 8] = b"BITSLED\0";
    pub(super) const VERSION: usize = 8;
    pub(super) const PAGE_WORDS: usize = 9;
    pub(super) const CRC: usize = 11;
    pub(super) const SIZE: usize = 15;
}

/// The superblock record of format `version`: magic, version, page
/// geometry.
pub(crate) fn encode_superblock_of(version: u8) -> Vec<u8> {
    use super_layout::{CRC, MAGIC, SIZE, VERSION};
    let mut b = vec![0u8; SIZE];
    b[..8].copy_from_slice(MAGIC);
    b[VERSION] = version;
    let words = u16::try_from(WORDS_PER_PAGE).unwrap_or(u16::MAX);
    b[super_layout::PAGE_WORDS..CRC].copy_from_slice(&words.to_le_bytes());
    let crc = crc32fast::hash(&b[..CRC]);
    b[CRC..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The superblock this build writes.
pub(crate) fn encode_superblock() -> Vec<u8> {
    encode_superblock_of(FORMAT_VERSION)
}

/// Validates a stored superblock against this build; returns its format
/// version (this build's, or format 1 or 2, which open upgrades).
pub(crate) fn check_superblock(b: &[u8]) -> Result<u8> {
    use super_layout::{CRC, MAGIC, SIZE, VERSION};
    let bad = |reason: String| Error::Corrupted { key: "<superblock>".into(), page: None, reason };
    if b.len() != SIZE || &b[..8] != MAGIC {
        return Err(bad("not a bitsled superblock".into()));
    }
    let stored = read_u32(b, CRC);
    if stored != crc32fast::hash(&b[..CRC]) {
        return Err(bad("superblock checksum mismatch".into()));
    }
    if ![
        FORMAT_VERSION,
        FORMAT_V10,
        FORMAT_V9,
        FORMAT_V8,
        FORMAT_V7,
        FORMAT_V6,
        FORMAT_V5,
        FORMAT_V4,
        FORMAT_V3,
        FORMAT_V2,
        FORMAT_V1,
    ]
    .contains(&b[VERSION])
    {
        return Err(Error::UnsupportedVersion { found: b[VERSION], supported: FORMAT_VERSION });
    }
    let words = u16::from_le_bytes([b[super_layout::PAGE_WORDS], b[super_layout::PAGE_WORDS + 1]]);
    if usize::from(words) != WORDS_PER_PAGE {
        return Err(bad(format!("store uses {words} words per page, this build uses {WORDS_PER_PAGE}")));
    }
    Ok(b[VERSION])
}

/// What the catalog records of one database: its keyspace and counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DbRecord {
    /// The keyspace the database's keys live in.
    pub(crate) keyspace: u32,
    /// Keys (expired keys count until deleted, as in Redis).
    pub(crate) keys: u64,
    /// Keys with an expiry.
    pub(crate) expires: u64,
    /// Sum of the expiries of those keys, in Unix seconds.
    pub(crate) expire_secs: u64,
}

/// The keyspace catalog: which keyspace each database uses, the next
/// keyspace id, and each database's counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Catalog {
    /// How the store hashes key names.
    pub(crate) key_hash: KeyHash,
    pub(crate) next_keyspace: u32,
    pub(crate) dbs: Vec<DbRecord>,
}

/// Byte offsets of the catalog record fields.
mod catalog_layout {
    pub(super) const VERSION: usize = 0;
    pub(super) const DBS: usize = 1;
    pub(super) const NEXT: usize = 3;
    /// The key hash scheme's byte (version 3).
    pub(super) const KEY_HASH: usize = 7;
    /// The first database record in version 3; version 2 had no key hash
    /// byte, so its records start one byte earlier.
    pub(super) const FIRST: usize = 8;
    /// Bytes per database: keyspace u32, keys u64, expires u64, expire
    /// seconds u64.
    pub(super) const PER_DB: usize = 28;
}

impl Catalog {
    /// The catalog record: version, database count, next keyspace id, one
    /// entry per database, CRC-32.
    pub(crate) fn encode(&self) -> Vec<u8> {
        use catalog_layout::{FIRST, PER_DB};
        let mut b = Vec::with_capacity(FIRST + PER_DB * self.dbs.len() + 4);
        b.push(CATALOG_VERSION);
        b.extend_from_slice(&u16::try_from(self.dbs.len()).unwrap_or(u16::MAX).to_le_bytes());
        b.extend_from_slice(&self.next_keyspace.to_le_bytes());
        b.push(self.key_hash.code());
        for d in &self.dbs {
            b.extend_from_slice(&d.keyspace.to_le_bytes());
            b.extend_from_slice(&d.keys.to_le_bytes());
            b.extend_from_slice(&d.expires.to_le_bytes());
            b.extend_from_slice(&d.expire_secs.to_le_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and validates a catalog record.
    ///
    /// # Errors
    /// [`Error::Corrupted`] naming `<catalog>`.
    pub(crate) fn decode(b: &[u8]) -> Result<Catalog> {
        use catalog_layout::{DBS, FIRST, KEY_HASH, NEXT, PER_DB, VERSION};
        let bad = |reason: String| Error::Corrupted { key: "<catalog>".into(), page: None, reason };
        if b.len() < FIRST + 4 {
            return Err(bad(format!("record is {} bytes", b.len())));
        }
        let body = &b[..b.len() - 4];
        if read_u32(b, b.len() - 4) != crc32fast::hash(body) {
            return Err(bad("checksum mismatch".into()));
        }
        let (key_hash, first) = match b[VERSION] {
            CATALOG_VERSION => match KeyHash::from_code(b[KEY_HASH]) {
                Some(h) => (h, FIRST),
                None => return Err(bad(format!("key hash scheme {}", b[KEY_HASH]))),
            },
            CATALOG_VERSION_2 => (KeyHash::Murmur, FIRST - 1),
            v => return Err(bad(format!("version {v}"))),
        };
        let n = usize::from(u16::from_le_bytes([b[DBS], b[DBS + 1]]));
        if body.len() != first + n * PER_DB || n == 0 {
            return Err(bad(format!("{} bytes for {n} databases", body.len())));
        }
        let next_keyspace = read_u32(b, NEXT);
        let mut dbs = Vec::with_capacity(n);
        for i in 0..n {
            let at = first + i * PER_DB;
            let d = DbRecord {
                keyspace: read_u32(b, at),
                keys: read_u64(b, at + 4),
                expires: read_u64(b, at + 12),
                expire_secs: read_u64(b, at + 20),
            };
            if d.keyspace >= next_keyspace || d.expires > d.keys {
                return Err(bad(format!("database {i}: {d:?} (next keyspace {next_keyspace})")));
            }
            if dbs.iter().any(|o: &DbRecord| o.keyspace == d.keyspace) {
                return Err(bad(format!("keyspace {} used twice", d.keyspace)));
            }
            dbs.push(d);
        }
        Ok(Catalog { key_hash, next_keyspace, dbs })
    }

    /// The record as a format 9 store holds it (version 2: no key hash
    /// byte), for tests of such stores.
    #[cfg(test)]
    pub(crate) fn encode_v2(&self) -> Vec<u8> {
        let mut b = self.encode();
        b.truncate(b.len() - 4);
        b.remove(catalog_layout::KEY_HASH);
        b[catalog_layout::VERSION] = CATALOG_VERSION_2;
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// A new store's catalog: `databases` empty databases on keyspaces
    /// `0 .. databases`.
    pub(crate) fn new(databases: u16) -> Catalog {
        let dbs = (0..u32::from(databases)).map(|ks| DbRecord { keyspace: ks, ..DbRecord::default() }).collect();
        Catalog { key_hash: KeyHash::NEW, next_keyspace: u32::from(databases), dbs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta::paged(Kind::String, 7, 125_000_000, 42, 0)
    }

    #[test]
    fn meta_v1_round_trips() {
        let m = sample();
        assert_eq!(decode_meta_v1(b"k", &encode_meta_v1(&m)).unwrap(), m);
    }

    /// Invariant: a follower position round-trips, and any flipped byte or
    /// cut tail is an error, never another position.
    #[test]
    fn follower_record_round_trips_and_detects_damage() {
        let r = FollowerRecord { state: FOLLOW_LOADING, offset: 1 << 40, id_floor: 77, replid: "ab".repeat(20) };
        let enc = r.encode();
        assert_eq!(FollowerRecord::decode(&enc).unwrap(), r);
        for i in 0..enc.len() {
            let mut b = enc.clone();
            b[i] ^= 0x10;
            assert!(FollowerRecord::decode(&b).is_err(), "flip at {i} accepted");
        }
        assert!(FollowerRecord::decode(&enc[..enc.len() - 1]).is_err());
    }

    /// Any single flipped byte of a format 1 record must be detected.
    #[test]
    fn every_byte_flip_is_an_error() {
        let enc = encode_meta_v1(&sample());
        for i in 0..enc.len() {
            let mut b = enc.clone();
            b[i] ^= 0x40;
            let r = decode_meta_v1(b"k", &b);
            assert!(r.is_err(), "flip at {i} accepted: {r:?}");
        }
        let r = decode_meta_v1(b"k", &enc[..39]);
        assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
    }

    #[test]
    fn superblock_round_trips_and_rejects_garbage() {
        assert_eq!(check_superblock(&encode_superblock()).unwrap(), FORMAT_VERSION);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V1)).unwrap(), FORMAT_V1);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V2)).unwrap(), FORMAT_V2);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V3)).unwrap(), FORMAT_V3);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V4)).unwrap(), FORMAT_V4);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V5)).unwrap(), FORMAT_V5);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V6)).unwrap(), FORMAT_V6);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V7)).unwrap(), FORMAT_V7);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V8)).unwrap(), FORMAT_V8);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V9)).unwrap(), FORMAT_V9);
        assert_eq!(check_superblock(&encode_superblock_of(FORMAT_V10)).unwrap(), FORMAT_V10);
        assert!(matches!(
            check_superblock(&encode_superblock_of(FORMAT_VERSION + 1)),
            Err(Error::UnsupportedVersion { found: 12, supported: FORMAT_VERSION })
        ));
        let r = check_superblock(&encode_superblock_of(12));
        assert!(matches!(r, Err(Error::UnsupportedVersion { found: 12, .. })), "{r:?}");
        let mut b = encode_superblock();
        b[8] ^= 1; // another version, checksum left stale
        let r = check_superblock(&b);
        assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
        let r = check_superblock(b"hello");
        assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
    }

    /// The catalog round trips; every flipped byte and every truncation is
    /// refused.
    #[test]
    fn catalog_round_trips_and_rejects_damage() {
        let mut c = Catalog::new(16);
        c.dbs[3] = DbRecord { keyspace: 20, keys: 9, expires: 2, expire_secs: 3_000_000_000 };
        c.next_keyspace = 21;
        let enc = c.encode();
        assert_eq!(Catalog::decode(&enc).unwrap(), c);
        for i in 0..enc.len() {
            let mut b = enc.clone();
            b[i] ^= 0x10;
            assert!(Catalog::decode(&b).is_err(), "flip at {i} accepted");
        }
        for n in 0..enc.len() {
            assert!(Catalog::decode(&enc[..n]).is_err(), "truncation to {n} accepted");
        }
    }

    /// A version 2 catalog (format 9 and earlier) reads as the Murmur key
    /// hash with the same databases; a version 3 one keeps its scheme; an
    /// unknown scheme byte is refused even under a good checksum.
    #[test]
    fn catalog_versions_carry_the_key_hash() {
        let mut c = Catalog::new(4);
        c.dbs[1] = DbRecord { keyspace: 1, keys: 5, expires: 1, expire_secs: 7 };
        assert_eq!(c.key_hash, KeyHash::Slot, "new stores order keys by slot");
        let old = Catalog::decode(&c.encode_v2()).unwrap();
        assert_eq!(old, Catalog { key_hash: KeyHash::Murmur, ..c.clone() });
        assert_eq!(Catalog::decode(&old.encode()).unwrap(), old, "a store keeps its scheme");
        let mut bad = c.encode();
        bad[catalog_layout::KEY_HASH] = 9;
        let n = bad.len() - 4;
        let crc = crc32fast::hash(&bad[..n]);
        bad[n..].copy_from_slice(&crc.to_le_bytes());
        assert!(Catalog::decode(&bad).unwrap_err().to_string().contains("key hash scheme 9"));
    }
}
