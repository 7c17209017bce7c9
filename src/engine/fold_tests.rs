//! Tests of metadata delta records and folds through the public API, with
//! the store opened directly (while the database is closed) to see which
//! records hold the metadata.

use super::layout;
use super::record;
use super::store::{SledStore, Store};
use crate::{Config, Db};

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

/// (delta records, their bytes, bucket records) in the closed store.
fn census(dir: &std::path::Path) -> (usize, usize, usize) {
    let store = SledStore::open(dir, 1 << 20).unwrap();
    let deltas: Vec<usize> = store.scan_prefix(&[layout::NS_DELTA]).map(|r| r.unwrap().1.len()).collect();
    let buckets = store.scan_prefix(&[layout::NS_BUCKET]).count();
    (deltas.len(), deltas.iter().sum(), buckets)
}

fn key(i: u64) -> Vec<u8> {
    format!("uid:sign:{i}:202611").into_bytes()
}

/// Invariant: a write-back stores a key's change as its own delta entry,
/// not as a rewritten bucket: 2,000 new small keys cost delta records of
/// about their entries' size and no bucket record; the next open replays
/// them (every key reads back), folds them into buckets and leaves no
/// delta record; verify is clean.
#[test]
fn key_changes_are_deltas_until_the_open_folds_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for i in 0..2000 {
        db.set_bits(&key(i), &[i % 30, 3], true).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let (deltas, bytes, buckets) = census(dir.path());
    assert_eq!(buckets, 0, "no bucket was rewritten");
    assert!(deltas > 0 && deltas <= 256, "one record per shard with changes: {deltas}");
    assert!(bytes < 2000 * 48, "about an entry per key: {bytes} bytes");
    let db = open(dir.path());
    assert_eq!(db.dbsize().unwrap(), 2000);
    for i in 0..2000 {
        assert!(db.getbit(&key(i), i % 30).unwrap() && db.getbit(&key(i), 3).unwrap(), "key {i}");
    }
    drop(db);
    let (deltas, _, buckets) = census(dir.path());
    assert_eq!(deltas, 0, "the open folded every delta");
    assert!(buckets > 0);
    let db = open(dir.path());
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.keys, 2000);
}

/// Invariant: deltas replay in write-back order: a key set, deleted, set
/// again, renamed, given an expiry and then persisted across separate
/// write-backs ends in its last state after a reopen; a deleted key stays
/// deleted even when an older delta sets it.
#[test]
fn deltas_replay_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.set(b"a", b"first").unwrap();
    db.set(b"gone", b"x").unwrap();
    db.flush().unwrap();
    db.delete(b"a").unwrap();
    db.delete(b"gone").unwrap();
    db.flush().unwrap();
    db.set(b"a", b"second, and longer than sixty-four bytes so that it is paged: ................").unwrap();
    db.rename(b"a", b"b", false).unwrap();
    db.flush().unwrap();
    db.set(b"a", b"third").unwrap();
    db.flush().unwrap();
    drop(db);
    assert!(census(dir.path()).0 >= 4, "four write-backs left their deltas");
    let db = open(dir.path());
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"third"[..]));
    assert!(db.get(b"b").unwrap().unwrap().starts_with(b"second"));
    assert_eq!(db.get(b"gone").unwrap(), None);
    assert_eq!(db.dbsize().unwrap(), 2);
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Invariant: with a metadata budget far below the keys' buckets, folds
/// run while keys load (buckets are written, deltas retired) and pinned
/// buckets stay near the budget; every key reads back before and after a
/// reopen, and verify is clean.
#[test]
fn folds_keep_pinned_buckets_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let cache: u64 = 512 << 10;
    // The metadata budget: seven eighths of the cache while no page is
    // cached.
    let budget = cache / 8 * 7;
    let cfg = || Config::new(dir.path()).flush_interval(None).cache_bytes(cache).dirty_bytes(64 << 10);
    let db = cfg().open().unwrap();
    let mut peak = 0;
    for i in 0..30_000 {
        db.set_bits(&key(i), &[i % 30], true).unwrap();
        if i % 1000 == 0 {
            peak = peak.max(db.memory_stats().dirty_metadata_bytes);
        }
    }
    // Past the budget plus `dirty_bytes` the writer folds itself.
    assert!(peak <= budget + (64 << 10) + (16 << 10), "pinned metadata peaked at {peak} bytes");
    for i in (0..30_000).step_by(7) {
        assert!(db.getbit(&key(i), i % 30).unwrap(), "key {i}");
    }
    db.flush().unwrap();
    drop(db);
    let (_, _, buckets) = census(dir.path());
    assert!(buckets > 0, "folds wrote buckets while loading");
    let db = cfg().open().unwrap();
    assert_eq!(db.dbsize().unwrap(), 30_000);
    for i in (0..30_000).step_by(7) {
        assert!(db.getbit(&key(i), i % 30).unwrap(), "key {i} after reopen");
    }
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Invariant: a FLUSHALL's write-back folds every shard, so the reclaimer
/// finds every value the flushed keys held in their stored buckets: no
/// page is left without a key.
#[test]
fn a_flush_of_the_keyspace_folds_so_nothing_leaks() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for i in 0..300 {
        // Paged values (longer than 64 bytes) whose ids are only in deltas.
        db.set_bits(&key(i), &[i * 1000 + 70_000], true).unwrap();
    }
    db.flush().unwrap();
    db.flush_all().unwrap();
    db.flush().unwrap();
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.pages, 0, "every page of the flushed keys was reclaimed");
}

/// Invariant: a format 5 store whose delta records are of version 1
/// (whole names) opens under this build: its records replay (a key set
/// and a key removed only there read so), the superblock becomes the
/// current format, and the deltas written from then on are of version 2.
#[test]
fn format_5_deltas_of_version_1_replay() {
    use super::delta::{encode_v1, Change, DeltaEntry};
    use super::layout::{key_hash, shard_of};
    use super::record::{Kind, Meta};
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for i in 0..200 {
        db.set_bits(&key(i), &[i % 30], true).unwrap();
    }
    assert!(db.verify().unwrap().is_ok(), "verify folds everything");
    drop(db);
    // A removal of key 0 and a new inline key, in one version 1 record of
    // key 0's shard.
    let shard = shard_of(key_hash(&key(0)));
    let mut name = b"from-v1:".to_vec();
    let mut n = 0u32;
    while shard_of(key_hash(&name)) != shard {
        n += 1;
        name = format!("from-v1:{n}").into_bytes();
    }
    let mut meta = Meta::empty(Kind::String);
    meta.inline[..1].copy_from_slice(&[0x80]);
    meta.len = 1;
    meta.ones = 1;
    let entries = vec![
        DeltaEntry { ks: 0, name: key(0), change: Change::Removed },
        DeltaEntry { ks: 0, name: name.clone(), change: Change::Entry(meta) },
    ];
    {
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        store
            .apply(vec![
                (layout::superblock_key(), Some(record::encode_superblock_of(record::FORMAT_V5))),
                (layout::delta_key(u8::try_from(shard).unwrap(), 1, 0).to_vec(), Some(encode_v1(&entries))),
            ])
            .unwrap();
        store.sync().unwrap();
    }
    let db = open(dir.path());
    assert!(!db.exists(&key(0)).unwrap(), "the version 1 removal applied");
    assert!(db.getbit(&name, 0).unwrap(), "the version 1 entry applied");
    for i in 1..200 {
        assert!(db.getbit(&key(i), i % 30).unwrap(), "key {i}");
    }
    db.set_bits(b"after", &[3], true).unwrap();
    db.flush().unwrap();
    drop(db);
    let store = SledStore::open(dir.path(), 1 << 20).unwrap();
    let sb = store.get(&layout::superblock_key()).unwrap().unwrap();
    assert_eq!(record::check_superblock(&sb).unwrap(), record::FORMAT_VERSION);
    let versions: Vec<u8> = store.scan_prefix(&[layout::NS_DELTA]).map(|r| r.unwrap().1[0]).collect();
    assert!(!versions.is_empty() && versions.iter().all(|&v| v == 3), "{versions:?}");
}

/// Invariant: a format 3 store (complete buckets, no deltas), a format 4
/// store (paged Bloom filters only), a format 5 store (version 1 deltas
/// only), a format 6 store (no Bloom bit changes), a format 7 store (no
/// page deltas) and a format 8 store (no run lists) open under this build:
/// the superblock becomes the current format and every key reads back.
#[test]
fn format_3_to_8_stores_open_as_current() {
    let versions = [
        record::FORMAT_V3,
        record::FORMAT_V4,
        record::FORMAT_V5,
        record::FORMAT_V6,
        record::FORMAT_V7,
        record::FORMAT_V8,
    ];
    for version in versions {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        for i in 0..500 {
            db.set_bits(&key(i), &[i % 30], true).unwrap();
        }
        // Paged in every format: too large to keep inline.
        db.bloom(b"seen").reserve(0.01, 10_000, crate::BloomOptions::default()).unwrap();
        db.bloom(b"seen").add(b"a").unwrap();
        assert!(db.verify().unwrap().is_ok(), "verify folds everything");
        drop(db);
        {
            let store = SledStore::open(dir.path(), 1 << 20).unwrap();
            assert!(store.scan_prefix(&[layout::NS_DELTA]).next().is_none(), "buckets are complete");
            store.apply(vec![(layout::superblock_key(), Some(record::encode_superblock_of(version)))]).unwrap();
            store.sync().unwrap();
        }
        let db = open(dir.path());
        for i in 0..500 {
            assert!(db.getbit(&key(i), i % 30).unwrap(), "format {version}: key {i}");
        }
        assert!(db.bloom(b"seen").contains(b"a").unwrap(), "format {version}");
        drop(db);
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        let sb = store.get(&layout::superblock_key()).unwrap().unwrap();
        assert_eq!(record::check_superblock(&sb).unwrap(), record::FORMAT_VERSION);
    }
}

/// The inline bytes and expiry of every key in `keys` (`None`: missing).
fn small_values(db: &Db, keys: &[Vec<u8>]) -> Vec<Option<(Vec<u8>, u64)>> {
    keys.iter()
        .map(|k| {
            let meta = db.engine.read(0, &[&k[..]], |tx| tx.meta(k)).unwrap();
            meta.map(|m| (m.inline_value().to_vec(), m.expire_at_ms))
        })
        .collect()
}

/// The changes the closed store's delta records hold: (Bloom bit
/// changes, whole entries, removals).
fn delta_kinds(dir: &std::path::Path) -> (usize, usize, usize) {
    use super::delta::{decode, Change};
    let store = SledStore::open(dir, 1 << 20).unwrap();
    let mut out = (0, 0, 0);
    for r in store.scan_prefix(&[layout::NS_DELTA]) {
        let (k, v) = r.unwrap();
        for e in decode(crate::engine::layout::KeyHash::NEW, usize::from(k[1]), "test", &v).unwrap() {
            match e.change {
                Change::BloomBits { .. } => out.0 += 1,
                Change::Entry(_) => out.1 += 1,
                Change::Removed => out.2 += 1,
            }
        }
    }
    out
}

/// Invariant: an item added to a small Bloom filter whose entry the store
/// already holds is written as the bits it set (a delta record of Bloom
/// bit changes), and an open that replays those records rebuilds every
/// filter byte for byte, expiry included. Any other change to such a
/// filter in the same write-back (an expiry, a removal, a removal and a
/// new filter, a rename) writes the whole entry or the removal instead,
/// and replays to what the database held.
#[test]
fn bloom_items_are_stored_as_their_bits_and_replay_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let users: Vec<Vec<u8>> = (0..300).map(|u| format!("user:{u}:seen").into_bytes()).collect();
    let item = |u: usize, round: usize| format!("news:{}", u * 31 + round * 7919).into_bytes();
    for (u, k) in users.iter().enumerate() {
        db.bloom(k).add(item(u, 0)).unwrap();
    }
    db.flush().unwrap();
    let mut names = users.clone();
    names.push(b"renamed".to_vec());
    for round in 1..6 {
        for (u, k) in users.iter().enumerate() {
            if round > 3 && [2, 5].contains(&u) {
                continue;
            }
            db.bloom(k).add(item(u, round)).unwrap();
            // Two items to some filters in one write-back.
            if u % 3 == 0 {
                db.bloom(k).add(item(u + 1000, round)).unwrap();
            }
        }
        if round == 2 {
            // New keys among the filters while their bits are pending, in
            // the same buckets: their entries are written whole beside
            // the filters' bits.
            for i in 0..4000u64 {
                db.set_bits(&key(i), &[i % 30], true).unwrap();
            }
        }
        if round == 3 {
            // Changes after the additions, in the same write-back.
            db.expire_at(&users[1], 4_000_000_000_000, crate::ExpireCondition::Always).unwrap();
            db.delete(&users[2]).unwrap();
            db.delete(&users[4]).unwrap();
            db.bloom(&users[4]).add(b"again").unwrap();
            assert!(db.rename(&users[5], b"renamed", false).unwrap());
        }
        db.flush().unwrap();
    }
    let before = small_values(&db, &names);
    let present: Vec<bool> = [0, 2, 4, 5, 300].iter().map(|&i| before[i].is_some()).collect();
    assert_eq!(present, [true, false, true, false, true]);
    drop(db);
    let (bits, whole, removed) = delta_kinds(dir.path());
    assert!(bits >= 4 * 290, "{bits} Bloom bit changes, {whole} whole entries, {removed} removals");
    assert!(whole >= 300 && removed >= 2, "{bits} Bloom bit changes, {whole} whole entries, {removed} removals");
    let db = open(dir.path());
    let after = small_values(&db, &names);
    let differ: Vec<usize> = (0..names.len()).filter(|&i| after[i] != before[i]).collect();
    assert!(differ.is_empty(), "the replayed filters differ at {differ:?}");
    for (u, k) in users.iter().enumerate().filter(|&(u, _)| ![2, 4, 5].contains(&u)) {
        assert!(db.bloom(k).contains(item(u, 5)).unwrap(), "user {u}");
        assert_eq!(db.bloom(k).card().unwrap(), if u % 3 == 0 { 11 } else { 6 }, "user {u}");
    }
    for i in (0..4000u64).step_by(97) {
        assert!(db.getbit(&key(i), i % 30).unwrap(), "key {i}");
    }
    assert!(db.verify().unwrap().is_ok());
}
