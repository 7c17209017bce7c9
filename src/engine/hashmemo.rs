//! Key hashes a thread computed for prefetch hints, kept for the command
//! that then runs on the key: a server reading a pipeline hashes each key
//! two commands ahead (see [`crate::Db::prefetch_index`]), and the lookup
//! that follows on the same thread takes the hash from here instead of
//! hashing again. A hash depends only on the scheme and the name, so an
//! entry is right for every store of its scheme.

use std::cell::RefCell;

use super::layout::KeyHash;

/// Hashes kept: the prefetch runs two commands ahead, so three suffice;
/// one spare.
const KEPT: usize = 4;

/// The longest name kept.
const NAME: usize = 48;

struct Recent {
    /// Per entry: its scheme (`None`: empty), name length, name and hash.
    schemes: [Option<KeyHash>; KEPT],
    lens: [u8; KEPT],
    names: [[u8; NAME]; KEPT],
    hashes: [u32; KEPT],
    /// The entry the next hash replaces.
    next: usize,
}

thread_local! {
    static RECENT: RefCell<Recent> = const {
        RefCell::new(Recent {
            schemes: [None; KEPT],
            lens: [0; KEPT],
            names: [[0; NAME]; KEPT],
            hashes: [0; KEPT],
            next: 0,
        })
    };
}

/// Keeps `h` as `name`'s hash under `scheme` (names longer than [`NAME`]
/// are not kept).
pub(crate) fn remember(scheme: KeyHash, name: &[u8], h: u32) {
    let Ok(len) = u8::try_from(name.len()) else { return };
    if name.len() > NAME {
        return;
    }
    RECENT.with_borrow_mut(|r| {
        let i = r.next;
        r.next = (i + 1) % KEPT;
        r.schemes[i] = Some(scheme);
        r.lens[i] = len;
        r.names[i][..name.len()].copy_from_slice(name);
        r.hashes[i] = h;
    });
}

/// `name`'s hash under `scheme`, if this thread kept it.
pub(crate) fn recall(scheme: KeyHash, name: &[u8]) -> Option<u32> {
    if name.len() > NAME {
        return None;
    }
    RECENT.with_borrow(|r| {
        (0..KEPT)
            .find(|&i| {
                usize::from(r.lens[i]) == name.len()
                    && r.schemes[i] == Some(scheme)
                    && &r.names[i][..name.len()] == name
            })
            .map(|i| r.hashes[i])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant (with `KEPT` = 4): a recalled hash is the one kept for that scheme and
    /// name; other schemes, other names, long names and entries pushed
    /// out by newer ones are not recalled.
    #[test]
    fn recalls_only_what_it_kept() {
        assert_eq!(KEPT, 4);
        let (a, b) = (b"uid:sign:1:202611".as_slice(), b"uid:sign:2:202611".as_slice());
        remember(KeyHash::Slot, a, 7);
        assert_eq!(recall(KeyHash::Slot, a), Some(7));
        assert_eq!(recall(KeyHash::Murmur, a), None);
        assert_eq!(recall(KeyHash::Slot, b), None);
        assert_eq!(recall(KeyHash::Slot, &a[..a.len() - 1]), None);
        let long = [b'k'; NAME + 1];
        remember(KeyHash::Slot, &long, 9);
        assert_eq!(recall(KeyHash::Slot, &long), None);
        for i in 0..4u32 {
            remember(KeyHash::Slot, &i.to_le_bytes(), i);
        }
        assert_eq!(recall(KeyHash::Slot, a), None, "pushed out by newer names");
        assert_eq!(recall(KeyHash::Slot, &1u32.to_le_bytes()), Some(1));
    }
}
