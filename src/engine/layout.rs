//! Key layout of the single sled tree (format version 10).
//!
//! Every record lives in one tree so one atomic batch can cover metadata and
//! pages together. The first byte of a key names its namespace:
//!
//! | namespace | key bytes                                      | value |
//! |-----------|------------------------------------------------|-------|
//! | `0x00`    | `0x00`                                         | superblock |
//! | `0x00`    | `0x00 0x01`                                    | write-back sequence |
//! | `0x00`    | `0x00 0x02`                                    | keyspace catalog |
//! | `0x00`    | `0x00 0x03`                                    | follower position (a replica's own; never replicated) |
//! | `0x01`    | `0x01 name…`                                   | format 1 key metadata (read only to upgrade) |
//! | `0x02`    | `0x02 bitmap-id u64 BE, page-number u64 BE`    | encoded page |
//! | `0x03`    | `0x03 bitmap-id u64 BE`                        | empty: pages to reclaim |
//! | `0x04`    | `0x04 …`                                       | expiry index of earlier builds: deleted at open |
//! | `0x05`    | `0x05 keyspace u32 BE`                         | empty: a flushed keyspace to reclaim |
//! | `0x06`    | `0x06 keyspace u32 BE, first-hash u32 BE`      | a bucket of key metadata |
//! | `0x07`    | `0x07 bitmap-id u64 BE, group u64 BE`          | the small pages of a page group |
//! | `0x08`    | `0x08 shard u8, write-back u64 BE, part u16 BE` | metadata changed by one write-back in one shard |
//! | `0x09`    | `0x09 write-back u64 BE, part u32 BE`           | bits of stored pages changed by one write-back |
//!
//! Numbers in keys are big-endian so that sled's byte order is numeric order:
//! a range scan over one bitmap id returns its pages in page order, and the
//! buckets of a keyspace come in hash order.
//!
//! A page is stored either as a page record (`0x02`) or as a member of its
//! group's record (`0x07`), never both: see `crate::page::group`.

use crate::murmur::murmur64a;
use crate::page::GROUP_PAGES;

/// Namespace byte of the superblock, the sequence record and the catalog.
pub(crate) const NS_SUPER: u8 = 0x00;
/// Namespace byte of format 1's per-key metadata.
pub(crate) const NS_META_V1: u8 = 0x01;
/// Namespace byte of pages.
pub(crate) const NS_PAGE: u8 = 0x02;
/// Namespace byte of bitmap ids whose pages are garbage (deleted, replaced,
/// or written by an operation that never published them).
pub(crate) const NS_RECLAIM: u8 = 0x03;
/// Namespace byte of the expiry index earlier builds wrote (deleted at open).
pub(crate) const NS_EXPIRY: u8 = 0x04;
/// Namespace byte of flushed keyspaces whose buckets and pages are garbage.
pub(crate) const NS_DEAD: u8 = 0x05;
/// Namespace byte of metadata buckets.
pub(crate) const NS_BUCKET: u8 = 0x06;
/// Namespace byte of page groups.
pub(crate) const NS_GROUP: u8 = 0x07;

/// Namespace byte of metadata delta records.
pub(crate) const NS_DELTA: u8 = 0x08;

/// Namespace byte of page delta records.
pub(crate) const NS_PAGE_DELTA: u8 = 0x09;

/// Length of a page key.
pub(crate) const PAGE_KEY_LEN: usize = 17;
/// Length of a bucket key.
pub(crate) const BUCKET_KEY_LEN: usize = 9;
/// Length of a metadata delta key.
pub(crate) const DELTA_KEY_LEN: usize = 12;
/// Length of a page delta key.
pub(crate) const PAGE_DELTA_KEY_LEN: usize = 13;

/// The seed of the key hash (the bytes `bitsled!`). Part of the format: it
/// decides which bucket holds a key and the order SCAN visits keys in.
const KEY_HASH_SEED: u64 = 0x6269_7473_6c65_6421;

/// The top 32 bits of a name's MurmurHash64A.
fn murmur_top(name: &[u8]) -> u32 {
    let h = murmur64a(name, KEY_HASH_SEED) >> 32;
    // The top 32 bits of a u64 fit in a u32.
    u32::try_from(h).unwrap_or(u32::MAX)
}

/// Bits of a slot-ordered key hash below the slot.
const BELOW_SLOT: u32 = 32 - 14;

/// How a store hashes key names into the 32-bit space its buckets, lock
/// shards, delta records and SCAN cursors are cut from. Part of the
/// format, recorded in the catalog (DESIGN.md section 3, "The key hash").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyHash {
    /// Stores created before format 10: the top 32 bits of the name's
    /// MurmurHash64A.
    Murmur,
    /// Format 10 stores: the name's Redis Cluster slot
    /// ([`crate::slot::key_slot`]) in the top 14 bits, then the top 18
    /// bits of its MurmurHash64A. The keys of one slot fill one range of
    /// the hash space.
    Slot,
}

impl KeyHash {
    /// The scheme of stores this build creates.
    pub(crate) const NEW: KeyHash = KeyHash::Slot;

    /// The hash of `name`.
    pub(crate) fn of(self, name: &[u8]) -> u32 {
        match self {
            KeyHash::Murmur => murmur_top(name),
            KeyHash::Slot => (u32::from(crate::slot::key_slot(name)) << BELOW_SLOT) | (murmur_top(name) >> 14),
        }
    }

    /// The first and the last hash of the keys of `slot`, if this scheme
    /// keeps a slot's keys together.
    pub(crate) fn slot_range(self, slot: u16) -> Option<(u32, u32)> {
        match self {
            KeyHash::Murmur => None,
            KeyHash::Slot => {
                let first = u32::from(slot % crate::slot::SLOTS) << BELOW_SLOT;
                Some((first, first | ((1 << BELOW_SLOT) - 1)))
            }
        }
    }

    /// The scheme's number in the catalog.
    pub(crate) fn code(self) -> u8 {
        match self {
            KeyHash::Murmur => 0,
            KeyHash::Slot => 1,
        }
    }

    /// The scheme with catalog number `code`.
    pub(crate) fn from_code(code: u8) -> Option<KeyHash> {
        match code {
            0 => Some(KeyHash::Murmur),
            1 => Some(KeyHash::Slot),
            _ => None,
        }
    }
}

/// The hash of `name` under the scheme of new stores (tests build buckets
/// and records with it).
#[cfg(test)]
pub(crate) fn key_hash(name: &[u8]) -> u32 {
    KeyHash::NEW.of(name)
}

/// Bits of the key hash that name its lock shard (and its metadata delta
/// records): the top 8, so 256 shards.
pub(crate) const SHARD_BITS: u8 = 8;

/// The lock shard of a key with hash `h`: its top [`SHARD_BITS`] bits.
pub(crate) fn shard_of(h: u32) -> usize {
    usize::try_from(h >> (32 - u32::from(SHARD_BITS))).unwrap_or(0)
}

/// The superblock key.
pub(crate) fn superblock_key() -> Vec<u8> {
    vec![NS_SUPER]
}

/// The key of the write-back sequence record (in the superblock's
/// namespace): the number of the last write-back applied.
pub(crate) fn sequence_key() -> Vec<u8> {
    vec![NS_SUPER, 1]
}

/// The key of the keyspace catalog (in the superblock's namespace).
pub(crate) fn catalog_key() -> Vec<u8> {
    vec![NS_SUPER, 2]
}

/// The key of the follower position (in the superblock's namespace): what
/// a store that follows, or followed, a master knows of it. Each store
/// keeps its own; it is never sent to a replica.
pub(crate) fn follower_key() -> Vec<u8> {
    vec![NS_SUPER, 3]
}

/// The user key of a format 1 metadata key, if it is one.
pub(crate) fn name_of_meta_v1_key(key: &[u8]) -> Option<&[u8]> {
    match key.split_first() {
        Some((&NS_META_V1, name)) => Some(name),
        _ => None,
    }
}

/// The key of page `page` of bitmap `id`.
pub(crate) fn page_key(id: u64, page: u64) -> [u8; PAGE_KEY_LEN] {
    let mut k = [0u8; PAGE_KEY_LEN];
    k[0] = NS_PAGE;
    k[1..9].copy_from_slice(&id.to_be_bytes());
    k[9..17].copy_from_slice(&page.to_be_bytes());
    k
}

/// The (bitmap id, page number) of a page key.
pub(crate) fn parse_page_key(key: &[u8]) -> Option<(u64, u64)> {
    if key.len() != PAGE_KEY_LEN || key[0] != NS_PAGE {
        return None;
    }
    let id = u64::from_be_bytes(key[1..9].try_into().ok()?);
    let page = u64::from_be_bytes(key[9..17].try_into().ok()?);
    Some((id, page))
}

/// The key range holding the pages `from ..= to` of bitmap `id`.
pub(crate) fn page_range(id: u64, from: u64, to: u64) -> ([u8; PAGE_KEY_LEN], [u8; PAGE_KEY_LEN]) {
    (page_key(id, from), page_key(id, to))
}

/// The group holding page `page`, and the page's slot in it.
pub(crate) fn group_of(page: u64) -> (u64, u8) {
    // The slot is below 64.
    (page / GROUP_PAGES, u8::try_from(page % GROUP_PAGES).unwrap_or(0))
}

/// The page in slot `slot` of group `group`.
pub(crate) fn group_page(group: u64, slot: u8) -> u64 {
    group * GROUP_PAGES + u64::from(slot)
}

/// The key of group `group` of bitmap `id` (the same shape as a page key,
/// in its own namespace).
pub(crate) fn group_key(id: u64, group: u64) -> [u8; PAGE_KEY_LEN] {
    let mut k = page_key(id, group);
    k[0] = NS_GROUP;
    k
}

/// The (bitmap id, group) of a group key.
pub(crate) fn parse_group_key(key: &[u8]) -> Option<(u64, u64)> {
    let mut k: [u8; PAGE_KEY_LEN] = key.try_into().ok()?;
    if k[0] != NS_GROUP {
        return None;
    }
    k[0] = NS_PAGE;
    parse_page_key(&k)
}

/// The key range holding the groups `from ..= to` of bitmap `id`.
pub(crate) fn group_range(id: u64, from: u64, to: u64) -> ([u8; PAGE_KEY_LEN], [u8; PAGE_KEY_LEN]) {
    (group_key(id, from), group_key(id, to))
}

/// The reclaim marker of bitmap `id`.
pub(crate) fn reclaim_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(NS_RECLAIM);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The bitmap id of a reclaim marker.
pub(crate) fn parse_reclaim_key(key: &[u8]) -> Option<u64> {
    match key.split_first() {
        Some((&NS_RECLAIM, rest)) => Some(u64::from_be_bytes(rest.try_into().ok()?)),
        _ => None,
    }
}

/// The marker of flushed keyspace `ks`.
pub(crate) fn dead_key(ks: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(5);
    k.push(NS_DEAD);
    k.extend_from_slice(&ks.to_be_bytes());
    k
}

/// The keyspace of a flushed-keyspace marker.
pub(crate) fn parse_dead_key(key: &[u8]) -> Option<u32> {
    match key.split_first() {
        Some((&NS_DEAD, rest)) => Some(u32::from_be_bytes(rest.try_into().ok()?)),
        _ => None,
    }
}

/// The key of the bucket of keyspace `ks` whose hash range starts at `start`.
pub(crate) fn bucket_key(ks: u32, start: u32) -> [u8; BUCKET_KEY_LEN] {
    let mut k = [0u8; BUCKET_KEY_LEN];
    k[0] = NS_BUCKET;
    k[1..5].copy_from_slice(&ks.to_be_bytes());
    k[5..9].copy_from_slice(&start.to_be_bytes());
    k
}

/// The (keyspace, first hash) of a bucket key.
pub(crate) fn parse_bucket_key(key: &[u8]) -> Option<(u32, u32)> {
    if key.len() != BUCKET_KEY_LEN || key[0] != NS_BUCKET {
        return None;
    }
    Some((u32::from_be_bytes(key[1..5].try_into().ok()?), u32::from_be_bytes(key[5..9].try_into().ok()?)))
}

/// The key of part `part` of the metadata delta of lock shard `shard`
/// written by write-back `seq`: a shard's deltas sort in write-back order.
pub(crate) fn delta_key(shard: u8, seq: u64, part: u16) -> [u8; DELTA_KEY_LEN] {
    let mut k = [0u8; DELTA_KEY_LEN];
    k[0] = NS_DELTA;
    k[1] = shard;
    k[2..10].copy_from_slice(&seq.to_be_bytes());
    k[10..12].copy_from_slice(&part.to_be_bytes());
    k
}

/// The (shard, write-back, part) of a metadata delta key.
pub(crate) fn parse_delta_key(key: &[u8]) -> Option<(u8, u64, u16)> {
    if key.len() != DELTA_KEY_LEN || key[0] != NS_DELTA {
        return None;
    }
    Some((key[1], u64::from_be_bytes(key[2..10].try_into().ok()?), u16::from_be_bytes(key[10..12].try_into().ok()?)))
}

/// The key of part `part` of the page delta record of write-back `seq`.
pub(crate) fn page_delta_key(seq: u64, part: u32) -> [u8; PAGE_DELTA_KEY_LEN] {
    let mut k = [0u8; PAGE_DELTA_KEY_LEN];
    k[0] = NS_PAGE_DELTA;
    k[1..9].copy_from_slice(&seq.to_be_bytes());
    k[9..13].copy_from_slice(&part.to_be_bytes());
    k
}

/// The (write-back, part) of a page delta key.
pub(crate) fn parse_page_delta_key(key: &[u8]) -> Option<(u64, u32)> {
    if key.len() != PAGE_DELTA_KEY_LEN || key[0] != NS_PAGE_DELTA {
        return None;
    }
    Some((u64::from_be_bytes(key[1..9].try_into().ok()?), u32::from_be_bytes(key[9..13].try_into().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Page delta keys sort by write-back, then part, and parse back.
    #[test]
    fn page_delta_keys_sort_by_write_back() {
        let keys = [(0u64, 0u32), (0, 1), (0, 65_536), (1, 0), (256, 0), (u64::MAX, u32::MAX)];
        for w in keys.windows(2) {
            assert!(page_delta_key(w[0].0, w[0].1) < page_delta_key(w[1].0, w[1].1), "{w:?}");
        }
        for (seq, part) in keys {
            assert_eq!(parse_page_delta_key(&page_delta_key(seq, part)), Some((seq, part)));
        }
        assert_eq!(parse_page_delta_key(&delta_key(0, 0, 0)), None);
    }

    /// Delta keys sort by shard, then write-back, then part, and parse back.
    #[test]
    fn delta_keys_sort_by_shard_then_write_back() {
        let keys = [(0u8, 0u64, 0u16), (0, 0, 1), (0, 1, 0), (0, 256, 0), (1, 0, 0), (255, u64::MAX, u16::MAX)];
        for w in keys.windows(2) {
            assert!(delta_key(w[0].0, w[0].1, w[0].2) < delta_key(w[1].0, w[1].1, w[1].2), "{w:?}");
        }
        for (shard, seq, part) in keys {
            assert_eq!(parse_delta_key(&delta_key(shard, seq, part)), Some((shard, seq, part)));
        }
        assert_eq!(parse_delta_key(&bucket_key(0, 0)), None);
    }

    /// Byte order of page keys must be (id, page) numeric order.
    #[test]
    fn page_keys_sort_numerically() {
        let pairs = [(0u64, 0u64), (0, 1), (0, 255), (0, 256), (1, 0), (256, 0), (u64::MAX, u64::MAX)];
        for w in pairs.windows(2) {
            assert!(page_key(w[0].0, w[0].1) < page_key(w[1].0, w[1].1), "{w:?}");
        }
        for (id, page) in pairs {
            assert_eq!(parse_page_key(&page_key(id, page)), Some((id, page)));
        }
    }

    /// A page's group and slot, and back.
    #[test]
    fn pages_map_to_groups() {
        for page in [0u64, 1, 63, 64, 65, 1 << 40, u64::MAX / 2] {
            let (group, slot) = group_of(page);
            assert!(u64::from(slot) < GROUP_PAGES);
            assert_eq!(group_page(group, slot), page);
        }
        assert_eq!(group_of(130), (2, 2));
    }

    /// Buckets sort by keyspace, then by hash; every key round trips.
    #[test]
    fn bucket_keys_sort_by_keyspace_then_hash() {
        let pairs = [(0u32, 0u32), (0, 1), (0, 0x0100_0000), (0, u32::MAX), (1, 0), (u32::MAX, u32::MAX)];
        for w in pairs.windows(2) {
            assert!(bucket_key(w[0].0, w[0].1) < bucket_key(w[1].0, w[1].1), "{w:?}");
        }
        for (ks, start) in pairs {
            assert_eq!(parse_bucket_key(&bucket_key(ks, start)), Some((ks, start)));
        }
    }

    #[test]
    fn namespaces_do_not_overlap() {
        assert_eq!(name_of_meta_v1_key(b"\x01x"), Some(&b"x"[..]));
        assert_eq!(name_of_meta_v1_key(&page_key(1, 2)), None);
        assert_eq!(parse_page_key(&bucket_key(0, 0)), None);
        assert_eq!(parse_bucket_key(&page_key(1, 2)), None);
        assert_eq!(parse_reclaim_key(&reclaim_key(42)), Some(42));
        assert_eq!(parse_group_key(&group_key(3, 9)), Some((3, 9)));
        assert_eq!(parse_group_key(&page_key(3, 9)), None);
        assert_eq!(parse_page_key(&group_key(3, 9)), None);
        assert!(group_key(1, u64::MAX) < group_key(2, 0), "groups sort by bitmap, then group");
        assert_eq!(parse_reclaim_key(&dead_key(42)), None);
        assert_eq!(parse_dead_key(&dead_key(7)), Some(7));
    }

    /// The key hash is part of the format: pinned values (the Murmur
    /// ones computed by an independent implementation of MurmurHash64A;
    /// the slots are those Redis's CLUSTER KEYSLOT gives).
    #[test]
    fn key_hash_is_stable() {
        let names = [&b""[..], b"a", b"uid:sign:1:202611"];
        let murmur: Vec<u32> = names.iter().map(|n| KeyHash::Murmur.of(n)).collect();
        assert_eq!(murmur, vec![0xf427_648e, 0xfe8b_11fe, 0x11be_e1aa]);
        let slot: Vec<u32> = names.iter().map(|n| KeyHash::Slot.of(n)).collect();
        let slots = [0u32, 15495, u32::from(crate::slot::key_slot(b"uid:sign:1:202611"))];
        for ((h, m), s) in slot.iter().zip(&murmur).zip(slots) {
            assert_eq!(h >> 18, s, "the slot is on top");
            assert_eq!(h & 0x3_ffff, m >> 14, "then Murmur's top 18 bits");
        }
    }

    /// Under the slot scheme, a slot's range holds exactly its keys, and
    /// the ranges tile the hash space in slot order.
    #[test]
    fn slot_ranges_hold_their_keys() {
        for i in 0..20_000u32 {
            let name = format!("user:{i}:{{tag{}}}", i % 97).into_bytes();
            let slot = crate::slot::key_slot(&name);
            let (lo, hi) = KeyHash::Slot.slot_range(slot).unwrap();
            assert!((lo..=hi).contains(&KeyHash::Slot.of(&name)), "{name:?}");
        }
        assert_eq!(KeyHash::Slot.slot_range(0).unwrap().0, 0);
        assert_eq!(KeyHash::Slot.slot_range(16383).unwrap().1, u32::MAX);
        assert_eq!(KeyHash::Slot.slot_range(1).unwrap().0, KeyHash::Slot.slot_range(0).unwrap().1 + 1);
        assert_eq!(KeyHash::Murmur.slot_range(5), None);
        for h in [KeyHash::Murmur, KeyHash::Slot] {
            assert_eq!(KeyHash::from_code(h.code()), Some(h));
        }
        assert_eq!(KeyHash::from_code(2), None);
    }
}
