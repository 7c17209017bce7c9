//! Record formats: per-key metadata, the superblock and the write-back
//! sequence record, their fields and bytes.

use crate::error::{Error, Result};
use crate::geometry::PAGE_WORDS as WORDS_PER_PAGE;
use crate::le::{read_u32, read_u64};

/// The on-disk format version this build reads and writes.
pub(crate) const FORMAT_VERSION: u8 = 1;

/// What a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// A Redis string, stored as a paged bitmap.
    String = 1,
    /// A scalable Bloom filter: header and bit arrays in the bitmap's pages.
    Bloom = 2,
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

/// Metadata of one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    /// What the key holds.
    pub(crate) kind: Kind,
    /// Id under which the key's pages are stored; never reused. Private to
    /// the engine: operations reach pages through a transaction.
    pub(super) id: u64,
    /// Logical length in bytes (Redis STRLEN).
    pub(crate) len: u64,
    /// Number of set bits over all pages.
    pub(crate) ones: u64,
    /// Expiry as Unix time in milliseconds; 0 means none.
    pub(crate) expire_at_ms: u64,
}

/// Byte offsets of the metadata record fields.
mod meta_layout {
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

impl Meta {
    /// The 40-byte record stored under the key's metadata key.
    pub(crate) fn encode(&self) -> Vec<u8> {
        use meta_layout::*;
        let mut b = vec![0u8; SIZE];
        b[VERSION] = FORMAT_VERSION;
        b[KIND] = self.kind as u8;
        b[ID..ID + 8].copy_from_slice(&self.id.to_le_bytes());
        b[LEN..LEN + 8].copy_from_slice(&self.len.to_le_bytes());
        b[ONES..ONES + 8].copy_from_slice(&self.ones.to_le_bytes());
        b[EXPIRE..EXPIRE + 8].copy_from_slice(&self.expire_at_ms.to_le_bytes());
        let crc = crc32fast::hash(&b[..CRC]);
        b[CRC..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and validates a metadata record.
    ///
    /// # Errors
    /// [`Error::Corrupted`] naming `name` for a bad length, checksum, type or
    /// field; [`Error::UnsupportedVersion`] for another format version.
    pub(crate) fn decode(name: &[u8], b: &[u8]) -> Result<Meta> {
        use meta_layout::*;
        let bad = |reason: String| Error::Corrupted {
            key: String::from_utf8_lossy(name).into_owned(),
            page: None,
            reason: format!("metadata: {reason}"),
        };
        if b.len() != SIZE {
            return Err(bad(format!("record is {} bytes, expected {SIZE}", b.len())));
        }
        let stored = read_u32(b, CRC);
        let computed = crc32fast::hash(&b[..CRC]);
        if stored != computed {
            return Err(bad(format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")));
        }
        if b[VERSION] != FORMAT_VERSION {
            return Err(Error::UnsupportedVersion { found: b[VERSION], supported: FORMAT_VERSION });
        }
        let kind = Kind::try_from(b[KIND]).map_err(bad)?;
        let meta = Meta {
            kind,
            id: read_u64(b, ID),
            len: read_u64(b, LEN),
            ones: read_u64(b, ONES),
            expire_at_ms: read_u64(b, EXPIRE),
        };
        if meta.len.checked_mul(8).is_none_or(|bits| meta.ones > bits) {
            return Err(bad(format!("{} set bits do not fit in {} bytes", meta.ones, meta.len)));
        }
        Ok(meta)
    }
}

/// The write-back sequence record: the number (u64 LE) and its CRC-32.
pub(crate) fn encode_sequence(n: u64) -> Vec<u8> {
    let mut b = n.to_le_bytes().to_vec();
    b.extend_from_slice(&crc32fast::hash(&n.to_le_bytes()).to_le_bytes());
    b
}

/// Parses a write-back sequence record (from the store or the side file).
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

/// The superblock record: magic, format version, page geometry.
pub(crate) fn encode_superblock() -> Vec<u8> {
    use super_layout::*;
    let mut b = vec![0u8; SIZE];
    b[..8].copy_from_slice(MAGIC);
    b[VERSION] = FORMAT_VERSION;
    let words = u16::try_from(WORDS_PER_PAGE).expect("PAGE_WORDS fits in u16");
    b[super_layout::PAGE_WORDS..CRC].copy_from_slice(&words.to_le_bytes());
    let crc = crc32fast::hash(&b[..CRC]);
    b[CRC..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Validates a stored superblock against this build.
pub(crate) fn check_superblock(b: &[u8]) -> Result<()> {
    use super_layout::*;
    let bad = |reason: String| Error::Corrupted { key: "<superblock>".into(), page: None, reason };
    if b.len() != SIZE || &b[..8] != MAGIC {
        return Err(bad("not a bitsled superblock".into()));
    }
    let stored = read_u32(b, CRC);
    if stored != crc32fast::hash(&b[..CRC]) {
        return Err(bad("superblock checksum mismatch".into()));
    }
    if b[VERSION] != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion { found: b[VERSION], supported: FORMAT_VERSION });
    }
    let words = u16::from_le_bytes([b[super_layout::PAGE_WORDS], b[super_layout::PAGE_WORDS + 1]]);
    if usize::from(words) != WORDS_PER_PAGE {
        return Err(bad(format!("store uses {words} words per page, this build uses {WORDS_PER_PAGE}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta { kind: Kind::String, id: 7, len: 125_000_000, ones: 42, expire_at_ms: 0 }
    }

    #[test]
    fn meta_round_trips() {
        let m = sample();
        assert_eq!(Meta::decode(b"k", &m.encode()).unwrap(), m);
    }

    /// Any single flipped byte must be detected.
    #[test]
    fn every_byte_flip_is_an_error() {
        let enc = sample().encode();
        for i in 0..enc.len() {
            let mut b = enc.clone();
            b[i] ^= 0x40;
            let r = Meta::decode(b"k", &b);
            assert!(r.is_err(), "flip at {i} accepted: {r:?}");
        }
        let r = Meta::decode(b"k", &enc[..39]);
        assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
    }

    #[test]
    fn superblock_round_trips_and_rejects_garbage() {
        check_superblock(&encode_superblock()).unwrap();
        let mut b = encode_superblock();
        b[8] = 9;
        let r = check_superblock(&b);
        assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
        let r = check_superblock(b"hello");
        assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
    }
}
