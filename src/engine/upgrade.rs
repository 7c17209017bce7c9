//! Upgrading older stores, at open.
//!
//! A format 2 store is a format 3 store without page groups, a format 3
//! store a format 4 store without metadata delta records, a format 4 store
//! a format 5 store without inline Bloom filters, and a format 5 store a
//! format 6 store whose delta records are all of version 1: their upgrade
//! rewrites the superblock ([`to_current`]).
//!
//! Format 1 kept one metadata record per key (`0x01 | name`) and expiry
//! index entries without a keyspace; format 2 keeps metadata in buckets and
//! has databases. Pages, reclaim markers and the sequence record are the
//! same in both. The upgrade:
//!
//! 1. deletes any bucket and expiry index record (leftovers of an upgrade
//!    cut short: both are rebuilt from the format 1 records, which are
//!    still all there);
//! 2. writes every key into the buckets of database 0;
//! 3. in one batch, writes the catalog and the format 4 superblock: the
//!    commit point (a crash before it leaves a format 1 store, upgraded
//!    again at the next open);
//! 4. deletes the format 1 records (a crash in between leaves some, which
//!    the next open deletes: [`remove_v1_leftovers`]).
//!
//! The keys are held in memory while the buckets are built.

use std::collections::BTreeMap;

use super::bucket::{bucket_start, Bucket, MIN_DEPTH};
use super::layout::{self, KeyHash};
use super::record::{self, decode_meta_v1, Catalog, DbRecord};
use super::store::{Store, Write};
use crate::error::Result;

/// Records per batch.
const BATCH: usize = 1024;

fn apply_in_batches(store: &dyn Store, writes: impl IntoIterator<Item = Write>) -> Result<()> {
    let mut batch = Vec::with_capacity(BATCH);
    for w in writes {
        batch.push(w);
        if batch.len() == BATCH {
            store.apply(std::mem::take(&mut batch))?;
        }
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok(())
}

/// Keys of every record under namespace `ns`.
fn keys_under(store: &dyn Store, ns: u8) -> Result<Vec<Vec<u8>>> {
    store.scan_prefix(&[ns]).map(|r| r.map(|(k, _)| k.to_vec())).collect()
}

/// Deletes the expiry index records (`0x04`) that builds before the
/// in-memory expiry regions wrote (any format up to 5 may hold them; a
/// build that reads them no longer exists, and nothing else depends on
/// them, so the format version stays). Cheap when there are none.
///
/// # Errors
/// A store error.
pub(super) fn remove_expiry_index(store: &dyn Store) -> Result<()> {
    apply_in_batches(store, keys_under(store, layout::NS_EXPIRY)?.into_iter().map(|k| (k, None)))
}

/// Upgrades the format 1 store `store` to format 4 (see the module's
/// steps). Database 0 of `databases` gets the keys.
///
/// # Errors
/// [`crate::Error::Corrupted`] if a format 1 record does not decode
/// (nothing is changed then but the leftovers of step 1); a store error.
pub(super) fn from_v1(store: &dyn Store, databases: u16) -> Result<()> {
    // 1.
    let stale: Vec<Vec<u8>> =
        keys_under(store, layout::NS_BUCKET)?.into_iter().chain(keys_under(store, layout::NS_EXPIRY)?).collect();
    apply_in_batches(store, stale.into_iter().map(|k| (k, None)))?;
    // 2.
    let mut regions: BTreeMap<u32, Bucket> = BTreeMap::new();
    let mut counts = DbRecord { keyspace: 0, ..DbRecord::default() };
    for r in store.scan_prefix(&[layout::NS_META_V1]) {
        let (k, v) = r?;
        let Some(name) = layout::name_of_meta_v1_key(&k) else { continue };
        let meta = decode_meta_v1(name, &v)?;
        counts.keys += 1;
        if meta.expire_at_ms != 0 {
            counts.expires += 1;
            counts.expire_secs += meta.expire_at_ms / 1000;
        }
        let region = bucket_start(KeyHash::NEW.of(name), MIN_DEPTH);
        regions.entry(region).or_insert_with(|| Bucket::new(MIN_DEPTH)).put(KeyHash::NEW, name, &meta);
    }
    let buckets = regions
        .into_iter()
        .flat_map(|(start, b)| b.partition(KeyHash::NEW, start))
        .map(|(start, b)| (layout::bucket_key(0, start).to_vec(), Some(b.encode())));
    apply_in_batches(store, buckets)?;
    // 3.
    let mut catalog = Catalog::new(databases);
    catalog.dbs[0] = counts;
    store.apply(vec![
        (layout::catalog_key(), Some(catalog.encode())),
        (layout::superblock_key(), Some(record::encode_superblock())),
    ])?;
    // 4.
    remove_v1_leftovers(store)
}

/// Upgrades the format 2 or 3 store `store` to format 4: format 4 reads
/// every format 2 and 3 record as it is (a page record stays valid and
/// pages join their groups when next written; buckets are complete, with
/// no delta records beside them), so only the superblock changes.
///
/// # Errors
/// A store error.
pub(super) fn to_current(store: &dyn Store) -> Result<()> {
    store.apply(vec![(layout::superblock_key(), Some(record::encode_superblock()))])
}

/// Deletes format 1 metadata records left by an upgrade cut short after
/// its commit point.
pub(super) fn remove_v1_leftovers(store: &dyn Store) -> Result<()> {
    apply_in_batches(store, keys_under(store, layout::NS_META_V1)?.into_iter().map(|k| (k, None)))
}

#[cfg(test)]
mod tests {
    use super::super::record::{encode_meta_v1, encode_sequence, encode_superblock_of, Kind, Meta, FORMAT_V1};
    use super::super::store::SledStore;
    use super::*;
    use crate::page::Page;
    use crate::{Config, Expiry};

    /// A format 1 store: `n` keys `k<i>` holding bit `i` (paged, one page
    /// each), `k0` with an expiry and its format 1 index entry, plus a
    /// leftover bucket of an upgrade cut short.
    fn v1_store(dir: &std::path::Path, n: u64, expire_at: u64) {
        let store = SledStore::open(dir, 1 << 20).unwrap();
        let mut w: Vec<Write> = vec![
            (layout::superblock_key(), Some(encode_superblock_of(FORMAT_V1))),
            (layout::sequence_key(), Some(encode_sequence(3))),
            (layout::bucket_key(0, 0x4200_0000).to_vec(), Some(b"half-written".to_vec())),
        ];
        for i in 0..n {
            let name = format!("k{i}").into_bytes();
            let id = 1000 + i;
            let exp = if i == 0 { expire_at } else { 0 };
            let meta = Meta::paged(Kind::String, id, i / 8 + 1, 1, exp);
            let mut k = vec![layout::NS_META_V1];
            k.extend_from_slice(&name);
            w.push((k, Some(encode_meta_v1(&meta))));
            let mut bytes = vec![0u8; usize::try_from(i / 8 + 1).unwrap()];
            bytes[usize::try_from(i / 8).unwrap()] = 0x80 >> (i % 8);
            w.push((layout::page_key(id, 0).to_vec(), Some(Page::from_bytes(&bytes).encode())));
            if exp != 0 {
                let mut k = vec![layout::NS_EXPIRY];
                k.extend_from_slice(&exp.to_be_bytes());
                k.extend_from_slice(&name);
                w.push((k, Some(Vec::new())));
            }
        }
        store.apply(w).unwrap();
        store.sync().unwrap();
    }

    /// Invariant: opening a format 1 store upgrades it: every key keeps its
    /// value, length, count and expiry in database 0 (small values become
    /// inline), DBSIZE counts them, verify is clean, no format 1 record or
    /// leftover bucket remains, and the store reopens as format 4.
    #[test]
    fn format_1_stores_are_upgraded_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let later = 4_000_000_000_000;
        v1_store(dir.path(), 300, later);
        for round in 0..2 {
            let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
            assert_eq!(db.dbsize().unwrap(), 300, "round {round}");
            assert_eq!(db.counts().unwrap().expires, 1);
            for i in 0..300u64 {
                let k = format!("k{i}").into_bytes();
                assert!(db.getbit(&k, i).unwrap(), "k{i}");
                assert_eq!(db.bitcount(&k, None).unwrap(), 1);
                assert_eq!(db.strlen(&k).unwrap(), i / 8 + 1);
            }
            assert_eq!(db.expiry(b"k0").unwrap(), Expiry::At(later));
            let report = db.verify().unwrap();
            assert!(report.is_ok(), "round {round}: {:?}", report.problems);
            assert_eq!(report.keys, 300);
            drop(db);
            let store = SledStore::open(dir.path(), 1 << 20).unwrap();
            assert!(store.scan_prefix(&[layout::NS_META_V1]).next().is_none(), "format 1 records are gone");
            assert!(store.scan_prefix(&[layout::NS_EXPIRY]).next().is_none(), "expiry index records are gone");
            assert!(store.get(&layout::bucket_key(0, 0x4200_0000)).unwrap().is_none_or(|b| b != "half-written"));
            let sb = store.get(&layout::superblock_key()).unwrap().unwrap();
            assert_eq!(record::check_superblock(&sb).unwrap(), record::FORMAT_VERSION);
        }
    }

    /// Invariant: the expiry index records earlier builds wrote are
    /// deleted at open, and the keys they named keep their expiries (the
    /// sweeper finds them without the index).
    #[test]
    fn expiry_index_records_of_earlier_builds_are_deleted_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let at = 4_000_000_000_000u64;
        {
            let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
            db.set(b"s", b"v").unwrap();
            assert!(db.expire_at(b"s", at, crate::ExpireCondition::Always).unwrap());
            db.flush().unwrap();
        }
        {
            let store = SledStore::open(dir.path(), 1 << 20).unwrap();
            let mut k = vec![layout::NS_EXPIRY];
            k.extend_from_slice(&at.to_be_bytes());
            k.extend_from_slice(&0u32.to_be_bytes());
            k.extend_from_slice(b"s");
            store.apply(vec![(k, Some(Vec::new()))]).unwrap();
            store.sync().unwrap();
        }
        let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
        assert_eq!(db.expiry(b"s").unwrap(), Expiry::At(at));
        drop(db);
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        assert!(store.scan_prefix(&[layout::NS_EXPIRY]).next().is_none());
    }
}
