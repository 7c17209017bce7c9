//! HyperLogLog through the library: the stored bytes are Redis's (golden
//! values taken from Redis 7.0.15), estimates stay within the standard
//! error of an exact set, unions and merges agree, sketches survive a
//! reopen, expiries are kept, foreign and corrupt values are refused with
//! the right error, concurrent PFADDs lose nothing, and the fuzz check
//! (`bitsled::testing::check_hll_value`) holds on its seed corpus and on random
//! inputs.

use std::collections::HashSet;
use std::path::Path;

use bitsled::{Config, Db, Error};
use bitsled_redis::command::{execute, Reply};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn open(dir: &Path) -> Db {
    Config::new(dir).flush_interval(None).open().expect("open")
}

fn cmd(db: &Db, line: &[&[u8]]) -> Reply {
    execute(db, &line.iter().map(|a| a.to_vec()).collect::<Vec<_>>())
}

/// PFADD and PFCOUNT give Redis 7.0.15's exact bytes: the sparse opcodes
/// of three elements, the stale-cache bit, then the cached count; and
/// elements of every MurmurHash tail length land in Redis's registers.
#[test]
fn golden_bytes_from_redis() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    assert!(db.hll(b"g1").add(&["a", "b", "c"]).unwrap());
    let mut want = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80`\xf3\x80P\xb1\x84K\xfb\x80BZ".to_vec();
    assert_eq!(db.get(b"g1").unwrap(), Some(want.clone()));
    assert_eq!(db.hll(b"g1").count().unwrap(), 3);
    want[8] = 3;
    want[15] = 0;
    assert_eq!(db.get(b"g1").unwrap(), Some(want), "PFCOUNT caches the count in the value");

    db.hll(b"g2").add(&[&b""[..], b"x", b"0123456", b"01234567", b"012345678"]).unwrap();
    let want = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80BQ\x84T\xde\x84F\xbf\x88B\xff\x80_\0\x84\x08".to_vec();
    assert_eq!(db.get(b"g2").unwrap(), Some(want));
}

/// A new key is created even without elements, as an 18-byte empty
/// sketch; TYPE says string; PFCOUNT of a missing key is 0.
#[test]
fn create_empty_and_type() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    assert_eq!(db.hll(b"nope").count().unwrap(), 0);
    assert!(!db.exists(b"nope").unwrap(), "PFCOUNT does not create");
    assert!(db.hll(b"k").add::<&[u8]>(&[]).unwrap(), "creating is a change");
    assert!(!db.hll(b"k").add::<&[u8]>(&[]).unwrap());
    assert_eq!(db.strlen(b"k").unwrap(), 18);
    assert_eq!(cmd(&db, &[b"TYPE", b"k"]), Reply::Status("string".into()));
    assert_eq!(db.hll(b"k").count().unwrap(), 0);
}

/// Estimates of random sets stay within 5 standard errors (0.81% each) of
/// the exact distinct count; re-adding reports no change; PFCOUNT of
/// several keys equals PFCOUNT of their PFMERGE, and both are near the
/// exact union.
#[test]
fn estimates_unions_and_merges_match_exact_sets() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let seed = 0x411_u64;
    eprintln!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut exact: Vec<HashSet<u64>> = Vec::new();
    for (k, &n) in [10usize, 1000, 5000, 40_000].iter().enumerate() {
        let key = format!("s{k}");
        let elems: Vec<u64> = (0..n).map(|_| rng.gen_range(0..60_000)).collect();
        let set: HashSet<u64> = elems.iter().copied().collect();
        let bytes: Vec<Vec<u8>> = elems.iter().map(|e| e.to_le_bytes().to_vec()).collect();
        for chunk in bytes.chunks(97) {
            db.hll(key.as_bytes()).add(chunk).unwrap();
        }
        assert!(!db.hll(key.as_bytes()).add(&bytes).unwrap(), "re-adding the same set changes nothing");
        let est = db.hll(key.as_bytes()).count().unwrap() as f64;
        let truth = set.len() as f64;
        assert!((est - truth).abs() <= (truth * 0.0081 * 5.0).max(1.0), "{key}: estimate {est} for {truth}");
        exact.push(set);
    }
    let union: HashSet<u64> = exact.iter().flatten().copied().collect();
    let keys: Vec<&[u8]> = vec![b"s0", b"s1", b"s2", b"s3", b"missing"];
    let by_count = db.hll(keys[0]).count_with(&keys[1..]).unwrap();
    db.hll(b"all").merge_from(&keys).unwrap();
    assert_eq!(db.hll(b"all").count().unwrap(), by_count, "PFMERGE and PFCOUNT of several agree");
    let truth = union.len() as f64;
    assert!((by_count as f64 - truth).abs() <= truth * 0.0081 * 5.0, "union {by_count} for {truth}");
    // The union estimate did not touch its inputs' cached counts.
    let before = db.get(b"s1").unwrap();
    db.hll(b"s1").count_with(&[b"s2"]).unwrap();
    assert_eq!(db.get(b"s1").unwrap(), before);
}

/// Sketches, dense and sparse, come back identical after close and reopen.
#[test]
fn survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (sparse, dense, count) = {
        let db = open(dir.path());
        db.hll(b"sparse").add(&["x", "y"]).unwrap();
        let elems: Vec<String> = (0..20_000).map(|i| format!("u{i}")).collect();
        db.hll(b"dense").add(&elems).unwrap();
        let count = db.hll(b"dense").count().unwrap();
        db.flush().unwrap();
        (db.get(b"sparse").unwrap(), db.get(b"dense").unwrap(), count)
    };
    let db = open(dir.path());
    assert_eq!(db.get(b"sparse").unwrap(), sparse);
    assert_eq!(db.get(b"dense").unwrap(), dense);
    assert_eq!(dense.as_ref().map(Vec::len), Some(12_304));
    assert_eq!(db.hll(b"dense").count().unwrap(), count);
    assert!(db.hll(b"sparse").add(&["z"]).unwrap());
    assert_eq!(db.hll(b"sparse").count().unwrap(), 3);
}

/// PFADD, a PFCOUNT that writes its cache and PFMERGE keep the key's expiry.
#[test]
fn expiry_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.hll(b"k").add(&["a"]).unwrap();
    assert_eq!(cmd(&db, &[b"PEXPIRE", b"k", b"100000"]), Reply::Integer(1));
    db.hll(b"k").add(&["b"]).unwrap();
    db.hll(b"k").count().unwrap();
    db.hll(b"k").merge_from(&[b"other"]).unwrap();
    let Reply::Integer(ttl) = cmd(&db, &[b"PTTL", b"k"]) else { panic!("PTTL") };
    assert!(ttl > 0, "expiry kept, PTTL {ttl}");
}

/// Strings that are not sketches get `NotHyperLogLog` (Redis's WRONGTYPE
/// text through the command layer) and are not changed; a corrupt sparse
/// body gets `InvalidHyperLogLog` (INVALIDOBJ).
#[test]
fn foreign_and_corrupt_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.setbit(b"bits", 100, true).unwrap();
    let r = db.hll(b"bits").add(&["a"]);
    assert!(matches!(r, Err(Error::NotHyperLogLog { .. })), "{r:?}");
    assert_eq!(db.strlen(b"bits").unwrap(), 13, "unchanged");
    let r = db.hll(b"dest").merge_from(&[b"bits"]);
    assert!(matches!(r, Err(Error::NotHyperLogLog { .. })), "{r:?}");
    assert!(!db.exists(b"dest").unwrap(), "a failed PFMERGE creates nothing");
    assert_eq!(
        cmd(&db, &[b"PFCOUNT", b"bits"]),
        Reply::Error("WRONGTYPE Key is not a valid HyperLogLog string value.".into())
    );
    // Registers that stop short of 16,384.
    db.set(b"bad", b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xfe").unwrap();
    let r = db.hll(b"bad").count();
    assert!(matches!(r, Err(Error::InvalidHyperLogLog { .. })), "{r:?}");
    assert_eq!(cmd(&db, &[b"PFCOUNT", b"bad", b"k"]), Reply::Error("INVALIDOBJ Corrupted HLL object detected".into()));
    // SETBIT into a dense sketch keeps it a sketch (any bits are registers).
    let elems: Vec<String> = (0..10_000).map(|i| format!("d{i}")).collect();
    db.hll(b"d").add(&elems).unwrap();
    db.setbit(b"d", 200 * 8, true).unwrap();
    assert!(db.hll(b"d").count().is_ok());
    assert_eq!(cmd(&db, &[b"PFADD"]), Reply::Error("ERR wrong number of arguments for 'pfadd' command".into()));
}

/// Threads adding disjoint elements to one key at once lose nothing: the
/// result has the same registers (and, once dense, the same bytes) as the
/// same elements added by one thread.
#[test]
fn concurrent_adds_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let threads = 4;
    let per = 3000;
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..per {
                    db.hll(b"shared").add(&[format!("t{t}-{i}")]).unwrap();
                }
            });
        }
    });
    let all: Vec<String> = (0..threads).flat_map(|t| (0..per).map(move |i| format!("t{t}-{i}"))).collect();
    db.hll(b"serial").add(&all).unwrap();
    assert_eq!(db.hll(b"shared").count().unwrap(), db.hll(b"serial").count().unwrap());
    assert_eq!(db.get(b"shared").unwrap(), db.get(b"serial").unwrap());
}

/// The typed handle does what the `Db` methods do.
#[test]
fn handle() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let h = db.hll(b"h");
    assert!(h.add(&["1", "2"]).unwrap());
    db.hll(b"o").add(&["3"]).unwrap();
    h.merge_from(&[b"o"]).unwrap();
    assert_eq!(h.count().unwrap(), 3);
}

/// The fuzz check on every file of its seed corpus
/// (`fuzz/corpus/hll_decode/`) and on seeded random inputs: Ok or Err,
/// never a panic, and the invariants of `check_hll_value`.
#[test]
fn fuzz_check_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/hll_decode");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        bitsled::testing::check_hll_value(&std::fs::read(&path).unwrap());
        n += 1;
    }
    assert!(n > 0, "no seeds in {}", dir.display());
    let mut rng = StdRng::seed_from_u64(0x4d11);
    let base = {
        let d = tempfile::tempdir().unwrap();
        let db = open(d.path());
        let elems: Vec<String> = (0..300).map(|i| format!("{i}")).collect();
        db.hll(b"k").add(&elems).unwrap();
        db.get(b"k").unwrap().unwrap()
    };
    for _ in 0..300 {
        let mut data = vec![rng.gen::<u8>()];
        data.extend(&base);
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(1..data.len());
            data[at] = rng.gen();
        }
        data.truncate(rng.gen_range(1..=data.len()));
        bitsled::testing::check_hll_value(&data);
    }
}
