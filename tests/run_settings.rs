//! Settings changed while the database is open: the budgets
//! (`Db::set_budgets`) and the durability policy (`Db::set_durability`).

use bitsled::{Config, Durability};

/// Invariant: after the cache budget shrinks, the cached pages and
/// metadata are within the new budget (clean ones evicted, dirty ones
/// written back first), the reported budget is the new one, and every
/// value still reads back as written.
#[test]
fn a_smaller_budget_evicts_down_to_it_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).cache_bytes(64 << 20).dirty_bytes(32 << 20).flush_interval(None).open().unwrap();
    // 100 values of 80 KB of noise (about 20 dense pages each).
    let value = |k: u32| -> Vec<u8> {
        let mut x = u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..80_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    for k in 0..100u32 {
        db.set(format!("k{k}").as_bytes(), &value(k)).unwrap();
    }
    let before = db.memory_stats();
    assert!(before.page_cache_bytes > 4 << 20, "the pages are cached: {before:?}");
    let (cache, dirty) = (1 << 20, 256 << 10);
    db.set_budgets(cache, dirty).unwrap();
    let after = db.memory_stats();
    assert_eq!(after.budget_bytes, cache + dirty + bitsled::DEFAULT_STORE_CACHE_BYTES);
    assert!(
        after.page_cache_bytes + after.metadata_cache_bytes <= cache + (256 << 10),
        "cached bytes within the new budget (plus the pages just used): {after:?}"
    );
    for k in [0u32, 50, 99] {
        assert_eq!(db.get(format!("k{k}").as_bytes()).unwrap(), Some(value(k)));
    }
    // And back up: nothing is lost, the budget reads back.
    db.set_budgets(64 << 20, 32 << 20).unwrap();
    assert_eq!(db.memory_stats().budget_bytes, (96 << 20) + bitsled::DEFAULT_STORE_CACHE_BYTES);
}

/// Invariant: the policy read back is the one last set, whatever the
/// database was opened with.
#[test]
fn the_durability_policy_reads_back_as_set() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).durability(Durability::Lazy).open().unwrap();
    assert_eq!(db.durability(), Durability::Lazy);
    for d in [Durability::Always, Durability::EverySecond, Durability::Lazy, Durability::EverySecond] {
        db.set_durability(d);
        assert_eq!(db.durability(), d);
        db.clone().setbit(b"k", 1, true).unwrap();
    }
    assert!(db.getbit(b"k", 1).unwrap());
}
