//! Key layout of the single sled tree.
//!
//! Every record lives in one tree so one atomic batch can cover metadata and
//! pages together. The first byte of a key names its namespace:
//!
//! | namespace | key bytes                                  | value            |
//! |-----------|--------------------------------------------|------------------|
//! | `0x00`    | `0x00`                                     | superblock       |
//! | `0x00`    | `0x00 0x01`                                | write-back sequence |
//! | `0x01`    | `0x01 name…`                               | key metadata     |
//! | `0x02`    | `0x02 bitmap-id u64 BE, page-number u64 BE`| encoded page     |
//! | `0x03`    | `0x03 bitmap-id u64 BE`                    | empty: pages to reclaim |
//! | `0x04`    | `0x04 expire-at-ms u64 BE, name…`          | empty: expiry index |
//!
//! Numbers in keys are big-endian so that sled's byte order is numeric order:
//! a range scan over one bitmap id returns its pages in page order.

/// Namespace byte of the superblock.
pub(crate) const NS_SUPER: u8 = 0x00;
/// Namespace byte of key metadata.
pub(crate) const NS_META: u8 = 0x01;
/// Namespace byte of pages.
pub(crate) const NS_PAGE: u8 = 0x02;
/// Namespace byte of bitmap ids whose pages are garbage (deleted, replaced,
/// or written by an operation that never published them).
pub(crate) const NS_RECLAIM: u8 = 0x03;

/// Namespace byte of the expiry index: keys that may expire, by time.
pub(crate) const NS_EXPIRY: u8 = 0x04;

/// Length of a page key.
pub(crate) const PAGE_KEY_LEN: usize = 17;

/// The superblock key.
pub(crate) fn superblock_key() -> Vec<u8> {
    vec![NS_SUPER]
}

/// The key of the write-back sequence record (in the superblock's
/// namespace): the number of the last write-back applied.
pub(crate) fn sequence_key() -> Vec<u8> {
    vec![NS_SUPER, 1]
}

/// The metadata key of a user key.
pub(crate) fn meta_key(name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + name.len());
    k.push(NS_META);
    k.extend_from_slice(name);
    k
}

/// The user key of a metadata key, if it is one.
pub(crate) fn name_of_meta_key(key: &[u8]) -> Option<&[u8]> {
    match key.split_first() {
        Some((&NS_META, name)) => Some(name),
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

/// The reclaim marker of bitmap `id`.
pub(crate) fn reclaim_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(NS_RECLAIM);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The expiry index entry of key `name` expiring at `at_ms`.
pub(crate) fn expiry_key(at_ms: u64, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + name.len());
    k.push(NS_EXPIRY);
    k.extend_from_slice(&at_ms.to_be_bytes());
    k.extend_from_slice(name);
    k
}

/// The (time, name) of an expiry index entry.
pub(crate) fn parse_expiry_key(key: &[u8]) -> Option<(u64, &[u8])> {
    match key.split_first() {
        Some((&NS_EXPIRY, rest)) if rest.len() >= 8 => {
            let (at, name) = rest.split_at(8);
            Some((u64::from_be_bytes(at.try_into().ok()?), name))
        }
        _ => None,
    }
}

/// The bitmap id of a reclaim marker.
pub(crate) fn parse_reclaim_key(key: &[u8]) -> Option<u64> {
    match key.split_first() {
        Some((&NS_RECLAIM, rest)) => Some(u64::from_be_bytes(rest.try_into().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn namespaces_do_not_overlap() {
        assert_eq!(name_of_meta_key(&meta_key(b"x")), Some(&b"x"[..]));
        assert_eq!(name_of_meta_key(&page_key(1, 2)), None);
        assert_eq!(parse_page_key(&meta_key(&[0u8; 16])), None);
        assert_eq!(parse_reclaim_key(&reclaim_key(42)), Some(42));
        assert_eq!(parse_reclaim_key(&meta_key(&[0u8; 8])), None);
        assert_eq!(parse_expiry_key(&expiry_key(7, b"k")), Some((7, &b"k"[..])));
        assert!(expiry_key(1, b"z") < expiry_key(2, b"a"), "expiry index sorts by time first");
    }
}
