//! Tests of the slot order of the key hash (DESIGN.md section 3, "The key
//! hash"): a slot's scan finds exactly its keys, in stores of this format
//! and in stores created before it, whose Murmur order they keep.

use std::collections::{BTreeMap, BTreeSet};

use super::bucket::Bucket;
use super::layout::{self, KeyHash};
use super::record::{self, Catalog};
use super::store::{SledStore, Store};
use crate::slot::key_slot;
use crate::{Config, Db, ExpireCondition};

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).cache_bytes(1 << 20).open().unwrap()
}

/// Names of both kinds users give: plain ones spread over the slots, and
/// hash-tagged ones (`{r7}:...`) that crowd a few slots, enough for their
/// buckets to split well below a slot's range.
fn names(n: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 3 {
            0 => format!("uid:sign:{i}:202611"),
            1 => format!("login:{{r{}}}:{i}", i % 7),
            _ => format!("bf:{{u{i}}}:seen"),
        })
        .map(String::into_bytes)
        .collect()
}

/// The keys [`Db::scan_slot`] returns for `slot`, walked `count` at a time.
fn scanned(db: &Db, slot: u16, count: usize) -> BTreeSet<Vec<u8>> {
    let (mut out, mut cursor, mut steps) = (BTreeSet::new(), 0, 0);
    loop {
        let (keys, next) = db.scan_slot(slot, cursor, count).unwrap();
        for k in keys {
            assert_eq!(key_slot(&k), slot, "{k:?} returned for slot {slot}");
            out.insert(k);
        }
        steps += 1;
        assert!(steps < 1_000_000, "the scan of slot {slot} does not end");
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

/// Invariant: for every slot that holds keys, and for empty slots next to
/// them and at both ends of the space, [`Db::scan_slot`] returns exactly
/// the live keys of that slot (a naive filter of all names is the model).
fn check_slots(db: &Db, live: &BTreeSet<Vec<u8>>, what: &str) {
    let mut model: BTreeMap<u16, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for k in live {
        model.entry(key_slot(k)).or_default().insert(k.clone());
    }
    let mut slots: BTreeSet<u16> = model.keys().copied().collect();
    slots.extend([0, 1, 16382, 16383]);
    slots.extend(model.keys().map(|s| s.saturating_add(1) % 16384));
    for slot in slots {
        let want = model.get(&slot).cloned().unwrap_or_default();
        for count in [1, 10, 1000] {
            assert_eq!(scanned(db, slot, count), want, "{what}: slot {slot}, count {count}");
        }
    }
}

/// Writes `names`, expires every tenth of them, and returns the live ones.
fn load(db: &Db, names: &[Vec<u8>]) -> BTreeSet<Vec<u8>> {
    let mut live = BTreeSet::new();
    for (i, k) in names.iter().enumerate() {
        db.set_bits(k, &[i as u64 % 40], true).unwrap();
        if i % 10 == 9 {
            db.expire_at(k, 1, ExpireCondition::Always).unwrap();
        } else {
            live.insert(k.clone());
        }
    }
    live
}

/// Invariant: a new store orders keys by slot; a slot's scan returns
/// exactly its keys while they sit in the cache (dirty buckets, splits),
/// after a write-back (delta records), and after a reopen (buckets read
/// from the store).
#[test]
fn slot_scans_find_exactly_the_slot_s_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    assert!(db.slots_indexed());
    let live = load(&db, &names(12_000));
    check_slots(&db, &live, "cached");
    db.flush().unwrap();
    check_slots(&db, &live, "written back");
    drop(db);
    let db = open(dir.path());
    check_slots(&db, &live, "reopened");
    assert!(db.verify().unwrap().is_ok());
}

/// Invariant: a format 9 store (catalog version 2, buckets by Murmur hash)
/// opens under this build as format 10 and keeps hashing by Murmur: its
/// keys read back, new keys go where Murmur puts them (every bucket
/// decodes under Murmur and not all under the slot order), the catalog
/// records Murmur, slot scans fall back to a scan of every key and still
/// return exactly each slot's keys, and a compacted copy orders by slot.
#[test]
fn a_format_9_store_keeps_its_murmur_order() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        let catalog = Catalog { key_hash: KeyHash::Murmur, ..Catalog::new(16) };
        store
            .apply(vec![
                (layout::superblock_key(), Some(record::encode_superblock_of(record::FORMAT_V9))),
                (layout::catalog_key(), Some(catalog.encode_v2())),
            ])
            .unwrap();
        store.sync().unwrap();
    }
    let all = names(6_000);
    let (first, second) = all.split_at(3_000);
    let db = open(dir.path());
    assert!(!db.slots_indexed());
    let mut live = load(&db, first);
    db.flush().unwrap();
    drop(db);
    let db = open(dir.path());
    live.extend(load(&db, second));
    check_slots(&db, &live, "format 9 store");
    assert!(db.verify().unwrap().is_ok());
    let copy = dir.path().join("copy");
    db.compact_into(&copy).unwrap();
    drop(db);
    let store = SledStore::open(dir.path(), 1 << 20).unwrap();
    let sb = store.get(&layout::superblock_key()).unwrap().unwrap();
    assert_eq!(record::check_superblock(&sb).unwrap(), record::FORMAT_VERSION);
    let catalog = Catalog::decode(&store.get(&layout::catalog_key()).unwrap().unwrap()).unwrap();
    assert_eq!(catalog.key_hash, KeyHash::Murmur);
    let mut slot_order = true;
    for r in store.scan_prefix(&[layout::NS_BUCKET]) {
        let (k, v) = r.unwrap();
        let (ks, start) = layout::parse_bucket_key(&k).unwrap();
        Bucket::decode(KeyHash::Murmur, ks, start, &v).unwrap();
        slot_order &= Bucket::decode(KeyHash::Slot, ks, start, &v).is_ok();
    }
    assert!(!slot_order, "the buckets hold keys by their Murmur hash");
    drop(store);
    let copy = open(&copy);
    assert!(copy.slots_indexed(), "a compacted copy is a new store");
    check_slots(&copy, &live, "compacted copy");
}
