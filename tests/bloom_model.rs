//! Invariant: per-user Bloom filters (small ones kept inline, moving to
//! pages when their chain grows) answer every BF.ADD, BF.MADD, BF.EXISTS,
//! BF.INFO, COPY and DEL exactly as the same operations on a reference
//! database that is never flushed or reopened, while the database under
//! test runs with a tiny cache (so metadata folds and evictions happen
//! constantly) and is flushed and reopened in between; and no item ever
//! added is reported absent.

use std::collections::{BTreeMap, BTreeSet};

use bitsled::{BloomOptions, Config, Db};
use proptest::prelude::*;

const KEYS: [&[u8]; 4] = [b"user:1:seen", b"user:2:seen", b"user:3:seen", b"copy"];

#[derive(Clone, Debug)]
enum Op {
    /// BF.MADD of these item numbers (one item is BF.ADD).
    Add(usize, Vec<u16>),
    Exists(usize, Vec<u16>),
    Info(usize),
    Reserve(usize, u64),
    Copy(usize, usize),
    Delete(usize),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    prop_oneof![
        // One item takes the small filters' fast path (its change stored as
        // the bits it set); more take the general one.
        5 => (k.clone(), 0u16..600).prop_map(|(k, i)| Op::Add(k, vec![i])),
        5 => (k.clone(), proptest::collection::vec(0u16..600, 2..80)).prop_map(|(k, i)| Op::Add(k, i)),
        3 => (k.clone(), proptest::collection::vec(0u16..1200, 1..40)).prop_map(|(k, i)| Op::Exists(k, i)),
        1 => k.clone().prop_map(Op::Info),
        1 => (k.clone(), prop_oneof![Just(20u64), Just(100), Just(300), Just(5000)]).prop_map(|(k, c)| Op::Reserve(k, c)),
        1 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Copy(a, b)),
        1 => k.prop_map(Op::Delete),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

fn item(i: u16) -> Vec<u8> {
    format!("news:{i}").into_bytes()
}

fn open_small(dir: &std::path::Path) -> Db {
    Config::new(dir).cache_bytes(32 << 10).dirty_bytes(16 << 10).open().unwrap()
}

/// Runs `op` on `db`; the reply as text (errors included), to compare.
fn apply(db: &Db, op: &Op) -> String {
    match op {
        Op::Add(k, items) if items.len() == 1 => {
            format!("{:?}", db.bloom(KEYS[*k]).add(item(items[0])).map(|a| vec![a]))
        }
        Op::Add(k, items) => {
            let items: Vec<Vec<u8>> = items.iter().map(|&i| item(i)).collect();
            format!("{:?}", db.bloom(KEYS[*k]).add_many(&items))
        }
        Op::Exists(k, items) => {
            let items: Vec<Vec<u8>> = items.iter().map(|&i| item(i)).collect();
            format!("{:?}", db.bloom(KEYS[*k]).contains_many(&items))
        }
        Op::Info(k) => format!("{:?}", db.bloom(KEYS[*k]).info().map(|i| i.map(|i| (i.capacity, i.filters, i.items)))),
        Op::Reserve(k, c) => format!("{:?}", db.bloom(KEYS[*k]).reserve(0.01, *c, BloomOptions::default())),
        Op::Copy(a, b) => format!("{:?}", db.copy(KEYS[*a], KEYS[*b], true)),
        Op::Delete(k) => format!("{:?}", db.delete(KEYS[*k])),
        Op::Flush | Op::Reopen => String::new(),
    }
}

fn check(ops: &[Op]) {
    let (dir, ref_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let reference = Db::open(ref_dir.path()).unwrap();
    let mut db = Some(open_small(dir.path()));
    // Items each key has been given since it was last created.
    let mut added: BTreeMap<usize, BTreeSet<u16>> = BTreeMap::new();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Flush => db.as_ref().unwrap().flush().unwrap(),
            Op::Reopen => {
                drop(db.take());
                db = Some(open_small(dir.path()));
            }
            _ => {
                let got = apply(db.as_ref().unwrap(), op);
                let want = apply(&reference, op);
                assert_eq!(got, want, "step {step}: {op:?}");
                match op {
                    Op::Add(k, items) if got.starts_with("Ok") => added.entry(*k).or_default().extend(items),
                    Op::Copy(a, b) if got == "Ok(true)" && a != b => {
                        let from = added.get(a).cloned().unwrap_or_default();
                        added.insert(*b, from);
                    }
                    Op::Delete(k) => {
                        added.remove(k);
                    }
                    _ => {}
                }
            }
        }
    }
    let db = db.unwrap();
    for (k, items) in &added {
        let items: Vec<Vec<u8>> = items.iter().map(|&i| item(i)).collect();
        let answers = db.bloom(KEYS[*k]).contains_many(&items).unwrap();
        assert!(answers.iter().all(|&a| a), "an added item of {:?} is reported absent", KEYS[*k]);
    }
    db.flush().unwrap();
    let report = db.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn filters_match_the_reference(ops in proptest::collection::vec(op(), 1..40)) {
        check(&ops);
    }
}

/// The case the property is about, spelled out: a default filter grows
/// past its first sub-filter between a flush and a reopen.
#[test]
fn growth_across_a_reopen() {
    let mut ops = vec![Op::Add(0, (0..100).collect()), Op::Flush, Op::Reopen];
    ops.push(Op::Add(0, (100..400).collect()));
    ops.extend([Op::Reopen, Op::Info(0), Op::Exists(0, (0..800).collect())]);
    check(&ops);
}

/// Invariant: a small filter given items one BF.ADD at a time (each
/// changed where its bytes lie in the key's entry, or rewritten where the
/// item count's varint grows, at 128 items) holds the same bytes, item
/// count and answers as one given the same items in one BF.MADD (the
/// general path), before and after a flush and a reopen.
#[test]
fn one_item_additions_match_one_madd() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open_small(dir.path());
    let (single, many) = (&b"user:1:seen"[..], &b"user:2:seen"[..]);
    for key in [single, many] {
        db.bloom(key).reserve(0.01, 300, BloomOptions::default()).unwrap();
    }
    let items: Vec<Vec<u8>> = (0..250u16).map(item).collect();
    for (round, chunk) in items.chunks(50).enumerate() {
        for it in chunk {
            db.bloom(single).add(it).unwrap();
        }
        db.bloom(many).add_many(chunk).unwrap();
        if round % 2 == 1 {
            db.flush().unwrap();
            drop(db);
            db = open_small(dir.path());
        }
        let dump = |key: &[u8]| {
            let (mut iter, mut chunks) = (0, Vec::new());
            while let Some((next, chunk)) = db.bloom(key).scandump(iter).unwrap() {
                if next == 0 {
                    break;
                }
                chunks.push(chunk);
                iter = next;
            }
            assert!(chunks.len() >= 2, "a header and the bits");
            chunks
        };
        assert_eq!(dump(single), dump(many), "round {round}");
        let info = |key: &[u8]| db.bloom(key).info().unwrap().map(|i| (i.filters, i.items));
        assert_eq!(info(single), info(many), "round {round}");
        assert_eq!(info(single), Some((1, (round as u64 + 1) * 50)), "one sub-filter, every item counted");
    }
    let probes: Vec<Vec<u8>> = (0..600u16).map(item).collect();
    assert_eq!(db.bloom(single).contains_many(&probes).unwrap(), db.bloom(many).contains_many(&probes).unwrap());
    db.flush().unwrap();
    let report = db.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
