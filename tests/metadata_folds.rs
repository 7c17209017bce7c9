//! Invariant: with a cache smaller than the keys' metadata (4,000 keys'
//! buckets against a 64 KiB cache: a run folds shards in about 1,600
//! write-back steps, about 90 of them under memory pressure, and evicts
//! and reloads clean buckets, besides the folds of each reopen), every
//! key's value, length and expiry equals a plain map's
//! after random sets, bit writes, deletes, renames, expiries and persists,
//! with flushes and reopens in between; DBSIZE matches and verify is clean.
//! Randomised: prints its seed (`METADATA_FOLDS_SEED` replays one).

use std::collections::BTreeMap;

use bitsled::{Config, Db, ExpireCondition, Expiry};
use rand::{Rng, SeedableRng};

/// Far in the future: expiries never pass during the test.
const LATER: u64 = 4_102_444_800_000;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Value {
    bytes: Vec<u8>,
    expire_at: Option<u64>,
}

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).cache_bytes(64 << 10).dirty_bytes(16 << 10).open().unwrap()
}

fn name(i: u64) -> Vec<u8> {
    format!("user:{i}:seen").into_bytes()
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Value>, keys: u64, when: &str) {
    for i in 0..keys {
        let k = name(i);
        let want = model.get(&k);
        assert_eq!(db.get(&k).unwrap(), want.map(|v| v.bytes.clone()), "{when}: value of key {i}");
        let expiry = db.expiry(&k).unwrap();
        match want {
            None => assert_eq!(expiry, Expiry::Missing, "{when}: key {i}"),
            Some(Value { expire_at: Some(at), .. }) => assert_eq!(expiry, Expiry::At(*at), "{when}: key {i}"),
            Some(_) => assert_eq!(expiry, Expiry::Never, "{when}: key {i}"),
        }
    }
    assert_eq!(db.dbsize().unwrap(), model.len() as u64, "{when}: DBSIZE");
}

#[test]
fn metadata_survives_constant_folds_and_reopens() {
    let seed: u64 = std::env::var("METADATA_FOLDS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    println!("METADATA_FOLDS_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let keys = 4000;
    let mut model: BTreeMap<Vec<u8>, Value> = BTreeMap::new();
    let mut db = open(dir.path());
    for step in 0..40_000u32 {
        let k = name(rng.gen_range(0..keys));
        match rng.gen_range(0..100) {
            0..=39 => {
                let day = rng.gen_range(0..31u64);
                db.setbit(&k, day, true).unwrap();
                let v = model.entry(k).or_insert(Value { bytes: Vec::new(), expire_at: None });
                let byte = usize::try_from(day / 8).unwrap();
                if v.bytes.len() <= byte {
                    v.bytes.resize(byte + 1, 0);
                }
                v.bytes[byte] |= 0x80 >> (day % 8);
            }
            40..=59 => {
                // Short values stay inline; some pass 64 bytes and are paged.
                let len = if rng.gen_bool(0.1) { rng.gen_range(65..200) } else { rng.gen_range(1..20) };
                let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                db.set(&k, &bytes).unwrap();
                model.insert(k, Value { bytes, expire_at: None });
            }
            60..=71 => {
                assert_eq!(db.delete(&k).unwrap(), model.remove(&k).is_some(), "step {step}");
            }
            72..=79 => {
                let to = name(rng.gen_range(0..keys));
                let r = db.rename(&k, &to, false);
                match model.remove(&k) {
                    Some(v) => {
                        assert!(r.is_ok(), "step {step}: {r:?}");
                        model.insert(to, v);
                    }
                    None => assert!(r.is_err(), "step {step}: rename of a missing key"),
                }
            }
            80..=89 => {
                let at = LATER + rng.gen_range(0..1_000_000);
                let done = db.expire_at(&k, at, ExpireCondition::Always).unwrap();
                assert_eq!(done, model.contains_key(&k), "step {step}");
                if let Some(v) = model.get_mut(&k) {
                    v.expire_at = Some(at);
                }
            }
            90..=95 => {
                let had = model.get(&k).is_some_and(|v| v.expire_at.is_some());
                assert_eq!(db.persist(&k).unwrap(), had, "step {step}");
                if let Some(v) = model.get_mut(&k) {
                    v.expire_at = None;
                }
            }
            96..=97 => db.flush().unwrap(),
            _ => {
                drop(db);
                db = open(dir.path());
            }
        }
    }
    check(&db, &model, keys, "before the last reopen");
    drop(db);
    let db = open(dir.path());
    check(&db, &model, keys, "after the last reopen");
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.keys, model.len() as u64);
}
